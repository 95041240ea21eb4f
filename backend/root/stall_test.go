package root

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// freezer is a TCP proxy to a server that can be frozen: it keeps every
// connection open and stops passing bytes either way, as a server
// stopped with SIGSTOP (or a hung host whose kernel still answers) does.
// Only the connections open when it is frozen are: new ones pass bytes.
type freezer struct {
	l        net.Listener
	upstream string
	done     chan struct{} // closed at the test's end
	mu       sync.Mutex
	gen      int // connections of an older generation are frozen
}

func newFreezer(t *testing.T, upstream string) *freezer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l, upstream: upstream, done: make(chan struct{})}
	t.Cleanup(func() { l.Close(); close(f.done) })
	go f.serve()
	return f
}

func (f *freezer) addr() string { return f.l.Addr().String() }

// freeze silences the connections open now.
func (f *freezer) freeze() {
	f.mu.Lock()
	f.gen++
	f.mu.Unlock()
}

func (f *freezer) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		gen := f.gen
		f.mu.Unlock()
		up, err := net.Dial("tcp", f.upstream)
		if err != nil {
			c.Close()
			continue
		}
		go f.pipe(c, up, gen)
		go f.pipe(up, c, gen)
	}
}

// pipe copies until its connections are frozen; then it holds them
// open, silent, until the test ends.
func (f *freezer) pipe(dst, src net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		frozen := f.gen != gen
		f.mu.Unlock()
		if frozen {
			<-f.done // never a byte more
			src.Close()
			dst.Close()
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// TestStalledServer checks that a server that stops answering while its
// connections stay open fails every operation within Options.Stall plus
// a little, even when the caller's context has no deadline (sluice cp's
// has none), with an error that says so, and that the backend connects
// anew once the server answers again.
func TestStalledServer(t *testing.T) {
	tg := goServer(t)
	data := random(32<<20, 3)
	seed(t, tg, map[string]string{"f": string(data)})
	fz := newFreezer(t, tg.addr)
	const stall = time.Second
	b, err := New(context.Background(), fz.addr(), Options{Stall: stall, BlockSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Stat(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	bound := 4 * stall
	for _, tc := range []struct {
		op string
		f  func() error
	}{
		{"stat", func() error { _, err := b.Stat(ctx, "/f"); return err }},
		{"read", func() error {
			rc, err := b.OpenRange(ctx, "/f", 0, -1)
			if err != nil {
				return err
			}
			defer rc.Close()
			if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
				return err
			}
			fz.freeze() // in the middle of the file
			_, err = io.Copy(io.Discard, rc)
			return err
		}},
		{"write", func() error {
			return b.WriteAt(ctx, "/g", 0, bytes.NewReader(data), int64(len(data)))
		}},
		{"mkdir", func() error { return b.Mkdir(ctx, "/d/e") }},
		// The server computes checksums: the wait for its answer has no
		// Stall bound of its own, but one of Stall plus the file at
		// ChecksumRate (32 MiB at the default 10 MB/s: 3.4 s). It must
		// not wait for ever.
		{"checksum", func() error { _, err := b.Checksum(ctx, "/f", "adler32"); return err }},
	} {
		if tc.op != "read" { // which freezes in the middle of the file
			sctx, cancel := context.WithTimeout(ctx, bound)
			_, err := b.Stat(sctx, "/f")
			cancel()
			if err != nil {
				t.Fatalf("before %s: %v", tc.op, err)
			}
			fz.freeze()
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- tc.f() }()
		select {
		case err := <-done:
			took := time.Since(start)
			if err == nil || took > bound || !strings.Contains(err.Error(), "sent nothing for 1s") {
				t.Errorf("%s on a frozen server: %v after %v; want an error naming the %v bound within %v", tc.op, err, took, stall, bound)
			}
		case <-time.After(bound + 5*time.Second):
			t.Errorf("%s on a frozen server still blocked after %v", tc.op, time.Since(start))
		}
	}
	// The next connection is not frozen: the backend dials it.
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, lastErr = b.Stat(ctx, "/f"); lastErr == nil {
			return
		}
	}
	t.Errorf("Stat once the server answers again: %v", lastErr)
}
