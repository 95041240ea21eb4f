package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// Fencing. Several servers may schedule transfers to this agent, and a
// server that stalls past its lease (a long pause, a partition from the
// database) can wake up believing it still owns a task another server has
// taken over. The servers fence their own writes in the store; the last
// step, putting a verified file in place, happens here. So a request may
// carry a fence (backend.Fence: partition and lease term), and the agent
// remembers, per file, the newest fence that wrote it: a write, rename or
// removal under an older fence of the same partition is refused with 409
// (kind "fenced"), and that server leaves the file to its new owner.
//
// The fence is kept with the file, as an extended attribute, so it lasts
// as long as the file and across restarts of the agent; where the file
// system keeps no extended attributes it is kept in memory. A fence older
// than fenceMaxAge is not enforced: it outlives any pause a lease can
// cover, and a database started afresh (whose terms begin again at 1)
// must not find its files locked forever.
//
// A check before a write is not enough on its own: a stale server's write
// admitted a moment before the new owner's first request would go on
// writing into the new owner's file. So the agent keeps the writes in
// progress under each fence, and a newer fence of the same partition
// stops the older ones (their readers fail with a fenced error) and waits
// until they have returned before it goes on: no byte of a superseded
// writer lands after the new owner's first write, rename or removal.
const (
	fenceXattr  = "user.sluice.fence"
	fenceMaxAge = time.Hour
	// staleWriteWait bounds how long a newer fence waits for the writes
	// it stopped (a write blocked in the file system cannot be stopped);
	// past it the newer writer goes on, and the end-to-end checksum is
	// what catches a stray byte.
	staleWriteWait = 10 * time.Second
)

// fences serialises the check of a file's fence with what follows it, and
// holds the fences of files whose file system cannot.
type fences struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
	mu    sync.Mutex
	mem   map[string]string
	// live is the fenced writes in progress, per file.
	live map[string][]*liveWrite
	// The extended-attribute calls (xattr_*.go); tests replace them to
	// stand for a file system without any.
	get func(f *os.File, name string) (string, bool, error)
	set func(f *os.File, name, v string) (bool, error)
}

func newFences() *fences {
	return &fences{seed: maphash.MakeSeed(), mem: map[string]string{}, live: map[string][]*liveWrite{}, get: getXattr, set: setXattr}
}

// liveWrite is a fenced write in progress.
type liveWrite struct {
	fc     backend.Fence
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the write has returned
}

// supersede stops the writes in progress into p under fences of fc's
// partition older than fc, and returns them to be waited for.
func (f *fences) supersede(p string, fc backend.Fence) []*liveWrite {
	f.mu.Lock()
	defer f.mu.Unlock()
	var stale []*liveWrite
	for _, w := range f.live[p] {
		if w.fc.Partition == fc.Partition && w.fc.Term < fc.Term {
			w.cancel(&statusError{http.StatusConflict, kindFenced,
				fmt.Errorf("%w: term %d of %s took over %s during the write", backend.ErrFenced, fc.Term, fc.Partition, p)})
			stale = append(stale, w)
		}
	}
	return stale
}

// enter records a write into p under fc, stopped by cancel.
func (f *fences) enter(p string, fc backend.Fence, cancel context.CancelCauseFunc) *liveWrite {
	w := &liveWrite{fc: fc, cancel: cancel, done: make(chan struct{})}
	f.mu.Lock()
	f.live[p] = append(f.live[p], w)
	f.mu.Unlock()
	return w
}

// leave records that write w into p has returned.
func (f *fences) leave(p string, w *liveWrite) {
	f.mu.Lock()
	ws := f.live[p]
	for i := range ws {
		if ws[i] == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(f.live, p)
	} else {
		f.live[p] = ws
	}
	f.mu.Unlock()
	close(w.done)
}

