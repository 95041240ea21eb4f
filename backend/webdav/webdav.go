// Package webdav is the backend of HTTP and WebDAV storage servers
// (davs://, https://, dav://, http://): the WLCG storage elements that
// speak HTTP (XRootD's XrdHttp, dCache, EOS, StoRM) and plain WebDAV
// servers (nginx with its dav modules, Apache mod_dav).
//
// Metadata goes by PROPFIND (Depth 0 for Stat, 1 for List, a walk for
// a recursive listing), reads by GET with a Range, writes by one PUT of
// the whole file: the backend is a backend.WholeWriter, since HTTP has no
// standard way to write a range into a file. Checksums come from the
// server's Digest header (RFC 3230's Want-Digest) where it gives the
// algorithm, else the file is read and summed here. Third-party copies
// are WebDAV COPY requests with a Source (pull) or Destination (push)
// header, as WLCG's HTTP-TPC specifies them (CopyFileFrom).
//
// The PROPFIND XML is written and read here with encoding/xml: it is a
// few lines, and the WebDAV client libraries at hand (gowebdav) take no
// context.Context, follow their own error types and paths, and would add
// a dependency for what the backend contract needs of them.
package webdav

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// Options configure a Backend.
type Options struct {
	// Client makes the requests (nil: a client of its own, with the
	// system's trusted authorities). Its redirects are not followed:
	// the backend acts on a redirect's status itself.
	Client *http.Client
	// Token, if not nil, gives the bearer token presented on every
	// request (Authorization: Bearer).
	Token backend.TokenSource
	// Username and Password, if set, log in by HTTP basic
	// authentication: over TLS only, unless InsecureBasicAuth (tests)
	// lets the password go in the clear.
	Username, Password string
	InsecureBasicAuth  bool
	// Push has third-party copies onto this backend pushed by the
	// source's server (a COPY with a Destination header sent to the
	// source) instead of pulled by this one's (Source header): for a
	// destination that cannot reach the source.
	Push bool
	// MarkerTimeout is how long a third-party copy may go without a
	// line of its answer (a performance marker) before it is given up
	// as stalled (0: 2 minutes; servers send one every few seconds).
	MarkerTimeout time.Duration
}

// Backend is an HTTP/WebDAV server, rooted at a path of it.
type Backend struct {
	// base is scheme://host[:port], prefix the root's path on the
	// server (unescaped, "" or starting with "/", no trailing slash).
	base, prefix string
	c            *http.Client
	o            Options
}

// Make sure Backend implements what it says it does.
var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.WholeWriter = (*Backend)(nil)
)

// New returns a backend on the server and path of base, an http://,
// https://, dav:// or davs:// URL (dav and davs are http and https).
// Backend paths are below base's path.
func New(base string, o Options) (*Backend, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("webdav: %w: %v", backend.ErrInvalid, err)
	}
	switch u.Scheme {
	case "dav":
		u.Scheme = "http"
	case "davs":
		u.Scheme = "https"
	case "http", "https":
	default:
		return nil, fmt.Errorf("webdav: %s: %w: scheme %q (want http, https, dav or davs)", base, backend.ErrInvalid, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("webdav: %s: %w: no host", base, backend.ErrInvalid)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("webdav: %s: %w: a user, query or fragment in the URL (give credentials apart)", base, backend.ErrInvalid)
	}
	if (o.Username == "") != (o.Password == "") {
		return nil, fmt.Errorf("webdav: %s: %w: a user name without a password, or a password without a user name", base, backend.ErrInvalid)
	}
	if o.Username != "" && o.Token != nil {
		return nil, fmt.Errorf("webdav: %s: %w: both a login and a token", base, backend.ErrInvalid)
	}
	if o.Username != "" && u.Scheme != "https" && !o.InsecureBasicAuth {
		return nil, fmt.Errorf("webdav: %s: %w: a password would go in the clear over plain HTTP (use https:// or davs://)", base, backend.ErrInvalid)
	}
	c := http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if o.Client != nil {
		c = *o.Client
	}
	// A redirect is a status the backend reads (nginx sends one for a
	// directory named without its slash), and following one would
	// replay a PUT's body or a MOVE elsewhere.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	prefix := strings.TrimSuffix(path.Clean("/"+u.Path), "/")
	return &Backend{base: u.Scheme + "://" + u.Host, prefix: prefix, c: &c, o: o}, nil
}

