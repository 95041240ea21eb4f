package engine

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// TestPull: with a Pull hook the engine never reads the source itself;
// every range goes through the hook (the destination fetching it), and the
// result is verified and renamed as usual.
func TestPull(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "p.bin", 1<<20+777, 9)
	src := &fault{Backend: e.src}
	s := e.spec("p.bin", int64(len(data)))
	s.Src = src
	var pulled atomic.Int64
	s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, _ func(int64)) error {
		rc, err := e.src.OpenRange(ctx, srcPath, off, n) // the "remote" agent reading its own file
		if err != nil {
			return err
		}
		defer rc.Close()
		pulled.Add(n)
		return e.dst.WriteAt(ctx, dstPath, off, rc, n)
	}
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if src.opens != 0 {
		t.Errorf("the engine opened the source %d times itself", src.opens)
	}
	if pulled.Load() != int64(len(data)) || res.Bytes != int64(len(data)) {
		t.Errorf("pulled %d, result %d bytes, want %d", pulled.Load(), res.Bytes, len(data))
	}
}

// TestPullTailSplits: pulled pieces are split by an idle worker down to a
// sub-write, not only above 2·ChunkMin: each pull is its own request, and
// on a WAN path the end of a copy otherwise runs on the few streams still
// finishing whole chunks. Two chunks at CC 2; the first pull of the second
// chunk is held until a pull from that chunk's second half arrives, which
// only a worker that stole it can send.
func TestPullTailSplits(t *testing.T) {
	e := newEnv(t)
	const size = 128 << 10 // two chunks of ChunkMin (64 KiB), sub-writes of 16 KiB
	data := e.put(t, "p.bin", size, 11)
	s := e.spec("p.bin", size)
	stolen := make(chan struct{})
	var once sync.Once
	var waited atomic.Bool
	s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, _ func(int64)) error {
		switch {
		case off == 64<<10:
			select {
			case <-stolen:
			case <-time.After(5 * time.Second):
				waited.Store(true)
			case <-ctx.Done():
				return ctx.Err()
			}
		case off >= 96<<10:
			once.Do(func() { close(stolen) })
		}
		return e.pullRange(ctx, srcPath, dstPath, off, n)
	}
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if waited.Load() {
		t.Error("no worker took the second half of the held chunk: the copy waited for the held pull")
	}
}

// TestPullTailSteps: pulls shrink as the file nears its end, so that no
// stream is left pulling a whole sub-write alone (one that lost a packet
// on a WAN path moves a tenth of its share for seconds). Once three
// quarters of the file are pulled or in flight, each pull is at most
// half a sub-write; before that, whole sub-writes.
func TestPullTailSteps(t *testing.T) {
	e := newEnv(t)
	const size = 16 << 20
	data := e.put(t, "p.bin", size, 12)
	s := e.spec("p.bin", size)
	s.ChunkMin, s.SubWrite, s.CC = 4<<20, 1<<20, 2
	var mu sync.Mutex
	var issued int64 // bytes of the pulls started so far
	var early, late []int64
	s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, _ func(int64)) error {
		mu.Lock()
		if issued >= size*3/4 {
			late = append(late, n)
		} else {
			early = append(early, n)
		}
		issued += n
		mu.Unlock()
		return e.pullRange(ctx, srcPath, dstPath, off, n)
	}
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if len(late) == 0 || len(early) == 0 {
		t.Fatalf("pulls before the last quarter %v, after %v", early, late)
	}
	if early[0] != s.SubWrite {
		t.Errorf("first pull %d bytes, want a whole sub-write (%d)", early[0], s.SubWrite)
	}
	for _, n := range late {
		if n > s.SubWrite/2 {
			t.Errorf("a pull of %d bytes in the last quarter (all there: %v)", n, late)
			break
		}
	}
}

// TestPullProgressRecorded: bytes a pull reports as landed count as done
// while the pull is still in flight (progress, the tuner's windows, the
// journal), and the rest once it returns. One pull of the whole file
// reports its first half, then waits until the transfer shows it.
func TestPullProgressRecorded(t *testing.T) {
	e := newEnv(t)
	const size = 1 << 20
	data := e.put(t, "p.bin", size, 13)
	s := e.spec("p.bin", size)
	s.CC, s.SubWrite, s.ChunkMin = 1, size, size
	var tr *Transfer
	started := make(chan struct{})
	var shown bool
	s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
		<-started
		half := n / 2
		if err := e.pullRange(ctx, srcPath, dstPath, off, half); err != nil {
			return err
		}
		progress(half)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !shown {
			shown = tr.Progress().Done == half
			time.Sleep(time.Millisecond)
		}
		return e.pullRange(ctx, srcPath, dstPath, off+half, n-half)
	}
	var err error
	if tr, err = Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	close(started)
	res, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if !shown {
		t.Error("the half a pull reported was not counted done while it ran")
	}
	if res.Bytes != size || res.Resent != 0 {
		t.Errorf("result %d bytes, %d re-sent; want %d, 0", res.Bytes, res.Resent, size)
	}
}

