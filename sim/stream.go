package sim

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"time"

	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// The streaming engine (RunStream) replays a workload too large to hold:
// millions of transfers over thousands of endpoints. It is the same World
// as Run's -- the same snapshot built by World.cycle, the same scheduler
// call, the same World.apply of its decisions with start-up, preemption at
// the last checkpoint and concurrency changes, the same estimator fed the
// same way, the same fluid model shared by the same max-min allocator --
// driven by a different event loop, because Run's loop visits every
// unfinished task at every event and reallocates every flow whenever one
// changes, which is quadratic in the number of tasks in flight:
//
//   - arrivals are pulled from an ArrivalSource when due, and a finished
//     task is folded into streaming statistics and forgotten, so the
//     engine holds only the tasks in flight, never the workload or one
//     record per task (the estimator it feeds keeps its own history);
//   - the next start, stop and completion times are kept in a heap
//     (completions re-timed when a rate changes) instead of found by a
//     scan;
//   - bytes are moved lazily: a task's progress is brought up to date
//     only when its rate changes, it changes state, or a cycle looks at
//     it;
//   - when flows change, only the flows that can be affected are
//     reallocated: those reached from the changed endpoints and paths
//     through congested resources (whose flows together could use more
//     than the capacity). A resource whose flows cannot fill it binds
//     nobody, so max-min fairness over the reached flows alone gives the
//     same rates as over all of them.
//
// What it leaves out: the live-service view (Options.Live), external load
// on endpoints, and the batch window metrics (SpareUsed). The last byte
// fractions and float summation orders differ from Run's, so figures agree
// with Run's to rounding (see TestStreamMatchesRun), not bit for bit.

// ArrivalSource yields a workload's transfers one at a time, in arrival
// order.
type ArrivalSource interface {
	// Next returns the next transfer, or false when there are no more.
	// An error from Err ends the run.
	Next() (trace.Transfer, bool)
	// Err is the error that stopped the source early, if any.
	Err() error
}

// SliceSource is an ArrivalSource over a materialised trace, in the order
// Run replays it (by arrival, ties in trace order).
type SliceSource struct {
	xs []trace.Transfer
	i  int
}

// NewSliceSource returns a source over tr's transfers (not copied; tr
// must not change during the run).
func NewSliceSource(tr *trace.Trace) *SliceSource {
	xs := tr.Transfers
	byArrival := func(i, j int) bool { return xs[i].Arrival < xs[j].Arrival }
	if !sort.SliceIsSorted(xs, byArrival) {
		xs = append([]trace.Transfer(nil), xs...)
		sort.SliceStable(xs, byArrival)
	}
	return &SliceSource{xs: xs}
}

// Next implements ArrivalSource.
func (s *SliceSource) Next() (trace.Transfer, bool) {
	if s.i >= len(s.xs) {
		return trace.Transfer{}, false
	}
	s.i++
	return s.xs[s.i-1], true
}

// Err implements ArrivalSource.
func (s *SliceSource) Err() error { return nil }

// CycleInfo describes one scheduling cycle of a streaming run.
type CycleInfo struct {
	// Time is the simulated time of the cycle.
	Time    float64
	Trigger sched.Trigger
	// Waiting and Running are the snapshot's queued and running tasks.
	Waiting, Running int
	// Decisions is how many decisions the scheduler returned.
	Decisions int
	// Schedule is the wall time of the scheduler's Schedule call alone
	// (not the snapshot or the applying), ScheduleCPU the CPU time of
	// the thread that ran it (zero where not measured: see threadCPU).
	// They are the only figures of a run that are not deterministic.
	Schedule    time.Duration
	ScheduleCPU time.Duration
}

// StreamProgress is a streaming run's state, reported every
// StreamOptions.ProgressEvery simulated seconds.
type StreamProgress struct {
	Time                float64
	Arrived, Completed  int64
	Waiting, InFlight   int
	Cycles              int64
	ScheduleWall        time.Duration
	ScheduleCPU         time.Duration
	ReallocatedFlows    int64
	Reallocations       int64
	LastCycleQueueDepth int
}

// StreamOptions configures RunStream.
type StreamOptions struct {
	// Options are the world's settings, as for Run, except that Live is
	// not supported and Window is not used (there is no SpareUsed).
	Options
	// OnCycle, if set, is called after every cycle.
	OnCycle func(CycleInfo)
	// OnTask, if set, is called with each task's outcome as it finishes
	// (for tests; the run keeps no per-task record itself).
	OnTask func(TaskResult)
	// OnProgress, if set, is called every ProgressEvery simulated seconds
	// (default 3600).
	OnProgress    func(StreamProgress)
	ProgressEvery float64
	// Resolution, if positive, is the grain in seconds of completion
	// times: a transfer that would finish at t finishes at the next
	// multiple of Resolution instead, so that the completions of one
	// grain share one reallocation of rates. Zero (the default) keeps
	// exact times. A facility finishes hundreds of transfers a second,
	// and each re-shares the capacity of a component of hundreds of
	// flows; a grain of a tenth of a scheduling cycle makes its replay
	// about 1.8 times faster and delays each transfer by less than the
	// grain.
	Resolution float64
}

