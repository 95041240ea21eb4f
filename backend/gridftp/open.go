package gridftp

import (
	"context"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for ftp:// and gsiftp:// URLs, logging
// in with o.Credential (Options.Credential: a user name and password over
// ftp://, an X.509 proxy over gsiftp://; nil: anonymously, or with the
// environment's proxy). Each run uses one data stream: the engine's
// partial transfers are the parallelism, and streams within a run would
// make OpenRange spool.
func Open(_ context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
	base, p, err := ParseURL(loc)
	if err != nil {
		return backend.Opened{}, err
	}
	b, err := New(base, Options{Parallelism: 1, Credential: o.Credential})
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Close: b.Close}, nil
}
