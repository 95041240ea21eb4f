package model

import (
	"fmt"
	"math"
)

// DefaultSlopeThreshold is the Sampler's default Threshold: stop once an
// added stream gains less than a tenth of what the first stream achieved
// on its own. A stream costs a connection and a server process at each
// end; when ten more of them buy less than one stream's worth, the curve
// has levelled off for practical purposes. It is a round number chosen on
// that argument, not fitted to any data set.
const DefaultSlopeThreshold = 0.1

// DefaultGrowth is the Sampler's default factor between levels: 1, 4,
// 16, then the maximum. The paper doubles (1, 2, 4, 8, ...). Samples close
// together make the fit extrapolate: three points within a factor of four
// say little about the curve at 32 streams, and sample noise is amplified
// out there (TestPredictNoise: ±5% noise gives errors of hundreds of
// percent at some level from 1, 2, 4, and stays within 15% from 1, 4,
// 32). Quadrupling covers 1-32 in three or four samples instead of six,
// so the fit interpolates. Measured on three real GridFTP paths
// (docs/results/model-eval.md): on SGData, where this was chosen, the
// predicted optimum is within one level of the measured one on 87% of the
// parallelism curves against 63% for doubling; on two paths held out from
// the choice (Blacklight -> Trestles, Stampede -> Blacklight), 87% and
// 76% against 65% and 63%, with a lower error of the predicted points too
// (11% and 7% against 19% and 12%).
const DefaultGrowth = 4

// Sampler is Algorithm 2 of Yin, Yildirim et al. (sampling data transfers) as a
// pure state machine: the caller asks Next for a level, measures it, and
// reports the throughput with Add, until Next says stop. Levels start at 1
// and grow by Growth (the paper doubles; DefaultGrowth is 4, see there); a
// level past Max is replaced by Max, so the range's top is sampled, and a
// range too small for three levels of that growth (Max 3 or 4 with Growth
// 4) gets its geometric middle second (1, 2, 4).
// Sampling stops when
//
//   - the slope between the last two samples, (th2-th1)/(n2-n1), falls
//     below Threshold (the curve has levelled off),
//   - the throughput of the last sample is below the one before (past the
//     peak), or
//   - the next level would exceed Max.
//
// The slope rules apply from the third sample on: the models need three
// levels, so a flat or falling start (often noise at one or two streams)
// is sampled once more rather than ending with an unusable pair.
//
// The paper's threshold is an absolute slope (throughput per stream),
// which depends on the link and the unit. Here the slope is divided by the
// first sample's throughput: Threshold is the gain per added stream as a
// fraction of the single-stream throughput, so the same value serves a
// 1 Gb/s and a 100 Gb/s path. A curve that scales perfectly has relative
// slope 1. Zero Threshold means DefaultSlopeThreshold.
//
// A Sampler is not safe for concurrent use.
type Sampler struct {
	Threshold float64 // relative slope below which sampling stops (see above)
	Max       int     // largest level to sample; 0 means DefaultMaxLevel
	// Growth is the factor from one level to the next; 0 means
	// DefaultGrowth. The paper doubles (2).
	Growth int

	n, th []float64
	stop  string
}

// Next returns the next level to sample, or ok == false when sampling is
// over (Stopped says why).
func (s *Sampler) Next() (n int, ok bool) {
	if s.stop != "" {
		return 0, false
	}
	if len(s.n) == 0 {
		return 1, true
	}
	last := int(s.n[len(s.n)-1])
	next := s.growth() * last
	if len(s.n) == 1 && next >= s.max() && s.max() >= 3 {
		// The second level would be the top of a small range (at most
		// 4 streams, growing by 4), leaving no room for the third level
		// the models need: take the range's geometric middle instead.
		next = min(max(int(math.Round(math.Sqrt(float64(s.max())))), 2), s.max()-1)
	}
	if next > s.max() {
		if last < s.max() {
			// A factor above 2 can step over the maximum: sample the
			// maximum itself rather than end short of the range.
			return s.max(), true
		}
		s.stop = fmt.Sprintf("next level %d exceeds the maximum %d", next, s.max())
		return 0, false
	}
	return next, true
}

// Add records the throughput measured at level n (normally the level Next
// returned; the doubling continues from n). A level not above the last
// one, or a throughput that is not positive and finite, is refused with
// an error and ends sampling: a failed sample is no basis to go on.
func (s *Sampler) Add(n int, th float64) error {
	if s.stop != "" {
		return fmt.Errorf("model: sampler: sample at n=%d after sampling stopped (%s)", n, s.stop)
	}
	if n < 1 || (len(s.n) > 0 && float64(n) <= s.n[len(s.n)-1]) {
		s.stop = fmt.Sprintf("bad level %d", n)
		return fmt.Errorf("model: sampler: level %d is not above the last sampled level", n)
	}
	if !(th > 0) || math.IsInf(th, 0) {
		s.stop = fmt.Sprintf("sample at n=%d failed (throughput %g)", n, th)
		return fmt.Errorf("model: sampler: throughput %g at n=%d is not positive", th, n)
	}
	s.n, s.th = append(s.n, float64(n)), append(s.th, th)
	k := len(s.n)
	if k < 3 {
		return nil
	}
	n1, n2, th1, th2 := s.n[k-2], s.n[k-1], s.th[k-2], s.th[k-1]
	thr := s.Threshold
	if thr <= 0 {
		thr = DefaultSlopeThreshold
	}
	switch slope := (th2 - th1) / (n2 - n1) / s.th[0]; {
	case th2 < th1:
		s.stop = fmt.Sprintf("throughput fell from n=%g to n=%g", n1, n2)
	case slope < thr:
		s.stop = fmt.Sprintf("relative slope %.3f from n=%g to n=%g is below %.3g", slope, n1, n2, thr)
	}
	return nil
}

// Samples returns copies of the levels and throughputs recorded so far.
func (s *Sampler) Samples() (n, th []float64) {
	return append([]float64(nil), s.n...), append([]float64(nil), s.th...)
}

// Stopped says why sampling ended, or "" while it goes on.
func (s *Sampler) Stopped() string { return s.stop }

func (s *Sampler) growth() int {
	if s.Growth < 2 {
		return DefaultGrowth
	}
	return s.Growth
}

func (s *Sampler) max() int {
	if s.Max <= 0 {
		return DefaultMaxLevel
	}
	return s.Max
}
