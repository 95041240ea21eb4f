package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Bootstrap sets a percentile bootstrap over seeds: Resamples draws of the
// seeds with replacement, the interval the central Level of the
// statistic's draws. Every interval is drawn from a generator seeded with
// Seed alone, so it depends only on its own data: the same runs give the
// same interval whatever else a sweep holds or the order it ran in.
type Bootstrap struct {
	Resamples int     `json:"resamples"`
	Level     float64 `json:"level"`
	Seed      uint64  `json:"seed"`
}

// DefaultBootstrap is 10,000 resamples for a 90% interval, with a fixed
// seed so that a result file regenerates byte for byte.
var DefaultBootstrap = Bootstrap{Resamples: 10000, Level: 0.90, Seed: 20151115}

// withDefaults fills zero fields from DefaultBootstrap.
func (b Bootstrap) withDefaults() Bootstrap {
	if b.Resamples <= 0 {
		b.Resamples = DefaultBootstrap.Resamples
	}
	if b.Level <= 0 {
		b.Level = DefaultBootstrap.Level
	}
	if b.Seed == 0 {
		b.Seed = DefaultBootstrap.Seed
	}
	return b
}

func (b Bootstrap) validate() error {
	if !(b.Level > 0 && b.Level < 1) {
		return fmt.Errorf("bootstrap: level %v: want a fraction between 0 and 1", b.Level)
	}
	if b.Resamples < 100 || b.Resamples > 1e7 {
		return fmt.Errorf("bootstrap: %d resamples: want 100 to 10,000,000", b.Resamples)
	}
	return nil
}

// Interval is a point estimate with the bounds of its bootstrap interval.
type Interval struct {
	Est float64 `json:"est"`
	Lo  float64 `json:"lo"`
	Hi  float64 `json:"hi"`
}

// Below reports whether the whole interval lies below x.
func (iv Interval) Below(x float64) bool { return iv.Hi < x }

// Excludes reports whether x lies outside the interval.
func (iv Interval) Excludes(x float64) bool { return x < iv.Lo || x > iv.Hi }

func (iv Interval) String() string {
	return fmt.Sprintf("%+.1f%% [%+.1f, %+.1f]", iv.Est, iv.Lo, iv.Hi)
}

// PercentileInterval is the percentile bootstrap of a statistic of n
// paired observations (one per seed): stat is given the indexes of a
// sample, 0..n-1 for the data as observed and a draw of n of them with
// replacement for each resample, and reads every series it compares at
// the same indexes, so that the pairing by seed is kept. Est is stat of
// the data; Lo and Hi are the empirical quantiles (1-Level)/2 and
// (1+Level)/2 of the resamples' statistics (gonum's stat.Quantile).
// Resamples whose statistic is not finite are an error: the interval
// would not mean what it says.
func PercentileInterval(n int, statistic func(idx []int) float64, b Bootstrap) (Interval, error) {
	b = b.withDefaults()
	if err := b.validate(); err != nil {
		return Interval{}, err
	}
	if n < 2 {
		return Interval{}, fmt.Errorf("bootstrap: %d observations; an interval needs at least 2", n)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	est := statistic(idx)
	if math.IsNaN(est) || math.IsInf(est, 0) {
		return Interval{}, fmt.Errorf("bootstrap: the statistic of the data is %v", est)
	}
	rng := rand.New(rand.NewPCG(b.Seed, b.Seed^0x9e3779b97f4a7c15))
	draws := make([]float64, b.Resamples)
	for r := range draws {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		v := statistic(idx)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Interval{}, fmt.Errorf("bootstrap: resample %d has statistic %v", r, v)
		}
		draws[r] = v
	}
	slices.Sort(draws)
	lo := stat.Quantile((1-b.Level)/2, stat.Empirical, draws, nil)
	hi := stat.Quantile((1+b.Level)/2, stat.Empirical, draws, nil)
	return Interval{Est: est, Lo: lo, Hi: hi}, nil
}

// errNoBaseline is returned by PairedChange without baselines.
var errNoBaseline = errors.New("bootstrap: no baseline to compare with")

// PairedChange is the percent change of the mean of subject against the
// lowest mean among baselines (negative: the subject is lower, which for
// slowdown and turnaround is better), with its percentile bootstrap
// interval. subject[i] and every baselines[k][i] come from seed i: a
// resample draws seeds, and all series are read at the same ones. The
// best baseline is picked again in every resample, so the interval also
// carries the doubt about which baseline is best. It also returns the
// index of the best baseline on the data.
func PairedChange(subject []float64, baselines [][]float64, b Bootstrap) (Interval, int, error) {
	if len(baselines) == 0 {
		return Interval{}, -1, errNoBaseline
	}
	n := len(subject)
	for k, base := range baselines {
		if len(base) != n {
			return Interval{}, -1, fmt.Errorf("bootstrap: baseline %d has %d observations, the subject %d: the pairs must match", k, len(base), n)
		}
	}
	mean := func(v []float64, idx []int) float64 {
		s := 0.0
		for _, i := range idx {
			s += v[i]
		}
		return s / float64(len(idx))
	}
	best := func(idx []int) (int, float64) {
		bi, bm := -1, math.Inf(1)
		for k, base := range baselines {
			if m := mean(base, idx); m < bm {
				bi, bm = k, m
			}
		}
		return bi, bm
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	bi, bm := best(all)
	if !(bm > 0) {
		return Interval{}, -1, fmt.Errorf("bootstrap: the best baseline's mean is %v; a percent change needs a positive one", bm)
	}
	iv, err := PercentileInterval(n, func(idx []int) float64 {
		_, bm := best(idx)
		return pct(mean(subject, idx), bm)
	}, b)
	if err != nil {
		return Interval{}, -1, err
	}
	return iv, bi, nil
}
