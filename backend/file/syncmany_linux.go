package file

import (
	"context"
	"path"
	"syscall"

	"golang.org/x/sys/unix"
)

// SyncMany makes the named files durable. On Linux that is one syncfs(2)
// per file system the files are on, not an fsync per file: for a batch
// of small files the per-file journal commits cost more than the data
// (a 1 MiB file's fsync takes as long as writing it). The price is that
// the call also flushes other dirty data of the same file systems.
//
// The file systems are found from the files' directories, not from the
// backend's root: below the root (the machine's root for local files)
// another file system may be mounted, and a sync of the root's alone
// would leave the files on it unsynced.
func (b *Backend) SyncMany(ctx context.Context, paths []string) error {
	dirs := make(map[string]bool, 1)
	devs := make(map[uint64]bool, 1)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		name, err := b.clean(p)
		if err != nil {
			return err
		}
		dir := path.Dir(name)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := b.syncFSOf(dir, devs); err != nil {
			return err
		}
	}
	return nil
}

// syncFSOf syncs the file system directory dir is on, unless devs says
// it was synced already, and records it there.
func (b *Backend) syncFSOf(dir string, devs map[uint64]bool) error {
	d, err := b.fs.Open(dir)
	if err != nil {
		return b.classify(err)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return b.classify(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if devs[st.Dev] {
			return nil
		}
		devs[st.Dev] = true
	}
	syncfs := unix.Syncfs
	if b.syncfs != nil {
		syncfs = b.syncfs
	}
	return b.classify(syncfs(int(d.Fd())))
}
