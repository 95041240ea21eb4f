package root

import (
	"context"
	"fmt"

	"github.com/sluice-dtn/sluice/backend"
)

// CopyFileFrom has b's server copy the whole file srcPath from src's
// server to dstPath (CopyFrom, XRootD's third-party copy), for a service
// that holds both as backend.Backends. src must be an XRootD server too.
func (b *Backend) CopyFileFrom(ctx context.Context, src backend.Backend, srcPath, dstPath string, progress func(int64)) error {
	s, ok := src.(*Backend)
	if !ok {
		return fmt.Errorf("root: third-party copy from %T: %w: the source is not an XRootD server", src, backend.ErrInvalid)
	}
	return b.CopyFrom(ctx, s, srcPath, dstPath, progress)
}
