package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// testStore opens a SQLite store in a temporary directory, closed when the
// test ends, with the named endpoints registered and up.
func testStore(t *testing.T, endpoints ...string) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, e := range endpoints {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: "http://" + e + ".invalid:7000", Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// loadedWorld makes a server from cfg (Scheduler basecc1, a temporary
// DataDir and a silent Logger unless set) and loads its loop's world, as
// Run does before its first turn.
func loadedWorld(t *testing.T, cfg Config) *world {
	t.Helper()
	if cfg.Scheduler == "" {
		cfg.Scheduler = "basecc1"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// claimPartitions takes the leases of partitions for server (as the
// coordinator would), claims their tasks into w, and returns them; want
// is how many tasks must be claimed. It returns the leases by partition.
func claimPartitions(t *testing.T, w *world, st store.Store, server string, want int, partitions ...string) ([]store.Task, map[string]store.Lease) {
	t.Helper()
	ctx := context.Background()
	leases := map[string]store.Lease{}
	for _, p := range partitions {
		l, ok, err := st.AcquireLease(ctx, p, server, time.Hour)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		w.parts[p] = l.Term
		leases[p] = l
	}
	claimed, err := st.ClaimTasks(ctx, server, 100)
	if err != nil || len(claimed) != want {
		t.Fatalf("claimed %d, %v; want %d", len(claimed), err, want)
	}
	w.claimed(claimed)
	return claimed, leases
}
