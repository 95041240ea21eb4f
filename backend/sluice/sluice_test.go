package sluice_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// testAgent is an agent on a real socket with its own key.
type testAgent struct {
	name, root string
	key        []byte
	srv        *httptest.Server
}

func newAgent(t *testing.T, name string) *testAgent {
	t.Helper()
	a := &testAgent{name: name, root: t.TempDir(), key: bytes.Repeat([]byte(name[:1]), 32)}
	s, err := agent.New(agent.Config{Name: name, Root: a.root, Key: a.key})
	if err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewServer(s.Handler())
	t.Cleanup(func() { a.srv.Close(); s.Close() })
	return a
}

func (a *testAgent) token(t *testing.T, scope, prefix string, ttl time.Duration) string {
	t.Helper()
	tok, err := auth.Mint(a.key, auth.Claims{Sub: "t", Scope: scope, Prefix: prefix, Aud: a.name, Exp: time.Now().Add(ttl).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (a *testAgent) client(t *testing.T, tok string) *sluice.Backend {
	t.Helper()
	b, err := sluice.New(a.srv.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (a *testAgent) url(p string) string { return "sluice://" + a.srv.Listener.Addr().String() + p }

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, base, path string
		ok             bool
	}{
		{"sluice://h:7000/a/b", "http://h:7000", "/a/b", true},
		{"sluices://h.example.org:443/data/run%207/x", "https://h.example.org:443", "/data/run 7/x", true},
		{"sluice://[::1]:7000/f", "http://[::1]:7000", "/f", true},
		{"sluice://h:7000", "http://h:7000", "/", true},
		{"sluice://h:7000/", "http://h:7000", "/", true},
		{"sluice://h/a", "", "", false},
		{"http://h:7000/a", "", "", false},
		{"sluice:h:7000/a", "", "", false},
		{"sluice:///a", "", "", false},
		{"sluice://u:p@h:7000/a", "", "", false},
		{"sluice://h:7000/a?x=1", "", "", false},
		{"sluice://h:7000/a#frag", "", "", false},
		{"sluice://h:7000/a%zz", "", "", false},
		{"", "", "", false},
	} {
		base, p, err := sluice.ParseURL(tc.in)
		if (err == nil) != tc.ok || base != tc.base || p != tc.path {
			t.Errorf("ParseURL(%q) = %q %q %v, want %q %q ok=%v", tc.in, base, p, err, tc.base, tc.path, tc.ok)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, u := range []string{"sluice://h:1", "ftp://h:1", "http://", "http://h:1/v1", "http://h:1?x", "http://u@h:1", "::"} {
		if _, err := sluice.New(u, "tok", nil); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := sluice.New("http://h:1", "", nil); err == nil {
		t.Error("New with no token accepted")
	}
	if _, err := sluice.New("https://h:1/", "tok", nil); err != nil {
		t.Errorf("New with a trailing slash: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	a := newAgent(t, "dtn1")
	b := a.client(t, a.token(t, "rw", "/", time.Hour))
	ctx := t.Context()
	data := []byte(strings.Repeat("0123456789", 1000))

	// Ranges written out of order into an allocated file.
	if err := b.Truncate(ctx, "/d/f", int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{5000, 10000}, {0, 3000}, {3000, 5000}} {
		if err := b.WriteAt(ctx, "d/f", int64(r[0]), bytes.NewReader(data[r[0]:r[1]]), int64(r[1]-r[0])); err != nil {
			t.Fatal(err)
		}
	}
	for _, algo := range backend.Algorithms {
		got, err := b.Checksum(ctx, "/d/f", algo)
		want, _ := backend.Sum(bytes.NewReader(data), algo)
		if err != nil || got != want {
			t.Errorf("checksum %s: %q %v, want %q", algo, got, err, want)
		}
	}
	read := func(p string, off, n int64) (string, error) {
		rc, err := b.OpenRange(ctx, p, off, n)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		return string(got), err
	}
	for _, tc := range []struct {
		off, n int64
		want   string
	}{
		{0, -1, string(data)},
		{9995, -1, "56789"},
		{12, 5, "23456"},
		{9998, 10, "89"}, // runs past the end: what there is, like a file
		{0, 0, ""},
		{10000, 0, ""},
	} {
		if got, err := read("/d/f", tc.off, tc.n); err != nil || got != tc.want {
			t.Errorf("OpenRange(%d, %d): %.20q %v, want %.20q", tc.off, tc.n, got, err, tc.want)
		}
	}
	if _, err := read("/d/f", 10000, 5); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("range beyond the end: %v, want ErrInvalid", err)
	}
	if _, err := read("/d/f", -1, 5); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("negative offset: %v", err)
	}
	if _, err := read("/d/nope", 0, 0); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("empty read of a missing file: %v", err)
	}

	// Names that need encoding.
	odd := "/d/a b?c#d%e+f"
	if err := b.WriteAt(ctx, odd, 0, strings.NewReader("odd"), 3); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(a.root, "d", "a b?c#d%e+f")); err != nil || string(got) != "odd" {
		t.Errorf("odd name: %q %v", got, err)
	}
	if err := b.WriteAt(ctx, "/d/empty", 0, strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAt(ctx, "/d/short", 0, strings.NewReader("abc"), 10); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("short source: %v, want ErrInvalid", err)
	}

	fi, err := b.Stat(ctx, "/d/f")
	if err != nil || fi.Path != "/d/f" || fi.Size != int64(len(data)) || fi.IsDir || fi.ModTime.IsZero() {
		t.Errorf("stat %+v %v", fi, err)
	}
	if err := b.Mkdir(ctx, "/d/sub/deeper"); err != nil {
		t.Fatal(err)
	}
	if err := b.Rename(ctx, "/d/empty", "/d/sub/deeper/moved"); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx, "/d/sub/deeper/moved"); err != nil {
		t.Fatal(err)
	}
	names := func(recursive bool) string {
		fis, err := b.List(ctx, "/d", recursive)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, fi := range fis {
			out = append(out, fi.Path)
		}
		return strings.Join(out, " ")
	}
	// d/short is the file the short write above created before failing.
	if got := names(false); got != "/d/a b?c#d%e+f /d/f /d/short /d/sub" {
		t.Errorf("list: %s", got)
	}
	if got := names(true); got != "/d/a b?c#d%e+f /d/f /d/short /d/sub /d/sub/deeper /d/sub/deeper/moved" {
		t.Errorf("recursive list: %s", got)
	}
	if err := b.Remove(ctx, "/d/sub/deeper/moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "/d/sub/deeper/moved"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("stat after remove: %v", err)
	}
	info, err := b.Info(ctx)
	if err != nil || info.Name != "dtn1" || info.Version != agent.Version {
		t.Errorf("info %+v %v", info, err)
	}
}

// A large write and read go through without the client holding them: the
// writer is a pipe fed while the request is in flight.
func TestStreaming(t *testing.T) {
	a := newAgent(t, "dtn1")
	b := a.client(t, a.token(t, "rw", "/", time.Hour))
	ctx := t.Context()
	const size = 32 << 20
	pr, pw := io.Pipe()
	h := sha256.New()
	go func() {
		chunk := bytes.Repeat([]byte{'x'}, 1<<20)
		for i := 0; i < size>>20; i++ {
			chunk[0] = byte(i)
			h.Write(chunk)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	if err := b.WriteAt(ctx, "/big", 0, pr, size); err != nil {
		t.Fatal(err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	if got, err := b.Checksum(ctx, "/big", "sha256"); err != nil || got != want {
		t.Errorf("checksum %s %v, want %s", got, err, want)
	}

	// OpenRange returns while the server is still sending.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		w.Header().Set("Content-Range", "bytes 0-9/10")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "-rest")
	}))
	defer slow.Close()
	defer close(release)
	sb, _ := sluice.New(slow.URL, "tok", nil)
	rc, err := sb.OpenRange(ctx, "/f", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first := make([]byte, 5)
	if _, err := io.ReadFull(rc, first); err != nil || string(first) != "first" {
		t.Errorf("first bytes %q %v", first, err)
	}
}

func TestErrorMapping(t *testing.T) {
	a := newAgent(t, "dtn1")
	os.MkdirAll(filepath.Join(a.root, "pub", "dir", "x"), 0o755)
	os.WriteFile(filepath.Join(a.root, "pub", "f"), []byte("f"), 0o644)
	ctx := t.Context()
	rw := a.client(t, a.token(t, "rw", "/pub", time.Hour))
	expired := a.client(t, a.token(t, "rw", "/", -time.Minute))
	wrongKey, _ := auth.Mint(bytes.Repeat([]byte("w"), 32), auth.Claims{Scope: "rw", Prefix: "/", Aud: "*", Exp: time.Now().Add(time.Hour).Unix()})
	forged := a.client(t, wrongKey)

	for _, tc := range []struct {
		name string
		err  error
		want error
		not  error
	}{
		{"404", func() error { _, err := rw.Stat(ctx, "/pub/nope"); return err }(), backend.ErrNotFound, backend.ErrPermission},
		{"403 prefix", func() error { _, err := rw.Stat(ctx, "/other"); return err }(), backend.ErrPermission, sluice.ErrUnauthorized},
		{"403 escape", func() error { _, err := rw.Stat(ctx, "/pub/../x"); return err }(), backend.ErrPermission, sluice.ErrUnauthorized},
		{"401 expired", func() error { _, err := expired.Stat(ctx, "/pub/f"); return err }(), sluice.ErrUnauthorized, nil},
		{"401 forged", func() error { _, err := forged.Stat(ctx, "/pub/f"); return err }(), sluice.ErrUnauthorized, nil},
		{"401 is a permission error", func() error { _, err := forged.Stat(ctx, "/pub/f"); return err }(), backend.ErrPermission, nil},
		{"400", func() error { _, err := rw.Checksum(ctx, "/pub/f", "sha1"); return err }(), backend.ErrInvalid, nil},
		{"409", rw.Remove(ctx, "/pub/dir"), backend.ErrExist, nil},
	} {
		// backend.Permanent leaves ErrExist out (a caller may remove and retry).
		permanent := tc.want != backend.ErrExist
		if !errors.Is(tc.err, tc.want) || (tc.not != nil && errors.Is(tc.err, tc.not)) || backend.Permanent(tc.err) != permanent {
			t.Errorf("%s: %v, want %v (and not %v), permanent=%v", tc.name, tc.err, tc.want, tc.not, permanent)
		}
		var se *sluice.StatusError
		if !errors.As(tc.err, &se) || se.Status == 0 {
			t.Errorf("%s: %v is not a *StatusError", tc.name, tc.err)
		}
	}

	// Answers from something that is not an agent, and no answer at all.
	var status int
	var body string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	defer fake.Close()
	fb, _ := sluice.New(fake.URL, "tok", nil)
	for _, tc := range []struct {
		status    int
		body      string
		want      error
		permanent bool
	}{
		{500, `{"error":"disk on fire","kind":"internal"}`, nil, false},
		{502, "bad gateway", nil, false},
		{503, "", nil, false},
		{507, `{"error":"full","kind":"no_space"}`, backend.ErrNoSpace, true},
		{404, "plain text not found", backend.ErrNotFound, true},
		{401, "", sluice.ErrUnauthorized, true},
		{418, `{"error":"?","kind":"teapot"}`, backend.ErrInvalid, true},
		{429, "slow down", nil, false},
	} {
		status, body = tc.status, tc.body
		_, err := fb.Stat(ctx, "/f")
		if err == nil || backend.Permanent(err) != tc.permanent || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%d %q: %v, want %v permanent=%v", tc.status, tc.body, err, tc.want, tc.permanent)
		}
	}
	status, body = 200, "not json"
	if _, err := fb.Stat(ctx, "/f"); err == nil {
		t.Error("a non-JSON stat answer was accepted")
	}
	status, body = 200, "whole file"
	if _, err := fb.OpenRange(ctx, "/f", 5, 3); err == nil {
		t.Error("a 200 answer to a range request was accepted")
	}

	fake.Close()
	if _, err := fb.Stat(ctx, "/f"); err == nil || backend.Permanent(err) {
		t.Errorf("unreachable agent: %v, want a transient error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := rw.Stat(cctx, "/pub/f"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestBatch(t *testing.T) {
	a := newAgent(t, "dtn1")
	files := map[string]string{"a": "alpha", "b": strings.Repeat("b", 70000), "c": "", "d": "delta"}
	for n, c := range files {
		os.WriteFile(filepath.Join(a.root, n), []byte(c), 0o644)
	}
	b := a.client(t, a.token(t, "read", "/", time.Hour))
	br, err := b.Batch(t.Context(), []string{"/a", "/b", "/missing", "/c", "/../x", "/d"})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var got []string
	for i := 0; ; i++ {
		name, size, r, err := br.Next()
		if err == io.EOF {
			break
		}
		switch {
		case errors.Is(err, backend.ErrNotFound):
			got = append(got, name+":not found")
		case errors.Is(err, backend.ErrPermission):
			got = append(got, name+":refused")
		case err != nil:
			t.Fatal(err)
		case name == "/b":
			// Read only part: Next skips the rest.
			p := make([]byte, 10)
			io.ReadFull(r, p)
			got = append(got, fmt.Sprintf("%s:%d:%s", name, size, p))
		default:
			c, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(c) != files[strings.TrimPrefix(name, "/")] {
				t.Errorf("%s: %q", name, c)
			}
			got = append(got, fmt.Sprintf("%s:%d:%s", name, size, c))
		}
		if i > 10 {
			t.Fatal("no end")
		}
	}
	want := "[/a:5:alpha /b:70000:bbbbbbbbbb /missing:not found /c:0: /../x:refused /d:5:delta]"
	if fmt.Sprint(got) != want {
		t.Errorf("batch\n got %v\nwant %s", got, want)
	}
	if _, _, _, err := br.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
	wb := a.client(t, a.token(t, "write", "/", time.Hour))
	if _, err := wb.Batch(t.Context(), []string{"/a"}); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("write-only batch: %v", err)
	}

	// A stream cut inside a file or a header is an error, not a short file.
	for _, stream := range []string{
		`{"path":"/a","size":10}` + "\nabc",
		`{"path":"/a","si`,
		"not json\n",
		`{"path":"/a"}` + "\n",
	} {
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(sluice.AgentHeader, "v1")
			w.Header().Set("Content-Type", "application/x-sluice-batch")
			io.WriteString(w, stream)
		}))
		fb, _ := sluice.New(fake.URL, "tok", nil)
		br, err := fb.Batch(t.Context(), []string{"/a"})
		if err != nil {
			t.Fatal(err)
		}
		var readErr error
		name, _, r, err := br.Next()
		if err == nil {
			_, readErr = io.ReadAll(r)
		}
		if (err == nil && readErr == nil) || (err != nil && name != "") {
			t.Errorf("stream %q: next %v, read %v", stream, err, readErr)
		}
		if err == nil && !errors.Is(readErr, io.ErrUnexpectedEOF) {
			t.Errorf("stream %q: read %v, want ErrUnexpectedEOF", stream, readErr)
		}
		br.Close()
		fake.Close()
	}
}

func TestPull(t *testing.T) {
	src := newAgent(t, "src")
	dst := newAgent(t, "dst")
	data := bytes.Repeat([]byte("pull me "), 300_000)
	os.MkdirAll(filepath.Join(src.root, "data"), 0o755)
	os.WriteFile(filepath.Join(src.root, "data", "f"), data, 0o644)
	ctx := t.Context()
	db := dst.client(t, dst.token(t, "rw", "/in", time.Hour))
	srcTok := src.token(t, "read", "/data", time.Hour)
	n := int64(len(data))
	if err := db.Truncate(ctx, "/in/f", n); err != nil {
		t.Fatal(err)
	}
	third := n / 3
	for _, r := range [][2]int64{{2 * third, n - 2*third}, {0, third}, {third, third}} {
		if err := db.Pull(ctx, src.url("/data/f"), srcTok, "/in/f", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	sb := src.client(t, srcTok)
	want, _ := sb.Checksum(ctx, "/data/f", "sha256")
	if got, err := db.Checksum(ctx, "/in/f", "sha256"); err != nil || got != want {
		t.Errorf("copy checksum %s %v, source %s", got, err, want)
	}
	for _, tc := range []struct {
		name, source, tok, dst string
		want                   error
	}{
		{"missing source", src.url("/data/nope"), srcTok, "/in/f", backend.ErrNotFound},
		{"missing destination", src.url("/data/f"), srcTok, "/in/g", backend.ErrNotFound},
		{"source refuses the token", src.url("/data/f"), "bad.token", "/in/f", backend.ErrPermission},
		{"dst outside the prefix", src.url("/data/f"), srcTok, "/out/g", backend.ErrPermission},
		{"not a sluice URL", "http://x:1/f", srcTok, "/in/g", backend.ErrInvalid},
	} {
		if err := db.Pull(ctx, tc.source, tc.tok, tc.dst, 0, 10); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestNotAgent: answers from something that is not an agent (no
// AgentHeader) and redirects are refused without their body being used,
// and an agent's error message is kept only short and printable. The
// client never follows a redirect, even with a caller's client that would.
func TestNotAgent(t *testing.T) {
	const secret = "AKIA-SECRET"
	var elsewhere int
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere++
		w.Header().Set(sluice.AgentHeader, "v1")
		io.WriteString(w, `{"name":"x","version":"v1"}`)
	}))
	defer other.Close()
	var h http.HandlerFunc
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r) }))
	defer fake.Close()
	agentSays := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(sluice.AgentHeader, "v1")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	otherSays := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	redirect := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}
	long := `{"error":"` + strings.Repeat("x", 5000) + secret + `","kind":"invalid"}`
	control := `{"error":"line\u001b[31m\nnext","kind":"invalid"}`
	info := func(b *sluice.Backend) error { _, err := b.Info(t.Context()); return err }
	read := func(b *sluice.Backend) error {
		rc, err := b.OpenRange(t.Context(), "/f", 0, 5)
		if err == nil {
			rc.Close()
		}
		return err
	}
	batch := func(b *sluice.Backend) error {
		br, err := b.Batch(t.Context(), []string{"/f"})
		if err != nil {
			return err
		}
		defer br.Close()
		_, _, _, err = br.Next()
		return err
	}
	for _, tc := range []struct {
		name      string
		h         http.HandlerFunc
		op        func(*sluice.Backend) error
		want      error // nil: transient
		forbidden string
	}{
		{"200 without the header", otherSays(200, `{"name":"`+secret+`"}`), info, sluice.ErrNotAgent, secret},
		{"206 without the header", otherSays(206, secret), read, sluice.ErrNotAgent, secret},
		{"404 page without the header", otherSays(404, "<html>"+secret), info, sluice.ErrNotAgent, secret},
		{"502 page without the header", otherSays(502, "<html>"+secret), info, nil, secret},
		{"batch without the header", otherSays(200, secret+"\n"), batch, sluice.ErrNotAgent, secret},
		{"redirect", redirect, info, sluice.ErrNotAgent, "no redirect followed"},
		{"redirect of a read", redirect, read, sluice.ErrNotAgent, "no redirect followed"},
		{"agent's 404 that is not JSON", agentSays(404, "<html>"+secret), info, backend.ErrNotFound, secret},
		{"agent's long message", agentSays(400, long), info, backend.ErrInvalid, secret},
		{"agent's message with control characters", agentSays(400, control), info, backend.ErrInvalid, "\x1b"},
		{"agent's batch of another type", agentSays(200, secret+"\n"), batch, sluice.ErrNotAgent, secret},
	} {
		h = tc.h
		elsewhere = 0
		// A caller's client that follows redirects does not make the
		// backend follow them.
		b, err := sluice.New(fake.URL, "tok", &http.Client{})
		if err != nil {
			t.Fatal(err)
		}
		err = tc.op(b)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", tc.name)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && backend.Permanent(err):
			t.Errorf("%s: %v is permanent", tc.name, err)
		case strings.Contains(err.Error(), tc.forbidden), len(err.Error()) > 1000:
			t.Errorf("%s: %q passes on what the other side said", tc.name, err)
		case elsewhere != 0:
			t.Errorf("%s: a redirect was followed", tc.name)
		}
	}
}

