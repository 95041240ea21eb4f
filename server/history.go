package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// The dashboard's history: every SampleEvery the loop writes to the store
// what it schedules, per link and job owner (files queued and running,
// bytes moved, files done and failed since its last sample), and a mark
// that it sampled. Each server samples its own partitions, so the
// history of several servers on one database is the sum of theirs.
// History reads it back summed into buckets, Failures lists the failed
// files.

// Defaults of Config.SampleEvery and Config.SampleKeep.
const (
	DefaultSampleEvery = 15 * time.Second
	// DefaultSampleKeep keeps a day of history and an hour more, so
	// that a chart of the last 24 hours is always full.
	DefaultSampleKeep = 25 * time.Hour
)

// maxHistoryPoints bounds the buckets of one History answer: a chart is a
// few hundred pixels wide.
const maxHistoryPoints = 1000

// defaultHistoryPoints is how many buckets History aims at when not
// given a step.
const defaultHistoryPoints = 240

func (s *Server) sampleEvery() time.Duration {
	if s.cfg.SampleEvery > 0 {
		return s.cfg.SampleEvery
	}
	return DefaultSampleEvery
}

func (s *Server) sampleKeep() time.Duration {
	if s.cfg.SampleKeep > 0 {
		return s.cfg.SampleKeep
	}
	return DefaultSampleKeep
}

// sampler is the loop's state between two samples.
type sampler struct {
	last time.Time // when the last sample was taken (zero: none yet)
	// seen is, per running task, the bytes of its run already counted.
	seen map[int64]runBytes
	// ended holds what files that ended since the last sample add
	// (done, failed, their runs' last bytes).
	ended map[linkOwner]*store.Sample
}

// runBytes is how far into a run (generation run) the bytes were counted.
type runBytes struct {
	run  int
	done int64
}

// linkOwner is one row of a sample: a link and a job owner.
type linkOwner struct {
	src, dst string
	owner    int64
	vo       string
}

func sampleKey(t *task) linkOwner {
	return linkOwner{src: t.SrcEndpoint, dst: t.DstEndpoint, owner: t.job.OwnerID, vo: t.job.VO}
}

// counted is the bytes of t's current run already in a sample.
func (h *sampler) counted(t *task) int64 {
	if r, ok := h.seen[t.ID]; ok && r.run == t.run {
		return r.done
	}
	return t.runDone
}

// endedRow is the row of the next sample that counts what ended on
// t's link for its owner.
func (h *sampler) endedRow(t *task) *store.Sample {
	if h.ended == nil {
		h.ended = map[linkOwner]*store.Sample{}
	}
	k := sampleKey(t)
	row := h.ended[k]
	if row == nil {
		row = &store.Sample{}
		h.ended[k] = row
	}
	return row
}

// runEnded counts the bytes run x of t wrote since the last sample, as
// it ends (preempted, stopped, failed or done): a run shorter than the
// sampling interval, or the end of a longer one, would go uncounted.
func (h *sampler) runEnded(t *task, x transfer) {
	base := h.counted(t)
	done := x.Progress().Done
	if done <= base {
		return
	}
	row := h.endedRow(t)
	row.Bytes = store.AddBytes(row.Bytes, done-base)
	if h.seen == nil {
		h.seen = map[int64]runBytes{}
	}
	h.seen[t.ID] = runBytes{run: t.run, done: done}
}

// taskEnded counts a task whose end the store has taken (flush): done,
// with the bytes of its run not yet counted, or failed.
func (h *sampler) taskEnded(t *task, failed bool) {
	row := h.endedRow(t)
	if failed {
		row.Failed++
	} else {
		row.Done++
		if t.Error != store.NoteInPlace { // found in place: nothing moved
			row.Bytes = store.AddBytes(row.Bytes, max(0, t.Size-h.counted(t)))
		}
	}
	delete(h.seen, t.ID)
}

