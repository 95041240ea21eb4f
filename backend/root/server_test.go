package root

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"
)

// target is an XRootD server the tests run against: its address and the
// local directory it exports.
type target struct {
	name string
	addr string
	dir  string
	// uid and gid own what the tests put into dir, so the server can
	// write there (-1: leave as is).
	uid, gid int
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
	tg := &target{name: "go-hep", dir: t.TempDir(), uid: -1, gid: -1}
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

// xrootdConfig exports the data directory read-write and has the server
// compute the checksums it can (sha256 it cannot).
const xrootdConfig = `all.export /
oss.localroot %s
all.adminpath %s
all.pidpath %s
xrootd.chksum max 4 adler32 md5 crc32c
`

// xrootdServer starts the xrootd binary (Debian package xrootd-server) on
// a temporary directory, or returns nil if it is not installed. As root
// it runs as the package's xrootd user, since xrootd refuses to run as
// root.
func xrootdServer(t *testing.T) *target {
	t.Helper()
	bin, err := exec.LookPath("xrootd")
	if err != nil {
		t.Log("xrootd not installed (apt-get install xrootd-server): testing against go-hep's server only")
		return nil
	}
	tg := &target{name: "xrootd", uid: -1, gid: -1, native: true}
	var args []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("xrootd")
		if err != nil {
			t.Logf("running as root and no xrootd user to run xrootd as: %v", err)
			return nil
		}
		tg.uid, _ = strconv.Atoi(u.Uid)
		tg.gid, _ = strconv.Atoi(u.Gid)
		args = append(args, "-R", "xrootd")
	}
	// Not t.TempDir: its parent is private to this user, and the
	// server may run as another.
	base, err := os.MkdirTemp("", "sluice-xrootd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	tg.dir = filepath.Join(base, "data")
	adm := filepath.Join(base, "adm")
	for _, d := range []string{tg.dir, adm} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(base, "xrootd.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, xrootdConfig, tg.dir, adm, adm), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	chownAll(t, tg, base)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tg.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args = append(args, "-p", strconv.Itoa(port), "-n", "sluicetest", "-c", cfg, "-l", filepath.Join(base, "log"))
	cmd := exec.Command(bin, args...)
	cmd.Dir = base
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting xrootd: %v", err)
	}
	t.Logf("started %s %s", bin, strings.Join(args, " "))
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			dumpLogs(t, base)
		}
	})
	// Ready once it accepts a login.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b, err := New(ctx, tg.addr, Options{DialTimeout: time.Second})
		cancel()
		if err == nil {
			b.Close()
			return tg
		}
		if time.Now().After(deadline) {
			dumpLogs(t, base)
			t.Fatalf("xrootd did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dumpLogs(t *testing.T, base string) {
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "log") {
			if b, err := os.ReadFile(p); err == nil {
				t.Logf("%s:\n%s", p, b)
			}
		}
		return nil
	})
}

// chownAll gives what the tests made below p to the server's user.
func chownAll(t *testing.T, tg *target, p string) {
	t.Helper()
	if tg.uid < 0 {
		return
	}
	err := filepath.WalkDir(p, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, tg.uid, tg.gid)
	})
	if err != nil {
		t.Fatal(err)
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
