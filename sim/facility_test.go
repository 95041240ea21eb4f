package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// tinyFacility is a facility small enough to replay in well under a
// second: 20 endpoints, 2,000 transfers in a quarter of an hour.
func tinyFacility() FacilitySpec {
	s := DefaultFacilitySpec()
	s.Endpoints, s.Transfers, s.Hours = 20, 2000, 0.25
	return s
}

// runTiny replays spec under the scheduler and returns the report and a
// hash of every task's outcome in completion order.
func runTiny(t *testing.T, spec FacilitySpec, scheduler string) (*FacilityReport, uint64, int64) {
	t.Helper()
	f, err := NewFacility(spec)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sched.New(scheduler, sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	var tasks int64
	seen := map[int64]bool{}
	res, err := RunStream(f.Testbed, f.Arrivals(), s, StreamOptions{
		Options: Options{NoCycleOnCompletion: true},
		OnTask: func(r TaskResult) {
			if seen[r.ID] {
				t.Errorf("task %d reported twice", r.ID)
			}
			seen[r.ID] = true
			tasks++
			fmt.Fprintf(h, "%d %d %.9g %.9g %.9g %d\n", r.ID, r.Size, r.Arrival, r.Finish, r.Wait, r.Preempted)
		},
	})
	if err != nil {
		t.Fatalf("%s: %v", scheduler, err)
	}
	return &FacilityReport{Facility: f, Scheduler: scheduler, Result: res}, h.Sum64(), tasks
}

// TestFacility replays tiny facilities and checks what users of `sluice
// sim facility` rely on: every generated transfer is completed and
// reported once, the statistics add up, a seed gives the same run twice,
// and a run of the first hours of a day is a prefix of that day.
func TestFacility(t *testing.T) {
	cases := []struct {
		name      string
		spec      func() FacilitySpec
		scheduler string
		// want is the number of transfers the run must complete (0: the
		// spec's Transfers; -1: about the expected number before Until).
		want int64
		// twice runs it again to check that a seed gives the same run.
		twice bool
	}{
		{"seal", tinyFacility, "seal", 0, true},
		{"seal+", tinyFacility, "seal+", 0, false},
		{"baseline", tinyFacility, "basecc2", 0, false},
		{"heavy load", func() FacilitySpec { s := tinyFacility(); s.Load = 0.8; return s }, "seal", 0, false},
		{"one partner", func() FacilitySpec { s := tinyFacility(); s.Partners = 1; return s }, "seal", 0, false},
		{"partners past the endpoints", func() FacilitySpec { s := tinyFacility(); s.Endpoints, s.Partners = 3, 50; return s }, "seal", 0, false},
		{"60% sizes", func() FacilitySpec { s := tinyFacility(); s.SizeLoad = 0.6; return s }, "basecc4", 0, false},
		{"first half of the day", func() FacilitySpec { s := tinyFacility(); s.Until = s.Hours / 2; return s }, "seal", -1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := c.spec()
			rep, hash, tasks := runTiny(t, spec, c.scheduler)
			r, f := rep.Result, rep.Facility
			want := c.want
			if want == 0 {
				want = spec.Transfers
			}
			if want > 0 && r.Arrived != want {
				t.Errorf("%d transfers arrived, want %d", r.Arrived, want)
			}
			if want < 0 {
				// About half of the day's transfers arrive in its first
				// half (Poisson: within a few standard deviations).
				exp := f.Expected()
				if math.Abs(float64(r.Arrived)-exp) > 5*math.Sqrt(exp) {
					t.Errorf("%d transfers arrived in the first %g h, expected about %.0f", r.Arrived, spec.Until, exp)
				}
			}
			if r.Completed != r.Arrived || tasks != r.Arrived {
				t.Errorf("arrived %d, completed %d, reported %d: a drained run completes every transfer once", r.Arrived, r.Completed, tasks)
			}
			if r.Interactive.N != r.Completed {
				t.Errorf("interactive summary over %d tasks, %d completed", r.Interactive.N, r.Completed)
			}
			var perClass int64
			for _, s := range r.ByClass {
				perClass += s.N
			}
			if perClass != r.Completed {
				t.Errorf("size classes hold %d tasks, %d completed", perClass, r.Completed)
			}
			if net := r.BytesMoved - r.BytesLost; math.Abs(net-r.Bytes) > 1e-6*r.Bytes+0.5*float64(r.Arrived) {
				t.Errorf("moved %.0f - lost %.0f = %.0f bytes, the transfers hold %.0f", r.BytesMoved, r.BytesLost, net, r.Bytes)
			}
			s := r.Interactive
			if !(s.P50Slowdown <= s.P90Slowdown && s.P90Slowdown <= s.P99Slowdown && s.P99Slowdown <= s.MaxSlowdown) {
				t.Errorf("slowdown quantiles out of order: %+v", s)
			}
			if s.AvgSlowdown < 1-1e-9 || s.AvgSlowdown > s.MaxSlowdown || s.AvgTurnaround <= 0 || s.P99Turnaround > s.MaxTurnaround {
				t.Errorf("implausible summary: %+v", s)
			}
			if r.Starts < r.Completed || r.Cycles == 0 {
				t.Errorf("%d starts and %d cycles for %d transfers", r.Starts, r.Cycles, r.Completed)
			}
			var byTrigger int64
			for _, n := range r.CyclesByTrigger {
				byTrigger += n
			}
			if byTrigger != r.Cycles || r.CyclesByTrigger["completion"] != 0 {
				t.Errorf("cycles %d, by trigger %v (completion cycles are off)", r.Cycles, r.CyclesByTrigger)
			}
			if !c.twice {
				return
			}
			// Same seed, same run.
			rep2, hash2, _ := runTiny(t, spec, c.scheduler)
			r1, r2 := r.WithoutTimes(), rep2.Result.WithoutTimes()
			if hash != hash2 || fmt.Sprintf("%+v", r1) != fmt.Sprintf("%+v", r2) {
				t.Errorf("two runs of one seed differ:\n%+v\n%+v", r1, r2)
			}
		})
	}
}

