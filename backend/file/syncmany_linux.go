package file

import (
	"context"

	"golang.org/x/sys/unix"
)

// SyncMany makes the named files durable. On Linux that is one syncfs(2)
// of the file system the root is on, not an fsync per file: for a batch
// of small files the per-file journal commits cost more than the data
// (a 1 MiB file's fsync takes as long as writing it). The price is that
// the call also flushes other dirty data of the same file system.
func (b *Backend) SyncMany(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	d, err := b.root.Open(".")
	if err != nil {
		return b.classify(err)
	}
	defer d.Close()
	return b.classify(unix.Syncfs(int(d.Fd())))
}
