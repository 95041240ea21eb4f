// Package sim owns the deterministic simulator: a fluid (rate-based)
// discrete-event model of endpoints, paths and transfers that implements
// the world a sched.Scheduler runs in. It builds the same Snapshot the live
// service builds, calls the same scheduler code, and applies its decisions
// with the costs real transfers pay: start-up time, preemption at the last
// checkpoint, contention past an endpoint's knee. Given a testbed, a trace,
// a scheduler and options, a run is a pure function: no clock, no
// randomness beyond the seeds it is given.
package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/sluice-dtn/sluice/dispatch"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// Options tunes a simulation; the zero value gives the paper's settings.
type Options struct {
	// Cycle is the scheduling period (default 0.5 s).
	Cycle float64
	// Startup is the cost of opening and authenticating a transfer's
	// connections, paid at every start and restart (default 0.5 s; set
	// NoStartup for none).
	Startup   float64
	NoStartup bool
	// Checkpoint is the checkpoint interval: a preempted task re-sends
	// what it moved since its last checkpoint (default 1 s; negative means
	// continuous checkpoints, so preemption loses nothing).
	Checkpoint float64
	// ObsWindow is the moving-average window of observed throughput
	// (default 5 s; negative means instantaneous rates).
	ObsWindow float64
	// BatchShift makes batch tasks' wait time count from this many seconds
	// before their arrival (SEAL2 of §6.4 uses 3600).
	BatchShift float64
	// NoCycleOnCompletion runs the scheduler only on the periodic cycle.
	// By default a completion also triggers a cycle when tasks wait, so
	// freed capacity is used at once.
	NoCycleOnCompletion bool
	// Estimator, if set, is used (and fed) instead of a fresh one trained
	// on the testbed.
	Estimator *model.History
	// MaxTime stops a run that has not finished by then (default: last
	// arrival + 7 days) with an error.
	MaxTime float64
	// Window is the interval [0, Window) over which bandwidth use is
	// accounted for the batch metrics (default: the trace's last
	// interactive arrival).
	Window float64
	// Observer, if set, is called after every cycle (for tests and
	// invariant checks).
	Observer func(w *World, decisions []sched.Decision)
	// Live, if set, presents the world to the scheduler as the live
	// service does (rates from the engine's meter read at ticks, pending
	// until the first sub-write, pauses at sub-write boundaries, the
	// model fed only by completions; see LiveService) instead of the
	// paper's idealised observer. ObsWindow and Checkpoint do not apply
	// then (a pause loses nothing). Zero fields take LiveDefaults'
	// values.
	Live *LiveService
}

// MaxArrival is the latest arrival time the simulator replays (seconds
// from the trace's start; about 31.7 years). Far beyond it the clock's
// float64 cannot tell a completion from the present, and a run would spin.
// It is the trace loaders' limit too (trace.MaxArrival), so that a trace
// file that loads can be replayed.
const MaxArrival = trace.MaxArrival

// validate refuses what the simulator cannot run: non-finite times, and a
// cycle so short that a replay would never end.
func (o Options) validate() error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"Cycle", o.Cycle}, {"Startup", o.Startup}, {"Checkpoint", o.Checkpoint}, {"ObsWindow", o.ObsWindow},
		{"BatchShift", o.BatchShift}, {"MaxTime", o.MaxTime}, {"Window", o.Window}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) {
			return fmt.Errorf("sim: %s is %v", c.name, c.v)
		}
	}
	if o.Cycle > 0 && o.Cycle < 1e-3 {
		return fmt.Errorf("sim: a cycle of %v s (at least 1 ms)", o.Cycle)
	}
	if o.Startup > 3600 {
		return fmt.Errorf("sim: a start-up cost of %v s (at most an hour)", o.Startup)
	}
	return nil
}

// later is now+dt, but never now itself: late in a long replay a
// completion a few bytes away is closer than the clock's resolution, and
// an event at the present would never move the clock to it.
func later(now, dt float64) float64 {
	return math.Max(now+dt, math.Nextafter(now, math.Inf(1)))
}

// DefaultReplayGrace is how long a replay may run after the trace's last
// arrival before it stops with an error (Options.MaxTime's default): 7
// days.
const DefaultReplayGrace = 7 * 86400

// replayLimit says what MaxTime is, for messages.
func (w *World) replayLimit() string {
	last := w.tasks[len(w.tasks)-1].st.Arrival
	if w.opt.MaxTime == last+DefaultReplayGrace {
		return fmt.Sprintf("t=%.0f s, 7 days after the last arrival (t=%.0f s), where a replay stops (MaxTime)", w.opt.MaxTime, last)
	}
	return fmt.Sprintf("t=%.0f s (MaxTime)", w.opt.MaxTime)
}

