package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
)

// fault wraps a backend and injects faults, throttling and counting into
// the calls the engine makes. Zero fields inject nothing.
type fault struct {
	backend.Backend

	mu sync.Mutex
	// failWrite is asked before each WriteAt (call numbers from 1); an
	// error fails the call before any byte is written.
	failWrite func(call int) error
	writes    int
	// corrupt is how many WriteAt calls to the temporary file get their
	// first byte flipped (-1: all of them).
	corrupt int
	// shortOpen is asked at each OpenRange (calls from 1): a value >= 0
	// makes the returned stream end after that many bytes.
	shortOpen func(call int) int64
	opens     int
	// openDelay holds every OpenRange until that long after the first
	// one (a slow start-up).
	openDelay time.Duration
	readyAt   time.Time

	// rate throttles each WriteAt body to this many bytes/s (0: no limit).
	rate float64
	// cancel is called once when sent reaches cancelAt.
	cancelAt int64
	cancel   func()

	sent        atomic.Int64 // bytes delivered to the wrapped WriteAt
	inflight    atomic.Int64 // WriteAt calls running
	maxInflight atomic.Int64
}

func (f *fault) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	f.mu.Lock()
	f.opens++
	if f.opens == 1 {
		f.readyAt = time.Now().Add(f.openDelay)
	}
	call, short, wait := f.opens, f.shortOpen, time.Until(f.readyAt)
	f.mu.Unlock()
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rc, err := f.Backend.OpenRange(ctx, p, off, n)
	if err != nil || short == nil {
		return rc, err
	}
	if k := short(call); k >= 0 {
		return struct {
			io.Reader
			io.Closer
		}{io.LimitReader(rc, k), rc}, nil
	}
	return rc, nil
}

// WriteAtExisting is WriteAt (with the same faults) into a file that
// exists, when the wrapped backend can.
func (f *fault) WriteAtExisting(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	ew, ok := f.Backend.(backend.ExistingWriter)
	if !ok {
		return f.WriteAt(ctx, p, off, r, n)
	}
	return f.writeAt(ctx, p, off, r, n, ew.WriteAtExisting)
}

func (f *fault) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	return f.writeAt(ctx, p, off, r, n, f.Backend.WriteAt)
}

func (f *fault) writeAt(ctx context.Context, p string, off int64, r io.Reader, n int64,
	write func(context.Context, string, int64, io.Reader, int64) error) error {
	f.mu.Lock()
	f.writes++
	call, fw := f.writes, f.failWrite
	corrupt := false
	if f.corrupt != 0 && strings.HasSuffix(p, ".sluice-part") {
		corrupt = true
		if f.corrupt > 0 {
			f.corrupt--
		}
	}
	f.mu.Unlock()
	if fw != nil {
		if err := fw(call); err != nil {
			return err
		}
	}
	cur := f.inflight.Add(1)
	defer f.inflight.Add(-1)
	for {
		m := f.maxInflight.Load()
		if cur <= m || f.maxInflight.CompareAndSwap(m, cur) {
			break
		}
	}
	return write(ctx, p, off, &tap{f: f, r: r, corrupt: corrupt}, n)
}

// tap is a WriteAt body seen by the destination: it counts, throttles,
// corrupts and triggers the cancellation.
type tap struct {
	f       *fault
	r       io.Reader
	corrupt bool
}

func (t *tap) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 && t.corrupt {
		b[0] ^= 0xff
		t.corrupt = false
	}
	sent := t.f.sent.Add(int64(n))
	if t.f.cancel != nil && sent >= t.f.cancelAt && sent-int64(n) < t.f.cancelAt {
		t.f.cancel()
	}
	if t.f.rate > 0 && n > 0 {
		time.Sleep(time.Duration(float64(n) / t.f.rate * float64(time.Second)))
	}
	return n, err
}

// env is a source and a destination directory, each behind a file
// backend, and a directory for journals.
type env struct {
	src, dst               *file.Backend
	srcDir, dstDir, jouDir string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{srcDir: t.TempDir(), dstDir: t.TempDir(), jouDir: t.TempDir()}
	var err error
	if e.src, err = file.New(e.srcDir); err != nil {
		t.Fatal(err)
	}
	if e.dst, err = file.New(e.dstDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.src.Close(); e.dst.Close() })
	return e
}

// put writes size seeded random bytes as source file name.
func (e *env) put(t *testing.T, name string, size int64, seed uint64) []byte {
	t.Helper()
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1}).Read(data)
	p := filepath.Join(e.srcDir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// spec is a small-chunk spec for tests, with fast retries.
func (e *env) spec(name string, size int64) Spec {
	return Spec{
		Src: e.src, SrcPath: name,
		Dst: e.dst, DstPath: "out/" + name,
		Size:            size,
		CC:              2,
		ChunkMin:        64 << 10,
		SubWrite:        16 << 10,
		Journal:         filepath.Join(e.jouDir, name+".journal"),
		CheckpointEvery: 20 * time.Millisecond,
		Retry:           RetryPolicy{Attempts: 4, Base: time.Millisecond, Max: 5 * time.Millisecond, Seed: 1},
	}
}

func (e *env) local(p string) string { return filepath.Join(e.dstDir, filepath.FromSlash(p)) }

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// checkFinal asserts that the destination holds exactly data and that no
// temporary file or journal is left.
func (e *env) checkFinal(t *testing.T, s Spec, data []byte) {
	t.Helper()
	got, err := os.ReadFile(e.local(s.DstPath))
	if err != nil {
		t.Fatalf("final file: %v", err)
	}
	if !bytes.Equal(got, data) {
		i := 0
		for i < len(got) && i < len(data) && got[i] == data[i] {
			i++
		}
		t.Fatalf("final file differs from source at byte %d (sizes %d, %d)", i, len(got), len(data))
	}
	if exists(e.local(TempName(s.DstPath))) {
		t.Errorf("temporary file left behind")
	}
	if exists(s.Journal) {
		t.Errorf("journal left behind")
	}
}

// journalDone is the number of bytes the journal on disk records as done.
func journalDone(t *testing.T, name string) int64 {
	t.Helper()
	j, ok, err := readJournal(name)
	if err != nil {
		t.Fatalf("journal: %v", err)
	}
	if !ok {
		return 0
	}
	return j.ranges().total()
}

func sum(t *testing.T, data []byte, algo string) string {
	t.Helper()
	s, err := backend.Sum(bytes.NewReader(data), algo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
