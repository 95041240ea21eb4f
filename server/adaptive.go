package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Adaptive jobs (Chervenak et al., "Adaptation and Policy-Based Resource
// Allocation for Efficient Bulk Data Transfers in High Performance Computing
// Environments", Fig. 3): a job that asks for `adaptive`
// is an Adaptive Transfer Client of the Policy Service on each endpoint
// pair it uses. The loop requests an allocation for it, keeps
// min(c_i, streams/p) of its files in flight with p streams each, and
// every d completed files updates the allocation and moves the number of
// files in flight by Δ when the rate changed by more than T. The
// scheduler still chooses which waiting files start and when; an adaptive
// job's files start only while the job is under its concurrency.

// AdaptiveSpec is wire.AdaptiveSpec: the API documents live in package wire.
type AdaptiveSpec = wire.AdaptiveSpec

// DefaultAdaptive: start with 4 files of 4 streams (a pair's initial
// allocation of 16 under the default greedy policy), adapt every 4 files
// by 2 when the rate moved more than 10%, up to 8 files (32 streams, the
// default per-allocation maximum).
var DefaultAdaptive = AdaptiveSpec{Ci: 4, Cmax: 8, Delta: 2, D: 4, P: 4, T: 0.1}

// adaptiveDefaults returns a with its zero fields set from DefaultAdaptive.
func adaptiveDefaults(a AdaptiveSpec) AdaptiveSpec {
	d := DefaultAdaptive
	if a.Ci == 0 {
		a.Ci = min(d.Ci, max(a.Cmax, 1))
		if a.Cmax == 0 {
			a.Ci = d.Ci
		}
	}
	if a.Cmax == 0 {
		a.Cmax = max(d.Cmax, a.Ci)
	}
	if a.Delta == 0 {
		a.Delta = d.Delta
	}
	if a.D == 0 {
		a.D = d.D
	}
	if a.P == 0 {
		a.P = d.P
	}
	if a.T == 0 {
		a.T = d.T
	}
	return a
}

// adaptiveParams is a as the Policy Service's adaptive client takes it.
func adaptiveParams(a AdaptiveSpec) policy.AdaptiveParams {
	return policy.AdaptiveParams{Ci: a.Ci, Cmax: a.Cmax, Delta: a.Delta, D: a.D, P: a.P, T: a.T, Relative: true}
}

// adaptiveJSON validates a job's adaptive spec and returns what the
// store keeps ("" for none).
func adaptiveJSON(a *AdaptiveSpec) (string, error) {
	if a == nil {
		return "", nil
	}
	full := adaptiveDefaults(*a)
	if err := adaptiveParams(full).Validate(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err) // it says "adaptive: ..."
	}
	b, err := json.Marshal(full)
	return string(b), err
}

// adaptiveFits refuses an adaptive job whose p (streams per file) is
// above a pair's per-client limit: no allocation on that pair could carry
// one file, and its files would wait for ever, holding what was granted.
func (s *Server) adaptiveFits(p int, tasks []store.Task) error {
	svc, done := s.policyService()
	defer done()
	seen := map[policy.Pair]bool{}
	for _, t := range tasks {
		pair := policy.Pair{Src: t.SrcEndpoint, Dst: t.DstEndpoint}
		if seen[pair] {
			continue
		}
		seen[pair] = true
		if prm, err := svc.PairParams(pair); err == nil && p > prm.ClientMax {
			return fmt.Errorf("%w: adaptive p %d: an allocation on %s holds at most %d streams (the policy's per-client limit), so no file could start: use p <= %d", ErrInvalid, p, pair, prm.ClientMax, prm.ClientMax)
		}
	}
	return nil
}

// adaptKey is one adaptive job's traffic on one pair.
type adaptKey struct {
	job      int64
	src, dst string
}

// adaptState is the loop's adaptive client for an adaptKey.
type adaptState struct {
	cl      *policy.Adaptive
	owner   policy.Caller
	allocID string // "" while it has given its streams back (yielded)
	streams int
	max     int // the allocation's most streams: its pair's per-client limit, as last heard
	// retryAt is when a client that gave back streams it could not use
	// (fewer than p, on a pair with none to add) asks again.
	retryAt time.Time
	renewed time.Time
	since   time.Time // start of the current rate measurement
	bytes   int64     // bytes of files completed since
}

func adaptKeyOf(t *task) adaptKey { return adaptKey{t.JobID, t.SrcEndpoint, t.DstEndpoint} }

func jobClient(id int64) string { return fmt.Sprintf("sluice-job:%d", id) }

