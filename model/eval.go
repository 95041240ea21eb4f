package model

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Axis is the knob a throughput curve runs over in a tuning campaign.
type Axis string

// The knobs of a tuning campaign (the columns of TuningRow).
const (
	AxisParallelism Axis = "p"  // parallel streams per file
	AxisConcurrency Axis = "cc" // files in flight at once
	AxisPipelining  Axis = "pp" // commands queued per connection
)

// ParseAxis accepts p, cc or pp (and the long names).
func ParseAxis(s string) (Axis, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "p", "parallelism":
		return AxisParallelism, nil
	case "cc", "concurrency":
		return AxisConcurrency, nil
	case "pp", "pipelining":
		return AxisPipelining, nil
	}
	return "", fmt.Errorf("model: unknown axis %q (want p, cc or pp)", s)
}

// EvalOptions chooses how EvalTuning samples and predicts each curve.
type EvalOptions struct {
	Axis Axis // the knob the curves run over; "" means AxisParallelism
	// Samples are the levels each curve is fitted on; nil means 1, 2, 4,
	// the three exponentially spaced samples of Yin, Yildirim et al.
	Samples []int
	// Adaptive picks each curve's samples with Algorithm 2 (Sampler)
	// instead of Samples, with this Threshold (0: DefaultSlopeThreshold).
	Adaptive  bool
	Threshold float64
	Growth    int // Algorithm 2's factor between levels (0: DefaultGrowth)
	// Span samples each curve at its lowest level, the level nearest the
	// geometric middle of its range (the lower one on a tie) and its
	// highest level, instead of Samples: samples that span the range the
	// optimum is searched in, so the fit interpolates rather than
	// extrapolates.
	Span bool
	// Methods is passed to Predict: nil tries second-order, then
	// dynamic-order; {MethodBestSample} is the no-model baseline.
	Methods []Method
	// Detail keeps every curve's result in EvalResult.Detail.
	Detail bool
}

// EvalResult is how well predictions from a few samples match measured
// throughput curves. Fractions are in [0, 1] (not percent).
type EvalResult struct {
	Axis     Axis   `json:"axis"`
	Sampling string `json:"sampling"` // "1,2,4" or "algorithm2(threshold 0.1, growth 2)"
	Methods  string `json:"methods"`  // the models tried, in order
	// Curves is the number of curves evaluated; Skipped those that lacked
	// a sample level (or, adaptively, gave fewer than three samples).
	Curves  int `json:"curves"`
	Skipped int `json:"skipped"`
	// DroppedRows are rows not used: throughput above the link's bandwidth
	// (measurement errors), not positive, or with a level below 1.
	DroppedRows int `json:"dropped_rows"`
	// Points is the number of measured levels that were predicted (not
	// sampled); MedianAPE is the median over them of
	// |predicted - measured| / measured (0 when Points is 0).
	Points    int     `json:"predicted_points"`
	MedianAPE float64 `json:"median_ape"`
	// P90APE is the 90th percentile of the same errors.
	P90APE float64 `json:"p90_ape"`
	// OptimumWithinOne is the fraction of curves whose predicted optimum
	// (Prediction.Optimum, moved to the nearest measured level on a log
	// scale) is at most one level from the measured one (the level with
	// the highest median throughput); OptimumExact the fraction where it
	// is the same level.
	OptimumWithinOne float64 `json:"optimum_within_one"`
	OptimumExact     float64 `json:"optimum_exact"`
	// OptimumEfficiency is the median over curves of the measured
	// throughput at the predicted optimum over the measured maximum: what
	// following the prediction costs, which on a flat curve matters more
	// than which level is the noisy maximum.
	OptimumEfficiency float64 `json:"optimum_efficiency"`
	// MeanSamples is the mean number of levels sampled per curve.
	MeanSamples float64 `json:"mean_samples"`
	// SplitHalf is the data's own repeatability, the ceiling for any
	// prediction: each point's repeated measurements split alternately
	// (in file order) into two halves, and one half's medians taken as
	// the "prediction" of the other's. Only curves with at least two
	// measurements at every level count; absent if there are none.
	SplitHalf *SplitHalf `json:"split_half,omitempty"`
	// Used counts the curves by the method their prediction used.
	Used map[Method]int `json:"used"`
	// ByDataset is the same evaluation per dataset (FileSize, FileCount).
	ByDataset []DatasetEval `json:"by_dataset"`
	// Detail has one entry per curve when EvalOptions.Detail is set.
	Detail []CurveEval `json:"detail,omitempty"`
}

