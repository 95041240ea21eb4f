package agent

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// Handler returns the agent's HTTP handler: every endpoint of the
// protocol, behind the path guard and token check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for pattern, h := range map[string]handler{
		// GET patterns also match HEAD; ServeContent answers both.
		"GET /v1/files/{path...}":     s.getFile,
		"PUT /v1/files/{path...}":     s.putFile,
		"DELETE /v1/files/{path...}":  s.deleteFile,
		"GET /v1/stat/{path...}":      s.stat,
		"POST /v1/stats":              s.stats,
		"GET /v1/list/{path...}":      s.list,
		"GET /v1/checksum/{path...}":  s.checksum,
		"POST /v1/truncate/{path...}": s.truncate,
		"POST /v1/mtime/{path...}":    s.setModTime,
		"POST /v1/sync/{path...}":     s.sync,
		"POST /v1/mkdir/{path...}":    s.mkdir,
		"POST /v1/rename":             s.rename,
		"POST /v1/batch":              s.batch,
		"POST /v1/pull":               s.pull,
		"POST /v1/copy":               s.copyRange,
		"POST /v1/remotesum":          s.remoteSum,
		"POST /v1/pullbatch":          s.pullBatch,
		"POST /v1/renames":            s.renames,
		"POST /v1/syncs":              s.syncs,
		"GET /v1/info":                s.info,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			c, err := s.authenticate(r)
			if err == nil {
				err = s.serve(w, r, c, h)
			}
			if err != nil {
				s.fail(w, r, err)
			}
		})
	}
	return s.guard(mux)
}

// handler serves one endpoint for an authenticated request. It returns an
// error only if it has not started the response.
type handler func(w http.ResponseWriter, r *http.Request, c *call) error

// call is an authenticated request: its token's claims, and the files it
// may touch, confined to the token's link base (auth.Claims.LinkBase).
// Every path of the request is resolved through fs, never through the
// agent's whole root: a token's prefix is checked by name, and fs keeps
// the symbolic links below the link base from leading out of it in the
// same step that opens, writes, renames or lists (see file.Backend.In).
// Checking the links first and then opening the path through the root,
// as the agent once did, let a user who swaps a file for a link between
// the two read and overwrite another user's files.
type call struct {
	auth.Claims
	fs *file.Backend
}

// serve runs h for the request with claims c, on the files below c's link
// base.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c auth.Claims, h handler) error {
	fs, err := s.fs.In(c.LinkBase())
	if err != nil {
		return err
	}
	defer fs.Close()
	// The view's errors name files from the root, as a client does.
	return fs.Rel(h(w, r, &call{c, fs}))
}

// guard refuses, before routing, request paths that decode to something
// leaving the root, and paths the mux would otherwise answer with a
// redirect to their cleaned form: a client must name what it means. It
// also makes every error response JSON.
func (s *Server) guard(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Emulating a WAN: every request, refused or not, is answered one
		// round trip after it was sent (nothing to wait without emulation).
		// Waiting here, not in the data handlers alone, also charges the
		// stat, checksum and rename requests a client makes per file: on a
		// real path they cost a round trip like any other.
		if s.shape.WaitRTT(r.Context()) != nil {
			return // the client gave up; there is no one to answer
		}
		// On every answer, so that a pulling agent can tell an agent
		// from any other HTTP service it was pointed at.
		w.Header().Set(sluice.AgentHeader, Version)
		jw := &jsonErrors{ResponseWriter: w}
		if err := checkName(r.URL.Path); err != nil {
			s.fail(jw, r, err)
		} else if p := r.URL.EscapedPath(); p != muxClean(p) {
			s.fail(jw, r, fmt.Errorf("%w: request path %q has empty or . elements", backend.ErrInvalid, p))
		} else {
			mux.ServeHTTP(jw, r)
		}
		jw.finish()
	})
}

