package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/dispatch"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// Reasons the loop stops a running transfer itself.
const (
	stopPreempted = "preempted"
	stopCanceled  = "canceled"
	stopDown      = "endpoint down"
	stopShutdown  = "server shutdown"
	// stopNoRules: the owner's access rules could not be read, so the
	// file was not started (its tokens could not be bounded by them).
	stopNoRules = "access rules unavailable"
	// noRulesWait is how long a file not started for stopNoRules waits.
	noRulesWait = 5 * time.Second
	// stopLost: another server took the task's partition over.
	stopLost = "partition taken over"
	// stopNotRecorded: the store did not take the start; the task waits
	// again.
	stopNotRecorded = "start not recorded"
)

// errNotRecorded ends a run that never began because its start was not
// written (see cycle).
var errNotRecorded = errors.New("server: the start was not recorded")

// task is the loop's view of one active task.
type task struct {
	store.Task
	job *jobState

	run        int // generation of the current run: stale reports are ignored
	xfer       transfer
	cancel     context.CancelFunc
	pending    bool      // started but not yet moving bytes
	stop       string    // why the loop is stopping the run ("" if it is not)
	since      time.Time // when the current state began (Wait/Trans accounting)
	notBefore  time.Time // back-off after a transient failure
	preemptFor int64     // pause once this task moves (SC'15 §4.5)
	srcLoad    int       // known loads when the run started (the observation's signature)
	dstLoad    int
	runStart   time.Time
	runDone    int64 // Done when the run started
	rate       float64
	canceling  bool // its job was canceled (in the store) while it ran
	batched    bool // the current run is in a pull batch (batch.go)
	// rider: the current run rides in a pull batch on another member's
	// connection (batch.go): it uses none of its own, so it counts no
	// streams at its endpoints and the scheduler does not see it.
	rider bool
	// metered is how far into the file the metrics counted run
	// meterRun's bytes (metrics.moved).
	meterRun int
	metered  int64

	// The loop's endpoints of the task, looked up once: the snapshot
	// needs them for every queued task every cycle. w.eps entries are
	// created once and never replaced or removed, so these stay valid.
	srcEp, dstEp *endpoint

	listed, removed bool // taskTable's bookkeeping
	resolveQueued   bool // in world.toResolve
}

// conns is the connections t's run holds at each of its endpoints' uses:
// its concurrency, or none for a rider.
func (t *task) conns() int {
	if t.rider {
		return 0
	}
	return t.CC
}

// jobState is what the loop keeps of an active job.
type jobState struct {
	store.Job
	active    int // tasks not yet terminal
	failed    int
	completed int64 // bytes of the files done
}

// endpoint is the loop's view of one endpoint.
type endpoint struct {
	store.Endpoint
	peak     float64 // highest aggregate throughput observed
	observed float64 // this cycle's aggregate
	cc       int
	downNote string // while down: the note of the files that wait for it
	// downAtLoad: the store had it down when this server started; it
	// stays down until its agent is heard from (heartbeats).
	downAtLoad bool
	// removed: an admin removed this storage endpoint; its files fail
	// (no endpoint) rather than run against it. Kept in the table so
	// that what still names it finds an entry.
	removed bool
	// heard is its last heartbeat known here (this server's, another's
	// through the store, or the store's from before a restart); zero
	// if never heard from.
	heard time.Time
}

// world is the live service as the scheduler sees it. Only the loop
// goroutine touches it.
type world struct {
	s     *Server
	ctx   context.Context       // ends at shutdown; transfers derive from it
	quiet map[string]*throttled // the loop's repeated messages (logEvery)
	tasks taskTable
	jobs  map[int64]*jobState
	eps   map[string]*endpoint
	est   *model.History
	// peaks learns the maximum of endpoints with no configured capacity
	// from a recent window of what they carry, and says when to probe
	// above it (sched.Peaks): a path that gains bandwidth while a job
	// runs is found and used.
	peaks     sched.Peaks
	resolving int           // stats in flight
	lastCycle time.Duration // how long the last scheduler call took
	// links are each endpoint pair's recent per-stream throughputs, the
	// bandwidth series the multi-source split predicts from.
	links     map[[2]string][]float64
	cycleWant sched.Trigger
	want      bool
	lastSave  time.Time
	lastEvent time.Time
	lastSweep time.Time // of partial files owed a removal (sweepPartials)
	// lastListings is when the loop last looked for directories to list;
	// listing the listings being listed here (listing.go).
	lastListings time.Time
	listing      map[listKey]bool
	sweepEvery   time.Duration
	sweeping     bool
	inflight     int        // transfer goroutines not yet reported finished
	begun        time.Time  // when this loop started
	gone         []goneTask // files to fail: they waited too long for a down endpoint (giveUp)
	// access holds job owners' access checks (jobAccess), read at accessAt.
	access   map[string]*access.Check
	accessAt time.Time
	victims  map[int64][]int64 // tasks to pause once the key task moves
	// optimal holds, per endpoint pair, the streams that optimize jobs
	// run with (0: the estimate failed and the scheduler chooses); a
	// pair being estimated is present with -1.
	optimal map[[2]string]optimum
	// vallocs are the Policy Service allocations the loop holds for its
	// VOs' jobs (voalloc.go).
	vallocs map[voKey]*voAlloc
	// adapts are the adaptive jobs' clients (adaptive.go).
	adapts map[adaptKey]*adaptState
	// unfinished are jobs whose every file ended and whose end the
	// store did not take: tick tries again.
	unfinished map[int64]*jobState

	// The cluster (cluster.go): the partitions this server holds
	// (source endpoint -> lease term), other servers' loads on the
	// endpoints, heartbeats other servers recorded, and what fenced
	// writes found out (applied by settle).
	running int // runs at the last snapshot (checkpointEvery)
	// cyc builds the snapshots (reusing their memory) and applies the
	// decisions through the admission rules, as the simulator's cycle
	// does (package dispatch).
	cyc       dispatch.Cycle
	pw        pendingWrites // written at the end of the turn
	toResolve []*task       // tasks whose source needs a stat, in order
	runTasks  []*task       // the running tasks at the last snapshot

	hist sampler // the dashboard's history (history.go)

	parts   map[string]int64
	ext     map[string]cluster.Load
	seen    map[string]time.Time
	stale   []string
	skipped []int64
}

// optimum is a pair's estimated streams and when the estimate was made.
type optimum struct {
	streams int
	at      time.Time
}