// bottleneck is the endpoint (or path) whose offered bytes take longest
// to move: even at its full capacity, with no start-up cost, contention
// or competing traffic, the transfers through it cannot all be done
// before finish. It bounds from below when any schedule can end.
type bottleneck struct {
	name     string
	capacity float64 // bytes/s
	bytes    float64 // offered through it from `from` on
	from     float64 // the arrival from which they are counted
	finish   float64 // from + bytes/capacity
	total    float64 // all bytes through it
}

// findBottleneck computes, for every endpoint and (with LinkGbps) every
// path, the earliest time the bytes through it could all be moved: for
// each arrival a, a plus the bytes arriving at or after a over the
// capacity. It returns the latest such bound. tasks are in arrival order.
func findBottleneck(tb *Testbed, tasks []*simTask) bottleneck {
	type acc struct {
		name   string
		cap    float64
		suffix float64
		best   bottleneck
	}
	accs := map[string]*acc{}
	get := func(key, name string, c float64) *acc {
		a := accs[key]
		if a == nil {
			a = &acc{name: name, cap: c}
			accs[key] = a
		}
		return a
	}
	add := func(a *acc, at, size float64) {
		a.suffix += size
		if f := at + a.suffix/a.cap; f > a.best.finish {
			a.best = bottleneck{name: a.name, capacity: a.cap, bytes: a.suffix, from: at, finish: f}
		}
	}
	for i := len(tasks) - 1; i >= 0; i-- {
		t := tasks[i]
		at, size := t.st.Arrival, float64(t.st.Size)
		add(get("e:"+t.st.Src, t.st.Src, Gbps(tb.Endpoint(t.st.Src).CapacityGbps)), at, size)
		if t.st.Dst != t.st.Src {
			add(get("e:"+t.st.Dst, t.st.Dst, Gbps(tb.Endpoint(t.st.Dst).CapacityGbps)), at, size)
		}
		if tb.LinkGbps > 0 {
			add(get("p:"+t.st.Src+"\x00"+t.st.Dst, "the path "+t.st.Src+" -> "+t.st.Dst, Gbps(tb.LinkGbps)), at, size)
		}
	}
	var b bottleneck
	for _, a := range accs {
		if a.best.finish > b.finish || a.best.finish == b.finish && a.best.name < b.name {
			b = a.best
			b.total = a.suffix
		}
	}
	return b
}

// checkFeasible refuses, before simulating, a trace that cannot finish
// by MaxTime on this testbed whatever the scheduler: the bytes offered
// through some endpoint need longer than that even at its full capacity.
// Such a replay would otherwise run for a long time and then stop with
// tasks unfinished.
func (w *World) checkFeasible() error {
	b := findBottleneck(w.tb, w.tasks)
	if b.finish <= w.opt.MaxTime {
		return nil
	}
	return fmt.Errorf("sim: this trace cannot finish on testbed %s: the transfers arriving from t=%.0f s on offer %s through %s, "+
		"which needs %.0f s at its full capacity of %.3g Gb/s, so the replay could not end before t=%.0f s; it stops at %s. "+
		"The testbed is too small for this trace (its sizes or arrival times may be wrong, or a larger testbed is needed)",
		w.tb.Name, b.from, volume(b.bytes), b.name, b.bytes/b.capacity, b.capacity*8/1e9, b.finish, w.replayLimit())
}

// unfinishedErr is the error of a replay that reached MaxTime.
func (w *World) unfinishedErr() error {
	left := 0.0
	for _, t := range w.live {
		left += t.left
	}
	b := findBottleneck(w.tb, w.tasks)
	return fmt.Errorf("sim: %d tasks unfinished (%s left to move) at %s; scheduler %s did not finish the trace in time. "+
		"The trace offers %s through %s (%.3g Gb/s), which needs at least %.0f s at full capacity",
		len(w.live), volume(left), w.replayLimit(), w.sch.Name(), volume(b.total), b.name, b.capacity*8/1e9, b.total/b.capacity)
}

// volume formats a byte count.
func volume(b float64) string {
	switch {
	case b >= 1e18:
		return fmt.Sprintf("%.3g EB", b/1e18)
	case b >= 1e15:
		return fmt.Sprintf("%.3g PB", b/1e15)
	case b >= 1e12:
		return fmt.Sprintf("%.3g TB", b/1e12)
	default:
		return fmt.Sprintf("%.3g GB", b/1e9)
	}
}

