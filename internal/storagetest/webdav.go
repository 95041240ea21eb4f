package storagetest

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
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

// WebDAVOptions configure a server WebDAV starts.
type WebDAVOptions struct {
	// TLS serves HTTPS with a certificate CA issues (nil: one made for
	// this server) instead of plain HTTP.
	TLS bool
	CA  *TestCA
	// Username and Password, if set, are the only login the server
	// takes (HTTP basic authentication); Token, if set, the only
	// bearer token. Without either, anyone may read and write.
	Username, Password string
	Token              string
	// Config holds further directives for the server block, one a
	// line, put after the harness's own.
	Config []string
	// Host, if set, runs the server elsewhere (a host of the emulated
	// WAN), listening on Host.Addr.
	Host *Host
}

// WebDAVServer is an nginx process serving a temporary directory
// read-write over WebDAV (PUT, DELETE, MKCOL, COPY, MOVE, PROPFIND,
// OPTIONS). It gives no checksums.
type WebDAVServer struct {
	// URL is the server's http(s)://127.0.0.1:port, without a slash.
	URL string
	// The directory it serves (Dir), owned by nginx's workers' user.
	localFiles
	// CA issued the server's certificate (nil without TLS).
	CA *TestCA

	base string
	host *Host // where it runs (nil: here)
	port int
}

// davExtModule is where Debian's libnginx-mod-http-dav-ext puts the
// module that gives nginx PROPFIND and OPTIONS (its own dav module has
// only PUT, DELETE, MKCOL, COPY and MOVE).
const davExtModule = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"

// nginxConfig is the whole configuration of a server: in the
// foreground, logs and temporary files below the harness's directory
// (request bodies land on the data directory's file system, so a PUT's
// file is renamed into place, never copied), no size limit on a request.
// create_full_put_path: a PUT makes the file's missing parent
// directories, as the backend contract's WriteAt does. dav_access: what
// a PUT makes stays readable by the test's user.
const nginxConfig = `daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
load_module %[2]s;
%[3]s
events { worker_connections 128; }
http {
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s/tmp/body;
	proxy_temp_path %[1]s/tmp/proxy;
	fastcgi_temp_path %[1]s/tmp/fastcgi;
	uwsgi_temp_path %[1]s/tmp/uwsgi;
	scgi_temp_path %[1]s/tmp/scgi;
	types {}
	default_type application/octet-stream;
	server {
		listen %[9]s:%[4]d%[5]s;
		%[6]s
		root %[7]s;
		client_max_body_size 0;
		dav_methods PUT DELETE MKCOL COPY MOVE;
		dav_ext_methods PROPFIND OPTIONS;
		create_full_put_path on;
		dav_access user:rw group:rw all:r;
%[8]s
	}
}
`

// WebDAVAvailable says why nginx cannot start a WebDAV server here, or
// nil if it can.
func WebDAVAvailable() error {
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			return errors.New("nginx is not installed (apt-get install nginx libnginx-mod-http-dav-ext)")
		}
	}
	if _, err := os.Stat(davExtModule); err != nil {
		return errors.New("nginx's WebDAV extension module is not installed (apt-get install libnginx-mod-http-dav-ext)")
	}
	return nil
}