// sample writes a sample of the loop's tasks to the store, if one is due.
func (w *world) sample(now time.Time) {
	h := &w.hist
	every := w.s.sampleEvery()
	// One sample in each window of SampleEvery, the windows aligned as
	// History's buckets are: a sample due every SampleEvery after the
	// last would drift by up to a cycle each time, and a bucket would
	// now and then hold none (and read as unknown).
	if !h.last.IsZero() && now.Truncate(every).Equal(h.last.Truncate(every)) {
		return
	}
	span := every // the first sample covers what ran since the loop began
	if !h.last.IsZero() {
		span = now.Sub(h.last)
	} else if d := now.Sub(w.begun); d > 0 {
		span = d
	}
	h.last = now
	rows := map[linkOwner]*store.Sample{}
	for k, r := range h.ended {
		rows[k] = r
	}
	h.ended = nil
	seen := make(map[int64]runBytes, len(h.seen))
	for t := range w.tasks.all() {
		running := t.State == store.StateRunning
		if !running && t.State != store.StateQueued && t.State != store.StateResolving {
			continue
		}
		k := sampleKey(t)
		row := rows[k]
		if row == nil {
			row = &store.Sample{}
			rows[k] = row
		}
		if !running {
			row.Queued++
			continue
		}
		row.Running++
		if t.xfer == nil {
			continue
		}
		base := h.counted(t)
		if done := t.xfer.Progress().Done; done > base {
			row.Bytes = store.AddBytes(row.Bytes, done-base)
			base = done
		}
		seen[t.ID] = runBytes{run: t.run, done: base}
	}
	h.seen = seen
	server := w.s.cfg.ServerID
	out := []store.Sample{{Server: server, At: now, Seconds: span.Seconds()}}
	for _, k := range slices.SortedFunc(maps.Keys(rows), func(a, b linkOwner) int {
		return cmp.Or(strings.Compare(a.src, b.src), strings.Compare(a.dst, b.dst), cmp.Compare(a.owner, b.owner), strings.Compare(a.vo, b.vo))
	}) {
		r := rows[k]
		r.Server, r.At, r.Src, r.Dst, r.OwnerID, r.VO = server, now, k.src, k.dst, k.owner, k.vo
		out = append(out, *r)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	defer cancel()
	if err := w.s.st.AddSamples(ctx, out, now.Add(-w.s.sampleKeep())); err != nil {
		// The charts lose this sample; the service goes on.
		w.logEvery(slog.LevelWarn, "recording the history's sample", "err", err)
	}
}

// HistoryQuery selects history: a range (zero To: now; zero From: an hour
// before To; cut to the SampleKeep before now), the bucket width (0:
// chosen for about defaultHistoryPoints points; at least the sampling
// interval), and for admins one user's or one VO's transfers.
type HistoryQuery struct {
	From, To time.Time
	Step     time.Duration
	User, VO string
}

// History is the history of what the caller may see: its own transfers,
// or an admin's everyone's (or one user's or VO's), from every server's
// samples.
func (s *Server) History(ctx context.Context, c Caller, q HistoryQuery) (wire.HistoryOut, error) {
	owner, vo, err := s.scope(ctx, c, q.User, q.VO)
	if err != nil {
		return wire.HistoryOut{}, err
	}
	// Nothing older than SampleKeep is kept, nor anything to come: a
	// range beyond is cut to what can hold samples (and no time far
	// from now reaches the store's arithmetic).
	now := s.now()
	if q.To.IsZero() {
		q.To = now
	} else if latest := now.Add(time.Minute); q.To.After(latest) {
		q.To = latest
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-time.Hour)
	}
	if oldest := now.Add(-s.sampleKeep()); q.From.Before(oldest) {
		q.From = oldest
	}
	if !q.From.Before(q.To) {
		return wire.HistoryOut{}, fmt.Errorf("%w: from %s is not before to %s (history is kept for %s, until now)", ErrInvalid,
			q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), s.sampleKeep())
	}
	every := s.sampleEvery()
	span := q.To.Sub(q.From)
	step := q.Step
	if step <= 0 {
		// Whole sampling intervals, about defaultHistoryPoints of them.
		n := int64(math.Ceil(float64(span) / float64(every) / defaultHistoryPoints))
		step = time.Duration(max(1, n)) * every
	}
	if step < every {
		step = every
	}
	// Whole buckets, aligned to the step: the buckets of two requests a
	// little apart are the same buckets.
	from := q.From.Truncate(step)
	to := q.To.Truncate(step)
	if to.Before(q.To) {
		to = to.Add(step)
	}
	nb := int(to.Sub(from) / step)
	if nb > maxHistoryPoints {
		return wire.HistoryOut{}, fmt.Errorf("%w: %s in steps of %s is %d points; at most %d (a larger step)", ErrInvalid, span, step, nb, maxHistoryPoints)
	}
	sums, err := s.st.Samples(ctx, store.SampleQuery{From: from, To: to, Step: step, OwnerID: owner, VO: vo})
	if err != nil {
		return wire.HistoryOut{}, fmt.Errorf("server: %w", err)
	}
	return historyOut(sums, from, to, step, every), nil
}

