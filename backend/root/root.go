// Package root is the backend for XRootD servers (root://host:port/path),
// the protocol of most high-energy-physics storage (EOS, dCache, XRootD
// itself). It speaks the protocol through go-hep.org/x/hep/xrootd and
// implements backend.Backend on top of it.
//
// # Concurrency
//
// A Backend is safe for use by any number of goroutines. It holds one
// go-hep client (one TCP session, plus up to eight data connections the
// client binds to it on servers that allow kXR_bind), which multiplexes
// concurrent requests. Every operation opens its own file handle and closes
// it before returning (OpenRange: when the reader is closed), so handles are
// never shared: the transfer engine's workers calling OpenRange or WriteAt
// on the same file at once each read or write through their own handle, at
// their own offsets. Files are opened with kXR_force so that XRootD's file
// usage rules (one writer, or readers only) do not refuse the second worker.
//
// # Contexts and failures
//
// Every blocking call honours its context: it returns when the context
// ends, even if the server has not answered. go-hep's client cannot cancel
// a request safely, so the request itself goes on in the background and its
// outcome is discarded (a file it opened is closed). When the connection to
// the server breaks, operations in flight fail with an unclassified
// (transient) error and the next operation connects anew; so do they when
// the server sends nothing for Options.Stall while they wait (a frozen
// server keeps its connection open). go-hep reaches
// the server through a relay on a loopback port of this process, which
// also turns XRootD's deferred answers into plain ones; see conn.go for
// why go-hep is fed neither cancellable contexts nor the server's
// connection directly.
//
// # Third-party copy
//
// Backend.CopyFrom copies a file from one XRootD server to another as
// xrdcp --tpc only does: the destination server pulls the bytes from the
// source server, none pass through this process. Both servers must allow
// it in their configuration (XRootD 5):
//
//	ofs.tpc pgm /usr/bin/xrdcp --server
//
// on the destination, which runs that program (Debian package
// xrootd-client) to pull the file, and on the source, which otherwise
// refuses the copy's rendezvous ("tpc not supported"). Useful further
// options of the same directive: autorm (a failed copy's partial file is
// removed), ttl DFLT MAX (how long, in seconds, the source waits for the
// destination to come with the client's key; default 7, at most 15),
// logok (the source logs each copy it grants). A server that requires
// authentication of third-party copies (ofs.tpc require) needs
// credentials this backend cannot forward. The two backends must log in
// with the same user name, and the source must see the destination
// server connect from the host named in the destination's address: the
// source admits it only for that host, on behalf of the client that set
// the copy up.
//
// # Credentials
//
// Open takes a backend.Credential's Username as the login name, which it
// also presents to servers that require XRootD's unix authentication
// (sec.protocol unix; Options.UnixAuth). Passwords, tokens (ztn, or the
// authz opaque data) and X.509 proxies (GSI) cannot be presented: Open
// refuses a credential that holds one, with backend.ErrInvalid.
//
// # Limitations
//
// No TLS (roots://), no opaque CGI in paths (tokens), and authentication
// only as go-hep offers it (unix, krb5, host). Third-party copies do not
// ask a redirector's data server first (xrdcp's "placement" open), so
// between redirectors the two servers may not meet. Redirections (EOS, dCache
// or XRootD redirectors) are followed by go-hep itself, straight to the
// data server: connections to it bypass the relay, so a deferred answer or
// unsolicited message from a data server can still crash go-hep.
// kXR_bind data connections and kXR_wait are go-hep's too.
//
// # Errors
//
// XRootD error codes (kXR_NotFound, kXR_NotAuthorized, kXR_NoSpace,
// kXR_ItExists, ...) map onto backend's sentinel errors. go-hep's own
// server answers every failure with kXR_IOError and the OS error's text, so
// for the generic codes the message is inspected too.
package root

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"

	"github.com/sluice-dtn/sluice/backend"
)

// DefaultPort is XRootD's port, used when a URL or address names none.
const DefaultPort = "1094"

