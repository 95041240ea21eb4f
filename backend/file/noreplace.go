package file

import (
	"context"
	"os"
	"path"
)

// RenameNoReplace implements backend.NoReplaceRenamer: Rename that fails
// with backend.ErrExist, changing nothing, when to exists (a file or a
// directory). The check and the rename are one step of the file system
// (renameat2 with RENAME_NOREPLACE on Linux), so a file that appears at
// to after a caller's own check is not replaced either. The target's
// directory is synced, as Rename's.
func (b *Backend) RenameNoReplace(ctx context.Context, from, to string) error {
	return b.rename(from, to, b.renameNoReplace, true)
}

// RenameNoReplaceNoSync is RenameNoReplace without the sync of the
// target's directory (see RenameNoSync).
func (b *Backend) RenameNoReplaceNoSync(ctx context.Context, from, to string) error {
	return b.rename(from, to, b.renameNoReplace, false)
}

// renameNoReplace renames f to t (names relative to the root) without
// replacing t. Each name's directory is opened through b.fs, which keeps
// it inside the root, and the rename is made relative to those handles
// with the last elements alone, which name entries of those directories
// (a symbolic link there is renamed, not followed): nothing outside the
// root can be reached.
func (b *Backend) renameNoReplace(f, t string) error {
	fd, err := b.fs.Open(path.Dir(f))
	if err != nil {
		return err
	}
	defer fd.Close()
	td := fd
	if path.Dir(t) != path.Dir(f) {
		if td, err = b.fs.Open(path.Dir(t)); err != nil {
			return err
		}
		defer td.Close()
	}
	if err := b.renameAtNoReplace(fd, path.Base(f), td, path.Base(t)); err != nil {
		return &os.LinkError{Op: "rename", Old: f, New: t, Err: err}
	}
	return nil
}
