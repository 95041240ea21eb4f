package forecast

import (
	"math"
	"testing"
)

// near reports whether got is want up to rounding (relative 1e-12).
func near(got, want float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

// nwsByName is a fresh NWS predictor by name.
func nwsByName(t *testing.T, name string) Predictor {
	t.Helper()
	for _, p := range NWS() {
		if p.Name() == name {
			return p
		}
	}
	t.Fatalf("no NWS predictor %q", name)
	return nil
}

// feed observes every value of xs and returns the forecast.
func feed(p Predictor, xs []float64) (float64, bool) {
	for _, x := range xs {
		p.Observe(x)
	}
	return p.Forecast()
}

// rep is n copies of v.
func rep(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// cat concatenates series.
func cat(parts ...[]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
