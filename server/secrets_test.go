package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/store"
)

// TestSecretFilesMode: the first start's admin.token and join.token are
// readable by their owner only, and writeSecret gives a token file that
// mode whatever was at its name before. Before, os.WriteFile kept the
// mode of a file already there (a leftover of an earlier installation,
// 0644), so the new admin token was world-readable, and followed a
// symbolic link at the name. (A first start now refuses a data
// directory holding such files, TestFirstStartRefusesEarlierTokens;
// writeSecret still guards the writes of servers that share one.)
func TestSecretFilesMode(t *testing.T) {
	ctx := context.Background()
	t.Run("first start", func(t *testing.T) {
		dir := t.TempDir()
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := New(ctx, Config{Store: st, Scheduler: "basecc1", DataDir: dir,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		checkSecretMode(t, s.AdminTokenFile, s.JoinTokenFile)
	})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"world-readable leftovers", func(t *testing.T, dir string) {
			for _, f := range []string{"admin.token", "join.token"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"links to elsewhere", func(t *testing.T, dir string) {
			for _, f := range []string{"admin.token", "join.token"} {
				if err := os.Symlink(filepath.Join(dir, "public-"+f), filepath.Join(dir, f)); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			var files []string
			for _, f := range []string{"admin.token", "join.token"} {
				files = append(files, filepath.Join(dir, f))
				if err := writeSecret(files[len(files)-1], "new"); err != nil {
					t.Fatal(err)
				}
			}
			checkSecretMode(t, files...)
			for _, f := range []string{"public-admin.token", "public-join.token"} {
				if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
					t.Errorf("a token was written through a link to %s", f)
				}
			}
		})
	}
}

func checkSecretMode(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %s, want a regular file of mode 0600", filepath.Base(f), fi.Mode())
		}
	}
}

// TestFirstStartRefusesEarlierTokens: a server whose database is empty
// (new, or lost) refuses to start afresh in a data directory that holds
// an earlier server's tokens, names them and the way out, and changes
// nothing there; an empty data directory still gets a first start, and a
// restart on the same database starts. Before, the lost database made a
// first start: new admin and join tokens over the old ones, and every
// agent locked out.
func TestFirstStartRefusesEarlierTokens(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name   string
		files  []string // in the data directory before the start
		saved  bool     // a copy saved by a server whose file went missing
		refuse bool
	}{
		{"empty data directory", nil, false, false},
		{"both tokens", []string{"admin.token", "join.token"}, false, true},
		{"admin token only", []string{"admin.token"}, false, true},
		{"join token only", []string{"join.token"}, false, true},
		{"tokens and a saved copy", []string{"admin.token", "join.token"}, true, true},
		{"unrelated files", []string{"notes.txt"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			saved := filepath.Join(dir, "sluice.db.saved-20260101T000000Z")
			if tc.saved {
				if err := os.WriteFile(saved, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			st, err := store.Open(ctx, filepath.Join(dir, "sluice.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			s, err := New(ctx, Config{Store: st, Scheduler: "basecc1", DataDir: dir, Logger: logger})
			if !tc.refuse {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if s.AdminTokenFile == "" || s.JoinTokenFile == "" {
					t.Fatal("no first start in a data directory without tokens")
				}
				// A restart on the same database, with the tokens now
				// there, is no first start and is not refused.
				if _, err := New(ctx, Config{Store: st, Scheduler: "basecc1", DataDir: dir, Logger: logger}); err != nil {
					t.Fatalf("restart: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("a first start over an earlier server's tokens")
			}
			msg := err.Error()
			for _, f := range tc.files {
				if !strings.Contains(msg, filepath.Join(dir, f)) {
					t.Errorf("the error does not name %s: %v", f, err)
				}
			}
			for _, want := range []string{"restore the database", "move"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if tc.saved && !strings.Contains(msg, saved) {
				t.Errorf("the error does not name the saved copy: %v", err)
			}
			for _, f := range tc.files {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != "old\n" {
					t.Errorf("%s changed: %q, %v", f, b, err)
				}
			}
			if n, err := st.CountUsers(ctx); err != nil || n != 0 {
				t.Errorf("the refused start made %d users (%v)", n, err)
			}
		})
	}
}
