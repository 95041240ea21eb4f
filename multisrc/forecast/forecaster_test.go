package forecast

import (
	"math"
	"testing"
)

func TestForecasterPicksLowestRecentMSE(t *testing.T) {
	ramp := make([]float64, 20) // 1, 2, ..., 20
	for i := range ramp {
		ramp[i] = float64(i + 1)
	}
	// Noise around 10: 60 tens, then 14 cycles of 12, 9, 9 (mean 10).
	noise := rep(60, 10)
	for range 14 {
		noise = append(noise, 12, 9, 9)
	}
	tests := []struct {
		name    string
		xs      []float64
		window  int
		wantBy  string
		want    float64
		wantMSE map[string]float64 // a few entries of MSE(), by hand
	}{
		{
			name: "one value: no error yet, last", xs: []float64{7},
			wantBy: "last", want: 7, wantMSE: map[string]float64{},
		},
		{
			// Every predictor is exact on a constant: all MSE 0, the tie
			// goes to the first in NWS order.
			name: "constant: tie, last", xs: rep(4, 4),
			wantBy: "last", want: 4, wantMSE: map[string]float64{"last": 0, "mean": 0, "adaptmedian": 0},
		},
		{
			// 5 5 5 5 5 9 9 9: all predicted 5 for the first 9 (error 16);
			// then last is exact while the others lag.
			// last: errors 0 0 0 0 16 0 0 over 7 forecasts: 16/7.
			// mean: 0 0 0 0, 16, then 9-34/6 = 10/3 and 9-43/7 = 20/7:
			//       (16 + 100/9 + 400/49)/7.
			name: "constant then a step: last", xs: []float64{5, 5, 5, 5, 5, 9, 9, 9},
			wantBy: "last", want: 9,
			wantMSE: map[string]float64{"last": 16.0 / 7, "mean": (16 + 100.0/9 + 400.0/49) / 7},
		},
		{
			// A ramp (a random walk that always steps +1): last is off by
			// exactly 1 every time; every other predictor lags further.
			// mean after t values is (t+1)/2, off by (t+1)/2 for the next;
			// the last 10 forecasts (t = 10..19) are off by 5.5, 6, ..., 10:
			// (30.25+36+42.25+49+56.25+64+72.25+81+90.25+100)/10 = 621.25/10.
			name: "ramp: last", xs: ramp, window: 10,
			wantBy: "last", want: 20,
			wantMSE: map[string]float64{"last": 1, "mean": 62.125},
		},
		{
			// Noise 12, 9, 9 around 10, scored over one cycle (window 3):
			// the forecasts of x100 = 12, x101 = 9, x102 = 9.
			// mean after 99 values = 990/99 = 10, off by 2;
			//      after 100: 1002/100 = 10.02, off by 1.02;
			//      after 101: 1011/101 = 10 + 1/101, off by 102/101:
			//      (4 + 1.02² + (102/101)²)/3 ≈ 2.0201.
			// last: 9 then 12 then 9, off by 3, 3, 0: (9+9+0)/3 = 6.
			// Any fixed guess g scores 2 + (g-10)² per cycle; the windowed
			// means, medians and smoothers are pulled toward the recent
			// values and the trimmed means toward the 9s, so they do worse
			// (slide31 ≈ 2.067 comes next). Forecast: 1020/102 = 10.
			name: "noise around a level: mean", xs: noise, window: 3,
			wantBy: "mean", want: 10,
			wantMSE: map[string]float64{
				"mean": (4 + 1.02*1.02 + (102.0/101)*(102.0/101)) / 3,
				"last": 6,
			},
		},
		{
			// Only the last `window` errors count. On 1 100 1 1 1 1 every
			// predictor was off by 99 on the spike; last was off by 99 again
			// when it left (errors 99² 99² 0 0 0), the medians by 49.5 then
			// 0 0 0. Window 2 sees only the 0s of last and the medians: a
			// tie, last first.
			name: "window forgets", xs: []float64{1, 100, 1, 1, 1, 1}, window: 2,
			wantBy: "last", want: 1, wantMSE: map[string]float64{"last": 0, "median5": 0},
		},
		{
			// The default window (10) still holds the spike: last
			// 2*9801/5, median5 (9801 + 49.5²)/5. exp0.05 barely moved:
			// f = 1 → 1 + .05*99 = 5.95, then every 1 scales f-1 by .95,
			// so its errors are 99, 4.95, 4.95*.95, 4.95*.95², 4.95*.95³
			// and it wins; its forecast is 1 + 4.95*.95⁴.
			name: "default window remembers", xs: []float64{1, 100, 1, 1, 1, 1},
			wantBy: "exp0.05", want: 1 + 4.95*math.Pow(0.95, 4),
			wantMSE: map[string]float64{
				"last":    2 * 9801.0 / 5,
				"median5": (9801 + 49.5*49.5) / 5,
				"exp0.05": (9801 + 4.95*4.95*(1+math.Pow(0.95, 2)+math.Pow(0.95, 4)+math.Pow(0.95, 6))) / 5,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewForecaster(tt.window)
			for _, x := range tt.xs {
				f.Observe(x)
			}
			got, by, ok := f.Forecast()
			if !ok || by != tt.wantBy || !near(got, tt.want) {
				t.Errorf("Forecast() = %v, %q, %v; want %v, %q", got, by, ok, tt.want, tt.wantBy)
			}
			mse := f.MSE()
			if len(tt.wantMSE) == 0 && len(mse) != 0 {
				t.Errorf("MSE() = %v, want empty", mse)
			}
			for name, want := range tt.wantMSE {
				if got, ok := mse[name]; !ok || !near(got, want) {
					t.Errorf("MSE()[%q] = %v, %v; want %v", name, got, ok, want)
				}
			}
			// Predict is the same Forecaster in one call.
			pv, pby, pok := Predict(tt.xs, tt.window)
			if pv != got || pby != by || pok != ok {
				t.Errorf("Predict = %v, %q, %v; Forecaster said %v, %q, %v", pv, pby, pok, got, by, ok)
			}
		})
	}
}

