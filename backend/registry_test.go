package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
)

// TestRegistry: a location goes to the backend registered for its
// scheme, a plain path to "file", and an unknown scheme gets an error
// naming what the build serves.
func TestRegistry(t *testing.T) {
	r := backend.NewRegistry()
	opener := func(name string) backend.OpenFunc {
		return func(_ context.Context, loc string, _ backend.OpenOptions) (backend.Opened, error) {
			return backend.Opened{Path: loc, URL: name}, nil
		}
	}
	r.Register(opener("file"), "file")
	r.Register(opener("agent"), "sluice", "sluices")
	for _, tc := range []struct {
		loc, want string // want: the backend that opened it; "" an error
	}{
		{"/data/x", "file"},
		{"rel/x", "file"},
		{"file:///data/x", "file"},
		{"sluice://h:7000/x", "agent"},
		{"sluices://h:7000/x", "agent"},
		{"s3://bucket/x", ""},
		{"://x", ""},
	} {
		op, err := r.Open(context.Background(), tc.loc, backend.OpenOptions{})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: opened by %q, want an error", tc.loc, op.URL)
		case tc.want == "" && !strings.Contains(err.Error(), "file://, sluice://, sluices://"):
			t.Errorf("%s: %v, want the schemes served named", tc.loc, err)
		case tc.want != "" && (err != nil || op.URL != tc.want):
			t.Errorf("%s: opened by %q (%v), want %q", tc.loc, op.URL, err, tc.want)
		}
	}
	if got := strings.Join(r.Schemes(), ","); got != "file,sluice,sluices" {
		t.Errorf("schemes %s", got)
	}
}
