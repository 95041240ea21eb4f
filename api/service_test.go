package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
)

// testService is the API over a real server and a fresh SQLite store
// (no scheduling loop runs: submissions are stored, not moved), with
// endpoints a1 and a2 registered.
type testService struct {
	s     *server.Server
	st    store.Store
	h     http.Handler
	admin string // an admin's API token
}

func newTestService(t testing.TB) *testService {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, n := range []string{"a1", "a2"} {
		e := store.Endpoint{Name: n, URL: "http://127.0.0.1:" + string(rune('1'+i)) + "000", Registered: time.Now(), LastSeen: time.Now(), Up: true}
		if err := st.UpsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s, err := server.New(ctx, server.Config{Store: st, Scheduler: "basecc1", DataDir: dir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(s.AdminTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return &testService{s: s, st: st, h: New(s), admin: strings.TrimSpace(string(tok))}
}

// do serves one request and returns the answer.
func (ts *testService) do(method, target, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.admin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, req)
	return rec
}