// Summary is a streaming summary of slowdown, turnaround and wait over a
// set of tasks: means and maxima exact, percentiles from log-spaced
// histograms (100 bins per decade, so within about 1.2%).
type Summary struct {
	N             int64   `json:"n"`
	AvgSlowdown   float64 `json:"avg_slowdown"`
	AvgTurnaround float64 `json:"avg_turnaround"`
	AvgWait       float64 `json:"avg_wait"`
	MaxSlowdown   float64 `json:"max_slowdown"`
	MaxTurnaround float64 `json:"max_turnaround"`
	P50Slowdown   float64 `json:"p50_slowdown"`
	P90Slowdown   float64 `json:"p90_slowdown"`
	P99Slowdown   float64 `json:"p99_slowdown"`
	P50Turnaround float64 `json:"p50_turnaround"`
	P99Turnaround float64 `json:"p99_turnaround"`
	P99Wait       float64 `json:"p99_wait"`
}

// StreamResult is the outcome of a streaming run.
type StreamResult struct {
	Testbed   string `json:"testbed"`
	Scheduler string `json:"scheduler"`
	// Arrived counts the transfers taken from the source, Completed those
	// that finished; a run that returns without error has drained, so
	// they are equal.
	Arrived   int64 `json:"arrived"`
	Completed int64 `json:"completed"`
	// Interactive is over interactive tasks, Batch over batch tasks,
	// ByClass per size class of the interactive ones.
	Interactive Summary            `json:"interactive"`
	Batch       Summary            `json:"batch"`
	ByClass     map[string]Summary `json:"by_class"`
	Makespan    float64            `json:"makespan"`
	Starts      int64              `json:"starts"`
	Preemptions int64              `json:"preemptions"`
	Resizes     int64              `json:"resizes"`
	BytesMoved  float64            `json:"bytes_moved"`
	BytesLost   float64            `json:"bytes_lost"`
	// Bytes is the volume of the transfers that arrived.
	Bytes      float64 `json:"bytes"`
	ModelError float64 `json:"model_error"`
	// Cycles counts scheduling cycles, CyclesByTrigger by why they ran
	// (tick, completion, arrival).
	Cycles          int64            `json:"cycles"`
	CyclesByTrigger map[string]int64 `json:"cycles_by_trigger"`
	// MaxWaiting and MaxRunning are the largest queue and running set a
	// cycle saw.
	MaxWaiting int `json:"max_waiting"`
	MaxRunning int `json:"max_running"`
	// Events counts the loop's event times; Reallocations the times
	// rates were reallocated and ReallocatedFlows the flows reallocated
	// in all (their ratio is the mean size of what a change reaches).
	Events           int64 `json:"events"`
	Reallocations    int64 `json:"reallocations"`
	ReallocatedFlows int64 `json:"reallocated_flows"`
	// ScheduleWall is the total wall time spent inside Schedule,
	// ScheduleCPU its CPU time (zero where not measured).
	ScheduleWall time.Duration `json:"schedule_wall_ns"`
	ScheduleCPU  time.Duration `json:"schedule_cpu_ns"`
}

// WithoutTimes returns r with its wall and CPU times zeroed: what is
// left is a pure function of the testbed, the arrivals, the scheduler and
// the options, so two runs of one seed compare equal.
func (r StreamResult) WithoutTimes() StreamResult {
	r.ScheduleWall, r.ScheduleCPU = 0, 0
	return r
}

// streamTask is the streaming engine's bookkeeping of one task.
type streamTask struct {
	at     float64 // time t.left is exact for
	ver    uint32  // completion version: a heap entry of another is stale
	inFlow bool
	cc     int     // concurrency the flow lists hold it with
	k      int     // connections it opens
	demand float64 // the most it can move alone (its flow's cap)
	weight float64
	pos    [3]int32 // its index in its resources' flow lists
	comp   uint32   // reallocation stamp
	touch  uint32   // touched stamp
}

type evKind uint8

const (
	evComplete evKind = iota
	evReady
	evStop
)

type event struct {
	t    float64
	seq  uint64 // insertion order: ties pop in the order pushed
	task *simTask
	ver  uint32
	kind evKind
}

// evHeap is a binary min-heap of events by (time, insertion order). It
// is written out for its element type, like the allocator's levelHeap:
// container/heap's interface calls, and a generic heap taking a less
// function, were about 12% slower on the facility replay.
type evHeap []event

func (h evHeap) less(i, j int) bool {
	return h[i].t < h[j].t || (h[i].t == h[j].t && h[i].seq < h[j].seq)
}

