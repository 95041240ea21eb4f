package file

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
)

// TestListPage: pages of any size, each resumed after the last entry of
// the one before, add up to the whole recursive listing, in its order,
// each entry once; names that sort differently as paths and as walk
// steps ("d/z" and "d-a") included, and entries that cannot be copied.
func TestListPage(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"top/a", "top/d/z", "top/d/y/x", "top/d-a", "top/e/f", "top/zz"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(root, "top", "empty"), 0o755)
	os.Symlink("nowhere", filepath.Join(root, "top", "d", "broken"))
	b, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := b.List(ctx, "/top", true)
	if err != nil {
		t.Fatal(err)
	}
	paths := func(fs []backend.FileInfo) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	want := paths(all)
	if len(want) != 11 {
		t.Fatalf("the whole listing: %q", want)
	}
	for i := 1; i < len(want); i++ {
		if !WalkBefore(want[i-1], want[i]) {
			t.Errorf("the listing's order: %s before %s, which WalkBefore puts after", want[i-1], want[i])
		}
	}
	for limit := 1; limit <= len(want)+1; limit++ {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: no end", limit)
			}
			page, more, err := b.ListPage(ctx, "/top", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit || (more && len(page) < limit) {
				t.Fatalf("limit %d: a page of %d, more %v", limit, len(page), more)
			}
			got = append(got, paths(page)...)
			if !more {
				break
			}
			after = page[len(page)-1].Path
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: pages give %q, want %q", limit, got, want)
		}
	}
	if _, _, err := b.ListPage(ctx, "/top", "", 0); err == nil {
		t.Error("a page of 0 entries was taken")
	}
}