// muxClean is how http.ServeMux cleans a path before matching (keeping a
// trailing slash); paths it would change get a redirect from the mux.
func muxClean(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// checkName refuses a decoded path that could leave the root whatever it
// is joined to: a ".." element or a NUL byte (which the kernel would take
// as the end of the name). backend/file refuses these too; refusing here
// names the request in the error and the log rather than what the file
// system made of it.
func checkName(p string) error {
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w: path %q contains NUL", backend.ErrPermission, p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("%w: path %q leaves the root", backend.ErrPermission, p)
		}
	}
	return nil
}

// urlPath is the request's file path: the URL's {path...}, decoded once
// by the mux, relative to the root. One that is absolute once decoded
// (%2Fetc%2Fpasswd) is refused: a client never sends that, so it is an
// attempt to reach outside.
func urlPath(r *http.Request) (string, error) {
	p := r.PathValue("path")
	if err := checkName(p); err != nil {
		return "", err
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: path %q is absolute", backend.ErrPermission, p)
	}
	return "/" + p, nil
}

// bodyPath checks a path from a JSON body, where a leading / means the
// root (as in token prefixes).
func bodyPath(field, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: no %q path", backend.ErrInvalid, field)
	}
	if err := checkName(p); err != nil {
		return "", err
	}
	return "/" + strings.TrimPrefix(p, "/"), nil
}

// allowedPath is urlPath checked against the token for op.
func (s *Server) allowedPath(r *http.Request, c *call, op auth.Op) (string, error) {
	p, err := urlPath(r)
	if err != nil {
		return "", err
	}
	if err := c.Allows(op, p); err != nil {
		return "", err
	}
	return p, nil
}

func (s *Server) authenticate(r *http.Request) (auth.Claims, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Claims{}, unauthorized(errors.New("no token (want Authorization: Bearer TOKEN)"))
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return auth.Claims{}, unauthorized(errors.New("Authorization is not a Bearer token"))
	}
	// Verify's errors never include the token, so they are safe to log.
	c, err := auth.Verify(s.key, strings.TrimSpace(tok), s.now(), s.name)
	if err != nil {
		return auth.Claims{}, unauthorized(err)
	}
	return c, nil
}

// fail answers a request with err as the protocol's JSON error and logs
// refusals at Warn (with the remote address, so attempts can be traced)
// and server failures at Error.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, kind := classify(err)
	attrs := []any{"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.EscapedPath(), "status", status, "err", err}
	switch {
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		s.log.Warn("request refused: not authenticated", attrs...)
	case status == http.StatusForbidden:
		s.log.Warn("request refused: not permitted", attrs...)
	case status >= 500:
		s.log.Error("request failed", attrs...)
	default:
		s.log.Debug("request failed", attrs...)
	}
	writeJSONError(w, status, kind, s.fs.Rel(err).Error())
}

func writeJSON(w http.ResponseWriter, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(js, '\n'))
	return nil
}

