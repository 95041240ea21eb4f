package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/multisrc"
)

// Multi-source transfers (Spec.Sources): the same coordinator and workers
// as one source, with a queue and workers per replica. A transfer of one
// source is the case of one replica with all the bytes.

// source is one replica and what the transfer knows of it.
type source struct {
	Source
	queue   []*piece // its pieces not started (or given back), front first
	running int      // its workers
	dead    error    // why it was dropped; nil while used
	// This pass: when its first worker started, the bytes it delivered
	// and where they are (to find a replica that sent wrong bytes).
	since time.Time
	moved int64
	wrote ranges
	// mtime is its modification time when the transfer prepared: a
	// verification against it checks it did not change since.
	mtime time.Time
}

// newSources are the replicas of s (normalised): Spec.Sources, or the one
// source.
func newSources(s Spec) []*source {
	if len(s.Sources) == 0 {
		return []*source{{Source: Source{Name: s.SrcPath, Backend: s.Src, Path: s.SrcPath, Pull: s.Pull, Share: 1}}}
	}
	out := make([]*source, len(s.Sources))
	for i, r := range s.Sources {
		out[i] = &source{Source: r}
	}
	return out
}

func (s *source) started() {
	if s.since.IsZero() {
		s.since = time.Now()
	}
}

func (s *source) reset() { s.since, s.moved, s.wrote = time.Time{}, 0, nil }

func (s *source) delivered(off, n int64) {
	s.moved += n
	s.wrote = s.wrote.add(off, off+n)
}

// rate is what the replica delivered per second since its first worker
// started (0 before it delivered anything).
func (s *source) rate(now time.Time) float64 {
	el := now.Sub(s.since).Seconds()
	if s.since.IsZero() || s.moved == 0 || el <= 0 {
		return 0
	}
	return float64(s.moved) / el
}

// queuedLocked is the number of pieces waiting in every queue.
func (t *Transfer) queuedLocked() int {
	n := 0
	for _, s := range t.srcs {
		n += len(s.queue)
	}
	return n
}

// liveLocked are the indexes of the replicas still used.
func (t *Transfer) liveLocked() []int {
	var out []int
	for i, s := range t.srcs {
		if s.dead == nil {
			out = append(out, i)
		}
	}
	return out
}

// usedLocked is the number of replicas the file comes from: still used,
// and planned a share or delivered bytes (a plan may give one nothing: the
// best single source).
func (t *Transfer) usedLocked() int {
	shared := false // all shares 0 means equal parts
	for _, s := range t.srcs {
		shared = shared || s.Share > 0
	}
	n := 0
	for _, s := range t.srcs {
		if s.dead == nil && (!shared || s.Share > 0 || s.moved > 0 || len(s.wrote) > 0) {
			n++
		}
	}
	return n
}

// spreadLocked queues spans (in file order) on the live replicas: each gets
// one contiguous part in proportion to its share (equal parts if no live
// replica has a share), cut into pieces of about a quarter of a worker's
// part each, at least ChunkMin. With one replica this is the single-source
// queue of chunkSize pieces.
func (t *Transfer) spreadLocked(spans []span) {
	live := t.liveLocked()
	if len(live) == 0 {
		return
	}
	var total int64
	for _, m := range spans {
		total += m.len()
	}
	if total == 0 {
		return
	}
	shares := make([]float64, len(live))
	var sum float64
	for k, i := range live {
		shares[k] = t.srcs[i].Share
		sum += shares[k]
	}
	if sum <= 0 {
		for k := range shares {
			shares[k] = 1
		}
		sum = float64(len(shares))
	}
	// Each replica's bytes, the remainder of the rounding to the last one
	// with a share.
	want := make([]int64, len(live))
	var given int64
	last := 0
	for k := range live {
		want[k] = int64(float64(total) * shares[k] / sum)
		given += want[k]
		if shares[k] > 0 {
			last = k
		}
	}
	want[last] += total - given
	k, si := 0, 0
	at := int64(0)
	if len(spans) > 0 {
		at = spans[0].Off
	}
	for k < len(live) && si < len(spans) {
		if want[k] == 0 {
			k++
			continue
		}
		src := t.srcs[live[k]]
		cs := chunkSize(want[k], t.cc, t.spec.ChunkMin)
		for want[k] > 0 && si < len(spans) {
			end := min(spans[si].End, at+min(cs, want[k]))
			src.queue = append(src.queue, &piece{off: at, cur: at, end: end, src: live[k]})
			want[k] -= end - at
			at = end
			if at >= spans[si].End {
				si++
				if si < len(spans) {
					at = spans[si].Off
				}
			}
		}
		k++
	}
}