// adaptiveOf returns t's adaptive client, creating it (and requesting its
// allocation) on first use; nil if the job is not adaptive or the Policy
// Service refused (the job then runs like any other).
func (w *world) adaptiveOf(t *task, now time.Time) *adaptState {
	if t.job.Adaptive == "" {
		return nil
	}
	k := adaptKeyOf(t)
	if st := w.adapts[k]; st != nil {
		return st
	}
	var spec AdaptiveSpec
	if err := json.Unmarshal([]byte(t.job.Adaptive), &spec); err != nil {
		w.s.log.Warn("adaptive job with unreadable parameters; runs as a plain job", "job", t.JobID, "err", err)
		return nil
	}
	cl, err := policy.NewAdaptive(adaptiveParams(adaptiveDefaults(spec)))
	if err != nil {
		w.s.log.Warn("adaptive job with bad parameters; runs as a plain job", "job", t.JobID, "err", err)
		return nil
	}
	pa, err := w.polRequest(now, policy.Request{Pair: policy.Pair{Src: k.src, Dst: k.dst}, Client: jobClient(k.job), VO: t.job.VO, Want: cl.Want()})
	if err != nil {
		w.s.log.Warn("policy service refused an adaptive job; it runs as a plain job", "job", t.JobID, "err", err)
		return nil
	}
	st := &adaptState{cl: cl, owner: pa.Owner(), allocID: pa.ID, streams: pa.Streams, max: pa.Max, renewed: now, since: now}
	cl.Start(pa.Streams)
	w.adapts[k] = st
	return st
}

// adaptiveDone counts a completed file of an adaptive job and, when d
// files have completed, updates the allocation and adapts (Fig. 3 lines
// 7-11).
func (w *world) adaptiveDone(t *task, now time.Time) {
	st := w.adapts[adaptKeyOf(t)]
	if st == nil {
		return
	}
	st.bytes += t.Size
	st.cl.Completed(1)
	if st.allocID != "" && st.cl.Due() {
		w.adaptNow(adaptKeyOf(t), st, now)
	}
}

func (w *world) adaptNow(k adaptKey, st *adaptState, now time.Time) {
	pa, err := w.polUpdate(now, st.allocID, st.owner, st.cl.Want())
	if err != nil {
		w.adaptiveLost(k, st, now, err)
		return
	}
	rate := 0.0
	if el := now.Sub(st.since).Seconds(); el > 0 {
		rate = float64(st.bytes) / el
	}
	st.streams, st.max, st.renewed, st.since, st.bytes = pa.Streams, pa.Max, now, now, 0
	c := st.cl.Adapt(pa.Streams, rate)
	w.s.log.Debug("adapted", "job", k.job, "pair", k.src+"->"+k.dst, "streams", pa.Streams, "concurrency", c, "rate", rate)
}

// adaptiveRenew renews an adaptive job's allocation between adaptation
// points (files slower than a third of the lease): it asks to keep the
// streams held, and the concurrency only drops if the service took some
// back. It is no adaptation: no rate is measured, since files still in
// flight moved bytes that no completion has counted yet.
func (w *world) adaptiveRenew(k adaptKey, st *adaptState, now time.Time) {
	pa, err := w.polUpdate(now, st.allocID, st.owner, max(st.streams, 1))
	if err != nil {
		w.adaptiveLost(k, st, now, err)
		return
	}
	st.streams, st.max, st.renewed = pa.Streams, pa.Max, now
	st.cl.Renew(pa.Streams)
}

// adaptiveLost forgets an adaptive job's client whose update failed; the
// job's next start requests a new allocation.
func (w *world) adaptiveLost(k adaptKey, st *adaptState, now time.Time, err error) {
	w.s.log.Warn("adaptive job's allocation lost; requesting again", "job", k.job, "err", err)
	if !errors.Is(err, policy.ErrNotFound) {
		// Still granted (the policy failed, say): give it back
		// before the new request, or each failed update would strand
		// one more allocation until its lease ran out.
		w.polRelease(now, st.allocID, st.owner)
	}
	delete(w.adapts, k)
}

// waiting says why an adaptive job at concurrency 0 starts no file: its
// allocation holds fewer than p streams. When the pair's per-client limit
// was lowered below p, no update will help: an administrator must raise
// it (or the job be canceled), and the job says so rather than wait
// without a word.
func (st *adaptState) waiting(k adaptKey) string {
	p := st.cl.Params().P
	if st.allocID == "" {
		return fmt.Sprintf("%sthis adaptive job gave back its %d streams on %s->%s, fewer than its %d per file (p), while the pair has none to add (other clients hold them); it asks again at %s", waitPrefix, st.streams, k.src, k.dst, p, st.retryAt.UTC().Format(time.TimeOnly))
	}
	if st.max < p {
		return fmt.Sprintf("%sthe Policy Service's per-client limit on %s->%s is %d streams, below this adaptive job's %d streams per file (p): no file starts until an administrator raises it", waitPrefix, k.src, k.dst, st.max, p)
	}
	return fmt.Sprintf("%sthe Policy Service gives this adaptive job %d streams on %s->%s now, fewer than its %d per file (p)", waitPrefix, st.streams, k.src, k.dst, p)
}

