package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
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

// TestEmptyTransfers: real transfer logs hold empty files (NBYTES=0).
// Both engines replay them under every scheduler: each empty transfer
// starts, pays the start-up cost, moves nothing and finishes, and the
// other transfers are replayed as they would be.
func TestEmptyTransfers(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	x := func(id int64, at float64, dst string, size int64) trace.Transfer {
		return trace.Transfer{ID: id, Arrival: at, Src: "stampede", Dst: dst, Size: size}
	}
	tr := &trace.Trace{Name: "empty", Transfers: []trace.Transfer{
		x(0, 0, "gordon", 0), x(1, 0, "gordon", 2e9), x(2, 0.2, "darter", 0),
		x(3, 1, "darter", 5e8), x(4, 1, "gordon", 0), x(5, 3, "yellowstone", 0),
	}}
	const startup = 0.5
	for _, name := range sched.Names() {
		t.Run(name, func(t *testing.T) {
			s, err := sched.New(name, sched.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(tb, tr, s, Options{Startup: startup})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(res.Tasks) != len(tr.Transfers) {
				t.Fatalf("Run: %d results for %d transfers", len(res.Tasks), len(tr.Transfers))
			}
			for _, r := range res.Tasks {
				if r.Size != 0 {
					continue
				}
				// An empty transfer runs for its start-up and no longer
				// (it may wait for a cycle first).
				if math.Abs(r.Run-startup) > 1e-6 || r.Finish < r.Arrival+startup-1e-9 || r.Slowdown < 1-1e-9 {
					t.Errorf("Run: empty task %d: run %.3f s, arrival %.3f, finish %.3f, slowdown %.3f", r.ID, r.Run, r.Arrival, r.Finish, r.Slowdown)
				}
			}
			if want := 2.5e9; math.Abs(res.BytesMoved-res.BytesLost-want) > 2 {
				t.Errorf("Run: moved %.0f - lost %.0f bytes, want %.0f", res.BytesMoved, res.BytesLost, want)
			}
			s2, _ := sched.New(name, sched.Options{})
			st, err := RunStream(tb, NewSliceSource(tr), s2, StreamOptions{Options: Options{Startup: startup}})
			if err != nil {
				t.Fatalf("RunStream: %v", err)
			}
			if st.Completed != int64(len(tr.Transfers)) || math.Abs(st.Makespan-res.Makespan) > 0.01*res.Makespan {
				t.Errorf("RunStream: %d of %d completed, makespan %.3f s (Run: %.3f s)", st.Completed, len(tr.Transfers), st.Makespan, res.Makespan)
			}
		})
	}
}

// TestRunBadInput: Run refuses, with an error naming the problem, what
// would otherwise make it spin for ever (found by feeding the CLI odd
// values): non-finite options, cycles of nanoseconds, arrivals so far out
// that the clock cannot tell a completion from the present.
func TestRunBadInput(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	one := func(at float64) *trace.Trace {
		return &trace.Trace{Name: "x", Transfers: []trace.Transfer{{ID: 1, Arrival: at, Src: "stampede", Dst: "gordon", Size: 1e6}}}
	}
	tests := []struct {
		name string
		tr   *trace.Trace
		opt  Options
		want string
	}{
		{"NaN start-up", one(0), Options{Startup: math.NaN()}, "Startup is NaN"},
		{"infinite start-up", one(0), Options{Startup: math.Inf(1)}, "Startup is +Inf"},
		{"start-up of days", one(0), Options{Startup: 1e6}, "at most an hour"},
		{"NaN cycle", one(0), Options{Cycle: math.NaN()}, "Cycle is NaN"},
		{"nanosecond cycles", one(0), Options{Cycle: 1e-9}, "at least 1 ms"},
		{"arrival beyond the clock", one(1e12), Options{}, "want 0 to"},
		{"negative arrival", one(-1), Options{}, "want 0 to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := sched.New("seal", sched.Options{})
			_, err := Run(tb, tc.tr, s, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	// The bound itself still runs.
	s, _ := sched.New("seal", sched.Options{})
	if _, err := Run(tb, one(MaxArrival), s, Options{}); err != nil {
		t.Errorf("arrival at MaxArrival: %v", err)
	}
}
