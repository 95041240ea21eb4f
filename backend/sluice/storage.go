package sluice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluice-dtn/sluice/backend"
)

// CopyEnd is one end of an agent's copy of a range (CopyRequest): a path
// of the agent's own files, or a file on a storage server (URL) that the
// agent opens through its backends with Credential.
type CopyEnd struct {
	Path       string              `json:"path,omitempty"`
	URL        string              `json:"url,omitempty"`
	Credential *backend.Credential `json:"credential,omitempty"`
}

// Remote reports whether the end is on a storage server.
func (e CopyEnd) Remote() bool { return e.URL != "" }

// String names the end without its credential.
func (e CopyEnd) String() string {
	if e.URL != "" {
		return e.URL
	}
	return e.Path
}

// CopyRequest is POST /v1/copy: the agent moves [Offset, Offset+Length)
// of From to the same offset of To, where at least one end is a storage
// server (a GridFTP or XRootD server the service keeps as an endpoint):
// the agent reads or writes the storage itself, or, with both ends
// remote, relays between two servers that cannot reach each other (the
// service's streaming copies). The token must grant reading a local From,
// writing a local To, and name each remote's server in its Remotes. A
// local To must exist (the service allocates it before it copies).
type CopyRequest struct {
	From     CopyEnd `json:"from"`
	To       CopyEnd `json:"to"`
	Offset   int64   `json:"offset"`
	Length   int64   `json:"length"`
	Progress bool    `json:"progress,omitempty"`
}

// CopyRange has the agent copy a range between one of its files and a
// storage server, or between two storage servers (CopyRequest), calling
// progress (if not nil) with the bytes written so far as they land.
func (b *Backend) CopyRange(ctx context.Context, in CopyRequest, progress func(written int64)) error {
	what := in.From.String() + " -> " + in.To.String()
	if !in.From.Remote() && !in.To.Remote() {
		return wrap("copy", what, fmt.Errorf("%w: neither end is a storage server", backend.ErrInvalid))
	}
	in.Progress = progress != nil
	if progress == nil {
		return wrap("copy", what, b.call(ctx, http.MethodPost, "/v1/copy", nil, in, nil))
	}
	js, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := b.do(ctx, http.MethodPost, "/v1/copy", nil, bytes.NewReader(js), int64(len(js)), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return wrap("copy", what, err)
	}
	defer resp.Body.Close()
	return wrap("copy", what, readPullProgress(resp, in.Length, progress))
}

// RemoteSumRequest is POST /v1/remotesum: the checksum (Algo, one of
// backend.Algorithms) of the file at URL on a storage server, which the
// agent opens with Credential; the token must name the server in its
// Remotes.
type RemoteSumRequest struct {
	URL        string              `json:"url"`
	Credential *backend.Credential `json:"credential,omitempty"`
	Algo       string              `json:"algo"`
}

// RemoteChecksum has the agent compute the checksum of a file on a
// storage server (RemoteSumRequest). The answer waits for the whole
// file to be read where the storage cannot sum it itself.
func (b *Backend) RemoteChecksum(ctx context.Context, in RemoteSumRequest) (string, error) {
	var out struct {
		Algo  string `json:"algo"`
		Value string `json:"value"`
	}
	err := b.call(ctx, http.MethodPost, "/v1/remotesum", nil, in, &out)
	if err == nil && out.Algo != in.Algo {
		err = fmt.Errorf("agent answered with a %q checksum", out.Algo)
	}
	return out.Value, wrap("checksum", in.URL, err)
}
