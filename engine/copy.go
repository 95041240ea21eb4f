package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// errStopped: the worker left at a sub-write boundary (pause, SetCC down,
// end of the transfer); its piece is back in the queue.
var errStopped = errors.New("worker stopped")

// errShortRead: the source delivered fewer bytes than the range asked for.
var errShortRead = fmt.Errorf("source ended early: %w", io.ErrUnexpectedEOF)

// work is one worker: it copies pieces until none is left, it is told to
// stop, or an error ends the transfer.
func (t *Transfer) work(ctx context.Context, p *piece) {
	defer t.signal()
	for {
		err := t.copyPiece(ctx, p)
		if errors.Is(err, errStopped) {
			return // copyPiece has left already
		}
		t.mu.Lock()
		if err != nil {
			if ctx.Err() == nil && t.dropSourceLocked(p.src, err) {
				// Another replica carries on with p.
				t.leaveLocked(p)
				t.mu.Unlock()
				return
			}
			if ctx.Err() == nil {
				err = t.lastReplicaLocked(p.src, err)
			}
			t.leaveLocked(p)
			// The first error ends the transfer; errors of the other
			// workers are mostly the cancellation that follows.
			if t.werr == nil {
				t.werr = err
				t.wcancel()
			}
			t.mu.Unlock()
			return
		}
		t.dropInflightLocked(p)
		i := p.src
		if t.shouldStopLocked(ctx, p) {
			t.running--
			t.srcs[i].running--
			t.mu.Unlock()
			return
		}
		if p = t.nextLocked(i); p == nil {
			t.running--
			t.srcs[i].running--
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
}

// copyPiece copies p: one OpenRange of the source, streamed into sub-writes.
// A transient error reopens the source at the first byte not yet written,
// after a backoff; Attempts failures in a row without progress fail the
// transfer.
func (t *Transfer) copyPiece(ctx context.Context, p *piece) error {
	s := &t.spec
	src := t.srcs[p.src].Source // immutable: read without the lock
	failures := 0
	for {
		t.mu.Lock()
		if t.shouldStopLocked(ctx, p) {
			t.leaveLocked(p)
			t.mu.Unlock()
			return errStopped
		}
		off, end := p.off, p.end
		t.mu.Unlock()
		if off >= end {
			return nil
		}
		var progressed bool
		var err error
		if src.Pull != nil {
			progressed, err = t.pullStream(ctx, p, src)
		} else if rc, oerr := src.Backend.OpenRange(ctx, src.Path, off, end-off); oerr != nil {
			err = fmt.Errorf("opening %s at %d: %w", src.Path, off, oerr)
		} else {
			progressed, err = t.stream(ctx, p, rc, src.Path)
			rc.Close()
		}
		if err == nil || errors.Is(err, errStopped) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("engine: %w", ctx.Err())
		}
		if !errors.Is(err, backend.ErrNoSpace) {
			// A source that shrank will never deliver: fail now
			// rather than after every retry, and say so. It shows as
			// a short read, or (a range that starts past the new end,
			// at an agent, or pulled by one) as an invalid request or
			// a failed pull, which say nothing of the cause.
			fi, serr, silent := t.statReplica(ctx, src)
			if serr == nil && fi.Size != t.sizeOf() {
				return fmt.Errorf("engine: %w: %s is now %d bytes, was %d", ErrSourceChanged, src.Path, fi.Size, t.sizeOf())
			}
			if silent && t.othersUsed(p.src) {
				// A read that failed and a stat with no answer: a
				// replica that stopped answering, which another
				// replica still used would otherwise wait for again
				// at every attempt (minutes, at a read's watchdog
				// and this stat's bound each). Dropped now.
				return fmt.Errorf("engine: %w (after: %w)", serr, err)
			}
		}
		if backend.Permanent(err) {
			return fmt.Errorf("engine: %w", err)
		}
		if progressed {
			failures = 0
		}
		failures++
		if failures >= t.attemptsOf(p.src) {
			return fmt.Errorf("engine: %d attempts in a row failed: %w", failures, err)
		}
		t.mu.Lock()
		t.retries++
		ctl := t.ctl
		t.mu.Unlock()
		// A pause or SetCC down wakes the backoff, so that stopping
		// never waits for it.
		if err := sleep(ctx, s.Retry.backoff(failures, uint64(off)), ctl); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
	}
}

// replicaAttempts is how many failures in a row drop a replica while
// another is still used (statAll's figure). Its queued pieces wait for it
// meanwhile, and with the full Retry.Attempts (backoff doubling from
// 200 ms) a replica that died in the middle of a copy held the others
// back for 10 to 12 s; after three, about one.
const replicaAttempts = 3

// attemptsOf is how many failures in a row replica i may have before its
// error ends its part: replicaAttempts while another replica is still
// used (it is then dropped and the others take its pieces), else
// Retry.Attempts.
func (t *Transfer) attemptsOf(i int) int {
	n := t.spec.Retry.Attempts
	if t.othersUsed(i) {
		return min(n, replicaAttempts)
	}
	return n
}

// othersUsed reports whether replica i is used and so is another: i can
// then be dropped and the others take its pieces.
func (t *Transfer) othersUsed(i int) bool {
	if len(t.srcs) < 2 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.liveLocked()) > 1 && t.srcs[i].dead == nil
}

