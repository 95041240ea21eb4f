package server

import (
	"fmt"
	"time"

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
	starts   []*task
	audit    []store.AuditEntry
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
	r.used[keyOf(t)] += cc
	if t.job.Adaptive != "" {
		r.inFlight[adaptKeyOf(t)]++
	}
	r.audit = append(r.audit, r.w.start(t, cc, r.now))
	r.starts = append(r.starts, t)
	return nil
}

func (r *liveRunner) Preempt(t *task, d sched.Decision) error {
	w := r.w
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
		t.CC = cc
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
	if d.Kind == sched.SetCC {
		if cc <= cur {
			return cc, ""
		}
		got := cur + w.admitStreams(t, cc-cur, v.r.used, now)
		if got == cc {
			return cc, ""
		}
		return got, why
	}
	got := w.admitStreams(t, cc, v.r.used, now)
	if got == 0 {
		w.waitNote(t, why)
	}
	if got == cc {
		return cc, ""
	}
	return got, why
}