// Run runs the scheduling loop until ctx ends. Transfers in flight are
// stopped at shutdown; their checkpoints stay in the store and the next
// start resumes them.
func (s *Server) Run(ctx context.Context) error {
	w, err := s.load(ctx)
	if err != nil {
		return err
	}
	tick := time.NewTicker(s.cfg.Cycle)
	defer tick.Stop()
	check := time.NewTicker(s.cfg.StoreCheck)
	defer check.Stop()
	coordCtx, stopCoord := context.WithCancel(ctx)
	coordDone := make(chan struct{})
	go func() {
		defer close(coordDone)
		s.coordinate(coordCtx)
	}()
	stopAll := func() {
		stopCoord()
		w.shutdown()
		w.flush()
		<-coordDone
		w.releaseAll()
	}
	for {
		select {
		case <-ctx.Done():
			stopAll()
			return nil
		case <-check.C:
			if err := s.st.Check(ctx); err != nil {
				// Going on would write jobs and progress to a file
				// that the next start does not find (it would begin
				// afresh): stop, loudly, with the transfers stopped.
				stopAll()
				return fmt.Errorf("server: %w", err)
			}
		case f := <-s.inbox:
			w.handle(f)
			// Drain what else is queued before deciding, so one cycle
			// sees a burst of arrivals together.
			for i := 0; i < 256; i++ {
				select {
				case f := <-s.inbox:
					w.handle(f)
					continue
				default:
				}
				break
			}
			w.endTurn()
		case <-tick.C:
			w.periodic(w.now())
		}
	}
}

// The loop's steps, which Run takes as the clock and the inbox say, and
// a deterministic simulation takes in an order it chooses.

// handle applies one message of the inbox.
func (w *world) handle(f func(*world)) {
	f(w)
	w.settle()
}

// endTurn ends a turn of the inbox: the turn's writes, then a cycle if
// one was asked for (a completion, an arrival).
func (w *world) endTurn() {
	w.flush()
	w.settle()
	if w.want {
		w.cycle(w.cycleWant)
		w.settle()
	}
}

// periodic is the tick and the periodic cycle.
func (w *world) periodic(now time.Time) {
	w.tick(now)
	w.cycle(sched.Tick)
	w.settle()
}

// load rebuilds the loop's state from the store.
func (s *Server) load(ctx context.Context) (*world, error) {
	w := &world{
		s: s, ctx: ctx,
		tasks: newTaskTable(), jobs: map[int64]*jobState{}, eps: map[string]*endpoint{},
		est: s.cfg.Estimator, begun: s.now(), victims: map[int64][]int64{}, optimal: map[[2]string]optimum{}, vallocs: map[voKey]*voAlloc{}, adapts: map[adaptKey]*adaptState{}, links: map[[2]string][]float64{},
		parts: map[string]int64{}, ext: map[string]cluster.Load{}, seen: map[string]time.Time{},
	}
	if w.est == nil {
		w.est = model.NewHistory()
		w.est.Fallback = w.prior
	}
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("server: loading endpoints: %w", err)
	}
	for _, e := range eps {
		w.eps[e.Name] = &endpoint{Endpoint: e, downAtLoad: !e.Up}
	}
	obs, err := s.st.Observations(ctx, 20000)
	if err != nil {
		return nil, fmt.Errorf("server: loading observations: %w", err)
	}
	for _, o := range obs {
		w.est.AddHistory(model.Obs{Time: s.since(o.At), Src: o.Src, Dst: o.Dst, CC: o.CC, SrcLoad: o.SrcLoad, DstLoad: o.DstLoad, Size: o.Size, Thr: o.Throughput})
		w.linkObserve(o)
		for _, n := range []string{o.Src, o.Dst} {
			if e := w.eps[n]; e != nil && o.Throughput > e.peak {
				e.peak = o.Throughput
			}
			w.peaks.Seed(n, o.Throughput)
		}
	}
	// Tasks come in through claims (cluster.go): the coordinator takes
	// this server's share of the partitions and claims their tasks, the
	// running ones of a server that stopped included. A stored task that
	// no submission could have made (a size or a byte count out of
	// range) is failed first, saying why, rather than scheduled, and its
	// job finished below.
	bad, err := s.st.FailOutOfRange(ctx, s.now(), w.actor())
	if err != nil {
		return nil, fmt.Errorf("server: failing stored tasks out of range: %w", err)
	}
	s.met.failed(reasonInvalid, len(bad))
	for _, t := range bad {
		s.log.Error("failed a stored task out of range", "job", t.JobID, "task", t.ID, "index", t.Index,
			"size", t.Size, "done", t.Done, "why", store.OutOfRange(t.Size, t.Done))
	}
	if err := w.finishSettledJobs(ctx); err != nil {
		return nil, err
	}
	w.adoptVOAllocs(s.now())
	w.dropStaleJobAllocs(s.now())
	return w, nil
}

// job returns the loop's state of a job, loading it if needed.
func (w *world) job(ctx context.Context, id int64) (*jobState, error) {
	if j := w.jobs[id]; j != nil {
		return j, nil
	}
	sj, err := w.s.st.Job(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("server: loading job %d: %w", id, err)
	}
	j := &jobState{Job: sj, failed: sj.FilesFailed, completed: sj.BytesDone}
	w.jobs[id] = j
	return j, nil
}

// prior is the estimator's answer where it has no history at all: the
// endpoints' capacity shared in proportion to connections, each
// connection assumed to reach a quarter of it. Observations replace it as
// soon as a pair has some.
func (w *world) prior(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
	capa := math.Min(w.maxThroughput(src), w.maxThroughput(dst))
	load := max(srcLoad, dstLoad)
	share := capa * float64(cc) / float64(cc+load)
	return math.Min(share, capa/4*float64(cc))
}

// maxCC is an endpoint's connection limit: its agent's, or
// DefaultEndpointMaxCC.
func (w *world) maxCC(name string) int {
	if e := w.eps[name]; e != nil && e.MaxCC > 0 {
		return e.MaxCC
	}
	return DefaultEndpointMaxCC
}

func (w *world) maxThroughput(name string) float64 {
	e := w.eps[name]
	if e == nil {
		return DefaultEndpointMax
	}
	if e.MaxThroughput > 0 {
		return e.MaxThroughput
	}
	if m := w.peaks.Max(name); m > 0 {
		return m
	}
	return DefaultEndpointMax
}

// arrival asks for a cycle now if the scheduler admits on arrival (as the
// simulator does for it); others see new work at the next periodic cycle,
// as SEAL's Listing 1 has it.
func (w *world) arrival() {
	if a, ok := w.s.sch.(sched.ArrivalAdmitter); ok && a.AdmitsOnArrival() {
		w.want, w.cycleWant = true, sched.Arrival
	}
}

