// Package cluster lets several servers schedule from one database. It
// owns the coordinator: the one goroutine of a server that talks to the
// store for the cluster and hands what it learns to the scheduling loop,
// in order.
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
// A round of the coordinator is: leases (beat, renew, acquire a fair
// share, release idle surplus) when a third of their TTL has passed, then
// claims of new work (store.ClaimTasks), cancellations made through other
// servers, the endpoints table (heartbeats recorded by any server) and the
// other servers' endpoint loads. Because gains are handed to the loop
// before the claims that follow them and losses before any later claim,
// the loop never holds a task of a partition it does not hold. Every
// scheduler write is fenced (store.UpdateTasksFenced): a server that lost
// a lease (stalled, partitioned from the database) cannot overwrite what
// the new owner decided; it stops that partition's runs when it notices.
//
// A single server (SQLite) runs the same code and simply holds every
// partition.
package cluster

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/store"
)

// Defaults for the cluster settings.
const (
	DefaultLeaseTTL  = 10 * time.Second
	DefaultPollEvery = time.Second
	// WorkChannel is the NOTIFY channel of new work and cancellations.
	WorkChannel = "sluice_work"
	// claimBatch bounds the tasks one claim takes.
	claimBatch = 5000
)

// Store is what the coordinator asks of the store.
type Store interface {
	ServerBeat(ctx context.Context, id, url string, ttl time.Duration) ([]store.ServerInfo, error)
	AcquireLease(ctx context.Context, partition, owner string, ttl time.Duration) (store.Lease, bool, error)
	RenewLeases(ctx context.Context, owner string, terms map[string]int64, ttl time.Duration) (map[string]int64, error)
	ReleaseLease(ctx context.Context, partition, owner string, term int64) error
	Leases(ctx context.Context) ([]store.Lease, error)
	Endpoints(ctx context.Context) ([]store.Endpoint, error)
	ClaimTasks(ctx context.Context, owner string, limit int) ([]store.Task, error)
	CanceledJobs(ctx context.Context, since time.Time) ([]int64, error)
	PutEndpointLoads(ctx context.Context, server string, loads []store.EndpointLoad) error
	EndpointLoads(ctx context.Context, except string, maxAge time.Duration) ([]store.EndpointLoad, error)
	Listen(ctx context.Context, channel string) <-chan struct{}
}

// Load is what one server runs at an endpoint.
type Load struct {
	CC         int
	Throughput float64
}

// Loop is the scheduling loop as the coordinator sees it. Each method
// hands the news to the loop in the order called; each returns false if
// ctx ended first (the news did not arrive).
type Loop interface {
	// Gained: this server now schedules partition p under term.
	Gained(ctx context.Context, p string, term int64) bool
	// Lost: another server schedules p now; its runs stop here.
	Lost(ctx context.Context, p string) bool
	// Release gives p up if nothing of it runs, and reports whether it
	// did (false too if ctx ended).
	Release(ctx context.Context, p string) bool
	// Claimed hands over tasks claimed in the store.
	Claimed(ctx context.Context, ts []store.Task) bool
	// Canceled: these jobs were canceled through some server.
	Canceled(ctx context.Context, jobs []int64) bool
	// Endpoints hands over the endpoints table.
	Endpoints(ctx context.Context, eps []store.Endpoint) bool
	// ExternalLoads hands over the other servers' loads per endpoint.
	ExternalLoads(ctx context.Context, ext map[string]Load) bool
	// GivenUp takes the partitions (-> term) the loop dropped after a
	// refused write, for the coordinator to release.
	GivenUp() map[string]int64
	// OwnLoads is this server's load per endpoint, to publish.
	OwnLoads() map[string]Load
}

// Config configures a Coordinator.
type Config struct {
	ServerID, URL string
	LeaseTTL      time.Duration // default DefaultLeaseTTL
	PollEvery     time.Duration // default DefaultPollEvery
	Clock         clock.Clock   // default clock.System
	Log           *slog.Logger  // default slog.Default
}

