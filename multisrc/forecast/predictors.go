package forecast

import (
	"fmt"
	"math"
	"slices"
)

// Predictor is a one-step-ahead forecaster of a series: it sees the values
// one at a time and, after each, predicts the next. It is the unit NWS
// composes; a Forecaster runs many and trusts the one that has been right
// lately.
//
// The implementations in this package ignore non-finite values passed to
// Observe, so a NaN or ±Inf sample never reaches a forecast.
type Predictor interface {
	// Name identifies the predictor in a Forecaster's choice and MSE map,
	// e.g. "last", "exp0.10", "median31", "trim31-25", "adaptmedian".
	Name() string
	// Observe appends the next value of the series.
	Observe(x float64)
	// Forecast predicts the next value; false before any value was
	// observed.
	Forecast() (float64, bool)
}

// NWS returns fresh instances of the whole NWS family, in a fixed order that
// a Forecaster uses to break ties (see the package documentation):
//
//	last, mean,
//	exp0.05, exp0.10, exp0.15, exp0.20, exp0.30, exp0.40, exp0.50, exp0.75,
//	median5, median31,
//	slide5, slide10, slide20, slide31,
//	trim31-10, trim31-25,
//	adaptmedian
//
// Fresh instances, because predictors hold the history of the series they
// are fed: two series never share one.
func NWS() []Predictor {
	ps := []Predictor{Last(), RunningMean()}
	for _, g := range []float64{0.05, 0.10, 0.15, 0.20, 0.30, 0.40, 0.50, 0.75} {
		ps = append(ps, ExpSmoothing(g))
	}
	ps = append(ps, SlidingMedian(5), SlidingMedian(31))
	for _, w := range []int{5, 10, 20, 31} {
		ps = append(ps, SlidingMean(w))
	}
	return append(ps, TrimmedMean(31, 0.10), TrimmedMean(31, 0.25), AdaptiveMedian(5, 31))
}

// finite reports whether x is a measurement: neither NaN nor ±Inf.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Last returns the predictor "last": the next value is the last one. It is
// the best guess for a random walk, and the Forecaster's fallback before
// any error is known.
func Last() Predictor { return &last{} }

type last struct {
	v  float64
	ok bool
}

func (p *last) Name() string { return "last" }

func (p *last) Observe(x float64) {
	if finite(x) {
		p.v, p.ok = x, true
	}
}

func (p *last) Forecast() (float64, bool) { return p.v, p.ok }

// RunningMean returns the predictor "mean": the mean of every value so far.
// It is the best guess for stationary noise around a level, and the slowest
// when the level moves.
func RunningMean() Predictor { return &runningMean{} }

type runningMean struct {
	mean float64
	n    float64
}

func (p *runningMean) Name() string { return "mean" }

func (p *runningMean) Observe(x float64) {
	if !finite(x) {
		return
	}
	p.n++
	d := x - p.mean
	if math.IsInf(d, 0) {
		// Both huge with opposite signs: the same update without
		// forming the overflowing difference.
		p.mean += x/p.n - p.mean/p.n
		return
	}
	p.mean += d / p.n
}

func (p *runningMean) Forecast() (float64, bool) { return p.mean, p.n > 0 }

// ExpSmoothing returns the exponential smoother with the given gain, named
// "exp" and the gain with two decimals ("exp0.10"): the first forecast is
// the first value, then each value x moves it by gain*(x - f). A small gain
// remembers long, a large one follows quickly. Gains outside [0, 1] (or NaN)
// are clamped into it (NaN reads as 0).
func ExpSmoothing(gain float64) Predictor {
	if !(gain >= 0) {
		gain = 0
	}
	return &expSmoothing{g: min(gain, 1)}
}

type expSmoothing struct {
	g  float64
	f  float64
	ok bool
}

func (p *expSmoothing) Name() string { return fmt.Sprintf("exp%.2f", p.g) }

func (p *expSmoothing) Observe(x float64) {
	switch {
	case !finite(x):
	case !p.ok:
		p.f, p.ok = x, true
	default:
		d := x - p.f
		if math.IsInf(d, 0) {
			p.f = (1-p.g)*p.f + p.g*x // the same, without the overflow
		} else {
			p.f += p.g * d
		}
	}
}

func (p *expSmoothing) Forecast() (float64, bool) { return p.f, p.ok }

// history keeps the last max finite values of a series, oldest first.
type history struct {
	max int
	buf []float64
}

func (h *history) push(x float64) {
	if len(h.buf) < h.max {
		h.buf = append(h.buf, x)
		return
	}
	copy(h.buf, h.buf[1:])
	h.buf[len(h.buf)-1] = x
}

// tail is the last n values, or all of them when there are fewer.
func (h *history) tail(n int) []float64 {
	n = max(0, min(n, len(h.buf)))
	return h.buf[len(h.buf)-n:]
}

// SlidingMedian returns "median<w>": the median of the last w values (all
// of them while there are fewer). A median ignores isolated spikes that
// would drag a mean. w < 1 is read as 1.
func SlidingMedian(w int) Predictor {
	w = max(w, 1)
	return &slidingMedian{h: history{max: w}}
}

type slidingMedian struct{ h history }

