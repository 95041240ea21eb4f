//go:build !linux

package file

import (
	"errors"
	"os"
	"path/filepath"
)

// renameAtNoReplace renames fromName in directory fromDir to toName in
// toDir, failing with EEXIST if toName exists: a hard link, which fails
// when the target exists, then an unlink of the old name. The
// directories' names serve here (they were opened inside the root, and
// the names are single elements of them).
func (b *Backend) renameAtNoReplace(fromDir *os.File, fromName string, toDir *os.File, toName string) error {
	from := filepath.Join(fromDir.Name(), fromName)
	if err := os.Link(from, filepath.Join(toDir.Name(), toName)); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			return le.Err
		}
		return err
	}
	_ = os.Remove(from) // see the Linux version
	return nil
}
