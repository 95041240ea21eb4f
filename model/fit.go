package model

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// SecondOrder is the parallel-stream throughput model of Yin, Yildirim et
// al. (eq. 4): Th(n) = n / sqrt(a n² + b n + c). It rises with n, and
// with a > 0 levels off at 1/sqrt(a); with b < 0 it peaks and then falls.
type SecondOrder struct {
	A, B, C float64
}

// At returns the modelled throughput at n (streams, or concurrency).
func (m SecondOrder) At(n float64) float64 {
	d := m.A*n*n + m.B*n + m.C
	if d <= 0 || n <= 0 {
		return 0
	}
	return n / math.Sqrt(d)
}

// Limit is the throughput the model approaches as n grows (infinite when
// a <= 0).
func (m SecondOrder) Limit() float64 {
	if m.A <= 0 {
		return math.Inf(1)
	}
	return 1 / math.Sqrt(m.A)
}

// ErrDegenerate reports samples that do not determine a usable model.
var ErrDegenerate = errors.New("model: degenerate fit")

// FitSecondOrder fits Th(n) = n/sqrt(a n² + b n + c) to samples (n[i],
// th[i]) by least squares on n²/Th² = a n² + b n + c, which is linear in
// a, b and c (exact for three samples). It needs at least three distinct
// n and positive throughputs, and rejects fits that predict a
// non-positive denominator at any sampled n.
func FitSecondOrder(n, th []float64) (SecondOrder, error) {
	return fitSecondOrder(n, th, false)
}

// FitSecondOrderRelative is FitSecondOrder with each sample's squared
// error in n²/Th² weighted by 1/(n²/Th²)², that is least squares on the
// relative error. Measurement noise in throughput is multiplicative (a
// disturbed transfer is off by a fraction, not by a fixed Mb/s), so the
// error of n²/Th² grows with its value, which is largest at large n; the
// plain fit then lets the large-n samples dominate and misses the small-n
// ones by far more than the noise. Weighting by the inverse variance
// undoes that. With exactly three samples both fits are exact and equal.
func FitSecondOrderRelative(n, th []float64) (SecondOrder, error) {
	return fitSecondOrder(n, th, true)
}

func fitSecondOrder(n, th []float64, relative bool) (SecondOrder, error) {
	if len(n) != len(th) {
		return SecondOrder{}, fmt.Errorf("model: %d levels but %d throughputs", len(n), len(th))
	}
	distinct := map[float64]bool{}
	for i := range n {
		if n[i] <= 0 || th[i] <= 0 || math.IsNaN(th[i]) || math.IsInf(th[i], 0) {
			return SecondOrder{}, fmt.Errorf("%w: sample %d (n=%g, th=%g) is not positive", ErrDegenerate, i, n[i], th[i])
		}
		distinct[n[i]] = true
	}
	if len(distinct) < 3 {
		return SecondOrder{}, fmt.Errorf("%w: need 3 distinct levels, have %d", ErrDegenerate, len(distinct))
	}
	// Normal equations of the 3-parameter linear least squares problem.
	var m [3][4]float64
	for i := range n {
		x := [3]float64{n[i] * n[i], n[i], 1}
		y := n[i] * n[i] / (th[i] * th[i])
		w := 1.0
		if relative {
			w = 1 / (y * y)
		}
		for r := 0; r < 3; r++ {
			for k := 0; k < 3; k++ {
				m[r][k] += w * x[r] * x[k]
			}
			m[r][3] += w * x[r] * y
		}
	}
	sol, ok := solve3(m)
	if !ok {
		return SecondOrder{}, fmt.Errorf("%w: singular system", ErrDegenerate)
	}
	fit := SecondOrder{A: sol[0], B: sol[1], C: sol[2]}
	for i := range n {
		if fit.A*n[i]*n[i]+fit.B*n[i]+fit.C <= 0 {
			return fit, fmt.Errorf("%w: denominator not positive at n=%g", ErrDegenerate, n[i])
		}
	}
	return fit, nil
}

// solve3 solves a 3×3 linear system given as an augmented matrix, by
// Gaussian elimination with partial pivoting.
func solve3(m [3][4]float64) ([3]float64, bool) {
	for col := 0; col < 3; col++ {
		p := col
		for r := col + 1; r < 3; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if math.Abs(m[p][col]) < 1e-300 {
			return [3]float64{}, false
		}
		m[col], m[p] = m[p], m[col]
		for r := 0; r < 3; r++ {
			if r == col {
				continue
			}
			f := m[r][col] / m[col][col]
			for k := col; k < 4; k++ {
				m[r][k] -= f * m[col][k]
			}
		}
	}
	return [3]float64{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]}, true
}

// Optimum is the integer n in [lo, hi] where the model's throughput is
// highest (the smaller n on a tie: a stream that adds nothing is not worth
// opening). The derivative of Th² is n(bn + 2c)/(a n² + b n + c)², so it
// changes sign at most once, at n* = -2c/b: a peak when b < 0 < c, a
// trough otherwise. The answer is therefore one of the range ends or an
// integer neighbour of n*. lo below 1 is raised to 1; hi below lo gives lo.
// Meant for a usable fit (a > 0, c > 0; see Predict); for other
// coefficients it still returns the best of those candidates, never NaN.
func (m SecondOrder) Optimum(lo, hi int) int {
	var stat []float64
	if m.B != 0 {
		stat = append(stat, -2*m.C/m.B)
	}
	return bestOf(m.At, lo, hi, stat)
}

// bestOf returns the integer in [lo, hi] with the highest f among the range
// ends and the integer neighbours of the stationary points stat (those
// outside the range or not finite are ignored); ties (within 1e-9,
// relative) go to the smaller n.
func bestOf(f func(float64) float64, lo, hi int, stat []float64) int {
	lo = max(lo, 1)
	hi = max(hi, lo)
	cands := []int{lo, hi}
	for _, s := range stat {
		if math.IsNaN(s) || math.IsInf(s, 0) || s < float64(lo) || s > float64(hi) {
			continue
		}
		cands = append(cands, int(math.Floor(s)), int(math.Ceil(s)))
	}
	for i := range cands {
		cands[i] = min(max(cands[i], lo), hi)
	}
	sort.Ints(cands)
	// In increasing n, a candidate must beat the best so far by more than
	// rounding error: a flat curve's optimum is its first level, not
	// whichever end floating point happens to favour.
	best, bestTh := lo, f(float64(lo))
	for _, n := range cands {
		if th := f(float64(n)); th > bestTh*(1+1e-9) {
			best, bestTh = n, th
		}
	}
	return best
}
