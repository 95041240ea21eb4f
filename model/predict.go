package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Method names the curve a Prediction follows.
type Method string

// The methods Predict can use, in the order it tries them by default.
const (
	// MethodSecondOrder is SecondOrder, eq. 4 of Yin, Yildirim et al.: the model
	// its optimisation service uses.
	MethodSecondOrder Method = "second-order"
	// MethodDynamicOrder is DynamicOrder, eq. 8: more flexible, so tried
	// when the second-order fit is unusable.
	MethodDynamicOrder Method = "dynamic-order"
	// MethodBestSample is the last resort: no model, the best sample's n
	// is the answer and throughput elsewhere is read off the samples.
	MethodBestSample Method = "best-sample"
)

// DefaultMaxLevel is the upper end of the range Predict searches when the
// caller gives none: 32, the top of the usual doubling grid of tuning
// campaigns (1, 2, 4, ..., 32, as in the XSEDE Stampede->Gordon runs).
const DefaultMaxLevel = 32

// DefaultMaxResidual is how far (relative) a fitted curve may miss one of
// its own samples before Predict calls the fit wildly off. Three samples
// are fitted exactly, so this only bites with more samples; it is a guard
// against nonsense, not a tuning knob, hence the generous half.
const DefaultMaxResidual = 0.5

// PredictOptions tunes Predict. The zero value is usable.
type PredictOptions struct {
	// Lo and Hi bound the levels (streams, concurrency, ...) the caller
	// may use; the curve must be real and positive over the whole range
	// and Optimum stays inside it. 0 means 1 and max(DefaultMaxLevel,
	// the largest sample).
	Lo, Hi int
	// Cap is the most throughput physically possible, in the samples' unit
	// (for example the link capacity); predictions are clipped to it. 0
	// means no cap.
	Cap float64
	// Methods are the models to try, in order; nil means second-order, then
	// dynamic-order. The best sample is always the last resort.
	Methods []Method
	// MaxResidual is the largest relative miss of a fit at one of its
	// samples (0 means DefaultMaxResidual).
	MaxResidual float64
	// Noise is the relative noise of one sample that Bound assumes where
	// the fit's residuals cannot tell it (0 means DefaultNoise).
	Noise float64
}

// DefaultNoise is the relative noise of one sample assumed when the fit
// cannot measure it, and the least uncertainty Bound gives a fit: three
// samples fit the three-parameter models exactly, so their residuals are
// zero whatever the noise. ±5% is the noise the tests of the models are
// built on (TestPredictNoise) and the spread seen between repeated
// samples of one path on loopback and the emulated WAN; on the testbed
// repeated samples agree within 1% (docs/results/estimate.md), so it is
// not too tight.
const DefaultNoise = 0.05

// Prediction is a throughput curve over one knob (parallel streams,
// concurrency or pipelining) built from a few samples, with the reason it
// is the curve it is. Callers show Reason to users.
type Prediction struct {
	Method  Method       `json:"method"`
	Second  SecondOrder  `json:"second_order"`  // the fit, when Method is MethodSecondOrder
	Dynamic DynamicOrder `json:"dynamic_order"` // the fit, when Method is MethodDynamicOrder
	// Reason says which model was used and, when it was not the first
	// choice, why the others were rejected, for example
	// "second-order fit degenerate (b>0, c<0: throughput would fall, then
	// rise); dynamic-order fit degenerate (...): using best sample n=4".
	Reason string `json:"reason"`
	// Lo and Hi are the range the curve was checked over; Cap the
	// throughput cap (0 if none).
	Lo  int     `json:"lo"`
	Hi  int     `json:"hi"`
	Cap float64 `json:"cap"`
	// N and Th are the usable samples, sorted by n (throughputs at a
	// repeated n averaged).
	N  []float64 `json:"n"`
	Th []float64 `json:"th"`
	// Spread is the fit's residual standard error, relative: the root
	// of the sum of squared relative misses at the samples it was fitted
	// to over DoF, those samples less the model's three parameters.
	// With DoF 0 (three samples: an exact fit) it is 0 and says nothing.
	Spread float64 `json:"spread"`
	DoF    int     `json:"dof"`
	// Noise is PredictOptions.Noise (DefaultNoise when not given).
	Noise float64 `json:"noise"`
}

