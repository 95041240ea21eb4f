// Package sluice is the backend for files served by a sluice agent: a
// client of the agent's HTTP protocol (docs/agent-protocol.md) that
// implements backend.Backend, plus the agent's extras, third-party pull and
// batched reads of small files. It owns the client side of the wire: URL
// forms (sluice://host:port/path), path encoding, and turning the agent's
// error kinds back into backend's sentinel errors, so errors.Is(err,
// backend.ErrNotFound) means the same across the network as on a local
// disk. Network failures and 5xx answers stay unclassified: retrying them
// may succeed.
package sluice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-dtn/sluice/backend"
)

// ErrUnauthorized is the agent refusing the token itself (missing,
// malformed, forged, expired or for another agent: HTTP 401), as opposed
// to a valid token that does not cover the request (backend.ErrPermission,
// 403). It wraps backend.ErrPermission, so it is permanent too: retrying
// with the same token cannot help.
var ErrUnauthorized = fmt.Errorf("unauthorized: %w", backend.ErrPermission)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// maxErrorMessage bounds how much of an agent's error message is kept.
const maxErrorMessage = 512

// AgentHeader is set by agents on every response (to the protocol
// version). A response without it is not from an agent: its body is
// never used, as data or as an error message, so that an agent pulling
// from a URL a caller named cannot be made to fetch from other services.
const AgentHeader = "Sluice-Agent"

// ErrNotAgent is a response from something that is not a sluice agent
// (no AgentHeader), or a redirect, which agents never send. It wraps
// backend.ErrInvalid: permanent, the URL names the wrong thing.
var ErrNotAgent = fmt.Errorf("%w: not a sluice agent", backend.ErrInvalid)

// Backend talks to one agent with one token (or the tokens of a
// TokenSource).
type Backend struct {
	base   string // scheme://host:port, no trailing slash
	token  string
	tokens TokenSource // if set, asked for the token of each request
	client *http.Client
	// Idle is how long a range read may wait for the agent's answer or
	// its next bytes before it fails (a frozen agent, a black-holed
	// path): the engine then retries, or another replica takes the
	// range over. DefaultIdle unless set.
	Idle time.Duration
}

// DefaultIdle is Backend.Idle's default: long enough for any live agent,
// however slow its link, to send something.
const DefaultIdle = 60 * time.Second

// FenceHeader carries the request's fence (backend.WithFence) to the
// agent, which refuses writes, renames and removals of a file under a
// fence older than the newest it has seen there (409, kind "fenced").
const FenceHeader = "Sluice-Fence"

// New returns a backend for the agent at baseURL (http://host:port or
// https://host:port) that presents token. A nil client means a plain
// http.Client of its own; pass one to set TLS roots or timeouts.
func New(baseURL, token string, client *http.Client) (*Backend, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("sluice backend: agent URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("sluice backend: agent URL %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("sluice backend: agent URL %q has no host", baseURL)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("sluice backend: agent URL %q: want only scheme://host:port", baseURL)
	}
	if token == "" {
		return nil, errors.New("sluice backend: no token")
	}
	if client == nil {
		client = &http.Client{Transport: NewTransport()}
	}
	// Agents never redirect; following one would send the token, and
	// a pull's bytes, wherever a source pointed. The copy shares the
	// caller's transport (and its connections).
	c := *client
	c.CheckRedirect = noRedirect
	return &Backend{base: u.Scheme + "://" + u.Host, token: token, client: &c}, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// TokenSource gives the token to present now. A copy that outlives one
// token (minted for an hour, say) keeps going with the next: the source
// mints a fresh one before the last expires. It must be safe for
// concurrent use.
type TokenSource = backend.TokenSource

// NewWithTokens is New with a token asked of tokens for each request.
func NewWithTokens(baseURL string, tokens TokenSource, client *http.Client) (*Backend, error) {
	tok, err := tokens()
	if err != nil {
		return nil, fmt.Errorf("sluice backend: token: %w", err)
	}
	b, err := New(baseURL, tok, client)
	if err != nil {
		return nil, err
	}
	b.tokens = tokens
	return b, nil
}

// bearer is the token for the next request.
func (b *Backend) bearer() (string, error) {
	if b.tokens == nil {
		return b.token, nil
	}
	tok, err := b.tokens()
	if err != nil {
		return "", fmt.Errorf("sluice backend: token: %w", err)
	}
	return tok, nil
}

// NewTransport is an HTTP transport tuned for bulk data: large socket
// buffers (the default 4 KiB write buffer turns a 16 MiB range into four
// thousand small writes), many idle connections per agent (one per
// partial transfer), and no compression (science data does not compress,
// and Range must address the stored bytes).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.WriteBufferSize = 1 << 20
	t.ReadBufferSize = 1 << 20
	t.MaxIdleConnsPerHost = 64
	t.DisableCompression = true
	return t
}

