package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/emul"
)

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// env is one agent on a real socket, serving dir/root; dir/outside is a
// directory next to the root that nothing may reach.
type env struct {
	t       *testing.T
	name    string
	key     []byte
	root    string
	outside string
	s       *Server
	srv     *httptest.Server
	logs    *syncBuffer
}

func newEnv(t *testing.T, name string, client *http.Client) *env {
	t.Helper()
	return newEmulEnv(t, name, client, nil)
}

// newEmulEnv is newEnv with the agent's data path emulated (emu nil: not).
func newEmulEnv(t *testing.T, name string, client *http.Client, emu *emul.Config) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, name: name, key: bytes.Repeat([]byte(name[:1]), 32),
		root: filepath.Join(dir, "root"), outside: filepath.Join(dir, "outside"), logs: &syncBuffer{}}
	for _, d := range []string{e.root, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Name: name, Root: e.root, Key: e.key, Client: client, Emulation: emu,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	e.srv = httptest.NewServer(s.Handler())
	t.Cleanup(func() { e.srv.Close(); s.Close() })
	return e
}

func (e *env) addr() string { return e.srv.Listener.Addr().String() }

func (e *env) tokenFor(c auth.Claims) string {
	e.t.Helper()
	tok, err := auth.Mint(e.key, c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// token mints a token for this agent valid for an hour.
func (e *env) token(scope, prefix string) string {
	return e.tokenFor(auth.Claims{Sub: "test", Scope: scope, Prefix: prefix, Aud: e.name, Exp: time.Now().Add(time.Hour).Unix()})
}

func (e *env) write(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, rel))
	if err != nil {
		e.t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) String() string { return fmt.Sprintf("%d %q", r.status, r.body) }

// errKind is the kind of a JSON error body, "" if it is not one.
func (r reply) errKind() string {
	var b errorBody
	if json.Unmarshal([]byte(r.body), &b) != nil || b.Error == "" {
		return ""
	}
	return b.Kind
}

// raw sends a request with exactly target as the request line's path, so
// that no client library cleans or re-encodes it, and returns the reply.
// tok "" sends no Authorization header.
func (e *env) raw(method, target, tok string, hdr map[string]string, body string) reply {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.addr())
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, e.addr())
	if tok != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", tok)
	}
	_, cl := hdr["Content-Length"]
	_, te := hdr["Transfer-Encoding"]
	if !cl && !te && (body != "" || method == "PUT" || method == "POST") {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, target, err)
	}
	return reply{resp.StatusCode, resp.Header, string(got)}
}

// jsonBody marshals v for a request body.
func jsonBody(v any) string {
	js, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(js)
}
