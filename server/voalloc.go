package server

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/store"
)

// The scheduling loop is a client of the Policy Service like any other:
// for each VO with active jobs on an endpoint pair it holds one
// allocation, and the concurrency of that VO's running transfers on the
// pair never exceeds it. The scheduler (pure, shared with the simulator)
// decides what to start; the loop asks the Policy Service for more (an
// update) when a start would exceed the allocation, then trims the start
// to what is left, or holds it back when nothing is.

// The loop's operations as a Policy Service client (for its VOs and its
// adaptive jobs alike): each applies the change and writes it to the
// store; a failed write is logged, since the lease still holds in memory
// and the next write (or its expiry) settles the store.

// Each first collects the allocations (anyone's) whose leases ran out,
// so that the store forgets them with this write: the operation would
// expire them in memory without saying which, and the store would keep
// their rows for good.

func (w *world) polRequest(now time.Time, r policy.Request) (policy.Allocation, error) {
	svc, done := w.s.policyService()
	del := w.s.pol.Expired(svc, now)
	pa, err := svc.Request(now, r)
	done()
	var put []policy.Allocation
	if err == nil {
		put = append(put, pa)
	}
	w.polStore(put, del)
	return pa, err
}

func (w *world) polUpdate(now time.Time, id string, owner policy.Caller, want int) (policy.Allocation, error) {
	svc, done := w.s.policyService()
	del := w.s.pol.Expired(svc, now)
	pa, err := svc.Update(now, id, owner, want)
	done()
	var put []policy.Allocation
	if err == nil {
		put = append(put, pa)
	}
	w.polStore(put, del)
	return pa, err
}

func (w *world) polRelease(now time.Time, id string, owner policy.Caller) {
	svc, done := w.s.policyService()
	del := w.s.pol.Expired(svc, now)
	if svc.Release(now, id, owner) == nil {
		del = append(del, store.AllocationGone{ID: id})
	}
	done()
	w.polStore(nil, del)
}

func (w *world) polStore(put []policy.Allocation, del []store.AllocationGone) {
	if len(put) == 0 && len(del) == 0 {
		return
	}
	if err := w.s.pol.Persist(w.ctx, put, del); err != nil {
		w.s.log.Warn("storing allocations", "err", err)
	}
}

// leaseOf is the lease of allocations on a pair.
func (w *world) leaseOf(src, dst string) time.Duration {
	svc, done := w.s.policyService()
	params, err := svc.PairParams(policy.Pair{Src: src, Dst: dst})
	done()
	if err != nil {
		params = policy.DefaultParams()
	}
	return params.Lease
}

// voKey names one VO's traffic on one pair.
type voKey struct{ src, dst, vo string }

// byVOKey and byAdaptKey order the loop's walks over its allocations:
// each walk calls the Policy Service, whose grants depend on the order of
// the calls, and a map's order changes from run to run (the loop's
// simulation then did not replay a seed).
func byVOKey(a, b voKey) int {
	return cmp.Or(strings.Compare(a.src, b.src), strings.Compare(a.dst, b.dst), strings.Compare(a.vo, b.vo))
}

func byAdaptKey(a, b adaptKey) int {
	return cmp.Or(cmp.Compare(a.job, b.job), strings.Compare(a.src, b.src), strings.Compare(a.dst, b.dst))
}

// voAlloc is the loop's allocation for a voKey.
type voAlloc struct {
	id      string
	streams int
	// max is the most streams the allocation can hold (the pair's limit
	// per client when last heard; 0: not known).
	max     int
	renewed time.Time
}

// serviceClient is the policy identity of the loop acting for a VO.
func serviceClient(vo string) policy.Caller {
	return policy.Caller{Client: "sluice-scheduler:" + vo, VO: vo}
}

func keyOf(t *task) voKey { return voKey{t.SrcEndpoint, t.DstEndpoint, t.job.VO} }

// usage sums, in one pass over the tasks, the concurrency of running
// tasks per voKey and the running files of adaptive jobs per adaptKey.
func (w *world) usage() (map[voKey]int, map[adaptKey]int) {
	var running []*task
	for t := range w.tasks.all() {
		if t.State == store.StateRunning {
			running = append(running, t)
		}
	}
	return usageOf(running)
}

// usageOf is usage over the running tasks given (the cycle has them from
// its snapshot: no second walk over a million queued tasks).
func usageOf(running []*task) (map[voKey]int, map[adaptKey]int) {
	used, inFlight := map[voKey]int{}, map[adaptKey]int{}
	for _, t := range running {
		if t.State != store.StateRunning {
			continue
		}
		used[keyOf(t)] += t.conns()
		if t.job.Adaptive != "" {
			inFlight[adaptKeyOf(t)]++
		}
	}
	return used, inFlight
}