// Defaults of Options.
const (
	DefaultUsername    = "sluice"
	DefaultBlockSize   = 4 << 20
	DefaultDialTimeout = 30 * time.Second
	DefaultStall       = 60 * time.Second // as long as the sluice agent backend waits
	maxBlockSize       = 1 << 30          // kXR_read and kXR_write lengths are int32
)

// dirMode is the mode of directories the backend creates, fileMode of files.
const (
	dirMode  = xrdfs.OpenMode(0o755)
	fileMode = xrdfs.OpenMode(0o644)
)

// Options configure a Backend. The zero value is usable.
type Options struct {
	// Username is the name the client logs in with (default "sluice";
	// the protocol carries its first 8 bytes). Servers without
	// authentication only log it.
	Username string
	// UnixAuth makes the client present Username, instead of the name of
	// the user running this process, to servers that require XRootD's
	// unix authentication (sec.protocol unix). Open sets it when a
	// credential names the user.
	UnixAuth bool
	// Root is the directory on the server the backend serves: backend
	// paths are relative to it (default "/", the server's namespace).
	Root string
	// BlockSize is the most bytes one kXR_read or kXR_write carries
	// (default 4 MiB): large enough that a round trip per block costs
	// little, small enough that a reader or writer holds one block.
	BlockSize int
	// DialTimeout bounds connecting, handshake and login (default 30 s).
	DialTimeout time.Duration
	// NoServerChecksum makes Checksum always read the file instead of
	// asking the server (kXR_query checksum) first.
	NoServerChecksum bool
	// Stall bounds how long a request may wait while the server sends
	// nothing at all on the connection (default DefaultStall; negative:
	// no bound). A frozen server keeps its connection open, and a
	// request whose context has no deadline, as sluice cp's, would wait
	// for ever; past Stall the connection is dropped as broken, its
	// requests fail (transiently) and the next one connects anew.
	// A checksum the server computes is bounded by Stall plus the
	// file's size at ChecksumRate: the server says nothing until it has
	// read the whole file.
	Stall time.Duration
	// ChecksumRate is the slowest rate, in bytes per second, at which
	// the server is expected to read a file while it computes its
	// checksum; with Stall it bounds the wait for the answer. 0 means
	// DefaultChecksumRate; a negative value, no bound on that wait.
	ChecksumRate float64
}

// DefaultChecksumRate is Options.ChecksumRate's default,
// backend.ChecksumRate (10 MB/s).
const DefaultChecksumRate = backend.ChecksumRate

// Backend serves the files of one XRootD server.
type Backend struct {
	addr string
	opts Options
	root string // cleaned Options.Root

	mu     sync.Mutex
	cur    *conn
	closed bool

	bufs sync.Pool // *[]byte of BlockSize

	// noQuery holds the algorithms the server would not checksum
	// (string → struct{}), so that they are not asked again.
	noQuery sync.Map
	// serverSums counts checksums the server computed (for tests).
	serverSums atomic.Int64
}