// snapshot builds the scheduler's view of the world now.
func (w *world) snapshot(now time.Time, trig sched.Trigger) *sched.Snapshot {
	t0 := w.s.since(now)
	w.est.SetNow(t0)
	b := &w.cyc
	b.Begin(dispatch.Params{
		Trigger: trig, Now: t0, TotalMaxCC: w.s.cfg.TotalMaxCC, Estimator: w.est,
		StartupCost: w.s.cfg.StartupCost.Seconds(), Checkpoint: w.checkpointEvery().Seconds(),
		Tasks: w.tasks.len(),
	})
	for name, e := range w.eps {
		e.observed, e.cc = 0, 0
		b.Endpoint(name, w.maxThroughput(name), w.maxCC(name))
	}
	// The adaptive jobs' files in flight at the last snapshot: a file
	// whose client allows no more is not offered to the scheduler (its
	// start would be refused, and a scheduler that ranks it first would
	// start nothing else in its place). Counted only while there are
	// adaptive clients.
	var inFlight map[adaptKey]int
	if len(w.adapts) > 0 {
		_, inFlight = usageOf(w.runTasks)
	}
	clear(w.runTasks)
	w.runTasks = w.runTasks[:0]
	for t := range w.tasks.all() {
		switch t.State {
		case store.StateRunning:
			w.runTasks = append(w.runTasks, t)
			t.eachUse(func(name string, streams int, share float64) {
				b.Load(name, t.conns()*streams, t.rate*share)
			})
			if t.rider {
				continue // not the scheduler's: see task.rider
			}
			st := b.New()
			w.fillSchedTask(st, t)
			b.RunningAt(st, now.Sub(t.since).Seconds())
		case store.StateQueued:
			if !w.taskUp(t) {
				if note := w.downTooLong(now, t.srcEp, t.dstEp); note != "" {
					w.gone = append(w.gone, goneTask{t, note})
					continue
				}
				w.waitNote(t, w.downNote(t))
				continue
			}
			if strings.HasPrefix(t.Error, downPrefix) {
				w.waitNote(t, "") // its endpoints are back
			}
			if t.Size < 0 || now.Before(t.notBefore) {
				continue
			}
			if w.fixedCC(t) < 0 {
				continue // waits for its pair's estimate
			}
			if t.job.Adaptive != "" {
				k := adaptKeyOf(t)
				if a := w.adapts[k]; a != nil && inFlight[k] >= a.cl.Concurrency() {
					if a.cl.Concurrency() == 0 {
						w.waitNote(t, a.waiting(k))
					}
					continue
				}
			}
			st := b.New()
			w.fillSchedTask(st, t)
			b.Waiting(st, now.Sub(t.since).Seconds())
		}
	}
	w.giveUp(now)
	snap := b.Snapshot()
	// This server's own load is published for the others; theirs is
	// added as known load (cluster.go).
	own := make(map[string]cluster.Load, len(snap.Endpoints))
	for name, e := range snap.Endpoints {
		if e.CC > 0 || e.Observed > 0 {
			own[name] = cluster.Load{CC: e.CC, Throughput: e.Observed}
		}
		if x, ok := w.ext[name]; ok {
			e.CC += x.CC
			e.Observed += x.Throughput
		}
	}
	w.s.mu.Lock()
	w.s.ownLoad = own
	w.s.mu.Unlock()
	for name, e := range snap.Endpoints {
		ep := w.eps[name]
		if ep == nil {
			continue // named by tasks only (an endpoint removed meanwhile)
		}
		ep.observed, ep.cc = e.Observed, e.CC
		if e.Observed > ep.peak {
			ep.peak = e.Observed
		}
		if ep.MaxThroughput <= 0 {
			// No configured capacity: the most carried lately is the
			// maximum, and the scheduler probes above it now and then.
			m, probe := w.peaks.Observe(name, t0, e.Observed)
			if m <= 0 {
				m = DefaultEndpointMax
			}
			e.MaxThroughput, e.Probe = m, probe
		}
	}
	w.running = len(snap.Running)
	return snap
}

// fillSchedTask writes the scheduler's view of t into st; the builder
// adds the time of its current state (dispatch.Builder).
func (w *world) fillSchedTask(st *sched.Task, t *task) {
	*st = sched.Task{
		ID: sched.TaskID(t.ID), Src: t.SrcEndpoint, Dst: t.DstEndpoint,
		Size: t.Size, Left: t.Size - t.Done, Batch: t.Batch,
		Arrival: w.s.since(t.Arrival), Wait: t.Wait, Trans: t.Trans,
	}
	if t.State == store.StateRunning {
		st.CC, st.Rate = t.CC, t.rate
		st.Pending = t.pending || t.stop != "" || t.preemptFor != 0
		if t.xfer != nil {
			if p := t.xfer.Progress(); p.Done > t.Done {
				st.Left = t.Size - p.Done
			}
		}
	}
}

// taskUp reports whether both of t's endpoints are up; for a file with
// replicas, its destination and at least one of its sources: the engine
// reads from those that answer, so the first source being down must not
// hold the file (Yang, Schopf, Foster: the others carry it).
func (w *world) taskUp(t *task) bool {
	if t.srcEp == nil {
		t.srcEp = w.eps[t.SrcEndpoint]
	}
	if t.dstEp == nil {
		t.dstEp = w.eps[t.DstEndpoint]
	}
	return t.dstEp != nil && t.dstEp.Up && w.sourceUp(t)
}

// sourceUp reports whether t's source is up, or for a file with replicas
// any of its sources.
func (w *world) sourceUp(t *task) bool {
	if w.up(t.SrcEndpoint) {
		return true
	}
	for _, r := range t.Replicas {
		if w.up(urlHost(r)) {
			return true
		}
	}
	return false
}

// downPrefix begins the note of a file that waits for a down endpoint.
const downPrefix = waitPrefix + "endpoint "

// downNote says which of t's endpoints is down, and since when; the
// notes are made once per endpoint going down (endpoint.downNote), so
// that a cycle over a million waiting files compares strings and writes
// nothing new.
func (w *world) downNote(t *task) string {
	for _, e := range []*endpoint{t.srcEp, t.dstEp} {
		if e != nil && !e.Up {
			if e.downNote == "" && !e.heard.IsZero() {
				// Down since before this server started.
				e.downNote = fmt.Sprintf("%s%s is down (no heartbeat since %s)", downPrefix, e.Name, e.heard.UTC().Format(time.RFC3339))
			}
			if e.downNote == "" {
				return downPrefix + e.Name + " has not been heard from"
			}
			return e.downNote
		}
	}
	return downPrefix + "not registered"
}

// goneTask is a file that waited too long for a down endpoint, and why
// it fails.
type goneTask struct {
	t    *task
	note string
}

