package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
)

// TestServeHeaderLimit: the agent refuses a request header far larger
// than any legitimate one with 431, and still serves its largest
// legitimate request: a path of nearly PATH_MAX bytes, all of them
// percent-encoded, with a data token of nearly 8 KiB. Before, Go's
// default 1 MiB limit let each unauthenticated connection hold up to
// 1 MiB for the header timeout.
func TestServeHeaderLimit(t *testing.T) {
	root := t.TempDir()
	key := bytes.Repeat([]byte("k"), 32)
	// A path of 3,800 bytes or so, each byte one that URLs encode.
	var parts []string
	for i := 0; i < 18; i++ {
		parts = append(parts, fmt.Sprintf("%02d%s", i, strings.Repeat(" ", 198)))
	}
	rel := filepath.Join(append(parts, "f ")...)
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, rel), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Name: "a", Root: root, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, ln, "", "")
	// The largest token Verify accepts, near enough.
	var tok string
	for n := 6200; ; n -= 8 {
		c := claimsFor("a", "read")
		c.Sub = strings.Repeat("u", n)
		if tok, err = auth.Mint(key, c); err != nil {
			t.Fatal(err)
		}
		if len(tok) <= 8<<10 {
			break
		}
	}
	if len(tok) < 8<<10-16 {
		t.Fatalf("token of %d bytes, want nearly 8 KiB", len(tok))
	}
	target := "/v1/files" + (&url.URL{Path: "/" + filepath.ToSlash(rel)}).EscapedPath()
	if strings.Count(target, "%20") < 3500 {
		t.Fatalf("the path is not encoded as assumed: %.80s...", target)
	}
	get := func(extra string) string {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		req := "GET " + target + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\nAuthorization: Bearer " + tok + "\r\nRange: bytes=0-1\r\n" + extra + "\r\n"
		go conn.Write([]byte(req))
		b, _ := io.ReadAll(conn)
		return string(b)
	}
	if got := get(""); !strings.HasPrefix(got, "HTTP/1.1 206") || !strings.HasSuffix(got, "hi") {
		t.Errorf("the largest legitimate request (%d bytes of path, a %d-byte token): %.200q, want 206 and the file", len(target), len(tok), got)
	}
	if got := get("X-Big: " + strings.Repeat("a", 64<<10) + "\r\n"); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Errorf("a 64 KiB header: %.200q, want 431", got)
	}
}