// Coordinator is one server's cluster goroutine's state (owned by it
// alone).
type Coordinator struct {
	cfg  Config
	st   Store
	loop Loop
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

// New returns the coordinator of the server cfg.ServerID.
func New(cfg Config, st Store, loop Loop) *Coordinator {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Coordinator{cfg: cfg, st: st, loop: loop,
		held: map[string]int64{}, renewed: map[string]time.Time{}, others: map[string]bool{}, known: map[string]bool{},
		canceledCur: cfg.Clock.Now().Add(-time.Minute), seenCancel: map[int64]time.Time{}}
}

func (c *Coordinator) now() time.Time { return c.cfg.Clock.Now() }

// Run runs the coordinator until ctx ends: a full round at once, then a
// round (Step) at every poll, every notification of work in the store,
// and every hint on wake (new work submitted here, an agent registered).
func (c *Coordinator) Run(ctx context.Context, wake <-chan struct{}) {
	notes := c.st.Listen(ctx, WorkChannel)
	poll := time.NewTicker(c.cfg.PollEvery) // real time: a simulation calls Step itself
	defer poll.Stop()
	c.Start(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-notes:
		case <-wake:
		}
		c.Step(ctx)
	}
}

// Start is the first round: leases, then the news.
func (c *Coordinator) Start(ctx context.Context) {
	c.leaseRound(ctx)
	c.sync(ctx)
}

// Step is one round of the coordinator: the leases when a third of
// their TTL has passed, then the claims and cancellations.
func (c *Coordinator) Step(ctx context.Context) {
	if c.now().Sub(c.lastLeases) >= c.cfg.LeaseTTL/3 {
		c.leaseRound(ctx)
	}
	c.sync(ctx)
}

// Held returns the partitions this server holds (-> term), a copy.
func (c *Coordinator) Held() map[string]int64 {
	out := make(map[string]int64, len(c.held))
	for p, t := range c.held {
		out[p] = t
	}
	return out
}

