package gridftp

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// testServer is a real globus-gridftp-server on loopback
// (storagetest.GridFTP), serving anonymous FTP, and the directory the
// tests' backends are rooted at.
type testServer struct {
	*storagetest.GridFTPServer
	addr string // 127.0.0.1:port
	dir  string // local directory, also its path on the server
}

// url is the base URL of a backend rooted at the test directory.
func (s *testServer) url(scheme string) string { return s.URL(scheme, "") }

// local is the local name of backend path p.
func (s *testServer) local(p string) string { return s.Local(p) }

// startServer starts a server taking anonymous logins.
func startServer(t *testing.T) *testServer {
	t.Helper()
	return wrapServer(storagetest.GridFTP(t, storagetest.GridFTPOptions{}))
}

// needTools skips the test unless the GridFTP programs are installed.
func needTools(t *testing.T) {
	t.Helper()
	if err := storagetest.GridFTPAvailable(); err != nil {
		t.Skip(err)
	}
}

func wrapServer(g *storagetest.GridFTPServer) *testServer {
	return &testServer{GridFTPServer: g, addr: g.Addr, dir: g.Dir}
}

// newBackend opens a backend on the test directory.
func newBackend(t *testing.T, s *testServer, opts Options) *Backend {
	t.Helper()
	b, err := New(s.url("ftp"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// put writes a local file the server can read and write (the server
// runs as nobody when the tests run as root). writable is kept for the
// tests' readability: every file put is writable.
func (s *testServer) put(t *testing.T, p string, data []byte, writable bool) {
	t.Helper()
	s.Put(t, p, data)
}

// randomBytes is n seeded pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}).Read(b)
	return b
}

func sumOf(t *testing.T, data []byte, algo string) string {
	t.Helper()
	s, err := backend.Sum(bytes.NewReader(data), algo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readLocal reads a file the server wrote.
func (s *testServer) readLocal(t *testing.T, p string) []byte {
	t.Helper()
	return s.Read(t, p)
}

// firstDiff describes where two byte slices differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("differ at byte %d (lengths %d and %d)", i, len(a), len(b))
}

// ctxT is a context for one test step.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