// decodeJSON reads a JSON request body of at most maxJSONBody bytes
// holding exactly one value.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	err := dec.Decode(v)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("%w: request body larger than %d bytes", backend.ErrInvalid, maxJSONBody)
	}
	if err != nil {
		return fmt.Errorf("%w: request body: %w", backend.ErrInvalid, err)
	}
	return nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Read)
	if err != nil {
		return err
	}
	f, err := c.fs.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", backend.ErrInvalid, p)
	}
	// Set so ServeContent does not read the file to guess a type.
	w.Header().Set("Content-Type", "application/octet-stream")
	// ServeContent does Range (206, 416), HEAD and conditional requests,
	// and copies *os.File to the connection with sendfile.
	var content io.ReadSeeker = f
	if s.shape != nil {
		// Emulating: what is read goes at the endpoint's pace (and so
		// without sendfile). The shaped reader buffers nothing between
		// Reads, so seeking the file underneath it is seeking it.
		rc := s.shape.Reader(r.Context(), f)
		defer rc.Close()
		content = struct {
			io.Reader
			io.Seeker
		}{rc, f}
	}
	fixRange(r, fi.Size())
	http.ServeContent(w, r, "", fi.ModTime(), content)
	return nil
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Write)
	if err != nil {
		return err
	}
	off, n := int64(0), r.ContentLength
	switch crs := r.Header.Values("Content-Range"); {
	case len(crs) > 1:
		return fmt.Errorf("%w: more than one Content-Range", backend.ErrInvalid)
	case len(crs) == 1:
		o, k, _, err := parseContentRange(crs[0])
		if err != nil {
			return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
		}
		if r.ContentLength != k {
			return fmt.Errorf("%w: Content-Length %d, but the range %s has %d bytes", backend.ErrInvalid, r.ContentLength, crs[0], k)
		}
		off, n = o, k
	case n < 0:
		return fmt.Errorf("%w: PUT needs a Content-Length", backend.ErrInvalid)
	}
	// If-Match: * (RFC 9110: only if the file exists) writes into an
	// existing file, never creating one: a transfer's ranges go into the
	// temporary file it allocated, and one removed meanwhile must not
	// come back holding only the later ranges.
	var existing bool
	switch ims := r.Header.Values("If-Match"); {
	case len(ims) == 1 && strings.TrimSpace(ims[0]) == "*":
		existing = true
	case len(ims) > 0:
		return fmt.Errorf("%w: If-Match %q: only \"*\" is understood", backend.ErrInvalid, strings.Join(ims, ", "))
	}
	var body io.Reader = r.Body
	if s.shape != nil { // emulating: the body arrives at the endpoint's pace
		sr := s.shape.Reader(r.Context(), r.Body)
		defer sr.Close()
		body = sr
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	if err := s.fencedWrite(r.Context(), c.fs, p, fc, func(ctx context.Context) error {
		// A superseded write may be waiting for a body that a paused
		// writer is not sending: end the wait.
		stop := context.AfterFunc(ctx, func() { _ = http.NewResponseController(w).SetReadDeadline(time.Now()) })
		defer stop()
		if existing {
			return c.fs.WriteAtExisting(ctx, p, off, fencedReader{ctx, body}, n)
		}
		return c.fs.WriteAt(ctx, p, off, fencedReader{ctx, body}, n)
	}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, c *call) error {
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	return s.writeOp(w, r, c, func(ctx context.Context, p string) error {
		if err := s.fencedRemove(ctx, c.fs, p, fc, func() error { return c.fs.Remove(ctx, p) }); err != nil {
			return err
		}
		s.log.Info("removed", "remote", r.RemoteAddr, "sub", c.Sub, "path", p)
		return nil
	})
}

// writeOp runs a write-scoped operation on the request's path and answers
// 204: the shape of delete, sync and mkdir.
func (s *Server) writeOp(w http.ResponseWriter, r *http.Request, c *call, op func(ctx context.Context, p string) error) error {
	p, err := s.allowedPath(r, c, auth.Write)
	if err != nil {
		return err
	}
	if err := op(r.Context(), p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Read)
	if err != nil {
		return err
	}
	fi, err := c.fs.Stat(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, fi)
}

// stats answers the stat of many files at once: a service that learns
// the sizes of a job's files one request each pays a round trip per file
// before the first of them can be scheduled.
func (s *Server) stats(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.StatsRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if len(in.Paths) == 0 || len(in.Paths) > maxBatchFiles {
		return fmt.Errorf("%w: %d paths in a stat batch (1 to %d)", backend.ErrInvalid, len(in.Paths), maxBatchFiles)
	}
	// As a batch: a read-less token is refused whole, paths outside its
	// prefix one by one.
	if err := c.Allows(auth.Read, c.Prefix); err != nil {
		return err
	}
	out := sluice.StatsResponse{Files: make([]sluice.StatResult, len(in.Paths))}
	for i, name := range in.Paths {
		if err := r.Context().Err(); err != nil {
			return err
		}
		p, err := bodyPath("paths", name)
		if err == nil {
			err = c.Allows(auth.Read, p)
		}
		var fi backend.FileInfo
		if err == nil {
			fi, err = c.fs.Stat(r.Context(), p)
		}
		if err != nil {
			status, kind := classify(err)
			if status == http.StatusForbidden {
				s.log.Warn("stat refused", "remote", r.RemoteAddr, "path", name, "err", err)
			}
			out.Files[i] = sluice.StatResult{Path: name, Error: c.fs.Rel(err).Error(), Kind: kind}
			continue
		}
		out.Files[i] = sluice.StatResult{Path: name, Size: fi.Size, ModTime: fi.ModTime, IsDir: fi.IsDir}
	}
	return writeJSON(w, out)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Read)
	if err != nil {
		return err
	}
	var recursive bool
	switch v := r.URL.Query().Get("recursive"); v {
	case "", "0", "false":
	case "1", "true":
		recursive = true
	default:
		return fmt.Errorf("%w: recursive=%q (want 1 or 0)", backend.ErrInvalid, v)
	}
	if v := r.URL.Query().Get("limit"); v != "" {
		// A page of the recursive listing (sluice.ListPage).
		limit, err := parseUint(v)
		if err != nil || limit < 1 || limit > maxListPage {
			return fmt.Errorf("%w: limit=%q (want 1 to %d entries)", backend.ErrInvalid, v, maxListPage)
		}
		after := r.URL.Query().Get("after")
		if after != "" {
			if after, err = bodyPath("after", after); err != nil {
				return err
			}
		}
		page, more, err := c.fs.ListPage(r.Context(), p, after, int(limit))
		if err != nil {
			return err
		}
		if page == nil {
			page = []backend.FileInfo{}
		}
		return writeJSON(w, sluice.ListPageResponse{Entries: page, More: more})
	}
	// Links out of the token's reach are listed as such, their targets
	// unsaid (reading them is refused too).
	out, err := c.fs.List(r.Context(), p, recursive)
	if err != nil {
		return err
	}
	if out == nil {
		out = []backend.FileInfo{} // an empty directory is [], not null
	}
	return writeJSON(w, out)
}

