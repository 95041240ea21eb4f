package multisrc

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func meanOf(xs []float64) func([]int) float64 {
	return func(idx []int) float64 { m, _ := MeanSD(Pick(xs, idx)); return m }
}

// TestBootstrapInterval: the percentile interval of a mean is where the
// normal theory puts it (estimate ± 1.645 SE for 90%), a constant sample
// has a zero-width interval, a paired difference of identical samples is
// exactly zero, and bad input is refused with a reason.
func TestBootstrapInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	normal := make([]float64, 200)
	for i := range normal {
		normal[i] = 10 + 2*rng.NormFloat64()
	}
	_, sd := MeanSD(normal)
	se := sd / math.Sqrt(float64(len(normal)))
	shifted := make([]float64, len(normal))
	for i, x := range normal {
		shifted[i] = x + 0.5 + 0.01*rng.NormFloat64()
	}
	for _, c := range []struct {
		name      string
		n         int
		resamples int
		level     float64
		stat      func([]int) float64
		lo, hi    float64 // expected bounds
		tol       float64
		err       string
	}{
		{name: "mean of normal", n: len(normal), resamples: 4000, level: 0.9, stat: meanOf(normal),
			lo: mean(normal) - 1.645*se, hi: mean(normal) + 1.645*se, tol: 0.25 * se},
		{name: "constant", n: 30, resamples: 500, level: 0.9, stat: meanOf(constant(30, 3)), lo: 3, hi: 3, tol: 1e-12},
		{name: "paired difference of identical samples", n: len(normal), resamples: 500, level: 0.9,
			stat: func(idx []int) float64 { return mean(Pick(normal, idx)) - mean(Pick(normal, idx)) }, lo: 0, hi: 0, tol: 0},
		// Pairing keeps the shift's interval narrow (the common noise
		// cancels): 0.5 ± 1.645 · 0.01/√200.
		{name: "paired shift", n: len(normal), resamples: 2000, level: 0.9,
			stat: func(idx []int) float64 { return mean(Pick(shifted, idx)) - mean(Pick(normal, idx)) },
			lo:   0.5 - 0.0012, hi: 0.5 + 0.0012, tol: 0.0015},
		{name: "one unit", n: 1, resamples: 500, level: 0.9, stat: meanOf([]float64{1}), err: "at least 2"},
		{name: "too few resamples", n: 10, resamples: 10, level: 0.9, stat: meanOf(constant(10, 1)), err: "resamples"},
		{name: "level 1", n: 10, resamples: 500, level: 1, stat: meanOf(constant(10, 1)), err: "level"},
		{name: "undefined statistic", n: 10, resamples: 500, level: 0.9, stat: func([]int) float64 { return math.NaN() }, err: "undefined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			iv, err := BootstrapInterval(c.n, c.resamples, c.level, 7, c.stat)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(iv.Lo-c.lo) > c.tol || math.Abs(iv.Hi-c.hi) > c.tol || iv.Lo > iv.Est || iv.Est > iv.Hi {
				t.Errorf("interval %+v, want [%.4f, %.4f] ± %.4f around the estimate", iv, c.lo, c.hi, c.tol)
			}
		})
	}
}

// TestBootstrapDeterministic: the same seed gives the same interval, so a
// report regenerated from the same runs prints the same figures.
func TestBootstrapDeterministic(t *testing.T) {
	xs := []float64{1.13, 4.71, 2.29, 8.05, 5.37, 7.61, 3.17, 9.43, 6.83, 2.59}
	a, err := BootstrapInterval(len(xs), 1000, 0.9, 3, meanOf(xs))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BootstrapInterval(len(xs), 1000, 0.9, 3, meanOf(xs))
	c, _ := BootstrapInterval(len(xs), 1000, 0.9, 4, meanOf(xs))
	if a != b {
		t.Errorf("same seed: %+v and %+v", a, b)
	}
	if a == c {
		t.Errorf("another seed gave the very same interval %+v", a)
	}
}

// TestIntervalSides: Below and Above are strict about the whole interval.
func TestIntervalSides(t *testing.T) {
	for _, c := range []struct {
		iv           Interval
		x            float64
		below, above bool
	}{
		{Interval{-1, -2, -0.5}, 0, true, false},
		{Interval{-1, -2, 0.5}, 0, false, false},
		{Interval{1, 0.5, 2}, 0, false, true},
		{Interval{0, 0, 0}, 0, false, false},
	} {
		if c.iv.Below(c.x) != c.below || c.iv.Above(c.x) != c.above {
			t.Errorf("%+v against %v: below %v above %v", c.iv, c.x, c.iv.Below(c.x), c.iv.Above(c.x))
		}
	}
}

func mean(xs []float64) float64 { m, _ := MeanSD(xs); return m }

func constant(n int, v float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = v
	}
	return xs
}