// ParseURL splits a sluice URL into the agent's base URL and the path on
// it: sluice://host:port/a/b gives http://host:port and /a/b, sluices://
// gives https://. The path is decoded (it is a file name, not a URL).
func ParseURL(s string) (base, path string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("sluice URL: %w", err)
	}
	var scheme string
	switch u.Scheme {
	case "sluice":
		scheme = "http"
	case "sluices":
		scheme = "https"
	default:
		return "", "", fmt.Errorf("sluice URL %q: scheme must be sluice or sluices", s)
	}
	if u.Opaque != "" || u.Host == "" {
		return "", "", fmt.Errorf("sluice URL %q: want %s://host:port/path", s, u.Scheme)
	}
	if u.Port() == "" {
		return "", "", fmt.Errorf("sluice URL %q: no port (agents have no default port)", s)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", "", fmt.Errorf("sluice URL %q: user, query and fragment are not allowed (percent-encode ? and # in names)", s)
	}
	path = u.Path
	if path == "" {
		path = "/"
	}
	return scheme + "://" + u.Host, path, nil
}

// escape encodes a slash path for a URL, one element at a time, so names
// holding ?, # or % reach the agent intact. Empty elements are dropped
// (a//b is a/b); ".." is sent as is and the agent refuses it.
func escape(p string) string {
	var b strings.Builder
	for _, el := range strings.Split(p, "/") {
		if el == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(el))
	}
	return b.String()
}

// FileURL is the URL of the file at slash path p of the agent at base
// (sluice://host:port or sluices://host:port), its names percent-encoded
// as ParseURL and Pull expect: base+p would cut a name with ? or # short.
func FileURL(base, p string) string {
	return strings.TrimSuffix(base, "/") + "/" + escape(p)
}

// EncodeURL percent-encodes the path of scheme://host/path, whose path
// is as the file is named (what the service stores): the URL that names
// it, to show or to submit again. Anything without "://" is returned as
// is.
func EncodeURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	host, p, _ := strings.Cut(rest, "/")
	return FileURL(scheme+"://"+host, p)
}

// StatusError is an error response from the agent. It unwraps to the
// backend sentinel error for its kind (ErrUnauthorized for 401), or to
// nothing for internal errors, which are not permanent.
type StatusError struct {
	Status  int    // HTTP status; 0 for one file's failure within a batch
	Kind    string // the agent's error kind (not_found, permission, ...)
	Message string
}

func (e *StatusError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("%s (%s)", e.Message, e.Kind)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Kind)
}

// Unwrap returns the sentinel error for the kind.
func (e *StatusError) Unwrap() error { return kindError(e.Kind) }

func kindError(kind string) error {
	switch kind {
	case "not_found":
		return backend.ErrNotFound
	case "permission":
		return backend.ErrPermission
	case "unauthorized":
		return ErrUnauthorized
	case "no_space":
		return backend.ErrNoSpace
	case "invalid":
		return backend.ErrInvalid
	case "exist":
		return backend.ErrExist
	case "fenced":
		return backend.ErrFenced
	case "changed":
		return backend.ErrChanged
	}
	return nil
}

// statusKind guesses the kind from the status when the body does not say
// (a proxy's error page, say).
func statusKind(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusForbidden:
		return "permission"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusInsufficientStorage:
		return "no_space"
	case http.StatusConflict:
		return "exist"
	}
	if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
		return "invalid"
	}
	return "internal"
}

// readError turns a non-2xx response from an agent into a *StatusError.
// Only an agent's JSON error document is read, and only a short, printable
// part of its message kept: the text ends up in logs and in other
// agents' answers.
func readError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	se := &StatusError{Status: resp.StatusCode}
	if json.Unmarshal(body, &e) == nil && e.Kind != "" {
		se.Kind, se.Message = e.Kind, sanitize(e.Error)
	} else {
		se.Kind = statusKind(resp.StatusCode)
		se.Message = http.StatusText(resp.StatusCode) + " (not an agent's error document)"
	}
	if kindError(se.Kind) == nil && se.Kind != "internal" {
		// A kind this client does not know: judge by the status.
		se.Kind = statusKind(resp.StatusCode)
	}
	if se.Message == "" {
		se.Message = http.StatusText(resp.StatusCode)
	}
	return se
}