// SplitHalf is how well one half of a campaign's repeated measurements
// predicts the other: median APE over all points and how often the two
// halves' optima are within one level.
type SplitHalf struct {
	Curves           int     `json:"curves"`
	MedianAPE        float64 `json:"median_ape"`
	OptimumWithinOne float64 `json:"optimum_within_one"`
}

// DatasetEval is EvalResult's figures for the curves of one dataset.
type DatasetEval struct {
	// Path is what the dataset was measured under (TuningRow.Path).
	Path              string  `json:"path,omitempty"`
	FileSize          int64   `json:"file_size"`
	FileCount         int     `json:"file_count"`
	Curves            int     `json:"curves"`
	Points            int     `json:"predicted_points"`
	MedianAPE         float64 `json:"median_ape"`
	OptimumWithinOne  float64 `json:"optimum_within_one"`
	OptimumEfficiency float64 `json:"optimum_efficiency"`
}

// CurveEval is the evaluation of one measured curve.
type CurveEval struct {
	FileSize  int64 `json:"file_size"`
	FileCount int   `json:"file_count"`
	// Fixed are the other two knobs' values, e.g. {"cc": 4, "pp": 1}.
	Fixed     map[Axis]int `json:"fixed"`
	Levels    []int        `json:"levels"`
	Measured  []float64    `json:"measured"` // median throughput per level
	Predicted []float64    `json:"predicted"`
	Sampled   []int        `json:"sampled"`
	APE       []float64    `json:"ape"` // per predicted (unsampled) level, in level order
	// MeasuredOpt and PredictedOpt are levels (not indexes).
	MeasuredOpt  int    `json:"measured_optimum"`
	PredictedOpt int    `json:"predicted_optimum"`
	Method       Method `json:"method"`
	Reason       string `json:"reason"`
}

type curveKey struct {
	path           string // TuningRow.Path: one curve never mixes paths
	size           int64
	count          int
	fixed1, fixed2 int
}