// New connects to the XRootD server at addr (host:port; the port defaults
// to 1094). It returns once logged in, or when ctx ends.
func New(ctx context.Context, addr string, opts Options) (*Backend, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		if strings.Contains(addr, "/") || addr == "" {
			return nil, fmt.Errorf("root: %w: address %q: want host:port", backend.ErrInvalid, addr)
		}
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), DefaultPort)
	}
	if opts.Username == "" {
		opts.Username = DefaultUsername
	}
	if opts.BlockSize <= 0 {
		opts.BlockSize = DefaultBlockSize
	}
	opts.BlockSize = min(opts.BlockSize, maxBlockSize)
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.Stall == 0 {
		opts.Stall = DefaultStall
	}
	root, err := cleanPath(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("root: root directory: %w", err)
	}
	b := &Backend{addr: addr, opts: opts, root: root}
	b.bufs.New = func() any { buf := make([]byte, opts.BlockSize); return &buf }
	if _, err := b.conn(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Addr is the server's address (host:port).
func (b *Backend) Addr() string { return b.addr }

// Close disconnects from the server. Operations in flight fail.
func (b *Backend) Close() error {
	b.mu.Lock()
	c := b.cur
	b.closed, b.cur = true, nil
	b.mu.Unlock()
	if c != nil {
		c.close()
	}
	return nil
}

// conn returns a live connection, dialing a new one if there is none or
// the last one broke. Concurrent callers share one dial.
func (b *Backend) conn(ctx context.Context) (*conn, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("root: %s: %w", b.addr, net.ErrClosed)
	}
	c := b.cur
	if c == nil || c.dead.Load() {
		var unixUser string
		if b.opts.UnixAuth {
			unixUser = b.opts.Username
		}
		c = dialConn(b.addr, b.opts.Username, unixUser, b.opts.DialTimeout, max(b.opts.Stall, 0))
		b.cur = c
	}
	b.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("root: connect %s: %w", b.addr, ctx.Err())
	}
	if c.err != nil {
		return nil, classify("connect", b.addr, c.err)
	}
	return c, nil
}

// ParseURL splits an XRootD URL into the server's address and the path on
// it: root://host:port/path and the usual root://host:port//abs/path both
// give host:port and /abs/path; xroot:// is accepted too, and the port
// defaults to 1094. TLS (roots://) and opaque CGI (?...) are not supported:
// go-hep's client speaks neither.
func ParseURL(s string) (addr, p string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("root URL: %w: %w", backend.ErrInvalid, err)
	}
	switch u.Scheme {
	case "root", "xroot":
	case "roots", "xroots":
		return "", "", fmt.Errorf("root URL %q: %w: TLS (%s://) is not supported", s, backend.ErrInvalid, u.Scheme)
	default:
		return "", "", fmt.Errorf("root URL %q: %w: scheme must be root or xroot", s, backend.ErrInvalid)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "", "", fmt.Errorf("root URL %q: %w: want root://host[:port]/path", s, backend.ErrInvalid)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("root URL %q: %w: a user in the URL is not supported (set Options.Username)", s, backend.ErrInvalid)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", "", fmt.Errorf("root URL %q: %w: query (CGI) and fragment are not supported", s, backend.ErrInvalid)
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
	}
	p, err = cleanPath(u.Path)
	if err != nil {
		return "", "", fmt.Errorf("root URL %q: %w", s, err)
	}
	return net.JoinHostPort(u.Hostname(), port), p, nil
}

// cleanPath turns a backend path into a clean absolute one ("/" for the
// root). ".." is refused rather than resolved: go-hep's server joins paths
// to its directory with path.Join, so "/../x" would leave it, and real
// servers differ in what they make of it. "?" starts XRootD's opaque data
// and a newline ends a directory listing entry, so names holding either
// cannot be addressed.
func cleanPath(p string) (string, error) {
	if strings.ContainsAny(p, "\x00\n?") {
		return "", fmt.Errorf("%w: path %q holds NUL, newline or '?'", backend.ErrInvalid, p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: path %q: \"..\" is not allowed", backend.ErrInvalid, p)
		}
	}
	return path.Clean("/" + p), nil
}

// paths cleans a backend path and returns it with its name on the server.
func (b *Backend) paths(p string) (clean, server string, err error) {
	clean, err = cleanPath(p)
	if err != nil {
		return "", "", fmt.Errorf("root: %w", err)
	}
	return clean, path.Join(b.root, clean), nil
}

// XRootD error codes (XProtocol.hh's XErrorCode); xrdproto names four.
const (
	kArgInvalid     = 3000
	kArgMissing     = 3001
	kArgTooLong     = 3002
	kFSError        = 3005
	kInvalidRequest = 3006
	kIOError        = 3007
	kNoSpace        = 3009
	kNotAuthorized  = 3010
	kNotFound       = 3011
	kServerError    = 3012
	kUnsupported    = 3013
	kNotFile        = 3015
	kIsDirectory    = 3016
	kItExists       = 3018
	kOverQuota      = 3021
	kFSReadOnly     = 3025
	kAuthFailed     = 3030
)