// TestSilentAgent: a range read from an agent that stops answering (a
// frozen process keeps its connections open) fails after Idle instead of
// waiting for ever, both before the answer and mid-body; an agent that is
// slow but sends something keeps the read alive.
func TestSilentAgent(t *testing.T) {
	release := make(chan struct{})
	var h http.HandlerFunc
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r) }))
	defer fake.Close()
	defer close(release) // before Close, which waits for the handlers
	answer := func(w http.ResponseWriter) {
		w.Header().Set(sluice.AgentHeader, "v1")
		w.Header().Set("Content-Range", "bytes 0-9/10")
		w.WriteHeader(http.StatusPartialContent)
	}
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		wantErr bool
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request) { <-release }, true},
		{"stops mid-body", func(w http.ResponseWriter, r *http.Request) {
			answer(w)
			io.WriteString(w, "01234")
			w.(http.Flusher).Flush()
			<-release
		}, true},
		{"slow but alive", func(w http.ResponseWriter, r *http.Request) {
			answer(w)
			for i := range 10 {
				io.WriteString(w, fmt.Sprint(i))
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond) // under Idle each time, 1 s in all
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h = tc.h
			b, err := sluice.New(fake.URL, "tok", nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Idle = 400 * time.Millisecond
			start := time.Now()
			var got []byte
			rc, err := b.OpenRange(context.Background(), "/f", 0, 10)
			if err == nil {
				got, err = io.ReadAll(rc)
				rc.Close()
			}
			took := time.Since(start)
			switch {
			case tc.wantErr && err == nil:
				t.Fatalf("read %q from a silent agent without error", got)
			case tc.wantErr && (!strings.Contains(err.Error(), "sent nothing") || took > 3*time.Second):
				t.Errorf("after %s: %v, want the watchdog's error after about 400ms", took, err)
			case tc.wantErr && backend.Permanent(err):
				t.Errorf("%v is permanent; a silent agent may answer a retry", err)
			case !tc.wantErr && (err != nil || string(got) != "0123456789"):
				t.Errorf("slow agent: %q, %v", got, err)
			}
		})
	}
}

