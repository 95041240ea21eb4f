package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/estimate"
	"github.com/sluice-dtn/sluice/store"
)

// TestSamplingLease: two servers on one database never sample one path at
// once: the second waits while the first holds the pair's lease, gets it
// when the first lets go, gives up when its request ends, and other pairs
// are not held up.
func TestSamplingLease(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	servers := make([]*Server, 2)
	for i, id := range []string{"s1", "s2"} {
		if servers[i], err = New(ctx, Config{Store: st, ServerID: id, Scheduler: "basecc1", DataDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
	}
	s1, s2 := servers[0], servers[1]
	release1, err := s1.lockSampling(ctx, "a", "d")
	if err != nil {
		t.Fatal(err)
	}
	// Another pair is free.
	other, err := s2.lockSampling(ctx, "a", "e")
	if err != nil {
		t.Fatal(err)
	}
	other()
	// The same pair waits, and a request that ends while waiting fails.
	short, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	defer cancel()
	if _, err := s2.lockSampling(short, "a", "d"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second server while the first samples: %v, want to wait until its deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		release2, err := s2.lockSampling(ctx, "a", "d")
		if err == nil {
			release2()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second server sampled while the first held the pair (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	release1()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second server did not get the pair after the first let go")
	}
}

// TestEstimateFrozenAgent: an estimate whose agents stop answering (a
// frozen process keeps its connections open; the heartbeats have not
// marked it down yet) fails within agentCallTimeout, saying which agent
// did not answer, rather than wait as long as its caller does.
func TestEstimateFrozenAgent(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	release := make(chan struct{})
	frozen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer frozen.Close()
	defer close(release) // before Close, which waits for the handlers
	for _, e := range []string{"src", "dst"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: frozen.URL, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.agentCallTimeout = 200 * time.Millisecond
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the caller's patience
	defer cancel()
	start := time.Now()
	_, err = s.Estimate(cctx, admin, estimate.Request{Source: "sluice://src/d/f", Destination: "sluice://dst/d/g", Size: 1 << 30})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the estimate waited %s on a frozen agent", took.Round(time.Millisecond))
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("estimate on a frozen agent: %v, want ErrUnavailable saying it did not answer", err)
	}
}

// TestEstimateAgentFreezesMidSample: the destination agent answers the
// stats and makes the sample file, then freezes during the sample
// transfer (its pull never answers). Once the heartbeats mark it down the
// estimate fails, saying so, rather than wait as long as its caller does
// (`sluice estimate` waits without a time limit: sampling a slow path
// takes minutes).
func TestEstimateAgentFreezesMidSample(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	release := make(chan struct{})
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/stat/d/f"):
			json.NewEncoder(w).Encode(backend.FileInfo{Path: "/d/f", Size: 1 << 20})
		case strings.HasPrefix(r.URL.Path, "/v1/stat/"):
			json.NewEncoder(w).Encode(backend.FileInfo{Path: "/d", IsDir: true})
		case r.URL.Path == "/v1/pull":
			select { // frozen
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer agent.Close()
	defer close(release) // before Close, which waits for the handlers
	for _, e := range []string{"src", "dst"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: agent.URL, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.endpointPoll = 50 * time.Millisecond
	time.AfterFunc(300*time.Millisecond, func() { st.SetEndpointUp(ctx, "dst", false, time.Now()) }) // no heartbeat
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the caller's patience
	defer cancel()
	start := time.Now()
	_, err = s.Estimate(cctx, admin, estimate.Request{Source: "sluice://src/d/f", Destination: "sluice://dst/d/g", Size: 1 << 30, SampleBytes: 1 << 20})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the estimate waited %s on an agent frozen mid-sample", took.Round(time.Millisecond))
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "went down") {
		t.Errorf("estimate with an agent frozen mid-sample: %v, want ErrUnavailable saying it went down", err)
	}
}

// TestEstimateSampleDirectory: the samples are written in the
// destination's directory: the parent of a file destination, and the
// directory itself when the destination names one with a trailing "/"
// (as `sluice estimate ... sluice://dtn2/archive/` does), not its parent,
// where the caller may have no right to write and which may be another
// file system.
func TestEstimateSampleDirectory(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var made []string // the sample files' paths
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		switch p := r.URL.Path; {
		case p == "/v1/stat/d/f":
			json.NewEncoder(w).Encode(backend.FileInfo{Path: "/d/f", Size: 1 << 20})
		case strings.HasPrefix(p, "/v1/stat/"):
			json.NewEncoder(w).Encode(backend.FileInfo{Path: strings.TrimPrefix(p, "/v1/stat"), IsDir: true})
		case strings.HasPrefix(p, "/v1/truncate/"):
			mu.Lock()
			made = append(made, strings.TrimPrefix(p, "/v1/truncate"))
			mu.Unlock()
		}
	}))
	defer agent.Close()
	for _, e := range []string{"src", "dst"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: agent.URL, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	for _, tt := range []struct{ dst, dir string }{
		{"sluice://dst/archive/run7.h5", "/archive"},
		{"sluice://dst/archive/", "/archive"},
		{"sluice://dst/archive/sub/", "/archive/sub"},
	} {
		t.Run(tt.dst, func(t *testing.T) {
			_, err := s.Estimate(ctx, admin, estimate.Request{Source: "sluice://src/d/f", Destination: tt.dst, Size: 1 << 30, SampleBytes: 1 << 20, MaxStreams: 2})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(made) == 0 {
				t.Fatal("no sample file was made")
			}
			for _, p := range made {
				if path.Dir(p) != tt.dir {
					t.Errorf("sample file %s, want one in %s", p, tt.dir)
				}
			}
			made = nil
		})
	}
}

// TestEstimateWaitEndsWithRequest: a request waiting for another request's
// sampling of the same pair ends when its own context does (the client
// gave up), rather than wait for the other sampling to finish.
func TestEstimateWaitEndsWithRequest(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, e := range []string{"src", "dst"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: "http://127.0.0.1:1", Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Another request of this server samples the pair.
	unlock, err := s.estimating.Lock(ctx, "src", "dst")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := s.Estimate(cctx, admin, estimate.Request{Source: "sluice://src/d/f", Destination: "sluice://dst/d/g", Size: 1 << 30})
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-got:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("estimate whose request ended while waiting: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the estimate still waits for the pair after its request ended")
	}
}

// TestEstimateCappedNotHistory: an answer sampled under a request's own
// max_streams, below what the endpoints allow, is not the pair's answer:
// a later use_history request with the pair's own limit (and an
// optimization job, which asks so) samples rather than take it, and
// would otherwise run at most that many streams for the history TTL.
func TestEstimateCappedNotHistory(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(sluice.AgentHeader, "v1")
		switch p := r.URL.Path; {
		case p == "/v1/stat/d/f":
			json.NewEncoder(w).Encode(backend.FileInfo{Path: "/d/f", Size: 1 << 20})
		case strings.HasPrefix(p, "/v1/stat/"):
			json.NewEncoder(w).Encode(backend.FileInfo{Path: strings.TrimPrefix(p, "/v1/stat"), IsDir: true})
		}
	}))
	defer agent.Close()
	for _, e := range []string{"src", "dst"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: agent.URL, Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	req := estimate.Request{Source: "sluice://src/d/f", Destination: "sluice://dst/d/g", Size: 1 << 30, SampleBytes: 1 << 20}
	capped := req
	capped.MaxStreams = 1
	if e, err := s.Estimate(ctx, admin, capped); err != nil || e.Streams != 1 {
		t.Fatalf("estimate with max_streams 1: %+v, %v", e, err)
	}
	req.UseHistory = true
	e, err := s.Estimate(ctx, admin, req)
	if err != nil {
		t.Fatal(err)
	}
	if e.FromHistory {
		t.Errorf("use_history after an estimate capped at 1 stream: answered from it (%d streams); want a sampling up to the pair's limit", e.Streams)
	}
	// The pair's own answer is history.
	if e, err := s.Estimate(ctx, admin, req); err != nil || !e.FromHistory {
		t.Errorf("use_history after the pair's own estimate: %+v, %v; want it from history", e, err)
	}
	// And it answers a request capped above its streams.
	capped.MaxStreams, capped.UseHistory = estimate.DefaultMaxStreams, true
	if e, err := s.Estimate(ctx, admin, capped); err != nil || !e.FromHistory {
		t.Errorf("use_history with max_streams %d: %+v, %v; want it from history", estimate.DefaultMaxStreams, e, err)
	}
}

// TestOptimizeSmallFilesDoNotSample: in an optimize job, a task too small
// to sample the path from runs as the scheduler chooses and starts no
// estimate (it would fail, and be retried every minute); a larger task of
// the pair starts one and waits for it.
func TestOptimizeSmallFilesDoNotSample(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := loadedWorld(t, Config{Store: st, ServerID: "s1"})
	job := &jobState{}
	job.Optimize = true
	small := &task{Task: store.Task{SrcEndpoint: "a", DstEndpoint: "b", Src: "sluice://a/x", Dst: "sluice://b/x", Size: 1000}, job: job}
	if got := w.fixedCC(small); got != 0 {
		t.Errorf("fixedCC of a 1,000-byte task = %d, want 0 (the scheduler's choice)", got)
	}
	if _, ok := w.optimal[[2]string{"a", "b"}]; ok {
		t.Errorf("a 1,000-byte task started an estimate of the pair")
	}
	big := &task{Task: store.Task{SrcEndpoint: "a", DstEndpoint: "b", Src: "sluice://a/y", Dst: "sluice://b/y", Size: 1 << 30}, job: job}
	if got := w.fixedCC(big); got != -1 {
		t.Errorf("fixedCC of a 1 GiB task = %d, want -1 (estimating)", got)
	}
	if o, ok := w.optimal[[2]string{"a", "b"}]; !ok || o.streams != -1 {
		t.Errorf("a 1 GiB task did not start an estimate: %+v, %v", o, ok)
	}
}

// TestEstimateLinkBase: an estimate of a user who is not an admin holds
// against symbolic links as that user's jobs do (auth.Claims.Base):
// rules are checked by name, and a link the user made in a granted
// directory must not let the sampling read another user's file, nor
// write its samples into another user's directory. Before, the sample
// tokens had no link base, so their prefixes (the source file itself,
// the samples' directory) followed a link there wherever it led.
func TestEstimateLinkBase(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(ctx, Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]string{}
	for _, name := range []string{"src", "dst"} {
		root := t.TempDir()
		for _, d := range []string{"home/alice", "home/bob"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ag, err := agent.New(agent.Config{Name: name, Root: root, Key: s.agentKey(name)})
		if err != nil {
			t.Fatal(err)
		}
		defer ag.Close()
		srv := httptest.NewServer(ag.Handler())
		defer srv.Close()
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: name, URL: srv.URL, Up: true}); err != nil {
			t.Fatal(err)
		}
		roots[name] = root
	}
	data := make([]byte, 1<<20)
	for _, f := range []string{"home/alice/big", "home/bob/secret"} {
		if err := os.WriteFile(filepath.Join(roots["src"], f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../bob/secret", filepath.Join(roots["src"], "home/alice/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roots["dst"], "home/bob/private"), []byte("bob's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../bob", filepath.Join(roots["dst"], "home/alice/outdir")); err != nil {
		t.Fatal(err)
	}
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	if _, err := s.SetAccess(ctx, admin, AccessConfig{Rules: []AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: AccessWrite},
	}}); err != nil {
		t.Fatal(err)
	}
	u, err := st.EnsureUser(ctx, "alice", "default", false)
	if err != nil {
		t.Fatal(err)
	}
	alice := Caller{User: u}
	for _, tc := range []struct {
		name, src, dst string
		refused        bool
	}{
		{"her file into her home", "sluice://src/home/alice/big", "sluice://dst/home/alice/x", false},
		{"a link to another user's file", "sluice://src/home/alice/link", "sluice://dst/home/alice/x", true},
		{"into a link to another user's directory", "sluice://src/home/alice/big", "sluice://dst/home/alice/outdir/x", true},
		// The look-up of the samples' directory stays in her home too:
		// before, it followed the link and answered that bob's
		// /home/bob/private is a file.
		{"below a file of another user's, through a link", "sluice://src/home/alice/big", "sluice://dst/home/alice/outdir/private/x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Estimate(ctx, alice, estimate.Request{Source: tc.src, Destination: tc.dst, Size: 1 << 30, SampleBytes: 64 << 10, MaxStreams: 1})
			switch {
			case tc.refused && err == nil:
				t.Errorf("estimate %s -> %s sampled through a link out of alice's home", tc.src, tc.dst)
			case tc.refused && strings.Contains(err.Error(), "is a file"):
				t.Errorf("estimate %s -> %s told what is in another user's tree: %v", tc.src, tc.dst, err)
			case tc.refused && !errors.Is(err, backend.ErrPermission):
				t.Errorf("estimate %s -> %s: %v, want a permission error", tc.src, tc.dst, err)
			case !tc.refused && err != nil:
				t.Errorf("estimate %s -> %s: %v", tc.src, tc.dst, err)
			}
		})
	}
}

// TestOptimizeActsAsOwner: an optimize job's estimate acts as the job's
// owner as the store has them, an admin's with the admin's rights (before,
// as a user without them, refused by the access rules an admin's jobs are
// not held to); a job whose owner cannot be read acts as the job says.
func TestOptimizeActsAsOwner(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	s := newPolicyTestServer(t, st)
	root, err := st.EnsureUser(ctx, "root", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := st.EnsureUser(ctx, "alice", "phys", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		owner     store.User
		wantAdmin bool
	}{
		{store.User{ID: root.ID, Name: "root", VO: "ops"}, true},
		{store.User{ID: alice.ID, Name: "alice", VO: "phys"}, false},
		{store.User{ID: 999, Name: "root", VO: "ops"}, false}, // another user of that name since
	} {
		if got := s.ownerOf(ctx, c.owner); got.User.Admin != c.wantAdmin || got.User.Name != c.owner.Name {
			t.Errorf("owner %+v acts as %+v, want admin %v", c.owner, got.User, c.wantAdmin)
		}
	}
}
