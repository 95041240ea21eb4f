package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Several servers on one database (docs/SCALING.md).
//
// Scheduling is partitioned by source endpoint: each endpoint is a
// partition with a lease in the store (store.Lease), and the server that
// holds a partition's lease schedules every task whose source is that
// endpoint. A transfer's source and destination are therefore scheduled
// by one owner as far as the source goes; the destination's load from
// transfers other servers run there reaches the owner through the store
// (each server publishes its per-endpoint concurrency and throughput every
// poll, and every scheduler adds the others' figures to its snapshot as
// known load). The destination view is thus up to one poll period old;
// see docs/SCALING.md for what that costs.
//
// One goroutine, the coordinator, talks to the store for the cluster and
// hands results to the loop in order (through the inbox, FIFO): lease
// rounds (beat, renew, acquire a fair share, release idle surplus), then
// claims of new work (store.ClaimTasks), cancellations made through other
// servers, the endpoints table (heartbeats recorded by any server) and
// the other servers' endpoint loads. Because gains are posted before the
// claims that follow them and losses before any later claim, the loop
// never holds a task of a partition it does not hold. Every scheduler
// write is fenced (store.UpdateTasksFenced): a server that lost a lease
// (stalled, partitioned from the database) cannot overwrite what the new
// owner decided; it stops that partition's runs when it notices.
//
// A single server (SQLite) runs the same code and simply holds every
// partition.

// Defaults for the cluster settings.
const (
	DefaultLeaseTTL  = 10 * time.Second
	DefaultPollEvery = time.Second
	// workChannel is the NOTIFY channel of new work and cancellations.
	workChannel = "sluice_work"
	claimBatch  = 5000
)

// coordinator is the cluster goroutine's state (owned by it alone).
type coordinator struct {
	s *Server
	// held is what this server holds: partition -> term; renewed is
	// when each was last confirmed, for giving up a lease the store can
	// no longer confirm before another server may take it.
	held    map[string]int64
	renewed map[string]time.Time
	// others are the partitions live servers other than this one hold,
	// and known every partition seen, at the last lease round.
	others      map[string]bool
	known       map[string]bool
	lastLeases  time.Time
	canceledCur time.Time
	seenCancel  map[int64]time.Time
}

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
	c := s.newCoordinator()
	notes := s.st.Listen(ctx, workChannel)
	poll := time.NewTicker(s.cfg.PollEvery)
	defer poll.Stop()
	c.leaseRound(ctx)
	c.sync(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-notes:
		case <-s.wake:
		}
		c.step(ctx)
	}
}

func (s *Server) newCoordinator() *coordinator {
	return &coordinator{s: s, held: map[string]int64{}, renewed: map[string]time.Time{}, others: map[string]bool{}, known: map[string]bool{},
		canceledCur: s.now().Add(-time.Minute), seenCancel: map[int64]time.Time{}}
}

// step is one round of the coordinator: the leases when a third of
// their TTL has passed, then the claims and cancellations.
func (c *coordinator) step(ctx context.Context) {
	if c.now().Sub(c.lastLeases) >= c.s.cfg.LeaseTTL/3 {
		c.leaseRound(ctx)
	}
	c.sync(ctx)
}

func (c *coordinator) post(ctx context.Context, f func(*world)) bool {
	return c.s.do(ctx, f)
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

// leaseRound renews what this server holds, takes its fair share of the
// partitions that are free or expired, and gives idle surplus back.
func (c *coordinator) leaseRound(ctx context.Context) {
	s := c.s
	now := c.now()
	c.lastLeases = now
	ttl := s.cfg.LeaseTTL
	live, err := s.st.ServerBeat(ctx, s.cfg.ServerID, s.cfg.URL, ttl)
	if err != nil {
		s.log.Warn("cluster: server heartbeat", "err", err)
	}
	// Partitions the loop gave up after a refused write: release them
	// (a no-op if another server's term replaced ours), so that they are
	// taken again, here or elsewhere, under a newer term.
	s.mu.Lock()
	givenUp := s.givenUp
	s.givenUp = nil
	s.mu.Unlock()
	for p, term := range givenUp {
		if c.held[p] != term {
			continue
		}
		if err := s.st.ReleaseLease(ctx, p, s.cfg.ServerID, term); err != nil {
			s.log.Warn("cluster: releasing a lease", "partition", p, "err", err)
		}
		s.log.Info("cluster: released a partition after a refused write", "partition", p, "term", term)
		delete(c.held, p)
		delete(c.renewed, p)
	}
	// Renew. A lease the store no longer confirms is lost at once if
	// another term replaced it, and by our own clock a margin before its
	// expiry if the store cannot be reached (others may take it then).
	if len(c.held) > 0 {
		kept, err := s.st.RenewLeases(ctx, s.cfg.ServerID, c.held, ttl)
		if err != nil {
			s.log.Warn("cluster: renewing leases", "err", err)
			for p := range c.held {
				if now.Sub(c.renewed[p]) > ttl-ttl/5 {
					c.lose(ctx, p, "renewal failed for too long")
				}
			}
		} else {
			for p := range c.held {
				if _, ok := kept[p]; ok {
					c.renewed[p] = now
				} else {
					c.lose(ctx, p, "taken over by another server")
				}
			}
		}
	}
	if err != nil || ctx.Err() != nil {
		return
	}
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		s.log.Warn("cluster: endpoints", "err", err)
		return
	}
	leases, err := s.st.Leases(ctx)
	if err != nil {
		s.log.Warn("cluster: leases", "err", err)
		return
	}
	// What the live servers hold; leases of dead servers expire and are
	// free for the taking.
	alive := map[string]bool{}
	for _, si := range live {
		alive[si.ID] = true
	}
	if !alive[s.cfg.ServerID] {
		alive[s.cfg.ServerID] = true
	}
	byName := map[string]store.Lease{}
	for _, l := range leases {
		byName[l.Partition] = l
	}
	clear(c.others)
	clear(c.known)
	var free []string
	for _, e := range eps {
		c.known[e.Name] = true
		l, ok := byName[e.Name]
		switch {
		case c.held[e.Name] != 0:
		case ok && l.Owner != s.cfg.ServerID && l.Expires.After(c.now()) && alive[l.Owner]:
			c.others[e.Name] = true
		default:
			free = append(free, e.Name)
		}
	}
	target := int(math.Ceil(float64(len(eps)) / float64(len(alive))))
	for _, p := range free {
		if len(c.held) >= target {
			break
		}
		l, ok, err := s.st.AcquireLease(ctx, p, s.cfg.ServerID, ttl)
		if err != nil {
			s.log.Warn("cluster: acquiring a lease", "partition", p, "err", err)
			continue
		}
		if !ok {
			c.others[p] = true
			continue
		}
		c.held[p], c.renewed[p] = l.Term, c.now()
		s.log.Info("cluster: scheduling partition", "partition", p, "term", l.Term)
		term := l.Term
		c.post(ctx, func(w *world) { w.parts[p] = term })
	}
	// More than a fair share (servers joined): hand over partitions with
	// nothing running, one round at a time, so work moves without
	// interrupting transfers.
	if extra := len(c.held) - target; extra > 0 {
		names := make([]string, 0, len(c.held))
		for p := range c.held {
			names = append(names, p)
		}
		slices.Sort(names)
		for _, p := range names {
			if extra == 0 {
				break
			}
			ok, _ := ask(ctx, s, func(w *world) bool { return w.release(p) })
			if !ok {
				continue
			}
			if err := s.st.ReleaseLease(ctx, p, s.cfg.ServerID, c.held[p]); err != nil {
				s.log.Warn("cluster: releasing a lease", "partition", p, "err", err)
			}
			s.log.Info("cluster: handed partition over", "partition", p)
			delete(c.held, p)
			delete(c.renewed, p)
			extra--
		}
	}
}