// downTooLong says why a file gives up waiting, if one of the down
// endpoints eps (its own, or its source alone) has not been heard from
// for longer than Config.DownGiveUp; "" while it may still wait.
func (w *world) downTooLong(now time.Time, eps ...*endpoint) string {
	limit := w.s.cfg.DownGiveUp
	if limit < 0 {
		return ""
	}
	for _, e := range eps {
		if e == nil || e.Up {
			continue
		}
		since := e.heard
		if since.IsZero() {
			since = e.Registered // never heard from since it joined
		}
		if since.IsZero() || now.Sub(since) <= limit {
			continue
		}
		return fmt.Sprintf("endpoint %s has been down since %s (no heartbeat for more than %s): gave up waiting for it",
			e.Name, since.UTC().Format(time.RFC3339), limit)
	}
	return ""
}

// giveUp fails the files that waited too long for a down endpoint
// (w.gone): their jobs end, each file saying why, instead of staying
// active for an agent that may never come back. A partial file stays
// owed for removal until the agent is back (removePartial).
func (w *world) giveUp(now time.Time) {
	if len(w.gone) == 0 {
		return
	}
	gone := w.gone
	w.gone = nil
	w.s.log.Warn("files failed: an endpoint they wait for is down for too long", "files", len(gone), "first", gone[0].note)
	for _, g := range gone {
		t := g.t
		t.Error = g.note
		a := w.setState(t, store.StateFailed, g.note, now)
		t.Finished = now
		if !t.Started.IsZero() {
			w.s.cleanup(t.Task)
		}
		w.endFailed(t, a, reasonEndpointDown)
	}
}

func (w *world) up(name string) bool {
	e := w.eps[name]
	return e != nil && e.Up
}

// timedScheduler adds the time each plan takes to *spent (the cycle's
// metric and the status page's figure).
type timedScheduler struct {
	sched.Scheduler
	spent *time.Duration
}

func (t timedScheduler) Schedule(s *sched.Snapshot) []sched.Decision {
	t0 := time.Now()
	ds := t.Scheduler.Schedule(s)
	*t.spent += time.Since(t0)
	return ds
}

// cycle runs one scheduling cycle and applies its decisions.
func (w *world) cycle(trig sched.Trigger) {
	w.want = false
	now := w.now()
	snap := w.snapshot(now, trig)
	if len(snap.Waiting) == 0 && trig != sched.Tick {
		return
	}
	r := newLiveRunner(w, now)
	// The chain a start or a concurrency change passes (admit.go): the
	// job's fixed streams first, then its adaptive client, then its VO's
	// allocation on the pair, then the endpoints' limits.
	rules := []dispatch.Rule[*task]{fixedRule{w}, adaptiveRule{r}, voRule{r}, limitRule{r}}
	// The scheduler plans again around what the rules refused
	// (dispatch.Decide, dispatch.Replan): otherwise, ranking the same
	// refused files first every cycle, it would start nothing else.
	w.lastCycle = 0
	_, _ = dispatch.Decide(&w.cyc, timedScheduler{w.s.sch, &w.lastCycle}, snap, r, maxReplans, rules...)
	w.s.met.cycleSeconds.Observe(w.lastCycle.Seconds())
	starts, audit := r.starts, r.audit
	if len(starts) == 0 {
		return
	}
	// One write for the cycle's starts, then the runs begin: the store
	// says running before any byte moves. A start the store refused
	// never runs: its partition was taken over while this server did not
	// know (a paused process; it is forgotten, and the new owner runs
	// it), or the write failed (it waits for a later cycle). A run begun
	// anyway would write a temporary file next to a destination another
	// server may already have put in place.
	starts, audit = w.fillBatches(starts, audit, snap.Waiting, now)
	written := w.persistSome(starts, audit)
	var batch []*task
	for _, t := range starts {
		if !written(t) && t.State == store.StateRunning && t.cancel == nil {
			t.stop = stopNotRecorded
			if slices.Contains(w.stale, t.SrcEndpoint) {
				t.stop = stopLost
			}
			w.inflight++ // finished counts the run that never began
			w.finished(t.ID, t.run, engine.Result{}, errNotRecorded)
			continue
		}
		if t.State == store.StateRunning && t.cancel == nil && w.batchable(t) {
			batch = append(batch, t)
			continue
		}
		if t.State == store.StateRunning && t.cancel == nil {
			ctx, cancel := context.WithCancel(w.ctx)
			t.cancel = cancel
			if t.stop != "" {
				// Stopped in the same cycle: the run ends at once and
				// its report requeues the task.
				cancel()
			}
			w.inflight++
			p, run := w.plan(t), t.run
			w.s.async(func() { w.s.runner().run(ctx, p, run) })
		}
	}
	w.launchBatches(batch)
}

// setState moves t to state, accounting wait and transfer time, and
// returns the audit entry.
func (w *world) setState(t *task, state, detail string, now time.Time) store.AuditEntry {
	el := now.Sub(t.since).Seconds()
	switch t.State {
	case store.StateQueued:
		t.Wait += el
	case store.StateRunning:
		t.Trans += el
	}
	a := store.AuditEntry{At: now, JobID: t.JobID, TaskID: t.ID, Actor: w.actor(), From: t.State, To: state, Detail: detail, Term: t.Term}
	t.State, t.since = state, now
	w.s.events.publish(Event{Type: "task", Job: t.JobID, Owner: t.job.OwnerID, Task: t.ID, State: state, Detail: detail})
	return a
}

// persist writes tasks and audit entries, fenced by the tasks' lease
// terms. A write refused because another server took a partition over,
// or skipping tasks a user canceled through another server, is noted for
// settle, which applies it once the current step is over (the caller
// may still hold the tasks). Another failure is logged and retried at the
// next progress save (the in-memory state stays authoritative until the
// store agrees).
func (w *world) persist(ts []*task, audit []store.AuditEntry) (written bool) {
	ok := w.persistSome(ts, audit)
	for _, t := range ts {
		if !ok(t) {
			return false
		}
	}
	return true
}