func (h *evHeap) push(e event) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *evHeap) pop() event {
	s := *h
	e := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = event{}
	s = s[:n]
	*h = s
	if n > 0 {
		h.down(0)
	}
	return e
}

func (h evHeap) down(i int) {
	n := len(h)
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// timedScheduler measures the wall time of each Schedule call and keeps
// its decisions for the engine.
type timedScheduler struct {
	sched.Scheduler
	last []sched.Decision
	dur  time.Duration
	cpu  time.Duration
	nw   int
	nr   int
}

func (t *timedScheduler) Schedule(s *sched.Snapshot) []sched.Decision {
	t.nw, t.nr = len(s.Waiting), len(s.Running)
	c0 := threadCPU()
	t0 := time.Now()
	ds := t.Scheduler.Schedule(s)
	t.dur = time.Since(t0)
	t.cpu = threadCPU() - c0
	t.last = ds
	return ds
}

// stream is the streaming engine's state beside its World.
type stream struct {
	w   *World
	so  StreamOptions
	ts  *timedScheduler
	n   int // endpoints; path resources are n + pair index
	seq uint64
	ev  evHeap
	// cross holds, for each flow, when less than half a byte will be
	// left: Run finishes such a task at the first event after that, and
	// so does the streaming engine.
	cross evHeap
	// Per resource (endpoints, then paths): the flows through it, the
	// connections they open, and stamps for reallocation.
	res     [][]*simTask
	conns   []int
	mark    []uint32
	congAt  []uint32
	congVal []bool
	local   []int32
	dirty   []int32
	stamp   uint32
	// pairs indexes source-destination pairs (path resources);
	// pathLimited says whether a pair's path limits its flows at all.
	pairs       map[[2]int32]int32
	pairEnds    [][2]int32
	pathLimited []bool
	// Work buffers.
	touched []*simTask
	tstamp  uint32
	queue   []int32
	comp    []*simTask
	flows   []*flow
	caps    []float64
	alloc   allocator
	halloc  heapAllocator
	stops   []*simTask
	// Counters and statistics.
	inFlight    int // arrived, not finished
	waiting     int // waiting, as of the last count plus arrivals and stops
	out         StreamResult
	stats       *summaries
	lastArr     float64
	haveArr     bool
	realloc     int64
	reallocN    int64
	cycles      int64
	lastQueue   int
	scheduleNs  time.Duration
	scheduleCPU time.Duration
}

// RunStream replays the transfers of src on tb under s with the streaming
// engine (see the comment at the top of stream.go) and returns streaming
// statistics. A run is deterministic apart from the Schedule wall times it
// reports.
func RunStream(tb *Testbed, src ArrivalSource, s sched.Scheduler, so StreamOptions) (*StreamResult, error) {
	if tb == nil || src == nil || s == nil {
		return nil, errors.New("sim: RunStream needs a testbed, an arrival source and a scheduler")
	}
	if so.Live != nil {
		return nil, errors.New("sim: the streaming engine does not model the live service (Options.Live); use Run")
	}
	for _, e := range tb.Endpoints {
		if len(e.ExternalLoad) > 0 {
			return nil, fmt.Errorf("sim: endpoint %s has external load, which the streaming engine does not model; use Run", e.Name)
		}
	}
	if err := so.Options.validate(); err != nil {
		return nil, err
	}
	opt := so.Options.withDefaults()
	w := &World{tb: tb, opt: opt, byID: map[sched.TaskID]*simTask{}, epIdx: map[string]int{}, deferRates: true}
	for i, e := range tb.Endpoints {
		w.cyc.Endpoint(e.Name, Gbps(e.CapacityGbps), e.MaxCC)
		w.epIdx[e.Name] = i
	}
	w.eps = w.cyc.Endpoints()
	if a, ok := s.(sched.ArrivalAdmitter); ok {
		w.admitsOnArrival = a.AdmitsOnArrival()
	}
	w.est = opt.Estimator
	if w.est == nil {
		w.est = Train(tb)
	}
	// The thread's CPU time measures Schedule only if the goroutine
	// stays on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ts := &timedScheduler{Scheduler: s}
	w.sch = ts
	n := len(tb.Endpoints)
	st := &stream{w: w, so: so, ts: ts, n: n, pairs: map[[2]int32]int32{}, stats: newSummaries()}
	st.grow(n)
	if so.ProgressEvery <= 0 {
		st.so.ProgressEvery = 3600
	}
	if err := st.loop(src); err != nil {
		return nil, err
	}
	return st.result(), nil
}

// grow extends the per-resource arrays to m resources.
func (st *stream) grow(m int) {
	for len(st.res) < m {
		st.res = append(st.res, nil)
		st.conns = append(st.conns, 0)
		st.mark = append(st.mark, 0)
		st.congAt = append(st.congAt, 0)
		st.congVal = append(st.congVal, false)
		st.local = append(st.local, -1)
	}
}

func (st *stream) push(t float64, task *simTask, kind evKind) {
	if q := st.so.Resolution; q > 0 && kind == evComplete {
		// The event is due at the end of its grain; kept in the heap at
		// that time, it stays in order with the other kinds of event.
		t = math.Ceil(t/q) * q
	}
	st.seq++
	st.ev.push(event{t: t, seq: st.seq, task: task, ver: task.fx.ver, kind: kind})
	if len(st.ev) > 1024 && len(st.ev) > 8*st.inFlight {
		st.ev.compact()
	}
}

// compactHeap drops stale entries: a task re-timed at every rate change
// leaves one behind each time, and a long transfer's would otherwise pile
// up until its first estimated completion time.
func (h *evHeap) compact() {
	kept := (*h)[:0]
	for _, e := range *h {
		if e.live() {
			kept = append(kept, e)
		}
	}
	clear((*h)[len(kept):])
	*h = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		kept.down(i)
	}
}

