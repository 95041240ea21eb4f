package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "f")
	os.WriteFile(notDir, nil, 0o644)
	key := bytes.Repeat([]byte("k"), 32)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no name", Config{Root: dir, Key: key}, "no name"},
		{"short key", Config{Name: "a", Root: dir, Key: key[:31]}, "need at least"},
		{"no root", Config{Name: "a", Key: key}, "no root"},
		{"missing root", Config{Name: "a", Root: filepath.Join(dir, "nope"), Key: key}, "no such file"},
		{"root is a file", Config{Name: "a", Root: notDir, Key: key}, "not a directory"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestEndpoints(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	rw := e.token("rw", "/")
	expect := func(what string, r reply, status int) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %v, want %d", what, r, status)
		}
		if status >= 400 && r.errKind() == "" {
			t.Errorf("%s: error body %q is not the protocol's JSON", what, r.body)
		}
	}

	// PUT without Content-Range writes at 0 and creates parents.
	expect("put", e.raw("PUT", "/v1/files/d/sub/f.txt", rw, nil, "hello world"), 204)
	if got := e.read("d/sub/f.txt"); got != "hello world" {
		t.Errorf("file holds %q", got)
	}
	// Names with characters that need encoding arrive decoded once.
	expect("put odd name", e.raw("PUT", "/v1/files/d/a%20b%3Fc%23d%25", rw, nil, "odd"), 204)
	if got := e.read("d/a b?c#d%"); got != "odd" {
		t.Errorf("odd name holds %q", got)
	}

	r := e.raw("GET", "/v1/files/d/sub/f.txt", rw, nil, "")
	expect("get", r, 200)
	if r.body != "hello world" {
		t.Errorf("get body %q", r.body)
	}
	r = e.raw("HEAD", "/v1/files/d/sub/f.txt", rw, nil, "")
	expect("head", r, 200)
	if r.header.Get("Content-Length") != "11" || r.header.Get("Last-Modified") == "" || r.body != "" {
		t.Errorf("head: %v %v", r.header, r.body)
	}

	r = e.raw("GET", "/v1/stat/d/sub/f.txt", rw, nil, "")
	expect("stat", r, 200)
	var fi backend.FileInfo
	if err := json.Unmarshal([]byte(r.body), &fi); err != nil || fi.Path != "/d/sub/f.txt" || fi.Size != 11 || fi.IsDir || fi.ModTime.IsZero() {
		t.Errorf("stat %s: %+v %v", r.body, fi, err)
	}
	for _, key := range []string{`"path"`, `"size"`, `"mtime"`} {
		if !strings.Contains(r.body, key) {
			t.Errorf("stat JSON %s lacks %s", r.body, key)
		}
	}

	list := func(target string) []string {
		t.Helper()
		r := e.raw("GET", target, rw, nil, "")
		expect("list "+target, r, 200)
		var fis []backend.FileInfo
		if err := json.Unmarshal([]byte(r.body), &fis); err != nil {
			t.Fatalf("list %s: %v", r.body, err)
		}
		var names []string
		for _, fi := range fis {
			names = append(names, fmt.Sprintf("%s:%d:%v", fi.Path, fi.Size, fi.IsDir))
		}
		return names
	}
	if got := list("/v1/list/d"); len(got) != 2 || got[0] != "/d/a b?c#d%:3:false" ||
		!strings.HasPrefix(got[1], "/d/sub:") || !strings.HasSuffix(got[1], ":true") {
		t.Errorf("list d: %v", got)
	}
	if got := list("/v1/list/d?recursive=1"); len(got) != 3 || !strings.HasPrefix(got[2], "/d/sub/f.txt:11:false") {
		t.Errorf("recursive list: %v", got)
	}
	expect("mkdir", e.raw("POST", "/v1/mkdir/empty/x", rw, nil, ""), 204)
	if r := e.raw("GET", "/v1/list/empty/x", rw, nil, ""); r.status != 200 || strings.TrimSpace(r.body) != "[]" {
		t.Errorf("empty list: %v", r)
	}

	for _, algo := range backend.Algorithms {
		r := e.raw("GET", "/v1/checksum/d/sub/f.txt?algo="+algo, rw, nil, "")
		expect("checksum "+algo, r, 200)
		want, _ := backend.Sum(strings.NewReader("hello world"), algo)
		var got struct{ Algo, Value string }
		json.Unmarshal([]byte(r.body), &got)
		if got.Algo != algo || got.Value != want {
			t.Errorf("checksum %s: %s, want %s", algo, r.body, want)
		}
	}
	// A range's checksum: "world" of "hello world".
	if r := e.raw("GET", "/v1/checksum/d/sub/f.txt?algo=md5&offset=6&length=5", rw, nil, ""); r.status != 200 {
		t.Errorf("range checksum: %v", r)
	} else if want, _ := backend.Sum(strings.NewReader("world"), "md5"); !strings.Contains(r.body, want) {
		t.Errorf("range checksum %s, want %s", r.body, want)
	}

	at := time.Date(2020, 2, 29, 12, 0, 0, 123456000, time.UTC)
	expect("mtime", e.raw("POST", "/v1/mtime/d/sub/f.txt?mtime="+strconv.FormatInt(at.UnixNano(), 10), rw, nil, ""), 204)
	if fi, err := os.Stat(filepath.Join(e.root, "d/sub/f.txt")); err != nil || !fi.ModTime().Equal(at.Truncate(time.Microsecond)) {
		t.Errorf("mtime: %v, %v; want %s", fi.ModTime(), err, at)
	}
	expect("truncate", e.raw("POST", "/v1/truncate/d/big?size=1000", rw, nil, ""), 204)
	if fi, err := os.Stat(filepath.Join(e.root, "d/big")); err != nil || fi.Size() != 1000 {
		t.Errorf("truncate: %v %v", fi, err)
	}
	expect("sync", e.raw("POST", "/v1/sync/d/big", rw, nil, ""), 204)
	expect("rename", e.raw("POST", "/v1/rename", rw, nil, `{"from":"/d/big","to":"e/renamed"}`), 204)
	if _, err := os.Stat(filepath.Join(e.root, "e/renamed")); err != nil {
		t.Errorf("rename: %v", err)
	}
	expect("delete", e.raw("DELETE", "/v1/files/e/renamed", rw, nil, ""), 204)
	if _, err := os.Stat(filepath.Join(e.root, "e/renamed")); !os.IsNotExist(err) {
		t.Errorf("delete: %v", err)
	}
	expect("delete empty dir", e.raw("DELETE", "/v1/files/e", rw, nil, ""), 204)

	r = e.raw("GET", "/v1/info", e.token("read", "/nothing/here"), nil, "")
	expect("info", r, 200)
	// The instance is random per agent process (see Server.instance).
	var info map[string]string
	if err := json.Unmarshal([]byte(r.body), &info); err != nil || len(info) != 3 || info["name"] != "dtn1" || info["version"] != "v1" || len(info["instance"]) != 32 {
		t.Errorf("info %s", r.body)
	}

	// Errors: status and kind as documented.
	for _, tc := range []struct {
		method, target, body string
		status               int
		kind                 string
	}{
		{"GET", "/v1/stat/nope", "", 404, "not_found"},
		{"GET", "/v1/files/nope", "", 404, "not_found"},
		{"GET", "/v1/files/d", "", 400, "invalid"},
		{"GET", "/v1/checksum/d/sub/f.txt?algo=sha1", "", 400, "invalid"},
		{"GET", "/v1/checksum/d/sub/f.txt", "", 400, "invalid"},
		{"GET", "/v1/checksum/d", "", 400, "invalid"}, // a directory
		{"GET", "/v1/checksum/d/sub/f.txt?algo=md5&offset=6&length=6", "", 400, "invalid"},
		{"GET", "/v1/checksum/d/sub/f.txt?algo=md5&offset=9223372036854775807&length=9223372036854775807", "", 400, "invalid"},
		{"GET", "/v1/checksum/d/sub/f.txt?algo=md5&offset=-1&length=2", "", 400, "invalid"},
		{"GET", "/v1/list/d/sub/f.txt", "", 400, "invalid"},
		{"GET", "/v1/list/d?recursive=maybe", "", 400, "invalid"},
		{"POST", "/v1/truncate/d/x?size=-1", "", 400, "invalid"},
		{"POST", "/v1/truncate/d/x?size=ten", "", 400, "invalid"},
		{"POST", "/v1/truncate/d/x", "", 400, "invalid"},
		{"POST", "/v1/mtime/d/sub/f.txt", "", 400, "invalid"},
		{"POST", "/v1/mtime/d/sub/f.txt?mtime=-1", "", 400, "invalid"},
		{"POST", "/v1/mtime/nope?mtime=0", "", 404, "not_found"},
		{"POST", "/v1/sync/nope", "", 404, "not_found"},
		{"DELETE", "/v1/files/nope", "", 404, "not_found"},
		{"DELETE", "/v1/files/d", "", 409, "exist"}, // not empty
		{"DELETE", "/v1/files/", "", 403, "permission"},
		{"PUT", "/v1/files/d/sub/f.txt/under-a-file", "x", 409, "exist"}, // mkdir over a file
		{"POST", "/v1/rename", `{"from":"/nope","to":"/x"}`, 404, "not_found"},
		{"POST", "/v1/rename", `{"from":"/d/sub/f.txt"}`, 400, "invalid"},
		{"POST", "/v1/rename", `{"from":"/a","to":"/b"} {}`, 400, "invalid"},
		{"POST", "/v1/rename", `not json`, 400, "invalid"},
		{"POST", "/v1/pull", `{"source":"http://x:1/a","token":"t","dst":"/y","offset":0,"length":1}`, 400, "invalid"},
		{"POST", "/v1/pull", `{"source":"sluice://x:1/a","dst":"/y","offset":0,"length":1}`, 400, "invalid"},
		{"POST", "/v1/pull", `{"source":"sluice://x:1/a","token":"t","dst":"/y","offset":-1,"length":1}`, 400, "invalid"},
		{"GET", "/v1/nothing", "", 404, "not_found"},
		{"PATCH", "/v1/files/d/sub/f.txt", "", 405, "invalid"},
		{"GET", "/v1/files//d/sub/f.txt", "", 400, "invalid"},
		{"GET", "/v1/files/./d/sub/f.txt", "", 400, "invalid"},
	} {
		r := e.raw(tc.method, tc.target, rw, nil, tc.body)
		if r.status != tc.status || r.errKind() != tc.kind {
			t.Errorf("%s %s %s: %v, want %d %s", tc.method, tc.target, tc.body, r, tc.status, tc.kind)
		}
	}
}

