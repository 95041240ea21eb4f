package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/internal/storagetest"
	"github.com/sluice-dtn/sluice/wan"
)

// upWAN brings up a shipped profile of the emulated WAN for a test, or
// skips saying why it cannot.
func upWAN(t *testing.T, profile string) *wan.Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the emulated WAN's namespaces and TUN devices (CI runs make test as root)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
	p, err := wan.LoadProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	n, err := wan.Up(context.Background(), p, wan.Options{Prefix: "slcc-", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// sluiceIn runs sluice (this test binary, see TestMain) inside host.
func sluiceIn(t *testing.T, n *wan.Net, host string, args ...string) *exec.Cmd {
	t.Helper()
	cmd, err := n.Command(context.Background(), host, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "SLUICE_TEST_RUN="+strings.Join(args, "\x1f"))
	return cmd
}

// waitListen waits until something listens on port inside host.
func waitListen(t *testing.T, n *wan.Net, host, port string) {
	t.Helper()
	for range 300 {
		out, _ := n.Exec(context.Background(), host, "ss", "-ltnH", "sport = :"+port)
		if len(bytes.TrimSpace(out)) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s:%s", host, port)
}

// windowBound is what one stream can move over wan-untuned, MB/s: the
// 2 MB tcp_rmem maximum per 50 ms round trip (the window the kernel
// advertises is smaller still, about 83% of it).
const windowBound = 2097152 / 0.050 / 1e6

// TestWANAgentCopyIsWindowLimited: a sluice cp between agents in two
// hosts of wan-untuned crosses the emulated WAN, with one stream at no
// more than window/RTT, and several streams beat the window.
func TestWANAgentCopyIsWindowLimited(t *testing.T) {
	n := upWAN(t, "wan-untuned")
	dir := t.TempDir()
	rootA, rootB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{rootA, rootB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 96<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(rootA, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	if out, err := sluiceIn(t, n, "a", "keygen", key).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v: %s", err, out)
	}
	for _, h := range []struct{ host, root string }{{"a", rootA}, {"b", rootB}} {
		agent := sluiceIn(t, n, h.host, "agent", "--listen", n.Addr(h.host).String()+":17400", "--root", h.root, "--name", h.host, "--token-key", key)
		var log bytes.Buffer
		agent.Stdout, agent.Stderr = &log, &log
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			agent.Process.Kill()
			agent.Wait()
		})
		waitListen(t, n, h.host, "17400")
	}
	copyRate := func(streams, name string) float64 {
		t.Helper()
		// The copy runs in b and the destination agent pulls from a: the
		// bytes cross a>b. No streams given: cp's defaults.
		args := []string{"cp", "--token-key", key, "--json", "sluice://a:17400/f", "sluice://b:17400/" + name}
		if streams != "" {
			args = append(args, "--cc", "1", "--p", streams)
		}
		out, err := sluiceIn(t, n, "b", args...).Output()
		if err != nil {
			t.Fatalf("cp --p %s: %v: %s", streams, err, out)
		}
		var rep struct {
			Bytes int64   `json:"bytes"`
			MBps  float64 `json:"mb_per_s"`
		}
		if err := json.Unmarshal(out, &rep); err != nil || rep.Bytes != int64(len(data)) {
			t.Fatalf("cp report %s: %v", out, err)
		}
		got, err := os.ReadFile(filepath.Join(rootB, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the copy in b differs from the source (%v)", err)
		}
		return rep.MBps
	}
	st0, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	one := copyRate("1", "f1")
	four := copyRate("4", "f4")
	dflt := copyRate("", "fd")
	st1, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	crossed := st1.Links[0].Bytes - st0.Links[0].Bytes // a>b
	t.Logf("sluice cp over wan-untuned: one stream %.1f MB/s (window/RTT at most %.1f), four %.1f MB/s, no flags %.1f MB/s; %d MB crossed a>b",
		one, windowBound, four, dflt, crossed/1e6)
	if crossed < 3*uint64(len(data)) {
		t.Errorf("only %d bytes crossed the emulated link for three copies of %d", crossed, len(data))
	}
	// With no flags, cp opens several streams on a window-limited path:
	// more than one window's worth per round trip.
	if dflt < 1.8*one {
		t.Errorf("no flags: %.1f MB/s, one stream %.1f: want several streams by default", dflt, one)
	}
	if one > 1.1*windowBound || one < 0.4*windowBound {
		t.Errorf("one stream: %.1f MB/s, want window-limited: at most window/RTT (%.1f) and not far under it", one, windowBound)
	}
	// Four windows would carry 4x one stream; the floor is 1.5x
	// because the emulation's packets cost CPU, and other packages'
	// tests share the machine's two cores (1.78x was seen once so).
	if four < 1.5*one {
		t.Errorf("four streams: %.1f MB/s, one %.1f: want parallel streams to beat the window", four, one)
	}
}

// TestWANGridFTP: globus-url-copy in b fetches from a GridFTP server in a
// across wan-untuned, one stream, at no more than window/RTT.
func TestWANGridFTP(t *testing.T) {
	needGridFTP(t)
	n := upWAN(t, "wan-untuned")
	dir, err := os.MkdirTemp("", "sluice-wan-gridftp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The server serves as nobody: the file must be readable by anyone.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Closing the network kills what runs in its hosts, the server too.
	gridftpIn(t, n, "a", filepath.Join(dir, "pid"))
	dst := filepath.Join(dir, "dst")
	start := time.Now()
	if out, err := n.Exec(context.Background(), "b", "globus-url-copy", "ftp://a:2811"+src, "file://"+dst); err != nil {
		t.Fatalf("globus-url-copy: %v: %s", err, out)
	}
	secs := time.Since(start).Seconds()
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy differs from the source (%v)", err)
	}
	rate := float64(len(data)) / secs / 1e6
	t.Logf("globus-url-copy over wan-untuned, one stream: %.1f MB/s (window/RTT at most %.1f)", rate, windowBound)
	if rate > 1.1*windowBound || rate < 0.25*windowBound {
		t.Errorf("globus-url-copy, one stream: %.1f MB/s, want window-limited: at most window/RTT (%.1f) and not far under it", rate, windowBound)
	}
}

// TestNetCommands: sluice net up, status, set, exec and down, as a user
// drives them.
func TestNetCommands(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the emulated WAN's namespaces and TUN devices (CI runs make test as root)")
	}
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SLUICE_TEST_RUN="+strings.Join(append([]string{"net", "--prefix", "slcn-", "--state-dir", dir}, args...), "\x1f"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { run("down") })
	out, err := run("up", "--profile", "wan-untuned")
	if err != nil || !strings.Contains(out, "a=198.18.0.1 b=198.18.0.2") {
		t.Fatalf("net up: %v: %s", err, out)
	}
	status := func() wan.Status {
		t.Helper()
		out, err := run("status", "--json")
		var st wan.Status
		if err != nil || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("net status --json: %v: %s", err, out)
		}
		return st
	}
	st := status()
	if st.Profile != "wan-untuned" || len(st.Hosts) != 2 || st.Hosts[1].Namespace != "slcn-b" || st.Links[0].RateMbps != 1000 {
		t.Fatalf("status after up: %+v", st)
	}
	if out, err := run("up", "--profile", "wan-untuned"); err != nil || status().PID != st.PID {
		t.Errorf("a second net up: %v: %s; want the running forwarder %d kept", err, out, st.PID)
	}
	if out, err := run("set", "a-b", `{"rate_mbps": 300, "delay_ms": 10}`); err != nil {
		t.Fatalf("net set: %v: %s", err, out)
	}
	if l := status().Links; l[0].RateMbps != 300 || l[1].Path.DelayMs != 10 {
		t.Errorf("after net set a-b: %+v", l)
	}
	if out, err := run("set", "a-b", `{"rate": 300}`); err == nil || !strings.Contains(out, "unknown field") {
		t.Errorf("net set with a misspelt field: %v: %s", err, out)
	}
	out, err = run("exec", "b", "--", "sh", "-c", "getent hosts a; exit 3")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(out, "198.18.0.1") {
		t.Errorf("net exec b -- sh -c 'getent hosts a; exit 3': %v: %s; want a resolved and exit status 3", err, out)
	}
	if out, err := run("down"); err != nil {
		t.Fatalf("net down: %v: %s", err, out)
	}
	if out, err := run("status"); err == nil || !strings.Contains(out, "no network is up") {
		t.Errorf("net status after down: %v: %s", err, out)
	}
	if _, err := os.Stat("/run/netns/slcn-a"); err == nil {
		t.Error("namespace slcn-a left after net down")
	}
}

// wanService is a sluice server, and an agent of the host's name when
// asked for, started in a host of an emulated network, with its data
// directory and the agent's root below dir.
type wanService struct {
	n          *wan.Net
	host       string
	api        string
	data, root string
}

// serviceIn starts the service in host (env added to the server's
// environment), and an agent named host if agent is set.
func serviceIn(t *testing.T, n *wan.Net, host, dir string, agent bool, env ...string) *wanService {
	t.Helper()
	addr := n.Addr(host).String()
	w := &wanService{n: n, host: host, api: "http://" + addr + ":17500", data: filepath.Join(dir, "data"), root: filepath.Join(dir, host)}
	start := func(env []string, args ...string) {
		cmd := sluiceIn(t, n, host, args...)
		cmd.Env = append(cmd.Env, env...)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() || os.Getenv("SLUICE_TEST_LOGS") != "" {
				t.Logf("sluice %s:\n%s", args[0], log.String())
			}
		})
	}
	start(env, "serve", "--listen", addr+":17500", "--data-dir", w.data)
	waitListen(t, n, host, "17500")
	if agent {
		if err := os.Mkdir(w.root, 0o755); err != nil {
			t.Fatal(err)
		}
		start(nil, "agent", "--listen", addr+":17400", "--root", w.root, "--name", host, "--server", w.api, "--join-token", "@"+filepath.Join(w.data, "join.token"))
		waitListen(t, n, host, "17400")
	}
	return w
}