// TestFacilityModel checks the generated facility: class counts, links,
// capacities scaled so every endpoint is offered the load, arrivals in
// order within the day, a seed's arrivals the same at every call, and
// the first hours of a day a prefix of the whole day.
func TestFacilityModel(t *testing.T) {
	spec := tinyFacility()
	spec.Endpoints, spec.Transfers = 200, 20000
	f, err := NewFacility(spec)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range f.Classes {
		n += c.Count
	}
	if n != spec.Endpoints || len(f.Testbed.Endpoints) != spec.Endpoints {
		t.Errorf("classes count %d endpoints, testbed has %d, want %d", n, len(f.Testbed.Endpoints), spec.Endpoints)
	}
	if f.Links != spec.Endpoints*spec.Partners {
		t.Errorf("%d links, want %d", f.Links, spec.Endpoints*spec.Partners)
	}
	if math.Abs(f.OfferedMin-spec.Load) > 1e-3 || math.Abs(f.OfferedMax-spec.Load) > 1e-3 {
		t.Errorf("offered utilisation %.4f-%.4f, want %.2f everywhere", f.OfferedMin, f.OfferedMax, spec.Load)
	}
	// The day's offered bytes against the capacity: 2 × volume / (Σcap ×
	// day) is the load.
	total := 0.0
	for _, e := range f.Testbed.Endpoints {
		total += Gbps(e.CapacityGbps)
	}
	if got := 2 * f.DayBytes / (total * spec.Hours * 3600); math.Abs(got-spec.Load) > 1e-9 {
		t.Errorf("capacity fits load %.6f, want %.2f", got, spec.Load)
	}
	drain := func(src ArrivalSource) []trace.Transfer {
		var out []trace.Transfer
		for {
			x, ok := src.Next()
			if !ok {
				return out
			}
			out = append(out, x)
		}
	}
	a, b := drain(f.Arrivals()), drain(f.Arrivals())
	if int64(len(a)) != spec.Transfers || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%d and %d arrivals, or different: a source must replay the same day", len(a), len(b))
	}
	bytes := 0.0
	for i, x := range a {
		if x.Arrival < 0 || x.Arrival >= spec.Hours*3600 || (i > 0 && x.Arrival < a[i-1].Arrival) || x.Src == x.Dst || x.Size <= 0 {
			t.Fatalf("transfer %d: %+v", i, x)
		}
		bytes += float64(x.Size)
	}
	if math.Abs(bytes-f.DayBytes) > 0.1*f.DayBytes {
		t.Errorf("the day holds %.4g bytes, expected about %.4g", bytes, f.DayBytes)
	}
	spec.Until = spec.Hours / 4
	g, err := NewFacility(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := drain(g.Arrivals())
	if len(c) == 0 || len(c) >= len(a) || fmt.Sprint(c) != fmt.Sprint(a[:len(c)]) || a[len(c)].Arrival < spec.Until*3600 {
		t.Errorf("the first %g h (%d transfers) are not a prefix of the day", spec.Until, len(c))
	}
	spec.Until, spec.Seed = 0, 2
	h, err := NewFacility(spec)
	if err != nil {
		t.Fatal(err)
	}
	if d := drain(h.Arrivals()); fmt.Sprint(d[:10]) == fmt.Sprint(a[:10]) {
		t.Error("seeds 1 and 2 give the same arrivals")
	}
}

