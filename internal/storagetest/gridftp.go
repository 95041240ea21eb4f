package storagetest

import (
	"bufio"
	"bytes"
	"crypto/des"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GridFTPOptions configure a server GridFTP starts.
type GridFTPOptions struct {
	// Users, if not empty, are the only logins the server accepts, user
	// name to password (globus-gridftp-server -password-file), instead
	// of anonymous ones. The server checks passwords with traditional
	// DES crypt(3), which reads only the first 8 bytes of a password:
	// a test of a wrong password must change one of those.
	Users map[string]string
	// Args are further globus-gridftp-server options, after the
	// harness's own.
	Args []string
}

// GridFTPServer is a globus-gridftp-server process serving the whole
// file system to loopback clients, and a temporary directory for a test.
// As root, every login (anonymous or with a password) runs as nobody;
// otherwise as the test's user.
type GridFTPServer struct {
	// Addr is the server's control address, 127.0.0.1:port.
	Addr string
	// Dir is a temporary directory everyone may write, which is also
	// its absolute path on the server (the server serves /).
	Dir string

	log  string
	pgid int // the server's process group: it and its per-login children
}

// GridFTPAvailable says why GridFTP cannot start a server here (the
// server or globus-url-copy, which backends and tests run, is not
// installed), or nil if it can.
func GridFTPAvailable() error {
	if _, err := exec.LookPath("globus-url-copy"); err != nil {
		return fmt.Errorf("globus-url-copy is not installed (apt-get install globus-gass-copy-progs)")
	}
	if _, err := gridftpServerBin(); err != nil {
		return err
	}
	return nil
}

// gridftpServerBin finds globus-gridftp-server, which Debian puts in
// /usr/sbin (not in every user's PATH).
func gridftpServerBin() (string, error) {
	if bin, err := exec.LookPath("globus-gridftp-server"); err == nil {
		return bin, nil
	}
	if _, err := os.Stat("/usr/sbin/globus-gridftp-server"); err == nil {
		return "/usr/sbin/globus-gridftp-server", nil
	}
	return "", fmt.Errorf("globus-gridftp-server is not installed (apt-get install globus-gridftp-server-progs)")
}

// GridFTP starts globus-gridftp-server on a loopback port and returns
// once it greets; the test's cleanup stops it (and the processes it
// forked per login) and removes Dir. The test is skipped if the server or
// globus-url-copy is not installed. Without o.Users the server takes
// anonymous logins (-aa).
func GridFTP(t testing.TB, o GridFTPOptions) *GridFTPServer {
	t.Helper()
	if err := GridFTPAvailable(); err != nil {
		t.Skipf("no GridFTP server for this test: %v", err)
	}
	bin, _ := gridftpServerBin()
	// Not t.TempDir: its parents need not be reachable by nobody, whom
	// the server runs logins as when the tests run as root.
	dir, err := os.MkdirTemp("", "sluice-gridftp-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	aux := t.TempDir()
	// An empty configuration file, so that /etc/gridftp.conf is not read.
	conf := filepath.Join(aux, "gridftp.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &GridFTPServer{Dir: dir, log: filepath.Join(aux, "server.log")}
	auth, err := gridftpAuthArgs(aux, o.Users)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		// In the foreground, but still a daemon that forks a child
		// per connection (no -S); no -i (inetd): it listens itself.
		args := append([]string{"-c", conf, "-p", strconv.Itoa(port),
			"-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1",
			"-log-level", "error,warn", "-logfile", s.log}, auth...)
		args = append(args, o.Args...)
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = gridftpProcAttr()
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
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.pgid = cmd.Process.Pid
		if gridftpReady(s.Addr, exited) {
			t.Cleanup(func() {
				// A test may have stopped it (Signal): thaw it so
				// that the kill is not held up by nothing.
				syscall.Kill(-s.pgid, syscall.SIGCONT)
				stop()
				if t.Failed() {
					if b, _ := os.ReadFile(s.log); len(b) > 0 {
						t.Logf("globus-gridftp-server log:\n%s", b)
					}
				}
			})
			return s
		}
		stop()
		// Most likely another process took the port meanwhile.
		t.Logf("globus-gridftp-server on port %d did not start: %s", port, out.String())
	}
	if b, _ := os.ReadFile(s.log); len(b) > 0 {
		t.Logf("globus-gridftp-server log:\n%s", b)
	}
	t.Fatal("could not start globus-gridftp-server")
	return nil
}

// gridftpProcAttr puts the server in its own process group, so that the
// cleanup also ends the children it forks per login, and on Linux has
// the kernel kill it if the test binary dies first (a timeout panic runs
// no cleanups). Pdeathsig exists only on Linux; it is set by name so that
// this file builds everywhere.
func gridftpProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if f := reflect.ValueOf(attr).Elem().FieldByName("Pdeathsig"); f.IsValid() && f.CanSet() {
		f.SetInt(int64(syscall.SIGKILL))
	}
	return attr
}

// gridftpAuthArgs are the server options for the logins it accepts:
// anonymous ones (as nobody when run as root, since the server will not
// run a login as root), or users from a password file written into dir.
func gridftpAuthArgs(dir string, users map[string]string) ([]string, error) {
	root := os.Geteuid() == 0
	if len(users) == 0 {
		if root {
			return []string{"-aa", "-anonymous-user", "nobody"}, nil
		}
		return []string{"-aa"}, nil
	}
	// The password file has /etc/passwd's format; the server takes
	// a login's uid, gid and shell from its line, not from the system's
	// accounts (the name need not exist), and refuses a login whose
	// shell is not an executable file.
	uid, gid := os.Getuid(), os.Getgid()
	if root {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("password logins as root run as nobody: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	shell := "/bin/sh"
	var pw strings.Builder
	names := make([]string, 0, len(users))
	for name := range users {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "" || strings.ContainsAny(name, ":\n") {
			return nil, fmt.Errorf("user name %q cannot be in a password file", name)
		}
		fmt.Fprintf(&pw, "%s:%s:%d:%d::%s:%s\n", name, desCrypt(users[name]), uid, gid, os.TempDir(), shell)
	}
	file := filepath.Join(dir, "passwd")
	// Read by the server's per-login process before it changes user.
	if err := os.WriteFile(file, []byte(pw.String()), 0o600); err != nil {
		return nil, err
	}
	return []string{"-password-file", file}, nil
}

// desCrypt is traditional crypt(3) of password with the salt "..":
// what globus-gridftp-server compares a password file's hashes with
// (OpenSSL's DES_crypt, which knows no other scheme: "$1$", "$6$" hashes
// never match). With that salt the salt's perturbation of DES's
// expansion is none, so the hash is plain DES, 25 times over a zero
// block keyed with the password's first 8 bytes shifted left by one bit,
// in crypt's alphabet. A fixed salt makes the hash no good for real
// passwords; these are tests'.
func desCrypt(password string) string {
	var key [8]byte
	for i := 0; i < len(key) && i < len(password); i++ {
		key[i] = password[i] << 1
	}
	c, err := des.NewCipher(key[:])
	if err != nil {
		panic(err) // any 8-byte key is a DES key
	}
	var block [8]byte
	for range 25 {
		c.Encrypt(block[:], block[:])
	}
	const alphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	v := uint64(0)
	for _, b := range block {
		v = v<<8 | uint64(b)
	}
	out := []byte("..")
	// 64 bits as 11 characters of 6 bits, the last padded with zeros.
	for i := range 11 {
		shift := 58 - 6*i
		var d uint64
		if shift >= 0 {
			d = v >> uint(shift) & 63
		} else {
			d = v << uint(-shift) & 63
		}
		out = append(out, alphabet[d])
	}
	return string(out)
}

// gridftpReady waits for the server's 220 greeting.
func gridftpReady(addr string, exited <-chan struct{}) bool {
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

// URL returns the scheme:// URL (ftp or gsiftp) of p, a path below Dir
// (slash-separated, with or without a leading slash; "" is Dir).
func (s *GridFTPServer) URL(scheme, p string) string {
	return scheme + "://" + s.Addr + path.Join(filepath.ToSlash(s.Dir), path.Clean("/"+p))
}

// Local is the local name of p, a path below Dir.
func (s *GridFTPServer) Local(p string) string {
	return filepath.Join(s.Dir, filepath.FromSlash(path.Clean("/"+p)))
}

// Put writes data to p below Dir, creating its directories; the server's
// logins (nobody, when the tests run as root) may write over it and
// create files beside it.
func (s *GridFTPServer) Put(t testing.TB, p string, data []byte) {
	t.Helper()
	name := s.Local(p)
	if err := os.MkdirAll(filepath.Dir(name), 0o777); err != nil {
		t.Fatal(err)
	}
	// MkdirAll's modes are cut by the umask.
	for d := filepath.Dir(name); len(d) > len(s.Dir); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(name, data, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o666); err != nil {
		t.Fatal(err)
	}
}

// Read returns the content of p below Dir (what the server wrote).
func (s *GridFTPServer) Read(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(s.Local(p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signal sends sig to the server and every process it forked for a
// login: SIGSTOP freezes it (a server that keeps its connections but
// never answers), SIGCONT thaws it.
func (s *GridFTPServer) Signal(sig syscall.Signal) error {
	return syscall.Kill(-s.pgid, sig)
}

// Log is what the server logged so far (errors and warnings).
func (s *GridFTPServer) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}