// WebDAV starts nginx (Debian packages nginx and
// libnginx-mod-http-dav-ext) on a new temporary directory and returns
// once it answers; the test's cleanup stops it and removes the
// directory. The test is skipped if nginx or its module is not
// installed. As root, the master process stays root and the workers,
// which touch the files, run as www-data: file permissions a test sets
// then stop them.
func WebDAV(t testing.TB, o WebDAVOptions) *WebDAVServer {
	t.Helper()
	if err := WebDAVAvailable(); err != nil {
		t.Skipf("no WebDAV server for this test: %v", err)
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	s := &WebDAVServer{localFiles: localFiles{uid: -1, gid: -1}}
	userLine := ""
	if os.Geteuid() == 0 {
		if u, err := user.Lookup("www-data"); err == nil {
			s.uid, _ = strconv.Atoi(u.Uid)
			s.gid, _ = strconv.Atoi(u.Gid)
			userLine = "user www-data;"
		} else {
			// nginx's workers would run as nobody: let them be root
			// instead, whom the files belong to.
			userLine = "user root;"
		}
	}
	// Not t.TempDir: its parent is private to this user, and the
	// workers run as another.
	base, err := os.MkdirTemp("", "sluice-webdav-")
	if err != nil {
		t.Fatal(err)
	}
	s.base = base
	t.Cleanup(func() { os.RemoveAll(base) })
	s.Dir = filepath.Join(base, "data")
	for _, d := range []string{s.Dir, filepath.Join(base, "tmp")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	scheme, tlsListen, tlsLines := "http", "", ""
	if o.TLS {
		s.CA = o.CA
		if s.CA == nil {
			s.CA = NewTestCA(t)
		}
		tlsDir := filepath.Join(base, "tls")
		if err := os.Mkdir(tlsDir, 0o700); err != nil {
			t.Fatal(err)
		}
		certFile, keyFile, _ := s.CA.issue(t, tlsDir)
		scheme, tlsListen = "https", " ssl"
		tlsLines = fmt.Sprintf("ssl_certificate %s;\n\t\tssl_certificate_key %s;", certFile, keyFile)
	}
	var extra []string
	switch {
	case o.Username != "" && o.Token != "":
		t.Fatal("storagetest: WebDAVOptions: a login or a token, not both")
	case o.Username != "":
		// nginx reads {PLAIN} passwords as they are.
		pw := filepath.Join(base, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.Username+":{PLAIN}"+o.Password+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, `auth_basic "sluice test";`, "auth_basic_user_file "+pw+";")
	case o.Token != "":
		extra = append(extra, fmt.Sprintf(`if ($http_authorization != "Bearer %s") { return 401; }`, o.Token))
	}
	extra = append(extra, o.Config...)
	for i, l := range extra {
		extra[i] = "\t\t" + l
	}
	s.Own(t, s.Dir)
	s.Own(t, filepath.Join(base, "tmp"))

	// The port is free when chosen, but something else may take it
	// before nginx binds it: then nginx exits at once, and is started
	// again on another.
	const attempts = 3
	for i := 1; ; i++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf(nginxConfig, base, davExtModule, userLine, port, tlsListen, tlsLines, s.Dir, strings.Join(extra, "\n"), o.Host.addr())
		cfgPath := filepath.Join(base, "nginx.conf")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s.URL = scheme + "://" + net.JoinHostPort(o.Host.addr(), strconv.Itoa(port))
		s.port, s.host = port, o.Host
		// -e: the error log before the configuration is read, which
		// would otherwise be the system's.
		err = s.start(t, bin, []string{"-p", base, "-c", cfgPath, "-e", filepath.Join(base, "error.log")})
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

// start runs nginx, stopped by the test's cleanup, and waits until it
// answers HTTP. It returns an error wrapping errExited if nginx exited
// first.
func (s *WebDAVServer) start(t testing.TB, bin string, args []string) error {
	t.Helper()
	cmd, err := s.host.command(bin, args...)
	if err != nil {
		return err
	}
	cmd.Dir = s.base
	c := s.Client()
	c.Timeout = time.Second
	defer c.CloseIdleConnections()
	if err := runServer(t, cmd, s.dumpLogs, 15*time.Second, 50*time.Millisecond, httpReady(s.host, s.port, c, s.URL)); err != nil {
		return fmt.Errorf("nginx on %s: %w", s.URL, err)
	}
	return nil
}

func (s *WebDAVServer) Client() *http.Client {
	if s.CA != nil {
		return s.CA.Client()
	}
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// Log returns what nginx has logged so far (errors, then requests).
func (s *WebDAVServer) Log() string {
	return readLogs(s.base, "error.log") + readLogs(s.base, "access.log")
}

func (s *WebDAVServer) dumpLogs(t testing.TB) {
	if l := s.Log(); l != "" {
		t.Logf("nginx log:\n%s", l)
	}
}

// localFiles is the side of a server a harness started that a test
// reaches through the file system: the directory the server serves, and
// the user who must own what the test puts there so that the server can
// write over it.
type localFiles struct {
	// Dir is the local directory the server serves as "/".
	Dir string
	// uid and gid are the server's user (-1: the test's own user runs
	// the server).
	uid, gid int
}

// Local is the local name of p, a path below Dir.
func (f *localFiles) Local(p string) string {
	return filepath.Join(f.Dir, filepath.FromSlash(path.Clean("/"+p)))
}

// Put writes data to p (a path below Dir; a name ending in "/" is made a
// directory), creating its parents, all of it owned by the server's
// user.
func (f *localFiles) Put(t testing.TB, p string, data []byte) {
	t.Helper()
	local := f.Local(p)
	if strings.HasSuffix(p, "/") {
		if err := os.MkdirAll(local, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.Own(t, f.Dir)
}

// Read returns the content of p, a path below Dir.
func (f *localFiles) Read(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(f.Local(p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Own gives local, a file or directory below Dir, and everything below
// it to the server's user (nothing to do when the test's user runs the
// server), for what a test made there without Put.
func (f *localFiles) Own(t testing.TB, local string) {
	t.Helper()
	if f.uid < 0 {
		return
	}
	err := filepath.WalkDir(local, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, f.uid, f.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// RunsAsOtherUser reports whether the server runs as another user than
// the test: then file permissions the test sets do stop it.
func (f *localFiles) RunsAsOtherUser() bool { return f.uid >= 0 }

// runServer starts cmd in a process group of its own, killed with
// everything it started by the test's cleanup (dump, if set, then shows
// its logs on a failure), and polls ready every poll until it answers
// nil, for at most wait. It returns an error wrapping errExited if the
// process exits first.
func runServer(t testing.TB, cmd *exec.Cmd, dump func(testing.TB), wait, poll time.Duration, ready func() error) error {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Logf("started %s", strings.Join(cmd.Args, " "))
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() && dump != nil {
			dump(t)
		}
	})
	deadline := time.Now().Add(wait)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w: %v", errExited, cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(poll)
	}
}

// httpReady is a runServer readiness check: any HTTP answer from url
// (a listing, a refusal) means the server is up; on another host, whose
// address this process cannot reach, its port listening.
func httpReady(host *Host, port int, c *http.Client, url string) func() error {
	return func() error {
		if host != nil {
			if host.Listening(port) {
				return nil
			}
			return fmt.Errorf("nothing listens on port %d", port)
		}
		resp, err := c.Get(url + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

// readLogs is the content of the files below base whose names start with
// prefix.
func readLogs(base, prefix string) string {
	var all strings.Builder
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			if b, err := os.ReadFile(p); err == nil {
				all.Write(b)
			}
		}
		return nil
	})
	return all.String()
}