// admitStreams trims a start (or a concurrency increase) of cc streams
// for t to what its VO's allocation on the pair leaves, used being what
// already runs; 0 means t must wait. grow asks the Policy Service for more
// first where the allocation is short (a cycle asks once per VO and pair:
// its answer does not change within the cycle, and each asking writes
// the allocations).
func (w *world) admitStreams(t *task, cc int, used map[voKey]int, now time.Time, grow bool) int {
	k := keyOf(t)
	a := w.voAlloc(k, now)
	if a == nil {
		return cc // no Policy Service answer: do not block transfers on it
	}
	if grow && used[k]+cc > a.streams {
		// Ask for more now: the policy grows the allocation by its
		// update step (s_u under greedy) if the pair has streams left.
		w.updateVOAlloc(k, a, 0, now)
		if a = w.vallocs[k]; a == nil {
			return cc
		}
	}
	return max(0, min(cc, a.streams-used[k]))
}

// voAlloc returns k's allocation, requesting one if the loop holds none.
func (w *world) voAlloc(k voKey, now time.Time) *voAlloc {
	if a := w.vallocs[k]; a != nil {
		return a
	}
	cl := serviceClient(k.vo)
	pa, err := w.polRequest(now, policy.Request{Pair: policy.Pair{Src: k.src, Dst: k.dst}, Client: cl.Client, VO: cl.VO})
	if err != nil {
		w.s.log.Warn("policy service refused the scheduler an allocation; not limiting", "pair", k.src+"->"+k.dst, "vo", k.vo, "err", err)
		return nil
	}
	a := &voAlloc{id: pa.ID, streams: pa.Streams, max: pa.Max, renewed: now}
	w.vallocs[k] = a
	return a
}

// updateVOAlloc renews k's allocation, asking for want streams (0: as
// many as the policy gives); a lost allocation (expired) is forgotten and
// requested again at the next start.
func (w *world) updateVOAlloc(k voKey, a *voAlloc, want int, now time.Time) {
	pa, err := w.polUpdate(now, a.id, serviceClient(k.vo), want)
	if err != nil {
		w.s.log.Warn("policy update failed; requesting again", "pair", k.src+"->"+k.dst, "vo", k.vo, "err", err)
		if !errors.Is(err, policy.ErrNotFound) {
			// Still granted (the policy failed, say): give it
			// back, or each failed update would strand one more
			// allocation until its lease ran out.
			w.polRelease(now, a.id, serviceClient(k.vo))
		}
		delete(w.vallocs, k)
		// At once, not at the next start: the VO's running streams
		// must stay counted (an administrator may have deleted the
		// allocation to take them back).
		w.voAlloc(k, now)
		return
	}
	if pa.Shrunk > 0 {
		w.s.log.Info("policy service shrank the scheduler's allocation", "pair", k.src+"->"+k.dst, "vo", k.vo, "streams", pa.Streams, "reason", pa.Reason)
	}
	a.streams, a.max, a.renewed = pa.Streams, pa.Max, now
}

// tendVOAllocs renews the allocations of pairs and VOs with active tasks
// (a third of the lease, as leases want) and releases the others.
func (w *world) tendVOAllocs(now time.Time) {
	if len(w.vallocs) == 0 {
		return
	}
	// Active: a VO and pair with files whose starts the allocation
	// bounds. An adaptive job's files have their own allocation: they
	// must not keep the scheduler's alive (it would hold the pair's
	// streams for files that never use them, and the adaptive clients
	// could wait for those streams for good).
	active := map[voKey]bool{}
	for t := range w.tasks.all() {
		if (t.State == store.StateQueued || t.State == store.StateRunning) && (t.job.Adaptive == "" || w.adapts[adaptKeyOf(t)] == nil) {
			active[keyOf(t)] = true
		}
	}
	used, _ := w.usage()
	for _, k := range slices.SortedFunc(maps.Keys(w.vallocs), byVOKey) {
		a := w.vallocs[k]
		if !active[k] {
			w.polRelease(now, a.id, serviceClient(k.vo))
			delete(w.vallocs, k)
			continue
		}
		svc, done := w.s.policyService()
		del := w.s.pol.Expired(svc, now) // as polUpdate: the store forgets them too
		pa, err := svc.Get(now, a.id)
		done()
		w.polStore(nil, del)
		switch {
		case err == nil && pa.Draining > 0:
			// The service took streams back since the last update (an
			// administrator lowered a limit): hear it now, not at the
			// renewal, and trim the runs below.
			w.updateVOAlloc(k, a, pa.Streams, now)
		case err != nil || now.Sub(a.renewed) >= w.leaseOf(k.src, k.dst)/3:
			// A lost allocation (expired; deleted by an administrator)
			// fails the update and is requested again at once.
			// Renew without growing: keep what is in use or held.
			w.updateVOAlloc(k, a, max(a.streams, used[k], 1), now)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.vallocs), byVOKey) {
		if a := w.vallocs[k]; used[k] > a.streams {
			w.trimVO(k, a.streams)
		}
	}
}