func TestRange(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	e.write("f", "0123456789")
	tok := e.token("read", "/")
	for _, tc := range []struct {
		rng    string
		status int
		body   string
	}{
		{"bytes=2-5", 206, "2345"},
		{"bytes=-3", 206, "789"},
		{"bytes=7-", 206, "789"},
		{"bytes=8-100", 206, "89"},
		{"bytes=0-0", 206, "0"},
		{"bytes=10-20", 416, ""},
		{"bytes=100-", 416, ""},
	} {
		r := e.raw("GET", "/v1/files/f", tok, map[string]string{"Range": tc.rng}, "")
		if r.status != tc.status || (tc.status == 206 && r.body != tc.body) {
			t.Errorf("%s: %v, want %d %q", tc.rng, r, tc.status, tc.body)
		}
		if tc.status == 416 && r.errKind() != "invalid" {
			t.Errorf("%s: 416 body %q is not the protocol's JSON", tc.rng, r.body)
		}
		if tc.status == 206 && !strings.HasSuffix(r.header.Get("Content-Range"), "/10") {
			t.Errorf("%s: Content-Range %q", tc.rng, r.header.Get("Content-Range"))
		}
	}
}

func TestGarbageRangeHeaders(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	e.write("f", "0123456789")
	tok := e.token("read", "/")
	for _, h := range []string{
		"bytes=", "bytes=-", "bytes=5-3", "bytes=a-b", "items=0-1", "bytes=--1", "bytes=-0",
		"bytes=0-1,", "bytes= 1 - 2", "bytes=99999999999999999999-", "bytes=1-99999999999999999999",
		"bytes=-9223372036854775808", "bytes=0-1,2-3,4-5", "\x01\x02", "bytes=0-1,0-1,0-1,0-1",
		"bytes=" + strings.Repeat("0-1,", 20000), strings.Repeat("x", 100000),
	} {
		r := e.raw("GET", "/v1/files/f", tok, map[string]string{"Range": h}, "")
		switch r.status {
		case 200, 206, 400, 416:
		default:
			t.Errorf("Range %.40q: %v", h, r)
		}
	}
	// Still serving.
	if r := e.raw("GET", "/v1/files/f", tok, nil, ""); r.status != 200 || r.body != "0123456789" {
		t.Errorf("after garbage: %v", r)
	}
}

