package sluice

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-dtn/sluice/backend"
)

// PullBatchFile is one file of a pull batch: Src on the source agent,
// written whole to Dst on the agent asked (a temporary name, normally).
// Size is what the caller expects; -1 accepts any.
type PullBatchFile struct {
	Src  string `json:"src"`
	Dst  string `json:"dst"`
	Size int64  `json:"size"`
	// Fence, if set, is the writer's fence for Dst (backend.Fence's
	// wire form): a file of a batch may belong to its own task.
	Fence string `json:"fence,omitempty"`
}

// PullBatchRequest is the body of POST /v1/pullbatch.
type PullBatchRequest struct {
	Source   string          `json:"source"`             // the source agent, sluice://host:port
	Token    string          `json:"token"`              // read token for the source's files
	Checksum string          `json:"checksum,omitempty"` // algorithm, or "" / "none"
	Files    []PullBatchFile `json:"files"`
}

// PullBatchResult is what happened to one file of a pull or rename
// batch: an empty Error means it is in place (written, verified against
// the source's checksum and made durable; or renamed).
type PullBatchResult struct {
	Dst            string `json:"dst"`
	Bytes          int64  `json:"bytes,omitempty"`
	SourceChecksum string `json:"source_checksum,omitempty"`
	Checksum       string `json:"checksum,omitempty"`
	Error          string `json:"error,omitempty"`
	Kind           string `json:"kind,omitempty"`
}

// Err is the result's failure as an error (errors.Is works with
// backend's sentinels, as for a single request), nil on success.
func (r PullBatchResult) Err() error {
	if r.Error == "" {
		return nil
	}
	// The batch's answer was 200: the file's failure has no status of
	// its own, only its kind.
	return &StatusError{Kind: r.Kind, Message: sanitize(r.Error)}
}

// PullBatchResponse is the answer of POST /v1/pullbatch: one result per
// file, in the order asked.
type PullBatchResponse struct {
	Files []PullBatchResult `json:"files"`
}

// RenamePair is one rename of a rename batch.
type RenamePair struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Fence, if set, is checked against From's as a single rename's.
	Fence string `json:"fence,omitempty"`
	// Replace false asks the agent not to replace a file at To: the
	// pair then fails with kind "exist" (backend.ErrExist). Unset, To
	// is replaced (what agents did before the field existed).
	Replace *bool `json:"replace,omitempty"`
}

// RenamesRequest is the body of POST /v1/renames.
type RenamesRequest struct {
	Pairs []RenamePair `json:"pairs"`
}

// RenamesResponse is the answer of POST /v1/renames, one result per pair.
type RenamesResponse struct {
	Results []PullBatchResult `json:"results"`
}

// SyncsRequest is the body of POST /v1/syncs.
type SyncsRequest struct {
	Paths []string `json:"paths"`
}

// PullBatch tells the agent to fetch files from the source agent in one
// batch (pipelined, back to back on one connection) and write each whole
// into its Dst, verifying the source's checksum (algo; "none" for none)
// against its own of the bytes written. The error is for the request as
// a whole; per-file failures are in the results, one per file in order.
func (b *Backend) PullBatch(ctx context.Context, source, sourceToken, algo string, files []PullBatchFile) ([]PullBatchResult, error) {
	if _, _, err := ParseURL(source); err != nil {
		return nil, wrap("pull batch", source, err)
	}
	in := PullBatchRequest{Source: source, Token: sourceToken, Checksum: algo, Files: files}
	var out PullBatchResponse
	if err := b.call(ctx, http.MethodPost, "/v1/pullbatch", nil, in, &out); err != nil {
		return nil, wrap("pull batch", fmt.Sprintf("%s (%d files)", source, len(files)), err)
	}
	if len(out.Files) != len(files) {
		return nil, fmt.Errorf("pull batch from %s: the agent answered for %d of %d files", source, len(out.Files), len(files))
	}
	return out.Files, nil
}

// Renames renames many files in one request; per-pair failures are in the
// results, one per pair in order.
func (b *Backend) Renames(ctx context.Context, pairs []RenamePair) ([]PullBatchResult, error) {
	var out RenamesResponse
	if err := b.call(ctx, http.MethodPost, "/v1/renames", nil, RenamesRequest{pairs}, &out); err != nil {
		return nil, wrap("renames", fmt.Sprintf("(%d files)", len(pairs)), err)
	}
	if len(out.Results) != len(pairs) {
		return nil, fmt.Errorf("renames: the agent answered for %d of %d files", len(out.Results), len(pairs))
	}
	return out.Results, nil
}

// SyncMany makes the named files durable in one request (the agent syncs
// its file system once), in requests of at most 4,096 paths. An agent from
// before POST /v1/syncs answers 404 for the route; the files are then
// synced one request each, as they would have been.
func (b *Backend) SyncMany(ctx context.Context, paths []string) error {
	for len(paths) > 0 {
		n := min(len(paths), maxSyncPaths)
		err := b.call(ctx, http.MethodPost, "/v1/syncs", nil, SyncsRequest{paths[:n]}, nil)
		if errors.Is(err, backend.ErrNotFound) {
			for _, p := range paths[:n] {
				if err := b.Sync(ctx, p); err != nil {
					return err
				}
			}
		} else if err != nil {
			return wrap("sync", fmt.Sprintf("(%d files)", n), err)
		}
		paths = paths[n:]
	}
	return nil
}

// maxSyncPaths is the agent's limit on paths in one POST /v1/syncs.
const maxSyncPaths = 4096