// historyOut sums the servers' bucket sums into series.
func historyOut(sums []store.SampleSum, from, to time.Time, step, every time.Duration) wire.HistoryOut {
	nb := int(to.Sub(from) / step)
	out := wire.HistoryOut{From: from, To: to, Step: step.Seconds(), SampleEvery: every.Seconds(),
		Times: make([]int64, nb), Servers: []string{}, Endpoints: []wire.HistoryEndpoint{}, Links: []wire.HistoryLink{}}
	for b := range nb {
		out.Times[b] = from.Add(time.Duration(b) * step).Unix()
	}
	// Each server's marks per bucket: how many samples, over how long.
	type cover struct {
		n       int
		seconds float64
	}
	marks := map[string][]cover{}
	covered := make([]bool, nb)
	for _, m := range sums {
		if m.Src != "" || m.Dst != "" || m.Bucket < 0 || m.Bucket >= nb {
			continue
		}
		if marks[m.Server] == nil {
			marks[m.Server] = make([]cover, nb)
		}
		marks[m.Server][m.Bucket] = cover{m.Samples, m.Seconds}
		covered[m.Bucket] = true
	}
	out.Servers = slices.Sorted(maps.Keys(marks))
	newSeries := func() *series { return newSeriesOf(covered) }
	total := newSeries()
	eps := map[string]*series{}
	links := map[[2]string]*series{}
	for _, m := range sums {
		if m.Src == "" && m.Dst == "" || m.Bucket < 0 || m.Bucket >= nb {
			continue
		}
		c := marks[m.Server]
		if c == nil || c[m.Bucket].n == 0 {
			continue // rows without their server's mark: cannot be averaged
		}
		cv := c[m.Bucket]
		thr := 0.0
		if cv.seconds > 0 {
			thr = float64(m.Bytes) / cv.seconds
		}
		add := func(s *series) {
			b := m.Bucket
			s.thr[b] += thr
			s.queued[b] += float64(m.Queued) / float64(cv.n)
			s.running[b] += float64(m.Running) / float64(cv.n)
			s.done[b] += float64(m.Done)
			s.failed[b] += float64(m.Failed)
			s.bytes = store.AddBytes(s.bytes, m.Bytes)
			s.nDone += m.Done
			s.nFailed += m.Failed
		}
		add(total)
		k := [2]string{m.Src, m.Dst}
		if links[k] == nil {
			links[k] = newSeries()
		}
		add(links[k])
		for _, n := range []string{m.Src, m.Dst} {
			if eps[n] == nil {
				eps[n] = newSeries()
			}
			if n == m.Dst && m.Src == m.Dst {
				break // a link from an endpoint to itself counts once there
			}
			add(eps[n])
		}
	}
	out.Total = total.wire()
	for _, n := range slices.Sorted(maps.Keys(eps)) {
		out.Endpoints = append(out.Endpoints, wire.HistoryEndpoint{Name: n, HistorySeries: eps[n].wire()})
	}
	for _, k := range slices.SortedFunc(maps.Keys(links), func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	}) {
		out.Links = append(out.Links, wire.HistoryLink{Source: k[0], Destination: k[1], HistorySeries: links[k].wire()})
	}
	return out
}

// series accumulates one chart's values.
type series struct {
	covered                            []bool
	thr, queued, running, done, failed []float64
	bytes, nDone, nFailed              int64
}

func newSeriesOf(covered []bool) *series {
	n := len(covered)
	return &series{covered: covered, thr: make([]float64, n), queued: make([]float64, n), running: make([]float64, n),
		done: make([]float64, n), failed: make([]float64, n)}
}

func (s *series) wire() wire.HistorySeries {
	vals := func(v []float64) []*float64 {
		out := make([]*float64, len(v))
		for i := range v {
			if s.covered[i] {
				x := v[i]
				out[i] = &x
			}
		}
		return out
	}
	return wire.HistorySeries{Throughput: vals(s.thr), Queued: vals(s.queued), Running: vals(s.running),
		Done: vals(s.done), Failed: vals(s.failed), Bytes: s.bytes, FilesDone: s.nDone, Failures: s.nFailed}
}

// scope is whose transfers the caller asks about: an admin's choice of
// one user (by name) or one VO, or everyone's (0, ""); a user's own,
// within a VO if named. A user may name only themselves.
func (s *Server) scope(ctx context.Context, c Caller, user, vo string) (int64, string, error) {
	if !c.User.Admin {
		if user != "" && user != c.User.Name {
			return 0, "", fmt.Errorf("%w: only an admin can see another user's transfers", ErrForbidden)
		}
		return c.User.ID, vo, nil
	}
	if user == "" {
		return 0, vo, nil
	}
	u, err := s.st.UserByName(ctx, user)
	if errors.Is(err, store.ErrNotFound) {
		return 0, "", fmt.Errorf("%w: no user %q", ErrNotFound, user)
	}
	if err != nil {
		return 0, "", fmt.Errorf("server: %w", err)
	}
	return u.ID, vo, nil
}

// FailureQuery selects failed files: for admins one user's or one VO's
// (a user's: their own), containing Search, before a paging cursor,
// at most Limit.
type FailureQuery struct {
	User, VO, Search string
	Before           time.Time
	BeforeID         int64
	Limit            int
}

// Failures lists the failed files the caller may see, newest first.
func (s *Server) Failures(ctx context.Context, c Caller, q FailureQuery) ([]store.Failure, error) {
	owner, vo, err := s.scope(ctx, c, q.User, q.VO)
	if err != nil {
		return nil, err
	}
	fs, err := s.st.FailedTasks(ctx, store.FailureFilter{OwnerID: owner, VO: vo, Search: q.Search,
		Before: q.Before, BeforeID: q.BeforeID, Limit: q.Limit})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return fs, nil
}

// JobsFor lists jobs as Jobs does, with an admin's choice of one user (by
// name): a user asking for another's is refused.
func (s *Server) JobsFor(ctx context.Context, c Caller, user string, f store.JobFilter) ([]JobStatus, error) {
	owner, vo, err := s.scope(ctx, c, user, f.VO)
	if err != nil {
		return nil, err
	}
	f.OwnerID, f.VO = owner, vo
	return s.Jobs(ctx, c, f)
}
