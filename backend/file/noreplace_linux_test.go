package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-dtn/sluice/backend"
)

// TestRenameNoReplaceFallback: on a file system that refuses
// RENAME_NOREPLACE the rename is a link and an unlink, which refuses an
// existing target as well.
func TestRenameNoReplaceFallback(t *testing.T) {
	ctx := context.Background()
	b, dir := newTest(t)
	calls := 0
	b.renameat2 = func(int, string, int, string, uint) error { calls++; return unix.EINVAL }
	write(t, filepath.Join(dir, ".a.part"), "ours")
	write(t, filepath.Join(dir, "b"), "theirs")
	if err := b.RenameNoReplace(ctx, ".a.part", "b"); !errors.Is(err, backend.ErrExist) {
		t.Fatalf("onto an existing file: %v, want ErrExist", err)
	}
	if got := read(t, filepath.Join(dir, "b")); got != "theirs" {
		t.Fatalf("existing file replaced: %q", got)
	}
	if err := b.RenameNoReplace(ctx, ".a.part", "a"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "a")); got != "ours" {
		t.Errorf("a holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".a.part")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old name still there: %v", err)
	}
	if calls != 2 {
		t.Errorf("renameat2 called %d times, want 2", calls)
	}
}
