package agent

import (
	"context"

	"github.com/sluice-dtn/sluice/backend/file"
)

// renameOp is the rename of from to to that a rename request asks for:
// with replace false, one that fails (kind "exist") rather than replace a
// file at to, in one step of the file system; without the field, or true,
// one that replaces it, as agents did before the field existed (older
// servers send none). sync also syncs to's directory (a single rename;
// a batch syncs its directories once at the end).
func renameOp(ctx context.Context, fs *file.Backend, from, to string, replace *bool, sync bool) func() error {
	noReplace := replace != nil && !*replace
	switch {
	case noReplace && sync:
		return func() error { return fs.RenameNoReplace(ctx, from, to) }
	case noReplace:
		return func() error { return fs.RenameNoReplaceNoSync(ctx, from, to) }
	case sync:
		return func() error { return fs.Rename(ctx, from, to) }
	}
	return func() error { return fs.RenameNoSync(ctx, from, to) }
}