// sanitize makes text from another machine safe to log and pass on: at
// most maxErrorMessage bytes, control characters and invalid UTF-8
// replaced.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxErrorMessage {
			b.WriteString("...")
			break
		}
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// notAgent is the error for a response without AgentHeader; its body is
// not read. What would be transient from an agent stays so (a proxy's 502
// or 429 in front of one); anything else is permanent.
func notAgent(resp *http.Response) error {
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("answered with a redirect (%d); agents do not follow redirects (%w)", resp.StatusCode, ErrNotAgent)
	}
	if resp.StatusCode >= 400 && statusKind(resp.StatusCode) == "internal" {
		return &StatusError{Status: resp.StatusCode, Kind: "internal",
			Message: fmt.Sprintf("%s, from something that is not a sluice agent (no %s header)", http.StatusText(resp.StatusCode), AgentHeader)}
	}
	return fmt.Errorf("answered %d without the %s header (%w)", resp.StatusCode, AgentHeader, ErrNotAgent)
}

// do sends a request to the agent and returns the response if it is 2xx;
// otherwise it closes it and returns the agent's error. A non-nil body is
// sent with Content-Length size.
func (b *Backend) do(ctx context.Context, method, endpoint string, q url.Values, body io.Reader, size int64, hdr http.Header) (*http.Response, error) {
	u := b.base + endpoint
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	tok, err := b.bearer()
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if f, ok := backend.FenceFrom(ctx); ok {
		req.Header.Set(FenceHeader, f.String())
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.Header.Get(AgentHeader) == "" || (resp.StatusCode >= 300 && resp.StatusCode < 400) {
		resp.Body.Close()
		return nil, notAgent(resp)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// call sends a request whose answer is empty (204) or JSON, decoded into out.
func (b *Backend) call(ctx context.Context, method, endpoint string, q url.Values, in, out any) error {
	var body io.Reader
	var size int64
	if in != nil {
		js, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, size = bytes.NewReader(js), int64(len(js))
	}
	hdr := http.Header{}
	if in != nil {
		hdr.Set("Content-Type", "application/json")
	}
	resp, err := b.do(ctx, method, endpoint, q, body, size, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the agent's answer: %w", err)
	}
	return nil
}

func wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sluice %s %s: %w", op, p, err)
}

// Stat implements backend.Backend.
func (b *Backend) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	var fi backend.FileInfo
	err := b.call(ctx, http.MethodGet, "/v1/stat/"+escape(p), nil, nil, &fi)
	return fi, wrap("stat", p, err)
}

// List implements backend.Backend.
func (b *Backend) List(ctx context.Context, p string, recursive bool) ([]backend.FileInfo, error) {
	var q url.Values
	if recursive {
		q = url.Values{"recursive": {"1"}}
	}
	var out []backend.FileInfo
	err := b.call(ctx, http.MethodGet, "/v1/list/"+escape(p), q, nil, &out)
	return out, wrap("list", p, err)
}

// ListPageResponse is the answer of GET /v1/list/PATH?limit=N: a page of
// the recursive listing.
type ListPageResponse struct {
	Entries []backend.FileInfo `json:"entries"`
	More    bool               `json:"more"`
}

// ListPage is a page of the recursive listing of directory p: at most
// limit entries after the one whose Path is after ("": the first), in
// the agent's walk order (file.WalkBefore); more says whether others
// follow.
func (b *Backend) ListPage(ctx context.Context, p, after string, limit int) ([]backend.FileInfo, bool, error) {
	q := url.Values{"recursive": {"1"}, "limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	var out ListPageResponse
	err := b.call(ctx, http.MethodGet, "/v1/list/"+escape(p), q, nil, &out)
	return out.Entries, out.More, wrap("list", p, err)
}

// body is a response body limited to what was asked for.
type body struct {
	io.Reader
	c io.Closer
}

func (r body) Close() error { return r.c.Close() }

// OpenRange implements backend.Backend. The body is streamed from the
// agent as it is read; a range that starts beyond the end of the file is
// ErrInvalid, one that runs past it yields what there is (like a file).
func (b *Backend) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, wrap("read", p, fmt.Errorf("%w: negative offset %d", backend.ErrInvalid, off))
	}
	if n == 0 {
		// HTTP has no empty range; check that the file is there.
		if _, err := b.Stat(ctx, p); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	hdr := http.Header{}
	switch {
	case n > 0 && off > (1<<63-1)-n:
		return nil, wrap("read", p, fmt.Errorf("%w: range %d+%d overflows", backend.ErrInvalid, off, n))
	case n > 0:
		hdr.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		hdr.Set("Range", fmt.Sprintf("bytes=%d-", off))
	}
	// A watchdog ends the request if the agent goes silent: no answer,
	// or no bytes for Idle. Nothing else would: a frozen agent keeps its
	// connections open, and the read would wait for ever.
	idle := b.Idle
	if idle <= 0 {
		idle = DefaultIdle
	}
	parent := ctx // for the Stat after a 416: ctx is cancelled by then
	ctx, cancel := context.WithCancelCause(ctx)
	silent := fmt.Errorf("%w: the agent sent nothing for %s", errSilent, idle)
	dog := time.AfterFunc(idle, func() { cancel(silent) })
	resp, err := b.do(ctx, http.MethodGet, "/v1/files/"+escape(p), nil, nil, 0, hdr)
	if err != nil {
		dog.Stop()
		if context.Cause(ctx) == silent {
			err = silent
		}
		cancel(nil)
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusRequestedRangeNotSatisfiable {
			// The agent answers 416 to bytes=SIZE- (HTTP has no
			// range that starts at the end), but "to the end" from
			// the end is nothing (backend.Backend: n < 0), as from
			// a file: empty, not beyond the end.
			if n < 0 {
				if fi, serr := b.Stat(parent, p); serr == nil && !fi.IsDir && fi.Size == off {
					return io.NopCloser(strings.NewReader("")), nil
				}
			}
			err = fmt.Errorf("%w: offset %d is beyond the end of the file", backend.ErrInvalid, off)
		}
		return nil, wrap("read", p, err)
	}
	if hdr.Get("Range") != "" {
		// The agent must answer the range we asked for: a 200 with the
		// whole file would put the wrong bytes at off.
		var start int64 = -1
		if cr := resp.Header.Get("Content-Range"); resp.StatusCode == http.StatusPartialContent {
			fmt.Sscanf(cr, "bytes %d-", &start)
		}
		if start != off {
			dog.Stop()
			resp.Body.Close()
			cancel(nil)
			return nil, wrap("read", p, fmt.Errorf("agent answered %d (Content-Range %q) to a request for bytes from %d",
				resp.StatusCode, sanitize(resp.Header.Get("Content-Range")), off))
		}
	}
	dog.Reset(idle)
	w := &watched{r: resp.Body, dog: dog, idle: idle, ctx: ctx, silent: silent}
	var r io.Reader = w
	if n > 0 {
		r = io.LimitReader(w, n)
	}
	return body{r, closer(func() error { dog.Stop(); cancel(nil); return resp.Body.Close() })}, nil
}

// errSilent marks a read the watchdog ended (transient: a retry, or
// another replica, may do better).
var errSilent = errors.New("agent silent")

// watched restarts the watchdog at every read that brings bytes, and
// reports the watchdog's reason when it ended the read.
type watched struct {
	r      io.Reader
	dog    *time.Timer
	idle   time.Duration
	ctx    context.Context
	silent error
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.dog.Reset(w.idle)
	}
	if err != nil && err != io.EOF && context.Cause(w.ctx) == w.silent {
		err = w.silent
	}
	return n, err
}

