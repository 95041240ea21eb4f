package server

import (
	"fmt"
	"time"

	"github.com/sluice-dtn/sluice/dispatch"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// liveRunner carries out one cycle's admitted decisions in the service
// (dispatch.Runner): starts are collected for one store write and then
// launched by cycle; preemptions pause runs in the engine; concurrency
// changes go to the engine at once. It also holds the cycle's running
// usage that the rules check starts against.
type liveRunner struct {
	w   *world
	now time.Time
	// used is the streams running per pair and VO, inFlight the files in
	// flight per adaptive job and pair, both as of the snapshot plus the
	// cycle's admitted starts and changes.
	used     map[voKey]int
	inFlight map[adaptKey]int
	// asked: the VOs and pairs whose allocation the cycle asked to grow
	// and did not get enough (voRule).
	asked  map[voKey]bool
	starts []*task
	audit  []store.AuditEntry
	// round are the decisions of the current round carried out, with
	// the concurrency granted (dispatch.Replan).
	round []sched.Decision
	// conns are the connections at each endpoint of the runs that keep
	// them (not being stopped; a preempted victim's belong to its
	// replacement), this server's and the others' (limitRule).
	conns map[string]int
	total int
	// victims are the tasks the round's decisions preempt for each
	// start: dispatch.Apply preempts them just before the start, once
	// the rules let it through, so limitRule counts their connections as
	// the start's.
	victims map[sched.TaskID][]int64
	// The files the cycle's later rounds leave out (Hold): those
	// refused, and those of the VOs and pairs (voRule) and adaptive jobs
	// and pairs (adaptiveRule) that had a start refused.
	held      map[sched.TaskID]bool
	heldVO    map[voKey]bool
	heldAdapt map[adaptKey]bool
}

// newLiveRunner starts a cycle's apply from the running tasks.
func newLiveRunner(w *world, now time.Time) *liveRunner {
	used, inFlight := usageOf(w.runTasks)
	r := &liveRunner{w: w, now: now, used: used, inFlight: inFlight, asked: map[voKey]bool{}, conns: map[string]int{},
		held: map[sched.TaskID]bool{}, heldVO: map[voKey]bool{}, heldAdapt: map[adaptKey]bool{}}
	for _, t := range w.runTasks {
		if t.State == store.StateRunning && t.stop == "" && t.preemptFor == 0 {
			r.hold(t, t.conns())
		}
	}
	for name, x := range w.ext {
		r.conns[name] += x.CC // not in total: that bounds this server's
	}
	return r
}

// Plan prepares a round: the victims of each start (dispatch.Planner).
func (r *liveRunner) Plan(ds []sched.Decision) {
	r.round = r.round[:0]
	r.victims = map[sched.TaskID][]int64{}
	for _, d := range ds {
		if d.Kind == sched.Preempt && d.For != 0 {
			r.victims[d.For] = append(r.victims[d.For], int64(d.Task))
		}
	}
}

// hold counts n more connections of t's run at its endpoints (n < 0:
// gives them back).
func (r *liveRunner) hold(t *task, n int) {
	t.eachUse(func(name string, streams int, _ float64) {
		r.conns[name] += n * streams
	})
	r.total += n
}

// Lookup finds d's task; a decision that no longer applies (its task
// finished, was canceled or already changed state since the snapshot) is
// skipped, not an error: the service's world moves between snapshot and
// apply only through this loop, but a task may have been dropped by
// giveUp while the snapshot was built.
func (r *liveRunner) Lookup(d sched.Decision) (*task, bool, error) {
	t := r.w.tasks.get(int64(d.Task))
	if t == nil {
		return nil, false, nil
	}
	switch d.Kind {
	case sched.Start:
		return t, t.State == store.StateQueued, nil
	case sched.Preempt:
		return t, t.State == store.StateRunning && t.stop == "", nil
	case sched.SetCC:
		return t, t.State == store.StateRunning && t.xfer != nil && d.CC > 0, nil
	}
	return t, false, nil
}

func (r *liveRunner) CC(t *task) int { return t.CC }

func (r *liveRunner) Start(t *task, cc int) error {
	r.hold(t, cc)
	r.used[keyOf(t)] += cc
	if t.job.Adaptive != "" {
		r.inFlight[adaptKeyOf(t)]++
	}
	r.audit = append(r.audit, r.w.start(t, cc, r.now))
	r.starts = append(r.starts, t)
	r.round = append(r.round, sched.Decision{Kind: sched.Start, Task: sched.TaskID(t.ID), CC: cc})
	return nil
}

func (r *liveRunner) Preempt(t *task, d sched.Decision) error {
	w := r.w
	r.round = append(r.round, d)
	if t.stop == "" && t.preemptFor == 0 {
		r.hold(t, -t.conns()) // its replacement's now
	}
	t.preemptFor = int64(d.For)
	if f := w.tasks.get(t.preemptFor); f == nil || f.State != store.StateRunning || !f.pending {
		w.pause(t)
	} else {
		w.victims[t.preemptFor] = append(w.victims[t.preemptFor], t.ID)
	}
	return nil
}

func (r *liveRunner) SetCC(t *task, cc int) error {
	if cc == t.CC {
		return nil
	}
	if err := t.xfer.SetCC(cc); err == nil {
		r.used[keyOf(t)] += cc - t.CC
		r.hold(t, cc-t.CC)
		t.CC = cc
		r.round = append(r.round, sched.Decision{Kind: sched.SetCC, Task: sched.TaskID(t.ID), CC: cc})
		r.w.pw.tasks = append(r.w.pw.tasks, t) // the files list shows it
	}
	return nil
}

// fixedRule: a job that fixes its streams (Streams, or Optimize once its
// pair is estimated) runs every file with them, whatever the scheduler
// chose, and keeps them.
type fixedRule struct{ w *world }

func (fixedRule) Name() string { return "fixed streams" }

func (f fixedRule) Admit(t *task, d sched.Decision, cc, cur int) (int, string) {
	n := f.w.fixedCC(t)
	if n <= 0 {
		return cc, ""
	}
	if d.Kind == sched.SetCC {
		return cur, fmt.Sprintf("job %d runs with the %d streams it fixed", t.JobID, n)
	}
	return n, fmt.Sprintf("job %d runs with the %d streams it fixed", t.JobID, n)
}

// adaptiveRule: an adaptive job's client (Policy Service) sets the
// streams of its files and how many may be in flight.
type adaptiveRule struct{ r *liveRunner }

func (adaptiveRule) Name() string { return "adaptive client" }

func (a adaptiveRule) Admit(t *task, d sched.Decision, cc, cur int) (int, string) {
	if t.job.Adaptive == "" {
		return cc, ""
	}
	if d.Kind == sched.SetCC {
		return cur, fmt.Sprintf("job %d is adaptive: its client sets its streams", t.JobID)
	}
	st := a.r.w.adaptiveOf(t, a.r.now)
	if st == nil {
		return cc, "" // runs as a plain job (adaptiveOf logged why)
	}
	k := adaptKeyOf(t)
	if n := st.cl.Concurrency(); a.r.inFlight[k] >= n {
		if n == 0 {
			a.r.w.waitNote(t, st.waiting(k))
		}
		a.r.heldAdapt[k] = true
		return 0, fmt.Sprintf("job %d's adaptive client allows %d files in flight on %s->%s", t.JobID, n, k.src, k.dst)
	}
	return st.cl.Params().P, fmt.Sprintf("job %d's adaptive client runs %d streams per file", t.JobID, st.cl.Params().P)
}

// voRule: the streams of a VO's jobs on a pair stay within the
// allocation the Policy Service gave the scheduler for them; a start
// beyond it waits, an increase is trimmed. Adaptive jobs hold
// allocations of their own (adaptiveRule), unless their client could not
// be made and they run as plain jobs.
type voRule struct{ r *liveRunner }

func (voRule) Name() string { return "VO allocation" }

func (v voRule) Admit(t *task, d sched.Decision, cc, cur int) (int, string) {
	w, now := v.r.w, v.r.now
	if t.job.Adaptive != "" && w.adapts[adaptKeyOf(t)] != nil {
		return cc, "" // its client's allocation bounds it (adaptiveRule)
	}
	why := fmt.Sprintf("%sthe Policy Service gives VO %s no more streams on %s->%s now", waitPrefix, t.job.VO, t.SrcEndpoint, t.DstEndpoint)
	k := keyOf(t)
	if d.Kind == sched.SetCC {
		if cc <= cur {
			return cc, ""
		}
		got := cur + w.admitStreams(t, cc-cur, v.r.used, now, !v.r.asked[k])
		if got == cc {
			return cc, ""
		}
		v.r.asked[k] = true
		return got, why
	}
	got := w.admitStreams(t, cc, v.r.used, now, !v.r.asked[k])
	if got < cc && w.fixedCC(t) > 0 {
		// A job that fixed its streams waits until they fit, unless
		// the allocation can never hold them.
		if a := w.vallocs[k]; a == nil || a.max <= 0 || cc <= a.max {
			got = 0
		}
	}
	if got == 0 {
		w.waitNote(t, why)
		v.r.heldVO[k] = true
	}
	if got == cc {
		return cc, ""
	}
	v.r.asked[k] = true
	return got, why
}

// maxReplans bounds the rounds of one cycle after the first (each holds
// back at least one more VO and pair, or adaptive job, or file).
const maxReplans = 3

// Hold holds back the files of the starts the rules refused in
// the round, for the cycle's later rounds (the rules themselves hold
// back every file of a VO and pair, or of an adaptive job and pair,
// whose next start they would refuse too); it reports whether any start
// was refused.
func (r *liveRunner) Hold(refused []sched.Refusal) bool {
	any := false
	for _, f := range refused {
		if f.Decision.Kind == sched.Start && f.CC <= 0 {
			r.held[f.Decision.Task] = true
			any = true
		}
	}
	return any
}

// Applied returns the round's decisions carried out, with the
// concurrency granted.
func (r *liveRunner) Applied() []sched.Decision { return r.round }

// Keep says whether a waiting file is offered to the cycle's next round.
func (r *liveRunner) Keep(st *sched.Task) bool {
	if r.held[st.ID] {
		return false
	}
	t := r.w.tasks.get(int64(st.ID))
	if t == nil {
		return false
	}
	if t.job.Adaptive == "" {
		return !r.heldVO[keyOf(t)]
	}
	return !r.heldAdapt[adaptKeyOf(t)]
}

// limitRule: the connections at an endpoint stay within its limit (its
// agent's, or DefaultEndpointMaxCC), and all of them within
// Config.TotalMaxCC. The scheduler plans within them; this rule holds
// them when the plan is carried out in part (a start refused by another
// rule keeps its victims running, and their connections are not free for
// the plan's other starts and increases). A start gets what room is left
// or waits; a job that fixed its streams (or an adaptive one) waits until they
// fit, unless they never could.
type limitRule struct{ r *liveRunner }

func (limitRule) Name() string { return "endpoint limits" }

func (l limitRule) Admit(t *task, d sched.Decision, cc, cur int) (int, string) {
	if cc <= cur {
		return cc, ""
	}
	w := l.r.w
	room := cc - cur
	var full string
	// The connections of the tasks preempted for this start are its own.
	var freed map[string]int
	freedAll := 0
	if vs := l.r.victims[d.Task]; d.Kind == sched.Start && len(vs) > 0 {
		freed = map[string]int{}
		for _, id := range vs {
			if v := w.tasks.get(id); v != nil && v.State == store.StateRunning && v.stop == "" && v.preemptFor == 0 {
				v.eachUse(func(name string, streams int, _ float64) { freed[name] += v.conns() * streams })
				freedAll += v.conns()
			}
		}
	}
	t.eachUse(func(name string, streams int, _ float64) {
		limit := w.maxCC(name)
		inUse := l.r.conns[name] - freed[name]
		if n := max(0, limit-inUse) / streams; n < room {
			room, full = n, fmt.Sprintf("%s has %d of its %d connections in use", name, inUse, limit)
		}
	})
	if m := w.s.cfg.TotalMaxCC; m > 0 && m-(l.r.total-freedAll) < room {
		room, full = max(0, m-(l.r.total-freedAll)), fmt.Sprintf("%d of the %d connections allowed in all are in use", l.r.total-freedAll, m)
	}
	if room >= cc-cur {
		return cc, ""
	}
	if d.Kind == sched.Start && (w.fixedCC(t) > 0 || t.job.Adaptive != "") && l.fits(t, cc) {
		room = 0 // waits until its streams fit
	}
	if d.Kind == sched.Start && room == 0 {
		w.waitNote(t, waitPrefix+full) // the files list says why
	}
	return cur + room, full
}

// fits reports whether cc connections of t could run at all: within each
// of its endpoints' limits and the total's. A job that fixed more streams
// than that runs with fewer rather than wait for good.
func (l limitRule) fits(t *task, cc int) bool {
	w := l.r.w
	ok := true
	t.eachUse(func(name string, streams int, _ float64) {
		if cc*streams > w.maxCC(name) {
			ok = false
		}
	})
	if m := w.s.cfg.TotalMaxCC; m > 0 && cc > m {
		ok = false
	}
	return ok
}

// The service's runner plans again around refusals (dispatch.Decide).
var _ dispatch.Planner = (*liveRunner)(nil)
