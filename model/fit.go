package model

import (
	"errors"
	"fmt"
	"math"
)

// SecondOrder is the parallel-stream throughput model of Yildirim et al.
// (seed paper 003): Th(n) = n / sqrt(a n² + b n + c). It rises with n, and
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
		for r := 0; r < 3; r++ {
			for k := 0; k < 3; k++ {
				m[r][k] += x[r] * x[k]
			}
			m[r][3] += x[r] * y
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
