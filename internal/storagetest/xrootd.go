package storagetest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// XRootDOptions configure a server XRootD starts.
type XRootDOptions struct {
	// TPC allows XRootD third-party copies onto and from the server
	// (ofs.tpc): as a destination it pulls a file from the source server
	// by running xrdcp (Debian package xrootd-client), as a source it
	// serves a destination the client has named. Without it the server
	// refuses a copy's rendezvous ("tpc not supported").
	TPC bool
	// TPCProgram, with TPC, is the program the server runs to pull a
	// file (default: xrdcp). It is run as the server's user, so it must be
	// where that user can reach it. A test of what happens while a copy
	// runs gives one that never ends.
	TPCProgram string
	// Config holds further configuration directives, one a line, put
	// after the harness's own (a later directive of the same name
	// overrides an earlier one).
	Config []string
}

// XRootDServer is an xrootd process serving a temporary directory
// read-write, with checksums (adler32, md5, crc32c) computed by the
// server.
type XRootDServer struct {
	// Addr is the server's address, 127.0.0.1:port.
	Addr string
	// The directory it exports (Dir), owned by the server's user.
	localFiles

	base string // Dir, the configuration, logs and admin files below it
}

// xrootdConfig is the configuration of every server: the data directory
// exported read-write, its admin and pid files apart from it, and the
// checksums XRootD computes itself (sha256 it cannot).
const xrootdConfig = `all.export /
oss.localroot %s
all.adminpath %s
all.pidpath %s
xrootd.chksum max 4 adler32 md5 crc32c
`

// xrootdTPCConfig enables third-party copy. pgm: the program the
// destination server runs to pull a file, xrdcp in its server mode (it
// reports back through the server instead of a terminal; another program
// gets the same arguments after the ones given). autorm: a
// failed copy's partial destination is removed. logok: the source logs
// each copy it grants (tests check that the bytes went that way). ttl: how long a
// rendezvous key waits for the destination to come (default 7 s, at most
// 30 s), long enough on a loaded test machine.
const xrootdTPCConfig = `ofs.tpc autorm logok ttl 30 30 pgm %s
`

// XRootDAvailable says why XRootD cannot start a server here (the
// binary is missing, or the tests run as root and there is no xrootd user
// to run it as), or nil if it can. Tests that also run against another
// server use it to leave the real one out instead of skipping.
func XRootDAvailable() error {
	if _, err := exec.LookPath("xrootd"); err != nil {
		return errors.New("xrootd is not installed (apt-get install xrootd-server)")
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("xrootd"); err != nil {
			return fmt.Errorf("the tests run as root, xrootd refuses to, and there is no xrootd user to run it as: %w", err)
		}
	}
	return nil
}

// XRootDTPCAvailable is XRootDAvailable for a server with TPC: xrdcp
// must be installed too.
func XRootDTPCAvailable() error {
	if err := XRootDAvailable(); err != nil {
		return err
	}
	if _, err := exec.LookPath("xrdcp"); err != nil {
		return errors.New("xrdcp is not installed (apt-get install xrootd-client); an XRootD server runs it for third-party copies")
	}
	return nil
}

