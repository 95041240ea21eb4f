package sim

import (
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
)

// TestStreamMatchesRun: the streaming engine is Run's world with another
// event loop, so on the SC'15 traces it must give Run's figures. Both
// engines are chaotic in rounding (a 1e-12 s change of the start-up cost
// moves Run's average slowdown by several percent on a busy multi-pair
// testbed), and their byte accounting rounds differently, so agreement is
// asked to 1%; on these traces, on amd64, they agree to every printed
// digit.
func TestStreamMatchesRun(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"45", "60"} {
		x, err := LoadTrace(tb, TraceSpec{Name: tr, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"seal", "basecc2", "seal+"} {
			s1, _ := sched.New(name, sched.Options{})
			s2, _ := sched.New(name, sched.Options{})
			a, err := Run(tb, x, s1, Options{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := RunStream(tb, NewSliceSource(x), s2, StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			near := func(p, q float64) bool { return math.Abs(p-q) <= 0.01*math.Max(math.Abs(p), 1e-9) }
			if b.Completed != int64(len(x.Transfers)) || b.Interactive.N != int64(a.Interactive.N) ||
				!near(a.Interactive.AvgSlowdown, b.Interactive.AvgSlowdown) || !near(a.Interactive.AvgTurnaround, b.Interactive.AvgTurnaround) ||
				!near(a.Interactive.MaxSlowdown, b.Interactive.MaxSlowdown) || !near(a.Makespan, b.Makespan) || !near(a.BytesMoved, b.BytesMoved) {
				t.Errorf("trace %s, %s: Run %+v makespan %.3f; RunStream %+v makespan %.3f", tr, name, a.Interactive, a.Makespan, b.Interactive, b.Makespan)
			}
		}
	}
}