// live reports whether a heap entry still stands for what it was pushed
// for.
func (e *event) live() bool {
	t := e.task
	switch e.kind {
	case evComplete:
		return e.ver == t.fx.ver && t.state == running
	case evReady:
		return t.readyAt == e.t && (t.state == starting || t.state == running)
	case evStop:
		return t.state == running && t.stopAt == e.t
	}
	return false
}

// peek drops stale entries and returns the earliest live one.
func (st *stream) peek() (event, bool) {
	for len(st.ev) > 0 {
		if st.ev[0].live() {
			return st.ev[0], true
		}
		st.ev.pop()
	}
	return event{}, false
}

// settle brings t's progress up to now at its current rate.
func (st *stream) settle(t *simTask) {
	w := st.w
	if dt := w.now - t.fx.at; dt > 0 && t.state == running && t.rate > 0 {
		b := math.Min(t.rate*dt, t.left)
		t.left -= b
		w.moved += b
	}
	t.fx.at = w.now
}

func (st *stream) touch(t *simTask) {
	if t.fx.touch != st.tstamp {
		t.fx.touch = st.tstamp
		st.touched = append(st.touched, t)
	}
}

func (st *stream) loop(src ArrivalSource) error {
	w := st.w
	const eps = 1e-9
	nextCycle := 0.0
	nextProgress := st.so.ProgressEvery
	var next trace.Transfer
	have := false
	fetch := func() error {
		x, ok := src.Next()
		if !ok {
			have = false
			if err := src.Err(); err != nil {
				return fmt.Errorf("sim: arrival source: %w", err)
			}
			return nil
		}
		if err := checkArrival(x.ID, x.Arrival); err != nil {
			return err
		}
		if st.haveArr && x.Arrival < st.lastArr {
			return fmt.Errorf("sim: transfer %d arrives at %v, before the previous one (%v): the source must be in arrival order", x.ID, x.Arrival, st.lastArr)
		}
		next, have = x, true
		return nil
	}
	if err := fetch(); err != nil {
		return err
	}
	st.tstamp = 1
	for {
		tn := math.Inf(1)
		if have {
			tn = next.Arrival
		}
		if st.inFlight > 0 && nextCycle < tn {
			tn = nextCycle
		}
		if e, ok := st.peek(); ok && e.t < tn {
			tn = e.t
		}
		if math.IsInf(tn, 1) {
			if st.inFlight > 0 {
				return fmt.Errorf("sim: stalled at t=%.3f with %d unfinished tasks (scheduler %s never started them)", w.now, st.inFlight, w.sch.Name())
			}
			return nil
		}
		maxTime := w.opt.MaxTime
		if maxTime <= 0 {
			maxTime = st.lastArr + DefaultReplayGrace
			if have {
				maxTime = math.Max(maxTime, next.Arrival+DefaultReplayGrace)
			}
		}
		if tn > maxTime {
			why := "MaxTime"
			if w.opt.MaxTime <= 0 {
				why = "7 days after the last arrival so far, where a replay stops"
			}
			return fmt.Errorf("sim: %d tasks unfinished at t=%.0f s (%s): the endpoints cannot move the offered bytes in time under scheduler %s; the load is too high for this testbed, or the trace's sizes or arrival times are wrong",
				st.inFlight, maxTime, why, w.sch.Name())
		}
		for st.so.OnProgress != nil && tn >= nextProgress {
			st.progress(nextProgress)
			nextProgress += st.so.ProgressEvery
		}
		w.now = math.Max(w.now, tn)
		st.out.Events++
		st.tstamp++
		st.touched = st.touched[:0]
		st.stops = st.stops[:0]
		// Starts, concurrency increases and completions due now; then
		// the preempted tasks whose replacement has started.
		completed := false
		for {
			e, ok := st.peek()
			if !ok || e.t > w.now+eps {
				break
			}
			st.ev.pop()
			t := e.task
			switch e.kind {
			case evComplete:
				st.settle(t)
				w.finish(t)
				completed = true
				st.touch(t)
				st.done(t)
			case evReady:
				st.settle(t)
				if t.state == starting {
					w.setState(t, running)
					t.runStart = w.now
					t.samples = append(t.samples[:0], sample{w.now, t.left})
				}
				t.cc = t.target
				t.readyAt = 0
				st.touch(t)
			case evStop:
				st.stops = append(st.stops, t)
			}
		}
		// Run's rule: a flow with less than half a byte left is done.
		// Under a Resolution, only at the grain's boundaries.
		crossBy := w.now
		if q := st.so.Resolution; q > 0 {
			crossBy = math.Floor(w.now/q+eps) * q
		}
		for len(st.cross) > 0 && st.cross[0].t < crossBy {
			e := st.cross.pop()
			if t := e.task; e.live() {
				st.settle(t)
				if t.left < 0.5 {
					w.finish(t)
					completed = true
					st.touch(t)
					st.done(t)
				}
			}
		}
		for _, t := range st.stops {
			if t.state == running && t.stopAt > 0 && t.stopAt <= w.now+eps {
				st.settle(t)
				w.stop(t)
				st.waiting++
				st.touch(t)
			}
		}
		arrived := false
		for have && next.Arrival <= w.now+eps {
			if err := st.arrive(next); err != nil {
				return err
			}
			arrived = true
			if err := fetch(); err != nil {
				return err
			}
		}
		st.reallocate()
		trigger, cycleNow := sched.Tick, w.now >= nextCycle-eps
		if !cycleNow && completed && !w.opt.NoCycleOnCompletion && st.waiting > 0 {
			trigger, cycleNow = sched.Completion, true
		}
		if !cycleNow && arrived && w.admitsOnArrival {
			trigger, cycleNow = sched.Arrival, true
		}
		if cycleNow {
			if err := st.cycle(trigger); err != nil {
				return err
			}
			if w.now >= nextCycle-eps {
				nextCycle = (math.Floor(w.now/w.opt.Cycle+eps) + 1) * w.opt.Cycle
			}
		}
		if st.inFlight == 0 && !have {
			if st.so.OnProgress != nil {
				st.progress(w.now)
			}
			return nil
		}
	}
}

