package model_test

import (
	"errors"
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

func samples(m model.SecondOrder, ns ...float64) ([]float64, []float64) {
	th := make([]float64, len(ns))
	for i, n := range ns {
		th[i] = m.At(n)
	}
	return ns, th
}

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}

// TestFitSecondOrderRecovers: samples of Th(n) = n/sqrt(a n² + b n + c)
// without noise give back a, b and c: exactly determined by three levels,
// and by least squares (which is exact on noiseless data) from six.
func TestFitSecondOrderRecovers(t *testing.T) {
	models := []model.SecondOrder{
		{A: 1, B: 5.161, C: 9.854},         // rises and levels off at 1
		{A: 0.01, B: 0.05, C: 0.2},         // rises to 10
		{A: 0.02, B: -0.01, C: 0.5},        // b < 0: peaks, then falls
		{A: 6.4e-19, B: 3.1e-18, C: 1e-17}, // bytes/s scale: Th ~ 1.25 GB/s at large n
	}
	levels := [][]float64{{1, 2, 4}, {1, 2, 4, 8, 16, 32}, {3, 7, 11}}
	for _, m := range models {
		for _, ns := range levels {
			n, th := samples(m, ns...)
			got, err := model.FitSecondOrder(n, th)
			if err != nil {
				t.Errorf("%+v from n=%v: %v", m, ns, err)
				continue
			}
			// Relative to the largest coefficient, as b may be small.
			scale := math.Max(math.Abs(m.A), math.Max(math.Abs(m.B), math.Abs(m.C)))
			if math.Abs(got.A-m.A) > 1e-8*scale || math.Abs(got.B-m.B) > 1e-8*scale || math.Abs(got.C-m.C) > 1e-8*scale {
				t.Errorf("from n=%v: fit %+v, want %+v", ns, got, m)
			}
			for _, x := range []float64{1, 5, 64} {
				if !near(got.At(x), m.At(x), 1e-8) {
					t.Errorf("from n=%v: fit predicts %g at %g, model %g", ns, got.At(x), x, m.At(x))
				}
			}
		}
	}
}

func TestFitSecondOrderErrors(t *testing.T) {
	good := model.SecondOrder{A: 0.01, B: 0.05, C: 0.2}
	cases := []struct {
		name       string
		n, th      []float64
		degenerate bool // the error wraps ErrDegenerate
	}{
		{"no samples", nil, nil, true},
		{"two levels", []float64{1, 2}, []float64{good.At(1), good.At(2)}, true},
		{"three samples, two distinct levels", []float64{1, 2, 2}, []float64{good.At(1), good.At(2), good.At(2) * 1.1}, true},
		{"zero throughput", []float64{1, 2, 4}, []float64{good.At(1), 0, good.At(4)}, true},
		{"negative throughput", []float64{1, 2, 4}, []float64{good.At(1), -1, good.At(4)}, true},
		{"NaN throughput", []float64{1, 2, 4}, []float64{good.At(1), math.NaN(), good.At(4)}, true},
		{"infinite throughput", []float64{1, 2, 4}, []float64{good.At(1), math.Inf(1), good.At(4)}, true},
		{"zero level", []float64{0, 2, 4}, []float64{1, good.At(2), good.At(4)}, true},
		{"more levels than throughputs", []float64{1, 2, 4, 8}, []float64{1, 2, 3}, false},
		{"more throughputs than levels", []float64{1, 2, 4}, []float64{1, 2, 3, 4}, false},
	}
	for _, c := range cases {
		_, err := model.FitSecondOrder(c.n, c.th)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.degenerate && !errors.Is(err, model.ErrDegenerate) {
			t.Errorf("%s: error %v does not wrap ErrDegenerate", c.name, err)
		}
	}
}

func TestSecondOrderAtAndLimit(t *testing.T) {
	m := model.SecondOrder{A: 0.01, B: 0.05, C: 0.2}
	// At(4) = 4/sqrt(0.16 + 0.2 + 0.2) = 4/sqrt(0.56).
	if got, want := m.At(4), 4/math.Sqrt(0.56); !near(got, want, 1e-15) {
		t.Errorf("At(4) = %g, want %g", got, want)
	}
	if got := m.Limit(); !near(got, 10, 1e-15) {
		t.Errorf("Limit = %g, want 1/sqrt(0.01) = 10", got)
	}
	if !math.IsInf(model.SecondOrder{A: 0, B: 1, C: 1}.Limit(), 1) {
		t.Error("Limit with a = 0 is not +Inf")
	}
	for _, n := range []float64{0, -1} {
		if got := m.At(n); got != 0 {
			t.Errorf("At(%g) = %g, want 0", n, got)
		}
	}
	// A non-positive denominator predicts nothing rather than NaN.
	if got := (model.SecondOrder{A: -1, B: 0, C: 1}).At(2); got != 0 {
		t.Errorf("At with a negative denominator = %g, want 0", got)
	}
	// Monotone rise towards the limit when a, b, c > 0.
	prev := 0.0
	for n := 1.0; n <= 256; n++ {
		v := m.At(n)
		if v <= prev || v >= m.Limit() {
			t.Fatalf("At(%g) = %g: not rising below the limit (previous %g)", n, v, prev)
		}
		prev = v
	}
}