// kind returns the sentinel error for a server error, or nil for errors
// that may go away on retry (kXR_ServerError, kXR_Overloaded, ...).
func kind(se xrdproto.ServerError) error {
	switch se.Code {
	case kNotFound:
		return backend.ErrNotFound
	case kNotAuthorized, kFSReadOnly, kAuthFailed:
		return backend.ErrPermission
	case kNoSpace, kOverQuota:
		return backend.ErrNoSpace
	case kItExists:
		return backend.ErrExist
	case kArgInvalid, kArgMissing, kArgTooLong, kInvalidRequest, kUnsupported, kNotFile, kIsDirectory:
		return backend.ErrInvalid
	case kIOError, kFSError, kServerError:
		// go-hep's server reports everything as kXR_IOError with
		// the OS error's text; XRootD uses kXR_FSError for errnos
		// it has no code for.
		msg := strings.ToLower(se.Message)
		switch {
		case strings.Contains(msg, "no such file or directory"):
			return backend.ErrNotFound
		case strings.Contains(msg, "permission denied"), strings.Contains(msg, "operation not permitted"),
			strings.Contains(msg, "read-only file system"):
			return backend.ErrPermission
		case strings.Contains(msg, "no space left"), strings.Contains(msg, "quota exceeded"):
			return backend.ErrNoSpace
		case strings.Contains(msg, "file exists"), strings.Contains(msg, "directory not empty"):
			return backend.ErrExist
		case strings.Contains(msg, "not a directory"):
			return backend.ErrNotFound // a path through a file
		case strings.Contains(msg, "is a directory"):
			return backend.ErrInvalid
		}
	}
	return nil
}

// classify wraps err with the operation and the path and, for server
// errors, the sentinel error its code stands for.
func classify(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var se xrdproto.ServerError
	if errors.As(err, &se) {
		if k := kind(se); k != nil {
			return fmt.Errorf("root: %s %s: %w: %w", op, p, k, err)
		}
	}
	return fmt.Errorf("root: %s %s: %w", op, p, err)
}

// code returns the server's error code in err, or 0.
func code(err error) xrdproto.ServerErrorCode {
	var se xrdproto.ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func info(p string, es xrdfs.EntryStat) backend.FileInfo {
	return backend.FileInfo{Path: p, Size: es.EntrySize, ModTime: time.Unix(es.Mtime, 0), IsDir: es.IsDir()}
}

// stat is Stat on a server path, errors unwrapped.
func (c *conn) stat(ctx context.Context, sp string) (xrdfs.EntryStat, error) {
	return await(ctx, c, func(ctx context.Context) (xrdfs.EntryStat, error) {
		return c.fs.Stat(ctx, sp)
	}, nil)
}

// Stat implements backend.Backend.
func (b *Backend) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	name, sp, err := b.paths(p)
	if err != nil {
		return backend.FileInfo{}, err
	}
	c, err := b.conn(ctx)
	if err != nil {
		return backend.FileInfo{}, err
	}
	es, err := c.stat(ctx, sp)
	if err != nil {
		return backend.FileInfo{}, classify("stat", name, err)
	}
	return info(name, es), nil
}