func (st *stream) progress(at float64) {
	st.so.OnProgress(StreamProgress{Time: at, Arrived: st.out.Arrived, Completed: st.out.Completed,
		Waiting: st.waiting, InFlight: st.inFlight, Cycles: st.cycles, ScheduleWall: st.scheduleNs, ScheduleCPU: st.scheduleCPU,
		ReallocatedFlows: st.reallocN, Reallocations: st.realloc, LastCycleQueueDepth: st.lastQueue})
}

// arrive turns a transfer into a waiting task.
func (st *stream) arrive(x trace.Transfer) error {
	w := st.w
	si, ok1 := w.epIdx[x.Src]
	di, ok2 := w.epIdx[x.Dst]
	if !ok1 || !ok2 {
		return fmt.Errorf("sim: transfer %d goes %s -> %s, not endpoints of testbed %s", x.ID, x.Src, x.Dst, w.tb.Name)
	}
	if x.Size < 0 {
		return fmt.Errorf("sim: transfer %d has negative size %d", x.ID, x.Size)
	}
	id := sched.TaskID(x.ID)
	if _, dup := w.byID[id]; dup {
		return fmt.Errorf("sim: transfer id %d appears twice", x.ID)
	}
	// Names come from the testbed, so a source that allocates a string
	// per transfer does not keep it alive.
	src, dst := w.tb.Endpoints[si].Name, w.tb.Endpoints[di].Name
	t := &simTask{st: sched.Task{ID: id, Src: src, Dst: dst, Size: x.Size, Left: x.Size, Batch: x.Batch, Arrival: x.Arrival}, left: float64(x.Size)}
	t.ideal = w.tb.idealTT(src, dst, x.Size, w.opt.Startup)
	t.si, t.di = si, di
	pk := [2]int32{int32(si), int32(di)}
	p, ok := st.pairs[pk]
	if !ok {
		p = int32(len(st.pairEnds))
		st.pairs[pk] = p
		st.pairEnds = append(st.pairEnds, pk)
		st.pathLimited = append(st.pathLimited, w.tb.pathCapacity(src, dst, 1) > 0)
		st.grow(st.n + len(st.pairEnds))
	}
	t.pi = int(p)
	t.state = waiting
	t.since = x.Arrival
	t.fx.at = w.now
	if x.Batch && w.opt.BatchShift > 0 {
		t.wait = w.opt.BatchShift
	}
	w.byID[id] = t
	w.live = append(w.live, t)
	st.inFlight++
	st.waiting++
	st.out.Arrived++
	st.out.Bytes += float64(x.Size)
	st.lastArr, st.haveArr = x.Arrival, true
	return nil
}

