package agent

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
)

const secret = "outside: must not be read or changed"

// secEnv is an agent whose root holds pub/f and priv/s and two symbolic
// links to outside it: link (to the outside directory) and slink (to the
// outside file x).
func secEnv(t *testing.T) *env {
	e := newEnv(t, "dtn1", nil)
	e.write("pub/f", "public")
	e.write("priv/s", "private")
	e.write("a/b", "ab")
	if err := os.WriteFile(filepath.Join(e.outside, "x"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(e.root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.outside, "x"), filepath.Join(e.root, "slink")); err != nil {
		t.Fatal(err)
	}
	return e
}

// outsideUnchanged fails unless the outside directory holds exactly x,
// unchanged.
func (e *env) outsideUnchanged() {
	e.t.Helper()
	got, err := os.ReadFile(filepath.Join(e.outside, "x"))
	if err != nil || string(got) != secret {
		e.t.Errorf("outside file: %q %v", got, err)
	}
	ents, _ := os.ReadDir(e.outside)
	if len(ents) != 1 {
		e.t.Errorf("outside directory holds %d entries", len(ents))
	}
}

func TestAuthentication(t *testing.T) {
	e := secEnv(t)
	good := auth.Claims{Sub: "t", Scope: "rw", Prefix: "/", Aud: "dtn1", Exp: time.Now().Add(time.Hour).Unix()}
	expired := good
	expired.Exp = time.Now().Add(-time.Second).Unix()
	wrongAud := good
	wrongAud.Aud = "dtn2"
	tok := e.tokenFor(good)
	payload, sig, _ := strings.Cut(tok, ".")
	b := []byte(sig)
	b[5] = map[bool]byte{true: 'B', false: 'A'}[b[5] == 'A']
	forged := payload + "." + string(b)
	otherKey, _ := auth.Mint(bytes.Repeat([]byte("z"), 32), good)
	anyAud := good
	anyAud.Aud = "*"

	for _, tc := range []struct {
		name   string
		header string
		status int
	}{
		{"valid", "Bearer " + tok, 200},
		{"any audience", "Bearer " + e.tokenFor(anyAud), 200},
		{"lowercase scheme", "bearer " + tok, 200},
		{"missing", "", 401},
		{"not bearer", "Basic " + tok, 401},
		{"empty bearer", "Bearer ", 401},
		{"garbage", "Bearer abc.def", 401},
		{"expired", "Bearer " + e.tokenFor(expired), 401},
		{"forged (one MAC byte flipped)", "Bearer " + forged, 401},
		{"wrong audience", "Bearer " + e.tokenFor(wrongAud), 401},
		{"other key", "Bearer " + otherKey, 401},
	} {
		hdr := map[string]string{}
		if tc.header != "" {
			hdr["Authorization"] = tc.header
		}
		for _, target := range []string{"/v1/files/pub/f", "/v1/info"} {
			r := e.raw("GET", target, "", hdr, "")
			if r.status != tc.status {
				t.Errorf("%s %s: %v, want %d", tc.name, target, r, tc.status)
			}
			if tc.status == 401 && (r.errKind() != "unauthorized" || r.header.Get("WWW-Authenticate") == "") {
				t.Errorf("%s: %v %v, want the unauthorized kind and WWW-Authenticate", tc.name, r, r.header)
			}
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "remote=127.0.0.1:") {
		t.Errorf("auth failures not logged at Warn with the remote address:\n%s", logs)
	}
	for _, tk := range []string{tok, forged, sig, payload} {
		if strings.Contains(logs, tk) {
			t.Errorf("a token (or part of one) was logged:\n%s", logs)
		}
	}
}

func TestScopeAndPrefix(t *testing.T) {
	e := secEnv(t)
	read := e.token("read", "/")
	write := e.token("write", "/")
	pub := e.token("rw", "/pub")
	pull := `{"source":"sluice://127.0.0.1:1/f","token":"t","dst":"/pub/g","offset":0,"length":1}`
	for _, tc := range []struct {
		name, method, target, tok, body string
		status                          int
	}{
		{"read token PUT", "PUT", "/v1/files/pub/g", read, "x", 403},
		{"read token DELETE", "DELETE", "/v1/files/pub/f", read, "", 403},
		{"read token rename", "POST", "/v1/rename", read, `{"from":"/pub/f","to":"/pub/g"}`, 403},
		{"read token pull", "POST", "/v1/pull", read, pull, 403},
		{"read token truncate", "POST", "/v1/truncate/pub/f?size=0", read, "", 403},
		{"read token mtime", "POST", "/v1/mtime/pub/f?mtime=0", read, "", 403},
		{"read token mkdir", "POST", "/v1/mkdir/pub/d", read, "", 403},
		{"read token sync", "POST", "/v1/sync/pub/f", read, "", 403},
		{"write token GET", "GET", "/v1/files/pub/f", write, "", 403},
		{"write token stat", "GET", "/v1/stat/pub/f", write, "", 403},
		{"write token list", "GET", "/v1/list/pub", write, "", 403},
		{"write token checksum", "GET", "/v1/checksum/pub/f?algo=md5", write, "", 403},
		{"write token batch", "POST", "/v1/batch", write, `{"paths":["/pub/f"]}`, 403},
		{"prefix: inside", "GET", "/v1/files/pub/f", pub, "", 200},
		{"prefix: the prefix itself", "GET", "/v1/list/pub", pub, "", 200},
		{"prefix: sibling", "GET", "/v1/files/priv/s", pub, "", 403},
		{"prefix: same start", "GET", "/v1/files/pubx", pub, "", 403},
		{"prefix: parent", "GET", "/v1/list/", pub, "", 403},
		{"prefix: PUT outside", "PUT", "/v1/files/priv/new", pub, "x", 403},
		{"prefix: rename out", "POST", "/v1/rename", pub, `{"from":"/pub/f","to":"/priv/f"}`, 403},
		{"prefix: rename in", "POST", "/v1/rename", pub, `{"from":"/priv/s","to":"/pub/s"}`, 403},
		{"prefix: pull outside", "POST", "/v1/pull", pub, strings.Replace(pull, "/pub/g", "/priv/g", 1), 403},
		{"prefix: delete outside", "DELETE", "/v1/files/priv/s", pub, "", 403},
	} {
		r := e.raw(tc.method, tc.target, tc.tok, nil, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
		if tc.status == 403 && r.errKind() != "permission" {
			t.Errorf("%s: kind %q, want permission", tc.name, r.errKind())
		}
	}
	if got := e.read("priv/s"); got != "private" {
		t.Errorf("refused requests changed priv/s to %q", got)
	}
	if got := e.read("pub/f"); got != "public" {
		t.Errorf("refused requests changed pub/f to %q", got)
	}
}

func TestPathEscapes(t *testing.T) {
	e := secEnv(t)
	rw := e.token("rw", "/")
	abs := url.PathEscape(filepath.Join(e.outside, "x")) // %2F...%2Fx
	targets := []string{
		"../x", "..", "../outside/x", "a/../../outside/x",
		"%2e%2e/x", "%2E%2E%2Fx", "%2e%2e%2foutside%2fx", "a/..%2f..%2fx", "a/%2e%2e/%2e%2e/outside/x",
		"%2fetc%2fpasswd", abs, "%2F" + abs,
		"link/x", "link", "slink",
		"x%00", "%00", "pub/f%00.txt", "%00/../x",
	}
	for _, p := range targets {
		for _, req := range []struct{ method, target, body string }{
			{"GET", "/v1/files/" + p, ""},
			{"HEAD", "/v1/files/" + p, ""},
			{"PUT", "/v1/files/" + p, "overwritten"},
			{"DELETE", "/v1/files/" + p, ""},
			{"GET", "/v1/stat/" + p, ""},
			{"GET", "/v1/list/" + p, ""},
			{"GET", "/v1/checksum/" + p + "?algo=md5", ""},
			{"POST", "/v1/truncate/" + p + "?size=0", ""},
			{"POST", "/v1/mtime/" + p + "?mtime=0", ""},
			{"POST", "/v1/sync/" + p, ""},
			{"POST", "/v1/mkdir/" + p + "/d", ""},
		} {
			if req.method == "DELETE" && (p == "slink" || p == "link") {
				// This removes the link itself, an entry of the root, and
				// does not follow it; the outside is checked below.
				continue
			}
			r := e.raw(req.method, req.target, rw, nil, req.body)
			if r.status != 403 && r.status != 400 {
				t.Errorf("%s %s: %v, want 403 or 400", req.method, req.target, r)
			}
			if strings.Contains(r.body, "outside:") {
				t.Errorf("%s %s leaked the outside file", req.method, req.target)
			}
		}
	}
	// Paths in JSON bodies are decoded already; the same rules hold.
	for _, tc := range []struct{ target, body string }{
		{"/v1/rename", `{"from":"../outside/x","to":"/stolen"}`},
		{"/v1/rename", `{"from":"/link/x","to":"/stolen"}`},
		{"/v1/rename", `{"from":"/pub/f","to":"/link/planted"}`},
		{"/v1/rename", `{"from":"/pub/f","to":"/a/../../outside/x"}`},
		{"/v1/rename", `{"from":"/pub/f\u0000","to":"/y"}`},
		{"/v1/pull", `{"source":"sluice://127.0.0.1:1/f","token":"t","dst":"/link/x","offset":0,"length":1}`},
		{"/v1/pull", `{"source":"sluice://127.0.0.1:1/f","token":"t","dst":"../outside/x","offset":0,"length":1}`},
	} {
		r := e.raw("POST", tc.target, rw, nil, tc.body)
		if r.status != 403 && r.status != 400 {
			t.Errorf("POST %s %s: %v, want 403 or 400", tc.target, tc.body, r)
		}
	}
	// Batch refuses such paths one by one, without sending them.
	r := e.raw("POST", "/v1/batch", rw, nil, jsonBody(map[string]any{"paths": []string{"../outside/x", "/link/x", "/slink", "/a/../../outside/x"}}))
	if r.status != 200 || strings.Contains(r.body, "outside:") || strings.Count(r.body, `"kind":"permission"`) != 4 {
		t.Errorf("batch of escapes: %v", r)
	}
	e.outsideUnchanged()
	if got := e.read("pub/f"); got != "public" {
		t.Errorf("pub/f changed to %q", got)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "remote=127.0.0.1:") || !strings.Contains(logs, "leaves the root") {
		t.Errorf("escapes not logged at Warn with the remote address:\n%.2000s", logs)
	}
	if strings.Contains(logs, rw) {
		t.Error("the token was logged")
	}
}

// TestLinksLeavingThePrefix: symbolic links inside the root but below a
// token's prefix must not lead out of the prefix. Before, a token for
// /pub read /priv/s through /pub/lnk -> ../priv/s and wrote into /priv
// through /pub/dlnk -> ../priv: the prefix was checked by name only, and
// os.Root guards the root, not the prefix.
func TestLinksLeavingThePrefix(t *testing.T) {
	e := secEnv(t)
	e.write("pub/sub/g", "inner")
	for link, target := range map[string]string{
		"pub/lnk":      "../priv/s",    // a file outside the prefix
		"pub/dlnk":     "../priv",      // a directory outside it
		"pub/sub/up":   "../../priv/s", // from deeper down
		"pub/round":    "../pub/f",     // out and back in: refused too
		"pub/chain":    "lnk",          // a link to a link that leaves
		"pub/ok":       "f",            // stays inside: allowed
		"pub/sub/okup": "../f",         // up, but not out: allowed
		"pub/dangling": "../priv/new",  // a write would create /priv/new
	} {
		if err := os.Symlink(target, filepath.Join(e.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	pub := e.token("rw", "/pub")
	self := "sluice://" + strings.TrimPrefix(e.srv.URL, "http://")
	const perFile = -1
	for _, tc := range []struct {
		name, method, target, body string
		want                       int
	}{
		{"read through a file link", "GET", "/v1/files/pub/lnk", "", 403},
		{"read through a directory link", "GET", "/v1/files/pub/dlnk/s", "", 403},
		{"read from deeper down", "GET", "/v1/files/pub/sub/up", "", 403},
		{"stat through a link", "GET", "/v1/stat/pub/dlnk/s", "", 403},
		{"checksum through a link", "GET", "/v1/checksum/pub/lnk?algo=md5", "", 403},
		{"list through a link", "GET", "/v1/list/pub/dlnk", "", 403},
		{"out and back in", "GET", "/v1/files/pub/round", "", 403},
		{"a chain of links", "GET", "/v1/files/pub/chain", "", 403},
		{"write through a directory link", "PUT", "/v1/files/pub/dlnk/new", "planted", 403},
		{"write through a dangling link", "PUT", "/v1/files/pub/dangling", "planted", 403},
		{"truncate through a link", "POST", "/v1/truncate/pub/lnk?size=0", "", 403},
		{"mtime through a link", "POST", "/v1/mtime/pub/lnk?mtime=0", "", 403},
		{"mtime through a directory link", "POST", "/v1/mtime/pub/dlnk/s?mtime=0", "", 403},
		{"mkdir through a link", "POST", "/v1/mkdir/pub/dlnk/d", "", 403},
		{"delete through a link", "DELETE", "/v1/files/pub/dlnk/s", "", 403},
		{"rename out through a link", "POST", "/v1/rename", `{"from":"/pub/f","to":"/pub/dlnk/f"}`, 403},
		{"rename in through a link", "POST", "/v1/rename", `{"from":"/pub/dlnk/s","to":"/pub/stolen"}`, 403},
		// Batches refuse file by file: 200, the pair or file refused.
		{"renames through a link", "POST", "/v1/renames", `{"pairs":[{"from":"/pub/f","to":"/pub/dlnk/f"}]}`, perFile},
		{"syncs through a link", "POST", "/v1/syncs", `{"paths":["/pub/dlnk/s"]}`, 403},
		{"pull into a link", "POST", "/v1/pull", `{"source":"sluice://127.0.0.1:1/f","token":"t","dst":"/pub/dlnk/s","offset":0,"length":1}`, 403},
		{"pullbatch into a link", "POST", "/v1/pullbatch", jsonBody(map[string]any{"source": self, "token": e.token("read", "/pub"),
			"files": []map[string]any{{"src": "/pub/f", "dst": "/pub/dlnk/x", "size": -1}}}), perFile},
		{"a link that stays inside", "GET", "/v1/files/pub/ok", "", 200},
		{"a link up but not out", "GET", "/v1/files/pub/sub/okup", "", 200},
		{"the prefix itself", "GET", "/v1/list/pub/sub", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.raw(tc.method, tc.target, pub, nil, tc.body)
			if tc.want == perFile {
				if r.status != 200 || !strings.Contains(r.body, `"kind":"permission"`) {
					t.Fatalf("%s %s: %v, want 200 with the file refused", tc.method, tc.target, r)
				}
			} else if r.status != tc.want {
				t.Fatalf("%s %s: %v, want %d", tc.method, tc.target, r, tc.want)
			}
			if strings.Contains(r.body, "private") {
				t.Errorf("leaked /priv/s: %v", r)
			}
		})
	}
	// Listed, a link out of the prefix says so, and nothing of its
	// target (private's size is 7); one that stays inside is listed as
	// its target.
	var list []backend.FileInfo
	if r := e.raw("GET", "/v1/list/pub/sub", pub, nil, ""); r.status != 200 || json.Unmarshal([]byte(r.body), &list) != nil {
		t.Fatalf("listing /pub/sub: %v", r)
	}
	for _, f := range list {
		switch f.Path {
		case "/pub/sub/up":
			if f.Err == "" || f.Size != 0 || !f.ModTime.IsZero() {
				t.Errorf("a link out of the prefix listed as %+v", f)
			}
		case "/pub/sub/okup":
			if f.Err != "" || f.Size != int64(len("public")) {
				t.Errorf("a link inside the prefix listed as %+v", f)
			}
		}
	}
	// Batch refuses them file by file.
	r := e.raw("POST", "/v1/batch", pub, nil, jsonBody(map[string]any{"paths": []string{"/pub/lnk", "/pub/dlnk/s", "/pub/f"}}))
	if r.status != 200 || strings.Contains(r.body, "private") || strings.Count(r.body, `"kind":"permission"`) != 2 || !strings.Contains(r.body, "public") {
		t.Errorf("batch through links: %v", r)
	}
	if got := e.read("priv/s"); got != "private" {
		t.Errorf("priv/s changed to %q", got)
	}
	for _, p := range []string{"priv/new", "priv/f", "priv/d", "pub/stolen"} {
		if _, err := os.Lstat(filepath.Join(e.root, p)); err == nil {
			t.Errorf("%s was created through a link", p)
		}
	}
	// A token for the whole root follows links inside it, as before.
	if r := e.raw("GET", "/v1/files/pub/lnk", e.token("read", "/"), nil, ""); r.status != 200 || r.body != "private" {
		t.Errorf("root token through a link inside the root: %v", r)
	}
}
