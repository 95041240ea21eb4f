package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend/sluice"
)

// TestBadRequestsAnswered: requests the file system cannot serve (a name
// too long, an offset or size beyond what a file can hold, a link loop)
// are answered 400 or 403, not 500; the message names the path as the
// client does, never the root's place on the machine; a refused write
// leaves no file; every answer says it is from an agent.
func TestBadRequestsAnswered(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	tok := e.token("rw", "/")
	e.write("f", "abc")
	os.Symlink("loop2", filepath.Join(e.root, "loop1"))
	os.Symlink("loop1", filepath.Join(e.root, "loop2"))
	long := strings.Repeat("n", 300)
	for _, tc := range []struct {
		name, method, target string
		hdr                  map[string]string
		body                 string
		status               int
		left                 string // a file the refusal must not leave
	}{
		{"name too long", "GET", "/v1/files/" + long, nil, "", 400, ""},
		{"name too long to write", "PUT", "/v1/files/d/" + long, nil, "x", 400, "d"},
		{"offset at int64's end", "PUT", "/v1/files/cr2.bin",
			map[string]string{"Content-Range": "bytes 9223372036854775805-9223372036854775806/*"}, "xy", 400, "cr2.bin"},
		// Below file.MaxSize, beyond ext4's 16 TiB (skipped where taken).
		{"offset beyond the file system", "PUT", "/v1/files/cr3.bin",
			map[string]string{"Content-Range": fmt.Sprintf("bytes %d-%d/*", int64(1)<<50, int64(1)<<50+1)}, "xy", 400, "cr3.bin"},
		{"truncate to int64's end", "POST", "/v1/truncate/t.bin?size=9223372036854775807", nil, "", 400, "t.bin"},
		{"truncate beyond the file system", "POST", "/v1/truncate/t2.bin?size=1125899906842624", nil, "", 400, "t2.bin"},
		{"symbolic link loop", "GET", "/v1/files/loop1", nil, "", 403, ""},
		{"file as a directory", "GET", "/v1/stat/f/x", nil, "", 400, ""},
	} {
		r := e.raw(tc.method, tc.target, tok, tc.hdr, tc.body)
		if r.header.Get(sluice.AgentHeader) != Version {
			t.Errorf("%s: no %s header", tc.name, sluice.AgentHeader)
		}
		if r.status/100 == 2 && strings.Contains(tc.name, "file system") {
			t.Logf("%s: this file system takes it", tc.name)
			continue
		}
		if r.status != tc.status || r.errKind() == "" {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
		if strings.Contains(r.body, e.root) || strings.Contains(r.body, filepath.Dir(e.root)) {
			t.Errorf("%s: %q names the root's directory", tc.name, r.body)
		}
		if tc.left != "" {
			if _, err := os.Lstat(filepath.Join(e.root, tc.left)); !os.IsNotExist(err) {
				t.Errorf("%s: left %s behind (%v)", tc.name, tc.left, err)
			}
		}
	}
	if strings.Contains(e.logs.String(), "level=ERROR") {
		t.Errorf("bad requests logged as server errors:\n%s", e.logs)
	}
}

const internalSecret = "INTERNAL-ONLY aws_secret=AKIA-EXAMPLE"

// TestPullRefusesNonAgents: a pull or pull batch from something that is
// not an agent (no Sluice-Agent header), or from anything that answers
// with a redirect, is refused: nothing is written, no redirect is
// followed, and the answer does not echo what the other side sent.
func TestPullRefusesNonAgents(t *testing.T) {
	dst := newEnv(t, "dst", nil)
	tok := dst.token("write", "/in")
	// An internal service, not an agent: serves a secret to anyone.
	var internalHits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(internalSecret+"\n"))
	}))
	defer internal.Close()
	// fake answers as its handler says; redirects go to the internal one.
	var handle atomic.Value
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handle.Load().(func(http.ResponseWriter, *http.Request))(w, r)
	}))
	defer fake.Close()
	asAgent := func(f func(http.ResponseWriter, *http.Request)) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) { w.Header().Set(sluice.AgentHeader, "v1"); f(w, r) }
	}
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+r.URL.Path, http.StatusFound)
	}
	htmlError := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(404)
		fmt.Fprintf(w, "<html>%s</html>", internalSecret)
	}
	badFrame := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-sluice-batch")
		fmt.Fprintf(w, "%s\n", internalSecret)
	}
	serveSecret := func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(internalSecret+"\n"))
	}
	for _, tc := range []struct {
		name    string
		source  string
		handler func(http.ResponseWriter, *http.Request)
		batch   bool
	}{
		{"internal service", internal.URL, nil, false},
		{"internal service, batch", internal.URL, nil, true},
		{"redirect", "", redirect, false},
		{"redirect, batch", "", redirect, true},
		{"redirect from an agent", "", asAgent(redirect), false},
		{"redirect from an agent, batch", "", asAgent(redirect), true},
		{"html error page", "", htmlError, false},
		{"html error page, batch", "", htmlError, true},
		{"html error page from an agent", "", asAgent(htmlError), false},
		{"bad frame from an agent, batch", "", asAgent(badFrame), true},
		{"data without the header", "", serveSecret, false},
	} {
		internalHits.Store(0)
		dst.write("in/loot", strings.Repeat(".", len(internalSecret)))
		src := fake.URL
		if tc.source != "" {
			src = tc.source
		}
		if tc.handler != nil {
			handle.Store(tc.handler)
		}
		source := "sluice://" + strings.TrimPrefix(src, "http://")
		var r reply
		if tc.batch {
			r = dst.raw("POST", "/v1/pullbatch", tok, nil, jsonBody(sluice.PullBatchRequest{Source: source, Token: "t",
				Files: []sluice.PullBatchFile{{Src: "/x", Dst: "/in/loot", Size: -1}}}))
		} else {
			r = dst.raw("POST", "/v1/pull", tok, nil, jsonBody(map[string]any{"source": source + "/x", "token": "t",
				"dst": "/in/loot", "offset": 0, "length": len(internalSecret)}))
		}
		if r.status == 204 || (r.status == 200 && !strings.Contains(r.body, `"error"`)) {
			t.Errorf("%s: pulled: %v", tc.name, r)
		}
		if strings.Contains(r.body, "AKIA") || strings.Contains(r.body, "<html") {
			t.Errorf("%s: the answer echoes the source: %v", tc.name, r)
		}
		if strings.Contains(tc.name, "redirect") && (internalHits.Load() != 0 || !strings.Contains(r.body, "redirect")) {
			t.Errorf("%s: %v (internal service asked %d times)", tc.name, r, internalHits.Load())
		}
		if got, err := os.ReadFile(filepath.Join(dst.root, "in", "loot")); err == nil && strings.Contains(string(got), "AKIA") {
			t.Errorf("%s: the source's bytes were written", tc.name)
		}
	}
}