// Predict fits a throughput curve to samples (n[i], th[i]) and says why it
// is the curve it is. It tries, in order (opt.Methods):
//
//  1. the second-order model, FitSecondOrderRelative (exact for three
//     samples, least squares on the relative error for more), accepted
//     only if a > 0 (a finite, positive limit), c > 0 (real from the first
//     stream on, and never falling and then rising; b < 0 is fine, it is
//     a peak), a n² + b n + c > 0 over all of [Lo, Hi], and no sample is
//     missed by more than MaxResidual;
//  2. the dynamic-order model, FitDynamicOrder, accepted on the same terms
//     (a n^c + b > 0 over [Lo, Hi], no fall-then-rise, residuals);
//  3. the best sample: no model.
//
// With five or more sampled levels a single outlier (see outlierFloor) is
// dropped and the fit redone. Samples that are not positive and finite
// are ignored. Each of these is said in Reason. Predict fails only when
// no sample is usable or the options are malformed.
func Predict(n, th []float64, opt PredictOptions) (Prediction, error) {
	if len(n) != len(th) {
		return Prediction{}, fmt.Errorf("model: predict: %d levels but %d throughputs", len(n), len(th))
	}
	var notes []string
	var fn, fth []float64
	for i := range n {
		if !(n[i] > 0) || !(th[i] > 0) || math.IsInf(n[i], 0) || math.IsInf(th[i], 0) {
			notes = append(notes, fmt.Sprintf("ignored sample n=%g th=%g", n[i], th[i]))
			continue
		}
		fn, fth = append(fn, n[i]), append(fth, th[i])
	}
	if len(fn) == 0 {
		return Prediction{}, fmt.Errorf("model: predict: no usable sample among %d", len(n))
	}
	p := Prediction{Lo: opt.Lo, Hi: opt.Hi, Cap: opt.Cap, Noise: opt.Noise}
	if p.Noise == 0 {
		p.Noise = DefaultNoise
	}
	if !(p.Noise > 0) || math.IsInf(p.Noise, 0) {
		return Prediction{}, fmt.Errorf("model: predict: noise %g is not a positive number", opt.Noise)
	}
	p.N, p.Th = averageSamples(fn, fth)
	if p.Lo <= 0 {
		p.Lo = 1
	}
	if p.Hi <= 0 {
		p.Hi = max(DefaultMaxLevel, int(math.Ceil(p.N[len(p.N)-1])))
	}
	if p.Hi < p.Lo {
		return Prediction{}, fmt.Errorf("model: predict: range [%d, %d] is empty", opt.Lo, opt.Hi)
	}
	if opt.Cap < 0 || math.IsNaN(opt.Cap) {
		return Prediction{}, fmt.Errorf("model: predict: cap %g is not a non-negative number", opt.Cap)
	}
	maxRes := opt.MaxResidual
	if maxRes <= 0 {
		maxRes = DefaultMaxResidual
	}
	methods := opt.Methods
	if methods == nil {
		methods = []Method{MethodSecondOrder, MethodDynamicOrder}
	}
	for _, m := range methods {
		if m != MethodSecondOrder && m != MethodDynamicOrder && m != MethodBestSample {
			return Prediction{}, fmt.Errorf("model: predict: unknown method %q", m)
		}
	}
	for _, m := range methods {
		if m == MethodBestSample {
			break // listing it only stops the search early
		}
		q, _, why := p.fit(m, fn, fth, maxRes)
		var note string
		if len(p.N) >= outlierMinLevels {
			// One sample far off a curve that fits the others well is
			// more likely a disturbed transfer than the curve's shape.
			if i, q2, miss, ok := p.dropOutlier(m, fn, fth, maxRes); ok {
				q, why = q2, ""
				note = fmt.Sprintf("ignored the sample at n=%g as an outlier (%+.0f%% off the fit of the others)", fn[i], 100*miss)
			}
		}
		if why == "" {
			if note != "" {
				notes = append(notes, note)
			}
			q.Reason = strings.Join(append(notes, q.Reason), "; ")
			return q, nil
		}
		notes = append(notes, fmt.Sprintf("%s fit degenerate (%s)", m, why))
	}
	p.Method = MethodBestSample
	if v := valley(p.N, p.Th); v > 0 {
		notes = append(notes, fmt.Sprintf("samples dip at n=%g", v))
	}
	last := fmt.Sprintf("using best sample n=%d", p.Optimum())
	if len(notes) == 0 {
		p.Reason = last
	} else {
		p.Reason = strings.Join(notes, "; ") + ": " + last
	}
	return p, nil
}

// fitProblem turns a fit error into a phrase for Reason.
func fitProblem(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	for _, e := range []error{ErrDegenerate, ErrNoConvergence} {
		if errors.Is(err, e) {
			s = strings.TrimPrefix(s, e.Error()+": ")
		}
	}
	return s
}