// cli runs a command of the CLI against the service, in its host, as its
// admin.
func (w *wanService) cli(t *testing.T, args ...string) {
	t.Helper()
	args = append(args, "--server", w.api, "--token", "@"+filepath.Join(w.data, "admin.token"))
	var out []byte
	var err error
	for range 50 { // the agent joins just after it listens
		if out, err = sluiceIn(t, w.n, w.host, args...).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("no agent of that name")) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("sluice %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// crossing runs copy and returns how long it took and how many bytes
// crossed the network's first link (a>b) meanwhile.
func crossing(t *testing.T, n *wan.Net, copy func()) (secs float64, crossed uint64) {
	t.Helper()
	st0, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	copy()
	secs = time.Since(began).Seconds()
	st1, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return secs, st1.Links[0].Bytes - st0.Links[0].Bytes
}

// needGridFTP skips a test without the Globus GridFTP server and client.
func needGridFTP(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"globus-url-copy", "globus-gridftp-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat("/usr/sbin/" + tool); err != nil {
				t.Skipf("needs %s (scripts/ci-deps.sh installs it)", tool)
			}
		}
	}
}

// gridftpIn starts globus-gridftp-server in host on port 2811, serving
// anonymous logins as nobody (it runs until the network is closed).
func gridftpIn(t *testing.T, n *wan.Net, host, pidfile string) {
	t.Helper()
	a := n.Addr(host).String()
	srv, err := n.Command(context.Background(), host, "globus-gridftp-server", "-aa", "-p", "2811",
		"-control-interface", a, "-data-interface", a, "-anonymous-user", "nobody", "-S", "-pidfile", pidfile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := srv.CombinedOutput(); err != nil {
		t.Fatalf("globus-gridftp-server: %v: %s", err, out)
	}
	waitListen(t, n, host, "2811")
}

// TestWANStorageJob: a job of the service crosses the emulated WAN
// between protocols: an agent in b reads a file from a GridFTP server
// in a (a storage endpoint) and writes it into its own directory; the
// bytes cross the link a>b, and the copy is the source's.
func TestWANStorageJob(t *testing.T) {
	needGridFTP(t)
	n := upWAN(t, "wan-untuned")
	dir, err := os.MkdirTemp("", "sluice-wan-storage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the server serves as nobody
		t.Fatal(err)
	}
	data := make([]byte, 48<<20)
	rand.Read(data)
	src := filepath.Join(dir, "src.dat")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	gridftpIn(t, n, "a", filepath.Join(dir, "pid"))
	svc := serviceIn(t, n, "b", dir, true)
	svc.cli(t, "endpoint", "add", "ftpa", "ftp://a:2811", "--via", "b")
	secs, crossed := crossing(t, n, func() { svc.cli(t, "submit", "ftp://a:2811"+src, "sluice://b/in/copy.dat", "--watch") })
	got, err := os.ReadFile(filepath.Join(svc.root, "in", "copy.dat"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy in b differs from the source in a (%v)", err)
	}
	t.Logf("GridFTP in a to an agent in b over wan-untuned: %d MB in %.1f s (%.1f MB/s, window/RTT of one stream %.1f); %d MB crossed a>b",
		len(data)>>20, secs, float64(len(data))/secs/1e6, windowBound, crossed/1e6)
	if crossed < uint64(len(data)) {
		t.Errorf("only %d bytes crossed the emulated link for a copy of %d", crossed, len(data))
	}
}

// TestWANS3Job: a job reads an object from an S3 server (versitygw) in
// host a into an agent in host b across wan-untuned: the agent reads the
// object by ranged GETs itself; the bytes cross a>b and are the source's.
func TestWANS3Job(t *testing.T) {
	gw := os.Getenv("SLUICE_VERSITYGW")
	if gw == "" {
		t.Skip("needs versitygw (scripts/ci-deps.sh builds it and sets SLUICE_VERSITYGW)")
	}
	n := upWAN(t, "wan-untuned")
	dir, err := os.MkdirTemp("", "sluice-wan-s3-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// versitygw's posix backend: a bucket is a directory, an object a
	// file in it.
	data := make([]byte, 40<<20)
	rand.Read(data)
	obj := filepath.Join(dir, "gw", "bucket", "in", "obj.dat")
	if err := os.MkdirAll(filepath.Dir(obj), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, data, 0o644); err != nil {
		t.Fatal(err)
	}
	a := n.Addr("a").String()
	key, secret := "AKIASLUICEWANTEST", "wan-test-secret-"+strconv.Itoa(os.Getpid())
	srv, err := n.Command(context.Background(), "a", gw, "--port", a+":9000", "--quiet", "posix", filepath.Join(dir, "gw"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+key, "ROOT_SECRET_ACCESS_KEY="+secret)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitListen(t, n, "a", "9000")

	svc := serviceIn(t, n, "b", dir, true)
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	svc.cli(t, "endpoint", "add", "s3a", "s3+http://a:9000", "--via", "b", "--user", key, "--password-file", secretFile)
	secs, crossed := crossing(t, n, func() {
		svc.cli(t, "submit", "s3+http://a:9000/bucket/in/obj.dat", "sluice://b/in/copy.dat", "--watch")
	})
	got, err := os.ReadFile(filepath.Join(svc.root, "in", "copy.dat"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy in b differs from the object in a (%v)", err)
	}
	t.Logf("S3 in a to an agent in b over wan-untuned: %d MB in %.1f s (%.1f MB/s); %d MB crossed a>b",
		len(data)>>20, secs, float64(len(data))/secs/1e6, crossed/1e6)
	if crossed < uint64(len(data)) {
		t.Errorf("only %d bytes crossed the emulated link for a copy of %d", crossed, len(data))
	}
}

// wanHost is host of n as the storage harnesses run servers there.
func wanHost(n *wan.Net, host string) *storagetest.Host {
	return &storagetest.Host{
		Addr: n.Addr(host).String(),
		Command: func(name string, args ...string) (*exec.Cmd, error) {
			return n.Command(context.Background(), host, name, args...)
		},
		Listening: func(port int) bool {
			out, _ := n.Exec(context.Background(), host, "ss", "-ltnH", "sport = :"+strconv.Itoa(port))
			return len(bytes.TrimSpace(out)) > 0
		},
	}
}

// TestWANHTTPThirdPartyCopy: a job copies a file between two WebDAV
// servers (XRootD over HTTPS) in hosts a and b of wan-untuned by HTTP
// third-party copy: the destination in b pulls it from a across the
// emulated link, driven by the service in b; the file's bytes cross a>b
// once, and the copy is the source's.
func TestWANHTTPThirdPartyCopy(t *testing.T) {
	if err := storagetest.XRootDHTTPAvailable(true); err != nil {
		t.Skip(err)
	}
	n := upWAN(t, "wan-untuned")
	ca := storagetest.NewTestCA(t)
	src := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true, Host: wanHost(n, "a")})
	dst := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true, Host: wanHost(n, "b")})
	data := make([]byte, 32<<20)
	rand.Read(data)
	src.Put(t, "in/f.dat", data)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	svc := serviceIn(t, n, "b", dir, false, "SSL_CERT_FILE="+caFile)
	davs := func(s *storagetest.XRootDHTTPServer) string { return "davs://" + strings.TrimPrefix(s.URL, "https://") }
	svc.cli(t, "endpoint", "add", "da", davs(src))
	svc.cli(t, "endpoint", "add", "db", davs(dst))
	secs, crossed := crossing(t, n, func() { svc.cli(t, "submit", src.URL+"/in/f.dat", dst.URL+"/out/f.dat", "--watch") })
	if got := dst.Read(t, "out/f.dat"); !bytes.Equal(got, data) {
		t.Fatalf("the copy in b differs from the source in a (%d bytes of %d)", len(got), len(data))
	}
	t.Logf("HTTP third-party copy a>b over wan-untuned: %d MB in %.1f s (%.1f MB/s); %d MB crossed a>b",
		len(data)>>20, secs, float64(len(data))/secs/1e6, crossed/1e6)
	if crossed < uint64(len(data)) || crossed > uint64(len(data))*5/4 {
		t.Errorf("%d bytes crossed the emulated link for a copy of %d: want the file once", crossed, len(data))
	}
}
