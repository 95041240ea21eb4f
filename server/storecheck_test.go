package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// TestRunStopsWhenDatabaseGone: the loop stops with an error when its
// SQLite file is removed or replaced under it. Before, it went on
// writing jobs to a file no one could open again, and the next start
// found an empty database: new tokens, every user, job and rule gone.
func TestRunStopsWhenDatabaseGone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, db string)
	}{
		{"removed", func(t *testing.T, db string) {
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", func(t *testing.T, db string) {
			other := filepath.Join(filepath.Dir(db), "other.db")
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, db); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "sluice.db")
			st, err := store.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			s, err := New(context.Background(), Config{Store: st, Scheduler: "basecc1", DataDir: dir,
				StoreCheck: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx) }()
			// Running with its database in place: it goes on.
			select {
			case err := <-done:
				t.Fatalf("Run returned before the change: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			tc.change(t, db)
			select {
			case err := <-done:
				if !errors.Is(err, store.ErrDatabaseGone) {
					t.Fatalf("Run: %v, want an error wrapping store.ErrDatabaseGone", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Run goes on with its database file gone")
			}
		})
	}
}