func (p *slidingMedian) Name() string      { return fmt.Sprintf("median%d", p.h.max) }
func (p *slidingMedian) Observe(x float64) { observe(&p.h, x) }

func (p *slidingMedian) Forecast() (float64, bool) {
	if len(p.h.buf) == 0 {
		return 0, false
	}
	return median(p.h.buf), true
}

// SlidingMean returns "slide<w>": the mean of the last w values (all of
// them while there are fewer), a mean that forgets. w < 1 is read as 1.
func SlidingMean(w int) Predictor {
	w = max(w, 1)
	return &slidingMean{h: history{max: w}}
}

type slidingMean struct{ h history }

func (p *slidingMean) Name() string      { return fmt.Sprintf("slide%d", p.h.max) }
func (p *slidingMean) Observe(x float64) { observe(&p.h, x) }

func (p *slidingMean) Forecast() (float64, bool) {
	if len(p.h.buf) == 0 {
		return 0, false
	}
	return mean(p.h.buf), true
}

// TrimmedMean returns the alpha-trimmed mean over the last w values, named
// "trim<w>-<percent>" ("trim31-10"): sort the n values in the window (all of
// them while there are fewer than w), drop floor(trim*n) from each end and
// average the rest. It sits between the mean (trim 0) and the median (trim
// near 0.5): robust to a few outliers, smoother than a median. w < 1 is read
// as 1; trim is clamped into [0, 0.49] (NaN reads as 0), and at least one
// value is always kept.
func TrimmedMean(w int, trim float64) Predictor {
	if !(trim >= 0) {
		trim = 0
	}
	return &trimmedMean{h: history{max: max(w, 1)}, trim: min(trim, 0.49)}
}

type trimmedMean struct {
	h    history
	trim float64
}

func (p *trimmedMean) Name() string {
	return fmt.Sprintf("trim%d-%d", p.h.max, int(math.Round(p.trim*100)))
}

func (p *trimmedMean) Observe(x float64) { observe(&p.h, x) }

func (p *trimmedMean) Forecast() (float64, bool) {
	n := len(p.h.buf)
	if n == 0 {
		return 0, false
	}
	s := slices.Clone(p.h.buf)
	slices.Sort(s)
	// The epsilon keeps a product that is an integer on paper (0.1*30)
	// from flooring one below it.
	k := int(math.Floor(p.trim*float64(n) + 1e-9))
	k = min(k, (n-1)/2)
	return mean(s[k : n-k]), true
}

// AdaptiveMedian returns the adaptive-window median: a median whose window
// moves one step at a time, between minW and maxW, toward the length that
// would have predicted the last value best (see the package documentation
// for the exact rule). It starts at minW. It is named "adaptmedian" for the
// NWS bounds 5..31 and "adaptmedian<minW>-<maxW>" otherwise, so that names
// stay unique. minW < 1 is read as 1, maxW < minW as minW.
func AdaptiveMedian(minW, maxW int) Predictor {
	minW = max(minW, 1)
	maxW = max(maxW, minW)
	return &adaptiveMedian{min: minW, max: maxW, w: minW, h: history{max: maxW}}
}

type adaptiveMedian struct {
	min, max, w int
	h           history
}

func (p *adaptiveMedian) Name() string {
	if p.min == 5 && p.max == 31 {
		return "adaptmedian"
	}
	return fmt.Sprintf("adaptmedian%d-%d", p.min, p.max)
}

func (p *adaptiveMedian) Observe(x float64) {
	if !finite(x) {
		return
	}
	if len(p.h.buf) > 0 {
		best, bestErr := p.w, math.Abs(median(p.h.tail(p.w))-x)
		for _, c := range []int{p.w - 1, p.w + 1} {
			if c < p.min || c > p.max {
				continue
			}
			if e := math.Abs(median(p.h.tail(c)) - x); e < bestErr {
				best, bestErr = c, e
			}
		}
		p.w = best
	}
	p.h.push(x)
}

func (p *adaptiveMedian) Forecast() (float64, bool) {
	if len(p.h.buf) == 0 {
		return 0, false
	}
	return median(p.h.tail(p.w)), true
}

// observe pushes x into h when it is a measurement.
func observe(h *history, x float64) {
	if finite(x) {
		h.push(x)
	}
}

// median of finite xs (not empty): the middle value, or the mean of the two
// middle values of an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	a, b := s[n/2-1], s[n/2]
	if m := (a + b) / 2; finite(m) {
		return m
	}
	return a/2 + b/2
}

// mean of finite xs (not empty), without overflowing to ±Inf on huge values.
func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	if finite(sum) {
		return sum / float64(len(xs))
	}
	// The sum overflowed: average xs/scale, which lie in [-1, 1].
	scale := 0.0
	for _, x := range xs {
		scale = max(scale, math.Abs(x))
	}
	mu, _ := plainMeanSD(xs, scale)
	return clampFinite(mu * scale)
}

// clampFinite maps ±Inf, which rounding at the edge of the float64 range
// could produce from a mean of finite values, to ±math.MaxFloat64.
func clampFinite(x float64) float64 {
	return max(-math.MaxFloat64, min(x, math.MaxFloat64))
}