// pullRange is what a destination agent does for a pull: it reads the
// range from the source (here its own file) and writes it at the same
// offset.
func (e *env) pullRange(ctx context.Context, srcPath, dstPath string, off, n int64) error {
	rc, err := e.src.OpenRange(ctx, srcPath, off, n)
	if err != nil {
		return err
	}
	defer rc.Close()
	return e.dst.WriteAt(ctx, dstPath, off, rc, n)
}

// TestWholePull: a Pull that copies only whole files (XRootD's
// third-party copy) gets the file in one call whatever the concurrency,
// and a run that stopped part way starts over instead of asking for the
// rest, which such a copy cannot give.
func TestWholePull(t *testing.T) {
	e := newEnv(t)
	const size = 3<<20 + 5
	data := e.put(t, "w.bin", size, 21)
	var mu sync.Mutex
	var calls [][2]int64
	fail := true
	pull := func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
		mu.Lock()
		calls = append(calls, [2]int64{off, n})
		first := fail
		fail = false
		mu.Unlock()
		if first {
			// Half the file lands and is reported, then the copy breaks.
			if err := e.pullRange(ctx, srcPath, dstPath, off, n/2); err != nil {
				return err
			}
			progress(n / 2)
			return context.Canceled
		}
		return e.pullRange(ctx, srcPath, dstPath, off, n)
	}
	s := e.spec("w.bin", size)
	s.CC, s.Pull, s.WholePull = 8, pull, true
	if _, err := Run(context.Background(), s); err == nil {
		t.Fatal("the broken first copy succeeded")
	}
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	want := [][2]int64{{0, size}, {0, size}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("pulls %v, want %v (the whole file each time)", calls, want)
	}
	bad := e.spec("w.bin", size)
	bad.WholePull = true
	if _, err := Start(context.Background(), bad); err == nil {
		t.Error("WholePull without Pull was accepted")
	}
}

// TestPullMin: with PullMin, no pull asks for less than it unless its
// whole piece is smaller, where without it the end of a copy shrinks
// its pulls to a few hundred KiB (right when a pull is one round trip,
// wrong when it is a login and a new data connection at a storage
// server).
func TestPullMin(t *testing.T) {
	for _, pullMin := range []int64{0, 2 << 20} {
		e := newEnv(t)
		const size = 24 << 20
		data := e.put(t, "m.bin", size, 5)
		var mu sync.Mutex
		var sizes []int64
		s := e.spec("m.bin", size)
		s.CC, s.ChunkMin, s.SubWrite, s.PullMin = 4, 4<<20, 4<<20, pullMin
		s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, _ func(int64)) error {
			mu.Lock()
			sizes = append(sizes, n)
			mu.Unlock()
			return e.pullRange(ctx, srcPath, dstPath, off, n)
		}
		if _, err := Run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		e.checkFinal(t, s, data)
		small := 0
		for _, n := range sizes {
			if n < 2<<20 {
				small++
			}
		}
		switch {
		case pullMin > 0 && small > 0:
			t.Errorf("PullMin %d: %d of %d pulls were smaller (%v)", pullMin, small, len(sizes), sizes)
		case pullMin == 0 && small == 0:
			t.Errorf("without PullMin no pull shrank below 2 MiB (%v): the test shows nothing", sizes)
		}
	}
}

// wholeOnly is a destination that writes only whole files (an HTTP PUT,
// an S3 object): WriteAt at 0 with the whole file, and no allocation.
type wholeOnly struct {
	backend.Backend
	mu     sync.Mutex
	writes [][2]int64
	size   int64 // the file's size, which a write must cover whole
}

func (w *wholeOnly) WritesWhole() {}

func (w *wholeOnly) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	w.mu.Lock()
	w.writes = append(w.writes, [2]int64{off, n})
	w.mu.Unlock()
	if off != 0 || n != w.size {
		return fmt.Errorf("%w: write of [%d,%d): whole files only", backend.ErrInvalid, off, off+n)
	}
	return w.Backend.WriteAt(ctx, p, off, r, n)
}

func (w *wholeOnly) Truncate(ctx context.Context, p string, size int64) error {
	return fmt.Errorf("%w: truncate: whole files only", backend.ErrInvalid)
}

// TestWholeWriter: a file to a backend.WholeWriter moves in one write of
// every byte, by one worker whatever the concurrency, without an
// allocation first; an empty file too.
func TestWholeWriter(t *testing.T) {
	for _, size := range []int64{5<<20 + 3, 0} {
		e := newEnv(t)
		name := fmt.Sprintf("w%d.bin", size)
		data := e.put(t, name, size, 3)
		dst := &wholeOnly{Backend: e.dst, size: size}
		s := e.spec(name, size)
		s.Dst, s.CC = dst, 8
		if _, err := Run(context.Background(), s); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		e.checkFinal(t, s, data)
		if want := [][2]int64{{0, size}}; fmt.Sprint(dst.writes) != fmt.Sprint(want) {
			t.Errorf("size %d: writes %v, want %v", size, dst.writes, want)
		}
	}
}