type closer func() error

func (f closer) Close() error { return f() }

// counter counts what is read through it, so WriteAt can tell a short
// source (the caller's error, permanent) from a failed upload.
type counter struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *counter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	if err == io.EOF {
		c.eof = true
	}
	return k, err
}

// WriteAt implements backend.Backend: one PUT with Content-Range whose
// body is streamed from r.
func (b *Backend) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	return b.writeAt(ctx, p, off, r, n, false)
}

// WriteAtExisting implements backend.ExistingWriter: the PUT carries
// If-Match: *, which the agent answers with not found when the file is
// not there (an agent from before it creates the file, as WriteAt).
func (b *Backend) WriteAtExisting(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	return b.writeAt(ctx, p, off, r, n, true)
}

func (b *Backend) writeAt(ctx context.Context, p string, off int64, r io.Reader, n int64, existing bool) error {
	if off < 0 || n < 0 || off > (1<<63-1)-n {
		return wrap("write", p, fmt.Errorf("%w: range %d+%d", backend.ErrInvalid, off, n))
	}
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	if n > 0 {
		hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", off, off+n-1))
	}
	if existing {
		hdr.Set("If-Match", "*")
	}
	// With no bytes there is no range to name; an empty PUT still creates
	// the file, which is all a zero-length write does.
	c := &counter{r: io.LimitReader(r, n)}
	resp, err := b.do(ctx, http.MethodPut, "/v1/files/"+escape(p), nil, c, n, hdr)
	if err != nil {
		if c.eof && c.n < n {
			err = fmt.Errorf("%w: source ended after %d of %d bytes (%w)", backend.ErrInvalid, c.n, n, err)
		}
		return wrap("write", p, err)
	}
	resp.Body.Close()
	return nil
}