// EvalTuning measures how well Predict, fed a few samples of each measured
// curve, predicts the rest. A curve is one dataset (FileSize, FileCount)
// with the two other knobs fixed, throughput over opt.Axis; repeated
// measurements of a point are reduced to their median, and rows above the
// link bandwidth are dropped as measurement errors. Each curve is sampled
// as opt says (fixed levels, Algorithm 2, or spanning its range),
// predicted by Predict over the range
// of its measured levels with the link bandwidth as cap, and compared with
// the measured medians at the levels that were not sampled.
func EvalTuning(rows []TuningRow, opt EvalOptions) (EvalResult, error) {
	axis := AxisParallelism
	if opt.Axis != "" {
		var err error
		if axis, err = ParseAxis(string(opt.Axis)); err != nil {
			return EvalResult{}, err
		}
	}
	samples := opt.Samples
	if samples == nil {
		samples = []int{1, 2, 4}
	}
	res := EvalResult{Axis: axis, Used: map[Method]int{}}
	if opt.Adaptive && opt.Span {
		return EvalResult{}, fmt.Errorf("model: eval: Adaptive and Span are exclusive")
	}
	switch {
	case opt.Span:
		res.Sampling = "span"
	case opt.Adaptive:
		thr := opt.Threshold
		if thr <= 0 {
			thr = DefaultSlopeThreshold
		}
		sp := Sampler{Growth: opt.Growth}
		res.Sampling = fmt.Sprintf("algorithm2(threshold %g, growth %d)", thr, sp.growth())
	default:
		distinct := map[int]bool{}
		for _, s := range samples {
			if s < 1 {
				return EvalResult{}, fmt.Errorf("model: eval: sample level %d is below 1", s)
			}
			distinct[s] = true
		}
		if len(distinct) < 3 {
			return EvalResult{}, fmt.Errorf("model: eval: need 3 distinct sample levels, have %v", samples)
		}
		res.Sampling = joinInts(samples)
	}
	methods := opt.Methods
	if methods == nil {
		methods = []Method{MethodSecondOrder, MethodDynamicOrder}
	}
	ms := make([]string, len(methods))
	for i, m := range methods {
		ms[i] = string(m)
	}
	res.Methods = strings.Join(append(ms, string(MethodBestSample)), ",")

	// Group: curve -> level -> throughputs.
	type curveData struct {
		pts map[int][]float64
		bw  float64
	}
	curves := map[curveKey]*curveData{}
	aboveLink := 0
	for _, r := range rows {
		above := r.Bandwidth > 0 && r.Throughput*1e6 > r.Bandwidth
		if above {
			aboveLink++
		}
		if !(r.Throughput > 0) || math.IsInf(r.Throughput, 0) || r.Parallelism < 1 || r.Concurrency < 1 || r.Pipelining < 1 || above {
			res.DroppedRows++
			continue
		}
		var level int
		k := curveKey{path: r.Path, size: r.FileSize, count: r.FileCount}
		switch axis {
		case AxisParallelism:
			level, k.fixed1, k.fixed2 = r.Parallelism, r.Concurrency, r.Pipelining
		case AxisConcurrency:
			level, k.fixed1, k.fixed2 = r.Concurrency, r.Parallelism, r.Pipelining
		default:
			level, k.fixed1, k.fixed2 = r.Pipelining, r.Parallelism, r.Concurrency
		}
		c := curves[k]
		if c == nil {
			c = &curveData{pts: map[int][]float64{}}
			curves[k] = c
		}
		c.pts[level] = append(c.pts[level], r.Throughput)
		if bw := r.Bandwidth / 1e6; bw > 0 && (c.bw == 0 || bw < c.bw) {
			c.bw = bw // Bandwidth is bit/s, Throughput Mbit/s
		}
	}
	if 2*aboveLink > len(rows) {
		// A few rows above the link are measurement errors; most of them
		// means the column is not in bit/s (10000 for a 10 Gb/s link).
		return res, fmt.Errorf("model: eval: %d of %d rows measured more than their Bandwidth column allows, read in bit/s (first row: %g bit/s against %g Mbit/s): if Bandwidth is in Mbit/s or Gbit/s, say so in its header, as Bandwidth (Mbit/s)",
			aboveLink, len(rows), rows[0].Bandwidth, rows[0].Throughput)
	}
	keys := make([]curveKey, 0, len(curves))
	for k := range curves {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.path != b.path {
			return a.path < b.path
		}
		if a.size != b.size {
			return a.size < b.size
		}
		if a.count != b.count {
			return a.count < b.count
		}
		if a.fixed1 != b.fixed1 {
			return a.fixed1 < b.fixed1
		}
		return a.fixed2 < b.fixed2
	})

	type acc struct {
		apes            []float64
		curves, within  int
		exact, nsamples int
		effs            []float64
		size            int64
		count           int
	}
	total := &acc{}
	var halfAPE []float64
	halfCurves, halfWithin := 0, 0
	type dsKey struct {
		path        string
		size, count int64
	}
	byDS := map[dsKey]*acc{}
	var dsOrder []dsKey
	for _, k := range keys {
		c := curves[k]
		levels := make([]int, 0, len(c.pts))
		for l := range c.pts {
			levels = append(levels, l)
		}
		sort.Ints(levels)
		meas := make([]float64, len(levels))
		at := map[int]float64{}
		for i, l := range levels {
			meas[i] = median(c.pts[l])
			at[l] = meas[i]
		}
		if a, b, ok := splitHalves(levels, c.pts); ok {
			for i := range a {
				halfAPE = append(halfAPE, math.Abs(a[i]-b[i])/b[i])
			}
			halfCurves++
			if abs(argmax(a)-argmax(b)) <= 1 {
				halfWithin++
			}
		}
		var sn, sth []float64
		switch {
		case opt.Span:
			if len(levels) >= 3 {
				lo, hi := levels[0], levels[len(levels)-1]
				mid := levels[1+nearestLevel(levels[1:len(levels)-1], math.Sqrt(float64(lo)*float64(hi)))]
				for _, l := range []int{lo, mid, hi} {
					sn, sth = append(sn, float64(l)), append(sth, at[l])
				}
			}
		case opt.Adaptive:
			s := Sampler{Threshold: opt.Threshold, Growth: opt.Growth, Max: levels[len(levels)-1]}
			for {
				n, ok := s.Next()
				if !ok {
					break
				}
				th, have := at[n]
				if !have {
					break // the campaign did not measure this level
				}
				if err := s.Add(n, th); err != nil {
					break
				}
			}
			sn, sth = s.Samples()
		default:
			for _, l := range samples {
				if th, have := at[l]; have {
					sn, sth = append(sn, float64(l)), append(sth, th)
				}
			}
			if len(sn) < len(samples) {
				sn = nil
			}
		}
		if len(sn) < 3 {
			res.Skipped++
			continue
		}
		p, err := Predict(sn, sth, PredictOptions{Lo: levels[0], Hi: levels[len(levels)-1], Cap: c.bw, Methods: methods})
		if err != nil {
			return EvalResult{}, fmt.Errorf("model: eval: curve %d x %d (%s): %w", k.size, k.count, k.path, err)
		}
		sampled := map[int]bool{}
		for _, x := range sn {
			sampled[int(x)] = true
		}
		ce := CurveEval{FileSize: k.size, FileCount: k.count, Levels: levels, Measured: meas,
			Method: p.Method, Reason: p.Reason, Fixed: fixedKnobs(axis, k)}
		for _, x := range sn {
			ce.Sampled = append(ce.Sampled, int(x))
		}
		for i, l := range levels {
			pr := p.At(float64(l))
			ce.Predicted = append(ce.Predicted, pr)
			if !sampled[l] {
				ce.APE = append(ce.APE, math.Abs(pr-meas[i])/meas[i])
			}
		}
		mi := argmax(meas)
		pi := nearestLevel(levels, float64(p.Optimum()))
		ce.MeasuredOpt, ce.PredictedOpt = levels[mi], levels[pi]
		eff := meas[pi] / meas[mi]

		dk := dsKey{k.path, k.size, int64(k.count)}
		d := byDS[dk]
		if d == nil {
			d = &acc{size: k.size, count: k.count}
			byDS[dk] = d
			dsOrder = append(dsOrder, dk)
		}
		for _, a := range []*acc{total, d} {
			a.apes = append(a.apes, ce.APE...)
			a.curves++
			a.nsamples += len(sn)
			a.effs = append(a.effs, eff)
			if abs(pi-mi) <= 1 {
				a.within++
			}
			if pi == mi {
				a.exact++
			}
		}
		res.Used[p.Method]++
		if opt.Detail {
			res.Detail = append(res.Detail, ce)
		}
	}
	res.Curves = total.curves
	res.Points = len(total.apes)
	if total.curves > 0 {
		res.MedianAPE = median(total.apes)
		res.P90APE = quantile(total.apes, 0.9)
		res.OptimumWithinOne = float64(total.within) / float64(total.curves)
		res.OptimumExact = float64(total.exact) / float64(total.curves)
		res.OptimumEfficiency = median(total.effs)
		res.MeanSamples = float64(total.nsamples) / float64(total.curves)
	}
	if halfCurves > 0 {
		res.SplitHalf = &SplitHalf{Curves: halfCurves, MedianAPE: median(halfAPE),
			OptimumWithinOne: float64(halfWithin) / float64(halfCurves)}
	}
	for _, dk := range dsOrder {
		d := byDS[dk]
		res.ByDataset = append(res.ByDataset, DatasetEval{
			Path: dk.path, FileSize: d.size, FileCount: d.count, Curves: d.curves, Points: len(d.apes),
			MedianAPE: median(d.apes), OptimumWithinOne: float64(d.within) / float64(d.curves),
			OptimumEfficiency: median(d.effs),
		})
	}
	if res.Curves == 0 {
		return res, fmt.Errorf("model: eval: no curve over %s has the sample levels %s (%d curves skipped; %d of %d rows dropped as not positive or above the link bandwidth)",
			axis, res.Sampling, res.Skipped, res.DroppedRows, len(rows))
	}
	return res, nil
}

