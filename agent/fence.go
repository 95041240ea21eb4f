package agent

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
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
const (
	fenceXattr  = "user.sluice.fence"
	fenceMaxAge = time.Hour
)

// fences serialises the check of a file's fence with what follows it, and
// holds the fences of files whose file system cannot.
type fences struct {
	seed  maphash.Seed
	locks [64]sync.Mutex
	mu    sync.Mutex
	mem   map[string]string
	// The extended-attribute calls (xattr_*.go); tests replace them to
	// stand for a file system without any.
	get func(f *os.File, name string) (string, bool, error)
	set func(f *os.File, name, v string) (bool, error)
}

func newFences() *fences {
	return &fences{seed: maphash.MakeSeed(), mem: map[string]string{}, get: getXattr, set: setXattr}
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
func (s *Server) admit(p string, fc *backend.Fence) error {
	if fc == nil {
		return nil
	}
	fh, err := s.fs.Open(p)
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
func (s *Server) forgetFence(p string) {
	if fh, err := s.fs.Open(p); err == nil {
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
func (s *Server) fencedWrite(p string, fc *backend.Fence, write func() error) error {
	if fc == nil {
		return write()
	}
	unlock := s.fences.lock(p)
	err := s.admit(p, fc)
	unlock()
	if err != nil {
		return err
	}
	if err := write(); err != nil {
		return err
	}
	unlock = s.fences.lock(p)
	defer unlock()
	return s.admit(p, fc)
}

// fencedRename renames from to to if fence fc (nil: none) admits it, with
// from's lock held throughout, so no newer fence can land between the
// check and the rename. The fence does not follow the file.
func (s *Server) fencedRename(from, to string, fc *backend.Fence, rename func() error) error {
	return s.fencedLast(from, fc, rename, to)
}

// fencedRemove removes p if fence fc (nil: none) admits it, with p's lock
// held throughout.
func (s *Server) fencedRemove(p string, fc *backend.Fence, remove func() error) error {
	return s.fencedLast(p, fc, remove, "")
}

// fencedLast runs op, which takes the file at p away (a rename to moved,
// or a removal: moved ""), if fence fc admits it, holding p's lock from
// the check to the end of op; then what the agent held of p's fence goes.
func (s *Server) fencedLast(p string, fc *backend.Fence, op func() error, moved string) error {
	if fc == nil {
		return op()
	}
	unlock := s.fences.lock(p)
	defer unlock()
	if err := s.admit(p, fc); err != nil {
		return err
	}
	if err := op(); err != nil {
		return err
	}
	s.fences.mu.Lock()
	delete(s.fences.mem, p) // p is gone: nothing on disk to clear
	s.fences.mu.Unlock()
	if moved != "" {
		s.forgetFence(moved)
	}
	return nil
}