// dropSourceLocked stops using replica i after err, moving its queued
// pieces to the others, and reports whether it did: not with one replica,
// not for the last live one, and not for errors of the destination, which
// another replica would meet as well.
func (t *Transfer) dropSourceLocked(i int, err error) bool {
	if len(t.srcs) < 2 || t.srcs[i].dead != nil || errors.Is(err, backend.ErrNoSpace) || len(t.liveLocked()) < 2 {
		return false
	}
	src := t.srcs[i]
	src.dead = err
	t.notes = append(t.notes, fmt.Sprintf("source %s dropped: %v", src.Name, err))
	var spans []span
	for _, p := range src.queue {
		spans = append(spans, span{p.off, p.end})
	}
	src.queue = nil
	t.spreadLocked(spans)
	// Workers of the others may have stopped for want of pieces.
	t.broadcastLocked()
	return true
}

// lastReplicaLocked is err, of replica i, as the transfer's error: when i
// was the last of several replicas still used, the copy failed because
// every replica did, and the error says so with each one's reason (the
// replicas' paths are often the same, and only their names tell them
// apart).
func (t *Transfer) lastReplicaLocked(i int, err error) error {
	if len(t.srcs) < 2 || t.srcs[i].dead != nil || len(t.liveLocked()) != 1 || errors.Is(err, backend.ErrNoSpace) {
		return err
	}
	var others []string
	for j, s := range t.srcs {
		if j != i && s.dead != nil {
			others = append(others, fmt.Sprintf("%s dropped: %v", s.Name, s.dead))
		}
	}
	return fmt.Errorf("engine: every replica failed (%s); the last, %s: %w", strings.Join(others, "; "), t.srcs[i].Name, err)
}

// stealLocked is Spec.Steal for replica thief, whose queue is empty:
// multisrc.Steal chooses the replica expected to finish last and the tail
// of its work that the thief should take so that both finish together.
// Bytes of a sub-write in flight are never taken.
func (t *Transfer) stealLocked(thief int) *piece {
	now := time.Now()
	n := len(t.srcs)
	remaining := make([][]multisrc.Span, n)
	rates := make([]float64, n)
	tails := make([]*piece, n)
	queued := make([]bool, n)
	for _, p := range t.inflight {
		if from := max(p.cur, p.off); from < p.end && t.srcs[p.src].dead == nil {
			remaining[p.src] = append(remaining[p.src], multisrc.Span{Off: from, End: p.end})
			tails[p.src] = p
		}
	}
	for i, s := range t.srcs {
		// A replica that has delivered less than a sub-write is judged
		// by the plan's rate, if it gave one: a rate measured over so
		// little is mostly its start-up (too slow) or a burst (too fast).
		if rates[i] = s.rate(now); rates[i] == 0 || (s.Rate > 0 && s.moved < t.spec.SubWrite) {
			rates[i] = s.Rate
		}
		if s.dead != nil {
			continue
		}
		for _, p := range s.queue {
			remaining[i] = append(remaining[i], multisrc.Span{Off: p.off, End: p.end})
			tails[i], queued[i] = p, true
		}
	}
	// The thief is trusted no faster than the plan predicted it: what a
	// replica with a small part delivered is mostly the burst that a
	// token bucket or socket buffers let through at once, and a slow
	// replica that took over a fast one's tail at that rate would hold
	// the file back by the time it really needs for it.
	if p := t.srcs[thief].Rate; p > 0 && rates[thief] > p {
		rates[thief] = p
	}
	v, take, ok := multisrc.Steal(thief, remaining, rates, t.spec.SubWrite, 1)
	if !ok || v == thief || tails[v] == nil {
		return nil
	}
	tail := tails[v]
	// The span is the tail of the victim's last piece; it starts inside
	// it and at or after any sub-write in flight.
	from := max(take.Off, tail.off, tail.cur)
	if from >= tail.end || take.End != tail.end {
		return nil
	}
	p := &piece{off: from, cur: from, end: tail.end}
	if from == tail.off && queued[v] {
		q := t.srcs[v].queue
		t.srcs[v].queue = q[:len(q)-1]
	} else {
		tail.end = from
	}
	t.steals++
	t.stolen += p.end - p.off
	return p
}