// TestFacilityBadInput: bad specifications and options are errors that
// say what is wrong, not panics.
func TestFacilityBadInput(t *testing.T) {
	mod := func(f func(*FacilitySpec)) FacilitySpec { s := tinyFacility(); f(&s); return s }
	cases := []struct {
		name string
		spec FacilitySpec
		opt  FacilityRunOptions
		want string
	}{
		{"no endpoints", mod(func(s *FacilitySpec) { s.Endpoints = 0 }), FacilityRunOptions{}, "endpoints 0"},
		{"one endpoint", mod(func(s *FacilitySpec) { s.Endpoints = 1 }), FacilityRunOptions{}, "endpoints 1"},
		{"absurd endpoints", mod(func(s *FacilitySpec) { s.Endpoints = 1 << 30 }), FacilityRunOptions{}, "endpoints"},
		{"no transfers", mod(func(s *FacilitySpec) { s.Transfers = 0 }), FacilityRunOptions{}, "transfers 0"},
		{"negative transfers", mod(func(s *FacilitySpec) { s.Transfers = -5 }), FacilityRunOptions{}, "transfers -5"},
		{"no hours", mod(func(s *FacilitySpec) { s.Hours = 0 }), FacilityRunOptions{}, "hours 0"},
		{"NaN hours", mod(func(s *FacilitySpec) { s.Hours = math.NaN() }), FacilityRunOptions{}, "hours NaN"},
		{"infinite hours", mod(func(s *FacilitySpec) { s.Hours = math.Inf(1) }), FacilityRunOptions{}, "hours +Inf"},
		{"negative until", mod(func(s *FacilitySpec) { s.Until = -1 }), FacilityRunOptions{}, "until -1"},
		{"zero load", mod(func(s *FacilitySpec) { s.Load = 0 }), FacilityRunOptions{}, "load 0"},
		{"load past 2", mod(func(s *FacilitySpec) { s.Load = 3 }), FacilityRunOptions{}, "load 3"},
		{"bad size trace", mod(func(s *FacilitySpec) { s.SizeLoad = -0.45 }), FacilityRunOptions{}, "size load"},
		{"no partners", mod(func(s *FacilitySpec) { s.Partners = 0 }), FacilityRunOptions{}, "partners 0"},
		{"unknown scheduler", tinyFacility(), FacilityRunOptions{Scheduler: "fifo"}, `unknown scheduler "fifo"`},
		{"live view", tinyFacility(), FacilityRunOptions{Options: Options{Live: LiveDefaults()}}, "live"},
		{"negative resolution", tinyFacility(), FacilityRunOptions{Resolution: -0.1}, "resolution -0.1"},
		{"NaN resolution", tinyFacility(), FacilityRunOptions{Resolution: math.NaN()}, "resolution NaN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.opt.Scheduler == "" {
				c.opt.Scheduler = "seal"
			}
			rep, err := RunFacility(c.spec, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "facility: ") {
				t.Fatalf("got %v, %v; want an error mentioning %q", rep, err, c.want)
			}
		})
	}
}

// badSource yields transfers out of order, or fails.
type badSource struct {
	xs  []trace.Transfer
	err error
}

func (b *badSource) Next() (trace.Transfer, bool) {
	if len(b.xs) == 0 {
		return trace.Transfer{}, false
	}
	x := b.xs[0]
	b.xs = b.xs[1:]
	return x, true
}

func (b *badSource) Err() error { return b.err }