// fit fits method m to the samples and checks the result over p's range.
// It returns p with the fit filled in (Method, coefficients and Reason),
// the fitted curve (nil when the fit gave no coefficients) and, when the
// fit is not usable, why.
func (p Prediction) fit(m Method, n, th []float64, maxRes float64) (Prediction, func(float64) float64, string) {
	levels, _ := averageSamples(n, th)
	used := fmt.Sprintf("%d samples (n=%s)", len(n), joinLevels(levels))
	p.Method = m
	switch m {
	case MethodSecondOrder:
		fit, err := FitSecondOrderRelative(n, th)
		if err != nil {
			return p, nil, fitProblem(err)
		}
		p.Second = fit
		p.Reason = "second-order fit of " + used
		p.Spread, p.DoF = spread(fit.At, n, th)
		return p, fit.At, p.checkSecond(fit, n, th, maxRes)
	default:
		fit, err := FitDynamicOrder(n, th)
		if err != nil {
			return p, nil, fitProblem(err)
		}
		p.Dynamic = fit
		p.Reason = fmt.Sprintf("dynamic-order fit (order %.2f) of %s", fit.C, used)
		p.Spread, p.DoF = spread(fit.At, n, th)
		return p, fit.At, p.checkDynamic(fit, n, th, maxRes)
	}
}

// Outlier rejection. With at least outlierMinLevels distinct levels (so
// that the others still over-determine the curve), sample i is an outlier
// when the fit without it is usable, misses none of the other samples by
// more than some spread, and misses sample i by more than both
// outlierFactor × spread and outlierFloor. The fit of all samples is no
// guide: three parameters bend to spread one bad sample's error over all
// six. The floor is what keeps noise from being called an outlier: at the
// ends of the range the fit of the others extrapolates, and with ±5% noise
// on every sample that alone misses an end sample by up to ~15% (see
// TestPredictOutlier); a quarter is the round figure clear of it, and a
// disturbed transfer (half or double the throughput) is far beyond it.
// 3 is the usual robust-statistics cut.
const (
	outlierMinLevels = 5
	outlierFactor    = 3
	outlierFloor     = 0.25
)

// dropOutlier tries the fit of method m without each sample in turn and
// returns the outlier (by the rule above) whose removal leaves the most
// consistent fit: its index, that fit, and how far the sample is off it
// relative to the fit ((measured - fitted) / fitted). Only one sample is
// ever dropped: two outliers among five or six samples are just noise.
func (p Prediction) dropOutlier(m Method, n, th []float64, maxRes float64) (int, Prediction, float64, bool) {
	bestI, bestSpread, bestMiss := -1, math.Inf(1), 0.0
	var best Prediction
	for i := range n {
		rn := append(append([]float64(nil), n[:i]...), n[i+1:]...)
		rth := append(append([]float64(nil), th[:i]...), th[i+1:]...)
		q, f, why := p.fit(m, rn, rth, maxRes)
		if why != "" {
			continue
		}
		spread := 0.0
		for j := range rn {
			spread = math.Max(spread, math.Abs(rth[j]-f(rn[j]))/f(rn[j]))
		}
		fi := f(n[i])
		if !(fi > 0) {
			continue
		}
		miss := (th[i] - fi) / fi
		if math.Abs(miss) > outlierFloor && math.Abs(miss) > outlierFactor*spread && spread < bestSpread {
			bestI, bestSpread, bestMiss, best = i, spread, miss, q
		}
	}
	return bestI, best, bestMiss, bestI >= 0
}

func (p *Prediction) checkSecond(m SecondOrder, n, th []float64, maxRes float64) string {
	switch {
	case !finite(m.A, m.B, m.C):
		return "non-finite coefficients"
	case m.A <= 0:
		return "a<=0: no finite throughput limit"
	case m.C <= 0 && m.B > 0:
		return "b>0, c<0: throughput would fall, then rise"
	case m.C <= 0:
		return "c<=0: curve not real at small n"
	}
	// a n² + b n + c is smallest at -b/2a or at a range end.
	lo, hi := float64(p.Lo), float64(p.Hi)
	at := lo
	if v := -m.B / (2 * m.A); v > lo && v < hi {
		at = v
	} else if m.A*hi*hi+m.B*hi+m.C < m.A*lo*lo+m.B*lo+m.C {
		at = hi
	}
	if m.A*at*at+m.B*at+m.C <= 0 {
		return fmt.Sprintf("a n²+b n+c <= 0 near n=%.1f: curve not real there", at)
	}
	return residualProblem(m.At, n, th, maxRes)
}

func (p *Prediction) checkDynamic(m DynamicOrder, n, th []float64, maxRes float64) string {
	if !finite(m.A, m.B, m.C) {
		return "non-finite coefficients"
	}
	if m.A == 0 {
		return "a=0: order undetermined"
	}
	// a n^c + b is monotone in n: positive over the range iff at its ends.
	for _, x := range []int{p.Lo, p.Hi} {
		if !(m.A*math.Pow(float64(x), m.C)+m.B > 0) {
			return fmt.Sprintf("a n^c+b <= 0 at n=%d: curve not real there", x)
		}
	}
	slope := func(x int) float64 { return m.A*(2-m.C)*math.Pow(float64(x), m.C) + 2*m.B }
	if slope(p.Lo) < 0 && slope(p.Hi) > 0 {
		return fmt.Sprintf("order %.2f: throughput would fall, then rise", m.C)
	}
	return residualProblem(m.At, n, th, maxRes)
}

