package multisrc

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestMeanSD(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name     string
		xs       []float64
		mean, sd float64
	}{
		// Sum 40 / 8 = 5; squared deviations 9+1+1+1+0+0+4+16 = 32;
		// sample variance 32/7, sd = sqrt(32/7) = 2.138089935.
		{"textbook", []float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, math.Sqrt(32.0 / 7)},
		// Deviations -1, 0, 1: variance 2/2 = 1 despite the offset.
		{"large offset", []float64{1e9 + 1, 1e9 + 2, 1e9 + 3}, 1e9 + 2, 1},
		{"constant", []float64{3, 3, 3}, 3, 0},
		{"single", []float64{7}, 7, nan},
		{"empty", nil, nan, nan},
		{"NaN propagates", []float64{1, nan}, nan, nan},
	}
	for _, tt := range tests {
		m, s := MeanSD(tt.xs)
		if !near(m, tt.mean, 1e-9) || !near(s, tt.sd, 1e-9) {
			t.Errorf("%s: MeanSD = %v, %v; want %v, %v", tt.name, m, s, tt.mean, tt.sd)
		}
	}
}

func TestCompare(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name  string
		times [][]float64
		want  [][]int
	}{
		{
			// One group of the paper's five policies (BOS, EAS, MS,
			// NTSS, TCS) with Fig. 3's mean times: TCS best, NTSS good,
			// MS avg, BOS poor, EAS worst.
			name:  "five policies",
			times: [][]float64{{74.82, 130.37, 67.28, 65.38, 63.70}},
			want: [][]int{
				{0, 0, 0, 1, 0}, // BOS
				{0, 0, 0, 0, 1}, // EAS
				{0, 0, 1, 0, 0}, // MS
				{0, 1, 0, 0, 0}, // NTSS
				{1, 0, 0, 0, 0}, // TCS
			},
		},
		{
			// Rank = number strictly faster, so ties share the better
			// rank:
			//   {1, 2, 3}     → 0, 1, 2
			//   {2, 2, 1}     → 1, 1, 0
			//   {5, 5, 5}     → 0, 0, 0
			//   {NaN, 1, NaN} → 1, 0, 1 (a failed run ranks last; NaNs tie)
			//   {1, 2}        → incomplete: skipped
			name:  "ties, NaN and a short group",
			times: [][]float64{{1, 2, 3}, {2, 2, 1}, {5, 5, 5}, {nan, 1, nan}, {1, 2}},
			want: [][]int{
				{2, 2, 0}, // policy 0: ranks 0, 1, 0, 1
				{2, 2, 0}, // policy 1: ranks 1, 1, 0, 0
				{2, 1, 1}, // policy 2: ranks 2, 0, 0, 1
			},
		},
		{name: "empty", times: nil, want: [][]int{}},
		{name: "empty groups", times: [][]float64{{}, {}}, want: [][]int{}},
	}
	for _, tt := range tests {
		got := Compare(tt.times)
		if !slices.EqualFunc(got, tt.want, slices.Equal) {
			t.Errorf("%s: Compare = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The expected p-values below were computed independently of gonum, in
// 30-digit arithmetic with Python's mpmath, by two formulas that agree to
// all printed digits:
//
//	lower tail = I_{df/(df+t²)}(df/2, 1/2) / 2   for t < 0 (betainc)
//	lower tail = ∫_{-∞}^{t} Γ((df+1)/2)/(√(dfπ) Γ(df/2)) (1+u²/df)^{-(df+1)/2} du
//
// and, where df is 1 or 2, by the closed forms
//
//	df = 1: 1/2 + atan(t)/π
//	df = 2: 1/2 + t/(2√(2+t²))
var (
	// Transfer times (s) of two policies over five adjacent run groups.
	timesA = []float64{63.7, 61.3, 62.5, 64.0, 60.8}
	timesB = []float64{67.3, 63.0, 62.1, 66.4, 64.9}
	timesC = []float64{74.8, 70.2, 95.1, 60.3, 73.4, 81.0}
)

func TestTTestPaired(t *testing.T) {
	tests := []struct {
		name string
		a, b []float64
		want float64
	}{
		{
			// d = a-b = -3.6, -1.7, 0.4, -2.4, -4.1; mean -11.4/5 =
			// -2.28; squared deviations 1.7424 + 0.3364 + 7.1824 +
			// 0.0144 + 3.3124 = 12.588; sd = sqrt(12.588/4) = 1.773979;
			// t = -2.28/(1.773979/sqrt 5) = -2.873899, df = 4.
			name: "a faster", a: timesA, b: timesB,
			want: 0.022645190969165425,
		},
		{
			// t = +2.873899: 1 - 0.022645190969165425.
			name: "a slower", a: timesB, b: timesA,
			want: 0.97735480903083457,
		},
		{
			// d = -1, -2, -3: mean -2, sd 1, t = -2/(1/√3) = -√12, df 2:
			// 1/2 - √12/(2√14) = 1/2 - √(3/14).
			name: "df 2 closed form", a: []float64{0, 0, 0}, b: []float64{1, 2, 3},
			want: 0.5 - math.Sqrt(3.0/14),
		},
		{
			// d = -1, -3: mean -2, sd √2, t = -2/(√2/√2) = -2, df 1:
			// 1/2 + atan(-2)/π = 0.147583617650433.
			name: "df 1 closed form", a: []float64{0, 0}, b: []float64{1, 3},
			want: 0.5 + math.Atan(-2)/math.Pi,
		},
		// Zero variance of the differences: no t; the sign decides.
		{name: "constant d < 0", a: []float64{1, 2, 3}, b: []float64{2, 3, 4}, want: 0},
		{name: "constant d > 0", a: []float64{2, 3, 4}, b: []float64{1, 2, 3}, want: 1},
		{name: "identical", a: []float64{1, 2, 3}, b: []float64{1, 2, 3}, want: 0.5},
	}
	for _, tt := range tests {
		got, err := TTestPaired(tt.a, tt.b)
		if err != nil || !near(got, tt.want, 1e-12) {
			t.Errorf("%s: TTestPaired = %.17g, %v; want %.17g", tt.name, got, err, tt.want)
		}
	}
}

func TestTTestWelch(t *testing.T) {
	tests := []struct {
		name string
		a, b []float64
		want float64
	}{
		{
			// mean A = 312.3/5 = 62.46, var A = 8.012/4 = 2.003;
			// mean C = 454.8/6 = 75.8, var C = 677.9/5 = 135.58.
			// u = 2.003/5 = 0.4006, w = 135.58/6 = 22.596667;
			// t = (62.46-75.8)/sqrt(22.997267) = -2.781748;
			// df = 22.997267²/(0.4006²/4 + 22.596667²/5) = 5.176820.
			name: "a faster", a: timesA, b: timesC,
			want: 0.018690142551142167,
		},
		{
			name: "a slower", a: timesC, b: timesA,
			want: 0.98130985744885783,
		},
		{
			// t = -1.949929, df = 6.829532.
			name: "equal sizes", a: timesA, b: timesB,
			want: 0.046605079118840065,
		},
		{
			// One sample constant: u = 0, w = 1/3; t = -2/√(1/3) = -√12;
			// df = (1/3)²/((1/3)²/2) = 2: 1/2 - √(3/14) as above.
			name: "one variance zero", a: []float64{5, 5, 5}, b: []float64{6, 7, 8},
			want: 0.5 - math.Sqrt(3.0/14),
		},
		// Both samples constant: no t; the sign of the difference decides.
		{name: "constant a < b", a: []float64{5, 5, 5}, b: []float64{7, 7}, want: 0},
		{name: "constant a > b", a: []float64{7, 7}, b: []float64{5, 5, 5}, want: 1},
		{name: "constant a = b", a: []float64{5, 5}, b: []float64{5, 5, 5}, want: 0.5},
		{
			// Tiny spreads (variance 1e-300, squared 1e-600) must not
			// underflow df to 0/0: same data as
			// "one variance zero" scaled by 1e-150 (t and df are
			// scale-free).
			name: "tiny variances",
			a:    []float64{5e-150, 5e-150, 5e-150}, b: []float64{6e-150, 7e-150, 8e-150},
			want: 0.5 - math.Sqrt(3.0/14),
		},
	}
	for _, tt := range tests {
		got, err := TTestWelch(tt.a, tt.b)
		if err != nil || !near(got, tt.want, 1e-12) {
			t.Errorf("%s: TTestWelch = %.17g, %v; want %.17g", tt.name, got, err, tt.want)
		}
	}
}

func TestTTestErrors(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		fn   func([]float64, []float64) (float64, error)
		a, b []float64
	}{
		{"paired mismatched", TTestPaired, []float64{1, 2, 3}, []float64{1, 2}},
		{"paired one pair", TTestPaired, []float64{1}, []float64{2}},
		{"paired empty", TTestPaired, nil, nil},
		{"paired NaN", TTestPaired, []float64{1, nan}, []float64{2, 3}},
		{"paired Inf", TTestPaired, []float64{1, 2}, []float64{math.Inf(1), 3}},
		{"welch short a", TTestWelch, []float64{1}, []float64{2, 3}},
		{"welch short b", TTestWelch, []float64{1, 2}, nil},
		{"welch NaN", TTestWelch, []float64{1, 2}, []float64{nan, 3}},
		// Finite values whose differences overflow to +Inf: no t.
		{"paired overflow", TTestPaired, []float64{1e308, 1.5e308}, []float64{-1e308, -1e308}},
	}
	for _, tt := range tests {
		p, err := tt.fn(tt.a, tt.b)
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: got %v, %v; want error wrapping ErrBadInput", tt.name, p, err)
		}
	}
}