func (c *coordinator) lose(ctx context.Context, p, why string) {
	c.s.log.Warn("cluster: lost partition", "partition", p, "why", why)
	delete(c.held, p)
	delete(c.renewed, p)
	c.post(ctx, func(w *world) { w.lostPartition(p) })
}

// sync brings the loop the store's news: claimed tasks, cancellations,
// endpoints and other servers' loads; and publishes this server's loads.
func (c *coordinator) sync(ctx context.Context) {
	s := c.s
	if len(c.held) > 0 {
		for ctx.Err() == nil {
			ts, err := s.st.ClaimTasks(ctx, s.cfg.ServerID, claimBatch)
			if err != nil {
				s.log.Warn("cluster: claiming tasks", "err", err)
				break
			}
			if len(ts) > 0 {
				c.post(ctx, func(w *world) { w.claimed(ts) })
			}
			if len(ts) < claimBatch {
				break
			}
		}
	}
	// Cancellations through any server; the window overlaps the last
	// one (clocks and commit order), and seen jobs are skipped.
	now := c.now()
	if ids, err := s.st.CanceledJobs(ctx, c.canceledCur.Add(-30*time.Second)); err != nil {
		s.log.Warn("cluster: cancellations", "err", err)
	} else {
		var fresh []int64
		for _, id := range ids {
			if _, ok := c.seenCancel[id]; !ok {
				fresh = append(fresh, id)
			}
			c.seenCancel[id] = now
		}
		for id, at := range c.seenCancel {
			if now.Sub(at) > 2*time.Minute {
				delete(c.seenCancel, id)
			}
		}
		c.canceledCur = now
		if len(fresh) > 0 {
			c.post(ctx, func(w *world) {
				for _, id := range fresh {
					w.jobCanceled(id)
				}
			})
		}
	}
	if eps, err := s.st.Endpoints(ctx); err != nil {
		s.log.Warn("cluster: endpoints", "err", err)
	} else {
		c.post(ctx, func(w *world) { w.storeEndpoints(eps) })
		// An endpoint registered since the last lease round: share it
		// out now rather than at the next round.
		for _, e := range eps {
			if !c.known[e.Name] && c.now().Sub(c.lastLeases) > 100*time.Millisecond {
				c.leaseRound(ctx)
				break
			}
		}
	}
	s.mu.Lock()
	own := make([]store.EndpointLoad, 0, len(s.ownLoad))
	for name, l := range s.ownLoad {
		if l.cc > 0 || l.thr > 0 {
			own = append(own, store.EndpointLoad{Endpoint: name, CC: l.cc, Throughput: l.thr})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(own, func(a, b store.EndpointLoad) int {
		switch {
		case a.Endpoint < b.Endpoint:
			return -1
		case a.Endpoint > b.Endpoint:
			return 1
		}
		return 0
	})
	if err := s.st.PutEndpointLoads(ctx, s.cfg.ServerID, own); err != nil {
		s.log.Warn("cluster: publishing loads", "err", err)
	}
	if ls, err := s.st.EndpointLoads(ctx, s.cfg.ServerID, 3*s.cfg.PollEvery+time.Second); err != nil {
		s.log.Warn("cluster: other servers' loads", "err", err)
	} else {
		ext := map[string]extLoad{}
		for _, l := range ls {
			e := ext[l.Endpoint]
			e.cc += l.CC
			e.thr += l.Throughput
			ext[l.Endpoint] = e
		}
		c.post(ctx, func(w *world) { w.ext = ext })
	}
}

// extLoad is what a server runs at an endpoint.
type extLoad struct {
	cc  int
	thr float64
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
	for p, term := range w.parts {
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
