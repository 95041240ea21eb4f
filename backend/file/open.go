package file

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for local paths and file:// URLs: the
// backend is the machine's whole file system, and the path the
// location's, made absolute (a trailing slash, which names a directory
// to copy into, is kept).
func Open(_ context.Context, loc string, _ backend.OpenOptions) (backend.Opened, error) {
	p := strings.TrimPrefix(loc, "file://")
	abs, err := filepath.Abs(p)
	if err != nil {
		return backend.Opened{}, fmt.Errorf("%s: %w", loc, err)
	}
	if strings.HasSuffix(p, "/") && abs != "/" {
		abs += "/"
	}
	b, err := New("/")
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: abs, URL: "file://" + abs, Close: b.Close}, nil
}
