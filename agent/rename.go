package agent

import (
	"context"
)

// renameOp is the rename of from to to that a rename request asks for:
// with replace false, one that fails (kind "exist") rather than replace a
// file at to, in one step of the file system; without the field, or true,
// one that replaces it, as agents did before the field existed (older
// servers send none). sync also syncs to's directory (a single rename;
// a batch syncs its directories once at the end).
func (s *Server) renameOp(ctx context.Context, from, to string, replace *bool, sync bool) func() error {
	noReplace := replace != nil && !*replace
	switch {
	case noReplace && sync:
		return func() error { return s.fs.RenameNoReplace(ctx, from, to) }
	case noReplace:
		return func() error { return s.fs.RenameNoReplaceNoSync(ctx, from, to) }
	case sync:
		return func() error { return s.fs.Rename(ctx, from, to) }
	}
	return func() error { return s.fs.RenameNoSync(ctx, from, to) }
}