func TestPutRangesOutOfOrder(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	tok := e.token("write", "/")
	data := make([]byte, 100_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if r := e.raw("POST", "/v1/truncate/out/f?size="+strconv.Itoa(len(data)), tok, nil, ""); r.status != 204 {
		t.Fatal(r)
	}
	const chunk = 30_000
	var chunks [][2]int
	for off := 0; off < len(data); off += chunk {
		chunks = append(chunks, [2]int{off, min(off+chunk, len(data))})
	}
	rng.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })
	for i, c := range chunks {
		size := "*"
		if i%2 == 1 {
			size = strconv.Itoa(len(data))
		}
		cr := fmt.Sprintf("bytes %d-%d/%s", c[0], c[1]-1, size)
		if r := e.raw("PUT", "/v1/files/out/f", tok, map[string]string{"Content-Range": cr}, string(data[c[0]:c[1]])); r.status != 204 {
			t.Fatalf("%s: %v", cr, r)
		}
	}
	sum := sha256.Sum256(data)
	r := e.raw("GET", "/v1/checksum/out/f?algo=sha256", e.token("read", "/"), nil, "")
	if !strings.Contains(r.body, hex.EncodeToString(sum[:])) {
		t.Errorf("checksum after out-of-order ranges: %v", r)
	}
}