// WritesWhole marks the backend a backend.WholeWriter: a file is one PUT.
func (*Backend) WritesWhole() {}

// Close releases the backend's idle connections.
func (b *Backend) Close() error {
	b.c.CloseIdleConnections()
	return nil
}

// clean is the canonical form of a backend path: ".." cannot leave the
// root, since it is resolved before the root's path is put in front.
func clean(p string) string { return path.Clean("/" + p) }

// url is the URL of backend path p (a directory's with a trailing slash
// if dir), each segment escaped: '?', '#', '%' and the rest are name,
// never query or escape.
func (b *Backend) url(p string, dir bool) string {
	full := b.prefix + clean(p)
	segs := strings.Split(strings.TrimPrefix(full, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	u := b.base + "/" + strings.Join(segs, "/")
	if dir && !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u
}

// URL is the URL of backend path p, as a third party reaches it.
func (b *Backend) URL(p string) string { return b.url(p, false) }

// authorization is the Authorization header's value for the backend's
// credential ("" for none).
func (b *Backend) authorization() (string, error) {
	switch {
	case b.o.Token != nil:
		tok, err := b.o.Token()
		if err != nil {
			return "", fmt.Errorf("webdav: token: %w", err)
		}
		return "Bearer " + tok, nil
	case b.o.Username != "":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(b.o.Username+":"+b.o.Password)), nil
	}
	return "", nil
}

// do sends one request. body, if not nil, is n bytes long.
func (b *Backend) do(ctx context.Context, method, u string, hdr http.Header, body io.Reader, n int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("webdav: %s %s: %w: %v", method, u, backend.ErrInvalid, err)
	}
	if body != nil {
		req.ContentLength = n
		if n == 0 {
			req.Body = http.NoBody
		}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	auth, err := b.authorization()
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webdav: %s %s: %w", method, u, context.Cause(ctx))
		}
		return nil, fmt.Errorf("webdav: %s %s: %w", method, u, err)
	}
	return resp, nil
}

// drain reads a little of what is left of resp's body, so that its
// connection can serve the next request, and closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}

// statusError is the error of a request the server refused, classified
// by its status as a backend sentinel, with what the server said.
func statusError(what string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	drain(resp)
	text := strings.Join(strings.Fields(string(msg)), " ")
	if strings.HasPrefix(text, "<") {
		text = "" // an HTML page says no more than the status
	}
	var kind error
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone:
		kind = backend.ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		kind = backend.ErrPermission
	case http.StatusInsufficientStorage, http.StatusRequestEntityTooLarge:
		kind = backend.ErrNoSpace
	case http.StatusConflict:
		// RFC 4918: a missing parent collection (MKCOL, PUT, MOVE's
		// destination).
		kind = backend.ErrNotFound
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusLengthRequired,
		http.StatusPreconditionFailed, http.StatusRequestedRangeNotSatisfiable, http.StatusNotImplemented:
		kind = backend.ErrInvalid
	}
	err := fmt.Errorf("webdav: %s: %s", what, resp.Status)
	if text != "" {
		err = fmt.Errorf("%w: %s", err, text)
	}
	if kind != nil {
		return fmt.Errorf("%w (%w)", err, kind)
	}
	return err
}

// Stat describes one path, by PROPFIND Depth 0.
func (b *Backend) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	fis, err := b.propfind(ctx, p, "0")
	if err != nil {
		return backend.FileInfo{}, err
	}
	for _, fi := range fis {
		if fi.Path == clean(p) {
			return fi, nil
		}
	}
	return backend.FileInfo{}, fmt.Errorf("webdav: PROPFIND %s: the answer does not describe it", b.url(p, false))
}

