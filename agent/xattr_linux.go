package agent

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// getXattr reads extended attribute name of f. ok is false where the file
// system keeps no extended attributes; a missing attribute is "", true.
func getXattr(f *os.File, name string) (v string, ok bool, err error) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(int(f.Fd()), name, buf)
	switch {
	case err == nil:
		return string(buf[:n]), true, nil
	case errors.Is(err, unix.ENODATA):
		return "", true, nil
	case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
		return "", false, nil
	}
	return "", false, err
}

// setXattr sets extended attribute name of f; ok is false where the file
// system keeps none.
func setXattr(f *os.File, name, v string) (ok bool, err error) {
	err = unix.Fsetxattr(int(f.Fd()), name, []byte(v), 0)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
		return false, nil
	}
	return false, err
}

// removeXattr removes extended attribute name of f, if it is there.
func removeXattr(f *os.File, name string) {
	unix.Fremovexattr(int(f.Fd()), name)
}
