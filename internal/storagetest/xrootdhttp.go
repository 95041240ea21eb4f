package storagetest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/pki"
)

// TestCA is a certificate authority made for one test (package pki's,
// as `sluice ca` makes them): the servers the harnesses start over TLS
// get certificates it issues for 127.0.0.1 and localhost, and clients
// trust it alone. Two servers that must reach each other (an HTTP
// third-party copy) share one.
type TestCA struct {
	dir  string // the authority's files (pki.CACert, pki.CAKey)
	pool *x509.CertPool
	// PEM is the authority's certificate, PEM-encoded.
	PEM []byte
}

// NewTestCA makes a certificate authority.
func NewTestCA(t testing.TB) *TestCA {
	t.Helper()
	dir := t.TempDir()
	if err := pki.InitCA(dir, "sluice test CA", time.Now()); err != nil {
		t.Fatal(err)
	}
	pemData, err := os.ReadFile(filepath.Join(dir, pki.CACert))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("storagetest: the test authority's certificate does not parse")
	}
	return &TestCA{dir: dir, pool: pool, PEM: pemData}
}

// Pool is a certificate pool holding the authority alone.
func (ca *TestCA) Pool() *x509.CertPool { return ca.pool }

// Client is an HTTP client that trusts the authority alone.
func (ca *TestCA) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool()}
	return &http.Client{Transport: tr}
}

