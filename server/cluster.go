package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Several servers on one database: package cluster's coordinator talks to
// the store; this file is the loop's side of it (clusterLoop hands its
// news to the loop through the inbox, FIFO) and what the loop does with
// claims, losses, releases and cancellations.

// Defaults for the cluster settings (package cluster's).
const (
	DefaultLeaseTTL  = cluster.DefaultLeaseTTL
	DefaultPollEvery = cluster.DefaultPollEvery
)

// wakeUp asks the coordinator for a sync now (new work submitted here,
// an agent registered): a non-blocking hint.
func (s *Server) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// coordinate runs the coordinator until ctx ends.
func (s *Server) coordinate(ctx context.Context) {
	s.newCoordinator().Run(ctx, s.wake)
}

func (s *Server) newCoordinator() *cluster.Coordinator {
	return cluster.New(cluster.Config{ServerID: s.cfg.ServerID, URL: s.cfg.URL, LeaseTTL: s.cfg.LeaseTTL,
		PollEvery: s.cfg.PollEvery, Clock: clockOf(s), Log: s.log}, s.st, clusterLoop{s})
}

// clockOf is the server's clock, as a clock.Clock.
func clockOf(s *Server) clock.Clock {
	if s.cfg.Clock == nil {
		return clock.System{}
	}
	return s.cfg.Clock
}

// clusterLoop is the loop as the coordinator sees it (cluster.Loop).
type clusterLoop struct{ s *Server }

func (l clusterLoop) Gained(ctx context.Context, p string, term int64) bool {
	return l.s.do(ctx, func(w *world) { w.parts[p] = term })
}

func (l clusterLoop) Lost(ctx context.Context, p string) bool {
	return l.s.do(ctx, func(w *world) { w.lostPartition(p) })
}

func (l clusterLoop) Release(ctx context.Context, p string) bool {
	ok, _ := ask(ctx, l.s, func(w *world) bool { return w.release(p) })
	return ok
}

func (l clusterLoop) Claimed(ctx context.Context, ts []store.Task) bool {
	return l.s.do(ctx, func(w *world) { w.claimed(ts) })
}

func (l clusterLoop) Canceled(ctx context.Context, jobs []int64) bool {
	return l.s.do(ctx, func(w *world) {
		for _, id := range jobs {
			w.jobCanceled(id)
		}
	})
}

func (l clusterLoop) Endpoints(ctx context.Context, eps []store.Endpoint) bool {
	return l.s.do(ctx, func(w *world) { w.storeEndpoints(eps) })
}

func (l clusterLoop) ExternalLoads(ctx context.Context, ext map[string]cluster.Load) bool {
	return l.s.do(ctx, func(w *world) { w.ext = ext })
}

func (l clusterLoop) GivenUp() map[string]int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	g := l.s.givenUp
	l.s.givenUp = nil
	return g
}

func (l clusterLoop) OwnLoads() map[string]cluster.Load {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return maps.Clone(l.s.ownLoad)
}

// ask runs f in the loop and waits for its answer.
func ask[T any](ctx context.Context, s *Server, f func(*world) T) (T, bool) {
	out := make(chan T, 1)
	var zero T
	if !s.do(ctx, func(w *world) { out <- f(w) }) {
		return zero, false
	}
	select {
	case v := <-out:
		return v, true
	case <-ctx.Done():
		return zero, false
	}
}

// --- the loop's side ---

// claimed takes tasks the coordinator claimed into the loop. A task that
// was running belonged to a server that died or gave up its lease: it
// waits again and resumes from its checkpoint.
func (w *world) claimed(ts []store.Task) {
	now := w.now()
	var requeued []*task
	var audit []store.AuditEntry
	for _, st := range ts {
		if term, ok := w.parts[st.SrcEndpoint]; !ok || term != st.Term {
			// Lost again before this arrived; the next owner claims it.
			continue
		}
		if old := w.tasks.get(st.ID); old != nil {
			// Reclaimed under a newer term of ours (a lease lost and
			// taken back): keep the run, adopt the term.
			old.Term = st.Term
			continue
		}
		j, err := w.job(w.ctx, st.JobID)
		if err != nil {
			w.s.log.Error("cluster: loading the job of a claimed task", "task", st.ID, "err", err)
			continue
		}
		t := &task{Task: st, job: j, since: now}
		if t.State == store.StateRunning {
			a := w.setState(t, store.StateQueued, "taken over: its scheduler stopped", now)
			t.since = now
			t.CC = 0
			requeued = append(requeued, t)
			audit = append(audit, a)
		}
		w.tasks.add(t)
		if t.State == store.StateResolving {
			w.needResolve(t)
		}
		j.active++
		j.completed -= t.Done // Job's BytesDone counts active tasks' partial bytes
	}
	if len(requeued) > 0 {
		w.persist(requeued, audit)
		w.s.log.Info("cluster: resuming tasks whose scheduler stopped", "tasks", len(requeued))
	}
	w.arrival()
	w.resolve()
}