// List returns the entries below directory p, by PROPFIND Depth 1 of it
// and, if recursive, of each directory below (Depth infinity is often
// refused, and would come back in one answer however large the tree).
func (b *Backend) List(ctx context.Context, p string, recursive bool) ([]backend.FileInfo, error) {
	var out []backend.FileInfo
	dirs := []string{clean(p)}
	for len(dirs) > 0 {
		d := dirs[0]
		dirs = dirs[1:]
		fis, err := b.propfind(ctx, d, "1")
		if err != nil {
			return nil, err
		}
		self := false
		for _, fi := range fis {
			if fi.Path == d {
				self = true
				if !fi.IsDir {
					return nil, fmt.Errorf("webdav: list %s: %w: not a directory", b.url(d, false), backend.ErrInvalid)
				}
				continue
			}
			if path.Dir(fi.Path) != d {
				continue // not a child (a server's odd href)
			}
			out = append(out, fi)
			if recursive && fi.IsDir {
				dirs = append(dirs, fi.Path)
			}
		}
		if !self {
			return nil, fmt.Errorf("webdav: PROPFIND %s: the answer does not describe the directory itself", b.url(d, true))
		}
	}
	return out, nil
}

// OpenRange reads n bytes at off (n < 0: to the end) by a GET with a
// Range. Only an answer whose Content-Range is the range asked for is
// read as it comes; a server that ignores Range (200, the whole file) is
// read from off by skipping what comes before, never taken for the range.
func (b *Backend) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	u := b.url(p, false)
	if off < 0 {
		return nil, fmt.Errorf("webdav: read %s at %d: %w: negative offset", u, off, backend.ErrInvalid)
	}
	if n <= 0 {
		// Nothing to read, but a missing file or a directory must
		// still fail; or a read to the end, whose range is asked for
		// with its end: XRootD (5.5) answers an open range
		// ("bytes=OFF-") with a Content-Range that ends at -1.
		fi, err := b.Stat(ctx, p)
		if err != nil {
			return nil, err
		}
		if fi.IsDir {
			return nil, fmt.Errorf("webdav: read %s: %w: a directory", u, backend.ErrInvalid)
		}
		if off > fi.Size {
			return nil, fmt.Errorf("webdav: read %s at %d: %w: past the end of its %d bytes", u, off, backend.ErrInvalid, fi.Size)
		}
		if n < 0 {
			n = fi.Size - off
		}
		if n == 0 {
			return io.NopCloser(strings.NewReader("")), nil
		}
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	resp, err := b.do(ctx, http.MethodGet, u, http.Header{"Range": {rng}}, nil, 0)
	if err != nil {
		return nil, err
	}
	what := "GET " + u + " " + rng
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, end, _, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != off || (n > 0 && end > off+n-1) {
			drain(resp)
			return nil, fmt.Errorf("webdav: %s: answered with Content-Range %q: %w", what, resp.Header.Get("Content-Range"), errOr(err, errors.New("not the range asked for")))
		}
		return &exactBody{rc: resp.Body, left: end - start + 1, what: what}, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// Nothing at off: fine at the file's end (an empty file, or
		// a read to the end from the end), a bad request past it.
		_, _, size, perr := parseContentRange(resp.Header.Get("Content-Range"))
		drain(resp)
		if perr != nil || size < 0 {
			fi, err := b.Stat(ctx, p)
			if err != nil {
				return nil, err
			}
			if fi.IsDir {
				return nil, fmt.Errorf("webdav: read %s: %w: a directory", u, backend.ErrInvalid)
			}
			size = fi.Size
		}
		if off == size {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, fmt.Errorf("webdav: %s: %w: past the end of its %d bytes", what, backend.ErrInvalid, size)
	case http.StatusOK:
		// The whole file (Range ignored, or a server that answers a
		// directory with a listing page): only a file Stat confirms
		// is read, from off.
		fi, err := b.Stat(ctx, p)
		if err != nil {
			drain(resp)
			return nil, err
		}
		if fi.IsDir {
			drain(resp)
			return nil, fmt.Errorf("webdav: read %s: %w: a directory", u, backend.ErrInvalid)
		}
		if resp.ContentLength >= 0 && resp.ContentLength != fi.Size {
			drain(resp)
			return nil, fmt.Errorf("webdav: %s: %d bytes answered for a file of %d: changed while read?", what, resp.ContentLength, fi.Size)
		}
		if off > fi.Size {
			drain(resp)
			return nil, fmt.Errorf("webdav: %s: %w: past the end of its %d bytes", what, backend.ErrInvalid, fi.Size)
		}
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("webdav: %s (Range ignored, skipping to %d): %w", what, off, err)
		}
		left := fi.Size - off
		if n > 0 {
			left = min(left, n)
		}
		return &exactBody{rc: resp.Body, left: left, what: what}, nil
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		drain(resp)
		if fi, err := b.Stat(ctx, p); err == nil && fi.IsDir {
			return nil, fmt.Errorf("webdav: read %s: %w: a directory", u, backend.ErrInvalid)
		}
		return nil, fmt.Errorf("webdav: %s: redirected to %s, which this backend does not follow", what, resp.Header.Get("Location"))
	}
	return nil, statusError(what, resp)
}

func errOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// parseContentRange reads "bytes START-END/SIZE" (SIZE "*": -1) or
// "bytes */SIZE" (START and END -1).
func parseContentRange(s string) (start, end, size int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, bad
	}
	rng, sz, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, bad
	}
	size = -1
	if sz != "*" {
		if size, err = strconv.ParseInt(sz, 10, 64); err != nil {
			return 0, 0, 0, bad
		}
	}
	if rng == "*" {
		return -1, -1, size, nil
	}
	a, z, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, bad
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, 0, bad
	}
	if end, err = strconv.ParseInt(z, 10, 64); err != nil || end < start {
		return 0, 0, 0, bad
	}
	return start, end, size, nil
}

// exactBody is a response body that must hold exactly left more bytes:
// one that ends early is an error, not a short range.
type exactBody struct {
	rc   io.ReadCloser
	left int64
	what string
}

func (e *exactBody) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.rc.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, fmt.Errorf("webdav: %s: the answer ended %d bytes early: %w", e.what, e.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF || (err == nil && e.left == 0) {
		return n, nil
	}
	return n, err
}

func (e *exactBody) Close() error { return e.rc.Close() }

// exactReader yields exactly n bytes of r: fewer is an error (and the
// PUT carrying them fails), more are not read.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF && e.left > 0 {
		return n, fmt.Errorf("%d bytes short: %w", e.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// WriteAt writes a whole file: one PUT of n bytes read from r, which
// replaces the file. The server makes missing parent directories (nginx
// with create_full_put_path, XRootD); for one that answers 409 Conflict
// instead, they are made and the PUT sent again if r can be rewound. Any
// other range is refused with backend.ErrInvalid (backend.WholeWriter).
func (b *Backend) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	u := b.url(p, false)
	if off < 0 || n < 0 {
		return fmt.Errorf("webdav: write %s at %d, %d bytes: %w: negative offset or size", u, off, n, backend.ErrInvalid)
	}
	if off != 0 {
		return fmt.Errorf("webdav: write %s at %d: %w: an HTTP server takes whole files only (one PUT from offset 0)", u, off, backend.ErrInvalid)
	}
	if clean(p) == "/" {
		return fmt.Errorf("webdav: write %s: %w: the root is a directory", u, backend.ErrInvalid)
	}
	seeker, _ := r.(io.Seeker)
	var start int64 = -1
	if seeker != nil {
		if pos, err := seeker.Seek(0, io.SeekCurrent); err == nil {
			start = pos
		}
	}
	for attempt := 0; ; attempt++ {
		resp, err := b.do(ctx, http.MethodPut, u, nil, &exactReader{r: r, left: n}, n)
		if err != nil {
			return err
		}
		switch {
		case resp.StatusCode/100 == 2:
			// 201 or 204: the server has the file (Sync has
			// nothing more to ask of it).
			drain(resp)
			return nil
		case resp.StatusCode == http.StatusConflict && attempt == 0 && start >= 0:
			drain(resp)
			if err := b.Mkdir(ctx, path.Dir(clean(p))); err != nil {
				return fmt.Errorf("webdav: PUT %s: the parent directory: %w", u, err)
			}
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return fmt.Errorf("webdav: PUT %s again: %w", u, err)
			}
			continue
		}
		return b.onDir(ctx, p, statusError("PUT "+u, resp))
	}
}