// done folds a finished task into the statistics and forgets it.
func (st *stream) done(t *simTask) {
	w := st.w
	wait := t.wait
	if t.st.Batch {
		wait -= w.opt.BatchShift
	}
	r := TaskResult{ID: int64(t.st.ID), Size: t.st.Size, Batch: t.st.Batch, Arrival: t.st.Arrival, Finish: t.finish,
		Wait: wait, Run: t.trans, IdealTT: t.ideal, Turnaround: t.finish - t.st.Arrival, Preempted: t.preempted}
	r.Slowdown = (r.Wait + math.Max(r.Run, Bound)) / math.Max(r.IdealTT, Bound)
	st.stats.add(&r)
	st.out.Makespan = math.Max(st.out.Makespan, t.finish)
	st.out.Completed++
	if st.so.OnTask != nil {
		st.so.OnTask(r)
	}
	delete(w.byID, t.st.ID)
	t.samples = nil
	st.inFlight--
}

// cycle brings every task up to date, runs one scheduling cycle through
// World.cycle and schedules the events its decisions create.
func (st *stream) cycle(trigger sched.Trigger) error {
	w := st.w
	kept := w.live[:0]
	for _, t := range w.live {
		if t.state == done {
			continue
		}
		st.settle(t)
		kept = append(kept, t)
	}
	clear(w.live[len(kept):])
	w.live = kept
	w.liveDirty = false
	w.cycle(trigger)
	if w.stepErr != nil {
		return w.stepErr
	}
	// The preemption log would grow with the run; the counter is kept.
	w.preemptLog = w.preemptLog[:0]
	st.cycles++
	st.scheduleNs += st.ts.dur
	st.scheduleCPU += st.ts.cpu
	st.lastQueue = st.ts.nw
	st.out.MaxWaiting = max(st.out.MaxWaiting, st.ts.nw)
	st.out.MaxRunning = max(st.out.MaxRunning, st.ts.nr)
	if st.out.CyclesByTrigger == nil {
		st.out.CyclesByTrigger = map[string]int64{}
	}
	st.out.CyclesByTrigger[triggerName(trigger)]++
	for _, d := range st.ts.last {
		t := w.byID[d.Task]
		if t == nil {
			continue
		}
		st.touch(t)
		if t.readyAt > w.now && (t.state == starting || t.state == running) {
			st.push(t.readyAt, t, evReady)
		}
		if t.state == running && t.stopAt > 0 {
			st.push(t.stopAt, t, evStop)
		}
	}
	st.waiting = 0
	for _, t := range w.live {
		if t.state == waiting {
			st.waiting++
		}
	}
	st.reallocate()
	if st.so.OnCycle != nil {
		st.so.OnCycle(CycleInfo{Time: w.now, Trigger: trigger, Waiting: st.ts.nw, Running: st.ts.nr, Decisions: len(st.ts.last), Schedule: st.ts.dur, ScheduleCPU: st.ts.cpu})
	}
	st.ts.last = nil
	return nil
}

func triggerName(t sched.Trigger) string {
	switch t {
	case sched.Tick:
		return "tick"
	case sched.Completion:
		return "completion"
	case sched.Arrival:
		return "arrival"
	}
	return fmt.Sprintf("trigger-%d", int(t))
}

// resources lists the resources a task's flow uses: its endpoints and its
// path (-1 when the path adds no limit).
func (st *stream) resources(t *simTask) [3]int32 {
	p := int32(st.n + t.pi)
	if !st.pathLimited[t.pi] {
		p = -1
	}
	return [3]int32{int32(t.si), int32(t.di), p}
}

func (st *stream) setDirty(r int32) {
	if st.mark[r] != st.stamp+1 {
		st.mark[r] = st.stamp + 1
		st.dirty = append(st.dirty, r)
	}
}

// addFlow registers t as a flow at its resources.
func (st *stream) addFlow(t *simTask) {
	tb := st.w.tb
	f := &t.fx
	f.inFlow, f.cc = true, t.cc
	f.k = tb.streams(t.cc, t.st.Size)
	f.weight = float64(f.k)
	if tb.EqualShare {
		f.weight = 1
	}
	f.demand = tb.demand(t.st.Src, t.st.Dst, t.cc, t.st.Size)
	for j, r := range st.resources(t) {
		if r < 0 {
			continue
		}
		f.pos[j] = int32(len(st.res[r]))
		st.res[r] = append(st.res[r], t)
		st.conns[r] += f.k
		st.setDirty(r)
	}
}

