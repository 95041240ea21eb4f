package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// maxBatchFiles bounds the files of one pull batch or rename batch: the
// request and its answer stay small JSON documents.
const maxBatchFiles = 4096

// pullBatch is the third-party form of the batch GET: this agent asks
// another one for many whole files in one response and writes each into
// its own file here (normally a temporary name the caller renames after
// its own checks, with POST /v1/renames). Small files move back to back
// over one connection, a round trip per batch rather than several per
// file, and never pass through the client.
//
// With a checksum algorithm, the source sends each file's checksum after
// its bytes (computed as they leave) and this agent computes its own from
// the bytes as they are written; a file whose two sums differ is removed
// and reported as failed. The files written are made durable (SyncMany)
// before the answer, which lists per file what happened, in order.
func (s *Server) pullBatch(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.PullBatchRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if len(in.Files) == 0 || len(in.Files) > maxBatchFiles {
		return fmt.Errorf("%w: %d files in a pull batch (1 to %d)", backend.ErrInvalid, len(in.Files), maxBatchFiles)
	}
	if in.Checksum != "" && in.Checksum != "none" {
		if _, err := backend.NewHash(in.Checksum); err != nil {
			return err
		}
	} else {
		in.Checksum = ""
	}
	dsts := make([]string, len(in.Files))
	srcs := make([]string, len(in.Files))
	fcs := make([]*backend.Fence, len(in.Files))
	for i, f := range in.Files {
		dst, err := bodyPath("dst", f.Dst)
		if err != nil {
			return err
		}
		if err := c.Allows(auth.Write, dst); err != nil {
			return err
		}
		if f.Size < -1 {
			return fmt.Errorf("%w: size %d of %s (-1: any)", backend.ErrInvalid, f.Size, f.Src)
		}
		if f.Src == "" {
			return fmt.Errorf("%w: no source path for %s", backend.ErrInvalid, dst)
		}
		if fcs[i], err = bodyFence(f.Fence); err != nil {
			return err
		}
		dsts[i], srcs[i] = dst, f.Src
	}
	base, _, err := sluice.ParseURL(in.Source)
	if err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
	}
	if in.Token == "" {
		return fmt.Errorf("%w: no token for the source", backend.ErrInvalid)
	}
	if err := s.pulls.checkURL(base); err != nil {
		return err
	}
	from, err := sluice.New(base, in.Token, s.client)
	if err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
	}
	start := time.Now()
	ctx := r.Context()
	var br *sluice.BatchReader
	if in.Checksum != "" {
		br, err = from.BatchSums(ctx, srcs, in.Checksum)
	} else {
		br, err = from.Batch(ctx, srcs)
	}
	if err != nil {
		return fmt.Errorf("pull batch from %s: %w", in.Source, err)
	}
	defer br.Close()
	out := sluice.PullBatchResponse{Files: make([]sluice.PullBatchResult, len(in.Files))}
	var written []string
	var moved int64
	var broken error // the stream failed: the files after it were not sent
	for i, f := range in.Files {
		res := &out.Files[i]
		res.Dst = dsts[i]
		if broken != nil {
			s.setErr(res, broken)
			continue
		}
		if err := s.pullOne(ctx, c.fs, br, f, dsts[i], fcs[i], in.Checksum, res); err != nil {
			var fe fileError
			if errors.As(err, &fe) {
				s.setErr(res, fe.err) // this file only; the batch goes on
				continue
			}
			broken = fmt.Errorf("pull batch from %s broke at %s: %w", in.Source, f.Src, err)
			s.setErr(res, broken)
			continue
		}
		written = append(written, dsts[i])
		moved += res.Bytes
	}
	if len(written) > 0 {
		if err := c.fs.SyncMany(ctx, written); err != nil {
			// Nothing written may be reported durable.
			for i := range out.Files {
				if out.Files[i].Error == "" {
					s.setErr(&out.Files[i], fmt.Errorf("sync: %w", err))
				}
			}
		}
	}
	s.log.Info("pulled batch", "remote", r.RemoteAddr, "sub", c.Sub, "source", in.Source,
		"files", len(in.Files), "written", len(written), "bytes", moved, slog.Duration("took", time.Since(start)))
	return writeJSON(w, out)
}

// fileError is a failure of one file of a batch that leaves the stream
// usable for the next.
type fileError struct{ err error }

func (e fileError) Error() string { return e.err.Error() }