// tendAdaptive renews adaptive jobs' allocations at a third of the lease,
// adapts a client stuck at concurrency 0 (waiting for streams), and
// releases the allocations of jobs with no active files on the pair.
func (w *world) tendAdaptive(now time.Time) {
	if len(w.adapts) == 0 {
		return
	}
	active := map[adaptKey]bool{}
	inFlight := map[adaptKey]bool{}
	for t := range w.tasks.all() {
		if t.job.Adaptive != "" && (t.State == store.StateQueued || t.State == store.StateRunning) {
			active[adaptKeyOf(t)] = true
			inFlight[adaptKeyOf(t)] = inFlight[adaptKeyOf(t)] || t.State == store.StateRunning
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.adapts), byAdaptKey) {
		st := w.adapts[k]
		if !active[k] {
			if st.allocID != "" {
				w.polRelease(now, st.allocID, st.owner)
			}
			delete(w.adapts, k)
			continue
		}
		switch {
		case st.allocID == "":
			if !now.Before(st.retryAt) {
				w.adaptiveAgain(k, st, now)
			}
		case st.cl.Concurrency() == 0 && now.Sub(st.renewed) >= time.Second:
			w.adaptNow(k, st, now)
			if st.cl.Concurrency() == 0 && !inFlight[k] && st.streams > 0 && st.streams < st.cl.Params().P && st.max >= st.cl.Params().P {
				w.adaptiveYield(k, st, now)
			}
		case now.Sub(st.renewed) >= w.leaseOf(k.src, k.dst)/3:
			w.adaptiveRenew(k, st, now)
		}
	}
}

// adaptiveYieldFor is how long an adaptive client that gave its streams
// back waits before it asks again: long enough for the clients that took
// them to start files, short next to a transfer.
const adaptiveYieldFor = 10 * time.Second

// adaptiveYield gives back the streams of an adaptive client that can run
// no file with them (fewer than p) and could not grow them (the pair has
// none to add): held, they would keep its files and other clients' waiting
// alike. Clients that share a full pair that way (five with 2 of a pair's
// 10 streams, at p 4) would otherwise wait for each other for ever: the
// paper's client (Chervenak et al., Fig. 3) runs min(c_i, streams/p) = 0
// files and renews. The pair's limit on a client being below p is not
// this case: giving back would not help (waiting says so).
func (w *world) adaptiveYield(k adaptKey, st *adaptState, now time.Time) {
	w.polRelease(now, st.allocID, st.owner)
	w.s.log.Info("adaptive job gave back streams it cannot use", "job", k.job, "pair", k.src+"->"+k.dst,
		"streams", st.streams, "p", st.cl.Params().P, "again_in", adaptiveYieldFor)
	st.allocID, st.retryAt = "", now.Add(adaptiveYieldFor)
}

// adaptiveAgain asks again for the allocation of a client that gave its
// streams back, and starts the client over with the answer (Fig. 3 lines
// 2-5, as a first request); a refusal keeps it waiting for another round.
func (w *world) adaptiveAgain(k adaptKey, st *adaptState, now time.Time) {
	pa, err := w.polRequest(now, policy.Request{Pair: policy.Pair{Src: k.src, Dst: k.dst}, Client: jobClient(k.job), VO: st.owner.VO, Want: st.cl.Want()})
	if err != nil {
		w.s.log.Warn("adaptive job's allocation refused; asking again later", "job", k.job, "err", err)
		st.retryAt = now.Add(adaptiveYieldFor)
		return
	}
	st.owner, st.allocID, st.streams, st.max, st.renewed, st.since, st.bytes = pa.Owner(), pa.ID, pa.Streams, pa.Max, now, now, 0
	st.cl.Start(pa.Streams)
}

// dropStaleJobAllocs releases, at start, the allocations of adaptive jobs an
// earlier run held: the new run requests afresh (a client's adaptation
// state is not kept), so the old leases go now rather than expire.
func (w *world) dropStaleJobAllocs(now time.Time) {
	svc, done := w.s.policyService()
	defer done()
	var ids []store.AllocationGone
	for _, a := range svc.List(now, policy.Filter{}) {
		if strings.HasPrefix(a.Client, "sluice-job:") && svc.Release(now, a.ID, a.Owner()) == nil {
			// Conditional on the lease as loaded: with several servers
			// on one database, one that another server's job renewed
			// since is that job's, not an earlier run's.
			ids = append(ids, store.AllocationGone{ID: a.ID, Expires: a.Expires})
		}
	}
	if len(ids) > 0 {
		_ = w.s.pol.Persist(w.ctx, nil, ids)
	}
}