func (t *Transfer) sizeOf() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// stream writes p from rc in sub-writes of at most SubWrite bytes, recording
// each one as done once WriteAt returned. It reports whether any sub-write
// completed.
func (t *Transfer) stream(ctx context.Context, p *piece, rc io.Reader, srcPath string) (bool, error) {
	// Into the temporary file prepare allocated, never a new one: one
	// removed meanwhile would come back holding only the ranges written
	// after (pulls are written so by the destination agent too).
	write := t.spec.Dst.WriteAt
	if ew, ok := t.spec.Dst.(backend.ExistingWriter); ok {
		write = ew.WriteAtExisting
	}
	return t.subWrites(ctx, p, false, func(off, n int64) error {
		sr := subReader{ctx: ctx, r: rc, left: n, moved: &t.moved}
		err := write(ctx, t.tmp, off, &sr, n)
		if err == nil && sr.left != 0 {
			err = fmt.Errorf("%w: destination took %d of %d bytes", backend.ErrInvalid, n-sr.left, n)
		}
		if err != nil {
			if sr.err != nil {
				// The source side failed first; what the
				// destination made of the cut body is a
				// consequence, not the cause.
				err = fmt.Errorf("reading %s: %w", srcPath, sr.err)
			}
			return fmt.Errorf("writing [%d,%d) of %s: %w", off, off+n, t.tmp, err)
		}
		return nil
	})
}

// pullStream is stream for third-party copies: each sub-write is one Pull
// by the destination, recorded as the destination reports its bytes
// written, and in full once it returned.
func (t *Transfer) pullStream(ctx context.Context, p *piece, src Source) (bool, error) {
	return t.subWrites(ctx, p, len(t.srcs) == 1 && !t.spec.whole, func(off, n int64) error {
		var got int64
		err := src.Pull(ctx, src.Path, t.tmp, off, n, func(w int64) {
			if w > got && w <= n {
				t.moved.Add(w - got)
				t.record(p, off+got, w-got, true)
				got = w
			}
		})
		if err != nil {
			return fmt.Errorf("pulling [%d,%d) of %s into %s: %w", off, off+n, src.Path, t.tmp, err)
		}
		t.moved.Add(n - got)
		return nil
	})
}

// subWrites moves p in steps of at most SubWrite bytes with move, recording
// each step once move returned, and stopping between steps when the
// transfer pauses or shrinks. It reports whether any step completed.
//
// With tail set (pulls of one source: each step is its own request), the
// steps shrink as the file nears its end, to a share of what is left per
// worker (at least tailStep): a step in flight cannot be stolen, and at
// the end of a copy over a WAN path the last full sub-writes were pulled
// by streams still recovering from a loss at a tenth of their rate (4 MiB
// pulls taking 2.5 s while the rest of the file was done).
func (t *Transfer) subWrites(ctx context.Context, p *piece, tail bool, move func(off, n int64) error) (bool, error) {
	progressed := false
	for {
		t.mu.Lock()
		if t.shouldStopLocked(ctx, p) {
			t.leaveLocked(p)
			t.mu.Unlock()
			return progressed, errStopped
		}
		off := p.off
		if off >= p.end {
			t.mu.Unlock()
			return progressed, nil
		}
		n := min(t.spec.SubWrite, p.end-off)
		if tail {
			n = min(n, t.tailStepLocked())
			if rest := p.end - off - n; rest > 0 && rest < t.spec.PullMin {
				n += rest // no pull of less than PullMin left behind
			}
			t.pulling += n
		}
		p.cur = off + n
		t.mu.Unlock()
		err := move(off, n)
		t.mu.Lock()
		// Bytes a pull reported as they landed are recorded already
		// (a partial record moved p.off): the rest of the step is not.
		from := p.off
		if tail {
			t.pulling -= off + n - from
		}
		if err != nil {
			p.cur = p.off
			t.mu.Unlock()
			return progressed || from > off, err
		}
		t.mu.Unlock()
		t.record(p, from, off+n-from, false)
		progressed = true
	}
}