// TestSyncManyOldAgent: an agent from before POST /v1/syncs (404 for the
// route) has its files synced one request each, and a new one gets one
// request for all; a real failure is an error either way.
func TestSyncManyOldAgent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hasSyncs  bool
		syncFails bool
		wantCalls []string
		wantErr   bool
	}{
		{"new agent", true, false, []string{"/v1/syncs"}, false},
		{"old agent", false, false, []string{"/v1/syncs", "/v1/sync/a", "/v1/sync/b"}, false},
		{"old agent, a file missing", false, true, []string{"/v1/syncs", "/v1/sync/a"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls = append(calls, r.URL.Path)
				w.Header().Set(sluice.AgentHeader, "v1")
				switch {
				case r.URL.Path == "/v1/syncs" && tc.hasSyncs:
					w.WriteHeader(http.StatusNoContent)
				case strings.HasPrefix(r.URL.Path, "/v1/sync/") && !tc.syncFails:
					w.WriteHeader(http.StatusNoContent)
				default:
					http.NotFound(w, r)
				}
			}))
			defer fake.Close()
			fb, _ := sluice.New(fake.URL, "tok", nil)
			err := fb.SyncMany(context.Background(), []string{"/a", "/b"})
			if (err != nil) != tc.wantErr || !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("error %v, requests %v; want error %v, requests %v", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}

