package root

import (
	"context"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for root:// and xroot:// URLs: it
// logs in to the server before returning.
func Open(ctx context.Context, loc string, _ backend.OpenOptions) (backend.Opened, error) {
	addr, p, err := ParseURL(loc)
	if err != nil {
		return backend.Opened{}, err
	}
	b, err := New(ctx, addr, Options{})
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Close: b.Close}, nil
}
