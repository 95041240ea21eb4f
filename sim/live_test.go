package sim

import (
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// Connections of liveTestbed move 10 MB/s each; its endpoints carry
// 125 MB/s, so the few tasks of these tests never contend.
const liveConnRate = 10e6

func liveTestbed(t *testing.T) *Testbed {
	t.Helper()
	tb := &Testbed{Name: "live-test", Source: "a", ConnGbps: liveConnRate * 8 / 1e9,
		Endpoints: []EndpointSpec{{Name: "a", CapacityGbps: 1}, {Name: "b", CapacityGbps: 1}}}
	if err := tb.init(); err != nil {
		t.Fatal(err)
	}
	return tb
}

// seen is what one cycle's snapshot showed of one task.
type seen struct {
	now              float64
	trig             sched.Trigger
	running, pending bool
	cc               int
	rate             float64
	left             int64
}

// script is a scheduler for tests: decide says what to do, and every
// snapshot is recorded per task.
type script struct {
	seen   map[sched.TaskID][]seen
	decide func(s *sched.Snapshot) []sched.Decision
}

func (s *script) Name() string { return "script" }

func (s *script) Schedule(snap *sched.Snapshot) []sched.Decision {
	if s.seen == nil {
		s.seen = map[sched.TaskID][]seen{}
	}
	for _, ts := range [][]*sched.Task{snap.Waiting, snap.Running} {
		for _, t := range ts {
			s.seen[t.ID] = append(s.seen[t.ID], seen{now: snap.Now, trig: snap.Trigger, running: t.Running, pending: t.Pending, cc: t.CC, rate: t.Rate, left: t.Left})
		}
	}
	return s.decide(snap)
}

// startAll starts every waiting task but those in hold, with one
// connection.
func startAll(hold ...sched.TaskID) func(*sched.Snapshot) []sched.Decision {
	return func(snap *sched.Snapshot) []sched.Decision {
		var ds []sched.Decision
	next:
		for _, t := range snap.Waiting {
			for _, h := range hold {
				if t.ID == h && len(snap.Running) > 0 {
					continue next
				}
			}
			ds = append(ds, sched.Decision{Kind: sched.Start, Task: t.ID, CC: 1})
		}
		return ds
	}
}

func liveOptions() Options {
	return Options{Cycle: 0.1, Startup: 0.05, Live: LiveDefaults()}
}

// TestLiveObservedRate: in the live view a task's rate is the engine's
// meter read at the tick. It is 0, and the task pending, until the first
// sub-write completes; right after, it averages one sub-write over the
// time since the copy began, below the true rate; once the 5 s window is
// full it stays within a sub-write per window of the true rate. Cycles
// run on completions see the last tick's reading, and a file of less than
// one sub-write shows no rate at all. The paper's observer, for contrast,
// sees the true rate at the first cycle after the start.
func TestLiveObservedRate(t *testing.T) {
	tb := liveTestbed(t)
	const big = 200e6
	tr := &trace.Trace{Name: "live", Transfers: []trace.Transfer{{ID: 1, Src: "a", Dst: "b", Size: big}}}
	// Small files finishing between ticks while task 99 waits: their
	// completions run cycles that are not ticks.
	for i := int64(0); i < 5; i++ {
		tr.Transfers = append(tr.Transfers, trace.Transfer{ID: 2 + i, Arrival: 2 + 2*float64(i), Src: "a", Dst: "b", Size: 1e6})
	}
	tr.Transfers = append(tr.Transfers, trace.Transfer{ID: 99, Arrival: 1, Src: "a", Dst: "b", Size: 1e6})

	s := &script{decide: startAll(99)}
	if _, err := Run(tb, tr, s, liveOptions()); err != nil {
		t.Fatal(err)
	}
	const runStart = 0.05 // start decided at 0, start-up 0.05 s
	sub := float64(LiveDefaults().SubWrite)
	firstSub := runStart + sub/liveConnRate
	var lastTick float64
	var readings, sum float64
	for _, o := range s.seen[1] {
		if !o.running {
			continue // its arrival's cycle
		}
		switch {
		case o.now < firstSub:
			if o.rate != 0 || !o.pending {
				t.Errorf("t=%.2f, before its first sub-write: rate %.0f, pending %v; want 0, pending", o.now, o.rate, o.pending)
			}
		case o.trig == sched.Tick:
			if o.pending {
				t.Errorf("t=%.2f: still pending after its first sub-write", o.now)
			}
			if o.now < firstSub+0.1 && !(o.rate > 0 && o.rate < liveConnRate) {
				t.Errorf("t=%.2f: first reading %.0f, want in (0, %.0f)", o.now, o.rate, liveConnRate)
			}
			if o.now >= runStart+meterWindow+meterBucket {
				if d := math.Abs(o.rate - liveConnRate); d > sub/meterWindow {
					t.Errorf("t=%.2f, window full: rate %.0f, more than a sub-write per window from %.0f", o.now, o.rate, liveConnRate)
				}
				readings++
				sum += o.rate
			}
			lastTick = o.rate
		default:
			if o.rate != lastTick {
				t.Errorf("t=%.3f: a %v cycle saw rate %.0f, not the last tick's %.0f", o.now, o.trig, o.rate, lastTick)
			}
		}
	}
	if readings < 50 {
		t.Fatalf("only %v readings after the window filled", readings)
	}
	if avg := sum / readings; math.Abs(avg/liveConnRate-1) > 0.02 {
		t.Errorf("average reading %.0f, want %.0f within 2%%", avg, liveConnRate)
	}
	nonTick := 0
	for _, o := range s.seen[1] {
		if o.trig != sched.Tick {
			nonTick++
		}
	}
	if nonTick == 0 {
		t.Error("no cycle other than ticks: the test does not check stale readings")
	}
	for id := sched.TaskID(2); id < 7; id++ {
		for _, o := range s.seen[id] {
			if o.running && (o.rate != 0 || !o.pending) {
				t.Errorf("task %d (1 MB, under one sub-write) at t=%.2f: rate %.0f, pending %v; want 0, pending", id, o.now, o.rate, o.pending)
			}
		}
	}

	// The paper's observer.
	p := &script{decide: startAll(99)}
	opt := liveOptions()
	opt.Live = nil
	if _, err := Run(tb, tr, p, opt); err != nil {
		t.Fatal(err)
	}
	for _, o := range p.seen[1] {
		if o.now > runStart {
			if o.pending || math.Abs(o.rate-liveConnRate) > 1e-6*liveConnRate {
				t.Errorf("paper observer at t=%.2f: rate %.0f, pending %v; want %.0f", o.now, o.rate, o.pending, liveConnRate)
			}
			break
		}
	}
}

// TestLivePause: in the live view a victim pauses at once, stays in the
// snapshot (pending, its connections counted) until its sub-write in
// flight completes, and loses nothing; the paper's world keeps it until
// its replacement moves, then re-sends what it moved since its last
// checkpoint. Only runs that moved a whole file feed the model, with the
// file's size over the time since the start was decided.
func TestLivePause(t *testing.T) {
	tb := liveTestbed(t)
	const big, small = 200e6, 1e6
	tr := &trace.Trace{Name: "pause", Transfers: []trace.Transfer{
		{ID: 1, Src: "a", Dst: "b", Size: big},
		{ID: 2, Arrival: 1.02, Src: "a", Dst: "b", Size: small},
	}}
	const preemptAt = 1.1 // the first tick after task 2 arrives
	decide := func(snap *sched.Snapshot) []sched.Decision {
		var ds []sched.Decision
		for _, w := range snap.Waiting {
			if w.ID == 2 {
				for _, r := range snap.Running {
					ds = append(ds, sched.Decision{Kind: sched.Preempt, Task: r.ID, For: 2})
				}
			}
			ds = append(ds, sched.Decision{Kind: sched.Start, Task: w.ID, CC: 1})
		}
		return ds
	}

	est := model.NewHistory()
	s := &script{decide: decide}
	opt := liveOptions()
	opt.Estimator = est
	res, err := Run(tb, tr, s, opt)
	if err != nil {
		t.Fatal(err)
	}
	sub := float64(LiveDefaults().SubWrite)
	moved := (preemptAt - 0.05) * liveConnRate
	stop := 0.05 + math.Ceil(moved/sub)*sub/liveConnRate
	requeued := math.Inf(1)
	for _, o := range s.seen[1] {
		switch {
		case !o.running && o.now > preemptAt:
			requeued = math.Min(requeued, o.now)
		case o.now > preemptAt && o.now < stop && (!o.pending || o.cc != 1):
			t.Errorf("t=%.3f, pausing: pending %v, cc %d; want pending, cc 1", o.now, o.pending, o.cc)
		}
	}
	if math.Abs(requeued-stop) > 1e-6 {
		t.Errorf("victim back in the queue at t=%.6f, want its sub-write boundary at %.6f", requeued, stop)
	}
	if res.BytesLost != 0 || res.Preemptions != 1 {
		t.Errorf("lost %.0f bytes in %d preemptions; want 0 in 1", res.BytesLost, res.Preemptions)
	}
	var fin2 float64
	for _, r := range res.Tasks {
		if r.ID == 2 {
			fin2 = r.Finish
		}
	}
	// Task 2 started at 1.1 beside task 1 (one connection at each end).
	if got, want := est.Throughput("a", "b", 1, 1, 1, small), small/(fin2-preemptAt); math.Abs(got/want-1) > 1e-9 {
		t.Errorf("model after task 2: %.0f B/s, want its size over start-to-finish, %.0f", got, want)
	}
	if got := est.Throughput("a", "b", 1, 0, 0, big); got != 0 {
		t.Errorf("model learned %.0f B/s from task 1, whose completing run was a resumed one", got)
	}

	// The paper's world.
	p := &script{decide: decide}
	opt.Live, opt.Estimator = nil, model.NewHistory()
	res, err = Run(tb, tr, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range p.seen[1] {
		if !o.running && o.now > preemptAt {
			// It stops when its replacement starts, at 1.15 (that
			// runs no cycle): the next tick sees it waiting.
			if want := preemptAt + 0.1; math.Abs(o.now-want) > 1e-6 {
				t.Errorf("paper world: victim first seen back at t=%.6f, want the tick after its replacement's start, %.6f", o.now, want)
			}
			break
		}
	}
	if res.BytesLost <= 0 {
		t.Error("paper world: the victim lost nothing, want what it moved since its last checkpoint")
	}
}

// TestLiveDeterministic: the live view keeps runs pure functions of their
// inputs.
func TestLiveDeterministic(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Generate(trace.GenSpec{Minutes: 3, Seed: 3, Load: 0.6, Source: tb.Source, Destinations: tb.Destinations(), SourceCapacity: Gbps(tb.Endpoint(tb.Source).CapacityGbps)})
	if err != nil {
		t.Fatal(err)
	}
	var first *Result
	for i := 0; i < 2; i++ {
		s, err := sched.New("seal", sched.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(tb, tr, s, liveOptions())
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
			continue
		}
		if res.Interactive != first.Interactive || res.Preemptions != first.Preemptions || res.Starts != first.Starts {
			t.Fatalf("two runs differ: %+v, %d preemptions, %d starts vs %+v, %d, %d", res.Interactive, res.Preemptions, res.Starts, first.Interactive, first.Preemptions, first.Starts)
		}
	}
	if first.Preemptions == 0 {
		t.Log("note: no preemptions in this run")
	}
}