// statAll stats every replica at once, with fewer attempts than a chunk
// gets (the others can carry the file), drops those that cannot be
// reached, and returns what the first one still used says. Replicas of
// different sizes are an error: they are not copies of one file.
func (t *Transfer) statAll(ctx context.Context) (backend.FileInfo, error) {
	type answer struct {
		fi  backend.FileInfo
		err error
	}
	answers := make([]answer, len(t.srcs))
	var wg sync.WaitGroup
	for i, s := range t.srcs {
		if s.dead != nil {
			continue
		}
		wg.Go(func() {
			var a answer
			for attempt := 1; attempt <= min(3, t.spec.Retry.Attempts); attempt++ {
				var silent bool
				if a.fi, a.err, silent = t.statReplica(ctx, s.Source); a.err == nil || silent || backend.Permanent(a.err) || ctx.Err() != nil {
					// One that does not answer at all is not
					// waited for again: the others carry the file.
					break
				}
				if sleep(ctx, t.spec.Retry.backoff(attempt, uint64(i)), nil) != nil {
					break
				}
			}
			answers[i] = a
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return backend.FileInfo{}, fmt.Errorf("engine: stat of the replicas: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ref := -1
	var errs []error
	for i, a := range answers {
		s := t.srcs[i]
		switch {
		case s.dead != nil:
		case a.err != nil:
			s.dead = a.err
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, a.err))
			t.notes = append(t.notes, fmt.Sprintf("source %s dropped: %v", s.Name, a.err))
		case a.fi.IsDir:
			return a.fi, fmt.Errorf("engine: %w: replica %s is a directory", backend.ErrInvalid, s.Name)
		case ref >= 0 && a.fi.Size != answers[ref].fi.Size:
			return a.fi, fmt.Errorf("engine: %w: replica %s has %d bytes and %s has %d: not copies of one file", backend.ErrInvalid, s.Name, a.fi.Size, t.srcs[ref].Name, answers[ref].fi.Size)
		default:
			s.mtime = a.fi.ModTime
			if ref < 0 {
				ref = i
			}
		}
	}
	if ref < 0 {
		return backend.FileInfo{}, fmt.Errorf("engine: no replica of %s can be read: %w", t.srcs[0].Name, errors.Join(errs...))
	}
	return answers[ref].fi, nil
}

// replicaStatTimeout bounds one stat of a replica while others are used.
// Nothing else would: a stopped agent or a black-holed host keeps the
// connection open and never answers, and a read's watchdog (the sluice
// backend's Idle) does not cover stats. As long as the other no-answer
// limits (the agent's Idle, GridFTP's and XRootD's 60 s).
const replicaStatTimeout = 60 * time.Second

// replicaWait is how long a replica is waited for: replicaStatTimeout
// (hooks may shorten it), plus, for a checksum, the n bytes the replica
// reads before it answers, at backend.ChecksumRate.
func (t *Transfer) replicaWait(n int64) time.Duration {
	d := replicaStatTimeout
	if t.hooks.statTimeout > 0 {
		d = t.hooks.statTimeout
	}
	return backend.ReadWait(d, n, backend.ChecksumRate)
}

// statReplica stats replica s within replicaStatTimeout (hooks may shorten
// it); silent reports that the replica did not answer in time (ctx still
// alive), its error then saying so.
func (t *Transfer) statReplica(ctx context.Context, s Source) (fi backend.FileInfo, err error, silent bool) {
	d := t.replicaWait(0)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fi, err = s.Backend.Stat(sctx, s.Path)
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		return fi, fmt.Errorf("stat of %s: no answer in %s: %w", s.Name, d, err), true
	}
	return fi, err, false
}

// witness is the replica Spec.Witness compares with the reference at
// verification: the second one still used, if there is one.
func (t *Transfer) witness() (Source, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if live := t.liveLocked(); len(live) > 1 {
		return t.srcs[live[1]].Source, true
	}
	return Source{}, false
}

// replicasChanged compares the replicas still used with the modification
// times a journal recorded (journal.Replicas) and says why the bytes it
// records cannot be trusted, or "" if they can: a replica modified since,
// or none of those the journal knew answering (the bytes came from
// replicas that cannot be compared now). A replica the journal does not
// know (down then, or added to the list) sent none of them.
func (t *Transfer) replicasChanged(recorded map[string]time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	known := 0
	for _, s := range t.srcs {
		was, ok := recorded[s.Name]
		if s.dead != nil || s.mtime.IsZero() || !ok {
			continue
		}
		if !was.Equal(s.mtime) {
			return fmt.Sprintf("replica %s modified since the journal was written", s.Name)
		}
		known++
	}
	if known == 0 {
		return "none of the replicas the journal was written from can be compared"
	}
	return ""
}

// reference is the replica a verification compares against, the first one
// still used, its index, and its modification time when the transfer
// prepared.
func (t *Transfer) reference() (int, Source, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.srcs {
		if s.dead == nil {
			return i, s.Source, s.mtime
		}
	}
	return 0, t.srcs[0].Source, t.srcs[0].mtime
}

// sumReplica is replica s's checksum within replicaStatTimeout plus the
// file's size at 10 MB/s (an agent says nothing until it has read the
// whole file; the bound of GridFTP's and XRootD's checksums); silent
// reports that it did not answer in time (ctx still alive).
func (t *Transfer) sumReplica(ctx context.Context, s Source) (sum string, err error, silent bool) {
	d := t.replicaWait(t.sizeOf())
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sum, err = s.Backend.Checksum(sctx, s.Path, t.spec.Checksum)
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		return "", fmt.Errorf("checksum of %s: no answer in %s: %w", s.Name, d.Round(time.Millisecond), err), true
	}
	return sum, err, false
}