// onDir is err, or an error wrapping backend.ErrInvalid if p is a
// directory or a file stands where one of its parent directories should:
// servers answer a write there in many ways (405, 409, a 500), none of
// which says it is permanent.
func (b *Backend) onDir(ctx context.Context, p string, err error) error {
	if errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrNoSpace) {
		return err
	}
	p = clean(p)
	if fi, serr := b.Stat(ctx, p); serr == nil && fi.IsDir {
		return fmt.Errorf("%w (%w: %s is a directory)", err, backend.ErrInvalid, p)
	} else if serr == nil || !errors.Is(serr, backend.ErrNotFound) {
		return err
	}
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		fi, serr := b.Stat(ctx, d)
		switch {
		case serr == nil && !fi.IsDir:
			return fmt.Errorf("%w (%w: %s is a file)", err, backend.ErrInvalid, d)
		case serr == nil || !errors.Is(serr, backend.ErrNotFound):
			return err
		}
	}
	return err
}

// Truncate creates an empty file (an empty PUT), or empties one: a
// backend.WholeWriter allocates nothing, so any other size is refused
// with backend.ErrInvalid.
func (b *Backend) Truncate(ctx context.Context, p string, size int64) error {
	if size != 0 {
		return fmt.Errorf("webdav: truncate %s to %d: %w: an HTTP server takes whole files only (size 0 alone)", b.url(p, false), size, backend.ErrInvalid)
	}
	return b.WriteAt(ctx, p, 0, strings.NewReader(""), 0)
}

// Sync does nothing: a PUT is answered once the server holds the file,
// and HTTP has no further request to make it durable.
func (b *Backend) Sync(ctx context.Context, p string) error { return nil }

// Rename moves from to to, replacing to (MOVE, Overwrite: T). A
// directory is moved under its collection URLs (with a slash).
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	if clean(from) == "/" || clean(to) == "/" {
		return fmt.Errorf("webdav: rename %s to %s: %w: the root", b.url(from, false), b.url(to, false), backend.ErrInvalid)
	}
	dir := false
	for {
		u := b.url(from, dir)
		resp, err := b.do(ctx, "MOVE", u, http.Header{"Destination": {b.url(to, dir)}, "Overwrite": {"T"}}, nil, 0)
		if err != nil {
			return err
		}
		if resp.StatusCode/100 == 2 {
			drain(resp)
			return nil
		}
		what := "MOVE " + u + " to " + b.url(to, dir)
		if dir || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized {
			return statusError(what, resp)
		}
		// nginx wants a directory's slash on both names (409 without);
		// a 409 is also a destination whose parent is missing.
		serr := statusError(what, resp)
		fi, err := b.Stat(ctx, from)
		if err != nil {
			return err
		}
		if !fi.IsDir {
			return serr
		}
		dir = true
	}
}

// Remove deletes a file, or a directory if it is empty (DELETE). WebDAV
// deletes a collection with all it holds, so a directory is listed
// first and refused if anything is in it; something put there between
// the listing and the DELETE would go with it.
func (b *Backend) Remove(ctx context.Context, p string) error {
	if clean(p) == "/" {
		return fmt.Errorf("webdav: remove %s: %w: the root", b.url(p, false), backend.ErrInvalid)
	}
	fi, err := b.Stat(ctx, p)
	if err != nil {
		return err
	}
	if fi.IsDir {
		ents, err := b.List(ctx, p, false)
		if err != nil {
			return err
		}
		if len(ents) > 0 {
			return fmt.Errorf("webdav: remove %s: %w: a directory that is not empty (%d entries)", b.url(p, true), backend.ErrExist, len(ents))
		}
	}
	u := b.url(p, fi.IsDir)
	resp, err := b.do(ctx, http.MethodDelete, u, nil, nil, 0)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 == 2 {
		drain(resp)
		return nil
	}
	return statusError("DELETE "+u, resp)
}

