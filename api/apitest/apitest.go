// Package apitest runs the API of `sluice serve` over a real server and a
// fresh SQLite store, for tests and fuzz targets of job submission: a
// submission goes through the same decoding, validation and storing as
// on a live service (no scheduling loop runs, so nothing is moved), and
// CheckSubmit asserts what every submission must give: a clear refusal,
// or a stored job with sane totals that lists back.
package apitest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
)

// Service is the API over a server with endpoints a1 and a2 registered,
// an admin, and alice (VO cms), who may write /home/alice on every
// endpoint and nothing else.
type Service struct {
	S            *server.Server
	St           store.Store
	H            http.Handler
	Admin, Alice string // API tokens
}

// New starts a Service whose store is removed at t's cleanup.
func New(t testing.TB) *Service {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for i, n := range []string{"a1", "a2"} {
		e := store.Endpoint{Name: n, URL: "http://127.0.0.1:" + strconv.Itoa(7001+i), Registered: time.Now(), LastSeen: time.Now(), Up: true}
		if err := st.UpsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s, err := server.New(ctx, server.Config{Store: st, Scheduler: "basecc1", DataDir: dir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.AdminTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(b))
	root, err := s.Authenticate(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetAccess(ctx, root, server.AccessConfig{Rules: []server.AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: server.AccessWrite}}}); err != nil {
		t.Fatal(err)
	}
	alice, _, _, err := s.CreateToken(ctx, root, "alice", "cms", false, time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	return &Service{S: s, St: st, H: api.New(s), Admin: admin, Alice: alice}
}

// Do serves one request with the token (if any) and returns the answer.
func (s *Service) Do(method, target, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.H.ServeHTTP(rec, req)
	return rec
}

// CheckSubmit posts body as a job, as alice and as the admin, and fails
// t unless each answer is a refusal of the client's (4xx, a problem
// document) or a job stored (201, or 200 for a submission id seen
// before) whose totals are sane and which lists back, with its files,
// without error.
func (s *Service) CheckSubmit(t testing.TB, body []byte) {
	t.Helper()
	for _, tok := range []string{s.Alice, s.Admin} {
		who := "alice"
		if tok == s.Admin {
			who = "admin"
		}
		rec := s.Do(http.MethodPost, "/v1/jobs", tok, string(body))
		switch {
		case rec.Code >= 400 && rec.Code < 500:
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s: refusal %d as %q, not a problem document: %s", who, rec.Code, ct, rec.Body)
			}
			continue
		case rec.Code != http.StatusCreated && rec.Code != http.StatusOK:
			t.Fatalf("%s: submission answered %d: %s\nbody: %q", who, rec.Code, rec.Body, body)
		}
		var j api.JobOut
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
			t.Fatalf("%s: job answer %q: %v", who, rec.Body, err)
		}
		saneJob(t, who+": submitted", j)
		if rec.Code == http.StatusCreated && who == "alice" {
			// Point 4's invariant: alice's job writes only in her home.
			files := s.Do(http.MethodGet, "/v1/jobs/"+strconv.FormatInt(j.ID, 10)+"/files", tok, "")
			var fs []api.FileOut
			if files.Code != http.StatusOK || json.Unmarshal(files.Body.Bytes(), &fs) != nil {
				t.Fatalf("%s: files of job %d: %d %s", who, j.ID, files.Code, files.Body)
			}
			for _, f := range fs {
				if f.Size < -1 || f.Size > store.MaxSize {
					t.Fatalf("%s: job %d file %d: size %d", who, j.ID, f.Index, f.Size)
				}
				_, rest, _ := strings.Cut(f.Destination, "://")
				_, p, _ := strings.Cut(rest, "/")
				if !strings.HasPrefix("/"+p, "/home/alice/") {
					t.Fatalf("%s: job %d file %d writes %s, outside /home/alice", who, j.ID, f.Index, f.Destination)
				}
			}
		}
		list := s.Do(http.MethodGet, "/v1/jobs", tok, "")
		var js []api.JobOut
		if list.Code != http.StatusOK || json.Unmarshal(list.Body.Bytes(), &js) != nil {
			t.Fatalf("%s: listing jobs after a submission: %d %s\nbody: %q", who, list.Code, list.Body, body)
		}
		for _, lj := range js {
			saneJob(t, who+": listed", lj)
		}
	}
}

func saneJob(t testing.TB, what string, j api.JobOut) {
	t.Helper()
	if j.Files < 1 || j.Bytes < 0 || j.Bytes > store.MaxSize || j.BytesDone < 0 || j.BytesDone > store.MaxSize {
		t.Fatalf("%s job %d: %d files, %d bytes, %d done", what, j.ID, j.Files, j.Bytes, j.BytesDone)
	}
}
