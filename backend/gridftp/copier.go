package gridftp

import (
	"context"
	"fmt"

	"github.com/sluice-dtn/sluice/backend"
)

// CopyRangeFrom has b's server fetch [off, off+n) of srcPath from src's
// server and write it at the same offset of dstPath: a partial
// third-party transfer (PullFrom), for a service that holds both as
// backend.Backends. src must be a GridFTP server too.
func (b *Backend) CopyRangeFrom(ctx context.Context, src backend.Backend, srcPath, dstPath string, off, n int64, progress func(int64)) error {
	s, ok := src.(*Backend)
	if !ok {
		return fmt.Errorf("gridftp: third-party copy from %T: %w: the source is not a GridFTP server", src, backend.ErrInvalid)
	}
	return b.PullFrom(s)(ctx, srcPath, dstPath, off, n, progress)
}