// modelParams is the number of parameters of both fitted models.
const modelParams = 3

// spread returns the relative residual standard error of curve f at the
// samples and its degrees of freedom (0, 0 for an exact fit of three).
func spread(f func(float64) float64, n, th []float64) (float64, int) {
	dof := len(n) - modelParams
	if dof <= 0 {
		return 0, 0
	}
	ss := 0.0
	for i := range n {
		r := (th[i] - f(n[i])) / f(n[i])
		ss += r * r
	}
	return math.Sqrt(ss / float64(dof)), dof
}

func residualProblem(f func(float64) float64, n, th []float64, maxRes float64) string {
	worst, at := 0.0, 0.0
	for i := range n {
		if e := math.Abs(f(n[i])-th[i]) / th[i]; e > worst {
			worst, at = e, n[i]
		}
	}
	if worst > maxRes {
		return fmt.Sprintf("misses the sample at n=%g by %.0f%%", at, 100*worst)
	}
	return ""
}

// At returns the predicted throughput at n (clipped to Cap). For
// MethodBestSample it interpolates the samples linearly in ln n and holds
// the end samples' values beyond them: no model, so no extrapolated trend.
func (p Prediction) At(n float64) float64 {
	var v float64
	switch p.Method {
	case MethodSecondOrder:
		v = p.Second.At(n)
	case MethodDynamicOrder:
		v = p.Dynamic.At(n)
	default:
		v = p.interpolate(n)
	}
	if p.Cap > 0 && v > p.Cap {
		v = p.Cap
	}
	return v
}

func (p Prediction) interpolate(n float64) float64 {
	k := len(p.N)
	switch {
	case k == 0 || n <= 0:
		return 0
	case n <= p.N[0]:
		return p.Th[0]
	case n >= p.N[k-1]:
		return p.Th[k-1]
	}
	i := sort.SearchFloat64s(p.N, n) // p.N[i-1] < n <= p.N[i]
	w := math.Log(n/p.N[i-1]) / math.Log(p.N[i]/p.N[i-1])
	return p.Th[i-1] + w*(p.Th[i]-p.Th[i-1])
}

// Optimum is the integer level in [Lo, Hi] with the highest predicted
// throughput; on a tie, including a curve clipped flat at Cap, the
// smallest such level. For MethodBestSample it is the best sample's level
// (clamped into the range).
func (p Prediction) Optimum() int {
	var m int
	var f func(float64) float64
	switch p.Method {
	case MethodSecondOrder:
		m, f = p.Second.Optimum(p.Lo, p.Hi), p.Second.At
	case MethodDynamicOrder:
		m, f = p.Dynamic.Optimum(p.Lo, p.Hi), p.Dynamic.At
	default:
		best := 0
		for i := range p.Th {
			if p.Th[i] > p.Th[best] {
				best = i
			}
		}
		if len(p.N) == 0 {
			return max(p.Lo, 1)
		}
		return min(max(int(math.Round(p.N[best])), p.Lo), p.Hi)
	}
	if p.Cap > 0 && f(float64(m)) > p.Cap {
		// The valid curves rise up to their optimum, so the first level at
		// the cap is found by bisection on [Lo, m].
		lo, hi := p.Lo, m
		for lo < hi {
			mid := (lo + hi) / 2
			if f(float64(mid)) >= p.Cap {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		m = lo
	}
	return m
}

// averageSamples sorts samples by n, averaging throughputs at the same n.
func averageSamples(n, th []float64) ([]float64, []float64) {
	sum, cnt := map[float64]float64{}, map[float64]float64{}
	for i := range n {
		sum[n[i]] += th[i]
		cnt[n[i]]++
	}
	ns := make([]float64, 0, len(sum))
	for x := range sum {
		ns = append(ns, x)
	}
	sort.Float64s(ns)
	ths := make([]float64, len(ns))
	for i, x := range ns {
		ths[i] = sum[x] / cnt[x]
	}
	return ns, ths
}

// valley returns the first sampled level whose throughput is below both
// neighbours' (a shape no unimodal model follows), or 0.
func valley(n, th []float64) float64 {
	for i := 1; i+1 < len(n); i++ {
		if th[i] < th[i-1] && th[i] < th[i+1] {
			return n[i]
		}
	}
	return 0
}

func joinLevels(n []float64) string {
	s := make([]string, len(n))
	for i, x := range n {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}