// issue writes into dir a server certificate for 127.0.0.1, localhost
// and hosts signed by the authority (cert.pem, with the authority's
// certificate after it), its key (cert.key, mode 0600) and the
// authority's certificate (ca.pem), and returns their names.
func (ca *TestCA) issue(t testing.TB, dir string, hosts ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	certFile, keyFile, err := pki.Issue(ca.dir, append([]string{"localhost", "127.0.0.1"}, hosts...), filepath.Join(dir, "cert"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, caFile
}

// XRootDHTTPOptions configure a server XRootDHTTP starts.
type XRootDHTTPOptions struct {
	// CA issues the server's certificate, and is the only authority
	// the server trusts when it reaches another server in a
	// third-party copy (nil: one made for this server alone). Servers
	// that copy between themselves need the same one.
	CA *TestCA
	// TPC loads XRootD's HTTP third-party-copy handler (XrdHttpTPC):
	// a WebDAV COPY with a Source header has the server pull the file
	// from another with libcurl, one with a Destination header push
	// it, and the answer streams performance markers.
	TPC bool
	// Config holds further configuration directives, one a line, put
	// after the harness's own.
	Config []string
	// Host, if set, runs the server elsewhere (a host of the emulated
	// WAN): its certificate also names Host.Addr.
	Host *Host
}

// Host is where a harness runs a server other than this process's
// network: a host of the emulated WAN, say.
type Host struct {
	// Addr is the host's address: servers listen there, and their URLs
	// name it.
	Addr string
	// Command makes the command that runs name there.
	Command func(name string, args ...string) (*exec.Cmd, error)
	// Listening reports whether something listens on port there (a
	// harness cannot connect to it from here).
	Listening func(port int) bool
}

// command is how a harness runs a server: here, or on h.
func (h *Host) command(name string, args ...string) (*exec.Cmd, error) {
	if h == nil {
		return exec.Command(name, args...), nil
	}
	return h.Command(name, args...)
}

// addr is the address a server listens on and is reached at.
func (h *Host) addr() string {
	if h == nil {
		return "127.0.0.1"
	}
	return h.Addr
}

// XRootDHTTPServer is an xrootd process that speaks HTTPS (XrdHttp,
// WebDAV included) on a temporary directory it serves read-write, with
// checksums (adler32, md5, crc32c) it computes and gives in Digest
// headers.
type XRootDHTTPServer struct {
	// URL is the server's https://127.0.0.1:port, without a slash.
	URL string
	// The directory it exports (Dir), owned by the server's user.
	localFiles
	// CA issued the server's certificate.
	CA *TestCA

	base string
	host *Host // where it runs (nil: here)
	port int   // its HTTPS port
}

// xrootdHTTPConfig is the configuration of every XRootD HTTP server: the
// data directory exported read-write, admin files apart from it, the
// checksums XRootD computes, and HTTP on its own port. XrdHttp loads its
// external handlers (the TPC one) only once HTTPS is configured (XRootD
// 5.5), so the server always speaks TLS: xrd.tls gives its certificate,
// xrd.tlsca the authority it trusts, which XrdHttpTPC also hands to
// libcurl (http.cafile) to check the other server's certificate.
const xrootdHTTPConfig = `all.export /
oss.localroot %s
all.adminpath %s
all.pidpath %s
xrootd.chksum max 4 adler32 md5 crc32c
xrd.tls %s %s
xrd.tlsca certfile %s
xrd.protocol XrdHttp:%d libXrdHttp.so
`

// xrootdHTTPTPCConfig loads the third-party-copy handler. tpc.trace info
// logs each copy and how it ended (tests check that the bytes went
// between the servers); tpc.timeout is how long a copy may go without
// moving a byte before the server gives it up.
const xrootdHTTPTPCConfig = `http.exthandler xrdtpc libXrdHttpTPC.so
tpc.trace info
tpc.timeout 60
`

// xrootdPlugin finds an XRootD plugin library (versioned as
// libNAME-5.so since XRootD 5) where the dynamic linker looks.
func xrootdPlugin(name string) bool {
	out, err := exec.Command("ldconfig", "-p").Output()
	if err == nil && strings.Contains(string(out), name+"-5.so") {
		return true
	}
	for _, dir := range []string{"/usr/lib64", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"} {
		if _, err := os.Stat(filepath.Join(dir, name+"-5.so")); err == nil {
			return true
		}
	}
	return false
}

// XRootDHTTPAvailable says why XRootD cannot start an HTTP server (with
// the TPC handler if tpc) here, or nil if it can.
func XRootDHTTPAvailable(tpc bool) error {
	if err := XRootDAvailable(); err != nil {
		return err
	}
	if !xrootdPlugin("libXrdHttp") {
		return errors.New("XRootD's HTTP protocol plugin libXrdHttp is not installed (apt-get install xrootd-server-plugins)")
	}
	if tpc && !xrootdPlugin("libXrdHttpTPC") {
		return errors.New("XRootD's HTTP third-party-copy plugin libXrdHttpTPC is not installed (apt-get install xrootd-server-plugins)")
	}
	return nil
}

// XRootDHTTP starts xrootd (Debian packages xrootd-server and
// xrootd-server-plugins) speaking HTTPS on a new temporary directory and
// returns once it answers an HTTP request; the test's cleanup stops it
// and removes the directory. The test is skipped if the server or its
// plugins are not installed. As root, the server runs as the xrootd user.
func XRootDHTTP(t testing.TB, o XRootDHTTPOptions) *XRootDHTTPServer {
	t.Helper()
	if err := XRootDHTTPAvailable(o.TPC); err != nil {
		t.Skipf("no XRootD HTTP server for this test: %v", err)
	}
	bin, _ := exec.LookPath("xrootd")
	s := &XRootDHTTPServer{localFiles: localFiles{uid: -1, gid: -1}, CA: o.CA, host: o.Host}
	if s.CA == nil {
		s.CA = NewTestCA(t)
	}
	var args []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("xrootd")
		if err != nil {
			t.Fatal(err)
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
		args = append(args, "-R", "xrootd")
	}
	// Not t.TempDir: its parent is private to this user, and the
	// server may run as another.
	base, err := os.MkdirTemp("", "sluice-xrootdhttp-")
	if err != nil {
		t.Fatal(err)
	}
	s.base = base
	t.Cleanup(func() { os.RemoveAll(base) })
	s.Dir = filepath.Join(base, "data")
	adm, tlsDir := filepath.Join(base, "adm"), filepath.Join(base, "tls")
	for _, d := range []string{s.Dir, adm, tlsDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var hosts []string
	if o.Host != nil {
		hosts = append(hosts, o.Host.Addr)
	}
	certFile, keyFile, caFile := s.CA.issue(t, tlsDir, hosts...)
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}

	// The ports are free when chosen, but something else may take one
	// before xrootd binds it: then xrootd exits at once, and is
	// started again on others.
	const attempts = 3
	for i := 1; ; i++ {
		xport, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		hport, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(xrootdHTTPConfig, s.Dir, adm, adm, certFile, keyFile, caFile, hport)
		if o.TPC {
			cfg += xrootdHTTPTPCConfig
		}
		for _, line := range o.Config {
			cfg += line + "\n"
		}
		cfgPath := filepath.Join(base, "xrootd.cfg")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s.Own(t, base)
		s.URL = "https://" + net.JoinHostPort(o.Host.addr(), strconv.Itoa(hport))
		s.port = hport
		err = s.start(t, bin, append(slices.Clone(args), "-p", strconv.Itoa(xport), "-n", "sluicehttp", "-c", cfgPath, "-l", filepath.Join(base, "log")))
		if err == nil {
			return s
		}
		if !errors.Is(err, errExited) || i == attempts {
			s.dumpLogs(t)
			t.Fatal(err)
		}
		t.Logf("%v; starting it again on other ports", err)
	}
}

// start runs xrootd, stopped by the test's cleanup, and waits until it
// answers HTTPS. It returns an error wrapping errExited if xrootd exited
// first.
func (s *XRootDHTTPServer) start(t testing.TB, bin string, args []string) error {
	t.Helper()
	cmd, err := s.host.command(bin, args...)
	if err != nil {
		return err
	}
	cmd.Dir = s.base
	c := s.Client()
	c.Timeout = time.Second
	defer c.CloseIdleConnections()
	if err := runServer(t, cmd, s.dumpLogs, 20*time.Second, 100*time.Millisecond, httpReady(s.host, s.port, c, s.URL)); err != nil {
		return fmt.Errorf("xrootd (HTTPS) on %s: %w", s.URL, err)
	}
	return nil
}

// Client is an HTTP client that trusts the server's certificate.
func (s *XRootDHTTPServer) Client() *http.Client { return s.CA.Client() }

// Log returns what the server has logged so far.
func (s *XRootDHTTPServer) Log() string { return readLogs(s.base, "log") }

func (s *XRootDHTTPServer) dumpLogs(t testing.TB) {
	if l := s.Log(); l != "" {
		t.Logf("xrootd (HTTP) log:\n%s", l)
	}
}
