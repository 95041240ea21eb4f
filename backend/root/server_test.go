package root

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"

	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// target is an XRootD server the tests run against: its address and the
// local directory it exports.
type target struct {
	name string
	addr string
	dir  string
	// x is the real xrootd (nil: go-hep's server, in this process).
	x *storagetest.XRootDServer
	// native: the C++ server, which computes checksums itself.
	native bool
	// restart stops and restarts the server on the same address (nil:
	// not supported).
	restart func(t *testing.T)
}

// targets starts every server available: go-hep's, always, and XRootD's
// when its binary is installed.
func targets(t *testing.T) []*target {
	ts := []*target{goServer(t)}
	if x := xrootdServer(t); x != nil {
		ts = append(ts, x)
	}
	return ts
}

// goServer starts go-hep's server on a temporary directory.
func goServer(t *testing.T) *target {
	t.Helper()
	tg := &target{name: "go-hep", dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg.addr = l.Addr().String()
	srv := xrootd.NewServer(xrootd.NewFSHandler(tg.dir), nil)
	go srv.Serve(l)
	tg.restart = func(t *testing.T) {
		srv.Shutdown(context.Background())
		var l net.Listener
		var err error
		for range 50 { // the port may linger a moment
			if l, err = net.Listen("tcp", tg.addr); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		srv = xrootd.NewServer(xrootd.NewFSHandler(tg.dir), nil)
		go srv.Serve(l)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return tg
}

// xrootdServer starts the xrootd binary (Debian package xrootd-server) on
// a temporary directory, through storagetest, or returns nil if it cannot
// run here.
func xrootdServer(t *testing.T) *target {
	t.Helper()
	if err := storagetest.XRootDAvailable(); err != nil {
		t.Logf("testing against go-hep's server only: %v", err)
		return nil
	}
	x := storagetest.XRootD(t, storagetest.XRootDOptions{})
	return &target{name: "xrootd", addr: x.Addr, dir: x.Dir, x: x, native: true}
}

// chownAll gives what the tests made below p to the server's user.
func chownAll(t *testing.T, tg *target, p string) {
	t.Helper()
	if tg.x != nil {
		tg.x.Own(t, p)
	}
}

// seed creates files in the target's directory: name → content, names
// ending in / are directories.
func seed(t *testing.T, tg *target, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(tg.dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	chownAll(t, tg, tg.dir)
}

// readLocal returns a file of the target's directory.
func readLocal(t *testing.T, tg *target, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tg.dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// open connects a backend to tg, closed at the end of the test.
func open(t *testing.T, tg *target, opts Options) *Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := New(ctx, tg.addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// isErr reports whether err is target, with a useful message if not.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}
