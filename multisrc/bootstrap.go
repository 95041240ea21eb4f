package multisrc

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Interval is an estimate with a confidence interval around it.
type Interval struct {
	Est float64 `json:"est"`
	Lo  float64 `json:"lo"`
	Hi  float64 `json:"hi"`
}

// Below reports whether the whole interval lies below x (the estimate is
// significantly less than x at the interval's level).
func (iv Interval) Below(x float64) bool { return iv.Hi < x }

// Above reports whether the whole interval lies above x.
func (iv Interval) Above(x float64) bool { return iv.Lo > x }

// Bootstrap draws resamples of n units with replacement (Efron's
// nonparametric bootstrap) and returns stat over each resample, sorted
// ascending. stat gets the indices of the resample's units (0..n-1, with
// repeats); statistics that must stay paired (two policies timed on the same
// stretch of the links) are computed over the same indices, so resampling
// keeps the pairs together. Resamples whose stat is NaN are dropped (a
// statistic undefined on a degenerate resample says nothing about spread),
// and an error is returned if more than 1% are. The same seed gives the
// same resamples.
func Bootstrap(n, resamples int, seed uint64, statFn func(idx []int) float64) ([]float64, error) {
	if n < 2 {
		return nil, fmt.Errorf("bootstrap: %d units, need at least 2", n)
	}
	if resamples < 100 {
		return nil, fmt.Errorf("bootstrap: %d resamples, need at least 100 for a percentile interval", resamples)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6f6f7473))
	idx := make([]int, n)
	out := make([]float64, 0, resamples)
	for range resamples {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		if v := statFn(idx); !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	if len(out) < resamples*99/100 {
		return nil, fmt.Errorf("bootstrap: the statistic is undefined on %d of %d resamples", resamples-len(out), resamples)
	}
	sort.Float64s(out)
	return out, nil
}

// PercentileInterval returns the bootstrap percentile interval at level
// (0.9 for a 90% interval: the 5th and 95th percentiles, linearly
// interpolated) of a sorted bootstrap distribution, around est.
func PercentileInterval(est float64, sorted []float64, level float64) (Interval, error) {
	if !(level > 0 && level < 1) {
		return Interval{}, fmt.Errorf("bootstrap: level %v, want in (0, 1)", level)
	}
	if len(sorted) == 0 {
		return Interval{}, errors.New("bootstrap: no resamples")
	}
	a := (1 - level) / 2
	return Interval{Est: est,
		Lo: stat.Quantile(a, stat.LinInterp, sorted, nil),
		Hi: stat.Quantile(1-a, stat.LinInterp, sorted, nil)}, nil
}

// BootstrapInterval is Bootstrap and PercentileInterval in one: the
// estimate is stat over all n units in order.
func BootstrapInterval(n, resamples int, level float64, seed uint64, statFn func(idx []int) float64) (Interval, error) {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	dist, err := Bootstrap(n, resamples, seed, statFn)
	if err != nil {
		return Interval{}, err
	}
	return PercentileInterval(statFn(all), dist, level)
}

// Pick returns xs at the indices idx (a resample of xs).
func Pick(xs []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for i, j := range idx {
		out[i] = xs[j]
	}
	return out
}
