package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// DynamicOrder is the second model of Yin, Yildirim et al. (eq. 8):
// p'(n) = n²/Th(n)² = a n^c + b, so Th(n) = n / sqrt(a n^c + b), where the
// order c is found from the samples instead of being fixed at 2. With
// a, b > 0 the throughput rises without limit when c < 2, levels off at
// 1/sqrt(a) when c = 2 and peaks, then falls, when c > 2.
type DynamicOrder struct {
	A, B, C float64
}

// At returns the modelled throughput at n, or 0 where the model is not
// defined (n <= 0 or a n^c + b <= 0).
func (m DynamicOrder) At(n float64) float64 {
	if n <= 0 {
		return 0
	}
	d := m.A*math.Pow(n, m.C) + m.B
	if !(d > 0) || math.IsInf(d, 0) {
		return 0
	}
	return n / math.Sqrt(d)
}

// Optimum is the integer n in [lo, hi] with the highest modelled throughput
// (the smaller n on a tie). The derivative of Th² has the sign of
// a(2-c) n^c + 2b, which changes at most once, where
// n^c = 2b / (a(c-2)); so the optimum is a range end or an integer
// neighbour of that point. lo below 1 is raised to 1; hi below lo gives lo.
func (m DynamicOrder) Optimum(lo, hi int) int {
	var stat []float64
	if m.A != 0 && m.C != 2 && m.C != 0 {
		if s := 2 * m.B / (m.A * (m.C - 2)); s > 0 {
			stat = append(stat, math.Pow(s, 1/m.C))
		}
	}
	return bestOf(m.At, lo, hi, stat)
}

// ErrNoConvergence reports an iterative solve that did not settle.
var ErrNoConvergence = errors.New("model: iteration did not converge")

// maxOrder bounds the order c searched for: |c| beyond it means the
// samples are effectively a step, which no power law describes usefully.
const maxOrder = 64

// FitDynamicOrder fits p'(n) = n²/Th² = a n^c + b to samples (n[i], th[i]).
// With exactly three samples at distinct levels the fit is exact: c solves
//
//	(n3^c - n1^c) / (n2^c - n1^c) = (p'3 - p'1) / (p'2 - p'1)
//
// by Newton's iteration (safeguarded by bisection, so it always ends), and
// a, b follow linearly. The left side increases with c from 1 to infinity,
// so a solution exists exactly when the right side exceeds 1, that is when
// p' moves monotonically across the three samples; otherwise the error
// wraps ErrDegenerate. With more samples c minimises the squared
// error of the linear fit in n^c (a profile least-squares search over c),
// the counterpart of FitSecondOrder's least squares on n²/Th².
func FitDynamicOrder(n, th []float64) (DynamicOrder, error) {
	ns, ys, err := pSamples(n, th)
	if err != nil {
		return DynamicOrder{}, err
	}
	if len(ns) == 3 {
		return fitDynamic3(ns, ys)
	}
	return fitDynamicLS(ns, ys)
}

// pSamples validates samples and returns them sorted by n with
// y = n²/Th², averaging y over samples at the same n.
func pSamples(n, th []float64) ([]float64, []float64, error) {
	if len(n) != len(th) {
		return nil, nil, fmt.Errorf("model: %d levels but %d throughputs", len(n), len(th))
	}
	sum := map[float64]float64{}
	cnt := map[float64]float64{}
	for i := range n {
		if !(n[i] > 0) || !(th[i] > 0) || math.IsInf(n[i], 0) || math.IsInf(th[i], 0) {
			return nil, nil, fmt.Errorf("%w: sample %d (n=%g, th=%g) is not positive", ErrDegenerate, i, n[i], th[i])
		}
		sum[n[i]] += n[i] * n[i] / (th[i] * th[i])
		cnt[n[i]]++
	}
	if len(sum) < 3 {
		return nil, nil, fmt.Errorf("%w: need 3 distinct levels, have %d", ErrDegenerate, len(sum))
	}
	ns := make([]float64, 0, len(sum))
	for x := range sum {
		ns = append(ns, x)
	}
	sort.Float64s(ns)
	ys := make([]float64, len(ns))
	for i, x := range ns {
		ys[i] = sum[x] / cnt[x]
	}
	return ns, ys, nil
}

func fitDynamic3(ns, ys []float64) (DynamicOrder, error) {
	d21, d31 := ys[1]-ys[0], ys[2]-ys[0]
	if d21 == 0 && d31 == 0 {
		return DynamicOrder{}, fmt.Errorf("%w: throughput proportional to n at all three samples, order undetermined", ErrDegenerate)
	}
	r := d31 / d21
	if !(r > 1) || math.IsInf(r, 0) {
		return DynamicOrder{}, fmt.Errorf("%w: n²/Th² is not monotone over the samples (ratio %.3g), no order fits", ErrDegenerate, r)
	}
	c, _, err := solveOrder(math.Log(ns[1]/ns[0]), math.Log(ns[2]/ns[0]), math.Log(r))
	if err != nil {
		return DynamicOrder{}, err
	}
	x1, x2 := math.Pow(ns[0], c), math.Pow(ns[1], c)
	a := d21 / (x2 - x1)
	m := DynamicOrder{A: a, B: ys[0] - a*x1, C: c}
	if !finite(m.A, m.B, m.C) {
		return DynamicOrder{}, fmt.Errorf("%w: order c=%g gives non-finite coefficients", ErrDegenerate, c)
	}
	return m, nil
}