func TestPutBadContentRange(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	tok := e.token("rw", "/")
	e.write("f", "original")
	for _, tc := range []struct {
		cr, cl, body string
	}{
		{"bytes 0-4/*", "3", "abc"},  // Content-Length shorter than the range
		{"bytes 0-1/*", "3", "abc"},  // longer
		{"bytes 3-1/*", "3", "abc"},  // backwards
		{"bytes 0-2", "3", "abc"},    // no size
		{"bytes 0-2/2", "3", "abc"},  // beyond the size
		{"bytes -1-1/*", "3", "abc"}, // negative
		{"bytes +0-2/*", "3", "abc"}, // sign
		{"bytes 0-2/-5", "3", "abc"}, // negative size
		{"items 0-2/*", "3", "abc"},  // unit
		{"bytes */8", "3", "abc"},    // unsatisfied-range form
		{"bytes 0-9223372036854775807/*", "3", "abc"},
		{"bytes 99999999999999999999-99999999999999999999/*", "3", "abc"},
		{"", "3", "abc"},
	} {
		r := e.raw("PUT", "/v1/files/f", tok, map[string]string{"Content-Range": tc.cr, "Content-Length": tc.cl}, tc.body)
		if r.status != 400 || r.errKind() != "invalid" {
			t.Errorf("Content-Range %q: %v, want 400 invalid", tc.cr, r)
		}
	}
	// Chunked bodies have no Content-Length to check a range against.
	r := e.raw("PUT", "/v1/files/f", tok, map[string]string{"Transfer-Encoding": "chunked"}, "3\r\nabc\r\n0\r\n\r\n")
	if r.status != 400 || !strings.Contains(r.body, "needs a Content-Length") {
		t.Errorf("chunked PUT: %v", r)
	}
	r = e.raw("PUT", "/v1/files/f", tok, map[string]string{"Transfer-Encoding": "chunked", "Content-Range": "bytes 0-2/*"}, "3\r\nabc\r\n0\r\n\r\n")
	if r.status != 400 || !strings.Contains(r.body, "Content-Length -1") {
		t.Errorf("chunked PUT with a range: %v", r)
	}
	if got := e.read("f"); got != "original" {
		t.Errorf("refused PUTs changed the file to %q", got)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		h            string
		off, n, size int64
		ok           bool
	}{
		{"bytes 0-0/*", 0, 1, -1, true},
		{"bytes 5-9/10", 5, 5, 10, true},
		{"bytes 0-9223372036854775806/*", 0, 9223372036854775807, -1, true},
		{"bytes 007-010/*", 7, 4, -1, true},
		{"bytes 0-9223372036854775807/*", 0, 0, 0, false},
		{"bytes 5-9/9", 0, 0, 0, false},
		{"bytes 5-4/*", 0, 0, 0, false},
		{"bytes 5-/*", 0, 0, 0, false},
		{"bytes -5/*", 0, 0, 0, false},
		{"bytes  0-1/*", 0, 0, 0, false},
		{"Bytes 0-1/*", 0, 0, 0, false},
		{"bytes 0-1/ *", 0, 0, 0, false},
		{"bytes 0-1/**", 0, 0, 0, false},
		{"bytes 0x0-1/*", 0, 0, 0, false},
		{"bytes 0-1-2/*", 0, 0, 0, false},
		{"bytes 0-1/2/3", 0, 0, 0, false},
		{"bytes 0-1/*,2-3/*", 0, 0, 0, false},
		{"bytes 1e3-2e3/*", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		off, n, size, err := parseContentRange(tc.h)
		if (err == nil) != tc.ok || (tc.ok && (off != tc.off || n != tc.n || size != tc.size)) {
			t.Errorf("%q: %d %d %d %v, want %d %d %d ok=%v", tc.h, off, n, size, err, tc.off, tc.n, tc.size, tc.ok)
		}
	}
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-0/*", "bytes 5-9/10", "bytes 0-9223372036854775806/*", "bytes 5-4/*", "bytes -/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		off, n, size, err := parseContentRange(h)
		if err != nil {
			return
		}
		if off < 0 || n < 1 || off > (1<<63-1)-n+1 || (size != -1 && size < off+n) {
			t.Errorf("%q: accepted off %d n %d size %d", h, off, n, size)
		}
		if !strings.HasPrefix(h, "bytes ") || strings.ContainsAny(h[6:], " +,") {
			t.Errorf("%q accepted", h)
		}
	})
}

func TestBatch(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	e.write("pub/a", "alpha")
	e.write("pub/empty", "")
	e.write("pub/b", strings.Repeat("b", 100_000))
	e.write("priv/s", "secret")
	os.WriteFile(filepath.Join(e.outside, "x"), []byte("outside"), 0o644)
	tok := e.token("read", "/pub")
	paths := []string{"/pub/a", "pub/empty", "/pub/missing", "/pub", "/priv/s", "/pub/../outside/x", "/pub/b", "/pub/a"}
	r := e.raw("POST", "/v1/batch", tok, nil, jsonBody(map[string]any{"paths": paths}))
	if r.status != 200 {
		t.Fatal(r)
	}
	type frame struct {
		Path  string `json:"path"`
		Size  *int64 `json:"size"`
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	br := bufio.NewReader(strings.NewReader(r.body))
	var got []string
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil {
			t.Fatalf("frame header %q: %v", line, err)
		}
		var f frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("frame header %q: %v", line, err)
		}
		if f.Size == nil {
			got = append(got, f.Path+" "+f.Kind)
			continue
		}
		body := make([]byte, *f.Size)
		if _, err := io.ReadFull(br, body); err != nil {
			t.Fatal(err)
		}
		if len(body) > 10 {
			body = body[:10]
		}
		got = append(got, fmt.Sprintf("%s %d %s", f.Path, *f.Size, body))
	}
	want := []string{
		"/pub/a 5 alpha", "pub/empty 0 ", "/pub/missing not_found", "/pub invalid",
		"/priv/s permission", "/pub/../outside/x permission", "/pub/b 100000 bbbbbbbbbb", "/pub/a 5 alpha",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batch frames\n got %q\nwant %q", got, want)
	}
	if r := e.raw("POST", "/v1/batch", e.token("write", "/"), nil, `{"paths":["/pub/a"]}`); r.status != 403 {
		t.Errorf("write-only batch: %v", r)
	}
}

func TestJSONBodyLimit(t *testing.T) {
	e := newEnv(t, "dtn1", nil)
	tok := e.token("rw", "/")
	big := `{"from":"` + strings.Repeat("a", maxJSONBody) + `","to":"b"}`
	for _, target := range []string{"/v1/rename", "/v1/batch", "/v1/pull"} {
		r := e.raw("POST", target, tok, nil, big)
		if r.status != 400 || !strings.Contains(r.body, "larger than") {
			t.Errorf("%s with a %d-byte body: %v", target, len(big), r)
		}
	}
}

// pullSetup returns a source agent holding a file of size bytes and a
// destination agent, with tokens: write on the destination, read on the
// source (each agent has its own key and name).
func pullSetup(t *testing.T, size int) (src, dst *env, data []byte, dstTok, srcTok string) {
	src = newEnv(t, "src", nil)
	dst = newEnv(t, "dst", nil)
	data = make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	src.write("data/big", string(data))
	return src, dst, data, dst.token("write", "/in"), src.token("read", "/data")
}

func TestPull(t *testing.T) {
	src, dst, data, dstTok, srcTok := pullSetup(t, 3<<20+17)
	source := "sluice://" + src.addr() + "/data/big"
	// A pull writes into an allocated destination, never creates one
	// (a pull arriving after its transfer was canceled must not bring a
	// removed file back).
	body := jsonBody(map[string]any{"source": source, "token": srcTok, "dst": "/in/copy", "offset": 0, "length": 10})
	if r := dst.raw("POST", "/v1/pull", dstTok, nil, body); r.status != 404 {
		t.Fatalf("pull into a missing file: %v, want 404", r)
	}
	dst.write("in/copy", "")
	// Two ranges, the second first, as concurrent streams would write them.
	half := int64(len(data) / 2)
	for _, rg := range [][2]int64{{half, int64(len(data)) - half}, {0, half}} {
		body := jsonBody(map[string]any{"source": source, "token": srcTok, "dst": "/in/copy", "offset": rg[0], "length": rg[1]})
		if r := dst.raw("POST", "/v1/pull", dstTok, nil, body); r.status != 204 {
			t.Fatalf("pull %v: %v", rg, r)
		}
	}
	sum := func(e *env, p string) string {
		r := e.raw("GET", "/v1/checksum/"+p+"?algo=sha256", e.token("read", "/"), nil, "")
		if r.status != 200 {
			t.Fatal(r)
		}
		return r.body
	}
	want := sha256.Sum256(data)
	if a, b := sum(src, "data/big"), sum(dst, "in/copy"); a != b || !strings.Contains(a, hex.EncodeToString(want[:])) {
		t.Errorf("checksums differ: source %s, copy %s", a, b)
	}
	if strings.Contains(dst.logs.String(), srcTok) || strings.Contains(src.logs.String(), srcTok) {
		t.Error("a token was logged")
	}

	// The source's refusals come back as the destination's answer.
	dst.write("in/x", "")
	for _, tc := range []struct {
		name   string
		source string
		token  string
		dst    string
		off, n int64
		status int
	}{
		{"missing source", "sluice://" + src.addr() + "/data/nope", srcTok, "/in/x", 0, 1, 404},
		{"source token for the destination", source, dstTok, "/in/x", 0, 1, 403},
		{"source token outside its prefix", "sluice://" + src.addr() + "/other", srcTok, "/in/x", 0, 1, 403},
		{"range beyond the source", source, srcTok, "/in/x", int64(len(data)) + 10, 5, 400},
		{"range running past the source", source, srcTok, "/in/x", int64(len(data)) - 2, 5, 400},
		{"source not listening", "sluice://127.0.0.1:1/data/big", srcTok, "/in/x", 0, 1, 500},
		{"dst outside the prefix", source, srcTok, "/elsewhere", 0, 1, 403},
		{"dst escapes", source, srcTok, "/in/../../outside/x", 0, 1, 403},
	} {
		body := jsonBody(map[string]any{"source": tc.source, "token": tc.token, "dst": tc.dst, "offset": tc.off, "length": tc.n})
		if r := dst.raw("POST", "/v1/pull", dstTok, nil, body); r.status != tc.status {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
	}
}

// TestPullTLS pulls from a source agent behind TLS (sluices://), trusted
// through the destination's configured client.
func TestPullTLS(t *testing.T) {
	srcDir := t.TempDir()
	os.WriteFile(filepath.Join(srcDir, "f"), []byte("over tls"), 0o644)
	key := bytes.Repeat([]byte("s"), 32)
	srcAgent, err := New(Config{Name: "src", Root: srcDir, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer srcAgent.Close()
	ts := newTLSServer(t, srcAgent.Handler())
	dst := newEnv(t, "dst", ts.Client())
	dst.write("f", "")
	srcTok := (&env{t: t, key: key}).tokenFor(claimsFor("src", "read"))
	body := jsonBody(map[string]any{"source": "sluices://" + ts.Listener.Addr().String() + "/f", "token": srcTok, "dst": "/f", "offset": 0, "length": 8})
	if r := dst.raw("POST", "/v1/pull", dst.token("write", "/"), nil, body); r.status != 204 {
		t.Fatal(r)
	}
	if got := dst.read("f"); got != "over tls" {
		t.Errorf("pulled %q", got)
	}
}

func TestServeShutsDown(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("hi"), 0o644)
	key := bytes.Repeat([]byte("k"), 32)
	s, err := New(Config{Name: "a", Root: dir, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	certFile, keyFile, pool := writeCert(t)
	tok := (&env{t: t, key: key}).tokenFor(claimsFor("a", "read"))
	for _, tc := range []struct {
		name, cert, key, scheme string
		client                  *http.Client
	}{
		{"plain", "", "", "http", &http.Client{}},
		{"tls", certFile, keyFile, "https", tlsClient(pool)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx, ln, tc.cert, tc.key) }()
			req, _ := http.NewRequest("GET", tc.scheme+"://"+ln.Addr().String()+"/v1/files/f", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hi" {
				t.Errorf("GET: %d %q", resp.StatusCode, b)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve after cancel: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Serve did not return after its context ended")
			}
			if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
				t.Error("still accepting after shutdown")
			}
		})
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	if err := s.Serve(context.Background(), ln, certFile, ""); err == nil {
		t.Error("Serve with a certificate and no key did not fail")
	}
	if err := s.Serve(context.Background(), ln, filepath.Join(dir, "nope"), filepath.Join(dir, "nope")); err == nil {
		t.Error("Serve with missing TLS files did not fail")
	}
}

// TestPullProgress: a pull that asks for progress reports the bytes
// written as they land (a line per MiB), increasing, and its bytes are
// the source's; a refusal before any byte is the usual error answer.
func TestPullProgress(t *testing.T) {
	src, dst, data, dstTok, srcTok := pullSetup(t, 3<<20+17)
	source := "sluice://" + src.addr() + "/data/big"
	dst.write("in/copy", "")
	c, err := sluice.New("http://"+dst.addr(), dstTok, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Truncate(ctx, "/in/copy", int64(len(data))); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	n := int64(len(data))
	if err := c.PullProgress(ctx, source, srcTok, "/in/copy", 0, n, func(w int64) {
		if len(seen) > 0 && w <= seen[len(seen)-1] {
			t.Errorf("progress went from %d to %d", seen[len(seen)-1], w)
		}
		seen = append(seen, w)
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 3 || seen[len(seen)-1] != n {
		t.Errorf("progress reported %v for %d bytes: want a line per MiB and the whole at the end", seen, n)
	}
	got, err := os.ReadFile(filepath.Join(dst.root, "in", "copy"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("copy differs from the source (%v)", err)
	}
	err = c.PullProgress(ctx, source, srcTok, "/in/copy", n-2, 5, func(int64) { t.Error("progress for a refused range") })
	var se *sluice.StatusError
	if !errors.As(err, &se) || se.Status != 400 || !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("range running past the source: %v, want a 400 invalid", err)
	}
}
