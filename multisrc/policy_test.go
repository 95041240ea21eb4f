package multisrc

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// near reports whether got is within tol of want (absolute), treating two
// NaNs as equal.
func near(got, want, tol float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) <= tol
}

func TestPolicies(t *testing.T) {
	want := []Policy{"bos", "eas", "ms", "ntss", "tcs", "tcs-minus"}
	if got := Policies(); !slices.Equal(got, want) {
		t.Fatalf("Policies() = %v, want %v", got, want)
	}
	// Each call returns a fresh slice: callers may not corrupt the next.
	Policies()[0] = "x"
	if Policies()[0] != BOS {
		t.Fatal("Policies() shares its backing array")
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"bos", BOS, true},
		{"EAS", EAS, true},
		{"Ms", MS, true},
		{" ntss\n", NTSS, true},
		{"TCS", TCS, true},
		{"tcs-MINUS", TCSMinus, true},
		{"tcs_minus", "", false},
		{"", "", false},
		{"best", "", false},
	}
	for _, tt := range tests {
		got, err := ParsePolicy(tt.in)
		if tt.ok {
			if err != nil || got != tt.want {
				t.Errorf("ParsePolicy(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParsePolicy(%q) = %q, want error", tt.in, got)
			continue
		}
		if !errors.Is(err, ErrUnknownPolicy) {
			t.Errorf("ParsePolicy(%q) error %v does not wrap ErrUnknownPolicy", tt.in, err)
		}
		for _, p := range Policies() {
			if !strings.Contains(err.Error(), string(p)) {
				t.Errorf("ParsePolicy(%q) error %q does not list %q", tt.in, err, p)
			}
		}
	}
}

func TestTuningFactor(t *testing.T) {
	tests := []struct {
		name     string
		mean, sd float64
		want     float64
	}{
		// N <= 1: TF = 1 - N/2.
		{"N=0.2", 5, 1, 0.9},    // N = 1/5 = 0.2; 1 - 0.1
		{"N=0.5", 10, 5, 0.75},  // 1 - 0.25
		{"N=1", 5, 5, 0.5},      // 1 - 1/2; also 1/(2*1): continuous
		{"N=0", 5, 0, 1},        // no spread: TF 1 (it multiplies 0)
		{"N=2", 5, 10, 0.25},    // N > 1: 1/(2*2)
		{"N=4", 2.5, 10, 0.125}, // 1/(2*4)
		// Inputs Fig. 1 does not cover: 0, i.e. plan on the Mean.
		{"mean 0", 0, 1, 0},
		{"mean negative", -5, 1, 0},
		{"mean NaN", math.NaN(), 1, 0},
		{"sd NaN", 5, math.NaN(), 0},
		{"sd negative", 5, -1, 0},
		{"sd +Inf", 5, math.Inf(1), 0},             // N = +Inf > 1: 1/Inf
		{"mean +Inf", math.Inf(1), 5, 1},           // N = 0
		{"both +Inf", math.Inf(1), math.Inf(1), 0}, // N = NaN
	}
	for _, tt := range tests {
		if got := TuningFactor(tt.mean, tt.sd); !near(got, tt.want, 1e-15) {
			t.Errorf("%s: TuningFactor(%v, %v) = %v, want %v", tt.name, tt.mean, tt.sd, got, tt.want)
		}
	}
}

// TestTuningFactorFig2 is the paper's Fig. 2 setting: Mean 5 Mb/s, SD 1..15.
// SD <= 5 is N <= 1, TF = 1 - SD/10; SD > 5 is TF = 1/(2*SD/5) = 2.5/SD. TF
// falls monotonically from 0.9 to 1/6.
func TestTuningFactorFig2(t *testing.T) {
	want := []float64{
		0.9, 0.8, 0.7, 0.6, 0.5, // SD 1..5: 1 - SD/10
		2.5 / 6, 2.5 / 7, 2.5 / 8, 2.5 / 9, 0.25, // SD 6..10: 2.5/SD
		2.5 / 11, 2.5 / 12, 2.5 / 13, 2.5 / 14, 2.5 / 15, // SD 11..15
	}
	prev := math.Inf(1)
	for i, w := range want {
		sd := float64(i + 1)
		got := TuningFactor(5, sd)
		if !near(got, w, 1e-15) {
			t.Errorf("TuningFactor(5, %v) = %v, want %v", sd, got, w)
		}
		if !(got < prev) {
			t.Errorf("TuningFactor(5, %v) = %v, not below %v at SD %v", sd, got, prev, sd-1)
		}
		prev = got
	}
}

func TestEffectiveBW(t *testing.T) {
	calm := Link{Mean: 10, SD: 4}   // N = 0.4, TF = 1 - 0.2 = 0.8, TF*SD = 3.2
	noisy := Link{Mean: 10, SD: 30} // N = 3, TF = 1/6, TF*SD = 5 (= Mean/2)
	tests := []struct {
		p    Policy
		l    Link
		want float64
	}{
		{BOS, calm, 10},
		{EAS, calm, 10},
		{MS, calm, 10},
		{NTSS, calm, 14},      // 10 + 4
		{TCS, calm, 13.2},     // 10 + 0.8*4
		{TCSMinus, calm, 6.8}, // 10 - 0.8*4
		{BOS, noisy, 10},
		{MS, noisy, 10},
		{NTSS, noisy, 40},                         // 10 + 30
		{TCS, noisy, 15},                          // 10 + 30/6
		{TCSMinus, noisy, 5},                      // 10 - 30/6
		{TCS, Link{Mean: 10, SD: math.NaN()}, 10}, // unknown spread: the Mean
		{NTSS, Link{Mean: 10, SD: -3}, 10},        // negative spread: the Mean
		{TCS, Link{Mean: 0, SD: 4}, 0},            // no bandwidth
		{MS, Link{Mean: -1}, 0},
		{NTSS, Link{Mean: math.NaN(), SD: 1}, 0},
		{Policy("fastest"), calm, 0}, // unknown policy plans nothing
	}
	for _, tt := range tests {
		if got := EffectiveBW(tt.p, tt.l); !near(got, tt.want, 1e-12) {
			t.Errorf("EffectiveBW(%s, %+v) = %v, want %v", tt.p, tt.l, got, tt.want)
		}
	}
}

// TestEffectiveBWBounds checks the ranges the doc comments promise: TCS in
// [Mean, 1.5 Mean] (TF*SD <= Mean/2), TCSMinus in [Mean/2, Mean] (so
// MinusFloor never binds), NTSS >= TCS.
func TestEffectiveBWBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		mean := 1 + rng.Float64()*1e9
		sd := rng.Float64() * 5 * mean
		l := Link{Mean: mean, SD: sd}
		tcs, minus, ntss := EffectiveBW(TCS, l), EffectiveBW(TCSMinus, l), EffectiveBW(NTSS, l)
		eps := 1e-9 * mean
		if tcs < mean-eps || tcs > 1.5*mean+eps {
			t.Fatalf("TCS %v outside [Mean, 1.5 Mean] for %+v", tcs, l)
		}
		if minus < mean/2-eps || minus > mean+eps {
			t.Fatalf("TCSMinus %v outside [Mean/2, Mean] for %+v", minus, l)
		}
		if ntss < tcs-eps {
			t.Fatalf("NTSS %v below TCS %v for %+v", ntss, tcs, l)
		}
	}
}
