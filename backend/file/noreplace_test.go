package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
)

// TestRenameNoReplace: the no-replace rename puts a file in place where
// nothing is, and refuses, changing nothing, where a file or a directory
// is; its paths stay inside the root.
func TestRenameNoReplace(t *testing.T) {
	for _, sync := range []bool{true, false} {
		testRenameNoReplace(t, sync)
	}
}

func testRenameNoReplace(t *testing.T, sync bool) {
	ctx := context.Background()
	cases := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		from, to string
		want     error // nil: renamed
	}{
		{name: "absent target", from: "d/.f.part", to: "d/f"},
		{name: "target in a missing directory", from: "d/.f.part", to: "d/sub/f"},
		{name: "target in another directory", from: "d/.f.part", to: "e/f",
			setup: func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "e")) }},
		{name: "existing file", from: "d/.f.part", to: "d/f", want: backend.ErrExist,
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "d/f"), "theirs") }},
		{name: "existing empty directory", from: "d/.f.part", to: "d/f", want: backend.ErrExist,
			setup: func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "d/f")) }},
		{name: "existing directory with files", from: "d/.f.part", to: "d/f", want: backend.ErrExist,
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "d/f/x"), "x") }},
		{name: "existing dangling symbolic link", from: "d/.f.part", to: "d/f", want: backend.ErrExist,
			setup: func(t *testing.T, dir string) { symlink(t, "nowhere", filepath.Join(dir, "d/f")) }},
		{name: "missing source", from: "d/.g.part", to: "d/g", want: backend.ErrNotFound},
		{name: "target outside the root", from: "d/.f.part", to: "../f", want: backend.ErrPermission},
		{name: "target below a link out of the root", from: "d/.f.part", to: "out/f", want: backend.ErrPermission,
			setup: func(t *testing.T, dir string) { symlink(t, t.TempDir(), filepath.Join(dir, "out")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, dir := newTest(t)
			write(t, filepath.Join(dir, "d/.f.part"), "ours")
			if c.setup != nil {
				c.setup(t, dir)
			}
			before := snapshot(t, dir)
			rename := b.RenameNoReplaceNoSync
			if sync {
				rename = b.RenameNoReplace
			}
			err := rename(ctx, c.from, c.to)
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("rename %s -> %s: %v, want %v", c.from, c.to, err, c.want)
				}
				if err != nil && strings.Contains(err.Error(), dir) {
					t.Errorf("error names the root: %v", err)
				}
				if after := snapshot(t, dir); after != before {
					t.Errorf("a refused rename changed the tree:\n%s\nnow\n%s", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("rename %s -> %s: %v", c.from, c.to, err)
			}
			if got := read(t, filepath.Join(dir, c.to)); got != "ours" {
				t.Errorf("%s holds %q", c.to, got)
			}
			if _, err := os.Lstat(filepath.Join(dir, c.from)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there: %v", c.from, err)
			}
		})
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// snapshot lists the tree below dir with each file's contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var out string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out += rel
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			out += ": " + string(b)
		}
		out += "\n"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
