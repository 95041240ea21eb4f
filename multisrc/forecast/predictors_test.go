package forecast

import (
	"math"
	"slices"
	"testing"
)

func TestNWSFamilyOrder(t *testing.T) {
	want := []string{
		"last", "mean",
		"exp0.05", "exp0.10", "exp0.15", "exp0.20", "exp0.30", "exp0.40", "exp0.50", "exp0.75",
		"median5", "median31",
		"slide5", "slide10", "slide20", "slide31",
		"trim31-10", "trim31-25",
		"adaptmedian",
	}
	var got []string
	for _, p := range NWS() {
		got = append(got, p.Name())
		if _, ok := p.Forecast(); ok {
			t.Errorf("%s forecasts before any value", p.Name())
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("NWS() = %v, want %v", got, want)
	}
}

func TestPredictorsByHand(t *testing.T) {
	a := []float64{1, 2, 3, 10}
	b := []float64{5, 5, 5, 5, 100}
	c := []float64{100, 1, 2, 3, 4, 5}              // longer than the 5-windows
	d := cat(rep(5, 1000), rep(20, 0), rep(11, 10)) // 36 values: the 31-windows hold 20 zeros, 11 tens
	tests := []struct {
		series string
		xs     []float64
		name   string
		want   float64
	}{
		// a = 1, 2, 3, 10: every window is longer than the data.
		{"a", a, "last", 10},
		{"a", a, "mean", 4},        // (1+2+3+10)/4 = 16/4
		{"a", a, "exp0.10", 2.161}, // 1 → 1+.1*1 = 1.1 → 1.1+.1*1.9 = 1.29 → 1.29+.1*8.71 = 2.161
		{"a", a, "exp0.50", 6.125}, // 1 → 1.5 → 1.5+.5*1.5 = 2.25 → 2.25+.5*7.75 = 6.125
		{"a", a, "median5", 2.5},   // sorted 1 2 3 10: (2+3)/2
		{"a", a, "median31", 2.5},
		{"a", a, "slide5", 4},      // 16/4, the 4 values there are
		{"a", a, "slide31", 4},     // idem
		{"a", a, "trim31-10", 4},   // floor(.10*4) = 0 dropped: 16/4
		{"a", a, "trim31-25", 2.5}, // floor(.25*4) = 1 dropped each end: (2+3)/2
		{"a", a, "adaptmedian", 2.5},

		// b = 5, 5, 5, 5, 100: a spike at the end.
		{"b", b, "last", 100},
		{"b", b, "mean", 24},       // 120/5
		{"b", b, "exp0.05", 9.75},  // 5 until the spike: 5+.05*95
		{"b", b, "exp0.10", 14.5},  // 5+.10*95
		{"b", b, "exp0.50", 52.5},  // 5+.50*95
		{"b", b, "exp0.75", 76.25}, // 5+.75*95
		{"b", b, "median5", 5},     // sorted 5 5 5 5 100
		{"b", b, "slide5", 24},     // 120/5
		{"b", b, "slide10", 24},    // 120/5, fewer than 10 values
		{"b", b, "trim31-10", 24},  // floor(.10*5) = 0 dropped
		{"b", b, "trim31-25", 5},   // floor(.25*5) = 1 dropped each end: 5 5 5
		{"b", b, "adaptmedian", 5}, // window 5: sorted 5 5 5 5 100
		{"b", b, "median31", 5},    // idem
		{"b", b, "slide31", 24},    // 120/5
		{"b", b, "exp0.20", 24},    // 5+.20*95
		{"b", b, "exp0.40", 43},    // 5+.40*95
		{"b", b, "exp0.30", 33.5},  // 5+.30*95
		{"b", b, "exp0.15", 19.25}, // 5+.15*95
		{"b", b, "slide20", 24},    // 120/5

		// c = 100, 1, 2, 3, 4, 5: the 5-windows have forgotten the 100.
		{"c", c, "last", 5},
		{"c", c, "mean", 115.0 / 6},      // (100+15)/6
		{"c", c, "median5", 3},           // 1 2 3 4 5
		{"c", c, "median31", 3.5},        // sorted 1 2 3 4 5 100: (3+4)/2
		{"c", c, "slide5", 3},            // 15/5
		{"c", c, "slide10", 115.0 / 6},   // all 6
		{"c", c, "trim31-10", 115.0 / 6}, // floor(.10*6) = 0 dropped
		{"c", c, "trim31-25", 3.5},       // floor(.25*6) = 1 dropped each end: (2+3+4+5)/4 = 14/4

		// d = 5×1000, 20×0, 11×10: the 31-windows hold 20 zeros and 11 tens.
		{"d", d, "trim31-10", 3.2},       // floor(.10*31) = 3 dropped each end: 17 zeros, 8 tens: 80/25
		{"d", d, "trim31-25", 40.0 / 17}, // floor(.25*31) = 7 dropped each end: 13 zeros, 4 tens: 40/17
		{"d", d, "slide31", 110.0 / 31},  // 11*10/31
		{"d", d, "median31", 0},          // the 16th of 20 zeros then 11 tens
		{"d", d, "slide20", 5.5},         // 9 zeros, 11 tens: 110/20
		{"d", d, "slide5", 10},           // 5 tens
		{"d", d, "median5", 10},          // 5 tens
		{"d", d, "mean", 5110.0 / 36},    // (5*1000 + 11*10)/36
	}
	for _, tt := range tests {
		got, ok := feed(nwsByName(t, tt.name), tt.xs)
		if !ok || !near(got, tt.want) {
			t.Errorf("%s on %s = %v, %v; want %v", tt.name, tt.series, got, ok, tt.want)
		}
	}
}

func TestExpSmoothingGains(t *testing.T) {
	xs := []float64{4, 8, 0}
	tests := []struct {
		gain float64
		name string
		want float64
	}{
		{0.25, "exp0.25", 3.75}, // 4 → 4+.25*4 = 5 → 5+.25*(0-5) = 3.75
		{0.50, "exp0.50", 3},    // 4 → 4+.5*4 = 6 → 6+.5*(0-6) = 3
		{2, "exp1.00", 0},       // clamped to 1: the last value
		{-1, "exp0.00", 4},      // clamped to 0: the first value forever
		{math.NaN(), "exp0.00", 4},
	}
	for _, tt := range tests {
		p := ExpSmoothing(tt.gain)
		if p.Name() != tt.name {
			t.Errorf("ExpSmoothing(%v).Name() = %q, want %q", tt.gain, p.Name(), tt.name)
		}
		if got, ok := feed(p, xs); !ok || !near(got, tt.want) {
			t.Errorf("ExpSmoothing(%v) on %v = %v, %v; want %v", tt.gain, xs, got, ok, tt.want)
		}
	}
}

func TestTrimmedMean(t *testing.T) {
	tests := []struct {
		w    int
		trim float64
		xs   []float64
		name string
		want float64
	}{
		// 10 values, trim 20%: floor(.2*10) = 2 dropped each end of
		// sorted -50 1 2 3 4 5 6 7 8 90: (2+3+4+5+6+7)/6 = 27/6.
		{10, 0.2, []float64{90, 1, 2, 3, 4, 5, 6, 7, 8, -50}, "trim10-20", 27.0 / 6},
		// Window 3 of the same: 7 8 -50, floor(.2*3) = 0 dropped: -35/3.
		{3, 0.2, []float64{90, 1, 2, 3, 4, 5, 6, 7, 8, -50}, "trim3-20", -35.0 / 3},
		// trim 0 is the sliding mean: (1+2+3+10)/4.
		{31, 0, []float64{1, 2, 3, 10}, "trim31-0", 4},
		// trim clamped below 0.5: floor(.49*4) = 1 dropped each end: (2+3)/2;
		// with 3 values floor(.49*3) = 1 leaves the median.
		{31, 0.9, []float64{1, 2, 3, 10}, "trim31-49", 2.5},
		{31, 0.9, []float64{1, 2, 30}, "trim31-49", 2},
		// A single value is kept whatever the trim.
		{31, 0.49, []float64{7}, "trim31-49", 7},
		// w < 1 is read as 1: the last value.
		{0, 0.1, []float64{1, 2}, "trim1-10", 2},
	}
	for _, tt := range tests {
		p := TrimmedMean(tt.w, tt.trim)
		if p.Name() != tt.name {
			t.Errorf("TrimmedMean(%d, %v).Name() = %q, want %q", tt.w, tt.trim, p.Name(), tt.name)
		}
		if got, ok := feed(p, tt.xs); !ok || !near(got, tt.want) {
			t.Errorf("%s on %v = %v, %v; want %v", tt.name, tt.xs, got, ok, tt.want)
		}
	}
}

func TestSlidingWindowsForget(t *testing.T) {
	// Window 3 over 9, 1, 2, 3: the 9 is out of the window.
	if got, _ := feed(SlidingMean(3), []float64{9, 1, 2, 3}); got != 2 { // (1+2+3)/3
		t.Errorf("slide3 = %v, want 2", got)
	}
	if got, _ := feed(SlidingMedian(2), []float64{9, 1, 2, 3}); got != 2.5 { // (2+3)/2
		t.Errorf("median2 = %v, want 2.5", got)
	}
	if got, _ := feed(SlidingMedian(0), []float64{9, 1}); got != 1 { // w < 1 is 1: the last value
		t.Errorf("median0 = %v, want 1", got)
	}
}

func TestAdaptiveMedianMovesItsWindow(t *testing.T) {
	// The window starts at 5 and can only grow at first. Before each value
	// arrives, the medians over the last w-1, w, w+1 values are compared
	// with it:
	//
	//	x  history before x   w=5 (tail)           w+1=6 (tail)          → w
	//	0  -                  (nothing to compare)                       5
	//	0  0                  all there is: equal                        5
	//	0  0 0                equal                                      5
	//	10 0 0 0              equal                                      5
	//	10 0 0 0 10           equal                                      5
	//	10 0 0 0 10 10        0 0 0 10 10: 0, err 10   same values: tie    5
	//	5  0 0 0 10 10 10     0 0 10 10 10: 10, err 5  0 0 0 10 10 10: 5, err 0  6
	//
	// then with w = 6 (w-1 = 5, w+1 = 7), before x = 10:
	//	w=6: 0 0 10 10 10 5 → (5+10)/2 = 7.5, err 2.5
	//	w=5: 0 10 10 10 5   → 10, err 0
	//	w=7: 0 0 0 10 10 10 5 → 5, err 5                              → 5
	p := AdaptiveMedian(5, 31).(*adaptiveMedian)
	xs := []float64{0, 0, 0, 10, 10, 10, 5, 10}
	wantW := []int{5, 5, 5, 5, 5, 5, 6, 5}
	for i, x := range xs {
		p.Observe(x)
		if p.w != wantW[i] {
			t.Fatalf("after %v: window %d, want %d", xs[:i+1], p.w, wantW[i])
		}
		if i == 6 {
			// Window 6 over 0 0 10 10 10 5 (sorted 0 0 5 10 10 10):
			// (5+10)/2 = 7.5, where median5 would say 10.
			if got, _ := p.Forecast(); got != 7.5 {
				t.Errorf("forecast with window 6 = %v, want 7.5", got)
			}
			if got, _ := feed(SlidingMedian(5), xs[:7]); got != 10 {
				t.Errorf("median5 = %v, want 10", got)
			}
		}
	}
	// Window 5 over 10 10 10 5 10: 10.
	if got, _ := p.Forecast(); got != 10 {
		t.Errorf("final forecast = %v, want 10", got)
	}
	if p.Name() != "adaptmedian" {
		t.Errorf("name %q", p.Name())
	}
	// Bounds 1..2 on 0, 10, 5, 5:
	//	x=10: w=1: 0, err 10; w=2: only 0 there, err 10: tie, stay 1
	//	x=5:  w=1: 10, err 5; w=2: (0+10)/2 = 5, err 0        → 2
	//	x=5:  w=2: (10+5)/2 = 7.5, err 2.5; w=1: 5, err 0; w=3 > max → 1
	q := AdaptiveMedian(1, 2).(*adaptiveMedian)
	for i, x := range []float64{0, 10, 5, 5} {
		q.Observe(x)
		if want := []int{1, 1, 2, 1}[i]; q.w != want {
			t.Fatalf("bounds 1..2, value %d: window %d, want %d", i, q.w, want)
		}
	}
	if got, _ := q.Forecast(); got != 5 || q.Name() != "adaptmedian1-2" {
		t.Errorf("%s = %v, want 5", q.Name(), got)
	}
	// Bounds below 1 are read as 1..1: the last value.
	if got, _ := feed(AdaptiveMedian(0, -3), []float64{4, 9}); got != 9 {
		t.Errorf("adaptive median 1..1 = %v, want 9", got)
	}
}

func TestPredictorsSkipNonFinite(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, p := range NWS() {
		if _, ok := feed(p, bad); ok {
			t.Errorf("%s forecasts from non-finite values only", p.Name())
		}
		// 1 and 3 with bad values around them are the series 1, 3.
		got, ok := feed(p, []float64{math.NaN(), 1, math.Inf(1), 3, math.Inf(-1)})
		if !ok || math.IsNaN(got) || math.IsInf(got, 0) || got < 1 || got > 3 {
			t.Errorf("%s on 1, 3 with NaN/Inf = %v, %v", p.Name(), got, ok)
		}
	}
}
