package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// copyRange is POST /v1/copy (sluice.CopyRequest): the agent moves a
// range between one of its files and a storage server, or between two
// storage servers, so that the service's bytes never pass through the
// service. Every storage server reached must be named in the token's
// Remotes, which only the service mints: a user's token (of `sluice
// token`) cannot make an agent connect anywhere.
func (s *Server) copyRange(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.CopyRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Offset < 0 || in.Length < 0 || in.Offset > file.MaxSize-in.Length {
		return fmt.Errorf("%w: range %d+%d", backend.ErrInvalid, in.Offset, in.Length)
	}
	if !in.From.Remote() && !in.To.Remote() {
		return fmt.Errorf("%w: neither end is a storage server (between agents: POST /v1/pull)", backend.ErrInvalid)
	}
	ctx := r.Context()
	var src io.ReadCloser
	var write func(ctx context.Context, data io.Reader) error
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	// The ends are checked, both, before either is opened.
	var fromPath, toPath string
	var err error
	if in.From.Remote() {
		err = s.allowsRemote(c, in.From)
	} else if fromPath, err = bodyPath("from.path", in.From.Path); err == nil {
		err = c.Allows(auth.Read, fromPath)
	}
	if err != nil {
		return err
	}
	if in.To.Remote() {
		err = s.allowsRemote(c, in.To)
	} else if toPath, err = bodyPath("to.path", in.To.Path); err == nil {
		err = c.Allows(auth.Write, toPath)
	}
	if err != nil {
		return err
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	if !in.To.Remote() {
		// As for pulls: the destination exists (the service allocated
		// it) before the source is asked for anything.
		if _, err := c.fs.Stat(ctx, toPath); err != nil {
			return err
		}
	}
	if in.From.Remote() {
		b, p, release, err := s.opened.get(ctx, s.storage, in.From.URL, false, in.From.Credential)
		if err != nil {
			return fmt.Errorf("opening %s: %w", in.From.URL, err)
		}
		closers = append(closers, func() error { release(); return nil })
		if src, err = b.OpenRange(ctx, p, in.Offset, in.Length); err != nil {
			return fmt.Errorf("reading %s: %w", in.From.URL, err)
		}
	} else if src, err = c.fs.OpenRange(ctx, fromPath, in.Offset, in.Length); err != nil {
		return err
	}
	closers = append(closers, src.Close)
	if in.To.Remote() {
		b, p, release, err := s.opened.get(ctx, s.storage, in.To.URL, true, in.To.Credential)
		if err != nil {
			return fmt.Errorf("opening %s: %w", in.To.URL, err)
		}
		closers = append(closers, func() error { release(); return nil })
		write = func(ctx context.Context, data io.Reader) error {
			return b.WriteAt(ctx, p, in.Offset, data, in.Length)
		}
	} else {
		write = func(ctx context.Context, data io.Reader) error {
			return s.fencedWrite(ctx, c.fs, toPath, fc, func(ctx context.Context) error {
				return c.fs.WriteAtExisting(ctx, toPath, in.Offset, fencedReader{ctx, data}, in.Length)
			})
		}
	}
	start := time.Now()
	var data io.Reader = src
	var rep *pullReport
	if in.Progress {
		// What a line reports has been handed to the destination's
		// writer; the last line (done) comes once the write returned.
		rep = &pullReport{w: w, r: data}
		data = rep
	}
	err = write(ctx, data)
	what := in.From.String() + " -> " + in.To.String()
	if err != nil && (rep == nil || !rep.started) {
		return fmt.Errorf("copy %s: %w", what, err)
	}
	if err != nil {
		s.log.Warn("copy failed", "remote", r.RemoteAddr, "sub", c.Sub, "copy", what,
			"offset", in.Offset, "bytes", in.Length, "written", rep.reported, "err", err)
		_, kind := classify(err)
		rep.line(sluice.PullProgressLine{Written: rep.reported, Error: s.fs.Rel(fmt.Errorf("copy %s: %w", what, err)).Error(), Kind: kind})
		return nil
	}
	s.log.Info("copied", "remote", r.RemoteAddr, "sub", c.Sub, "copy", what,
		"offset", in.Offset, "bytes", in.Length, slog.Duration("took", time.Since(start)))
	if rep != nil && rep.started {
		rep.line(sluice.PullProgressLine{Written: in.Length, Done: true})
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// allowsRemote checks that the agent may reach e's storage server for
// the caller: it has storage backends, and the token names the server.
func (s *Server) allowsRemote(c *call, e sluice.CopyEnd) error {
	if s.storage == nil {
		return fmt.Errorf("%w: this agent reaches no storage servers", backend.ErrPermission)
	}
	base, err := StorageBase(e.URL)
	if err != nil {
		return err
	}
	return c.AllowsRemote(base)
}

// StorageBase is the scheme://host:port of a storage server's URL, as
// tokens name it (auth.Claims.Remotes). The port must be given: the
// service writes every storage URL with one, so that one server has one
// name.
func StorageBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("%w: storage URL %q: want scheme://host:port/path", backend.ErrInvalid, raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: storage URL %q carries a user: credentials go in the credential", backend.ErrInvalid, raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// remoteSum is POST /v1/remotesum (sluice.RemoteSumRequest): the
// checksum of a file on a storage server, computed by the agent through
// its backend (by the server itself where the protocol asks it to,
// GridFTP's CKSM or XRootD's query; by reading the file otherwise, S3 or
// WebDAV without digests), so that the service never reads a storage
// server's bytes itself. The token must name the server in its Remotes.
func (s *Server) remoteSum(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.RemoteSumRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	end := sluice.CopyEnd{URL: in.URL, Credential: in.Credential}
	if err := s.allowsRemote(c, end); err != nil {
		return err
	}
	b, p, release, err := s.opened.get(r.Context(), s.storage, in.URL, false, in.Credential)
	if err != nil {
		return fmt.Errorf("opening %s: %w", in.URL, err)
	}
	defer release()
	sum, err := b.Checksum(r.Context(), p, in.Algo)
	if err != nil {
		return fmt.Errorf("checksum of %s: %w", in.URL, err)
	}
	return writeJSON(w, map[string]string{"algo": in.Algo, "value": sum})
}