// TestWriteAtExisting: a write into an existing file only (what the
// engine uses for its ranges) writes into one that is there, and is
// refused as not found, creating nothing, when the file or its directory
// was removed; a plain WriteAt still creates both.
func TestWriteAtExisting(t *testing.T) {
	a := newAgent(t, "dtn1")
	b := a.client(t, a.token(t, auth.ScopeRW, "/", time.Hour))
	ctx := context.Background()
	if err := b.Truncate(ctx, "/d/.f.sluice-part", 6); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAtExisting(ctx, "/d/.f.sluice-part", 3, strings.NewReader("def"), 3); err != nil {
		t.Fatalf("into an existing file: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(a.root, "d")); err != nil {
		t.Fatal(err)
	}
	err := b.WriteAtExisting(ctx, "/d/.f.sluice-part", 3, strings.NewReader("def"), 3)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("into a removed file: %v, want not found", err)
	}
	if _, err := os.Stat(filepath.Join(a.root, "d")); !os.IsNotExist(err) {
		t.Errorf("the refused write made the directory again (%v)", err)
	}
	if err := b.WriteAt(ctx, "/d/g", 3, strings.NewReader("def"), 3); err != nil {
		t.Errorf("plain WriteAt no longer creates: %v", err)
	}
}

// TestBatchSumsTrailerError: an agent that will not vouch for a file's
// bytes (it changed while read) sends an error where the checksum goes.
// That file fails with the error's kind; the stream goes on to the next
// file. A trailer that is neither is a broken stream.
func TestBatchSumsTrailerError(t *testing.T) {
	const changed = `{"path":"/a","size":3}` + "\nabc" + `{"path":"/a","error":"/a was modified while it was read","kind":"changed"}` + "\n" +
		`{"path":"/b","size":2}` + "\nbb" + `{"path":"/b","checksum":"0123"}` + "\n"
	cases := []struct {
		name, stream string
		aErr         error // from Checksum of /a
		broken       bool  // the stream is broken after /a
	}{
		{"changed", changed, backend.ErrChanged, false},
		{"empty trailer", `{"path":"/a","size":3}` + "\nabc" + `{"path":"/a"}` + "\n", nil, true},
		{"trailer of another file", `{"path":"/a","size":3}` + "\nabc" + `{"path":"/b","error":"x","kind":"changed"}` + "\n", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(sluice.AgentHeader, "v1")
				w.Header().Set("Content-Type", "application/x-sluice-batch")
				io.WriteString(w, c.stream)
			}))
			defer fake.Close()
			fb, _ := sluice.New(fake.URL, "tok", nil)
			br, err := fb.BatchSums(t.Context(), []string{"/a", "/b"}, "adler32")
			if err != nil {
				t.Fatal(err)
			}
			defer br.Close()
			if _, _, r, err := br.Next(); err != nil {
				t.Fatal(err)
			} else {
				io.ReadAll(r)
			}
			_, err = br.Checksum()
			if c.broken {
				if err == nil || br.Err() == nil {
					t.Fatalf("checksum %v, stream %v: want a broken stream", err, br.Err())
				}
				return
			}
			if !errors.Is(err, c.aErr) || br.Err() != nil {
				t.Fatalf("checksum of /a: %v (stream %v), want %v and the stream going on", err, br.Err(), c.aErr)
			}
			name, _, r, err := br.Next()
			if err != nil || name != "/b" {
				t.Fatalf("next: %q %v", name, err)
			}
			io.ReadAll(r)
			if sum, err := br.Checksum(); err != nil || sum != "0123" {
				t.Errorf("checksum of /b: %q %v", sum, err)
			}
		})
	}
}

func TestEncodeURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sluice://a1/d/f.h5", "sluice://a1/d/f.h5"},
		{"sluice://h:7000/d/a?b#c%d e", "sluice://h:7000/d/a%3Fb%23c%25d%20e"},
		{"sluices://h:7000/x+y=z@w", "sluices://h:7000/x+y=z@w"},
		{"sluice://a1", "sluice://a1/"},
		{"not a url", "not a url"},
	} {
		got := sluice.EncodeURL(c.in)
		if got != c.want {
			t.Errorf("EncodeURL(%q) = %q, want %q", c.in, got, c.want)
		}
		if !strings.Contains(c.in, ":7000/") {
			continue
		}
		// What cp and the service read back is the name itself.
		if _, p, err := sluice.ParseURL(got); err != nil || p != c.in[strings.Index(c.in, ":7000/")+5:] {
			t.Errorf("%q read back as %q, %v", got, p, err)
		}
	}
}

// TestListPage: an agent's listing a page at a time, each resumed after
// the last entry of the one before, gives the whole recursive listing in
// order; a page size out of bounds and a cursor that is not a path are
// refused.
func TestListPage(t *testing.T) {
	a := newAgent(t, "lister")
	for i := range 25 {
		p := filepath.Join(a.root, "run", fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%02d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte{byte(i)}, 0o644)
	}
	b := a.client(t, a.token(t, "read", "/run", time.Hour))
	ctx := context.Background()
	all, err := b.List(ctx, "/run", true)
	if err != nil || len(all) != 29 {
		t.Fatalf("the whole listing: %d entries, %v", len(all), err)
	}
	var got []backend.FileInfo
	after := ""
	for pages := 0; ; pages++ {
		page, more, err := b.ListPage(ctx, "/run", after, 4)
		if err != nil || pages > 10 {
			t.Fatalf("page %d: %v", pages, err)
		}
		got = append(got, page...)
		if !more {
			break
		}
		after = page[len(page)-1].Path
	}
	if len(got) != len(all) {
		t.Fatalf("pages gave %d entries, the listing %d", len(got), len(all))
	}
	for i := range got {
		if got[i].Path != all[i].Path || got[i].Size != all[i].Size {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], all[i])
		}
	}
	for _, limit := range []int{0, 10001} {
		if _, _, err := b.ListPage(ctx, "/run", "", limit); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("a page of %d: %v, want ErrInvalid", limit, err)
		}
	}
	if _, _, err := b.ListPage(ctx, "/run", "/run/../etc", 4); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("a cursor with ..: %v, want it refused", err)
	}
}