// removeFlow takes t out of its resources' flow lists.
func (st *stream) removeFlow(t *simTask) {
	f := &t.fx
	for j, r := range st.resources(t) {
		if r < 0 {
			continue
		}
		l := st.res[r]
		i := f.pos[j]
		last := l[len(l)-1]
		l[i] = last
		last.fx.pos[st.slot(last, r)] = i
		l[len(l)-1] = nil
		st.res[r] = l[:len(l)-1]
		st.conns[r] -= f.k
		st.setDirty(r)
	}
	// Its completion event, if any, is void; a task that stays a flow
	// (a new concurrency) gets its new rate, and event, at once.
	f.inFlow = false
	f.ver++
	t.rate = 0
}

// slot is which of t's resources r is.
func (st *stream) slot(t *simTask, r int32) int {
	switch {
	case int32(t.si) == r:
		return 0
	case int32(t.di) == r:
		return 1
	}
	return 2
}

// capacity is what resource r carries now.
func (st *stream) capacity(r int32) float64 {
	tb := st.w.tb
	if int(r) < st.n {
		return tb.Endpoints[r].capacity(st.conns[r], st.w.now)
	}
	ends := st.pairEnds[int(r)-st.n]
	return tb.pathCapacity(tb.Endpoints[ends[0]].Name, tb.Endpoints[ends[1]].Name, st.conns[r])
}

// congested reports whether r's flows together could use more than it
// carries: only then can it bind any of them.
func (st *stream) congested(r int32) bool {
	if st.congAt[r] == st.stamp {
		return st.congVal[r]
	}
	sum := 0.0
	for _, t := range st.res[r] {
		sum += t.fx.demand
	}
	v := sum > st.capacity(r)
	st.congAt[r], st.congVal[r] = st.stamp, v
	return v
}

// reallocate updates the flow lists for the touched tasks and shares the
// capacity of what they changed again (see the comment at the top).
func (st *stream) reallocate() {
	for _, t := range st.touched {
		want := t.state == running && t.cc > 0
		if t.fx.inFlow && (!want || t.cc != t.fx.cc) {
			st.settle(t)
			st.removeFlow(t)
		}
		if want && !t.fx.inFlow {
			st.addFlow(t)
		}
		if !want && t.rate != 0 {
			st.settle(t)
			t.rate = 0
		}
	}
	st.touched = st.touched[:0]
	st.tstamp++
	if len(st.dirty) == 0 {
		return
	}
	st.stamp++ // dirty resources carry mark == stamp: already queued
	stamp := st.stamp
	st.queue = append(st.queue[:0], st.dirty...)
	st.dirty = st.dirty[:0]
	st.comp = st.comp[:0]
	for q := 0; q < len(st.queue); q++ {
		for _, t := range st.res[st.queue[q]] {
			if t.fx.comp == stamp {
				continue
			}
			t.fx.comp = stamp
			st.comp = append(st.comp, t)
			for _, r2 := range st.resources(t) {
				if r2 >= 0 && st.mark[r2] != stamp && st.congested(r2) {
					st.mark[r2] = stamp
					st.queue = append(st.queue, r2)
				}
			}
		}
	}
	if len(st.comp) == 0 {
		return
	}
	st.realloc++
	st.reallocN += int64(len(st.comp))
	st.caps = st.caps[:0]
	for i, r := range st.queue {
		st.local[r] = int32(i)
		st.caps = append(st.caps, st.capacity(r))
	}
	st.flows = st.flows[:0]
	for _, t := range st.comp {
		f := &t.flow
		f.res = [3]int{-1, -1, -1}
		for j, r := range st.resources(t) {
			if r >= 0 && st.mark[r] == stamp {
				f.res[j] = int(st.local[r])
				if j == 2 && st.caps[st.local[r]] <= 0 {
					f.res[j] = -1
				}
			}
		}
		f.weight, f.cap = t.fx.weight, t.fx.demand
		st.flows = append(st.flows, f)
	}
	if len(st.flows) <= smallAlloc {
		st.alloc.run(st.flows, st.caps)
	} else {
		st.halloc.run(st.flows, st.caps)
	}
	now := st.w.now
	for _, t := range st.comp {
		r := t.flow.rate
		if r == t.rate {
			continue
		}
		st.settle(t)
		t.rate = r
		t.fx.ver++
		if r > 0 {
			st.push(later(now, t.left/r), t, evComplete)
			st.seq++
			st.cross.push(event{t: later(now, math.Max(t.left-0.5, 0)/r), seq: st.seq, task: t, ver: t.fx.ver, kind: evComplete})
			if len(st.cross) > 1024 && len(st.cross) > 8*st.inFlight {
				st.cross.compact()
			}
		}
	}
	for _, r := range st.queue {
		st.local[r] = -1
	}
}