// lostPartition forgets a partition another server now schedules: its
// runs stop (their checkpoints stay for the new owner) and its tasks
// leave the loop without any write.
func (w *world) lostPartition(p string) {
	delete(w.parts, p)
	for t := range w.tasks.all() {
		if t.SrcEndpoint != p {
			continue
		}
		if t.State == store.StateRunning && t.cancel != nil {
			w.stopRun(t, stopLost)
			continue
		}
		w.forget(t)
	}
}

// release gives a partition up if nothing of it is running or being
// stat'ed, and reports whether it did.
func (w *world) release(p string) bool {
	if _, ok := w.parts[p]; !ok {
		return true
	}
	// Completions of this turn are written while the lease is still ours.
	w.flush()
	for t := range w.tasks.all() {
		if t.SrcEndpoint == p && (t.State == store.StateRunning || t.pending) {
			return false
		}
	}
	delete(w.parts, p)
	for t := range w.tasks.all() {
		if t.SrcEndpoint == p {
			w.forget(t)
		}
	}
	return true
}

// forget removes a task from the loop without writing anything: it is
// not this server's to schedule any more.
func (w *world) forget(t *task) {
	w.tasks.remove(t)
	t.job.active--
	if t.job.active <= 0 {
		delete(w.jobs, t.JobID)
	}
}

// jobCanceled stops this server's tasks of a job canceled (in the store)
// through any server.
func (w *world) jobCanceled(jobID int64) {
	if w.jobs[jobID] == nil {
		// None of its files is scheduled here; this server's watchers
		// still hear that it ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
		defer cancel()
		if j, err := w.s.st.Job(ctx, jobID); err == nil {
			w.s.events.publish(Event{Type: "job", Job: jobID, Owner: j.OwnerID, State: store.StateCanceled})
		}
		return
	}
	var ids []int64
	for t := range w.tasks.all() {
		if t.JobID == jobID {
			ids = append(ids, t.ID)
		}
	}
	slices.Sort(ids)
	w.canceled(jobID, ids)
}

// storeEndpoints merges the endpoints table: heartbeats any server
// recorded, and agents registered elsewhere.
func (w *world) storeEndpoints(eps []store.Endpoint) {
	for _, e := range eps {
		cur := w.eps[e.Name]
		if cur == nil {
			cur = &endpoint{Endpoint: e}
			cur.Up = false // the heartbeat check decides
			w.eps[e.Name] = cur
		}
		cur.removed = false // in the store: registered (again)
		if cur.URL == "" || !w.s.localBeat(e.Name) {
			up := cur.Up
			cur.Endpoint = e
			cur.Up = up
		}
		if e.LastSeen.After(w.seen[e.Name]) {
			w.seen[e.Name] = e.LastSeen
		}
	}
}

// settle applies what writes found out (called after each loop step):
// partitions the store says are lost, and tasks canceled through other
// servers.
func (w *world) settle() {
	for len(w.stale) > 0 || len(w.skipped) > 0 {
		stale, skipped := w.stale, w.skipped
		w.stale, w.skipped = nil, nil
		for _, p := range stale {
			if term, ok := w.parts[p]; ok {
				w.s.log.Warn("cluster: a write was refused: another server schedules this partition", "partition", p)
				w.lostPartition(p)
				// The coordinator must stop renewing it too: if the
				// refusal was not a take-over after all (a destination
				// holding a newer fence from an earlier database, say),
				// a lease renewed for a partition nobody schedules
				// would leave its tasks waiting for ever.
				w.s.mu.Lock()
				if w.s.givenUp == nil {
					w.s.givenUp = map[string]int64{}
				}
				w.s.givenUp[p] = term
				w.s.mu.Unlock()
				w.s.wakeUp()
			}
		}
		byJob := map[int64][]int64{}
		for _, id := range skipped {
			if t := w.tasks.get(id); t != nil {
				byJob[t.JobID] = append(byJob[t.JobID], id)
			}
		}
		for j, ids := range byJob {
			w.canceled(j, ids)
		}
	}
}

// localBeat reports whether the agent name heartbeats to this server.
func (s *Server) localBeat(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.agents[name]
	return ok
}

// releaseAll gives every held partition back at shutdown, so that other
// servers take over at once instead of after the lease TTL.
func (w *world) releaseAll() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
	defer cancel()
	for _, p := range slices.Sorted(maps.Keys(w.parts)) {
		term := w.parts[p]
		if err := w.s.st.ReleaseLease(ctx, p, w.s.cfg.ServerID, term); err != nil {
			w.s.log.Warn("cluster: releasing a lease at shutdown", "partition", p, "err", err)
		}
	}
}

// checkServerID refuses IDs that cannot be told apart in the audit log.
func checkServerID(id string) error {
	if !wire.ValidName(id) {
		return fmt.Errorf("server: server ID %q (letters, digits, '.', '_', '-', '@')", id)
	}
	return nil
}
