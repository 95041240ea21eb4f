package all_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/gridftp"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// TestRegistry: every scheme Sluice documents opens the backend of its
// protocol, with the location's path; an agent URL without tokens is
// refused before any request. (root:// logs in when opened: its own
// tests open it against real servers.)
func TestRegistry(t *testing.T) {
	r := all.Registry()
	ctx := context.Background()
	tokens := func(string, bool) (backend.TokenSource, error) {
		return func() (string, error) { return "tok", nil }, nil
	}
	check := func(loc, path string, want func(backend.Backend) bool) {
		t.Helper()
		op, err := r.Open(ctx, loc, backend.OpenOptions{Tokens: tokens})
		if err != nil {
			t.Errorf("%s: %v", loc, err)
			return
		}
		if op.Close != nil {
			defer op.Close()
		}
		if !want(op.Backend) || op.Path != path {
			t.Errorf("%s: %T at %q, want another backend or %q", loc, op.Backend, op.Path, path)
		}
	}
	isFile := func(b backend.Backend) bool { _, ok := b.(*file.Backend); return ok }
	isAgent := func(b backend.Backend) bool { _, ok := b.(*sluice.Backend); return ok }
	check("/tmp/x", "/tmp/x", isFile)
	check("file:///tmp/d/", "/tmp/d/", isFile)
	check("sluice://127.0.0.1:7000/a/b", "/a/b", isAgent)
	check("sluices://127.0.0.1:7000/a%20b", "/a b", isAgent)
	if _, err := exec.LookPath("globus-url-copy"); err == nil {
		check("gsiftp://127.0.0.1/data/f", "/data/f", func(b backend.Backend) bool { _, ok := b.(*gridftp.Backend); return ok })
	}
	if _, err := r.Open(ctx, "sluice://127.0.0.1:7000/a", backend.OpenOptions{}); err == nil {
		t.Error("an agent URL opened without tokens")
	}
}
