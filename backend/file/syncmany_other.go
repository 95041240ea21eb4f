//go:build !linux

package file

import "context"

// SyncMany makes the named files durable, one fsync each (the Linux
// version syncs the file system once).
func (b *Backend) SyncMany(ctx context.Context, paths []string) error {
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.Sync(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