// TestStreamBadInput: the streaming engine rejects what it cannot replay
// with an error naming the transfer, not a panic.
func TestStreamBadInput(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	x := func(id int64, at float64, dst string, size int64) trace.Transfer {
		return trace.Transfer{ID: id, Arrival: at, Src: "stampede", Dst: dst, Size: size}
	}
	cases := []struct {
		name string
		src  ArrivalSource
		opt  Options
		want string
	}{
		{"out of order", &badSource{xs: []trace.Transfer{x(1, 5, "gordon", 1e6), x(2, 1, "gordon", 1e6)}}, Options{}, "before the previous one"},
		{"unknown endpoint", &badSource{xs: []trace.Transfer{x(1, 0, "nowhere", 1e6)}}, Options{}, "not endpoints of testbed"},
		{"negative size", &badSource{xs: []trace.Transfer{x(1, 0, "gordon", -5)}}, Options{}, "negative size -5"},
		{"negative arrival", &badSource{xs: []trace.Transfer{x(1, -1, "gordon", 1e6)}}, Options{}, "arrival -1"},
		{"NaN arrival", &badSource{xs: []trace.Transfer{x(1, math.NaN(), "gordon", 1e6)}}, Options{}, "arrival NaN"},
		{"arrival beyond the clock", &badSource{xs: []trace.Transfer{x(1, 1e12, "gordon", 1e6)}}, Options{}, "want 0 to"},
		{"NaN start-up", &badSource{xs: []trace.Transfer{x(1, 0, "gordon", 1e6)}}, Options{Startup: math.NaN()}, "Startup is NaN"},
		{"endless cycles", &badSource{xs: []trace.Transfer{x(1, 0, "gordon", 1e6)}}, Options{Cycle: 1e-9}, "at least 1 ms"},
		{"duplicate id in flight", &badSource{xs: []trace.Transfer{x(1, 0, "gordon", 1e9), x(1, 0, "darter", 1e9)}}, Options{}, "appears twice"},
		{"source error", &badSource{err: errors.New("disk on fire")}, Options{}, "disk on fire"},
		{"live view", &badSource{}, Options{Live: LiveDefaults()}, "live service"},
		{"too long", &badSource{xs: []trace.Transfer{x(1, 0, "gordon", 1e12)}}, Options{MaxTime: 10}, "MaxTime"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := sched.New("seal", sched.Options{})
			_, err := RunStream(tb, c.src, s, StreamOptions{Options: c.opt})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
	s, _ := sched.New("seal", sched.Options{})
	if _, err := RunStream(nil, &badSource{}, s, StreamOptions{}); err == nil {
		t.Error("no testbed: no error")
	}
	if _, err := RunStream(tb, nil, s, StreamOptions{}); err == nil {
		t.Error("no source: no error")
	}
	ext := *tb
	ext.Endpoints = append([]EndpointSpec(nil), tb.Endpoints...)
	ext.Endpoints[1].ExternalLoad = []LoadStep{{At: 1, Fraction: 0.5}}
	if _, err := RunStream(&ext, &badSource{}, s, StreamOptions{}); err == nil || !strings.Contains(err.Error(), "external load") {
		t.Errorf("external load: %v", err)
	}
	// An empty source is a run with nothing in it.
	res, err := RunStream(tb, &badSource{}, s, StreamOptions{})
	if err != nil || res.Arrived != 0 || res.Completed != 0 {
		t.Errorf("empty source: %+v, %v", res, err)
	}
}

// TestStreamResolution: with a Resolution, every completion falls on a
// multiple of it, every transfer still completes once with its bytes
// moved, the run takes fewer reallocations than the exact one, and the
// transfers' mean turnaround stays within a small fraction of a grain
// per transfer of the exact run's.
func TestStreamResolution(t *testing.T) {
	spec := tinyFacility()
	f, err := NewFacility(spec)
	if err != nil {
		t.Fatal(err)
	}
	run := func(q float64) (*StreamResult, []TaskResult) {
		s, err := sched.New("seal", sched.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tasks []TaskResult
		res, err := RunStream(f.Testbed, f.Arrivals(), s, StreamOptions{
			Options:    Options{NoCycleOnCompletion: true},
			Resolution: q,
			OnTask:     func(r TaskResult) { tasks = append(tasks, r) },
		})
		if err != nil {
			t.Fatalf("resolution %g: %v", q, err)
		}
		return res, tasks
	}
	exact, _ := run(0)
	const q = 0.07 // not a divisor of the cycle or the start-up: other events fall inside grains
	coarse, tasks := run(q)
	if coarse.Completed != exact.Completed || int64(len(tasks)) != coarse.Arrived || coarse.Completed != coarse.Arrived {
		t.Fatalf("exact run completed %d, the coarse one %d of %d (%d reported)", exact.Completed, coarse.Completed, coarse.Arrived, len(tasks))
	}
	for _, r := range tasks {
		if k := r.Finish / q; math.Abs(k-math.Round(k)) > 1e-6 {
			t.Fatalf("task %d finished at %.9f s, not a multiple of %g s", r.ID, r.Finish, q)
		}
	}
	if net := coarse.BytesMoved - coarse.BytesLost; math.Abs(net-coarse.Bytes) > 1e-6*coarse.Bytes+0.5*float64(coarse.Arrived) {
		t.Errorf("moved %.0f - lost %.0f bytes, the transfers hold %.0f", coarse.BytesMoved, coarse.BytesLost, coarse.Bytes)
	}
	if coarse.Reallocations >= exact.Reallocations {
		t.Errorf("%d reallocations with a %g s grain, %d exact: the grain saves nothing", coarse.Reallocations, q, exact.Reallocations)
	}
	d := coarse.Interactive.AvgTurnaround - exact.Interactive.AvgTurnaround
	t.Logf("mean turnaround %.3f s exact, %.3f s with %g s steps; reallocations %d and %d", exact.Interactive.AvgTurnaround, coarse.Interactive.AvgTurnaround, q, exact.Reallocations, coarse.Reallocations)
	if math.Abs(d) > 0.05*exact.Interactive.AvgTurnaround+q {
		t.Errorf("mean turnaround %.3f s with %g s steps, %.3f s exact", coarse.Interactive.AvgTurnaround, q, exact.Interactive.AvgTurnaround)
	}
}
