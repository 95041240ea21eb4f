//go:build !linux

package file

import "os"

// rootOf opens name below r as a root, d having shown that it is a
// directory. Without Linux's /proc/self/fd the name is looked up again:
// a directory swapped for a named pipe in between hangs this open.
func rootOf(d *os.File, r *os.Root, name string) (*os.Root, error) {
	return r.OpenRoot(name)
}