// XRootD starts the xrootd binary (Debian package xrootd-server) on a new
// temporary directory and returns once it answers the protocol's
// handshake; the test's cleanup stops it and removes the directory. The
// test is skipped if xrootd (or, with o.TPC, xrdcp) is not installed.
// As root, the server runs as the package's xrootd user (-R xrootd),
// since xrootd refuses to run as root.
func XRootD(t testing.TB, o XRootDOptions) *XRootDServer {
	t.Helper()
	avail := XRootDAvailable
	if o.TPC {
		avail = XRootDTPCAvailable
	}
	if err := avail(); err != nil {
		t.Skipf("no XRootD server for this test: %v", err)
	}
	bin, _ := exec.LookPath("xrootd")
	s := &XRootDServer{localFiles: localFiles{uid: -1, gid: -1}}
	var args []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("xrootd")
		if err != nil {
			t.Fatal(err) // XRootDAvailable found it a moment ago
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		args = append(args, "-R", "xrootd")
	}
	// Not t.TempDir: its parent is private to this user, and the
	// server may run as another.
	base, err := os.MkdirTemp("", "sluice-xrootd-")
	if err != nil {
		t.Fatal(err)
	}
	s.base = base
	t.Cleanup(func() { os.RemoveAll(base) })
	s.Dir = filepath.Join(base, "data")
	adm := filepath.Join(base, "adm")
	for _, d := range []string{s.Dir, adm} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(xrootdConfig, s.Dir, adm, adm)
	if o.TPC {
		pgm := o.TPCProgram
		if pgm == "" {
			xrdcp, _ := exec.LookPath("xrdcp")
			pgm = xrdcp + " --server"
		}
		cfg += fmt.Sprintf(xrootdTPCConfig, pgm)
	}
	for _, line := range o.Config {
		cfg += line + "\n"
	}
	cfgPath := filepath.Join(base, "xrootd.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Own(t, base)

	// The port is free when chosen, but something else may take it
	// before xrootd binds it (tests run in parallel): then xrootd exits
	// at once, and is started again on another.
	const attempts = 3
	for i := 1; ; i++ {
		err := s.start(t, bin, args, cfgPath)
		if err == nil {
			return s
		}
		if !errors.Is(err, errExited) || i == attempts {
			s.dumpLogs(t)
			t.Fatal(err)
		}
		t.Logf("%v; starting it again on another port", err)
	}
}

// errExited: the server exited before it answered.
var errExited = errors.New("xrootd exited at start")

// start runs xrootd on a free port, stopped by the test's cleanup, and
// waits until it answers the protocol's handshake. It returns an error
// wrapping errExited if xrootd exited first.
func (s *XRootDServer) start(t testing.TB, bin string, args []string, cfgPath string) error {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args = append(args, "-p", strconv.Itoa(port), "-n", "sluicetest", "-c", cfgPath, "-l", filepath.Join(s.base, "log"))
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.base
	// Its own process group, so that the cleanup also ends the xrdcp
	// processes a third-party copy left running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting xrootd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Logf("started %s %s", bin, strings.Join(args, " "))
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			s.dumpLogs(t)
		}
	})

	// Ready once it answers the handshake. Not a login through a
	// client library: this package serves that library's tests too.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := handshake(s.Addr, time.Second)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w on port %d: %v", errExited, port, cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("xrootd did not come up on %s: %w", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// handshake performs XRootD's initial handshake (XProtocol.hh's
// ClientInitHandShake: four zero words, then 4 and 2012) and checks
// that the server answers it (streamid 0, status kXR_ok).
func handshake(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	var req [20]byte
	binary.BigEndian.PutUint32(req[12:], 4)
	binary.BigEndian.PutUint32(req[16:], 2012)
	if _, err := c.Write(req[:]); err != nil {
		return err
	}
	var resp [8]byte // streamid[2] status[2] dlen[4]
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if st := binary.BigEndian.Uint16(resp[2:4]); st != 0 {
		return fmt.Errorf("handshake answered with status %d", st)
	}
	return nil
}

// URL returns the root:// URL of p, a path below Dir (slash-separated,
// with or without a leading slash).
func (s *XRootDServer) URL(p string) string {
	return "root://" + s.Addr + "/" + path.Clean("/"+p)
}

// Log returns what the server has logged so far.
func (s *XRootDServer) Log() string {
	var all strings.Builder
	filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "log") {
			if b, err := os.ReadFile(p); err == nil {
				all.Write(b)
			}
		}
		return nil
	})
	return all.String()
}

// dumpLogs writes the server's logs to the test's log.
func (s *XRootDServer) dumpLogs(t testing.TB) {
	filepath.WalkDir(s.base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "log") {
			if b, err := os.ReadFile(p); err == nil {
				t.Logf("%s:\n%s", p, b)
			}
		}
		return nil
	})
}