// TestPullFrom: with Config.PullFrom, pulls fetch only from the listed
// host:port, addresses and networks (checked again on the address
// dialled, so a name resolving elsewhere is refused); others are 403,
// nothing fetched. Malformed entries fail New.
func TestPullFrom(t *testing.T) {
	src, _, _, _, srcTok := pullSetup(t, 100)
	_, port, _ := strings.Cut(src.addr(), ":")
	for _, tc := range []struct {
		name     string
		pullFrom []string
		host     string // of the source URL
		status   int
	}{
		{"listed host:port", []string{src.addr()}, src.addr(), 204},
		{"listed name", []string{"LocalHost:" + port}, "localhost:" + port, 204},
		{"address in a listed network", []string{"10.0.0.0/8", "127.0.0.0/8"}, src.addr(), 204},
		{"listed address", []string{"127.0.0.1"}, src.addr(), 204},
		{"name resolving into a listed network", []string{"127.0.0.0/8"}, "localhost:" + port, 204},
		{"other port", []string{"127.0.0.1:1"}, src.addr(), 403},
		{"address outside the networks", []string{"10.0.0.0/8"}, src.addr(), 403},
		{"name resolving outside the networks", []string{"10.0.0.0/8"}, "localhost:" + port, 403},
		{"name not listed", []string{src.addr()}, "localhost:" + port, 403},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
		key := []byte(strings.Repeat("d", 32))
		s, err := New(Config{Name: "dst", Root: dir, Key: key, PullFrom: tc.pullFrom})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		srv := httptest.NewServer(s.Handler())
		d := &env{t: t, name: "dst", key: key, root: dir, s: s, srv: srv}
		body := jsonBody(map[string]any{"source": "sluice://" + tc.host + "/data/big", "token": srcTok, "dst": "/f", "offset": 0, "length": 100})
		if r := d.raw("POST", "/v1/pull", d.token("write", "/"), nil, body); r.status != tc.status {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
		body = jsonBody(sluice.PullBatchRequest{Source: "sluice://" + tc.host, Token: srcTok, Files: []sluice.PullBatchFile{{Src: "/data/big", Dst: "/g", Size: -1}}})
		r := d.raw("POST", "/v1/pullbatch", d.token("write", "/"), nil, body)
		want := tc.status
		if want == 204 {
			want = 200
		}
		if r.status != want || (want == 200 && strings.Contains(r.body, `"error"`)) {
			t.Errorf("%s: batch: %v", tc.name, r)
		}
		srv.Close()
		s.Close()
	}
	for _, bad := range []string{"nonsense", "10.0.0.0/33", "host:", ":80"} {
		if _, err := New(Config{Name: "dst", Root: t.TempDir(), Key: []byte(strings.Repeat("d", 32)), PullFrom: []string{bad}}); err == nil {
			t.Errorf("PullFrom %q accepted", bad)
		}
	}
}

// TestPullRefusesLinkLocal: without PullFrom, an agent still never pulls
// from a link-local address (where a cloud's metadata service answers),
// named as an address in the source URL or reached by dialling; listing
// it in PullFrom allows it.
func TestPullRefusesLinkLocal(t *testing.T) {
	dst := newEnv(t, "dst", nil)
	tok := dst.token("write", "/in")
	for _, host := range []string{"169.254.169.254:80", "[fe80::1]:80", "224.0.0.1:80", "[::ffff:169.254.169.254]:80", "[fd00:ec2::254]:80", "100.100.100.200:80"} {
		r := dst.raw("POST", "/v1/pull", tok, nil, jsonBody(map[string]any{"source": "sluice://" + host + "/x", "token": "t",
			"dst": "/in/f", "offset": 0, "length": 1}))
		if r.status != 403 {
			t.Errorf("pull from %s: %v, want 403", host, r)
		}
		r = dst.raw("POST", "/v1/pullbatch", tok, nil, jsonBody(sluice.PullBatchRequest{Source: "sluice://" + host, Token: "t",
			Files: []sluice.PullBatchFile{{Src: "/x", Dst: "/in/g", Size: -1}}}))
		if r.status != 403 {
			t.Errorf("pull batch from %s: %v, want 403", host, r)
		}
	}
	// A name is checked on the address it resolves to, when dialled:
	// the agent's client refuses the connection before it is made.
	_, err := dst.s.client.Get("http://169.254.169.254:9/latest/meta-data/")
	if err == nil || !strings.Contains(err.Error(), "not one this agent pulls from") {
		t.Errorf("the agent's client dialled a link-local address: %v", err)
	}
	for _, ok := range []string{"127.0.0.1:1", "[::1]:1"} {
		if _, err := dst.s.client.Get("http://" + ok + "/"); err != nil && strings.Contains(err.Error(), "not one this agent pulls from") {
			t.Errorf("loopback %s refused by default: %v", ok, err)
		}
	}
	// Listed, it is allowed (the dial is attempted).
	s, err := New(Config{Name: "x", Root: t.TempDir(), Key: []byte(strings.Repeat("x", 32)), PullFrom: []string{"169.254.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.pulls.checkURL("http://169.254.169.254:80"); err != nil {
		t.Errorf("listed network refused: %v", err)
	}
}
