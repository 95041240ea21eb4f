package estimate

import (
	"math"
	"testing"
)

// TestGrownSample: a sample shorter than sampleSetups request set-ups is
// taken again, larger (to what the rule asks from the rate seen, at least
// four times, at most the limit); one long enough, or already at the
// limit, is kept.
func TestGrownSample(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name       string
		n, limit   int64
		sec, setup float64
		want       int64
		again      bool
	}{
		// Seen on a 50 ms path: 16 streams moved 20 MiB in 0.33 s; a
		// 64 KiB pull took 0.11 s.
		{"50 ms path, 16 streams", 20 * mib, 1 << 30, 0.327, 0.11, int64(math.Ceil(20 * mib * 2.2 / 0.327)), true},
		{"50 ms path, long enough", 80 * mib, 1 << 30, 2.5, 0.11, 80 * mib, false},
		{"loopback: four times at least", 20 * mib, 1 << 30, 0.012, 0.001, 80 * mib, true},
		{"capped by the source", 20 * mib, 50 * mib, 0.327, 0.11, 50 * mib, true},
		{"at the limit already", 50 * mib, 50 * mib, 0.3, 0.11, 50 * mib, false},
		{"no time measured", 20 * mib, 1 << 30, 0, 0.11, 20 * mib, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, again := grownSample(tc.n, tc.limit, tc.sec, tc.setup)
			if got != tc.want || again != tc.again {
				t.Errorf("grownSample(%d, %d, %g, %g) = %d, %v; want %d, %v", tc.n, tc.limit, tc.sec, tc.setup, got, again, tc.want, tc.again)
			}
		})
	}
}