// maxListPage bounds the entries of one page of a listing.
const maxListPage = 10000

// ctxReader stops a long read (a checksum of a large file) when the
// request is abandoned.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (s *Server) checksum(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Read)
	if err != nil {
		return err
	}
	algo := r.URL.Query().Get("algo")
	h, err := backend.NewHash(algo)
	if err != nil {
		return err
	}
	f, err := c.fs.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", backend.ErrInvalid, p)
	}
	// offset and length ask for the checksum of a range (a multi-source
	// download checking which replica sent what).
	var src io.Reader = f
	if q := r.URL.Query(); q.Has("offset") || q.Has("length") {
		off, err1 := parseUint(q.Get("offset"))
		n, err2 := parseUint(q.Get("length"))
		if err1 != nil || err2 != nil || off > fi.Size() || n > fi.Size()-off {
			return fmt.Errorf("%w: checksum range offset=%q length=%q of a %d-byte file", backend.ErrInvalid, q.Get("offset"), q.Get("length"), fi.Size())
		}
		src = io.NewSectionReader(f, off, n)
	}
	if _, err := io.Copy(h, ctxReader{r.Context(), src}); err != nil {
		return fmt.Errorf("checksum %s: %w", p, err)
	}
	return writeJSON(w, map[string]string{"algo": algo, "value": hex.EncodeToString(h.Sum(nil))})
}

