package forecast

import (
	"math"
	"slices"
	"testing"
)

func TestDegree(t *testing.T) {
	tests := []struct {
		seconds, hz float64
		want        int
	}{
		{100, 0.1, 10}, // the paper's example: 100 s * 0.1 Hz
		{60, 1, 60},
		{15, 0.1, 2},  // 1.5 rounds up
		{14, 0.1, 1},  // 1.4 rounds down
		{1, 0.1, 1},   // 0.1 rounds to 0: at least 1
		{0.001, 1, 1}, // tiny
		{0, 5, 1},
		{-3, 2, 1},
		{3, -2, 1},
		{math.NaN(), 1, 1},
		{1, math.NaN(), 1},
		{math.Inf(1), 0, 1},
		{1, math.Inf(1), math.MaxInt},
		{1e300, 1e300, math.MaxInt},
	}
	for _, tt := range tests {
		if got := Degree(tt.seconds, tt.hz); got != tt.want {
			t.Errorf("Degree(%v, %v) = %d, want %d", tt.seconds, tt.hz, got, tt.want)
		}
	}
}

func TestAggregate(t *testing.T) {
	r23 := math.Sqrt(2.0 / 3) // population SD of x-1, x, x+1: sqrt((1+0+1)/3)
	tests := []struct {
		name string
		c    []float64
		m    int
		a, s []float64
	}{
		{
			// n = 6 divisible by 3: 1 2 3 | 4 5 6.
			name: "divisible", c: []float64{1, 2, 3, 4, 5, 6}, m: 3,
			a: []float64{2, 5}, s: []float64{r23, r23},
		},
		{
			// n = 10, m = 3: k = ceil(10/3) = 4 blocks aligned to the end,
			// 1 | 2 3 4 | 5 6 7 | 8 9 10: the first holds the one value
			// there is (mean 1, SD 0).
			name: "partial first block of 1", c: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, m: 3,
			a: []float64{1, 3, 6, 9}, s: []float64{0, r23, r23, r23},
		},
		{
			// n = 10, m = 4: 1 2 | 3 4 5 6 | 7 8 9 10.
			// SD of 1 2: sqrt((.25+.25)/2) = .5 (divided by 2, not 4);
			// of 3 4 5 6 around 4.5: sqrt((2.25+.25+.25+2.25)/4) = sqrt(1.25).
			name: "partial first block of 2", c: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, m: 4,
			a: []float64{1.5, 4.5, 8.5}, s: []float64{0.5, math.Sqrt(1.25), math.Sqrt(1.25)},
		},
		{
			// m > n: one partial block of everything: mean 3, SD 1.
			name: "m beyond n", c: []float64{2, 4}, m: 10,
			a: []float64{3}, s: []float64{1},
		},
		{
			name: "m huge", c: []float64{2, 4}, m: math.MaxInt,
			a: []float64{3}, s: []float64{1},
		},
		{
			// m < 1 is 1: every value its own block.
			name: "m zero", c: []float64{3, 1}, m: 0,
			a: []float64{3, 1}, s: []float64{0, 0},
		},
		{
			name: "m negative", c: []float64{3, 1}, m: -4,
			a: []float64{3, 1}, s: []float64{0, 0},
		},
		{
			// A flat block has SD exactly 0, for any value.
			name: "constant", c: rep(5, 0.1), m: 2,
			a: []float64{0.1, 0.1, 0.1}, s: []float64{0, 0, 0},
		},
		{
			// NaN and ±Inf are removed before cutting: 1 2 | 3 4.
			name: "non-finite skipped", c: []float64{1, math.NaN(), 2, math.Inf(1), 3, math.Inf(-1), 4}, m: 2,
			a: []float64{1.5, 3.5}, s: []float64{0.5, 0.5},
		},
		{name: "nil", c: nil, m: 3},
		{name: "only NaN", c: []float64{math.NaN(), math.Inf(1)}, m: 1},
	}
	for _, tt := range tests {
		a, s := Aggregate(tt.c, tt.m)
		eq := func(got, want []float64) bool {
			return slices.EqualFunc(got, want, near)
		}
		if !eq(a, tt.a) || !eq(s, tt.s) {
			t.Errorf("%s: Aggregate(%v, %d) = %v, %v; want %v, %v", tt.name, tt.c, tt.m, a, s, tt.a, tt.s)
		}
	}
}