// sumRangeReplica is replica s's checksum of span, bounded as sumReplica
// bounds a whole file's by the bytes to read.
func (t *Transfer) sumRangeReplica(ctx context.Context, s Source, sp span) (sum string, err error, silent bool) {
	d := t.replicaWait(sp.len())
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	sum, err = s.Backend.(backend.RangeChecksummer).ChecksumRange(sctx, s.Path, t.spec.Checksum, sp.Off, sp.len())
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		return "", fmt.Errorf("checksum of [%d,%d) at %s: no answer in %s: %w", sp.Off, sp.End, s.Name, d.Round(time.Millisecond), err), true
	}
	return sum, err, false
}

// dropSilent drops replica i, the one a verification compares against,
// which did not answer, so that the verification starts again against
// the next; false if it cannot be dropped (the last one used).
func (t *Transfer) dropSilent(i int, err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropSourceLocked(i, err)
}

// blame looks, after a checksum mismatch, for the replicas that hold or
// delivered wrong bytes. For each range a replica delivered, it asks every
// live replica for its checksum of the range: the value a strict majority
// of them holds is the range's true content. A replica holding another
// value is dropped (were it the reference of the final verification, the
// file would be compared against its bytes), and so is a replica whose
// delivered bytes, as the destination holds them, differ from the true
// content (a bad source, or bytes damaged on the way). The dropped
// replicas' ranges are forgotten and queued on the others. It reports how
// many it dropped; 0 when it cannot tell (the backends cannot sum ranges,
// or the bad bytes were written before a resume), and the caller then
// starts over. When the replicas disagree with no majority (two replicas,
// each with its own version), no replica can be trusted over another, and
// the transfer fails saying so.
func (t *Transfer) blame(ctx context.Context) (int, error) {
	s := &t.spec
	rc, ok := s.Dst.(backend.RangeChecksummer)
	if !ok || len(t.srcs) < 2 || s.Checksum == "none" {
		return 0, nil
	}
	t.mu.Lock()
	type job struct {
		i    int
		span span
	}
	var jobs []job
	// Every replica that delivered bytes this pass is checked, also one
	// dropped since for another reason: its bytes are in the file.
	for i, src := range t.srcs {
		for _, sp := range src.wrote {
			jobs = append(jobs, job{i, sp})
		}
	}
	var voters []int
	for _, i := range t.liveLocked() {
		if _, ok := t.srcs[i].Backend.(backend.RangeChecksummer); ok {
			voters = append(voters, i)
		}
	}
	t.mu.Unlock()
	if len(voters) == 0 {
		return 0, nil
	}
	bad := map[int]bool{}
	mute := map[int]error{} // voters that did not answer: dropped, not waited for
	for _, j := range jobs {
		holders := map[string][]int{} // checksum of the range -> the replicas holding it
		asked := 0
		for _, v := range voters {
			if mute[v] != nil {
				continue
			}
			src := t.srcs[v].Source
			var sum string
			var silent error
			if err := t.retry(ctx, fmt.Sprintf("checksum of [%d,%d) at %s", j.span.Off, j.span.End, src.Name), func() (err error) {
				var quiet bool
				if sum, err, quiet = t.sumRangeReplica(ctx, src, j.span); quiet {
					silent = err
					return nil
				}
				return err
			}); err != nil {
				return 0, err
			}
			if silent != nil {
				mute[v] = silent
				continue
			}
			holders[sum] = append(holders[sum], v)
			asked++
		}
		if asked == 0 {
			break // nobody answers: start over instead
		}
		truth := ""
		for sum, vs := range holders {
			if 2*len(vs) > asked {
				truth = sum
			}
		}
		if truth == "" {
			var versions []string
			for sum, vs := range holders {
				var names []string
				for _, v := range vs {
					names = append(names, t.srcs[v].Name)
				}
				versions = append(versions, fmt.Sprintf("%s at %s", sum, strings.Join(names, ", ")))
			}
			slices.Sort(versions)
			return 0, fmt.Errorf("engine: %w: the replicas hold different bytes in [%d,%d) and no majority agrees (%s): cannot tell which is right",
				ErrChecksum, j.span.Off, j.span.End, strings.Join(versions, "; "))
		}
		for sum, vs := range holders {
			if sum != truth {
				for _, v := range vs {
					bad[v] = true
				}
			}
		}
		if bad[j.i] {
			continue
		}
		var got string
		if err := t.retry(ctx, fmt.Sprintf("checksum of [%d,%d) of %s", j.span.Off, j.span.End, t.tmp), func() (err error) {
			got, err = rc.ChecksumRange(ctx, t.tmp, s.Checksum, j.span.Off, j.span.len())
			return err
		}); err != nil {
			return 0, err
		}
		if got != truth {
			bad[j.i] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for v, err := range mute {
		// Its bytes in the file were judged above like any other's.
		if !bad[v] {
			t.dropSourceLocked(v, fmt.Errorf("engine: %w", err))
		}
	}
	if len(bad) == 0 {
		return 0, nil
	}
	left := 0
	for _, i := range t.liveLocked() {
		if !bad[i] {
			left++
		}
	}
	if left == 0 {
		return 0, nil // nobody left to fetch from: start over instead
	}
	var again []span
	for i := range t.srcs {
		if !bad[i] {
			continue
		}
		src := t.srcs[i]
		if src.dead == nil {
			src.dead = fmt.Errorf("%w: its bytes differ from those most replicas hold", ErrChecksum)
		}
		t.notes = append(t.notes, fmt.Sprintf("source %s dropped: its bytes differ from those most replicas hold; the %d bytes it sent are fetched again", src.Name, src.wrote.total()))
		for _, sp := range src.wrote {
			t.done = t.done.remove(sp.Off, sp.End)
			again = append(again, sp)
		}
		src.wrote = nil
	}
	t.doneN = t.done.total()
	t.dirty = true
	sortSpans(again)
	t.spreadLocked(again)
	return len(bad), nil
}