func (s *Server) truncate(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Write)
	if err != nil {
		return err
	}
	v := r.URL.Query().Get("size")
	size, err := parseUint(v)
	if err != nil {
		return fmt.Errorf("%w: size=%q (want a decimal size)", backend.ErrInvalid, v)
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	if err := s.fencedWrite(r.Context(), c.fs, p, fc, func(ctx context.Context) error { return c.fs.Truncate(ctx, p, size) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setModTime sets a file's modification time (?mtime=Unix nanoseconds,
// at most the year 2262): a copy that preserves modification times sets
// the source's on its temporary file before renaming it. A write, fenced
// like the others.
func (s *Server) setModTime(w http.ResponseWriter, r *http.Request, c *call) error {
	p, err := s.allowedPath(r, c, auth.Write)
	if err != nil {
		return err
	}
	v := r.URL.Query().Get("mtime")
	ns, err := parseUint(v)
	if err != nil {
		return fmt.Errorf("%w: mtime=%q (want Unix nanoseconds)", backend.ErrInvalid, v)
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	t := time.Unix(0, ns)
	if err := s.fencedWrite(r.Context(), c.fs, p, fc, func(ctx context.Context) error { return c.fs.SetModTime(ctx, p, t) }); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) sync(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.writeOp(w, r, c, c.fs.Sync)
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.writeOp(w, r, c, c.fs.Mkdir)
}

// renamePaths checks a rename's two body paths against the token: both
// inside the root and writable.
func (s *Server) renamePaths(c *call, rawFrom, rawTo string) (from, to string, err error) {
	if from, err = bodyPath("from", rawFrom); err != nil {
		return "", "", err
	}
	if to, err = bodyPath("to", rawTo); err != nil {
		return "", "", err
	}
	if err := c.Allows(auth.Write, from); err != nil {
		return "", "", err
	}
	if err := c.Allows(auth.Write, to); err != nil {
		return "", "", err
	}
	return from, to, nil
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Replace *bool  `json:"replace,omitempty"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	from, to, err := s.renamePaths(c, in.From, in.To)
	if err != nil {
		return err
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	if err := s.fencedRename(r.Context(), c.fs, from, to, fc, renameOp(r.Context(), c.fs, from, to, in.Replace, true)); err != nil {
		return err
	}
	// Renames put files in place (and may replace one): worth a line.
	s.log.Info("renamed", "remote", r.RemoteAddr, "sub", c.Sub, "from", from, "to", to)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// batchFrame is the JSON line before each file of a batch (or instead of
// it, when the file cannot be sent).
type batchFrame struct {
	Path     string `json:"path"`
	Size     *int64 `json:"size,omitempty"`
	Error    string `json:"error,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Checksum string `json:"checksum,omitempty"` // the line after a file's bytes, when asked for
}

func (s *Server) batch(w http.ResponseWriter, r *http.Request, c *call) error {
	var in struct {
		Paths []string `json:"paths"`
		// With a checksum algorithm, each file's bytes are followed by
		// a line with their checksum, computed as they are sent: the
		// receiver verifies without asking for it (one request per
		// file) or reading the file a second time.
		Checksum string `json:"checksum"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.Checksum != "" {
		if _, err := backend.NewHash(in.Checksum); err != nil {
			return err
		}
	}
	// A token's prefix covers itself, so this checks the scope alone; a
	// read-less token is refused whole, paths outside the prefix one by one.
	if err := c.Allows(auth.Read, c.Prefix); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-sluice-batch")
	w.WriteHeader(http.StatusOK)
	// When emulating, the whole response (frames too: they are small) is
	// one stream.
	out := io.Writer(w)
	if s.shape != nil {
		sw := s.shape.Writer(r.Context(), w)
		defer sw.Close()
		out = sw
	}
	for _, name := range in.Paths {
		if err := r.Context().Err(); err != nil {
			return nil
		}
		if err := s.batchFile(out, r, c, name, in.Checksum); err != nil {
			// The response has started: all that can be done for the
			// client is to end it, mid-frame, which it detects.
			s.log.Warn("batch response cut short", "remote", r.RemoteAddr, "path", name, "err", err)
			return nil
		}
	}
	return nil
}

// batchFile sends one frame. It returns an error only if the stream can
// no longer be framed (a write failed, or the file shrank while read);
// a file that cannot be sent gets an error frame.
func (s *Server) batchFile(w io.Writer, r *http.Request, c *call, name, algo string) error {
	frame := func(f batchFrame) error {
		js, err := json.Marshal(f)
		if err != nil {
			return err
		}
		_, err = w.Write(append(js, '\n'))
		return err
	}
	refuse := func(err error) error {
		status, kind := classify(err)
		if status == http.StatusForbidden {
			s.log.Warn("batch file refused", "remote", r.RemoteAddr, "path", name, "err", err)
		}
		return frame(batchFrame{Path: name, Error: c.fs.Rel(err).Error(), Kind: kind})
	}
	p, err := bodyPath("paths", name)
	if err != nil {
		return refuse(err)
	}
	if err := c.Allows(auth.Read, p); err != nil {
		return refuse(err)
	}
	f, err := c.fs.Open(p)
	if err != nil {
		return refuse(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return refuse(err)
	}
	if !fi.Mode().IsRegular() {
		return refuse(fmt.Errorf("%w: %s is not a regular file", backend.ErrInvalid, p))
	}
	size := fi.Size()
	if err := frame(batchFrame{Path: name, Size: &size}); err != nil {
		return err
	}
	if algo == "" {
		if _, err := io.CopyN(w, f, size); err != nil {
			return fmt.Errorf("sending %s: %w", p, err)
		}
		return nil
	}
	h, err := backend.NewHash(algo)
	if err != nil {
		return err // checked by the caller
	}
	buf := s.bufs.Get().(*[]byte)
	n, err := io.CopyBuffer(io.MultiWriter(w, h), io.LimitReader(f, size), *buf)
	s.bufs.Put(buf)
	if err == nil && n < size {
		err = io.ErrUnexpectedEOF // the file shrank while read
	}
	if err != nil {
		return fmt.Errorf("sending %s: %w", p, err)
	}
	// The checksum is of the bytes sent, so it cannot tell a file
	// rewritten (or appended to) while it was read: those bytes may mix
	// two versions, and would pass. Its size and modification time can:
	// the trailer then says so instead of vouching for them.
	if err := changedWhileRead(f, fi, p); err != nil {
		return frame(batchFrame{Path: name, Error: c.fs.Rel(err).Error(), Kind: kindChanged})
	}
	return frame(batchFrame{Path: name, Checksum: hex.EncodeToString(h.Sum(nil))})
}

// changedWhileRead reports whether the open file f (at p) is no longer as
// it was when before was taken: another size or modification time.
func changedWhileRead(f *os.File, before os.FileInfo, p string) error {
	after, err := f.Stat()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %w", backend.ErrChanged, p, err)
	case after.Size() != before.Size():
		return fmt.Errorf("%w: %s is now %d bytes, was %d when its reading began", backend.ErrChanged, p, after.Size(), before.Size())
	case !after.ModTime().Equal(before.ModTime()):
		return fmt.Errorf("%w: %s was modified at %s, while it was read", backend.ErrChanged, p, after.ModTime().UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func (s *Server) pull(w http.ResponseWriter, r *http.Request, c *call) error {
	var in sluice.PullRequest
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	dst, err := bodyPath("dst", in.Dst)
	if err != nil {
		return err
	}
	if err := c.Allows(auth.Write, dst); err != nil {
		return err
	}
	if in.Offset < 0 || in.Length < 0 || in.Offset > file.MaxSize-in.Length {
		return fmt.Errorf("%w: range %d+%d", backend.ErrInvalid, in.Offset, in.Length)
	}
	base, src, err := sluice.ParseURL(in.Source)
	if err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
	}
	if in.Token == "" {
		return fmt.Errorf("%w: no token for the source", backend.ErrInvalid)
	}
	if err := s.pulls.checkURL(base); err != nil {
		return err
	}
	fc, err := requestFence(r)
	if err != nil {
		return err
	}
	// The destination must exist (the engine allocates it before it
	// pulls): refuse a missing or unwritable one before asking the source
	// for anything.
	if _, err := c.fs.Stat(r.Context(), dst); err != nil {
		return err
	}
	from, err := sluice.New(base, in.Token, s.client)
	if err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
	}
	start := time.Now()
	var rep *pullReport
	if in.Progress {
		rep = &pullReport{w: w}
	}
	// The source is asked inside the fenced write, so a stale fence is
	// refused before anything is fetched.
	err = s.fencedWrite(r.Context(), c.fs, dst, fc, func(ctx context.Context) error {
		// The range streams from the source's response body into the
		// file; the source's refusals arrive as backend sentinels (its
		// 401 as a permission error: it is not this agent refusing the
		// caller).
		rc, err := from.OpenRange(ctx, src, in.Offset, in.Length)
		if err != nil {
			return fmt.Errorf("pull from %s: %w", in.Source, err)
		}
		defer rc.Close()
		var data io.Reader = rc
		if s.shape != nil {
			// Emulating: the pulled bytes are a stream of this endpoint
			// too (the source paces its side of them as well).
			sr := s.shape.Reader(ctx, rc)
			defer sr.Close()
			data = sr
		}
		if rep != nil {
			rep.r = data
			data = rep
		}
		if err := c.fs.WriteAtExisting(ctx, dst, in.Offset, fencedReader{ctx, data}, in.Length); err != nil {
			return fmt.Errorf("pull from %s to %s: %w", in.Source, dst, err)
		}
		return nil
	})
	if err != nil && (rep == nil || !rep.started) {
		return err
	}
	if err != nil {
		// The answer has begun: the error is its last line.
		s.log.Warn("pull failed", "remote", r.RemoteAddr, "sub", c.Sub, "source", in.Source, "dst", dst,
			"offset", in.Offset, "bytes", in.Length, "written", rep.reported, "err", err)
		_, kind := classify(err)
		rep.line(sluice.PullProgressLine{Written: rep.reported, Error: s.fs.Rel(err).Error(), Kind: kind})
		return nil
	}
	s.log.Info("pulled", "remote", r.RemoteAddr, "sub", c.Sub, "source", in.Source, "dst", dst,
		"offset", in.Offset, "bytes", in.Length, slog.Duration("took", time.Since(start)))
	if rep != nil && rep.started {
		rep.line(sluice.PullProgressLine{Written: in.Length, Done: true})
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pullReportEvery is how many bytes a pull writes between two lines of
// its progress report: a line per MiB is a few hundred bytes a second
// per stream, and lets the caller measure a window of a second or two
// to a few percent.
const pullReportEvery = 1 << 20

// pullReport is the reader a reported pull writes from: it counts the
// bytes the destination has taken and reports them every
// pullReportEvery. The file is written by a read-then-write loop
// (io.CopyBuffer into the file), so when Read is called again every byte
// handed out before has been written: what a line reports is in the
// file.
type pullReport struct {
	r        io.Reader
	w        http.ResponseWriter
	handed   int64 // bytes handed to the writer
	reported int64 // bytes in the last line sent
	started  bool  // the answer (200, a report) has begun
}

func (p *pullReport) Read(b []byte) (int, error) {
	if p.handed-p.reported >= pullReportEvery {
		p.line(sluice.PullProgressLine{Written: p.handed})
	}
	// A read never runs past the next line's mark: the copy's buffer
	// (and a source that hands out several MiB at once) would otherwise
	// let a whole file pass between two lines.
	if left := pullReportEvery - (p.handed - p.reported); int64(len(b)) > left {
		b = b[:left]
	}
	n, err := p.r.Read(b)
	p.handed += int64(n)
	return n, err
}

// line sends one line of the report, beginning the answer if needed. A
// caller that has gone away is not an error here: the write loop sees its
// context canceled.
func (p *pullReport) line(l sluice.PullProgressLine) {
	if !p.started {
		p.started = true
		p.w.Header().Set("Content-Type", sluice.PullProgressType)
		p.w.WriteHeader(http.StatusOK)
	}
	js, _ := json.Marshal(l)
	p.w.Write(append(js, '\n'))
	http.NewResponseController(p.w).Flush()
	p.reported = l.Written
}

func (s *Server) info(w http.ResponseWriter, r *http.Request, c *call) error {
	return writeJSON(w, map[string]string{"name": s.name, "version": Version, "instance": s.instance})
}