// pullOne lands the next file of br at dst. It returns a fileError when
// only this file failed, any other error when the stream is broken.
func (s *Server) pullOne(ctx context.Context, fs *file.Backend, br *sluice.BatchReader, f sluice.PullBatchFile, dst string, fc *backend.Fence, algo string, res *sluice.PullBatchResult) error {
	name, size, rd, err := br.Next()
	switch {
	case err != nil && name != "":
		return fileError{err} // the source could not send this one
	case errors.Is(err, io.EOF):
		return fmt.Errorf("the source ended the batch early: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return err
	case name != f.Src:
		// Not the name it sent: a source's text is not echoed.
		return fmt.Errorf("the source sent another file where %q was due", f.Src)
	}
	if f.Size >= 0 && size != f.Size {
		// The source changed since it was listed: not this file (the
		// next Next skips its bytes).
		return fileError{fmt.Errorf("%w: %s is %d bytes, expected %d", backend.ErrChanged, f.Src, size, f.Size)}
	}
	// A stale leftover of an earlier attempt goes first, so nothing of
	// it survives under the new bytes; not if a newer owner wrote it.
	// (Refused, the file's bytes are read past by the next Next.)
	if err := s.fencedRemove(ctx, fs, dst, fc, func() error { return fs.Remove(ctx, dst) }); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fileError{err}
	}
	var data io.Reader = rd
	if s.shape != nil {
		// Emulating: the pulled bytes are a stream of this endpoint too.
		sr := s.shape.Reader(ctx, rd)
		defer sr.Close()
		data = sr
	}
	var h hash.Hash
	if algo != "" {
		h, _ = backend.NewHash(algo) // checked by the caller
		data = io.TeeReader(data, h)
	}
	if err := s.fencedWrite(ctx, fs, dst, fc, func(ctx context.Context) error { return fs.WriteAt(ctx, dst, 0, fencedReader{ctx, data}, size) }); err != nil {
		if errors.Is(err, backend.ErrFenced) {
			// A newer owner wrote the file meanwhile: it is theirs.
			return fileError{err}
		}
		s.dropOwn(ctx, fs, dst, fc)
		// Where the stream stands is unknown now.
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	res.Bytes = size
	if h == nil {
		return nil
	}
	srcSum, err := br.Checksum()
	if err != nil {
		s.dropOwn(ctx, fs, dst, fc)
		if br.Err() == nil {
			return fileError{err} // the source changed while it sent this file
		}
		return err
	}
	res.SourceChecksum, res.Checksum = srcSum, hex.EncodeToString(h.Sum(nil))
	if res.SourceChecksum != res.Checksum {
		s.dropOwn(ctx, fs, dst, fc)
		return fileError{fmt.Errorf("checksum mismatch (%s): source %s, written %s", algo, res.SourceChecksum, res.Checksum)}
	}
	return nil
}

// dropOwn removes what this batch wrote at dst after a failure, unless a
// newer owner of the file's partition has written it since (its fence):
// a server that lost the partition while its batch ran (a paused
// process) must not delete the new owner's file, which has the same
// temporary name.
func (s *Server) dropOwn(ctx context.Context, fs *file.Backend, dst string, fc *backend.Fence) {
	err := s.fencedRemove(context.WithoutCancel(ctx), fs, dst, fc, func() error { return fs.Remove(context.WithoutCancel(ctx), dst) })
	if err != nil && !errors.Is(err, backend.ErrNotFound) && !errors.Is(err, backend.ErrFenced) {
		s.log.Warn("removing a failed batch file", "path", dst, "err", fs.Rel(err))
	}
}

// setErr records err as a batch result's failure, with the protocol's
// error kind (so the caller's errors.Is works as for a single request).
func (s *Server) setErr(res *sluice.PullBatchResult, err error) {
	_, kind := classify(err)
	res.Error, res.Kind = s.fs.Rel(err).Error(), kind
}

// renames renames many files in one request, each as POST /v1/rename
// would, and answers per pair, in order: the last step of a pull batch,
// after the caller's own checks.
func (s *Server) renames(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.RenamesRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if len(in.Pairs) == 0 || len(in.Pairs) > maxBatchFiles {
		return fmt.Errorf("%w: %d renames in a batch (1 to %d)", backend.ErrInvalid, len(in.Pairs), maxBatchFiles)
	}
	type pair struct {
		from, to string
		fence    *backend.Fence
		replace  *bool
		mtime    *time.Time
	}
	ps := make([]pair, len(in.Pairs))
	for i, p := range in.Pairs {
		from, to, err := s.renamePaths(c, p.From, p.To)
		if err != nil {
			return err
		}
		fc, err := bodyFence(p.Fence)
		if err != nil {
			return err
		}
		if p.ModTime != nil && p.ModTime.Before(time.Unix(0, 0)) {
			return fmt.Errorf("%w: mtime %s of %s is before 1970", backend.ErrInvalid, p.ModTime, p.From)
		}
		ps[i] = pair{from, to, fc, p.Replace, p.ModTime}
	}
	out := sluice.RenamesResponse{Results: make([]sluice.PullBatchResult, len(ps))}
	var done []string
	for i, p := range ps {
		out.Results[i].Dst = p.to
		rename := renameOp(r.Context(), c.fs, p.from, p.to, p.replace, false)
		if p.mtime != nil {
			// On the file before it is renamed, under the same fence:
			// it appears with its source's time.
			then := rename
			rename = func() error {
				if err := c.fs.SetModTime(r.Context(), p.from, *p.mtime); err != nil {
					return err
				}
				return then()
			}
		}
		if err := s.fencedRename(r.Context(), c.fs, p.from, p.to, p.fence, rename); err != nil {
			s.setErr(&out.Results[i], err)
			continue
		}
		done = append(done, p.to)
	}
	// The new names are made durable together, one sync per directory
	// rather than per file, before the answer reports them.
	c.fs.SyncDirs(context.WithoutCancel(r.Context()), done)
	s.log.Info("renamed batch", "remote", r.RemoteAddr, "sub", c.Sub, "files", len(ps), "renamed", len(done))
	return writeJSON(w, out)
}

// syncs makes many files durable in one request, as POST /v1/sync would
// each: one syncfs(2) on Linux rather than an fsync per file, which makes
// a copy of small files crawl. A client copying small files whole (sluice
// cp from local files) makes a group of them durable this way before it
// renames them into place.
func (s *Server) syncs(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.SyncsRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if len(in.Paths) == 0 || len(in.Paths) > maxBatchFiles {
		return fmt.Errorf("%w: %d paths in a sync batch (1 to %d)", backend.ErrInvalid, len(in.Paths), maxBatchFiles)
	}
	paths := make([]string, len(in.Paths))
	for i, raw := range in.Paths {
		p, err := bodyPath("paths", raw)
		if err != nil {
			return err
		}
		if err := c.Allows(auth.Write, p); err != nil {
			return err
		}
		paths[i] = p
	}
	if err := c.fs.SyncMany(r.Context(), paths); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
