package gridftp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// testServer is a real globus-gridftp-server on loopback, serving
// anonymous FTP, and the directory the tests' backends are rooted at.
type testServer struct {
	addr string // 127.0.0.1:port
	dir  string // local directory, also its path on the server
	log  string
	pgid int // the server's process group (it and its per-connection children)
}

// url is the base URL of a backend rooted at the test directory.
func (s *testServer) url(scheme string) string { return scheme + "://" + s.addr + s.dir }

// local is the local name of backend path p.
func (s *testServer) local(p string) string { return filepath.Join(s.dir, filepath.FromSlash(p)) }

// needTools skips the test unless the GridFTP programs are installed.
func needTools(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("globus-url-copy"); err != nil {
		t.Skip("globus-url-copy not installed (Debian/Ubuntu: apt-get install globus-gass-copy-progs)")
	}
	srv, err := exec.LookPath("globus-gridftp-server")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/globus-gridftp-server"); serr == nil {
			return "/usr/sbin/globus-gridftp-server"
		}
		t.Skip("globus-gridftp-server not installed (Debian/Ubuntu: apt-get install globus-gridftp-server-progs)")
	}
	return srv
}

// serverArgs is the server's command line for port, logging to logfile.
// It runs in the foreground (daemon mode without -S: it forks a child
// per connection), ignores /etc/gridftp.conf (-c with an empty file),
// allows anonymous logins (-aa) and, when run as root, serves them as
// nobody.
func serverArgs(conf, logfile string, port int) []string {
	args := []string{"-c", conf, "-aa", "-p", strconv.Itoa(port),
		"-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1",
		"-log-level", "error,warn", "-logfile", logfile}
	if os.Geteuid() == 0 {
		args = append(args, "-anonymous-user", "nobody")
	}
	return args
}

// startServer starts a server and a world-writable directory for a test
// under /tmp (t.TempDir's parents need not be reachable by nobody).
func startServer(t *testing.T) *testServer {
	t.Helper()
	bin := needTools(t)
	dir, err := os.MkdirTemp("/tmp", "sluice-gridftp-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	aux := t.TempDir()
	conf := filepath.Join(aux, "gridftp.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &testServer{dir: dir, log: filepath.Join(aux, "server.log")}
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(t)
		cmd := exec.Command(bin, serverArgs(conf, s.log, port)...)
		cmd.SysProcAttr = serverProcAttr()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.pgid = cmd.Process.Pid
		if waitReady(s.addr, exited) {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					if b, _ := os.ReadFile(s.log); len(b) > 0 {
						t.Logf("server log:\n%s", b)
					}
				}
			})
			return s
		}
		stop()
		t.Logf("server on port %d did not start: %s", port, out.String())
	}
	t.Fatal("could not start globus-gridftp-server")
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitReady waits for the server's 220 greeting.
func waitReady(addr string, exited <-chan struct{}) bool {
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "220") {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// newBackend opens a backend on the test directory.
func newBackend(t *testing.T, s *testServer, opts Options) *Backend {
	t.Helper()
	b, err := New(s.url("ftp"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// put writes a local file the server can read (and, if writable, write:
// the server runs as nobody).
func (s *testServer) put(t *testing.T, p string, data []byte, writable bool) {
	t.Helper()
	name := s.local(p)
	if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(name); d != s.dir && len(d) > len(s.dir); d = filepath.Dir(d) {
		os.Chmod(d, 0o777)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if writable {
		os.Chmod(name, 0o666)
	}
}

// randomBytes is n seeded pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}).Read(b)
	return b
}

func sumOf(t *testing.T, data []byte, algo string) string {
	t.Helper()
	s, err := backend.Sum(bytes.NewReader(data), algo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readLocal reads a file the server wrote.
func (s *testServer) readLocal(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(s.local(p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// firstDiff describes where two byte slices differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("differ at byte %d (lengths %d and %d)", i, len(a), len(b))
}

// ctxT is a context for one test step.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
