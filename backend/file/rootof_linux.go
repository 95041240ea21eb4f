package file

import (
	"fmt"
	"os"
)

// rootOf makes the open directory d (name below r) a root: through
// /proc/self/fd, which reopens the very directory d holds, whatever has
// been renamed or swapped at its name since.
func rootOf(d *os.File, r *os.Root, name string) (*os.Root, error) {
	return os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", d.Fd()))
}