// Truncate implements backend.Backend.
func (b *Backend) Truncate(ctx context.Context, p string, size int64) error {
	q := url.Values{"size": {strconv.FormatInt(size, 10)}}
	return wrap("truncate", p, b.call(ctx, http.MethodPost, "/v1/truncate/"+escape(p), q, nil, nil))
}

// SetModTime implements backend.ModTimeSetter (POST /v1/mtime; times
// before 1970 are refused).
func (b *Backend) SetModTime(ctx context.Context, p string, t time.Time) error {
	if t.Before(time.Unix(0, 0)) {
		return fmt.Errorf("set mtime of %s: %w: %s is before 1970", p, backend.ErrInvalid, t)
	}
	q := url.Values{"mtime": {strconv.FormatInt(t.UnixNano(), 10)}}
	return wrap("set mtime", p, b.call(ctx, http.MethodPost, "/v1/mtime/"+escape(p), q, nil, nil))
}

// Sync implements backend.Backend.
func (b *Backend) Sync(ctx context.Context, p string) error {
	return wrap("sync", p, b.call(ctx, http.MethodPost, "/v1/sync/"+escape(p), nil, nil, nil))
}

// Rename implements backend.Backend.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	in := struct {
		From string `json:"from"`
		To   string `json:"to"`
	}{from, to}
	return wrap("rename", from+" -> "+to, b.call(ctx, http.MethodPost, "/v1/rename", nil, in, nil))
}

// RenameNoReplace implements backend.NoReplaceRenamer: the agent renames
// only if nothing is at to, in one step, and answers kind "exist"
// (backend.ErrExist) otherwise. An agent older than the "replace" field
// ignores it and replaces: run agents of the server's version.
func (b *Backend) RenameNoReplace(ctx context.Context, from, to string) error {
	no := false
	in := struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Replace *bool  `json:"replace"`
	}{from, to, &no}
	return wrap("rename", from+" -> "+to, b.call(ctx, http.MethodPost, "/v1/rename", nil, in, nil))
}

// Remove implements backend.Backend.
func (b *Backend) Remove(ctx context.Context, p string) error {
	return wrap("remove", p, b.call(ctx, http.MethodDelete, "/v1/files/"+escape(p), nil, nil, nil))
}

// Mkdir implements backend.Backend.
func (b *Backend) Mkdir(ctx context.Context, p string) error {
	return wrap("mkdir", p, b.call(ctx, http.MethodPost, "/v1/mkdir/"+escape(p), nil, nil, nil))
}

// Checksum implements backend.Backend.
func (b *Backend) Checksum(ctx context.Context, p, algo string) (string, error) {
	var out struct {
		Algo  string `json:"algo"`
		Value string `json:"value"`
	}
	err := b.call(ctx, http.MethodGet, "/v1/checksum/"+escape(p), url.Values{"algo": {algo}}, nil, &out)
	if err == nil && out.Algo != algo {
		err = fmt.Errorf("agent answered with a %q checksum", out.Algo)
	}
	return out.Value, wrap("checksum", p, err)
}

// Info is what an agent says about itself.
type Info struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Instance is random per agent process ("" from agents older than
	// it): two URLs that answer with one instance reach one agent.
	Instance string `json:"instance,omitempty"`
}

// Info asks the agent for its name and protocol version; any valid token
// may ask, so it also checks a token.
func (b *Backend) Info(ctx context.Context) (Info, error) {
	var out Info
	err := b.call(ctx, http.MethodGet, "/v1/info", nil, nil, &out)
	return out, wrap("info", b.base, err)
}

