package model

import (
	"fmt"
	"math"
	"strings"
)

// Bounded is a prediction at one level, held to what the samples
// support (Prediction.Bound).
type Bounded struct {
	Level int `json:"level"`
	// Throughput is the answer: Fitted, or the most the samples support
	// when the curve claims more (Clamped).
	Throughput float64 `json:"throughput"`
	// Fitted is the curve's value at Level (Prediction.At).
	Fitted float64 `json:"fitted"`
	// Uncertainty is the relative half-width of the fit's interval
	// (Prediction.Uncertainty): the throughput at Level is expected
	// within Throughput × (1 ± Uncertainty).
	Uncertainty float64 `json:"uncertainty"`
	// Clamped is set when Fitted lay above every sample by more than
	// Uncertainty and Throughput was lowered to the bound.
	Clamped bool `json:"clamped"`
	// Note says why the answer is not simply the curve's value (clamped,
	// or Level outside the sampled levels); "" when it is.
	Note string `json:"note,omitempty"`
}

// Uncertainty is the relative half-width of the interval a sample is
// expected in around the fitted curve: twice the residual standard error
// (about 95% of samples for normal noise), but never less than the sample
// noise p.Noise, which is all there is to go on when the fit is exact
// (three samples, three parameters) and a floor when a few residuals
// happen to be small.
func (p Prediction) Uncertainty() float64 {
	noise := p.Noise
	if noise <= 0 {
		noise = DefaultNoise
	}
	return math.Max(2*p.Spread, noise)
}

// Bound is the prediction at level n held to what the samples support.
//
// A curve fitted to a few samples can rise far above all of them between
// or beyond them: three samples 1.6, 1.8 and 1.3 GB/s at 1, 4 and 16
// streams are fitted exactly by a second-order curve that peaks at
// 2.9 GB/s at 2 streams. Nothing measured says the path can do that. The
// answer is therefore at most the best sample raised by the fit's
// uncertainty: that much above the best sample is within what the noise
// of the samples (or the fit's residuals) allows, so a curve within it is
// taken as it is, and beyond it the curve has no support. The bound is a
// ceiling, min(fitted, best × (1 + uncertainty)), rather than a fall back
// to the best sample, so that the answer never drops as the fit rises.
// The price: a real peak between sparse samples more than the
// uncertainty above them is cut to the bound (TestBound). The same bound
// holds where n lies outside the sampled levels, where the curve is
// extrapolated; Note says so either way.
func (p Prediction) Bound(n int) Bounded {
	b := Bounded{Level: n, Fitted: p.At(float64(n)), Uncertainty: p.Uncertainty()}
	b.Throughput = b.Fitted
	if len(p.Th) == 0 {
		return b
	}
	best := 0
	for i := range p.Th {
		if p.Th[i] > p.Th[best] {
			best = i
		}
	}
	var notes []string
	if x := float64(n); x < p.N[0] || x > p.N[len(p.N)-1] {
		notes = append(notes, fmt.Sprintf("n=%d is outside the sampled levels %s-%s: the curve is extrapolated there",
			n, fmtLevel(p.N[0]), fmtLevel(p.N[len(p.N)-1])))
	}
	limit := p.Th[best] * (1 + b.Uncertainty)
	if p.Cap > 0 {
		limit = math.Min(limit, p.Cap)
	}
	if b.Fitted > limit {
		b.Throughput, b.Clamped = limit, true
		notes = append(notes, fmt.Sprintf("the fitted curve gives n=%d %.0f%% more than the best sample (n=%s), beyond the fit's uncertainty of ±%.0f%% (%s): clamped to the best sample +%.0f%%",
			n, 100*(b.Fitted/p.Th[best]-1), fmtLevel(p.N[best]), 100*b.Uncertainty, p.uncertaintySource(), 100*(limit/p.Th[best]-1)))
	}
	b.Note = strings.Join(notes, "; ")
	return b
}

// uncertaintySource says where Uncertainty comes from, for notes.
func (p Prediction) uncertaintySource() string {
	switch {
	case p.Method == MethodBestSample:
		return "assumed sample noise: no model"
	case p.DoF == 0:
		return fmt.Sprintf("assumed sample noise: %d samples fit the model exactly", modelParams)
	case 2*p.Spread >= p.Uncertainty():
		return fmt.Sprintf("twice the residual standard error of %d samples", p.DoF+modelParams)
	default:
		return fmt.Sprintf("assumed sample noise: the residuals of %d samples are smaller", p.DoF+modelParams)
	}
}

func fmtLevel(x float64) string { return joinLevels([]float64{x}) }
