package forecast

import "math"

// Degree is eq. 4: the aggregation degree M, the number of samples one
// transfer spans, = transfer time (s) × sampling frequency (Hz), rounded
// to the nearest integer and at least 1 (100 s at 0.1 Hz: 10). It "need be
// only approximate" (§4.1.1): it sets the time scale at which the series is
// predicted. A time or frequency that is not positive (or NaN) gives 1, no
// aggregation; a product beyond the int range gives math.MaxInt, which
// Aggregate reads as one block of everything.
func Degree(transferSeconds, hz float64) int {
	if !(transferSeconds > 0) || !(hz > 0) {
		return 1
	}
	r := math.Round(transferSeconds * hz)
	switch {
	case r >= float64(math.MaxInt):
		return math.MaxInt
	case r < 1:
		return 1
	}
	return int(r)
}

// Aggregate is eqs. 5 and 6: it cuts c into k = ceil(n/m) non-overlapping
// blocks aligned to the end of c (the last block is the last m values) and
// returns each block's mean a_i and population standard deviation s_i
// (divided by the block's size), oldest first. These are the interval
// series whose next values Interval predicts.
//
// Non-finite values of c are removed first (n counts the finite ones). When
// m does not divide n, the first block holds only the n mod m oldest
// values (the paper's index falls before c_1 there): its mean and SD are
// over the values that exist. m < 1 is read as 1, which gives a = c and
// s all 0. Both results are nil when c has no finite value.
func Aggregate(c []float64, m int) (a, s []float64) {
	m = max(m, 1)
	v := make([]float64, 0, len(c))
	for _, x := range c {
		if finite(x) {
			v = append(v, x)
		}
	}
	n := len(v)
	if n == 0 {
		return nil, nil
	}
	k, r := n/m, n%m // k full blocks, and r values before them
	if r > 0 {
		k++
	}
	a, s = make([]float64, 0, k), make([]float64, 0, k)
	add := func(b []float64) {
		mu, sd := meanSD(b)
		a, s = append(a, mu), append(s, sd)
	}
	if r > 0 {
		add(v[:r])
	}
	for i := r; i < n; i += m {
		add(v[i : i+m])
	}
	return a, s
}

// meanSD is the mean and population standard deviation of finite xs (not
// empty). A flat block gives exactly its value and 0; huge values are
// rescaled instead of overflowing.
func meanSD(xs []float64) (mu, sd float64) {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if lo == hi {
		return lo, 0
	}
	if mu, sd = plainMeanSD(xs, 1); finite(mu) && finite(sd) {
		return mu, sd
	}
	scale := max(math.Abs(lo), math.Abs(hi))
	mu, sd = plainMeanSD(xs, scale)
	return clampFinite(mu * scale), clampFinite(sd * scale)
}

// plainMeanSD is mean and population SD of xs/scale.
func plainMeanSD(xs []float64, scale float64) (mu, sd float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mu += x / scale
	}
	mu /= n
	var ss float64
	for _, x := range xs {
		d := x/scale - mu
		ss += d * d
	}
	return mu, math.Sqrt(ss / n)
}

// Interval predicts the mean and the standard deviation of bandwidth over
// the next interval of m samples (§4.1.1-4.1.2): Aggregate c at degree m,
// then Predict the next interval mean from a and the next interval SD from
// s, each with a Forecaster scoring over window forecasts (<= 0: default).
// These are the Mean and SD a multi-source plan needs for a link. NaN and
// ±Inf samples are skipped; ok is false when c has no finite value. sd is
// never negative.
func Interval(c []float64, m int, window int) (mean, sd float64, ok bool) {
	a, s := Aggregate(c, m)
	if len(a) == 0 {
		return 0, 0, false
	}
	mean, _, ok = Predict(a, window)
	sd, _, _ = Predict(s, window)
	return mean, max(sd, 0), ok
}