func (st *stream) result() *StreamResult {
	w := st.w
	r := &st.out
	r.Testbed, r.Scheduler = w.tb.Name, w.sch.Name()
	r.Starts, r.Preemptions, r.Resizes = int64(w.starts), int64(w.preemptions), int64(w.resizes)
	r.BytesMoved, r.BytesLost = w.moved, w.lost
	r.ModelError = w.est.MeanError()
	r.Cycles = st.cycles
	r.Reallocations, r.ReallocatedFlows = st.realloc, st.reallocN
	r.ScheduleWall, r.ScheduleCPU = st.scheduleNs, st.scheduleCPU
	r.Interactive = st.stats.interactive.summary()
	r.Batch = st.stats.batch.summary()
	r.ByClass = map[string]Summary{}
	for c := range st.stats.classes {
		if st.stats.classes[c].n > 0 {
			r.ByClass[ClassNames[c]] = st.stats.classes[c].summary()
		}
	}
	if r.CyclesByTrigger == nil {
		r.CyclesByTrigger = map[string]int64{}
	}
	return r
}

// summaries accumulate Summary figures by task kind and size class.
type summaries struct {
	interactive, batch acc
	classes            [5]acc
}

func newSummaries() *summaries { return &summaries{} }

func (s *summaries) add(r *TaskResult) {
	if r.Batch {
		s.batch.add(r)
		return
	}
	s.interactive.add(r)
	s.classes[model.SizeClass(r.Size)].add(r)
}

// acc accumulates one Summary.
type acc struct {
	n               int64
	sumSD, sumTA    kahan
	sumW            kahan
	maxSD, maxTA    float64
	hSD, hTA, hWait *LogHist
}

// kahan is a compensated sum: a mean over 25 million tasks stays exact to
// rounding.
type kahan struct{ s, c float64 }

func (k *kahan) add(x float64) {
	y := x - k.c
	t := k.s + y
	k.c = (t - k.s) - y
	k.s = t
}

func (a *acc) add(r *TaskResult) {
	if a.hSD == nil {
		a.hSD, a.hTA, a.hWait = NewLogHist(-3, 8, 100), NewLogHist(-3, 8, 100), NewLogHist(-3, 8, 100)
	}
	a.n++
	a.sumSD.add(r.Slowdown)
	a.sumTA.add(r.Turnaround)
	a.sumW.add(r.Wait)
	a.maxSD = math.Max(a.maxSD, r.Slowdown)
	a.maxTA = math.Max(a.maxTA, r.Turnaround)
	a.hSD.Add(r.Slowdown)
	a.hTA.Add(r.Turnaround)
	a.hWait.Add(r.Wait)
}

func (a *acc) summary() Summary {
	if a.n == 0 {
		return Summary{}
	}
	n := float64(a.n)
	return Summary{N: a.n, AvgSlowdown: a.sumSD.s / n, AvgTurnaround: a.sumTA.s / n, AvgWait: a.sumW.s / n,
		MaxSlowdown: a.maxSD, MaxTurnaround: a.maxTA,
		P50Slowdown: a.hSD.Quantile(0.5), P90Slowdown: a.hSD.Quantile(0.9), P99Slowdown: a.hSD.Quantile(0.99),
		P50Turnaround: a.hTA.Quantile(0.5), P99Turnaround: a.hTA.Quantile(0.99), P99Wait: a.hWait.Quantile(0.99)}
}

// LogHist is a fixed-size histogram with log-spaced bins, for quantiles
// of a stream too long to keep: PerDecade bins per power of ten from
// 10^MinExp to 10^MaxExp; values below (zero included) count in the first
// bin, values above in the last. A quantile is the geometric middle of
// its bin, clamped to the smallest and largest value seen, so its
// relative error is at most half a bin (1.2% at 100 per decade).
type LogHist struct {
	MinExp, MaxExp, PerDecade int
	Counts                    []int64
	N                         int64
	Min, Max                  float64
}

// NewLogHist returns an empty histogram.
func NewLogHist(minExp, maxExp, perDecade int) *LogHist {
	return &LogHist{MinExp: minExp, MaxExp: maxExp, PerDecade: perDecade, Counts: make([]int64, (maxExp-minExp)*perDecade)}
}

// Add counts x.
func (h *LogHist) Add(x float64) {
	if h.N == 0 || x < h.Min {
		h.Min = x
	}
	if h.N == 0 || x > h.Max {
		h.Max = x
	}
	h.N++
	h.Counts[h.bin(x)]++
}

func (h *LogHist) bin(x float64) int {
	if !(x > 0) {
		return 0
	}
	i := int(math.Floor((math.Log10(x) - float64(h.MinExp)) * float64(h.PerDecade)))
	return min(max(i, 0), len(h.Counts)-1)
}

// Quantile returns the q-quantile (0 <= q <= 1), 0 for an empty
// histogram.
func (h *LogHist) Quantile(q float64) float64 {
	if h.N == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.N)))
	rank = min(max(rank, 1), h.N)
	var c int64
	for i, k := range h.Counts {
		c += k
		if c >= rank {
			v := math.Pow(10, float64(h.MinExp)+(float64(i)+0.5)/float64(h.PerDecade))
			return min(max(v, h.Min), h.Max)
		}
	}
	return h.Max
}
