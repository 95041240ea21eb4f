package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

func pullBatchReply(t *testing.T, r reply) []sluice.PullBatchResult {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("pull batch: %v", r)
	}
	var out sluice.PullBatchResponse
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatalf("pull batch answer %q: %v", r.body, err)
	}
	return out.Files
}

// TestPullBatch: the destination agent fetches many files in one batch,
// verifies each against the source's checksum, and answers per file; a
// file the source cannot send, or of another size than expected, fails
// alone and leaves nothing behind.
func TestPullBatch(t *testing.T) {
	src, dst, data, dstTok, srcTok := pullSetup(t, 100<<10)
	src.write("data/a", "hello, batch")
	src.write("data/empty", "")
	src.write("other/x", "not for this token")
	source := "sluice://" + src.addr()
	files := []sluice.PullBatchFile{
		{Src: "/data/a", Dst: "/in/a", Size: 12},
		{Src: "/data/nope", Dst: "/in/nope", Size: -1},
		{Src: "/data/empty", Dst: "/in/sub/empty", Size: 0},
		{Src: "/other/x", Dst: "/in/x", Size: -1},
		{Src: "/data/big", Dst: "/in/big", Size: int64(len(data))},
		{Src: "/data/a", Dst: "/in/a-wrong-size", Size: 5},
	}
	dst.write("in/big", "stale bytes of an earlier attempt, longer than nothing")
	res := pullBatchReply(t, dst.raw("POST", "/v1/pullbatch", dstTok, nil,
		jsonBody(sluice.PullBatchRequest{Source: source, Token: srcTok, Checksum: "adler32", Files: files})))
	if len(res) != len(files) {
		t.Fatalf("%d results for %d files", len(res), len(files))
	}
	for i, want := range []struct {
		kind    string // "" for success
		content string
	}{
		{"", "hello, batch"}, {"not_found", ""}, {"", ""}, {"permission", ""}, {"", string(data)}, {"changed", ""}, // not the size it was listed with
	} {
		r, f := res[i], files[i]
		p := filepath.Join(dst.root, strings.TrimPrefix(f.Dst, "/"))
		if want.kind == "" {
			if r.Error != "" || r.Checksum == "" || r.Checksum != r.SourceChecksum {
				t.Errorf("%s: %+v, want success with equal checksums", f.Src, r)
			}
			if got := dst.read(strings.TrimPrefix(f.Dst, "/")); got != want.content {
				t.Errorf("%s: %d bytes written, want %d", f.Dst, len(got), len(want.content))
			}
			continue
		}
		if r.Kind != want.kind || r.Error == "" {
			t.Errorf("%s: %+v, want a %s error", f.Src, r, want.kind)
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: a failed file is at %s (%v)", f.Src, f.Dst, err)
		}
	}

	// Refused as a whole, before the source is asked.
	for _, tc := range []struct {
		name   string
		in     sluice.PullBatchRequest
		status int
	}{
		{"no files", sluice.PullBatchRequest{Source: source, Token: srcTok}, 400},
		{"dst outside the token's prefix", sluice.PullBatchRequest{Source: source, Token: srcTok, Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/elsewhere", Size: -1}}}, 403},
		{"dst escapes", sluice.PullBatchRequest{Source: source, Token: srcTok, Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/in/../../outside/x", Size: -1}}}, 403},
		{"unknown checksum", sluice.PullBatchRequest{Source: source, Token: srcTok, Checksum: "crc99", Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/in/q", Size: -1}}}, 400},
		{"no source token", sluice.PullBatchRequest{Source: source, Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/in/q", Size: -1}}}, 400},
		{"source token for the destination", sluice.PullBatchRequest{Source: source, Token: dstTok, Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/in/q", Size: -1}}}, 403},
	} {
		if r := dst.raw("POST", "/v1/pullbatch", dstTok, nil, jsonBody(tc.in)); r.status != tc.status {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
	}
	if _, err := os.Stat(filepath.Join(dst.outside, "x")); !os.IsNotExist(err) {
		t.Error("a pull batch wrote outside the root")
	}
	if strings.Contains(dst.logs.String(), srcTok) {
		t.Error("the source token was logged")
	}
}

// TestPullBatchCorruptSource: bytes that do not match the checksum the
// source sent with them are not kept.
func TestPullBatchCorruptSource(t *testing.T) {
	dst := newEnv(t, "dst", nil)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, Version)
		w.Header().Set("Content-Type", "application/x-sluice-batch")
		w.Write([]byte(`{"path":"/f","size":5}` + "\nhellx" + `{"path":"/f","checksum":"062c0215"}` + "\n"))
	}))
	defer fake.Close()
	in := sluice.PullBatchRequest{Source: "sluice://" + fake.Listener.Addr().String(), Token: "t", Checksum: "adler32",
		Files: []sluice.PullBatchFile{{Src: "/f", Dst: "/in/f", Size: 5}}}
	res := pullBatchReply(t, dst.raw("POST", "/v1/pullbatch", dst.token("write", "/in"), nil, jsonBody(in)))
	if res[0].Error == "" || !strings.Contains(res[0].Error, "checksum mismatch") {
		t.Fatalf("corrupt bytes: %+v, want a checksum mismatch", res[0])
	}
	if _, err := os.Stat(filepath.Join(dst.root, "in", "f")); !os.IsNotExist(err) {
		t.Errorf("corrupt bytes kept (%v)", err)
	}
}

// TestRenames: a rename batch answers per pair; a pair outside the token's
// prefix refuses the whole request.
func TestRenames(t *testing.T) {
	e := newEnv(t, "a", nil)
	e.write("in/.a.tmp", "A")
	e.write("in/.b.tmp", "B")
	tok := e.token("write", "/in")
	body := jsonBody(sluice.RenamesRequest{Pairs: []sluice.RenamePair{
		{From: "/in/.a.tmp", To: "/in/a"}, {From: "/in/.missing", To: "/in/m"}, {From: "/in/.b.tmp", To: "/in/d/b"},
	}})
	r := e.raw("POST", "/v1/renames", tok, nil, body)
	var out sluice.RenamesResponse
	if r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil || len(out.Results) != 3 {
		t.Fatalf("renames: %v", r)
	}
	if out.Results[0].Error != "" || out.Results[2].Error != "" || out.Results[1].Kind != "not_found" {
		t.Errorf("renames: %+v", out.Results)
	}
	if e.read("in/a") != "A" || e.read("in/d/b") != "B" {
		t.Error("renamed files hold the wrong bytes")
	}
	e.write("in/.c.tmp", "C")
	body = jsonBody(sluice.RenamesRequest{Pairs: []sluice.RenamePair{{From: "/in/.c.tmp", To: "/in/c"}, {From: "/in/a", To: "/out/a"}}})
	if r := e.raw("POST", "/v1/renames", tok, nil, body); r.status != 403 {
		t.Errorf("a rename out of the prefix: %v, want 403", r)
	}
	if e.read("in/.c.tmp") != "C" {
		t.Error("a refused batch renamed something")
	}
}

// TestPullBatchStaleOwnerKeepsNewFile: a batch of a server that lost the
// partition meanwhile (a paused process, resumed) fails mid-file after
// the new owner has written the same temporary file; its clean-up must
// not remove the new owner's file. Before, it did, and the new owner's
// rename then failed for good with "not found".
func TestPullBatchStaleOwnerKeepsNewFile(t *testing.T) {
	dst := newEnv(t, "dst", nil)
	sent, cut := make(chan struct{}), make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, Version)
		w.Header().Set("Content-Type", "application/x-sluice-batch")
		w.Write([]byte(`{"path":"/f","size":10}` + "\nOLD-D"))
		w.(http.Flusher).Flush()
		close(sent)
		<-cut // then the stream ends short: the stale batch's write fails
	}))
	defer fake.Close()
	old := backend.Fence{Partition: "src-a", Term: 4}
	in := sluice.PullBatchRequest{Source: "sluice://" + fake.Listener.Addr().String(), Token: "t", Checksum: "adler32",
		Files: []sluice.PullBatchFile{{Src: "/f", Dst: "/in/.f.t7.sluice-part", Size: 10, Fence: old.String()}}}
	done := make(chan reply, 1)
	go func() { done <- dst.raw("POST", "/v1/pullbatch", dst.token("write", "/in"), nil, jsonBody(in)) }()
	<-sent
	// The stale batch's first bytes are on disk; then the new owner
	// (term 5) writes the same temporary file.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dst.root, "in", ".f.t7.sluice-part")); strings.HasPrefix(string(b), "OLD-D") {
			break
		}
	}
	c, err := sluice.New("http://"+dst.addr(), dst.token("write", "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cur := backend.WithFence(context.Background(), backend.Fence{Partition: "src-a", Term: 5})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// The stale write may still hold the file: retry until the
		// new owner's write is in.
		if err = c.WriteAt(cur, "/in/.f.t7.sluice-part", 0, strings.NewReader("NEWER-DATA"), 10); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	close(cut)
	r := <-done
	if r.status == 200 {
		if res := pullBatchReply(t, r); res[0].Error == "" {
			t.Fatalf("the stale batch succeeded: %+v", res[0])
		}
	}
	if got := dst.read("in/.f.t7.sluice-part"); got != "NEWER-DATA" {
		t.Errorf("the new owner's file holds %q after the stale batch failed, want NEWER-DATA", got)
	}
}

// TestSyncs: POST /v1/syncs makes files durable in one request, for a
// token that may write every path named; anything else refuses the whole
// request.
func TestSyncs(t *testing.T) {
	e := newEnv(t, "a", nil)
	e.write("in/.a.tmp", "A")
	e.write("in/d/.b.tmp", "B")
	many := make([]string, maxBatchFiles+1)
	for i := range many {
		many[i] = "/in/.a.tmp"
	}
	for _, tc := range []struct {
		name  string
		tok   string
		paths []string
		want  int
	}{
		{"two files", e.token("write", "/in"), []string{"/in/.a.tmp", "/in/d/.b.tmp"}, 204},
		{"read token", e.token("read", "/in"), []string{"/in/.a.tmp"}, 403},
		{"a path outside the prefix", e.token("write", "/in"), []string{"/in/.a.tmp", "/out/x"}, 403},
		{"an escape", e.token("write", "/"), []string{"/in/../../etc/passwd"}, 403},
		{"none", e.token("write", "/in"), nil, 400},
		{"too many", e.token("write", "/in"), many, 400},
		{"no token", "", []string{"/in/.a.tmp"}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.raw("POST", "/v1/syncs", tc.tok, nil, jsonBody(sluice.SyncsRequest{Paths: tc.paths}))
			if r.status != tc.want {
				t.Errorf("%v, want %d", r, tc.want)
			}
		})
	}
}

// TestStats: POST /v1/stats answers the stat of every path asked, in
// order, each file's failure its own (a missing file, a directory is
// said to be one, a path outside the token's prefix or escaping the root
// is refused), and refuses the request as a whole only for what concerns
// all of it. StatMany gets the same answers from an agent without the
// route (a 404 for it), one request per file.
func TestStats(t *testing.T) {
	e := newEnv(t, "a", nil)
	e.write("in/a", "AAA")
	e.write("in/d/b", "B")
	if err := os.Symlink("../../outside", filepath.Join(e.root, "in", "out")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.outside, "secret"), []byte("S"), 0o644)
	paths := []string{"/in/a", "/in/missing", "/in/d", "/in/d/b", "/other/x", "/in/out/secret"}
	type want struct {
		size int64
		dir  bool
		err  error
	}
	wants := []want{{3, false, nil}, {0, false, backend.ErrNotFound}, {0, true, nil}, {1, false, nil},
		{0, false, backend.ErrPermission}, {0, false, backend.ErrPermission}}
	check := func(t *testing.T, rs []sluice.StatResult) {
		t.Helper()
		if len(rs) != len(paths) {
			t.Fatalf("%d results for %d paths", len(rs), len(paths))
		}
		for i, r := range rs {
			w := wants[i]
			if err := r.Err(); (w.err == nil) != (err == nil) || (w.err != nil && !errors.Is(err, w.err)) {
				t.Errorf("%s: error %v, want %v", paths[i], err, w.err)
				continue
			}
			if w.err == nil && (r.IsDir != w.dir || (!w.dir && r.Size != w.size)) {
				t.Errorf("%s: size %d dir %v, want %d %v", paths[i], r.Size, r.IsDir, w.size, w.dir)
			}
		}
	}
	ctx := context.Background()
	b, err := sluice.New("http://"+e.addr(), e.token("read", "/in"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("one request", func(t *testing.T) {
		rs, err := b.StatMany(ctx, paths)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("an agent without the route", func(t *testing.T) {
		old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/stats" {
				// What an agent's guard and mux answer for a route
				// they do not have.
				w.Header().Set(sluice.AgentHeader, Version)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"error": "404 page not found", "kind": "not_found"}`)
				return
			}
			e.s.Handler().ServeHTTP(w, r)
		}))
		defer old.Close()
		ob, err := sluice.New("http://"+old.Listener.Addr().String(), e.token("read", "/in"), nil)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ob.StatMany(ctx, paths)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	many := make([]string, maxBatchFiles+1)
	for i := range many {
		many[i] = "/in/a"
	}
	for _, tc := range []struct {
		name  string
		tok   string
		paths []string
		want  int
	}{
		{"write-only token", e.tokenFor(auth.Claims{Sub: "test", Scope: "write", Prefix: "/in", Aud: "a", Exp: time.Now().Add(time.Hour).Unix()}), []string{"/in/a"}, 403},
		{"none", e.token("read", "/in"), nil, 400},
		{"too many", e.token("read", "/in"), many, 400},
		{"no token", "", []string{"/in/a"}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.raw("POST", "/v1/stats", tc.tok, nil, jsonBody(sluice.StatsRequest{Paths: tc.paths}))
			if r.status != tc.want {
				t.Errorf("%v, want %d", r, tc.want)
			}
		})
	}
}