// Pull has the agent copy n bytes at offset off of source (a
// sluice://host:port/path or sluices:// URL, read with sourceToken) to the
// same offset of dst on this agent: a third-party transfer in which the
// bytes go from agent to agent, never through the caller. It returns when
// the range is written.
func (b *Backend) Pull(ctx context.Context, source, sourceToken, dst string, off, n int64) error {
	return b.PullProgress(ctx, source, sourceToken, dst, off, n, nil)
}

// PullRequest is the body of POST /v1/pull.
type PullRequest struct {
	Source string `json:"source"`
	Token  string `json:"token"`
	Dst    string `json:"dst"`
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	// Progress asks the agent to report the bytes written as they land
	// (PullProgressLine, one JSON value per line): a third-party copy's
	// caller then sees its bytes move, not only each request's end. An
	// agent that does not know the field answers 204 at the end, as
	// before.
	Progress bool `json:"progress,omitempty"`
}

// PullProgressLine is one line of a pull's progress report: Written bytes
// from the offset are in the destination file (their writes returned);
// the last line has Done, or an error (Error, Kind as in an error
// document) that came after bytes were reported.
type PullProgressLine struct {
	Written int64  `json:"written"`
	Done    bool   `json:"done,omitempty"`
	Error   string `json:"error,omitempty"`
	Kind    string `json:"kind,omitempty"`
}

// PullProgressType is the content type of a progress report.
const PullProgressType = "application/x-ndjson"

// PullProgress is Pull, calling progress (if not nil) with the bytes
// written so far, from off, as the agent reports them; the calls come
// from this goroutine, before PullProgress returns.
func (b *Backend) PullProgress(ctx context.Context, source, sourceToken, dst string, off, n int64, progress func(written int64)) error {
	if _, _, err := ParseURL(source); err != nil {
		return wrap("pull", dst, fmt.Errorf("%w: %w", backend.ErrInvalid, err))
	}
	in := PullRequest{Source: source, Token: sourceToken, Dst: dst, Offset: off, Length: n, Progress: progress != nil}
	if progress == nil {
		return wrap("pull", source+" -> "+dst, b.call(ctx, http.MethodPost, "/v1/pull", nil, in, nil))
	}
	js, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := b.do(ctx, http.MethodPost, "/v1/pull", nil, bytes.NewReader(js), int64(len(js)), http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return wrap("pull", source+" -> "+dst, err)
	}
	defer resp.Body.Close()
	return wrap("pull", source+" -> "+dst, readPullProgress(resp, n, progress))
}

// readPullProgress follows a pull's answer: 204 (done, nothing reported)
// or a progress report, which must end with a line that says done with
// all n bytes, or why not.
func readPullProgress(resp *http.Response, n int64, progress func(int64)) error {
	if resp.StatusCode == http.StatusNoContent || resp.Header.Get("Content-Type") != PullProgressType {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	dec := json.NewDecoder(resp.Body)
	var last int64
	for {
		var l PullProgressLine
		if err := dec.Decode(&l); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading the agent's progress after %d of %d bytes: %w", last, n, err)
		}
		if l.Error != "" || l.Kind != "" {
			kind := l.Kind
			if kindError(kind) == nil {
				kind = "internal"
			}
			return &StatusError{Status: resp.StatusCode, Kind: kind, Message: sanitize(l.Error)}
		}
		if l.Written < last || l.Written > n || (l.Done && l.Written != n) {
			return fmt.Errorf("agent reported %d bytes written (done %v) after %d, of %d", l.Written, l.Done, last, n)
		}
		if l.Written > last {
			last = l.Written
			progress(last)
		}
		if l.Done {
			return nil
		}
	}
}

// ChecksumRange implements backend.RangeChecksummer: the agent sums the
// range where the file is.
func (b *Backend) ChecksumRange(ctx context.Context, p, algo string, off, n int64) (string, error) {
	var out struct {
		Algo  string `json:"algo"`
		Value string `json:"value"`
	}
	q := url.Values{"algo": {algo}, "offset": {strconv.FormatInt(off, 10)}, "length": {strconv.FormatInt(n, 10)}}
	err := b.call(ctx, http.MethodGet, "/v1/checksum/"+escape(p), q, nil, &out)
	if err == nil && out.Algo != algo {
		err = fmt.Errorf("agent answered with a %q checksum", out.Algo)
	}
	return out.Value, wrap("checksum", p, err)
}

var (
	_ backend.Backend          = (*Backend)(nil)
	_ backend.RangeChecksummer = (*Backend)(nil)
)