// checkArrival refuses an arrival the simulator cannot replay.
func checkArrival(id int64, at float64) error {
	if math.IsNaN(at) || math.IsInf(at, 0) || at < 0 || at > MaxArrival {
		return fmt.Errorf("sim: transfer %d has arrival %v (want 0 to %g s)", id, at, float64(MaxArrival))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Cycle <= 0 {
		o.Cycle = 0.5
	}
	if o.NoStartup {
		o.Startup = 0
	} else if o.Startup <= 0 {
		o.Startup = 0.5
	}
	if o.Checkpoint == 0 {
		o.Checkpoint = 1
	}
	if o.ObsWindow == 0 {
		o.ObsWindow = 5
	}
	if o.Live != nil {
		// A copy: the caller's settings stay as they were.
		l, d := *o.Live, LiveDefaults()
		if l.SubWrite <= 0 {
			l.SubWrite = d.SubWrite
		}
		if l.StartupCost == 0 {
			l.StartupCost = d.StartupCost
		}
		if l.Checkpoint == 0 {
			l.Checkpoint = d.Checkpoint
		}
		o.Live = &l
	}
	return o
}

type state int

const (
	waiting state = iota
	starting
	running
	done
)

// simTask is one task in the world.
type simTask struct {
	st     sched.Task
	state  state
	since  float64 // when the current state began
	wait   float64 // accumulated waiting time, closed states only
	trans  float64 // accumulated non-idle time, closed states only
	left   float64 // bytes left (fluid)
	cc     int     // connections moving data now
	target int     // concurrency ordered (>= cc while an increase starts)
	rate   float64
	// readyAt is when a start or a concurrency increase takes effect.
	readyAt float64
	// stopAt is when a preempted task stops (its replacement has started).
	stopAt    float64
	stopFor   sched.TaskID
	runStart  float64 // when the current run began moving data
	samples   []sample
	finish    float64
	preempted int
	ideal     float64
	lastObs   float64
	flow      flow
	// Indexes of the task's endpoints and source-destination pair.
	si, di, pi int
	// Bytes moved inside the accounting window.
	windowBytes float64
	// lv is the live service's view of the run (nil unless
	// Options.Live).
	lv *liveTask
	// fx is the streaming engine's bookkeeping (stream.go); Run leaves
	// it zero.
	fx streamTask
}

type sample struct{ t, left float64 }

// World is the simulated world. It is exported for Observers.
type World struct {
	tb    *Testbed
	opt   Options
	sch   sched.Scheduler
	est   *model.History
	now   float64
	tasks []*simTask
	byID  map[sched.TaskID]*simTask
	// cyc builds the snapshots and applies the decisions, as the live
	// service's loop does (package dispatch); eps are its endpoint
	// records, which hold the loads the last snapshot summed.
	cyc   dispatch.Cycle
	eps   map[string]*sched.Endpoint
	epIdx map[string]int
	alloc allocator
	// live holds tasks that are not done, in ID order.
	live        []*simTask
	liveDirty   bool
	capacity    []float64
	pairs       map[[2]string]int
	conns       []int
	pathConns   []int
	pathCaps    []float64 // zeros, reused to extend capacity each event
	flows       []*flow
	ratesDirty  bool
	preemptions int
	starts      int
	resizes     int
	lost        float64
	moved       float64
	stepErr     error
	// admitsOnArrival: the scheduler wants a cycle at every arrival.
	admitsOnArrival bool
	preemptLog      []PreemptEvent
	// liveLoad is the live view's known load per endpoint during apply.
	liveLoad []int
	// deferRates leaves rate allocation to the streaming engine
	// (stream.go), which reallocates only the flows a change can affect
	// instead of every flow at every event.
	deferRates bool
}

// Now is the simulated time.
func (w *World) Now() float64 { return w.now }

// Progress returns how many of the trace's transfers are done, and how
// many it has, for a caller reporting a long replay's progress.
func (w *World) Progress() (finished, total int) {
	for _, t := range w.tasks {
		if t.state == done {
			finished++
		}
	}
	return finished, len(w.tasks)
}

// Concurrency returns the concurrency the scheduler has ordered at each
// endpoint, leaving out tasks that are draining after a preemption, and
// the total.
func (w *World) Concurrency() (map[string]int, int) {
	m := map[string]int{}
	total := 0
	for _, t := range w.live {
		if t.state == waiting || t.stopAt > 0 || t.pausing() {
			continue
		}
		m[t.st.Src] += t.target
		m[t.st.Dst] += t.target
		total += t.target
	}
	return m, total
}

// Run simulates tr on tb under s.
func Run(tb *Testbed, tr *trace.Trace, s sched.Scheduler, opt Options) (*Result, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	if tr == nil || len(tr.Transfers) == 0 {
		return nil, errors.New("sim: empty trace")
	}
	w := &World{tb: tb, opt: opt, sch: s, byID: map[sched.TaskID]*simTask{}, epIdx: map[string]int{}, pairs: map[[2]string]int{}}
	for i, e := range tb.Endpoints {
		w.cyc.Endpoint(e.Name, Gbps(e.CapacityGbps), e.MaxCC)
		w.epIdx[e.Name] = i
		w.capacity = append(w.capacity, 0)
	}
	w.eps = w.cyc.Endpoints()
	if a, ok := s.(sched.ArrivalAdmitter); ok {
		w.admitsOnArrival = a.AdmitsOnArrival()
	}
	w.est = opt.Estimator
	if w.est == nil {
		w.est = Train(tb)
	}
	lastInteractive := 0.0
	for _, x := range tr.Transfers {
		if !tb.Has(x.Src) || !tb.Has(x.Dst) {
			return nil, fmt.Errorf("sim: transfer %d goes %s -> %s, not endpoints of testbed %s (remap the trace)", x.ID, x.Src, x.Dst, tb.Name)
		}
		if x.Size < 0 {
			return nil, fmt.Errorf("sim: transfer %d has negative size %d", x.ID, x.Size)
		}
		if err := checkArrival(x.ID, x.Arrival); err != nil {
			return nil, err
		}
		if _, dup := w.byID[sched.TaskID(x.ID)]; dup {
			return nil, fmt.Errorf("sim: transfer id %d appears twice", x.ID)
		}
		t := &simTask{st: sched.Task{ID: sched.TaskID(x.ID), Src: x.Src, Dst: x.Dst, Size: x.Size, Left: x.Size, Batch: x.Batch, Arrival: x.Arrival}, left: float64(x.Size)}
		if opt.Live != nil {
			t.lv = &liveTask{}
		}
		t.ideal = tb.idealTT(x.Src, x.Dst, x.Size, opt.Startup)
		t.si, t.di = w.epIdx[x.Src], w.epIdx[x.Dst]
		pk := [2]string{x.Src, x.Dst}
		if _, ok := w.pairs[pk]; !ok {
			w.pairs[pk] = len(w.pairs)
		}
		t.pi = w.pairs[pk]
		w.tasks = append(w.tasks, t)
		w.byID[t.st.ID] = t
		if !x.Batch && x.Arrival > lastInteractive {
			lastInteractive = x.Arrival
		}
	}
	sort.SliceStable(w.tasks, func(i, j int) bool { return w.tasks[i].st.Arrival < w.tasks[j].st.Arrival })
	if opt.Window <= 0 {
		w.opt.Window = lastInteractive
	}
	if opt.MaxTime <= 0 {
		w.opt.MaxTime = w.tasks[len(w.tasks)-1].st.Arrival + DefaultReplayGrace
	}
	if err := w.checkFeasible(); err != nil {
		return nil, err
	}
	if err := w.loop(); err != nil {
		return nil, err
	}
	return w.result(tr.Name), nil
}

// loop is the discrete-event loop.
func (w *World) loop() error {
	next := 0 // next arrival
	nextCycle := 0.0
	const eps = 1e-9
	for {
		// The next event time.
		tn := math.Inf(1)
		if next < len(w.tasks) {
			tn = w.tasks[next].st.Arrival
		}
		if len(w.live) > 0 || next < len(w.tasks) {
			if nextCycle < tn && len(w.live) > 0 {
				tn = nextCycle
			}
		}
		for _, t := range w.live {
			switch t.state {
			case starting:
				tn = math.Min(tn, t.readyAt)
			case running:
				if t.rate > 0 {
					tn = math.Min(tn, later(w.now, t.left/t.rate))
				}
				if t.readyAt > 0 {
					tn = math.Min(tn, t.readyAt)
				}
				if t.stopAt > 0 {
					tn = math.Min(tn, t.stopAt)
				}
				if t.pausing() {
					tn = math.Min(tn, w.pauseDue(t))
				}
			}
		}
		for _, e := range w.tb.Endpoints {
			for _, s := range e.ExternalLoad {
				if s.At > w.now+eps {
					tn = math.Min(tn, s.At)
					break
				}
			}
		}
		if math.IsInf(tn, 1) {
			if len(w.live) > 0 {
				return fmt.Errorf("sim: stalled at t=%.3f with %d unfinished tasks (scheduler %s never started them)", w.now, len(w.live), w.sch.Name())
			}
			return nil
		}
		if tn > w.opt.MaxTime {
			return w.unfinishedErr()
		}
		w.advance(tn)
		// Completions and state changes due now.
		completed := false
		for _, t := range w.live {
			switch {
			case t.state == running && t.left < 0.5:
				w.finish(t)
				completed = true
			case t.state == starting && t.readyAt <= w.now+eps:
				w.setState(t, running)
				t.cc = t.target
				t.readyAt = 0
				t.runStart = w.now
				t.samples = t.samples[:0]
				t.samples = append(t.samples, sample{w.now, t.left})
				if w.opt.Live != nil {
					w.liveBegin(t)
				}
				w.ratesDirty = true
			case t.state == running && t.readyAt > 0 && t.readyAt <= w.now+eps:
				t.cc = t.target
				t.readyAt = 0
				w.ratesDirty = true
			}
		}
		for _, t := range w.live {
			if t.state == running && t.stopAt > 0 && t.stopAt <= w.now+eps {
				w.stop(t)
			}
			if t.state == running && t.pausing() && w.pauseDue(t) <= w.now+eps {
				if t.lv.pauseAt >= t.lv.runLeft-0.5 {
					// Its last sub-write: it completes (the
					// service lets a verifying transfer end).
					w.finish(t)
				} else {
					w.livePaused(t)
				}
				// The service runs a cycle at the end of any run.
				completed = true
			}
		}
		if w.liveDirty {
			w.compact()
		}
		arrived := false
		for next < len(w.tasks) && w.tasks[next].st.Arrival <= w.now+eps {
			arrived = true
			t := w.tasks[next]
			t.state = waiting
			t.since = t.st.Arrival
			if t.st.Batch && w.opt.BatchShift > 0 {
				t.wait = w.opt.BatchShift
			}
			w.live = append(w.live, t)
			next++
		}
		if w.ratesDirty {
			w.rates()
		}
		trigger, cycleNow := sched.Tick, w.now >= nextCycle-eps
		if !cycleNow && completed && !w.opt.NoCycleOnCompletion && w.anyWaiting() {
			trigger, cycleNow = sched.Completion, true
		}
		if !cycleNow && arrived && w.admitsOnArrival {
			trigger, cycleNow = sched.Arrival, true
		}
		if cycleNow {
			w.cycle(trigger)
			if w.stepErr != nil {
				return w.stepErr
			}
			if w.now >= nextCycle-eps {
				nextCycle = (math.Floor(w.now/w.opt.Cycle+eps) + 1) * w.opt.Cycle
			}
		}
		if len(w.live) == 0 && next >= len(w.tasks) {
			return nil
		}
	}
}

func (w *World) anyWaiting() bool {
	for _, t := range w.live {
		if t.state == waiting {
			return true
		}
	}
	return false
}

// advance moves time to tn, moving bytes at the current rates.
func (w *World) advance(tn float64) {
	dt := tn - w.now
	if dt <= 0 {
		w.now = math.Max(w.now, tn)
		return
	}
	win := w.opt.Window
	for _, t := range w.live {
		if t.state != running || t.rate <= 0 {
			continue
		}
		b := math.Min(t.rate*dt, t.left)
		if w.opt.Live != nil {
			w.liveCredit(t, w.now, t.lv.runLeft-t.left, b)
		}
		t.left -= b
		w.moved += b
		if w.now < win {
			frac := (math.Min(tn, win) - w.now) / dt
			t.windowBytes += b * frac
		}
	}
	w.now = tn
}

func (w *World) setState(t *simTask, s state) {
	switch t.state {
	case waiting:
		t.wait += w.now - t.since
	case starting, running:
		t.trans += w.now - t.since
	}
	t.state = s
	t.since = w.now
}

func (w *World) finish(t *simTask) {
	w.setState(t, done)
	// The fluid model stops a hair short of the end (floating point);
	// the last fraction of a byte is moved with the rest.
	w.moved += t.left
	t.left = 0
	t.finish = w.now
	t.rate = 0
	if w.opt.Live != nil {
		t.lv.pausing = false
		w.liveObserve(t)
	} else {
		w.observe(t)
	}
	w.liveDirty = true
	w.ratesDirty = true
}

// stop ends a preempted task's run: it loses what it moved since its last
// checkpoint and goes back to the wait queue.
func (w *World) stop(t *simTask) {
	w.observe(t)
	if w.opt.Checkpoint > 0 {
		// Rates are piecewise constant, so the current rate times the
		// time since the last checkpoint is what gets re-sent.
		run := w.now - t.runStart
		sinceCkpt := run - math.Floor(run/w.opt.Checkpoint)*w.opt.Checkpoint
		lost := math.Min(t.rate*sinceCkpt, float64(t.st.Size)-t.left)
		t.left += lost
		w.lost += lost
	}
	t.stopAt = 0
	t.cc, t.target, t.rate, t.readyAt = 0, 0, 0, 0
	t.preempted++
	w.setState(t, waiting)
	w.ratesDirty = true
}

func (w *World) compact() {
	kept := w.live[:0]
	for _, t := range w.live {
		if t.state != done {
			kept = append(kept, t)
		}
	}
	for i := len(kept); i < len(w.live); i++ {
		w.live[i] = nil
	}
	w.live = kept
	w.liveDirty = false
}

// rates recomputes every transferring task's rate: the endpoints' and
// paths' capacities for the connections now open, shared by weighted
// max-min fairness.
func (w *World) rates() {
	if w.deferRates {
		return
	}
	w.ratesDirty = false
	n := len(w.tb.Endpoints)
	w.conns = resize(w.conns, n)
	w.pathConns = resize(w.pathConns, len(w.pairs))
	w.flows = w.flows[:0]
	for _, t := range w.live {
		if t.state != running || t.cc == 0 {
			t.rate = 0
			continue
		}
		k := w.tb.streams(t.cc, t.st.Size)
		w.conns[t.si] += k
		w.conns[t.di] += k
		w.pathConns[t.pi] += k
	}
	w.capacity = w.capacity[:0]
	for i := range w.tb.Endpoints {
		w.capacity = append(w.capacity, w.tb.Endpoints[i].capacity(w.conns[i], w.now))
	}
	// Path resources follow the endpoints: index n + pair index.
	w.capacity = append(w.capacity, resize(w.pathCaps, len(w.pairs))...)
	for _, t := range w.live {
		if t.state != running || t.cc == 0 {
			continue
		}
		f := &t.flow
		f.res = [3]int{t.si, t.di, -1}
		if c := w.tb.pathCapacity(t.st.Src, t.st.Dst, w.pathConns[t.pi]); c > 0 {
			f.res[2] = n + t.pi
			w.capacity[n+t.pi] = c
		}
		f.weight = float64(w.tb.streams(t.cc, t.st.Size))
		if w.tb.EqualShare {
			f.weight = 1
		}
		f.cap = w.tb.demand(t.st.Src, t.st.Dst, t.cc, t.st.Size)
		w.flows = append(w.flows, f)
	}
	w.alloc.run(w.flows, w.capacity)
	for _, t := range w.live {
		if t.state == running && t.cc > 0 {
			t.rate = t.flow.rate
		}
	}
}

// resize returns b with length n and every element zero, reusing its
// storage: rates runs at every event, millions of times in a long replay.
func resize[T int | float64](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// observedRate is the task's moving-average throughput over the
// observation window.
func (w *World) observedRate(t *simTask) float64 {
	if t.state != running {
		return 0
	}
	if w.opt.ObsWindow < 0 || len(t.samples) == 0 {
		return t.rate
	}
	cut := w.now - w.opt.ObsWindow
	i := 0
	for i < len(t.samples)-1 && t.samples[i+1].t <= cut+1e-9 {
		i++
	}
	s := t.samples[i]
	if w.now-s.t < 1e-9 {
		return t.rate
	}
	return (s.left - t.left) / (w.now - s.t)
}

// observe feeds the estimator with what t achieved recently.
func (w *World) observe(t *simTask) {
	if t.state != running && t.state != done {
		return
	}
	r := w.observedRate(t)
	if r <= 0 || t.cc == 0 {
		return
	}
	srcLoad, dstLoad := w.loadsExcluding(t)
	w.est.Observe(model.Obs{Time: w.now, Src: t.st.Src, Dst: t.st.Dst, CC: t.cc, SrcLoad: srcLoad, DstLoad: dstLoad, Size: t.st.Size, Thr: r})
	t.lastObs = w.now
}

func (w *World) loadsExcluding(t *simTask) (int, int) {
	return w.eps[t.st.Src].CC - t.target, w.eps[t.st.Dst].CC - t.target
}

// cycle builds a snapshot, runs the scheduler and applies its decisions.
func (w *World) cycle(trigger sched.Trigger) {
	w.est.SetNow(w.now)
	p := dispatch.Params{Trigger: trigger, Now: w.now, TotalMaxCC: w.tb.TotalMaxCC, Estimator: w.est, StartupCost: w.opt.Startup, Checkpoint: max(w.opt.Checkpoint, 0)}
	if l := w.opt.Live; l != nil {
		p.StartupCost, p.Checkpoint = l.StartupCost, l.Checkpoint
	}
	w.cyc.Begin(p)
	if w.opt.Live != nil {
		w.liveTasks(trigger)
		w.decide(w.cyc.Snapshot())
		return
	}
	for _, t := range w.live {
		st := &t.st
		st.Left = int64(math.Ceil(t.left))
		st.Wait, st.Trans = t.wait, t.trans
		if t.state == waiting {
			w.cyc.Waiting(st, w.now-t.since)
			continue
		}
		st.CC = t.target
		st.Rate = w.observedRate(t)
		st.Pending = t.state == starting || t.readyAt > 0
		if t.stopAt > 0 {
			// A preempted task still draining until its replacement
			// moves data: its bytes count as observed, but its
			// connections already belong to the replacement, so the
			// scheduler no longer sees it.
			st.Running, st.Trans = true, st.Trans+w.now-t.since
			w.cyc.Load(st.Src, 0, st.Rate)
			w.cyc.Load(st.Dst, 0, st.Rate)
			continue
		}
		w.cyc.Running(st, w.now-t.since)
		// Sample for the moving average, and observe every window.
		if t.state == running {
			t.samples = append(t.samples, sample{w.now, t.left})
			if len(t.samples) > 64 {
				cut := w.now - math.Max(w.opt.ObsWindow, 0) - 1
				j := 0
				for j < len(t.samples)-2 && t.samples[j+1].t < cut {
					j++
				}
				t.samples = append(t.samples[:0], t.samples[j:]...)
			}
		}
	}
	snap := w.cyc.Snapshot()
	for _, t := range w.live {
		if t.state == running && w.opt.ObsWindow > 0 && w.now-t.lastObs >= w.opt.ObsWindow && w.now-t.runStart >= w.opt.ObsWindow {
			w.observe(t)
		}
	}
	w.decide(snap)
}

// decide runs one cycle on snap: the scheduler plans and the fluid model
// carries the plan out (dispatch.Decide, the service's cycle too).
func (w *World) decide(snap *sched.Snapshot) {
	if w.opt.Live != nil {
		// The service's known loads, as its starts update them
		// (server/world.go start): the snapshot's, plus the cycle's
		// earlier starts.
		w.liveLoad = resize(w.liveLoad, len(w.tb.Endpoints))
		for name, e := range w.eps {
			w.liveLoad[w.epIdx[name]] = e.CC
		}
	}
	// The simulator has no admission rules of its own (its traces have
	// no fixed streams, adaptive clients or VO allocations): the chain
	// is empty, and nothing is refused to plan around.
	out, err := dispatch.Decide(&w.cyc, w.sch, snap, simRunner{w}, 0)
	if err != nil {
		w.stepErr = err
	} else if w.ratesDirty {
		w.rates()
	}
	if w.opt.Observer != nil {
		w.opt.Observer(w, out.Decisions)
	}
}

// liveTasks adds the tasks as the live service shows them to its
// scheduler (server/world.go snapshot and fillSchedTask); see
// LiveService.
func (w *World) liveTasks(trigger sched.Trigger) {
	for _, t := range w.live {
		st := &t.st
		st.Left = int64(math.Ceil(t.left))
		st.Wait, st.Trans = t.wait, t.trans
		if t.state == waiting {
			w.cyc.Waiting(st, w.now-t.since)
			continue
		}
		if trigger == sched.Tick && t.state == running {
			// The service reads the meters at its tick, just before
			// the periodic cycle; other cycles see the last reading.
			t.lv.rate = t.lv.meter.rate(w.now)
		}
		st.CC, st.Rate = t.target, t.lv.rate
		moving := t.state == running && t.lv.credited > 0
		st.Pending = !moving || t.lv.pausing
		if t.state == running {
			// Progress is what the completed sub-writes recorded.
			st.Left = int64(math.Ceil(t.lv.runLeft - t.lv.credited))
		}
		// A pausing victim keeps its place and its connections until
		// its run ends, as in the service.
		w.cyc.Running(st, w.now-t.since)
	}
}

// simRunner carries out decisions in the fluid model. A decision the
// world cannot carry out is the scheduler's bug, and ends the run.
type simRunner struct{ w *World }

func (r simRunner) Lookup(d sched.Decision) (*simTask, bool, error) {
	w := r.w
	t := w.byID[d.Task]
	if t == nil || t.state == done {
		return nil, false, fmt.Errorf("sim: %s decided %v for unknown or finished task", w.sch.Name(), d)
	}
	switch d.Kind {
	case sched.Start:
		if t.state != waiting || d.CC < 1 {
			return nil, false, fmt.Errorf("sim: %s decided %v for a task that is not waiting", w.sch.Name(), d)
		}
	case sched.Preempt:
		if t.state == waiting {
			return nil, false, nil
		}
	case sched.SetCC:
		if t.state == waiting || d.CC < 1 {
			return nil, false, fmt.Errorf("sim: %s decided %v for a task that is not running", w.sch.Name(), d)
		}
	}
	return t, true, nil
}

func (r simRunner) CC(t *simTask) int { return t.target }

func (r simRunner) Start(t *simTask, cc int) error {
	w := r.w
	w.setState(t, starting)
	t.target = cc
	t.readyAt = w.now + w.opt.Startup
	w.starts++
	if w.opt.Live != nil {
		*t.lv = liveTask{startAt: w.now, fromZero: t.left >= float64(t.st.Size)-0.5, srcLoad: w.liveLoad[t.si], dstLoad: w.liveLoad[t.di]}
		w.liveLoad[t.si] += cc
		w.liveLoad[t.di] += cc
	}
	if w.opt.Startup == 0 {
		w.setState(t, running)
		t.cc, t.readyAt, t.runStart = t.target, 0, w.now
		t.samples = append(t.samples[:0], sample{w.now, t.left})
		if w.opt.Live != nil {
			w.liveBegin(t)
		}
		w.ratesDirty = true
	}
	return nil
}

func (r simRunner) Preempt(t *simTask, d sched.Decision) error {
	w := r.w
	w.preemptions++
	w.preemptLog = append(w.preemptLog, PreemptEvent{Time: w.now, Victim: int64(d.Task), For: int64(d.For)})
	if t.state == starting {
		// Nothing moved yet: it simply goes back to the queue.
		t.cc, t.target, t.readyAt = 0, 0, 0
		t.preempted++
		w.setState(t, waiting)
		return nil
	}
	if w.opt.Live != nil {
		// The service pauses the victim at once (the replacement's
		// Start comes after this decision): it stops when its
		// sub-writes in flight complete.
		w.livePause(t)
		return nil
	}
	// Keep the victim running until its replacement moves data (SC'15
	// §4.5).
	rp := w.byID[d.For]
	at := w.now
	if rp != nil && rp.state == starting {
		at = rp.readyAt
	}
	if at <= w.now {
		w.stop(t)
	} else {
		t.stopAt, t.stopFor = at, d.For
	}
	return nil
}

func (r simRunner) SetCC(t *simTask, cc int) error {
	w := r.w
	w.resizes++
	if cc < t.target || t.state == starting || w.opt.Startup == 0 {
		t.target = cc
		if t.state == running {
			t.cc = cc
			t.readyAt = 0
		}
		w.ratesDirty = true
	} else {
		// New partial transfers open while the old ones go on.
		t.target = cc
		t.readyAt = w.now + w.opt.Startup
	}
	return nil
}

// IdealTT is the ground-truth TT_ideal used by the metrics: start-up plus
// the time at the best concurrency on idle endpoints. It is the same for
// every scheduler, so slowdowns compare; the testbed uses it for runs on
// real bytes too.
func (tb *Testbed) IdealTT(src, dst string, size int64, startup float64) float64 {
	return tb.idealTT(src, dst, size, startup)
}

func (tb *Testbed) idealTT(src, dst string, size int64, startup float64) float64 {
	best := 0.0
	maxCC := 16
	if size <= 10e6 {
		maxCC = 1
	}
	for cc := 1; cc <= maxCC; cc++ {
		r := tb.demand(src, dst, cc, size)
		for _, e := range [2]string{src, dst} {
			r = math.Min(r, tb.Endpoint(e).capacity(cc, 0))
		}
		best = math.Max(best, r)
	}
	return startup + float64(size)/best
}