// admitNewest takes p's lock and admits fc (nil: none), first stopping
// and waiting out the writes in progress under older fences of its
// partition (without the lock: they take it to finish). It returns the
// unlock, or the refusal with the lock released.
func (s *Server) admitNewest(ctx context.Context, fs *file.Backend, p string, fc *backend.Fence) (func(), error) {
	wait := fc != nil // false once a superseded write outlived staleWriteWait
	for {
		unlock := s.fences.lock(p)
		if err := s.admit(fs, p, fc); err != nil {
			unlock()
			return nil, err
		}
		if !wait {
			return unlock, nil
		}
		stale := s.fences.supersede(p, *fc)
		if len(stale) == 0 {
			return unlock, nil
		}
		unlock()
		timer := time.NewTimer(staleWriteWait)
		for _, w := range stale {
			select {
			case <-w.done:
			case <-timer.C:
				s.log.Warn("a superseded write did not stop", "path", p, "fence", w.fc.String(), "newest", fc.String())
				wait = false
			case <-ctx.Done():
				timer.Stop()
				return nil, ctx.Err()
			}
			if !wait {
				break
			}
		}
		timer.Stop()
	}
}

// fencedReader is a write's data, which stops with the write's cause
// once a newer fence supersedes it. The context is checked after each
// read as well: a read that was waiting for data when the write was
// superseded must not hand its bytes on to be written.
type fencedReader struct {
	ctx context.Context
	r   io.Reader
}

func (f fencedReader) Read(b []byte) (int, error) {
	if f.ctx.Err() != nil {
		return 0, context.Cause(f.ctx)
	}
	n, err := f.r.Read(b)
	if f.ctx.Err() != nil {
		return 0, context.Cause(f.ctx)
	}
	return n, err
}

// lock takes the lock of path p's stripe and returns its unlock.
func (f *fences) lock(p string) func() {
	m := &f.locks[maphash.String(f.seed, p)%uint64(len(f.locks))]
	m.Lock()
	return m.Unlock
}

