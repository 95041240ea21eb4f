package agent

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// getXattr reads extended attribute name of f. ok is false where the file
// system keeps no extended attributes, or this process may not use them on
// f (another user's file); a missing attribute is "", true.
func getXattr(f *os.File, name string) (v string, ok bool, err error) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(int(f.Fd()), name, buf)
	switch {
	case err == nil:
		return string(buf[:n]), true, nil
	case errors.Is(err, unix.ENODATA):
		return "", true, nil
	case unusable(err):
		return "", false, nil
	}
	return "", false, err
}

// setXattr sets extended attribute name of f; ok is false where the file
// system keeps none or this process may not set them on f.
func setXattr(f *os.File, name, v string) (ok bool, err error) {
	err = unix.Fsetxattr(int(f.Fd()), name, []byte(v), 0)
	switch {
	case err == nil:
		return true, nil
	case unusable(err):
		return false, nil
	}
	return false, err
}

// removeXattr removes extended attribute name of f, if it is there.
func removeXattr(f *os.File, name string) {
	unix.Fremovexattr(int(f.Fd()), name)
}

// unusable reports whether err says extended attributes cannot be used
// here (then fences are kept in memory instead).
func unusable(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) ||
		errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}
