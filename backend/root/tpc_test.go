package root

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// connect opens a backend on s, closed at the end of the test.
func connect(t *testing.T, s *storagetest.XRootDServer, opts Options) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, s.Addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestCopyFrom runs third-party copies between two TPC-enabled xrootd
// servers: the bytes are the source's, a file at the destination is
// replaced, and progress ends with the file's size.
func TestCopyFrom(t *testing.T) {
	srv := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	dsrv := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	src, dst := connect(t, srv, Options{}), connect(t, dsrv, Options{})
	for _, tc := range []struct {
		name     string
		size     int
		existing []byte // at the destination before the copy
	}{
		{name: "new", size: 5<<20 + 17},
		{name: "replaces a longer file", size: 1 << 20, existing: random(3<<20, 9)},
		{name: "replaces a shorter file", size: 2<<20 + 1, existing: []byte("old")},
		{name: "empty", size: 0, existing: []byte("old")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := random(tc.size, uint64(tc.size))
			sp := "src/" + strings.ReplaceAll(tc.name, " ", "-") + ".dat"
			dp := "dst/deeper/" + strings.ReplaceAll(tc.name, " ", "-") + ".dat"
			srv.Put(t, sp, data)
			if tc.existing != nil {
				dsrv.Put(t, dp, tc.existing)
			}
			var mu sync.Mutex
			var last int64 = -1
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := dst.CopyFrom(ctx, src, sp, dp, func(n int64) {
				mu.Lock()
				last = n
				mu.Unlock()
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := dsrv.Read(t, dp); !bytes.Equal(got, data) {
				t.Fatalf("destination has %d bytes, want the source's %d", len(got), len(data))
			}
			// The source server let the destination server in
			// (ofs.tpc logok): the bytes went between them.
			if log := srv.Log(); !strings.Contains(log, "granted tpc access by sluice.") || !strings.Contains(log, " to /"+sp+"\n") {
				t.Errorf("the source server logged no grant of a third-party copy of /%s:\n%s", sp, log)
			}
			if last != int64(tc.size) {
				t.Errorf("last progress %d, want %d", last, tc.size)
			}
		})
	}
}

// TestCopyFromErrors: what a third-party copy that cannot be made
// returns.
func TestCopyFromErrors(t *testing.T) {
	tpc := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	tpc2 := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	plain := storagetest.XRootD(t, storagetest.XRootDOptions{})
	tpc.Put(t, "f", []byte("some bytes"))
	tpc.Put(t, "dir/", nil)
	plain.Put(t, "f", []byte("some bytes"))
	tpc2.Put(t, "keep", []byte("kept"))
	for _, tc := range []struct {
		name     string
		src, dst *storagetest.XRootDServer
		sp, dp   string
		want     error
		says     string // in the message
	}{
		{name: "missing source", src: tpc, dst: tpc2, sp: "nothing", dp: "out", want: backend.ErrNotFound},
		{name: "source is a directory", src: tpc, dst: tpc2, sp: "dir", dp: "out", want: backend.ErrInvalid},
		{name: "destination without TPC", src: tpc, dst: plain, sp: "f", dp: "out", want: backend.ErrInvalid, says: "does not allow third-party copies"},
		// Refused before the destination is opened (which replaces it).
		{name: "source without TPC", src: plain, dst: tpc2, sp: "f", dp: "keep", want: backend.ErrInvalid, says: "does not allow third-party copies"},
		{name: "destination is the root", src: tpc, dst: tpc2, sp: "f", dp: "/", want: backend.ErrInvalid},
		{name: "path with &", src: tpc, dst: tpc2, sp: "f", dp: "a&b", want: backend.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := connect(t, tc.src, Options{}), connect(t, tc.dst, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := dst.CopyFrom(ctx, src, tc.sp, tc.dp, nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			t.Logf("%v", err)
			if got := string(tpc2.Read(t, "keep")); got != "kept" {
				t.Errorf("the refused copy changed a destination's file: it holds %q", got)
			}
		})
	}
	t.Run("go-hep's server", func(t *testing.T) {
		src, dst := connect(t, tpc, Options{}), open(t, goServer(t), Options{})
		err := dst.CopyFrom(context.Background(), src, "f", "out", nil)
		if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "does not allow third-party copies") {
			t.Fatalf("got %v, want ErrInvalid saying the server does not allow third-party copies", err)
		}
	})
	t.Run("different user names", func(t *testing.T) {
		src, dst := connect(t, tpc, Options{Username: "alice"}), connect(t, tpc2, Options{Username: "bob"})
		err := dst.CopyFrom(context.Background(), src, "f", "out", nil)
		if !errors.Is(err, backend.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
}

// TestCopyFromCancel: a copy that would never end (the destination's
// TPC program waits for ever) returns when its context is cancelled, and
// the destination server stops it; one whose context has ended before it
// starts returns at once.
func TestCopyFromCancel(t *testing.T) {
	// The program must be where the server's user can run it, not in
	// t.TempDir's private parent.
	dir, err := os.MkdirTemp("", "sluice-tpc-pgm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Writable by the server's user, who runs the program: it notes its
	// pid there.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pgm := filepath.Join(dir, "stuck-copy")
	if err := os.WriteFile(pgm, []byte("#!/bin/sh\necho $$ >\"$(dirname \"$0\")/pid\"\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	dsrv := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true, TPCProgram: pgm})
	srv.Put(t, "f", random(1<<20, 3))
	src, dst := connect(t, srv, Options{}), connect(t, dsrv, Options{})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dst.CopyFrom(ctx, src, "f", "before", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: got %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	polled := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		errc <- dst.CopyFrom(ctx, src, "f", "during", func(int64) { once.Do(func() { close(polled) }) })
	}()
	select {
	case <-polled: // the copy runs (and stays running)
	case err := <-errc:
		t.Fatalf("CopyFrom returned before it was cancelled: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no progress within a minute")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled during: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CopyFrom did not return within 10 s of its context's cancellation")
	}
	// The server cancelled the copy when the destination's handle
	// closed: its program is gone.
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the TPC program did not start: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the TPC program (pid %d) still runs 10 s after the copy was cancelled", pid)
		}
	}
	// The backend still works.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if _, err := dst.Stat(sctx, "/"); err != nil {
		t.Errorf("stat after the cancelled copy: %v", err)
	}
}