// persistSome is persist that reports, per task, whether its row was
// written: a stale term loses one partition's tasks, not the others'.
func (w *world) persistSome(ts []*task, audit []store.AuditEntry) (written func(*task) bool) {
	none := func(*task) bool { return false }
	if len(ts) == 0 {
		return none
	}
	rows := make([]store.Task, len(ts))
	for i, t := range ts {
		rows[i] = t.Task
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	skipped, err := w.s.st.UpdateTasksFenced(ctx, w.s.cfg.ServerID, rows, audit)
	var se *store.StaleTermError
	switch {
	case errors.As(err, &se):
		w.stale = append(w.stale, se.Partitions...)
		// The rest of the batch (other partitions) still needs writing.
		var keep []*task
		lost := map[string]bool{}
		for _, p := range se.Partitions {
			lost[p] = true
		}
		for _, t := range ts {
			if !lost[t.SrcEndpoint] {
				keep = append(keep, t)
			}
		}
		if len(keep) == 0 || len(keep) == len(ts) {
			return none
		}
		rest := w.persistSome(keep, auditOf(keep, audit))
		return func(t *task) bool { return !lost[t.SrcEndpoint] && rest(t) }
	case err != nil:
		w.logEvery(slog.LevelError, "writing task state", "err", err)
		return none
	}
	w.skipped = append(w.skipped, skipped...)
	return func(*task) bool { return true }
}

// auditOf keeps the entries of tasks ts (and job-level ones).
func auditOf(ts []*task, audit []store.AuditEntry) []store.AuditEntry {
	ids := make(map[int64]bool, len(ts))
	for _, t := range ts {
		ids[t.ID] = true
	}
	var out []store.AuditEntry
	for _, a := range audit {
		if a.TaskID == 0 || ids[a.TaskID] {
			out = append(out, a)
		}
	}
	return out
}

// checkpointEvery is how often a run writes its journal: every second
// (SC'15 §4.5) while the runs stay within the journal write budget, less
// often beyond.
func (w *world) checkpointEvery() time.Duration {
	d := engine.DefaultCheckpointEvery
	if b := time.Duration(float64(w.running) / w.s.cfg.JournalWrites * float64(time.Second)); b > d {
		d = b
	}
	return d
}

// actor names this server's scheduler in the audit log.
func (w *world) actor() string { return "scheduler@" + w.s.cfg.ServerID }

// start makes t a running task with concurrency cc and returns the audit
// entry; cycle writes the starts and then launches the runs.
func (w *world) start(t *task, cc int, now time.Time) store.AuditEntry {
	a := w.setState(t, store.StateRunning, fmt.Sprintf("cc=%d", cc), now)
	t.CC, t.pending, t.stop, t.preemptFor = cc, true, "", 0
	if strings.HasPrefix(t.Error, waitPrefix) {
		t.Error = "" // the wait it noted is over
	}
	t.batched, t.rider = false, false
	t.run++
	t.runStart, t.runDone, t.rate = now, t.Done, 0
	if t.Started.IsZero() {
		t.Started = now
	}
	if e := w.eps[t.SrcEndpoint]; e != nil {
		t.srcLoad = e.cc
	}
	if e := w.eps[t.DstEndpoint]; e != nil {
		t.dstLoad = e.cc
	}
	w.addConns(t, cc)
	return a
}

// addConns adds n connections of t's run at each endpoint it uses (n
// negative: gives them back), as the loop counts them between cycles.
func (w *world) addConns(t *task, n int) {
	t.eachUse(func(name string, streams int, _ float64) {
		if e := w.eps[name]; e != nil {
			e.cc = max(0, e.cc+n*streams)
		}
	})
}

// pause preempts t: the engine stops at a sub-write boundary and writes
// its checkpoint; then the run ends and t waits again.
func (w *world) pause(t *task) {
	if t.xfer == nil {
		// Still starting: stop it outright (nothing moved yet).
		w.stopRun(t, stopPreempted)
		return
	}
	t.stop = stopPreempted
	x, run, id := t.xfer, t.run, t.ID
	w.s.async(func() {
		ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
		defer cancel()
		err := x.Pause(ctx)
		w.s.post(func(w *world) {
			t := w.tasks.get(id)
			if t == nil || t.run != run || t.State != store.StateRunning {
				return
			}
			if err != nil || x.Progress().State == engine.StateVerifying {
				// It finished or is verifying: let it end on its own.
				t.stop, t.preemptFor = "", 0
				return
			}
			t.cancel()
		})
	})
}

// stopRun ends t's run for a reason of the loop's own; the run's report
// (finished) then sees t.stop.
func (w *world) stopRun(t *task, why string) {
	t.stop = why
	if t.cancel != nil {
		t.cancel()
	}
}

// started records a run's engine transfer.
func (w *world) started(id int64, run int, x transfer) {
	t := w.tasks.get(id)
	if t == nil || t.run != run {
		return
	}
	t.xfer = x
	if t.CC > 0 && t.CC != x.Progress().CC {
		x.SetCC(t.CC)
	}
}

// moving records that a run moves bytes; tasks preempted in its favour
// stop now (SC'15 §4.5: the old transfer runs until the new one moves).
func (w *world) moving(id int64, run int) {
	t := w.tasks.get(id)
	if t == nil || t.run != run {
		return
	}
	t.pending = false
	w.releaseVictims(id)
}

func (w *world) releaseVictims(id int64) {
	vs := w.victims[id]
	delete(w.victims, id)
	for _, vid := range vs {
		if v := w.tasks.get(vid); v != nil && v.preemptFor == id && v.State == store.StateRunning && v.stop == "" {
			w.pause(v)
		}
	}
}

// finished handles the end of a run.
func (w *world) finished(id int64, run int, res engine.Result, err error) {
	w.inflight--
	t := w.tasks.get(id)
	if t == nil || t.run != run || t.State != store.StateRunning {
		return
	}
	now := w.now()
	if t.cancel != nil {
		t.cancel()
	}
	x := t.xfer
	t.xfer, t.cancel, t.pending = nil, nil, false
	if x != nil {
		p := x.Progress()
		if p.Journaled > t.Done {
			t.Done = p.Journaled
		}
		w.s.met.moved(t, p.Done)
		w.hist.runEnded(t, x)
	}
	w.addConns(t, -t.conns())
	stop := t.stop
	t.stop, t.preemptFor = "", 0
	if res.Note != "" {
		w.s.log.Info("run ended", "task", t.ID, "run", run, "note", res.Note, "err", err)
	}
	switch {
	case stop == stopLost:
		// Another server schedules it now and resumes it from the
		// checkpoint; nothing of this run may be written.
		w.forget(t)
	case errors.Is(err, store.ErrStaleTerm), errors.Is(err, backend.ErrFenced):
		// The check before putting the file in place (here, or the
		// destination agent's fence) found another server in charge:
		// it finishes the file.
		w.stale = append(w.stale, t.SrcEndpoint)
		w.forget(t)
	case err == nil:
		w.complete(t, res, now)
	case stop == stopCanceled || t.canceling:
		// CancelJob already wrote the canceled state; the partial file
		// and checkpoint go.
		t.State = store.StateCanceled
		w.s.cleanup(t.Task)
		w.drop(t)
	case stop != "":
		// Preempted, endpoint down or shutdown: wait again, resume from
		// the checkpoint.
		a := w.setState(t, store.StateQueued, stop, now)
		if stop == stopNoRules {
			// Tried again once the store may answer: not every cycle.
			t.notBefore = now.Add(noRulesWait)
			w.s.log.Warn("file not started: its owner's access rules cannot be read; will retry", "task", t.ID, "err", err)
		}
		if stop == stopPreempted {
			t.Preemptions++
			w.s.met.preemptions.Inc()
		}
		t.CC = 0
		w.persist([]*task{t}, []store.AuditEntry{a})
		w.releaseVictims(id)
	case permanent(err):
		t.Error = err.Error()
		a := w.setState(t, store.StateFailed, t.Error, now)
		t.Finished = now
		// Nothing will resume it: its partial file would hold the
		// space (of a full disk, say) for good.
		w.s.cleanup(t.Task)
		w.s.log.Warn("transfer failed", "task", t.ID, "src", t.Src, "dst", t.Dst, "err", err)
		w.endFailed(t, a, failReason(err))
		w.releaseVictims(id)
	default:
		t.Attempts++
		t.Error = err.Error()
		w.s.met.retries.Inc()
		if t.Attempts > t.job.Retry {
			a := w.setState(t, store.StateFailed, fmt.Sprintf("gave up after %d attempts: %v", t.Attempts, err), now)
			t.Finished = now
			w.s.cleanup(t.Task)
			w.endFailed(t, a, failReason(err))
		} else {
			a := w.setState(t, store.StateQueued, "retry: "+t.Error, now)
			t.CC = 0
			t.notBefore = now.Add(time.Duration(min(60, 1<<min(t.Attempts, 6))) * time.Second)
			w.persist([]*task{t}, []store.AuditEntry{a})
		}
		w.s.log.Warn("transfer interrupted", "task", t.ID, "attempt", t.Attempts, "err", err)
		w.releaseVictims(id)
	}
	w.want = true
	if w.cycleWant != sched.Arrival {
		w.cycleWant = sched.Completion
	}
}

// complete records a verified, renamed file.
func (w *world) complete(t *task, res engine.Result, now time.Time) {
	secs := now.Sub(t.runStart).Seconds()
	moved := t.Size - t.runDone
	t.Error = ""
	if res.Note == store.NoteInPlace {
		// Found at its destination, identical: nothing moved, and
		// the note tells the user so (and counts it, Job.FilesInPlace).
		moved, t.Error = 0, store.NoteInPlace
	}
	if secs > 0 && moved > 0 {
		t.Throughput = float64(moved) / secs
	}
	t.Done = t.Size
	if res.Algo != "" && res.Checksum != "" {
		t.Checksum = res.Algo + ":" + res.Checksum
	}
	a := w.setState(t, store.StateDone, t.Checksum, now)
	t.Finished = now
	w.adaptiveDone(t, now)
	// A file from several replicas says nothing about one pair's
	// throughput.
	var obs *store.Observation
	// Nor does one of a pull batch: its time is the whole batch's.
	if t.Throughput > 0 && moved == t.Size && len(t.Replicas) == 0 && !t.batched {
		o := store.Observation{Src: t.SrcEndpoint, Dst: t.DstEndpoint, CC: max(t.CC, 1), SrcLoad: t.srcLoad, DstLoad: t.dstLoad, Size: t.Size, Throughput: t.Throughput, At: now}
		w.est.Observe(model.Obs{Time: w.s.since(now), Src: o.Src, Dst: o.Dst, CC: o.CC, SrcLoad: o.SrcLoad, DstLoad: o.DstLoad, Size: o.Size, Thr: o.Throughput})
		w.linkObserve(o)
		obs = &o
	}
	// The writes wait for the end of the loop's turn (flush), with the
	// other completions of the turn: one transaction for a burst of small
	// files rather than three statements each. The task leaves the loop
	// now; its job counts it as active until it is written, so the job
	// cannot be finished before its last file is.
	w.tasks.remove(t)
	w.pw.tasks = append(w.pw.tasks, t)
	w.pw.audit = append(w.pw.audit, a)
	w.pw.done = append(w.pw.done, completion{t: t, obs: obs})
}

// completion is a finished task whose writes are pending (pendingWrites):
// done, or failed.
type completion struct {
	t      *task
	obs    *store.Observation
	failed bool
	reason string // why it failed (failReasons)
}

// endFailed takes t, failed (its state and audit entry a set), out of the
// loop. Its row is written with the turn's other changes (flush), and
// its job counts it failed only once the store has it: a write the store
// refused (a full disk) is made again at the next turn, rather than leave
// the file running in the store with nothing running it, and its job
// active until a restart. reason is the failure's, for the metrics
// (failReasons).
func (w *world) endFailed(t *task, a store.AuditEntry, reason string) {
	w.tasks.remove(t)
	w.pw.tasks = append(w.pw.tasks, t)
	w.pw.audit = append(w.pw.audit, a)
	w.pw.done = append(w.pw.done, completion{t: t, failed: true, reason: reason})
}

// pendingWrites are task writes the loop makes together at the end of a
// turn of its inbox (flush).
type pendingWrites struct {
	tasks []*task
	audit []store.AuditEntry
	done  []completion
}

// flush writes the turn's pending task states, then finishes what waited
// for them: done first, checkpoint second, so a crash in between leaves a
// stale checkpoint of a finished task, which nothing reads. Where the done
// state could not be written (another server took the partition over
// meanwhile) the complete checkpoint stays: it tells the next run that the
// file is already in place, so that it checks the checksums instead of
// copying the file a second time. A done state the store refused for
// another reason (a full disk, an I/O error) is written again at the next
// turn, and only then counted: the file must not stay running in the
// store, with no run behind it, and its job active until a restart.
func (w *world) flush() {
	if len(w.pw.tasks) == 0 {
		return
	}
	pw := w.pw
	w.pw = pendingWrites{}
	// A task changed twice in the turn is written once, as it is now.
	seen := make(map[*task]bool, len(pw.tasks))
	ts := pw.tasks[:0]
	for _, t := range pw.tasks {
		if !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	written := w.persistSome(ts, pw.audit)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	var keys []string
	var obs []store.Observation
	lost := make(map[string]bool, len(w.stale))
	for _, p := range w.stale {
		lost[p] = true
	}
	var retry pendingWrites
	done := pw.done[:0]
	for _, c := range pw.done {
		switch {
		case written(c.t):
			keys = append(keys, journalKey(c.t.ID))
		case !lost[c.t.SrcEndpoint]:
			retry.tasks = append(retry.tasks, c.t)
			retry.done = append(retry.done, c)
			continue
		}
		if c.obs != nil {
			obs = append(obs, *c.obs)
		}
		done = append(done, c)
	}
	if len(retry.done) > 0 {
		w.logEvery(slog.LevelWarn, "finished files not yet recorded done; writing them again at the next turn", "files", len(retry.done))
		ids := make(map[int64]bool, len(retry.tasks))
		for _, t := range retry.tasks {
			ids[t.ID] = true
		}
		for _, a := range pw.audit {
			if ids[a.TaskID] {
				retry.audit = append(retry.audit, a)
			}
		}
		w.pw.tasks = append(w.pw.tasks, retry.tasks...)
		w.pw.audit = append(w.pw.audit, retry.audit...)
		w.pw.done = append(w.pw.done, retry.done...)
	}
	pw.done = done
	if err := w.s.st.DeleteCheckpoints(ctx, keys); err != nil {
		w.s.log.Warn("deleting checkpoints of finished tasks", "tasks", len(keys), "err", err)
	}
	if err := w.s.st.AddObservations(ctx, obs); err != nil {
		w.s.log.Warn("recording observations", "err", err)
	}
	for _, c := range pw.done {
		t := c.t
		w.hist.taskEnded(t, c.failed)
		if c.failed {
			t.job.failed++
			w.s.met.taskFailed(t, c.reason)
		} else {
			w.s.met.finished(t)
			t.job.FilesDone++
			if t.Error == store.NoteInPlace {
				t.job.FilesInPlace++
			}
			t.job.completed = store.AddBytes(t.job.completed, t.Size)
		}
		t.job.active--
		w.maybeFinishJob(t.job)
	}
}

// drop removes a terminal task from the loop.
func (w *world) drop(t *task) {
	w.tasks.remove(t)
	t.job.active--
	w.maybeFinishJob(t.job)
}

func (w *world) maybeFinishJob(j *jobState) {
	if j.active > 0 {
		return
	}
	if j.State != store.StateActive {
		delete(w.jobs, j.ID)
		return
	}
	// Other servers may schedule some of the job's files: the store
	// decides whether this was the last one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	now := w.now()
	state, err := w.s.st.FinishJobIfDone(ctx, j.ID, now, w.actor())
	if err != nil {
		// Tried again at the next tick: nothing else would finish it
		// until a restart (finishSettledJobs), and its user would see
		// it active with every file ended.
		w.logEvery(slog.LevelError, "finishing a job; will retry", "job", j.ID, "err", err)
		if w.unfinished == nil {
			w.unfinished = map[int64]*jobState{}
		}
		w.unfinished[j.ID] = j
		return
	}
	delete(w.unfinished, j.ID)
	delete(w.jobs, j.ID)
	if state == store.StateDone || state == store.StateFailed {
		j.State, j.Finished = state, now
		w.s.events.publish(Event{Type: "job", Job: j.ID, Owner: j.OwnerID, State: state})
	}
}

// finishSettledJobs finishes active jobs none of whose tasks is active:
// a server that wrote a job's last file and died before finishing the
// job leaves one, and no claim would ever bring it back.
func (w *world) finishSettledJobs(ctx context.Context) error {
	var before int64
	for {
		js, err := w.s.st.Jobs(ctx, store.JobFilter{State: store.StateActive, Limit: 500, Before: before})
		if err != nil {
			return fmt.Errorf("server: loading active jobs: %w", err)
		}
		for _, j := range js {
			if j.FilesDone+j.FilesFailed+j.FilesCanceled < j.Files {
				continue
			}
			if _, err := w.s.st.FinishJobIfDone(ctx, j.ID, w.now(), w.actor()); err != nil {
				return fmt.Errorf("server: %w", err)
			}
		}
		if len(js) < 500 {
			return nil
		}
		before = js[len(js)-1].ID
	}
}

// canceled stops the tasks CancelJob marked canceled (in the store; the
// loop called it, so no write of the loop's came in between).
func (w *world) canceled(jobID int64, ids []int64) {
	for _, id := range ids {
		t := w.tasks.get(id)
		if t == nil {
			continue
		}
		w.s.events.publish(Event{Type: "task", Job: t.JobID, Owner: t.job.OwnerID, Task: t.ID, State: store.StateCanceled})
		if t.State == store.StateRunning {
			t.canceling = true // no progress write may undo the cancel
			if t.xfer != nil && t.xfer.Progress().State == engine.StateVerifying {
				// Every byte is there: interrupting the checksum or
				// the rename would only risk a renamed file reported
				// as canceled. It ends done.
				continue
			}
			// finished() drops it and removes its partial file once
			// the run has stopped writing.
			w.stopRun(t, stopCanceled)
			continue
		}
		if !t.Started.IsZero() {
			w.s.cleanup(t.Task)
		}
		w.tasks.remove(t)
		t.job.active--
	}
	if j := w.jobs[jobID]; j != nil {
		j.State = store.StateCanceled
		if j.active <= 0 {
			delete(w.jobs, jobID)
		}
		w.s.events.publish(Event{Type: "job", Job: jobID, Owner: j.OwnerID, State: store.StateCanceled})
	}
}

// tick does the periodic work: heartbeats, progress, events.
func (w *world) tick(now time.Time) {
	w.heartbeats(now)
	w.tendListings(now)
	for t := range w.tasks.all() {
		if t.State == store.StateRunning && t.xfer != nil {
			p := t.xfer.Progress()
			t.rate = p.Rate
		}
	}
	if now.Sub(w.lastSave) >= 2*time.Second {
		w.lastSave = now
		w.saveProgress(now)
	}
	if now.Sub(w.lastEvent) >= time.Second {
		w.lastEvent = now
		w.progressEvents()
	}
	if w.s.sweepSoon.Swap(false) {
		w.lastSweep = time.Time{}
	}
	if !w.sweeping && now.Sub(w.lastSweep) >= w.sweepEvery && now.Sub(w.begun) >= 5*time.Second {
		// Owed removals of partial files (agents that were down when
		// their tasks ended, a crash between the end and the removal).
		// The first waits a few seconds for the agents to register;
		// while removals remain owed, the next comes sooner.
		w.sweeping, w.lastSweep = true, now
		live := map[int64]bool{}
		for t := range w.tasks.all() {
			if t.State == store.StateRunning {
				live[t.ID] = true
			}
		}
		w.s.async(func() {
			owed := w.s.sweepPartials(w.ctx, live)
			w.s.post(func(w *world) {
				w.sweeping = false
				w.sweepEvery = sweepEvery
				if owed > 0 {
					w.sweepEvery = sweepAgain
				}
			})
		})
	}
	for _, id := range slices.Sorted(maps.Keys(w.unfinished)) {
		w.maybeFinishJob(w.unfinished[id])
	}
	w.resolve()
	w.tendVOAllocs(now)
	w.tendAdaptive(now)
	w.s.met.observe(w)
	w.sample(now)
}

// saveProgress writes the checkpointed bytes of running tasks.
func (w *world) saveProgress(now time.Time) {
	var ts []*task
	for t := range w.tasks.all() {
		if t.State != store.StateRunning || t.xfer == nil || t.canceling {
			continue
		}
		if j := t.xfer.Progress().Journaled; j > t.Done {
			t.Done = j
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return
	}
	ps := make([]store.Progress, len(ts))
	for i, t := range ts {
		ps[i] = store.Progress{ID: t.ID, SrcEndpoint: t.SrcEndpoint, Term: t.Term, Done: t.Done}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	// Only the bytes done: a server running ten thousand transfers writes
	// this every two seconds.
	err := w.s.st.SaveProgress(ctx, w.s.cfg.ServerID, ps)
	var se *store.StaleTermError
	switch {
	case errors.As(err, &se):
		w.stale = append(w.stale, se.Partitions...)
	case err != nil:
		w.s.log.Error("saving progress", "err", err)
	}
}

// heartbeats marks endpoints up or down from the agents' last beats.
func (w *world) heartbeats(now time.Time) {
	w.s.mu.Lock()
	beats := make(map[string]agentState, len(w.s.agents))
	for n, a := range w.s.agents {
		beats[n] = *a
	}
	w.s.mu.Unlock()
	for name, b := range beats {
		e := w.eps[name]
		if e == nil {
			w.eps[name] = &endpoint{Endpoint: b.ep}
			continue
		}
		// The registration's copy says Up: keep the loop's own view,
		// which the loop below changes (and logs, and stores) only
		// when it changes.
		up := e.Up
		e.Endpoint = b.ep
		e.Up = up
	}
	// In the names' order: each change is written to the store and
	// stops runs, and the loop's simulation replays a seed only if that
	// order is the same every time (a map's is not).
	for _, name := range slices.Sorted(maps.Keys(w.eps)) {
		e := w.eps[name]
		// Heartbeats reach any server: the store's LastSeen counts
		// as well as this server's own.
		heard := e.LastSeen
		if b, ok := beats[name]; ok && b.last.After(heard) {
			heard = b.last
		}
		if seen := w.seen[name]; seen.After(heard) {
			heard = seen
		}
		e.heard = heard
		// An endpoint up when this server started, but not heard from
		// since, gets the timeout counted from the start: its agent
		// may only be finding the restarted server again. One the
		// store had down stays down until it is heard from: counting
		// from the start would call a dead agent up and send it files
		// that spend their attempts on refused connections.
		last := heard
		if !e.downAtLoad && w.begun.After(last) {
			last = w.begun
		}
		// A storage endpoint has no agent to beat: the server reaches it
		// itself, and a run that cannot is retried like any transient
		// failure.
		alive := e.Storage() || now.Sub(last) < w.s.cfg.HeartbeatTimeout
		if alive == e.Up {
			continue
		}
		e.Up = alive
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
		if err := w.s.st.SetEndpointUp(ctx, name, alive, last); err != nil {
			w.s.log.Warn("recording endpoint state", "endpoint", name, "err", err)
		}
		cancel()
		if alive {
			w.s.log.Info("endpoint up", "endpoint", name)
			w.arrival()
			w.lastSweep = time.Time{} // removals it may be owed: at the next tick
			continue
		}
		w.s.log.Warn("endpoint down: no heartbeat", "endpoint", name, "silent", now.Sub(last).Round(time.Second))
		e.downNote = fmt.Sprintf("%s%s is down (no heartbeat since %s)", downPrefix, name, last.UTC().Format(time.RFC3339))
		w.stopDownRuns(name)
	}
}

// stopDownRuns stops the runs that endpoint name, now down, held up: a
// file with replicas goes on while one of its sources is up (the engine
// drops a replica that fails).
func (w *world) stopDownRuns(name string) {
	for t := range w.tasks.all() {
		if t.State != store.StateRunning {
			continue
		}
		uses := t.SrcEndpoint == name || t.DstEndpoint == name
		for _, r := range t.Replicas {
			uses = uses || urlHost(r) == name
		}
		if uses && !w.taskUp(t) {
			w.stopRun(t, stopDown)
		}
	}
}

// sweepEvery is how often the loop retries the removals of partial files
// that could not be done when their tasks ended; sweepAgain, while some
// are still owed.
const (
	sweepEvery = time.Minute
	sweepAgain = 10 * time.Second
)

// shutdown stops every run and waits (briefly) for their reports, so that
// their last checkpoints are written.
func (w *world) shutdown() {
	w.stopAll()
	deadline := time.After(15 * time.Second)
	for w.inflight > 0 {
		select {
		case f := <-w.s.inbox:
			f(w)
		case <-deadline:
			w.s.log.Warn("shutdown: transfers still stopping", "count", w.inflight)
			w.releaseVOAllocs()
			return
		}
	}
	w.releaseVOAllocs()
}

// stopAll stops every run, for a shutdown.
func (w *world) stopAll() {
	for t := range w.tasks.all() {
		if t.State == store.StateRunning {
			w.stopRun(t, stopShutdown)
		}
	}
}

// throttled is one repeated message's state: when it was last logged and
// how many times it was left out since.
type throttled struct {
	at      time.Time
	dropped int
}

// logEvery logs msg at most once every logQuiet: a store that refuses
// every write (its disk full, its database down) fails every turn of the
// loop, many times a second, and a log that says so thousands of times
// fills the disk it is written to too. The next message says how many
// were left out.
func (w *world) logEvery(level slog.Level, msg string, args ...any) {
	now := w.now()
	if w.quiet == nil {
		w.quiet = map[string]*throttled{}
	}
	q := w.quiet[msg]
	if q == nil {
		q = &throttled{}
		w.quiet[msg] = q
	}
	if !q.at.IsZero() && now.Sub(q.at) < logQuiet {
		q.dropped++
		return
	}
	if q.dropped > 0 {
		args = append(args, "repeats_not_logged", q.dropped)
	}
	q.at, q.dropped = now, 0
	w.s.log.Log(context.Background(), level, msg, args...)
}

// logQuiet is how often logEvery logs one message at most.
const logQuiet = 10 * time.Second

func permanent(err error) bool {
	return errors.Is(err, engine.ErrChecksum) || errors.Is(err, engine.ErrSourceChanged) ||
		errors.Is(err, engine.ErrDestinationExists) || backendPermanent(err)
}
