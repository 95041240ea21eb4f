package model_test

import (
	"errors"
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

// bruteOptimum is the oracle for the Optimum methods: every integer in the
// range, the first on a tie (within the same 1e-9 as the methods).
func bruteOptimum(f func(float64) float64, lo, hi int) int {
	lo = max(lo, 1)
	hi = max(hi, lo)
	best, bestTh := lo, f(float64(lo))
	for n := lo + 1; n <= hi; n++ {
		if th := f(float64(n)); th > bestTh*(1+1e-9) {
			best, bestTh = n, th
		}
	}
	return best
}

func TestSecondOrderOptimum(t *testing.T) {
	peak11 := model.SecondOrder{A: 0.01, B: -0.1, C: 0.55} // n* = -2c/b = 11
	peak83 := model.SecondOrder{A: 0.01, B: -0.12, C: 0.5} // n* = 8.33: Th²(8) = 355.6 > Th²(9) = 352.2
	rising := model.SecondOrder{A: 0.01, B: 0.05, C: 0.2}  // b > 0: rises to its limit
	falling := model.SecondOrder{A: 1, B: -0.5, C: -0.1}   // c < 0, b < 0: falls wherever it is real
	flat := model.SecondOrder{A: 1e-4, B: 0, C: 0}         // Th = 100 at every n
	cases := []struct {
		name   string
		m      model.SecondOrder
		lo, hi int
		want   int
	}{
		{"peak at 11", peak11, 1, 32, 11},
		{"peak beyond the range", peak11, 1, 8, 8},
		{"peak below the range", peak11, 16, 32, 16},
		{"non-integer peak 8.33", peak83, 1, 32, 8},
		{"rising: the top of the range", rising, 1, 32, 32},
		{"one-level range", rising, 3, 3, 3},
		{"falling: the bottom of the range", falling, 1, 32, 1},
		{"flat: the first level", flat, 1, 32, 1},
		{"hi below lo gives lo", rising, 5, 2, 5},
		{"lo below 1 is raised to 1", falling, -3, 4, 1},
		{"empty positive range", rising, -3, 0, 1},
	}
	for _, c := range cases {
		if got := c.m.Optimum(c.lo, c.hi); got != c.want {
			t.Errorf("%s: Optimum(%d, %d) = %d, want %d", c.name, c.lo, c.hi, got, c.want)
		}
	}
	// Against the exhaustive oracle on a spread of valid models.
	for _, a := range []float64{1e-3, 0.01, 0.1} {
		for _, b := range []float64{-0.3, -0.05, 0, 0.02, 0.4} {
			for _, cc := range []float64{0.05, 0.5, 3} {
				m := model.SecondOrder{A: a, B: b, C: cc}
				if b*b >= 4*a*cc {
					continue // not real everywhere
				}
				for _, r := range [][2]int{{1, 32}, {1, 200}, {4, 9}} {
					if got, want := m.Optimum(r[0], r[1]), bruteOptimum(m.At, r[0], r[1]); got != want {
						t.Errorf("%+v on [%d, %d]: Optimum %d, exhaustive %d", m, r[0], r[1], got, want)
					}
				}
			}
		}
	}
}

func TestDynamicOrderAtAndOptimum(t *testing.T) {
	// p' = 1e-4 n³ + 0.5 peaks where n³ = 2b/(a(c-2)) = 1e4, n = 21.5.
	m := model.DynamicOrder{A: 1e-4, B: 0.5, C: 3}
	if got, want := m.At(2), 2/math.Sqrt(1e-4*8+0.5); math.Abs(got-want) > 1e-15 {
		t.Errorf("At(2) = %g, want %g", got, want)
	}
	if got := m.Optimum(1, 64); got != bruteOptimum(m.At, 1, 64) || (got != 21 && got != 22) {
		t.Errorf("Optimum(1, 64) = %d, want 21 or 22 (exhaustive %d)", got, bruteOptimum(m.At, 1, 64))
	}
	for _, n := range []float64{0, -1} {
		if got := m.At(n); got != 0 {
			t.Errorf("At(%g) = %g, want 0", n, got)
		}
	}
	if got := (model.DynamicOrder{A: -1, B: 0.5, C: 1}).At(2); got != 0 {
		t.Errorf("At where a n^c + b < 0 = %g, want 0", got)
	}
	for _, m := range []model.DynamicOrder{
		{A: 1e-3, B: 1e-2, C: 1.5},   // rises without limit
		{A: 0.01, B: 0.2, C: 2},      // levels off
		{A: 1e-5, B: 0.01, C: 3.2},   // peaks
		{A: -2e-3, B: 0.05, C: -0.5}, // nearly linear
		{A: 0.3, B: -0.1, C: 0.4},    // falls at first: the end it is highest at
	} {
		for _, r := range [][2]int{{1, 32}, {2, 100}} {
			if got, want := m.Optimum(r[0], r[1]), bruteOptimum(m.At, r[0], r[1]); got != want {
				t.Errorf("%+v on [%d, %d]: Optimum %d, exhaustive %d", m, r[0], r[1], got, want)
			}
		}
	}
}

func dynSamples(m model.DynamicOrder, ns ...float64) ([]float64, []float64) {
	th := make([]float64, len(ns))
	for i, n := range ns {
		th[i] = m.At(n)
	}
	return ns, th
}

// TestFitDynamicOrderRecovers: noiseless samples give back a, b and c:
// exactly (Newton's iteration) from three levels, and by the least-squares
// search over c from six.
func TestFitDynamicOrderRecovers(t *testing.T) {
	models := []model.DynamicOrder{
		{A: 1e-3, B: 1e-2, C: 1.5},
		{A: 0.01, B: 0.2, C: 2},
		{A: 1e-5, B: 0.01, C: 3.2},
		{A: -2e-3, B: 0.05, C: -0.5},
		{A: 4e-9, B: 6e-7, C: 2.4}, // Mb/s scale: Th(1) ~ 1290
	}
	cases := []struct {
		levels []float64
		tol    float64
	}{
		{[]float64{1, 2, 4}, 1e-9},
		{[]float64{1, 3, 9}, 1e-9},
		{[]float64{2, 5, 11}, 1e-9},
		{[]float64{4, 2, 1}, 1e-9}, // order of the samples does not matter
		{[]float64{1, 2, 4, 8, 16, 32}, 1e-6},
	}
	for _, m := range models {
		for _, c := range cases {
			n, th := dynSamples(m, c.levels...)
			got, err := model.FitDynamicOrder(n, th)
			if err != nil {
				t.Errorf("%+v from n=%v: %v", m, c.levels, err)
				continue
			}
			if math.Abs(got.C-m.C) > c.tol*math.Max(1, math.Abs(m.C)) {
				t.Errorf("%+v from n=%v: order %.12g", m, c.levels, got.C)
			}
			for _, x := range []float64{1, 7, 32} {
				if !near(got.At(x), m.At(x), 100*c.tol) {
					t.Errorf("%+v from n=%v: fit predicts %g at %g, model %g", m, c.levels, got.At(x), x, m.At(x))
				}
			}
		}
	}
}

func TestFitDynamicOrderErrors(t *testing.T) {
	cases := []struct {
		name       string
		n, th      []float64
		degenerate bool
	}{
		{"linear scaling: order undetermined", []float64{1, 2, 4}, []float64{100, 200, 400}, true},
		{"n²/Th² not monotone", []float64{1, 2, 4}, []float64{100, 50, 120}, true},
		{"two levels", []float64{1, 2, 2}, []float64{100, 150, 160}, true},
		{"negative throughput", []float64{1, 2, 4}, []float64{100, -1, 120}, true},
		{"NaN throughput", []float64{1, 2, 4}, []float64{100, math.NaN(), 120}, true},
		{"zero level", []float64{0, 2, 4}, []float64{100, 150, 160}, true},
		{"lengths differ", []float64{1, 2, 4}, []float64{100, 150}, false},
	}
	for _, c := range cases {
		_, err := model.FitDynamicOrder(c.n, c.th)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.degenerate && !errors.Is(err, model.ErrDegenerate) {
			t.Errorf("%s: error %v does not wrap ErrDegenerate", c.name, err)
		}
	}
}
