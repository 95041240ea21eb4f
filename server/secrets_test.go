package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dtn/sluice/store"
)

// TestSecretFilesMode: the first start's admin.token and join.token are
// readable by their owner only, whatever was at their names before.
// Before, os.WriteFile kept the mode of a file already there (a
// leftover of an earlier installation, 0644), so the new admin token
// was world-readable, and followed a symbolic link at the name.
func TestSecretFilesMode(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"no files yet", func(t *testing.T, dir string) {}},
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
			for _, f := range []string{s.AdminTokenFile, s.JoinTokenFile} {
				fi, err := os.Lstat(f)
				if err != nil {
					t.Fatal(err)
				}
				if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %s, want a regular file of mode 0600", filepath.Base(f), fi.Mode())
				}
			}
			for _, f := range []string{"public-admin.token", "public-join.token"} {
				if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
					t.Errorf("a token was written through a link to %s", f)
				}
			}
		})
	}
}
