package sluice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

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
	// ModTime, if set, is given to From before the rename (a copy that
	// preserves modification times: the file appears with it).
	ModTime *time.Time `json:"mtime,omitempty"`
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

// StatsRequest is the body of POST /v1/stats.
type StatsRequest struct {
	Paths []string `json:"paths"`
}

// StatResult is one file's answer in a stat batch: what GET /v1/stat
// answers (Path as asked), or why it could not (Error, Kind).
type StatResult struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size,omitempty"`
	ModTime time.Time `json:"mtime,omitzero"`
	IsDir   bool      `json:"dir,omitempty"`
	Error   string    `json:"error,omitempty"`
	Kind    string    `json:"kind,omitempty"`
}

// Info is the result as a backend.FileInfo.
func (r StatResult) Info() backend.FileInfo {
	return backend.FileInfo{Path: r.Path, Size: r.Size, ModTime: r.ModTime, IsDir: r.IsDir}
}

// Err is the file's failure as an error (errors.Is works with backend's
// sentinels), nil if it was stat'ed.
func (r StatResult) Err() error {
	if r.Error == "" {
		return nil
	}
	return &StatusError{Kind: r.Kind, Message: sanitize(r.Error)}
}

// StatsResponse is the answer of POST /v1/stats, one result per path.
type StatsResponse struct {
	Files []StatResult `json:"files"`
}

// statsOneByOne is how many single stats StatMany keeps in flight for an
// agent from before POST /v1/stats. Few: a caller may run several
// StatMany at once (the service, 16), and such an agent was sent 16
// stats at a time before the route existed.
const statsOneByOne = 4

// StatMany stats many files, in requests of at most 4,096 paths; per-file
// failures are in the results (Err), one per path in order. An agent
// from before POST /v1/stats answers 404 for the route; the files are
// then stat'ed one request each, a few at a time.
func (b *Backend) StatMany(ctx context.Context, paths []string) ([]StatResult, error) {
	out := make([]StatResult, 0, len(paths))
	for len(paths) > 0 {
		n := min(len(paths), maxSyncPaths)
		var resp StatsResponse
		err := b.call(ctx, http.MethodPost, "/v1/stats", nil, StatsRequest{paths[:n]}, &resp)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			if resp.Files, err = b.statEach(ctx, paths[:n]); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, wrap("stats", fmt.Sprintf("(%d files)", n), err)
		case len(resp.Files) != n:
			return nil, fmt.Errorf("stats: the agent answered for %d of %d files", len(resp.Files), n)
		}
		out = append(out, resp.Files...)
		paths = paths[n:]
	}
	return out, nil
}

// statEach is StatMany's way with an agent that has no POST /v1/stats. A
// file's own failure (missing, refused) is its result; any other fails
// the whole.
func (b *Backend) statEach(ctx context.Context, paths []string) ([]StatResult, error) {
	out := make([]StatResult, len(paths))
	errs := make([]error, len(paths))
	sem := make(chan struct{}, statsOneByOne)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fi, err := b.Stat(ctx, p)
			var se *StatusError
			switch {
			case err == nil:
				out[i] = StatResult{Path: p, Size: fi.Size, ModTime: fi.ModTime, IsDir: fi.IsDir}
			case errors.As(err, &se) && se.Status >= 400 && se.Status < 500:
				out[i] = StatResult{Path: p, Error: se.Message, Kind: se.Kind}
			default:
				errs[i] = err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
