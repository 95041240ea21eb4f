package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/root"
)

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// xrootdDir serves a directory over XRootD (go-hep's server, in this
// process) and returns its scheme://host:port.
func xrootdDir(t *testing.T, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := xrootd.NewServer(xrootd.NewFSHandler(dir), nil)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return "root://" + l.Addr().String()
}

// TestCopyWithStorage: an agent reads a range from a storage server
// into its file and writes a range of its file to one, each only with a
// token naming that server; a token without it (every token a user can
// get) makes the agent connect nowhere.
func TestCopyWithStorage(t *testing.T) {
	e := newEnv(t, "dtn", nil)
	reg := backend.NewRegistry()
	reg.Register(root.Open, "root")
	e.s.storage = reg
	store := t.TempDir()
	xrd := xrootdDir(t, store)
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	if err := os.WriteFile(filepath.Join(store, "in.dat"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.write("out/copy", "")
	e.write("data/src", string(data))
	tok := func(scope, prefix string, remotes ...string) string {
		return e.tokenFor(auth.Claims{Sub: "test", Scope: scope, Prefix: prefix, Aud: e.name, Remotes: remotes,
			Exp: time.Now().Add(time.Hour).Unix()})
	}
	half := int64(len(data) / 2)
	type end map[string]any
	for _, tc := range []struct {
		name   string
		tok    string
		from   end
		to     end
		off, n int64
		status int
	}{
		{"storage to agent, second half", tok("rw", "/out", xrd), end{"url": xrd + "/in.dat"}, end{"path": "/out/copy"}, half, int64(len(data)) - half, 204},
		{"storage to agent, first half", tok("rw", "/out", xrd), end{"url": xrd + "/in.dat"}, end{"path": "/out/copy"}, 0, half, 204},
		{"agent to storage", tok("read", "/data", xrd), end{"path": "/data/src"}, end{"url": xrd + "/up/dat"}, 0, int64(len(data)), 204},
		{"token without the server", tok("rw", "/"), end{"url": xrd + "/in.dat"}, end{"path": "/out/copy"}, 0, 1, 403},
		{"token for another server", tok("rw", "/", "root://127.0.0.1:1"), end{"url": xrd + "/in.dat"}, end{"path": "/out/copy"}, 0, 1, 403},
		{"remote scope reads no local file", tok(auth.ScopeRemote, "/", xrd), end{"path": "/data/src"}, end{"url": xrd + "/x"}, 0, 1, 403},
		{"local end outside the prefix", tok("rw", "/out", xrd), end{"url": xrd + "/in.dat"}, end{"path": "/data/src"}, 0, 1, 403},
		{"no port", tok("rw", "/out", xrd), end{"url": "root://127.0.0.1/in.dat"}, end{"path": "/out/copy"}, 0, 1, 400},
		{"user in the URL", tok("rw", "/out", xrd), end{"url": "root://u@" + xrd[len("root://"):] + "/in.dat"}, end{"path": "/out/copy"}, 0, 1, 400},
		{"two local ends", tok("rw", "/"), end{"path": "/data/src"}, end{"path": "/out/copy"}, 0, 1, 400},
		{"missing remote file", tok("rw", "/out", xrd), end{"url": xrd + "/nope"}, end{"path": "/out/copy"}, 0, 1, 404},
	} {
		body := jsonBody(map[string]any{"from": tc.from, "to": tc.to, "offset": tc.off, "length": tc.n})
		if r := e.raw("POST", "/v1/copy", tc.tok, nil, body); r.status != tc.status {
			t.Errorf("%s: %v, want %d", tc.name, r, tc.status)
		}
	}
	if got := e.read("out/copy"); got != string(data) {
		t.Errorf("the agent's copy of the storage file differs (%d bytes, want %d)", len(got), len(data))
	}
	if got, err := os.ReadFile(filepath.Join(store, "up", "dat")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the storage's copy of the agent's file differs (%d bytes, %v)", len(got), err)
	}

	// The checksum of a storage server's file, computed by the agent,
	// only with a token naming the server.
	sumBody := jsonBody(map[string]any{"url": xrd + "/in.dat", "algo": "sha256"})
	if r := e.raw("POST", "/v1/remotesum", tok("read", "/data", xrd), nil, sumBody); r.status != 200 || !strings.Contains(r.body, sha256hex(data)) {
		t.Errorf("remote checksum: %v, want sha256 %s", r, sha256hex(data))
	}
	if r := e.raw("POST", "/v1/remotesum", tok("read", "/data"), nil, sumBody); r.status != 403 {
		t.Errorf("remote checksum without the server in the token: %v, want 403", r)
	}

	// An agent configured without storage backends reaches none.
	e.s.storage = nil
	body := jsonBody(map[string]any{"from": end{"url": xrd + "/in.dat"}, "to": end{"path": "/out/copy"}, "offset": 0, "length": 1})
	if r := e.raw("POST", "/v1/copy", tok("rw", "/out", xrd), nil, body); r.status != 403 {
		t.Errorf("agent without storage: %v, want 403", r)
	}
}