// tailStep is the least a shrunken pull asks for: below it a pull is
// mostly its round trip.
const tailStep = 256 << 10

// tailStepLocked is the largest step a worker should take now: a quarter
// of what is neither done nor in flight, per worker, so that the steps in
// flight at the end are small.
func (t *Transfer) tailStepLocked() int64 {
	left := t.size - t.doneN - t.pulling
	return max(min(t.spec.SubWrite, max(tailStep, t.spec.PullMin)), left/int64(4*max(1, t.running)))
}

// record marks [off, off+n) done after its WriteAt returned, or, with
// partial, as a pull in flight reports it: then p.cur stays at the end of
// the step (a steal cuts only above it) and the bytes leave the pulls in
// flight.
func (t *Transfer) record(p *piece, off, n int64, partial bool) {
	now := time.Now()
	t.mu.Lock()
	t.done = t.done.add(off, off+n)
	t.doneN += n
	t.srcs[p.src].delivered(off, n)
	p.off = off + n
	switch {
	case !partial:
		p.cur = p.off
	case len(t.srcs) == 1:
		t.pulling -= n
	}
	t.dirty = true
	t.meter.add(now, n)
	t.mu.Unlock()
	t.movingOnce.Do(func() { close(t.moving) })
}

// subReader is the body of one sub-write: exactly left bytes of the
// source's stream. It stops at cancellation (a backend that ignores ctx in
// WriteAt would otherwise finish the sub-write), turns an early EOF into
// errShortRead, and remembers the source's error so that it, not the
// destination's reaction to it, is reported.
type subReader struct {
	ctx   context.Context
	r     io.Reader
	left  int64
	moved *atomic.Int64
	err   error
}