// Mkdir creates directory p and its missing parents: a MKCOL of p, and
// on 409 Conflict (its parent missing) of the parent first.
func (b *Backend) Mkdir(ctx context.Context, p string) error {
	p = clean(p)
	if p == "/" {
		fi, err := b.Stat(ctx, p)
		if err == nil && !fi.IsDir {
			err = fmt.Errorf("webdav: %s: %w: the root is not a directory", b.url(p, true), backend.ErrInvalid)
		}
		return err
	}
	u := b.url(p, true)
	for attempt := 0; ; attempt++ {
		resp, err := b.do(ctx, "MKCOL", u, nil, nil, 0)
		if err != nil {
			return err
		}
		switch {
		case resp.StatusCode/100 == 2:
			drain(resp)
			return nil
		case resp.StatusCode == http.StatusConflict && attempt == 0:
			drain(resp)
			if err := b.Mkdir(ctx, path.Dir(p)); err != nil {
				return err
			}
			continue
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return statusError("MKCOL "+u, resp)
		}
		// 405 is RFC 4918's answer for something already there; other
		// servers say it otherwise. What is there decides.
		serr := statusError("MKCOL "+u, resp)
		fi, err := b.Stat(ctx, p)
		switch {
		case err == nil && fi.IsDir:
			return nil
		case err == nil:
			return fmt.Errorf("webdav: mkdir %s: %w (%w): a file is there", u, backend.ErrExist, backend.ErrInvalid)
		case errors.Is(err, backend.ErrNotFound):
			return b.onDir(ctx, p, serr)
		}
		return err
	}
}

// digestNames are the RFC 3230 names (IANA's HTTP Digest registry) of
// the backend's algorithms, as Want-Digest asks for them.
var digestNames = map[string]string{"adler32": "adler32", "md5": "md5", "sha256": "sha-256", "crc32c": "crc32c"}

// Checksum asks the server for the file's checksum (a HEAD with
// Want-Digest) and, if its Digest does not give the algorithm, reads the
// file and computes it here.
func (b *Backend) Checksum(ctx context.Context, p, algo string) (string, error) {
	if _, err := backend.NewHash(algo); err != nil {
		return "", fmt.Errorf("webdav: checksum of %s: %w", b.url(p, false), err)
	}
	if sum, err := b.serverDigest(ctx, p, algo); err != nil || sum != "" {
		return sum, err
	}
	rc, err := b.OpenRange(ctx, p, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	sum, err := backend.Sum(rc, algo)
	if err != nil {
		return "", fmt.Errorf("webdav: checksum of %s: %w", b.url(p, false), err)
	}
	return sum, nil
}

// serverDigest is the server's checksum of p by algo, or "" if it gave
// none (it cannot compute it, p is a directory, or it refused the HEAD
// in a way the read that follows will explain).
func (b *Backend) serverDigest(ctx context.Context, p, algo string) (string, error) {
	u := b.url(p, false)
	resp, err := b.do(ctx, http.MethodHead, u, http.Header{"Want-Digest": {digestNames[algo]}}, nil, 0)
	if err != nil {
		return "", err
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", statusError("HEAD "+u, resp)
	case resp.StatusCode != http.StatusOK:
		return "", nil
	}
	for _, h := range resp.Header.Values("Digest") {
		for _, d := range strings.Split(h, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(d), "=")
			if !ok || !strings.EqualFold(name, digestNames[algo]) {
				continue
			}
			sum, err := decodeDigest(algo, strings.TrimSpace(val))
			if err != nil {
				return "", fmt.Errorf("webdav: HEAD %s: Digest %s: %w", u, d, err)
			}
			return sum, nil
		}
	}
	return "", nil
}

// digestSizes are the algorithms' digest sizes in bytes.
var digestSizes = map[string]int{"adler32": adler32.Size, "md5": md5.Size, "sha256": sha256.Size, "crc32c": crc32.Size}

// decodeDigest turns a Digest value into lowercase hex. RFC 3230 writes
// md5 and sha-256 in base64 and adler32 in hex; servers differ for
// crc32c (dCache: hex, others base64) and some send md5 in hex: the
// length tells which.
func decodeDigest(algo, val string) (string, error) {
	size := digestSizes[algo]
	if len(val) == 2*size {
		if raw, err := hex.DecodeString(val); err == nil {
			return hex.EncodeToString(raw), nil
		}
	}
	if raw, err := base64.StdEncoding.DecodeString(val); err == nil && len(raw) == size {
		return hex.EncodeToString(raw), nil
	}
	return "", fmt.Errorf("not %d bytes in hex or base64", size)
}