// requestFence is the request's fence, if it has one.
func requestFence(r *http.Request) (*backend.Fence, error) {
	v := r.Header.Get(sluice.FenceHeader)
	if v == "" {
		return nil, nil
	}
	f, err := backend.ParseFence(v)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// bodyFence is a batch entry's fence, if it has one.
func bodyFence(v string) (*backend.Fence, error) {
	if v == "" {
		return nil, nil
	}
	f, err := backend.ParseFence(v)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// admit checks fence fc (nil: none) against the newest fence file p has
// been written under and records fc when it is newer. A file that does
// not exist has no fence. Call it with p's lock held.
func (s *Server) admit(fs *file.Backend, p string, fc *backend.Fence) error {
	if fc == nil {
		return nil
	}
	fh, err := fs.Open(p)
	if errors.Is(err, backend.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	stored, inMem, err := s.readFence(fh, p)
	if err != nil {
		return err
	}
	now := s.now()
	if old, at, ok := parseStoredFence(stored); ok && old.Partition == fc.Partition && now.Sub(at) < fenceMaxAge {
		if fc.Term < old.Term {
			s.log.Warn("fenced", "path", p, "fence", fc.String(), "newest", old.String())
			return &statusError{http.StatusConflict, kindFenced,
				fmt.Errorf("%w: %s was written under term %d of %s, the request has term %d", backend.ErrFenced, p, old.Term, fc.Partition, fc.Term)}
		}
		if fc.Term == old.Term && now.Sub(at) < fenceMaxAge/4 {
			return nil // recorded recently enough
		}
	}
	v := fc.String() + "@" + strconv.FormatInt(now.Unix(), 10)
	if !inMem {
		ok, err := s.fences.set(fh, fenceXattr, v)
		if err != nil {
			return fmt.Errorf("recording the fence of %s: %w", p, err)
		}
		if ok {
			return nil
		}
	}
	s.fences.mu.Lock()
	s.fences.mem[p] = v
	s.fences.mu.Unlock()
	return nil
}

// readFence returns the fence stored for the open file fh at p ("" if
// none), and whether it lives in memory because the file system keeps no
// extended attributes.
func (s *Server) readFence(fh *os.File, p string) (string, bool, error) {
	v, ok, err := s.fences.get(fh, fenceXattr)
	if err != nil {
		return "", false, fmt.Errorf("reading the fence of %s: %w", p, err)
	}
	if ok && v != "" {
		return v, false, nil
	}
	// None on the file: one kept in memory, if setting it failed (a file
	// system without extended attributes, or another user's file).
	s.fences.mu.Lock()
	defer s.fences.mu.Unlock()
	if m, held := s.fences.mem[p]; held {
		return m, true, nil
	}
	return "", !ok, nil
}

// forgetFence drops what the agent holds of p's fence once the file is
// gone or has been put in place (a fence on a user's file means nothing).
func (s *Server) forgetFence(fs *file.Backend, p string) {
	if fh, err := fs.Open(p); err == nil {
		removeXattr(fh, fenceXattr)
		fh.Close()
	}
	s.fences.mu.Lock()
	delete(s.fences.mem, p)
	s.fences.mu.Unlock()
}

// parseStoredFence reads TERM:PARTITION@UNIX.
func parseStoredFence(v string) (backend.Fence, time.Time, bool) {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return backend.Fence{}, time.Time{}, false
	}
	f, err := backend.ParseFence(v[:i])
	if err != nil {
		return backend.Fence{}, time.Time{}, false
	}
	sec, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil {
		return backend.Fence{}, time.Time{}, false
	}
	return f, time.Unix(sec, 0), true
}

// fencedWrite runs a write into p (which may create it) under fence fc:
// the fence is checked first and recorded on the file after. The lock is
// not held during the write: ranges of one file are written in parallel.
// write gets a context that a newer fence cancels (see supersede); its
// data must be read through fencedReader or stop with that context, so
// that it stops too, with a fenced error.
func (s *Server) fencedWrite(ctx context.Context, fs *file.Backend, p string, fc *backend.Fence, write func(context.Context) error) error {
	if fc == nil {
		return write(ctx)
	}
	unlock, err := s.admitNewest(ctx, fs, p, fc)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lw := s.fences.enter(p, *fc, cancel)
	unlock()
	err = write(wctx)
	s.fences.leave(p, lw)
	if err != nil {
		// The first cancellation's cause is the one kept: fenced only
		// if a newer fence stopped the write before anything else did.
		if cause := context.Cause(wctx); errors.Is(cause, backend.ErrFenced) {
			s.log.Warn("fenced", "path", p, "fence", fc.String(), "err", cause)
			return cause
		}
		return err
	}
	unlock = s.fences.lock(p)
	defer unlock()
	return s.admit(fs, p, fc)
}

// fencedRename renames from to to if fence fc (nil: none) admits it, with
// from's lock held throughout, so no newer fence can land between the
// check and the rename. The fence does not follow the file.
func (s *Server) fencedRename(ctx context.Context, fs *file.Backend, from, to string, fc *backend.Fence, rename func() error) error {
	return s.fencedLast(ctx, fs, from, fc, rename, to)
}

// fencedRemove removes p if fence fc (nil: none) admits it, with p's lock
// held throughout.
func (s *Server) fencedRemove(ctx context.Context, fs *file.Backend, p string, fc *backend.Fence, remove func() error) error {
	return s.fencedLast(ctx, fs, p, fc, remove, "")
}

// fencedLast runs op, which takes the file at p away (a rename to moved,
// or a removal: moved ""), if fence fc admits it, holding p's lock from
// the check to the end of op; then what the agent held of p's fence goes.
func (s *Server) fencedLast(ctx context.Context, fs *file.Backend, p string, fc *backend.Fence, op func() error, moved string) error {
	if fc == nil {
		return op()
	}
	unlock, err := s.admitNewest(ctx, fs, p, fc)
	if err != nil {
		return err
	}
	defer unlock()
	if err := op(); err != nil {
		return err
	}
	s.fences.mu.Lock()
	delete(s.fences.mem, p) // p is gone: nothing on disk to clear
	s.fences.mu.Unlock()
	if moved != "" {
		s.forgetFence(fs, moved)
	}
	return nil
}
