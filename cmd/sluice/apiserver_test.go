package main

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAPIServerLimits: the API server bounds what one unauthenticated
// connection holds. Before, it had no idle timeout (nor a read timeout
// for net/http to fall back on): a client that sent one request could
// keep its connection, goroutine and file descriptor open for ever, so
// a few thousand such clients exhausted the server's descriptors.
func TestAPIServerLimits(t *testing.T) {
	hs := apiServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name     string
		got      time.Duration
		min, max time.Duration
	}{
		{"ReadHeaderTimeout", hs.ReadHeaderTimeout, time.Second, time.Minute},
		{"IdleTimeout", hs.IdleTimeout, time.Second, 10 * time.Minute},
	} {
		if tc.got < tc.min || tc.got > tc.max {
			t.Errorf("%s is %s, want %s to %s", tc.name, tc.got, tc.min, tc.max)
		}
	}
	if hs.ReadTimeout != 0 || hs.WriteTimeout != 0 {
		t.Errorf("ReadTimeout %s, WriteTimeout %s: large job bodies and event streams take longer", hs.ReadTimeout, hs.WriteTimeout)
	}
	// A header far larger than any client's is refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 512<<10) + "\r\n\r\n"
	go conn.Write([]byte(req))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	if !strings.Contains(string(buf[:n]), "431") {
		t.Errorf("a 512 KiB header: %q, want 431", buf[:n])
	}
}
