package multisrc

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MeanSD returns the mean and the sample standard deviation (divisor n-1)
// of xs: the paper's Table 2 metric, one transfer time per run. An empty xs
// gives NaN for both, a single value gives NaN for sd (a spread needs two
// runs; reporting 0 would claim a perfectly stable policy). NaN in xs
// propagates. Two passes, so large times with small spread keep precision.
func MeanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	var ss, comp float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
		comp += d
	}
	// Corrected two-pass: comp is 0 in exact arithmetic.
	ss -= comp * comp / float64(len(xs))
	return mean, math.Sqrt(math.Max(ss, 0) / float64(len(xs)-1))
}

// Compare is the paper's Compare metric (§5.2, Table 3): how often each
// policy was best, good, average, poor or worst among runs made close
// together, which is fairer than Table 2's means when load drifts.
//
// times[r][p] is run group r's transfer time under policy p (adjacent runs,
// one per policy). Within a group a policy's rank is the number of policies
// strictly faster than it, so ties share the better rank. counts[p][k] is
// the number of groups in which policy p had rank k; for five policies k =
// 0..4 are best, good, avg, poor and worst.
//
// The number of policies P is the longest group's length; a shorter group
// is incomplete and skipped, since its ranks would not mean the same. A NaN
// time (a failed run) ranks behind every number, and NaNs tie with each
// other. counts has P rows of P entries each (none for empty input).
func Compare(times [][]float64) (counts [][]int) {
	var np int
	for _, g := range times {
		np = max(np, len(g))
	}
	counts = make([][]int, np)
	for p := range counts {
		counts[p] = make([]int, np)
	}
	// less orders times with NaN after every number.
	less := func(a, b float64) bool {
		if math.IsNaN(a) {
			return false
		}
		return math.IsNaN(b) || a < b
	}
	for _, g := range times {
		if len(g) != np {
			continue
		}
		for p, t := range g {
			rank := 0
			for _, u := range g {
				if less(u, t) {
					rank++
				}
			}
			counts[p][rank]++
		}
	}
	return counts
}

// TTestPaired is the paper's Table 4 test: the one-tailed paired t test of
// H1: mean(a) < mean(b), with a[i] and b[i] measured in the same run group.
// It returns the p-value P(T_{n-1} <= t) with t = mean(d)/(sd(d)/sqrt(n)),
// d = a - b; small means a is significantly faster.
//
// If every difference is the same (sd(d) = 0, t undefined) the evidence is
// unanimous and the p-value is 0 when a's mean is smaller, 1 when it is
// larger and 0.5 when they are equal, instead of NaN. The error wraps
// ErrBadInput for fewer than 2 pairs, lengths that differ, or a value that is
// NaN or infinite.
func TTestPaired(a, b []float64) (float64, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("multisrc: paired t test: %d values against %d: %w", len(a), len(b), ErrBadInput)
	}
	if len(a) < 2 {
		return 0, fmt.Errorf("multisrc: paired t test: need at least 2 pairs, got %d: %w", len(a), ErrBadInput)
	}
	if err := finite(a, b); err != nil {
		return 0, fmt.Errorf("multisrc: paired t test: %w", err)
	}
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	md, sd := MeanSD(d)
	if sd == 0 {
		return unanimous(md), nil
	}
	t := md / (sd / math.Sqrt(float64(len(d))))
	return tCDF(t, float64(len(d)-1), "paired")
}

// TTestWelch is the paper's Table 5 test: the one-tailed unpaired t test of
// H1: mean(a) < mean(b), with Welch's unequal-variance statistic
//
//	t = (mean(a) - mean(b)) / sqrt(va/na + vb/nb)
//
// and Welch-Satterthwaite degrees of freedom, because policies with
// different SDs (Table 2) do not share a variance. It returns P(T_df <= t).
//
// When both samples have zero variance the p-value is 0 if a's mean is
// smaller, 1 if larger and 0.5 if equal, instead of NaN. The error wraps
// ErrBadInput when either sample has fewer than 2 values or a value is NaN
// or infinite.
func TTestWelch(a, b []float64) (float64, error) {
	if len(a) < 2 || len(b) < 2 {
		return 0, fmt.Errorf("multisrc: welch t test: need at least 2 values per sample, got %d and %d: %w", len(a), len(b), ErrBadInput)
	}
	if err := finite(a, b); err != nil {
		return 0, fmt.Errorf("multisrc: welch t test: %w", err)
	}
	ma, sa := MeanSD(a)
	mb, sb := MeanSD(b)
	na, nb := float64(len(a)), float64(len(b))
	u, w := sa*sa/na, sb*sb/nb
	se2 := u + w
	if se2 == 0 {
		return unanimous(ma - mb), nil
	}
	t := (ma - mb) / math.Sqrt(se2)
	// Scale before squaring: df is scale-free, and tiny variances would
	// otherwise underflow to 0/0.
	s := math.Max(u, w)
	u, w = u/s, w/s
	df := (u + w) * (u + w) / (u*u/(na-1) + w*w/(nb-1))
	return tCDF(t, df, "welch")
}

// unanimous is the p-value when the t statistic is undefined because there
// is no spread: diff < 0 is certain support for H1, diff > 0 certain
// against, diff = 0 neither.
func unanimous(diff float64) float64 {
	switch {
	case diff < 0:
		return 0
	case diff > 0:
		return 1
	default:
		return 0.5
	}
}

// tCDF is the lower tail of Student's t with df degrees of freedom at t.
func tCDF(t, df float64, test string) (float64, error) {
	p := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.CDF(t)
	if math.IsNaN(p) {
		return 0, fmt.Errorf("multisrc: %s t test: p-value not computable (t=%g, df=%g): %w", test, t, df, ErrBadInput)
	}
	return p, nil
}

// finite reports a NaN or infinite value, which no t test can use.
func finite(samples ...[]float64) error {
	for s, xs := range samples {
		for i, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("sample %d value %d is %v: %w", s+1, i, x, ErrBadInput)
			}
		}
	}
	return nil
}