// trimVO brings the VO's running transfers on k's pair down to limit
// streams when the Policy Service shrank its allocation (a lowered limit,
// another VO's share): the largest runs lose streams first, none goes
// below one, and if one stream each is still too many the newest runs
// pause at a checkpoint and queue again (they start when the allocation
// has room). Adaptive jobs hold their own allocations and adapt to them;
// their streams count against the limit but are not trimmed here.
func (w *world) trimVO(k voKey, limit int) {
	var runs []*task
	for t := range w.tasks.all() {
		if t.State != store.StateRunning || keyOf(t) != k {
			continue
		}
		if t.job.Adaptive != "" || t.xfer == nil || t.stop != "" {
			limit -= t.conns() // not ours to trim (yet): counted as it is
			continue
		}
		runs = append(runs, t)
	}
	if len(runs) == 0 {
		return
	}
	// Oldest first: the newest lose their run first if it comes to that.
	slices.SortFunc(runs, func(a, b *task) int { return cmp.Or(a.runStart.Compare(b.runStart), cmp.Compare(a.ID, b.ID)) })
	keep := max(0, min(len(runs), limit))
	for _, t := range runs[keep:] {
		w.s.log.Info("pausing a transfer: its VO's allocation on the pair shrank", "task", t.ID, "pair", k.src+"->"+k.dst, "vo", k.vo, "streams", limit)
		w.pause(t)
	}
	runs = runs[:keep]
	ccs := make([]int, len(runs))
	for i, t := range runs {
		ccs[i] = t.CC
	}
	for i, cc := range policy.Level(ccs, max(limit, len(runs))) {
		if t := runs[i]; cc < t.CC {
			if err := t.xfer.SetCC(cc); err == nil {
				w.s.log.Info("lowering a transfer's streams: its VO's allocation on the pair shrank", "task", t.ID, "pair", k.src+"->"+k.dst, "vo", k.vo, "from", t.CC, "to", cc)
				t.CC = cc
				w.pw.tasks = append(w.pw.tasks, t) // the files list shows it
			}
		}
	}
}

// adoptVOAllocs takes over the allocations an earlier run of the loop
// held (they are in the store, restored with the Policy Service), so a
// restarted server neither strands their streams until the leases expire
// nor holds two allocations for one VO and pair.
func (w *world) adoptVOAllocs(now time.Time) {
	svc, done := w.s.policyService()
	defer done()
	for _, a := range svc.List(now, policy.Filter{}) {
		if vo, ok := strings.CutPrefix(a.Client, "sluice-scheduler:"); ok && vo == a.VO {
			w.vallocs[voKey{a.Pair.Src, a.Pair.Dst, vo}] = &voAlloc{id: a.ID, streams: a.Streams, max: a.Max, renewed: now}
		}
	}
}

// releaseVOAllocs gives every allocation the loop holds (its VOs' and
// its adaptive jobs') back at shutdown, so that other
// clients need not wait for the leases to expire.
func (w *world) releaseVOAllocs() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 5*time.Second)
	defer cancel()
	var ids []store.AllocationGone
	now := w.now()
	svc, done := w.s.policyService()
	for _, k := range slices.SortedFunc(maps.Keys(w.vallocs), byVOKey) {
		if a := w.vallocs[k]; svc.Release(now, a.id, serviceClient(k.vo)) == nil {
			ids = append(ids, store.AllocationGone{ID: a.id})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.adapts), byAdaptKey) {
		if st := w.adapts[k]; svc.Release(now, st.allocID, st.owner) == nil {
			ids = append(ids, store.AllocationGone{ID: st.allocID})
		}
	}
	done()
	if len(ids) > 0 {
		_ = w.s.pol.Persist(ctx, nil, ids)
	}
	w.vallocs = map[voKey]*voAlloc{}
	w.adapts = map[adaptKey]*adaptState{}
}