// List implements backend.Backend. Each directory is one kXR_dirlist with
// stat information (a kXR_stat per entry on servers that do not give it);
// entries come in lexical order, each directory before its contents, as
// the file backend returns them.
func (b *Backend) List(ctx context.Context, p string, recursive bool) ([]backend.FileInfo, error) {
	name, sp, err := b.paths(p)
	if err != nil {
		return nil, err
	}
	c, err := b.conn(ctx)
	if err != nil {
		return nil, err
	}
	es, err := c.stat(ctx, sp)
	if err != nil {
		return nil, classify("list", name, err)
	}
	if !es.IsDir() {
		return nil, fmt.Errorf("root: list %s: %w: not a directory", name, backend.ErrInvalid)
	}
	var out []backend.FileInfo
	var walk func(dir string) error
	walk = func(dir string) error {
		sdir := path.Join(b.root, dir)
		entries, err := await(ctx, c, func(ctx context.Context) ([]xrdfs.EntryStat, error) {
			return c.fs.Dirlist(ctx, sdir)
		}, nil)
		if err != nil {
			return classify("list", dir, err)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].EntryName < entries[j].EntryName })
		for _, e := range entries {
			if e.EntryName == "" || e.EntryName == "." || e.EntryName == ".." || strings.Contains(e.EntryName, "/") {
				continue
			}
			child := path.Join(dir, e.EntryName)
			if !e.HasStatInfo {
				if e, err = c.stat(ctx, path.Join(b.root, child)); err != nil {
					if errors.Is(classify("stat", child, err), backend.ErrNotFound) {
						continue // removed since the listing
					}
					return classify("stat", child, err)
				}
			}
			out = append(out, info(child, e))
			if e.IsDir() && recursive {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(name); err != nil {
		return nil, err
	}
	return out, nil
}

// mkdirAll creates a server directory and its parents.
func (c *conn) mkdirAll(ctx context.Context, sp string) error {
	if sp == "/" {
		return nil
	}
	err := await0(ctx, c, func(ctx context.Context) error {
		return c.fs.MkdirAll(ctx, sp, dirMode)
	})
	if err != nil {
		// XRootD (5.5) answers kXR_ItExists to a mkdir -p of a directory
		// that exists with another mode than the one asked for (a
		// shared 0775 or 1777 directory, an export root): it is there,
		// which is all a mkdir -p means.
		if es, serr := c.stat(ctx, sp); serr == nil && es.IsDir() {
			return nil
		}
	}
	return err
}

// Mkdir implements backend.Backend.
func (b *Backend) Mkdir(ctx context.Context, p string) error {
	name, sp, err := b.paths(p)
	if err != nil {
		return err
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	err = c.mkdirAll(ctx, sp)
	if err != nil && strings.Contains(err.Error(), "not a directory") {
		// go-hep's server, where a file is in the way (XRootD
		// says kXR_ItExists).
		return fmt.Errorf("root: mkdir %s: %w: %w", name, backend.ErrExist, err)
	}
	return classify("mkdir", name, err)
}

// Rename implements backend.Backend. The destination's parent directories
// are created, as the file backend does.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	fname, fsp, err := b.paths(from)
	if err != nil {
		return err
	}
	tname, tsp, err := b.paths(to)
	if err != nil {
		return err
	}
	if fname == "/" || tname == "/" {
		return fmt.Errorf("root: rename %s to %s: %w: cannot rename the root", fname, tname, backend.ErrPermission)
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	if err := c.mkdirAll(ctx, path.Dir(tsp)); err != nil {
		return classify("mkdir", path.Dir(tname), err)
	}
	err = await0(ctx, c, func(ctx context.Context) error { return c.fs.Rename(ctx, fsp, tsp) })
	return classify("rename", fname+" to "+tname, err)
}

// Remove implements backend.Backend. XRootD removes files (kXR_rm) and
// directories (kXR_rmdir) with different requests, so the path is stat'ed
// first.
func (b *Backend) Remove(ctx context.Context, p string) error {
	name, sp, err := b.paths(p)
	if err != nil {
		return err
	}
	if name == "/" {
		return fmt.Errorf("root: remove %s: %w: refusing to remove the root", name, backend.ErrPermission)
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	es, err := c.stat(ctx, sp)
	if err != nil {
		return classify("remove", name, err)
	}
	err = await0(ctx, c, func(ctx context.Context) error {
		if es.IsDir() {
			return c.fs.RemoveDir(ctx, sp)
		}
		return c.fs.RemoveFile(ctx, sp)
	})
	return classify("remove", name, err)
}

var _ backend.Backend = (*Backend)(nil)
