package dataset

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// pathModel is a path as a stream-count tuner sees it: each stream gets at
// most perStream (its window over the round trip), all of them together
// at most the capacity, and past the capacity each extra stream costs a
// little (losses and queueing shared by more flows). Measurements carry
// up to ±noise of relative error.
type pathModel struct {
	perStream, capacity, cost, noise float64
	rng                              *rand.Rand
}

func (m *pathModel) measure(level int) float64 {
	thr := min(m.capacity, float64(level)*m.perStream)
	if over := float64(level)*m.perStream - m.capacity; over > 0 {
		thr *= max(0.5, 1-m.cost*over/m.capacity)
	}
	return thr * (1 + m.noise*(2*m.rng.Float64()-1))
}

// ideal is the best throughput any level up to max gives, without noise.
func (m *pathModel) ideal(max int) float64 {
	save := m.noise
	m.noise = 0
	defer func() { m.noise = save }()
	best := 0.0
	for l := 1; l <= max; l++ {
		best = maxf(best, m.measure(l))
	}
	return best
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// TestHillFollowsBandwidthSteps: a transfer tuned live keeps up with its
// path. The path's capacity steps as in a benchmark profile (halved, then
// tripled) while per-stream windows stay fixed; within 20 windows of each
// step (10 s at half-second windows) the tuner runs at a level that gives
// at least 80% of what the best level gives on the new path, and it does
// not sit at the maximum when a few streams fill the path.
func TestHillFollowsBandwidthSteps(t *testing.T) {
	cases := []struct {
		name       string
		perStream  float64
		capacities []float64 // each held for 60 windows
	}{
		{"window-limited streams, halve then triple", 29e6, []float64{125e6, 62.5e6, 187.5e6}},
		{"tiny windows, rise tenfold", 2e6, []float64{10e6, 100e6}},
		{"one stream fills the path, fall", 200e6, []float64{125e6, 30e6}},
		{"intercontinental, triple", 3e6, []float64{62.5e6, 187.5e6}},
	}
	for _, tc := range cases {
		for seed := range uint64(5) {
			m := &pathModel{perStream: tc.perStream, cost: 0.05, noise: 0.08, rng: rand.New(rand.NewPCG(seed, 7))}
			h, err := NewHill(HillParams{Max: 128})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range tc.capacities {
				m.capacity = c
				want := 0.8 * m.ideal(128)
				reached := -1
				for w := range 60 {
					lvl := h.Level()
					thr := m.measure(lvl)
					h.Observe(thr)
					if reached < 0 && m.capacity > 0 && min(m.capacity, float64(lvl)*m.perStream) >= want {
						reached = w
					}
				}
				if reached < 0 || reached > 20 {
					t.Errorf("%s, seed %d, step %d (capacity %.0f MB/s): 80%% of the best reached after %d windows, want <= 20", tc.name, seed, i, c/1e6, reached)
				}
				// Settled, it does not hold far more streams than the
				// path needs: at most 4x the level that fills it, or a
				// probe above that. (A doubling that measured less than
				// Gain/2 lower is kept, since coming back down costs a
				// real TCP path seconds; with this model's ±8% noise
				// that can keep one doubling past 2x the need.)
				need := int(c/tc.perStream) + 1
				if lvl := h.Level(); !h.Probing() && lvl > 4*need && lvl > 4 {
					t.Errorf("%s, seed %d, step %d: settled at %d streams, the path is full at %d", tc.name, seed, i, lvl, need)
				}
			}
		}
	}
}

// TestHillBounds: the level stays within Min and Max whatever it measures,
// including nonsense (NaN, negative, zero).
func TestHillBounds(t *testing.T) {
	h, err := NewHill(HillParams{Start: 2, Min: 2, Max: 6})
	if err != nil {
		t.Fatal(err)
	}
	vals := []float64{1, 2, 4, 8, 16, -1, 0, 1e12, 3, 2e12, 5}
	for i := range 200 {
		h.Observe(vals[i%len(vals)] * float64(i))
		if l := h.Level(); l < 2 || l > 6 {
			t.Fatalf("window %d: level %d outside [2, 6]", i, l)
		}
	}
}

func TestHillParamsInvalid(t *testing.T) {
	for _, p := range []HillParams{
		{Min: 4, Max: 2},
		{Start: 9, Max: 8},
		{Gain: -1},
		{Shift: 1.5},
		{ProbeEvery: 8, ProbeMax: 4},
	} {
		if _, err := NewHill(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewHill(%+v): %v, want ErrInvalid", p, err)
		}
	}
}

// TestHillKeepsAHarmlessDoubling: a doubling that gains less than Gain is
// kept if it lowered the throughput by less than Gain/2 (coming back down
// costs a loss-based TCP seconds of regrowing windows), and undone if it
// lowered it more.
func TestHillKeepsAHarmlessDoubling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second float64 // throughput at 32 after 100 at 16
		want   int
	}{
		{"gain", 120, 64},
		{"same", 101, 32},
		{"slightly less", 96, 32},
		{"less", 94, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := NewHill(HillParams{Start: 16, Max: 64})
			if err != nil {
				t.Fatal(err)
			}
			h.Observe(50)  // settling
			h.Observe(100) // first judged: double to 32
			if h.Level() != 32 {
				t.Fatalf("after the first judged window: level %d, want 32", h.Level())
			}
			h.Observe(0) // settling at 32
			h.Observe(tc.second)
			if h.Level() != tc.want {
				t.Errorf("level %d after %v at 32 (100 at 16), want %d", h.Level(), tc.second, tc.want)
			}
		})
	}
}