func (s *subReader) Read(b []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	if int64(len(b)) > s.left {
		b = b[:s.left]
	}
	n, err := s.r.Read(b)
	s.left -= int64(n)
	s.moved.Add(int64(n))
	switch {
	case err == io.EOF && s.left == 0:
		err = nil
	case err == io.EOF:
		err = errShortRead
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

// tmpGoneError: the temporary file vanished once every byte was in it,
// before it was verified. The source's checksum was computed (verify
// returns it with the error): execute checks whether another run of the
// file put it in place meanwhile.
type tmpGoneError struct{ err error }

func (e *tmpGoneError) Error() string { return e.err.Error() }
func (e *tmpGoneError) Unwrap() error { return e.err }

// mismatchError: source and destination checksums differ.
type mismatchError struct{ algo, src, dst string }

func (e *mismatchError) Error() string {
	return fmt.Sprintf("%s (%s): source %s, destination %s", ErrChecksum, e.algo, e.src, e.dst)
}

func (e *mismatchError) Unwrap() error { return ErrChecksum }

// verify checks, once every range is written, that the source did not
// change, makes the temporary file durable, and compares the checksums
// computed at both ends (concurrently: each end reads its own disk).
func (t *Transfer) verify(ctx context.Context) (string, error) {
	s := &t.spec
	t.setState(StateVerifying)
	// The replica checked against: the source, or the first replica
	// still used.
	i, ref, mtime := t.reference()
	var fi backend.FileInfo
	var silent bool
	if err := t.retry(ctx, "stat of source "+ref.Path, func() (err error) {
		if len(t.srcs) < 2 {
			fi, err = ref.Backend.Stat(ctx, ref.Path)
			return err
		}
		if fi, err, silent = t.statReplica(ctx, ref); silent && t.othersUsed(i) {
			return nil // another replica is checked against instead
		}
		return err
	}); err != nil {
		return "", err
	}
	if silent {
		err := fmt.Errorf("engine: stat of %s: no answer at verification", ref.Name)
		if t.dropSilent(i, err) {
			return t.verify(ctx)
		}
		return "", err
	}
	size := t.sizeOf()
	if fi.Size != size {
		return "", fmt.Errorf("engine: %w: %s is now %d bytes, was %d when the transfer started", ErrSourceChanged, ref.Path, fi.Size, size)
	}
	if !mtime.IsZero() && !fi.ModTime.Equal(mtime) {
		return "", fmt.Errorf("engine: %w: %s was modified at %s, after the transfer started", ErrSourceChanged, ref.Path, fi.ModTime.Format(time.RFC3339Nano))
	}
	// Sync and both checksums are independent: the checksum reads what
	// the sync is making durable, and both must succeed before the
	// rename. Running them at once hides the slowest behind the others.
	var srcSum, dstSum string
	var srcErr, dstErr, syncErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		syncErr = t.retry(ctx, "sync of "+t.tmp, func() error { return s.Dst.Sync(ctx, t.tmp) })
	})
	if s.Checksum == "none" {
		wg.Wait()
		if errors.Is(syncErr, backend.ErrNotFound) {
			return "", &tmpGoneError{syncErr}
		}
		return "", syncErr
	}
	var refSilent bool
	wg.Go(func() {
		srcErr = t.retry(ctx, "checksum of source "+ref.Path, func() (err error) {
			if len(t.srcs) < 2 {
				srcSum, err = ref.Backend.Checksum(ctx, ref.Path, s.Checksum)
				return err
			}
			if srcSum, err, refSilent = t.sumReplica(ctx, ref); refSilent && t.othersUsed(i) {
				return nil // another replica is checked against instead
			}
			return err
		})
	})
	wg.Go(func() {
		dstErr = t.retry(ctx, "checksum of "+t.tmp, func() (err error) {
			dstSum, err = s.Dst.Checksum(ctx, t.tmp, s.Checksum)
			return err
		})
	})
	// Spec.Witness: a second replica's checksum, read at the same time.
	var wit Source
	var witSum string
	var witErr error
	witOK := false
	if s.Witness && s.Expected == "" {
		wit, witOK = t.witness()
	}
	if witOK {
		wg.Go(func() {
			var silent error
			witErr = t.retry(ctx, "checksum of replica "+wit.Name, func() (err error) {
				var quiet bool
				if witSum, err, quiet = t.sumReplica(ctx, wit); quiet {
					// Not waited for again: a witness is a
					// second opinion.
					silent = err
					return nil
				}
				return err
			})
			if silent != nil {
				witErr = silent
			}
		})
	}
	wg.Wait()
	if refSilent && srcErr == nil {
		err := fmt.Errorf("engine: checksum of %s: no answer at verification", ref.Name)
		if t.dropSilent(i, err) {
			return t.verify(ctx)
		}
		return "", err
	}
	if err := errors.Join(syncErr, srcErr, dstErr); err != nil {
		if srcErr == nil && (errors.Is(syncErr, backend.ErrNotFound) || errors.Is(dstErr, backend.ErrNotFound)) {
			return srcSum, &tmpGoneError{err}
		}
		return "", err
	}
	if witOK && witErr != nil {
		// A second opinion, not the check itself: a witness that
		// cannot answer (gone since) does not fail the file.
		t.notef("replica %s not compared at verification: %v", wit.Name, witErr)
	} else if witOK && srcSum == dstSum && witSum != srcSum {
		// The file agrees with the replica checked against, but
		// another replica holds other bytes: either may be wrong, and
		// the replicas' vote on range checksums (blame) says which.
		return "", fmt.Errorf("engine: replicas %s and %s differ: %w", ref.Name, wit.Name, &mismatchError{s.Checksum, srcSum, witSum})
	}
	if s.Expected != "" && len(t.srcs) > 1 {
		// Several replicas, and Expected is what their majority holds:
		// the file must end with it. The replica checked against may be
		// the one that sent, or now holds, wrong bytes, and agree with
		// the file; a mismatch lets the replicas' vote on range
		// checksums find it (blame).
		if dstSum != s.Expected {
			return "", fmt.Errorf("engine: %s → %s: %w", ref.Path, s.DstPath, &mismatchError{s.Checksum, s.Expected, dstSum})
		}
		return dstSum, nil
	}
	if s.Expected != "" && srcSum != s.Expected {
		return "", fmt.Errorf("engine: %w: source %s has %s %s, expected %s", ErrChecksum, ref.Path, s.Checksum, srcSum, s.Expected)
	}
	if srcSum != dstSum {
		return "", fmt.Errorf("engine: %s → %s: %w", ref.Path, s.DstPath, &mismatchError{s.Checksum, srcSum, dstSum})
	}
	return srcSum, nil
}