// splitHalves returns, per level, the medians of the even- and
// odd-numbered measurements, if every level has at least two.
func splitHalves(levels []int, pts map[int][]float64) ([]float64, []float64, bool) {
	a, b := make([]float64, len(levels)), make([]float64, len(levels))
	for i, l := range levels {
		v := pts[l]
		if len(v) < 2 {
			return nil, nil, false
		}
		var even, odd []float64
		for j, x := range v {
			if j%2 == 0 {
				even = append(even, x)
			} else {
				odd = append(odd, x)
			}
		}
		a[i], b[i] = median(even), median(odd)
	}
	return a, b, true
}

func fixedKnobs(axis Axis, k curveKey) map[Axis]int {
	switch axis {
	case AxisParallelism:
		return map[Axis]int{AxisConcurrency: k.fixed1, AxisPipelining: k.fixed2}
	case AxisConcurrency:
		return map[Axis]int{AxisParallelism: k.fixed1, AxisPipelining: k.fixed2}
	default:
		return map[Axis]int{AxisParallelism: k.fixed1, AxisConcurrency: k.fixed2}
	}
}

// nearestLevel is the index of the level closest to n on a log scale (the
// levels are exponentially spaced), the lower one on a tie.
func nearestLevel(levels []int, n float64) int {
	best, bestD := 0, math.Inf(1)
	for i, l := range levels {
		// Rounded so that a geometric middle such as sqrt(32) ties
		// exactly between 4 and 8 instead of by floating-point noise.
		d := math.Round(math.Abs(math.Log(n/float64(l)))*1e9) / 1e9
		if d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// argmax is the index of the largest value, the first on a tie.
func argmax(v []float64) int {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return best
}

// median of v (mean of the middle two for even lengths); 0 for none.
func median(v []float64) float64 { return quantile(v, 0.5) }

// quantile q of v by linear interpolation between order statistics; 0 for
// an empty v. v is not modified.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	x := q * float64(len(s)-1)
	i := int(math.Floor(x))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (x-float64(i))*(s[i+1]-s[i])
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