// solveOrder finds c with phi(c) = ln((e^{cv}-1)/(e^{cu}-1)) = target for
// 0 < u < v (u = ln(n2/n1), v = ln(n3/n1)). phi rises monotonically from 0
// (c → -∞) through ln(v/u) (c = 0) to ∞, so the root is bracketed by
// doubling, then found by Newton's iteration on ln phi(c) = ln target from
// c = 2 (the second-order model), with a false-position (or bisection)
// step whenever Newton would leave the bracket. The logarithm matters for negative orders:
// there phi decays like e^{cu}, on which plain Newton only creeps, while
// ln phi is nearly linear in c. It returns the root and the number of
// iterations.
func solveOrder(u, v, target float64) (float64, int, error) {
	if !(u > 0 && v > u) || !(target > 0) || math.IsInf(target, 0) {
		return 0, 0, fmt.Errorf("%w: no order c for ratio e^%g of levels %g, %g", ErrDegenerate, target, u, v)
	}
	phi := func(c float64) float64 {
		if math.Abs(c)*v < 1e-8 {
			return math.Log(v/u) + c*(v-u)/2
		}
		return lnAbsExpm1(c*v) - lnAbsExpm1(c*u)
	}
	dphi := func(c float64) float64 {
		if math.Abs(c)*v < 1e-8 {
			return (v-u)/2 + c*(v*v-u*u)/12
		}
		return v/(-math.Expm1(-c*v)) - u/(-math.Expm1(-c*u))
	}
	lo, hi := -1.0, 1.0
	for phi(lo) >= target {
		if lo *= 2; lo < -maxOrder {
			return 0, 0, fmt.Errorf("%w: order below %d", ErrDegenerate, -maxOrder)
		}
	}
	for phi(hi) <= target {
		if hi *= 2; hi > maxOrder {
			return 0, 0, fmt.Errorf("%w: order above %d", ErrDegenerate, maxOrder)
		}
	}
	lt := math.Log(target)
	flo, fhi := math.Log(phi(lo))-lt, math.Log(phi(hi))-lt
	c := min(max(2.0, lo), hi)
	for it := 1; it <= 200; it++ {
		p := phi(c)
		f := math.Log(p) - lt
		if math.Abs(f) <= 1e-15 {
			return c, it, nil
		}
		if f < 0 {
			lo, flo = c, f
		} else {
			hi, fhi = c, f
		}
		next := c - f*p/dphi(c)
		if !(next >= lo && next <= hi) {
			// Newton overshot the bracket: a false-position step instead,
			// and bisection if even that fails (it cannot, in exact
			// arithmetic, but the loop must end whatever rounding does).
			next = lo - flo*(hi-lo)/(fhi-flo)
			if !(next > lo && next < hi) {
				next = (lo + hi) / 2
			}
		}
		if math.Abs(next-c) <= 1e-14*(1+math.Abs(c)) {
			return next, it, nil
		}
		c = next
	}
	return c, 200, fmt.Errorf("%w: order c after 200 steps is %g (bracket [%g, %g])", ErrNoConvergence, c, lo, hi)
}

// lnAbsExpm1 is ln|e^x - 1| without overflow for large |x|.
func lnAbsExpm1(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(-math.Exp(-x))
	}
	return math.Log1p(-math.Exp(x))
}

// fitDynamicLS minimises, over c, the squared relative error of the
// weighted least-squares line y = a n^c + b: a coarse scan of c in [-8, 8] (orders beyond that are
// steps, not curves, at the levels used for parallelism), then a golden
// section search around the best point of the scan.
func fitDynamicLS(ns, ys []float64) (DynamicOrder, error) {
	sse := func(c float64) (float64, float64, float64) {
		// Weighted least squares line y = a x + b, weights 1/y².
		var sw, sx, sy, sxx, sxy float64
		xs := make([]float64, len(ns))
		for i, n := range ns {
			w := 1 / (ys[i] * ys[i])
			xs[i] = math.Pow(n, c)
			sw += w
			sx += w * xs[i]
			sy += w * ys[i]
			sxx += w * xs[i] * xs[i]
			sxy += w * xs[i] * ys[i]
		}
		den := sw*sxx - sx*sx
		if !(den > 1e-12*sw*sxx) {
			return math.Inf(1), 0, 0
		}
		a := (sw*sxy - sx*sy) / den
		b := (sy - a*sx) / sw
		var e float64
		for i := range ns {
			d := (ys[i] - a*xs[i] - b) / ys[i]
			e += d * d
		}
		return e, a, b
	}
	const step = 0.125
	bestC, bestE := math.NaN(), math.Inf(1)
	for c := -8.0; c <= 8; c += step {
		if e, _, _ := sse(c); e < bestE {
			bestC, bestE = c, e
		}
	}
	if math.IsNaN(bestC) {
		return DynamicOrder{}, fmt.Errorf("%w: no order gives a usable line", ErrDegenerate)
	}
	lo, hi := bestC-step, bestC+step
	g := (math.Sqrt(5) - 1) / 2
	for hi-lo > 1e-9 {
		c1, c2 := hi-g*(hi-lo), lo+g*(hi-lo)
		e1, _, _ := sse(c1)
		e2, _, _ := sse(c2)
		if e1 <= e2 {
			hi = c2
		} else {
			lo = c1
		}
	}
	c := (lo + hi) / 2
	if e, _, _ := sse(c); !(e <= bestE) {
		c = bestC
	}
	_, a, b := sse(c)
	m := DynamicOrder{A: a, B: b, C: c}
	if !finite(m.A, m.B, m.C) {
		return DynamicOrder{}, fmt.Errorf("%w: non-finite coefficients", ErrDegenerate)
	}
	return m, nil
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
