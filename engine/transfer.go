package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// States reported in Progress.State.
const (
	StatePreparing = "preparing" // stat, journal, allocation
	StateCopying   = "copying"
	StatePaused    = "paused" // no worker running; the journal is written
	StateVerifying = "verifying"
	StateDone      = "done"
	StateFailed    = "failed"
)

// Progress is a snapshot of a running transfer.
type Progress struct {
	Done      int64   // bytes of the file written (and recordable in the journal)
	Size      int64   // bytes of the file (-1 until the source was stat'ed)
	Journaled int64   // bytes recorded in the last journal written
	Rate      float64 // bytes/s written, moving average over ~5 s
	CC        int     // concurrency asked for (SetCC)
	Workers   int     // workers running now
	Retries   int     // transient errors retried so far
	State     string  // one of the State constants
	Note      string  // why the transfer started over, if it did, and other remarks
}

// Result describes a finished transfer (also returned, partly filled, with
// an error).
type Result struct {
	Size     int64   // bytes of the file
	Bytes    int64   // bytes this Transfer read from the source and sent, re-sent ones included
	Seconds  float64 // wall time from Start to the end
	Resent   int64   // of Bytes, those that were not kept (interrupted sub-writes, a discarded pass)
	Retries  int     // transient errors retried
	Checksum string  // the verified checksum (hex), "" for "none"
	Algo     string  // its algorithm
	Note     string  // see Progress.Note
	Sources  int     // replicas the file came from: not dropped (see Note), and planned some bytes or sent some; 1 for one source
}

// Transfer is one running transfer; its methods are safe for concurrent
// use.
type Transfer struct {
	spec    Spec
	tmp     string
	hooks   hooks
	started time.Time

	wake       chan struct{} // capacity 1: tells the coordinator something changed
	moving     chan struct{} // closed at the first sub-write this Transfer completes
	movingOnce sync.Once
	finished   chan struct{}
	moved      atomic.Int64 // bytes read from the source (for Result.Bytes/Resent)

	mu           sync.Mutex
	state        string
	notes        []string
	inVerify     bool
	cc           int
	paused       bool
	pauseWaiters []chan error
	ctl          chan struct{} // closed and replaced to wake workers sleeping in a backoff
	running      int           // workers, all sources together
	srcs         []*source     // the replicas (one without Spec.Sources)
	inflight     []*piece
	done         ranges
	doneN        int64 // done.total()
	pulling      int64 // bytes of the pulls in flight (subWrites with tail)
	base         int64 // doneN when the current pass started
	dirty        bool  // done changed since the last journal write
	journaled    int64
	size         int64
	srcMtime     time.Time
	retries      int
	meter        meter
	steals       int   // ranges taken over from slower replicas (Spec.Steal)
	stolen       int64 // their bytes
	werr         error // first error of a worker; ends the copy phase
	wcancel      context.CancelFunc
	result       Result
	err          error
}

// hooks are test-only knobs; Start uses none.
type hooks struct {
	// noExitJournal skips the journal write when the transfer stops on an
	// error or cancellation, as if the process had been killed.
	noExitJournal bool
	// statTimeout replaces replicaStatTimeout (0: keep it).
	statTimeout time.Duration
}

// piece is a partial transfer: the bytes [off, end) of the file still to
// copy. off advances as sub-writes complete; cur is the end of the
// sub-write in flight, below which a steal must not cut; end shrinks when
// another worker steals the tail. All three are guarded by Transfer.mu.
type piece struct {
	off, cur, end int64
	src           int // index in Transfer.srcs of the replica that sends it
}

// Start checks s and starts the transfer in the background. ctx bounds the
// whole transfer: cancelling it stops the workers (abandoning the
// sub-writes in flight), writes the journal and makes Wait return the
// cancellation.
func Start(ctx context.Context, s Spec) (*Transfer, error) {
	return start(ctx, s, hooks{})
}

func start(ctx context.Context, s Spec, h hooks) (*Transfer, error) {
	s, err := s.normalize()
	if err != nil {
		return nil, err
	}
	t := &Transfer{
		spec:     s,
		tmp:      TempNameFor(s.DstPath, s.Tag),
		hooks:    h,
		started:  time.Now(),
		wake:     make(chan struct{}, 1),
		moving:   make(chan struct{}),
		finished: make(chan struct{}),
		state:    StatePreparing,
		cc:       s.CC,
		ctl:      make(chan struct{}),
		size:     -1,
		srcs:     newSources(s),
	}
	go t.run(ctx)
	return t, nil
}