func TestForecasterEmptyZeroAndNil(t *testing.T) {
	f := NewForecaster(0)
	if v, by, ok := f.Forecast(); ok || v != 0 || by != "" {
		t.Errorf("empty Forecast() = %v, %q, %v", v, by, ok)
	}
	if m := f.MSE(); len(m) != 0 {
		t.Errorf("empty MSE() = %v", m)
	}
	// The zero value works, with the default window.
	var z Forecaster
	z.Observe(3)
	z.Observe(5)
	if v, by, ok := z.Forecast(); !ok || by != "last" || v != 5 { // all off by 2: tie, last
		t.Errorf("zero value Forecast() = %v, %q, %v", v, by, ok)
	}
	if z.window != DefaultWindow {
		t.Errorf("zero value window %d", z.window)
	}
	// MSE returns a fresh map.
	z.MSE()["last"] = -1
	if z.MSE()["last"] != 4 {
		t.Errorf("MSE map shared with the Forecaster")
	}
	// A nil Forecaster is inert.
	var n *Forecaster
	n.Observe(1)
	if _, _, ok := n.Forecast(); ok || len(n.MSE()) != 0 {
		t.Errorf("nil Forecaster forecasts")
	}
	// Non-finite values are skipped: NaN, 2, Inf, 4 is the series 2, 4.
	v, by, ok := Predict([]float64{math.NaN(), 2, math.Inf(1), 4, math.Inf(-1)}, 0)
	if !ok || by != "last" || v != 4 {
		t.Errorf("Predict with NaN/Inf = %v, %q, %v; want 4, last", v, by, ok)
	}
	if _, _, ok := Predict([]float64{math.NaN(), math.Inf(1)}, 5); ok {
		t.Errorf("Predict of non-finite values only is ok")
	}
}
