package sim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func normals(rng *rand.Rand, n int, mu, sigma float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mu + sigma*rng.NormFloat64()
	}
	return v
}

func meanOf(v []float64, idx []int) float64 {
	s := 0.0
	for _, i := range idx {
		s += v[i]
	}
	return s / float64(len(idx))
}

// TestPercentileIntervalKnown: for the mean of a large normal sample the
// percentile interval is the textbook one, mean ± z·s/√n (z = 1.645 at
// 90%, 1.96 at 95%), to within a few percent of its width.
func TestPercentileIntervalKnown(t *testing.T) {
	cases := []struct {
		name      string
		n         int
		mu, sigma float64
		level, z  float64
	}{
		{"90%, n=400", 400, 10, 2, 0.90, 1.6449},
		{"95%, n=400", 400, -3, 0.5, 0.95, 1.9600},
		{"90%, n=1000, wide", 1000, 100, 30, 0.90, 1.6449},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := normals(rand.New(rand.NewPCG(1, 2)), c.n, c.mu, c.sigma)
			all := make([]int, c.n)
			for i := range all {
				all[i] = i
			}
			m := meanOf(x, all)
			var ss float64
			for _, v := range x {
				ss += (v - m) * (v - m)
			}
			half := c.z * math.Sqrt(ss/float64(c.n-1)) / math.Sqrt(float64(c.n))
			iv, err := PercentileInterval(c.n, func(idx []int) float64 { return meanOf(x, idx) }, Bootstrap{Resamples: 20000, Level: c.level, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(iv.Est-m) > 1e-12 {
				t.Errorf("estimate %g, want the sample mean %g", iv.Est, m)
			}
			if d := math.Abs(iv.Lo - (m - half)); d > 0.06*half {
				t.Errorf("lower bound %g, want about %g (off by %.0f%% of the half-width)", iv.Lo, m-half, 100*d/half)
			}
			if d := math.Abs(iv.Hi - (m + half)); d > 0.06*half {
				t.Errorf("upper bound %g, want about %g (off by %.0f%% of the half-width)", iv.Hi, m+half, 100*d/half)
			}
		})
	}
}

// TestPercentileIntervalCoverage: over many samples of 20 from a known
// distribution, a 90% interval of the mean holds the true mean about 90%
// of the time (the percentile bootstrap runs a little short at n = 20).
func TestPercentileIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials, n = 300, 20
	hit := 0
	for k := 0; k < trials; k++ {
		x := normals(rng, n, 5, 1)
		iv, err := PercentileInterval(n, func(idx []int) float64 { return meanOf(x, idx) }, Bootstrap{Resamples: 1000, Level: 0.9, Seed: uint64(k + 1)})
		if err != nil {
			t.Fatal(err)
		}
		if iv.Lo <= 5 && 5 <= iv.Hi {
			hit++
		}
	}
	if cov := float64(hit) / trials; cov < 0.82 || cov > 0.96 {
		t.Errorf("90%% intervals held the true mean in %.0f%% of %d samples", 100*cov, trials)
	}
}

// TestPairedChange: the change is against the lowest baseline mean, and
// pairing by seed is what makes a consistent change certain even when
// the seeds themselves differ wildly.
func TestPairedChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := make([]float64, 10)
	for i := range base {
		base[i] = 1 + 20*rng.Float64() // seeds differ by up to 20x
	}
	scale := func(v []float64, f float64) []float64 {
		out := make([]float64, len(v))
		for i := range v {
			out[i] = f * v[i]
		}
		return out
	}
	shuffled := scale(base, 0.8)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	cases := []struct {
		name      string
		subject   []float64
		baselines [][]float64
		best      int
		est       float64
		// exact: the interval is the point; otherwise its width at least.
		exact    bool
		minWidth float64
	}{
		{"20% below on every seed: certain", scale(base, 0.8), [][]float64{base}, 0, -20, true, 0},
		{"the best of two baselines is the lower one", scale(base, 0.9), [][]float64{scale(base, 1.5), base}, 1, -10, true, 0},
		{"25% above the best", scale(base, 1.25), [][]float64{base, scale(base, 2)}, 0, 25, true, 0},
		// The same values with the seeds shuffled: the means, and so
		// the estimate, are unchanged, but the pairs no longer match
		// and the interval is wide.
		{"unpaired: same means, wide interval", shuffled, [][]float64{base}, 0, -20, false, 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iv, best, err := PairedChange(c.subject, c.baselines, Bootstrap{})
			if err != nil {
				t.Fatal(err)
			}
			if best != c.best {
				t.Errorf("best baseline %d, want %d", best, c.best)
			}
			if math.Abs(iv.Est-c.est) > 1e-9 {
				t.Errorf("estimate %g, want %g", iv.Est, c.est)
			}
			if c.exact && (math.Abs(iv.Lo-c.est) > 1e-9 || math.Abs(iv.Hi-c.est) > 1e-9) {
				t.Errorf("interval %v, want exactly %g: every seed says the same", iv, c.est)
			}
			if !c.exact && iv.Hi-iv.Lo < c.minWidth {
				t.Errorf("interval %v narrower than %g points", iv, c.minWidth)
			}
			if !(iv.Lo <= iv.Est && iv.Est <= iv.Hi) && !c.exact {
				t.Errorf("interval %v does not hold its estimate", iv)
			}
		})
	}
}

// TestPairedChangeReproducible: the same data and seed give the same
// interval; the interval depends on its own data only.
func TestPairedChangeReproducible(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	a, b := normals(rng, 10, 10, 3), normals(rng, 10, 11, 3)
	x, _, err := PairedChange(a, [][]float64{b}, Bootstrap{})
	if err != nil {
		t.Fatal(err)
	}
	y, _, _ := PairedChange(a, [][]float64{b}, Bootstrap{})
	if x != y {
		t.Errorf("two runs gave %v and %v", x, y)
	}
	z, _, _ := PairedChange(a, [][]float64{b}, Bootstrap{Seed: 99})
	if z == x {
		t.Errorf("another bootstrap seed gave the identical interval %v", z)
	}
}

func TestBootstrapErrors(t *testing.T) {
	one := []float64{1}
	two := []float64{1, 2}
	cases := []struct {
		name      string
		subject   []float64
		baselines [][]float64
		b         Bootstrap
		want      string
	}{
		{"one seed", one, [][]float64{one}, Bootstrap{}, "at least 2"},
		{"unpaired lengths", two, [][]float64{{1, 2, 3}}, Bootstrap{}, "must match"},
		{"no baseline", two, nil, Bootstrap{}, "no baseline"},
		{"level above 1", two, [][]float64{two}, Bootstrap{Level: 1.5}, "level 1.5"},
		{"too few resamples", two, [][]float64{two}, Bootstrap{Resamples: 5}, "5 resamples"},
		{"zero baseline", two, [][]float64{{0, 0}}, Bootstrap{}, "positive"},
	}
	for _, c := range cases {
		_, _, err := PairedChange(c.subject, c.baselines, c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