func TestInterval(t *testing.T) {
	tests := []struct {
		name     string
		c        []float64
		m        int
		mean, sd float64
	}{
		{
			// Constant: every a_i = 5 and s_i = 0, every predictor exact,
			// last chosen on the tie.
			name: "constant", c: rep(20, 5), m: 4, mean: 5, sd: 0,
		},
		{
			// 7 | 1 2 3 | 4 5 6: a = 7, 2, 5 and s = 0, r, r (r = sqrt(2/3)).
			// On a, every predictor said 7 for the 2 (error 25); for the 5,
			// exp0.40 said 7 + .4*(2-7) = 5 (error 0), last 2 (error 9), the
			// means and medians 4.5 (error .25): exp0.40 wins and says
			// 5 + .4*(5-5) = 5.
			// On s, every predictor said 0 for the first r; for the second,
			// last said r (error 0), the others less: last wins, r.
			name: "hand series", c: []float64{7, 1, 2, 3, 4, 5, 6}, m: 3,
			mean: 5, sd: math.Sqrt(2.0 / 3),
		},
		{
			// m = 1: a = c and s = 0: the one-step forecast, no spread.
			// 1 2 3 is a ramp, last wins: 3.
			name: "m one", c: []float64{1, 2, 3}, m: 1, mean: 3, sd: 0,
		},
		{
			// NaN 1 Inf 3 is 1 3: one block, mean 2, SD 1.
			name: "non-finite skipped", c: []float64{math.NaN(), 1, math.Inf(1), 3}, m: 2,
			mean: 2, sd: 1,
		},
	}
	for _, tt := range tests {
		mean, sd, ok := Interval(tt.c, tt.m, 0)
		if !ok || !near(mean, tt.mean) || !near(sd, tt.sd) {
			t.Errorf("%s: Interval(%v, %d) = %v, %v, %v; want %v, %v", tt.name, tt.c, tt.m, mean, sd, ok, tt.mean, tt.sd)
		}
	}
	if mean, sd, ok := Interval(nil, 3, 0); ok || mean != 0 || sd != 0 {
		t.Errorf("Interval(nil) = %v, %v, %v", mean, sd, ok)
	}
}

// TestNoPanicNoNaN throws bad and extreme inputs at everything: nothing
// panics, no forecast or aggregate is NaN or infinite, and an MSE may be
// +Inf (a squared error beyond float64) but never NaN.
func TestNoPanicNoNaN(t *testing.T) {
	inf, nan, big := math.Inf(1), math.NaN(), math.MaxFloat64
	inputs := [][]float64{
		nil,
		{},
		{nan},
		{inf, -inf, nan},
		{big, -big, big, -big, big},
		{-big, nan, big, inf, 1e308, -1e308, 0, math.SmallestNonzeroFloat64},
		{math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 0},
		cat(rep(40, big), rep(40, -big)),
	}
	bad := func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }
	for i, c := range inputs {
		for _, p := range NWS() {
			if v, ok := feed(p, c); bad(v) || (ok && len(c) == 0) {
				t.Errorf("input %d: %s = %v, %v", i, p.Name(), v, ok)
			}
		}
		for _, w := range []int{-1, 0, 1, 3} {
			f := NewForecaster(w)
			for _, x := range c {
				f.Observe(x)
			}
			if v, _, _ := f.Forecast(); bad(v) {
				t.Errorf("input %d, window %d: forecast %v", i, w, v)
			}
			for name, e := range f.MSE() {
				if math.IsNaN(e) || e < 0 {
					t.Errorf("input %d, window %d: MSE[%s] = %v", i, w, name, e)
				}
			}
			for _, m := range []int{math.MinInt, -1, 0, 1, 2, 3, 7, math.MaxInt} {
				a, s := Aggregate(c, m)
				if len(a) != len(s) {
					t.Errorf("input %d, m %d: %d means, %d SDs", i, m, len(a), len(s))
				}
				for j := range a {
					if bad(a[j]) || bad(s[j]) || s[j] < 0 {
						t.Errorf("input %d, m %d: a[%d] = %v, s[%d] = %v", i, m, j, a[j], j, s[j])
					}
				}
				if mean, sd, _ := Interval(c, m, w); bad(mean) || bad(sd) || sd < 0 {
					t.Errorf("input %d, m %d, window %d: Interval = %v, %v", i, m, w, mean, sd)
				}
			}
		}
	}
}