// Run is Start followed by Wait.
func Run(ctx context.Context, s Spec) (Result, error) {
	t, err := Start(ctx, s)
	if err != nil {
		return Result{}, err
	}
	return t.Wait()
}

// Wait blocks until the transfer ends (it ends on its own, or when the
// context given to Start is cancelled) and returns its outcome.
func (t *Transfer) Wait() (Result, error) {
	<-t.finished
	return t.result, t.err
}

// Done is closed when the transfer has ended.
func (t *Transfer) Done() <-chan struct{} { return t.finished }

// Moving is closed once this Transfer has written its first bytes (SC'15
// §4.5: the sign that a replacement has started and its victim may stop).
func (t *Transfer) Moving() <-chan struct{} { return t.moving }

// Progress returns a snapshot; it does not block on I/O.
func (t *Transfer) Progress() Progress {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return Progress{
		Done:      t.doneN,
		Size:      t.size,
		Journaled: t.journaled,
		Rate:      t.meter.rate(now),
		CC:        t.cc,
		Workers:   t.running,
		Retries:   t.retries,
		State:     t.state,
		Note:      strings.Join(t.notes, "; "),
	}
}

// SetCC changes the concurrency while the transfer runs: more workers start
// at once (stealing halves of chunks in flight if the queue is empty), or
// workers stop after their current sub-write.
func (t *Transfer) SetCC(n int) error {
	if n < 1 {
		return fmt.Errorf("engine: %w: concurrency %d", backend.ErrInvalid, n)
	}
	if t.spec.whole {
		n = 1 // one step moves the whole file
	}
	t.mu.Lock()
	if n < t.cc {
		t.broadcastLocked()
	}
	t.cc = n
	t.mu.Unlock()
	t.signal()
	return nil
}

// Pause stops every worker at a sub-write boundary (abandoning none), writes
// the journal, and returns once both happened: the transfer then moves no
// bytes until Resume. This is preemption: the state a later Resume (or a
// new Start with the same journal, in another process) needs is on disk.
// If ctx ends first, Pause returns its error but the pause stays requested.
// During verification there are no workers and Pause returns nil at once
// (the transfer finishes on its own); on an ended transfer it returns
// ErrFinished.
func (t *Transfer) Pause(ctx context.Context) error {
	t.mu.Lock()
	select {
	case <-t.finished:
		t.mu.Unlock()
		return ErrFinished
	default:
	}
	if t.inVerify {
		t.mu.Unlock()
		return nil
	}
	t.paused = true
	t.broadcastLocked()
	ch := make(chan error, 1)
	t.pauseWaiters = append(t.pauseWaiters, ch)
	t.mu.Unlock()
	t.signal()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("engine: pause: %w", ctx.Err())
	}
}

// errResumed answers a Pause overtaken by a Resume.
var errResumed = errors.New("engine: resumed before the pause completed")

// Resume undoes Pause.
func (t *Transfer) Resume() {
	t.mu.Lock()
	t.paused = false
	if t.state == StatePaused {
		t.state = StateCopying
	}
	for _, ch := range t.pauseWaiters {
		ch <- errResumed
	}
	t.pauseWaiters = nil
	t.mu.Unlock()
	t.signal()
}

func (t *Transfer) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Transfer) broadcastLocked() {
	close(t.ctl)
	t.ctl = make(chan struct{})
}

func (t *Transfer) notef(format string, a ...any) {
	t.mu.Lock()
	t.notes = append(t.notes, fmt.Sprintf(format, a...))
	t.mu.Unlock()
}

func (t *Transfer) setState(s string) {
	t.mu.Lock()
	t.state = s
	t.mu.Unlock()
}

