package file

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameAtNoReplace renames fromName in directory fromDir to toName in
// toDir, failing with EEXIST if toName exists: renameat2 with
// RENAME_NOREPLACE. File systems that do not offer the flag (EINVAL: NFS
// before 4.x servers that do, some FUSE file systems; ENOSYS: kernels
// before 3.15) get a hard link and an unlink instead, which also cannot
// replace a file: link fails with EEXIST when toName exists.
func (b *Backend) renameAtNoReplace(fromDir *os.File, fromName string, toDir *os.File, toName string) error {
	return withFds(fromDir, toDir, func(from, to int) error {
		renameat2 := unix.Renameat2
		if b.renameat2 != nil {
			renameat2 = b.renameat2
		}
		err := renameat2(from, fromName, to, toName, unix.RENAME_NOREPLACE)
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
			return err
		}
		if err := unix.Linkat(from, fromName, to, toName, 0); err != nil {
			return err
		}
		// The file is in place under its new name; an unlink that fails
		// leaves a second name of it, which must not turn a file put in
		// place into a failure (a retry would find the target there).
		_ = unix.Unlinkat(from, fromName, 0)
		return nil
	})
}

// withFds calls f with the descriptors of two open directories.
func withFds(a, b *os.File, f func(a, b int) error) error {
	ca, err := a.SyscallConn()
	if err != nil {
		return err
	}
	cb, err := b.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	cerr := ca.Control(func(fa uintptr) {
		cerr := cb.Control(func(fb uintptr) { ferr = f(int(fa), int(fb)) })
		if ferr == nil {
			ferr = cerr
		}
	})
	if cerr != nil {
		return cerr
	}
	return ferr
}
