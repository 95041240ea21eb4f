package sluice_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// TestRenameNoReplace: through the agent, a rename asked not to replace
// refuses an existing target (kind exist, nothing changed), one at a time
// and in a batch; a rename without the field replaces, as before.
func TestRenameNoReplace(t *testing.T) {
	a := newAgent(t, "dtn1")
	b := a.client(t, a.token(t, auth.ScopeRW, "/", time.Hour))
	var _ backend.NoReplaceRenamer = b
	ctx := context.Background()
	put := func(p, s string) {
		t.Helper()
		full := filepath.Join(a.root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	get := func(p string) string {
		t.Helper()
		s, err := os.ReadFile(filepath.Join(a.root, p))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(s)
	}
	put("d/.f.part", "ours")
	put("d/f", "theirs")
	if err := b.RenameNoReplace(ctx, "/d/.f.part", "/d/f"); !errors.Is(err, backend.ErrExist) {
		t.Fatalf("no-replace rename onto a file: %v, want ErrExist", err)
	}
	if get("d/f") != "theirs" || get("d/.f.part") != "ours" {
		t.Fatalf("refused rename changed files: d/f %q, d/.f.part %q", get("d/f"), get("d/.f.part"))
	}
	if err := os.MkdirAll(filepath.Join(a.root, "d/dir/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.RenameNoReplace(ctx, "/d/.f.part", "/d/dir"); !errors.Is(err, backend.ErrExist) {
		t.Fatalf("no-replace rename onto a directory: %v, want ErrExist", err)
	}
	if err := b.RenameNoReplace(ctx, "/d/.f.part", "/d/g"); err != nil || get("d/g") != "ours" {
		t.Fatalf("no-replace rename to a free name: %v, d/g %q", err, get("d/g"))
	}

	// A batch: one pair refused, one renamed, one replacing as asked
	// by leaving the field out.
	put("e/.a.part", "a-ours")
	put("e/a", "a-theirs")
	put("e/.b.part", "b-ours")
	put("e/.c.part", "c-ours")
	put("e/c", "c-theirs")
	no := false
	res, err := b.Renames(ctx, []sluice.RenamePair{
		{From: "/e/.a.part", To: "/e/a", Replace: &no},
		{From: "/e/.b.part", To: "/e/b", Replace: &no},
		{From: "/e/.c.part", To: "/e/c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res[0].Err(); !errors.Is(err, backend.ErrExist) {
		t.Errorf("batch pair onto a file: %v, want ErrExist", err)
	}
	if err := res[1].Err(); err != nil {
		t.Errorf("batch pair to a free name: %v", err)
	}
	if err := res[2].Err(); err != nil {
		t.Errorf("batch pair without the field: %v", err)
	}
	if get("e/a") != "a-theirs" || get("e/b") != "b-ours" || get("e/c") != "c-ours" {
		t.Errorf("after the batch: e/a %q (want a-theirs), e/b %q, e/c %q", get("e/a"), get("e/b"), get("e/c"))
	}
	// The single rename without the field still replaces.
	put("d/.h.part", "h-ours")
	put("d/h", "h-theirs")
	if err := b.Rename(ctx, "/d/.h.part", "/d/h"); err != nil || get("d/h") != "h-ours" {
		t.Errorf("plain rename: %v, d/h %q", err, get("d/h"))
	}
}