// leaseRound renews what this server holds, takes its fair share of the
// partitions that are free or expired, and gives idle surplus back.
func (c *Coordinator) leaseRound(ctx context.Context) {
	id, log := c.cfg.ServerID, c.cfg.Log
	now := c.now()
	c.lastLeases = now
	ttl := c.cfg.LeaseTTL
	live, err := c.st.ServerBeat(ctx, id, c.cfg.URL, ttl)
	if err != nil {
		log.Warn("cluster: server heartbeat", "err", err)
	}
	// Partitions the loop gave up after a refused write: release them
	// (a no-op if another server's term replaced ours), so that they are
	// taken again, here or elsewhere, under a newer term.
	// Every walk over partitions goes in their names' order: the store
	// calls and the loop's losses then come in the same order every run
	// (the loop's simulation replays a seed only so).
	givenUp := c.loop.GivenUp()
	for _, p := range slices.Sorted(maps.Keys(givenUp)) {
		term := givenUp[p]
		if c.held[p] != term {
			continue
		}
		if err := c.st.ReleaseLease(ctx, p, id, term); err != nil {
			log.Warn("cluster: releasing a lease", "partition", p, "err", err)
		}
		log.Info("cluster: released a partition after a refused write", "partition", p, "term", term)
		delete(c.held, p)
		delete(c.renewed, p)
	}
	// Renew. A lease the store no longer confirms is lost at once if
	// another term replaced it, and by our own clock a margin before its
	// expiry if the store cannot be reached (others may take it then).
	if len(c.held) > 0 {
		kept, err := c.st.RenewLeases(ctx, id, c.held, ttl)
		if err != nil {
			log.Warn("cluster: renewing leases", "err", err)
			for _, p := range slices.Sorted(maps.Keys(c.held)) {
				if now.Sub(c.renewed[p]) > ttl-ttl/5 {
					c.lose(ctx, p, "renewal failed for too long")
				}
			}
		} else {
			for _, p := range slices.Sorted(maps.Keys(c.held)) {
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
	eps, err := c.st.Endpoints(ctx)
	if err != nil {
		log.Warn("cluster: endpoints", "err", err)
		return
	}
	leases, err := c.st.Leases(ctx)
	if err != nil {
		log.Warn("cluster: leases", "err", err)
		return
	}
	// What the live servers hold; leases of dead servers expire and are
	// free for the taking.
	alive := map[string]bool{id: true}
	for _, si := range live {
		alive[si.ID] = true
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
		case ok && l.Owner != id && l.Expires.After(c.now()) && alive[l.Owner]:
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
		l, ok, err := c.st.AcquireLease(ctx, p, id, ttl)
		if err != nil {
			log.Warn("cluster: acquiring a lease", "partition", p, "err", err)
			continue
		}
		if !ok {
			c.others[p] = true
			continue
		}
		c.held[p], c.renewed[p] = l.Term, c.now()
		log.Info("cluster: scheduling partition", "partition", p, "term", l.Term)
		c.loop.Gained(ctx, p, l.Term)
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
			if !c.loop.Release(ctx, p) {
				continue
			}
			if err := c.st.ReleaseLease(ctx, p, id, c.held[p]); err != nil {
				log.Warn("cluster: releasing a lease", "partition", p, "err", err)
			}
			log.Info("cluster: handed partition over", "partition", p)
			delete(c.held, p)
			delete(c.renewed, p)
			extra--
		}
	}
}

func (c *Coordinator) lose(ctx context.Context, p, why string) {
	c.cfg.Log.Warn("cluster: lost partition", "partition", p, "why", why)
	delete(c.held, p)
	delete(c.renewed, p)
	c.loop.Lost(ctx, p)
}

// sync brings the loop the store's news: claimed tasks, cancellations,
// endpoints and other servers' loads; and publishes this server's loads.
func (c *Coordinator) sync(ctx context.Context) {
	id, log := c.cfg.ServerID, c.cfg.Log
	if len(c.held) > 0 {
		for ctx.Err() == nil {
			ts, err := c.st.ClaimTasks(ctx, id, claimBatch)
			if err != nil {
				log.Warn("cluster: claiming tasks", "err", err)
				break
			}
			if len(ts) > 0 {
				c.loop.Claimed(ctx, ts)
			}
			if len(ts) < claimBatch {
				break
			}
		}
	}
	// Cancellations through any server; the window overlaps the last
	// one (clocks and commit order), and seen jobs are skipped.
	now := c.now()
	if ids, err := c.st.CanceledJobs(ctx, c.canceledCur.Add(-30*time.Second)); err != nil {
		log.Warn("cluster: cancellations", "err", err)
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
			c.loop.Canceled(ctx, fresh)
		}
	}
	if eps, err := c.st.Endpoints(ctx); err != nil {
		log.Warn("cluster: endpoints", "err", err)
	} else {
		c.loop.Endpoints(ctx, eps)
		// An endpoint registered since the last lease round: share it
		// out now rather than at the next round.
		for _, e := range eps {
			if !c.known[e.Name] && c.now().Sub(c.lastLeases) > 100*time.Millisecond {
				c.leaseRound(ctx)
				break
			}
		}
	}
	ownLoads := c.loop.OwnLoads()
	own := make([]store.EndpointLoad, 0, len(ownLoads))
	for name, l := range ownLoads {
		if l.CC > 0 || l.Throughput > 0 {
			own = append(own, store.EndpointLoad{Endpoint: name, CC: l.CC, Throughput: l.Throughput})
		}
	}
	slices.SortFunc(own, func(a, b store.EndpointLoad) int { return cmp.Compare(a.Endpoint, b.Endpoint) })
	if err := c.st.PutEndpointLoads(ctx, id, own); err != nil {
		log.Warn("cluster: publishing loads", "err", err)
	}
	if ls, err := c.st.EndpointLoads(ctx, id, 3*c.cfg.PollEvery+time.Second); err != nil {
		log.Warn("cluster: other servers' loads", "err", err)
	} else {
		ext := map[string]Load{}
		for _, l := range ls {
			e := ext[l.Endpoint]
			e.CC += l.CC
			e.Throughput += l.Throughput
			ext[l.Endpoint] = e
		}
		c.loop.ExternalLoads(ctx, ext)
	}
}
