package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

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