func (t *Transfer) run(ctx context.Context) {
	err := t.execute(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state = StateDone
	if err != nil {
		t.state = StateFailed
	}
	for _, ch := range t.pauseWaiters {
		ch <- ErrFinished
	}
	t.pauseWaiters = nil
	t.result.Size = t.size
	t.result.Bytes = t.moved.Load()
	t.result.Resent = t.result.Bytes - (t.doneN - t.base)
	t.result.Seconds = time.Since(t.started).Seconds()
	t.result.Retries = t.retries
	t.result.Sources = t.usedLocked()
	if t.steals > 0 {
		t.notes = append(t.notes, fmt.Sprintf("%d ranges (%d bytes) taken over from slower replicas", t.steals, t.stolen))
	}
	t.result.Note = strings.Join(t.notes, "; ")
	t.err = err
	close(t.finished)
}

// execute runs the passes: normally one, two if the first ends in a
// checksum mismatch.
func (t *Transfer) execute(ctx context.Context) error {
	s := &t.spec
	for pass := 1; ; pass++ {
		if err := t.prepare(ctx, pass); err != nil {
			return err
		}
		if err := t.copyAll(ctx); err != nil {
			return err
		}
		sum, err := t.verify(ctx)
		var mm *mismatchError
		// With several replicas, one that sent wrong bytes is dropped and
		// its ranges fetched from the others, as often as there are
		// replicas to drop.
		for errors.As(err, &mm) && len(t.srcs) > 1 {
			n, berr := t.blame(ctx)
			if berr != nil {
				return berr
			}
			if n == 0 {
				break
			}
			if err := t.checkpoint(ctx); err != nil {
				return fmt.Errorf("engine: %w", err)
			}
			t.mu.Lock()
			t.inVerify = false
			t.mu.Unlock()
			if err := t.copyAll(ctx); err != nil {
				return err
			}
			mm = nil
			sum, err = t.verify(ctx)
		}
		if errors.As(err, &mm) || errors.Is(err, ErrSourceChanged) || errors.Is(err, ErrChecksum) {
			// The temporary file is useless now: a rerun must not
			// resume from it.
			t.discard(ctx)
		}
		if mm != nil && pass == 1 {
			t.notef("checksum mismatch (%s: source %s, destination %s): copied again from scratch", s.Checksum, mm.src, mm.dst)
			continue
		}
		var gone *tmpGoneError
		if errors.As(err, &gone) {
			// Another run of this file (of a server that died, whose
			// last requests the agent still carried out) may have put
			// it in place: done if the file there is the verified one.
			if ok, cerr := t.renamedAlready(ctx, sum); cerr == nil && ok {
				t.notef("already put in place by another run of this file")
				return t.placed(ctx, sum)
			}
			return err
		}
		if err != nil {
			return err
		}
		if s.Commit != nil {
			if err := s.Commit(ctx); err != nil {
				return fmt.Errorf("engine: not putting %s in place: %w", s.DstPath, err)
			}
		}
		if err := t.retry(ctx, "renaming "+t.tmp+" to "+s.DstPath, func() error {
			err := t.rename(ctx)
			if errors.Is(err, backend.ErrNotFound) {
				// An earlier attempt may have renamed the file and
				// lost its answer (the destination restarted, say),
				// or another run of the file did (a server that died,
				// whose last rename the agent still carried out).
				ok, cerr := t.renamedAlready(ctx, sum)
				switch {
				case ok:
					return nil // the verified file is in place
				case cerr != nil && !backend.Permanent(cerr):
					return cerr // cannot tell yet: try again
				}
			}
			return err
		}); err != nil {
			return err
		}
		return t.placed(ctx, sum)
	}
}

// rename puts the temporary file in place: over whatever is at the
// destination, or with Spec.NoReplace never over anything
// (ErrDestinationExists).
func (t *Transfer) rename(ctx context.Context) error {
	s := &t.spec
	if s.PreserveModTime {
		t.mu.Lock()
		mtime := t.srcMtime
		t.mu.Unlock()
		ms, ok := s.Dst.(backend.ModTimeSetter)
		switch {
		case mtime.IsZero():
			t.notef("modification time not preserved: the source gave none")
		case !ok:
			t.notef("modification time not preserved: the destination cannot set one")
		default:
			if err := ms.SetModTime(ctx, t.tmp, mtime); err != nil {
				return fmt.Errorf("engine: setting the source's modification time on %s: %w", t.tmp, err)
			}
		}
	}
	if !s.NoReplace {
		return s.Dst.Rename(ctx, t.tmp, s.DstPath)
	}
	var err error
	if nr, ok := s.Dst.(backend.NoReplaceRenamer); ok {
		err = nr.RenameNoReplace(ctx, t.tmp, s.DstPath)
	} else {
		// No atomic form: a stat just before, the best this backend
		// allows.
		_, err = s.Dst.Stat(ctx, s.DstPath)
		switch {
		case err == nil:
			err = backend.ErrExist
		case errors.Is(err, backend.ErrNotFound):
			err = s.Dst.Rename(ctx, t.tmp, s.DstPath)
		}
	}
	if errors.Is(err, backend.ErrExist) {
		return fmt.Errorf("%w: %s appeared during the transfer; not replaced (%w)", ErrDestinationExists, s.DstPath, err)
	}
	return err
}

// placed finishes a transfer whose verified file (checksum sum) is in
// place: the journal goes, the result gets the checksum.
func (t *Transfer) placed(ctx context.Context, sum string) error {
	s := &t.spec
	if !s.KeepJournal {
		if err := s.Journals.Delete(context.WithoutCancel(ctx), s.Journal); err != nil {
			// The file is in place and verified; a stale journal only
			// makes a rerun start over.
			t.notef("removing journal: %v", err)
		}
	}
	t.mu.Lock()
	t.result.Checksum, t.result.Algo = sum, s.Checksum
	t.mu.Unlock()
	return nil
}

// prepare stats the source, then resumes from the journal or allocates a
// fresh temporary file, and queues the missing chunks.
func (t *Transfer) prepare(ctx context.Context, pass int) error {
	s := &t.spec
	t.setState(StatePreparing)
	var fi backend.FileInfo
	if len(t.srcs) > 1 {
		var err error
		if fi, err = t.statAll(ctx); err != nil {
			return err
		}
	} else if err := t.retry(ctx, "stat of source "+s.SrcPath, func() (err error) {
		fi, err = s.Src.Stat(ctx, s.SrcPath)
		return err
	}); err != nil {
		return err
	}
	if len(t.srcs) == 1 {
		t.srcs[0].mtime = fi.ModTime
	}
	if fi.IsDir {
		return fmt.Errorf("engine: %w: source %s is a directory", backend.ErrInvalid, s.SrcPath)
	}
	if pass == 1 && s.Size >= 0 && fi.Size != s.Size {
		return fmt.Errorf("engine: %w: source %s is %d bytes, expected %d", ErrSourceChanged, s.SrcPath, fi.Size, s.Size)
	}
	var dfi backend.FileInfo
	dstThere := false
	err := t.retry(ctx, "stat of destination "+s.DstPath, func() (err error) {
		dfi, err = s.Dst.Stat(ctx, s.DstPath)
		dstThere = err == nil
		if errors.Is(err, backend.ErrNotFound) {
			dfi, err = backend.FileInfo{}, nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if dfi.IsDir {
		return fmt.Errorf("engine: %w: destination %s is a directory", backend.ErrInvalid, s.DstPath)
	}
	if s.NoReplace && dstThere {
		return fmt.Errorf("engine: %w: %s is there already; not replaced", ErrDestinationExists, s.DstPath)
	}
	t.mu.Lock()
	t.size, t.srcMtime = fi.Size, fi.ModTime
	t.mu.Unlock()

	if s.Begin != nil {
		if err := s.Begin(ctx); err != nil {
			return fmt.Errorf("engine: not starting %s: %w", s.DstPath, err)
		}
	}
	done, why, err := t.resumable(ctx, fi, pass)
	if err != nil {
		return err
	}
	if done == nil {
		if why != "" {
			t.notef("%s: started over", why)
		}
		// The old journal goes before the temporary file is touched: a
		// crash in between must not leave it describing a fresh,
		// empty file as partly done.
		if err := s.Journals.Delete(ctx, s.Journal); err != nil {
			return fmt.Errorf("engine: removing journal: %w", err)
		}
		if dir := path.Dir(s.DstPath); dir != "." && dir != "/" {
			if err := t.retry(ctx, "creating directory "+dir, func() error {
				if err := s.Dst.Mkdir(ctx, dir); err != nil && !errors.Is(err, backend.ErrExist) {
					return err
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if err := t.retry(ctx, "allocating "+t.tmp, func() error {
			// Remove first so no stale bytes of an earlier attempt
			// survive in the allocated file.
			if err := s.Dst.Remove(ctx, t.tmp); err != nil && !errors.Is(err, backend.ErrNotFound) {
				return err
			}
			if s.wholeDst {
				// Written whole by the one step, never allocated; an
				// empty file has no step: its write is this one.
				if fi.Size == 0 {
					return s.Dst.WriteAt(ctx, t.tmp, 0, strings.NewReader(""), 0)
				}
				return nil
			}
			return s.Dst.Truncate(ctx, t.tmp, fi.Size)
		}); err != nil {
			return err
		}
	} else {
		t.notef("resumed with %d of %d bytes done", done.total(), fi.Size)
	}

	t.mu.Lock()
	t.done = done
	t.doneN = done.total()
	t.base = t.doneN
	t.dirty = true
	for _, src := range t.srcs {
		src.queue = src.queue[:0]
		src.reset()
	}
	t.spreadLocked(done.missing(fi.Size))
	t.mu.Unlock()
	// The first journal write doubles as a check that the journal can be
	// written at all: better to fail now than to find out after a crash.
	if err := t.checkpoint(ctx); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// resumable returns the done ranges of a usable journal (non-nil, possibly
// empty), or nil and why the transfer must start over ("" if there simply
// is no journal).
func (t *Transfer) resumable(ctx context.Context, fi backend.FileInfo, pass int) (ranges, string, error) {
	s := &t.spec
	if pass > 1 {
		return nil, "", nil
	}
	if s.whole {
		if _, ok, _ := loadJournal(ctx, s.Journals, s.Journal); ok {
			return nil, "a whole-file copy cannot resume", nil
		}
		return nil, "", nil
	}
	j, ok, err := loadJournal(ctx, s.Journals, s.Journal)
	switch {
	case err != nil:
		return nil, err.Error(), nil
	case !ok:
		return nil, "", nil
	case j.Src != s.SrcPath || j.Dst != s.DstPath:
		return nil, fmt.Sprintf("journal %s is of %s → %s", s.Journal, j.Src, j.Dst), nil
	case j.Size != fi.Size:
		return nil, fmt.Sprintf("source size changed since the journal was written (%d → %d bytes)", j.Size, fi.Size), nil
	case len(t.srcs) > 1 && len(j.Replicas) > 0:
		if why := t.replicasChanged(j.Replicas); why != "" {
			return nil, why, nil
		}
	case !fi.ModTime.IsZero() && !j.ModTime.Equal(fi.ModTime):
		return nil, "source modified since the journal was written", nil
	}
	var tfi backend.FileInfo
	err = t.retry(ctx, "stat of "+t.tmp, func() (err error) {
		tfi, err = s.Dst.Stat(ctx, t.tmp)
		return err
	})
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return nil, "temporary file " + t.tmp + " is missing", nil
	case err != nil:
		return nil, "", err
	case tfi.Size != fi.Size:
		return nil, fmt.Sprintf("temporary file %s is %d bytes, expected %d", t.tmp, tfi.Size, fi.Size), nil
	}
	done := j.ranges()
	if done == nil {
		done = ranges{}
	}
	return done, "", nil
}

// checkpoint writes the journal if anything changed since the last write.
// With Spec.Durable it first syncs the destination, and records only the
// ranges done before that sync.
func (t *Transfer) checkpoint(ctx context.Context) error {
	t.mu.Lock()
	if !t.dirty {
		t.mu.Unlock()
		return nil
	}
	snap, size, mtime := t.done.clone(), t.size, t.srcMtime
	var replicas map[string]time.Time
	if len(t.srcs) > 1 {
		for _, src := range t.srcs {
			if !src.mtime.IsZero() {
				if replicas == nil {
					replicas = map[string]time.Time{}
				}
				replicas[src.Name] = src.mtime
			}
		}
	}
	t.dirty = false
	t.mu.Unlock()
	err := error(nil)
	if t.spec.Durable {
		if err = t.spec.Dst.Sync(ctx, t.tmp); err != nil {
			err = fmt.Errorf("syncing %s before a checkpoint: %w", t.tmp, err)
		}
	}
	if err == nil {
		// Journals are written on the way out too, after ctx ended.
		j := newJournal(t.spec.SrcPath, t.spec.DstPath, size, mtime, snap)
		j.Replicas = replicas
		err = saveJournal(context.WithoutCancel(ctx), t.spec.Journals, t.spec.Journal, j)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.dirty = true
		return err
	}
	t.journaled = snap.total()
	return nil
}

// copyAll is the coordinator of the copy phase: it keeps CC workers
// running while there is work, writes checkpoints, answers pauses, and
// returns when every byte is done (nil) or the transfer stops (the error).
// The journal is written on the way out either way.
func (t *Transfer) copyAll(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.mu.Lock()
	t.wcancel, t.werr = cancel, nil
	t.meter.reset(time.Now())
	t.mu.Unlock()
	tick := time.NewTicker(t.spec.CheckpointEvery)
	defer tick.Stop()
	ctxDone := ctx.Done()
	for {
		t.mu.Lock()
		stopping := t.werr != nil || ctx.Err() != nil
		if !stopping && !t.paused {
			for i, src := range t.srcs {
				for src.dead == nil && src.running < t.cc {
					p := t.nextLocked(i)
					if p == nil {
						break
					}
					src.started()
					src.running++
					t.running++
					go t.work(wctx, p)
				}
			}
		}
		t.state = StateCopying
		if t.paused && t.running == 0 {
			t.state = StatePaused
		}
		if t.running == 0 {
			switch {
			case stopping:
				err := t.werr
				if ctx.Err() != nil {
					err = fmt.Errorf("engine: %s → %s interrupted: %w", t.spec.SrcPath, t.spec.DstPath, ctx.Err())
				}
				t.mu.Unlock()
				if !t.hooks.noExitJournal {
					// The journal is a local file: write it even
					// though ctx is done (a Durable sync gets a
					// short grace period of its own).
					jctx, jcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
					jerr := t.checkpoint(jctx)
					jcancel()
					if jerr != nil {
						err = fmt.Errorf("%w (and the journal could not be written: %v)", err, jerr)
					}
				}
				return err
			case t.paused:
				if ws := t.pauseWaiters; len(ws) > 0 {
					t.pauseWaiters = nil
					t.mu.Unlock()
					err := t.checkpoint(ctx)
					for _, ch := range ws {
						ch <- err
					}
					continue
				}
			case t.queuedLocked() == 0:
				t.inVerify = true
				t.mu.Unlock()
				if err := t.checkpoint(ctx); err != nil {
					// Only a crash during verification would need
					// it; go on.
					t.notef("final checkpoint failed: %v", err)
				}
				return nil
			}
		}
		t.mu.Unlock()
		select {
		case <-t.wake:
		case <-tick.C:
			if err := t.checkpoint(ctx); err != nil && ctx.Err() == nil {
				if errors.Is(err, ErrFenced) {
					t.mu.Lock()
					if t.werr == nil {
						t.werr = fmt.Errorf("engine: %w", err)
						t.wcancel()
					}
					t.mu.Unlock()
					continue
				}
				t.notef("checkpoint failed: %v", err)
			}
		case <-ctxDone:
			// The workers see the cancellation through wctx; wait
			// for them to leave.
			ctxDone = nil
		}
	}
}

// nextLocked hands out the next piece for source i: the front of its
// queue; or else, with one source, the second half of the largest piece in
// flight if that is worth a partial transfer of its own (at least ChunkMin
// on each side); with several and Spec.Steal, the tail of the source
// expected to finish last (stealLocked).
func (t *Transfer) nextLocked(i int) *piece {
	var p *piece
	src := t.srcs[i]
	switch {
	case len(src.queue) > 0:
		p = src.queue[0]
		src.queue = src.queue[1:]
	case len(t.srcs) > 1:
		if !t.spec.Steal {
			return nil
		}
		if p = t.stealLocked(i); p == nil {
			return nil
		}
	default:
		var best *piece
		var rem int64
		for _, q := range t.inflight {
			if r := q.end - max(q.cur, q.off); r > rem {
				best, rem = q, r
			}
		}
		if best == nil || rem < t.stealMin(src) {
			return nil
		}
		mid := max(best.cur, best.off) + rem/2
		p = &piece{off: mid, cur: mid, end: best.end}
		best.end = mid
	}
	p.src = i
	t.inflight = append(t.inflight, p)
	return p
}

// stealMin is the least a piece in flight must have left for an idle
// worker to take half of it. A piece streamed from one OpenRange is split
// only if each half is worth a partial transfer of its own (ChunkMin): the
// victim's range request then ends early, and closing it unread costs its
// connection. A piece pulled by the destination is one request per
// sub-write anyway (shrinking at the end, subWrites), so a split costs the
// stealer one round trip and no connection: down to halves of the least
// step it pays. Without it the end of a copy over a WAN path ran on a few
// streams, each finishing a chunk of up to 2·ChunkMin alone (0.3-0.5 s of
// a 6 s copy at 1 Gb/s and 50 ms).
func (t *Transfer) stealMin(src *source) int64 {
	if src.Pull != nil {
		return min(2*t.spec.ChunkMin, 2*min(t.spec.SubWrite, max(tailStep, t.spec.PullMin)))
	}
	return 2 * t.spec.ChunkMin
}

func (t *Transfer) dropInflightLocked(p *piece) {
	for i, q := range t.inflight {
		if q == p {
			t.inflight = append(t.inflight[:i], t.inflight[i+1:]...)
			return
		}
	}
}

// leaveLocked ends a worker that holds p: the rest of p goes back to the
// front of its source's queue, so holes in the file stay few (or to the
// other sources, if its source was dropped).
func (t *Transfer) leaveLocked(p *piece) {
	t.running--
	t.srcs[p.src].running--
	t.dropInflightLocked(p)
	if p.off < p.end {
		p.cur = p.off
		if t.srcs[p.src].dead != nil {
			t.spreadLocked([]span{{p.off, p.end}})
			return
		}
		t.srcs[p.src].queue = append([]*piece{p}, t.srcs[p.src].queue...)
	}
}

// shouldStopLocked: a worker of p stops at its next sub-write boundary when
// the transfer is paused, its source has more workers than asked for or
// was dropped, or the transfer is ending.
func (t *Transfer) shouldStopLocked(ctx context.Context, p *piece) bool {
	src := t.srcs[p.src]
	return t.paused || src.running > t.cc || src.dead != nil || t.werr != nil || ctx.Err() != nil
}

// retry runs one operation (not a chunk) with the retry policy.
func (t *Transfer) retry(ctx context.Context, what string, f func() error) error {
	h := fnv.New64a()
	h.Write([]byte(what))
	key := h.Sum64() // spreads the jitter of different operations
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("engine: %s: %w", what, cerr)
		}
		if backend.Permanent(err) || errors.Is(err, ErrDestinationExists) {
			return fmt.Errorf("engine: %s: %w", what, err)
		}
		if attempt >= t.spec.Retry.Attempts {
			return fmt.Errorf("engine: %s: %d attempts in a row failed: %w", what, attempt, err)
		}
		t.mu.Lock()
		t.retries++
		t.mu.Unlock()
		if err := sleep(ctx, t.spec.Retry.backoff(attempt, key), nil); err != nil {
			return fmt.Errorf("engine: %s: %w", what, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// discard removes the temporary file and the journal after a failed
// verification; errors only leave garbage a rerun replaces anyway.
func (t *Transfer) discard(ctx context.Context) {
	if err := t.spec.Dst.Remove(ctx, t.tmp); err != nil && !errors.Is(err, backend.ErrNotFound) {
		t.notef("removing %s: %v", t.tmp, err)
	}
	if err := t.spec.Journals.Delete(context.WithoutCancel(ctx), t.spec.Journal); err != nil {
		t.notef("removing journal: %v", err)
	}
	t.mu.Lock()
	t.inVerify = false
	t.mu.Unlock()
}

// renamedAlready reports whether the destination path holds the verified
// file: the same size, and the checksum the verification computed (with
// checksums off, the same size only). An error means it could not tell.
func (t *Transfer) renamedAlready(ctx context.Context, sum string) (bool, error) {
	s := &t.spec
	fi, err := s.Dst.Stat(ctx, s.DstPath)
	if err != nil {
		return false, err
	}
	if fi.IsDir || fi.Size != t.sizeOf() {
		return false, nil
	}
	if s.Checksum == "none" || sum == "" {
		return true, nil
	}
	got, err := s.Dst.Checksum(ctx, s.DstPath, s.Checksum)
	if err != nil {
		return false, err
	}
	return got == sum, nil
}
