package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Storage endpoints are GridFTP and XRootD servers an admin registers
// (PutStorageEndpoint): the service reaches them itself, with the
// endpoint's credential, instead of through an agent of their own. A run
// with one at either end moves its bytes, never through the server:
//
//   - between two servers of one protocol, by third-party copy (the
//     servers move the bytes: GridFTP's partial transfers, range by
//     range; XRootD's, the whole file at once);
//   - between an agent and a storage server, the agent reads or writes
//     the storage itself (POST /v1/copy at the agent);
//   - between two servers that cannot copy between themselves (GridFTP
//     and XRootD), the agent named as the destination's (or else the
//     source's) Via reads one and writes the other: FTS3's streaming.
//
// The server itself only stats, allocates, checksums and renames at the
// storage, as FTS3 does through gfal2.

// storageSchemes are the URL schemes of storage endpoints and their
// servers' default ports: a URL without a port names the same server as
// one with the default, and the service writes every storage URL with a
// port so that one server has one name.
var storageSchemes = map[string]string{"root": "1094", "xroot": "1094", "ftp": "21", "gsiftp": "2811",
	"davs": "443", "dav": "80", "s3": "443", "s3+http": "80"}

// webSchemes are the schemes by which jobs may name files on a WebDAV
// storage endpoint (registered as davs:// or dav://, since an endpoint
// whose URL is http(s):// is an agent).
var webSchemes = map[string]string{"https": "davs", "http": "dav"}

// protocol is the family a storage scheme belongs to: two servers of one
// family can copy between themselves.
func protocol(scheme string) string {
	switch scheme {
	case "root", "xroot":
		return "xrootd"
	case "ftp", "gsiftp":
		return "gridftp"
	case "davs", "dav", "https", "http":
		return "http"
	case "s3", "s3+http":
		return "s3"
	}
	return scheme
}

// StorageBase checks a storage server's URL and returns its canonical
// scheme://host:port (the default port added) and its path.
func StorageBase(raw string) (base, p string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("%w: storage URL %q: %w", ErrInvalid, raw, err)
	}
	if dav, ok := webSchemes[u.Scheme]; ok {
		u.Scheme = dav // a WebDAV server, as jobs name its files
	}
	port, ok := storageSchemes[u.Scheme]
	switch {
	case !ok:
		return "", "", fmt.Errorf("%w: storage URL %q: want gsiftp://, ftp://, root://, davs://, dav://, s3:// or s3+http:// (agents join on their own: sluice agent)", ErrInvalid, raw)
	case u.Host == "" || u.Hostname() == "":
		return "", "", fmt.Errorf("%w: storage URL %q has no host", ErrInvalid, raw)
	case u.User != nil:
		return "", "", fmt.Errorf("%w: storage URL %q carries a user: give credentials as the endpoint's credential, which is never shown", ErrInvalid, raw)
	case u.RawQuery != "" || u.Fragment != "":
		return "", "", fmt.Errorf("%w: storage URL %q has a query or fragment", ErrInvalid, raw)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port), "/" + strings.TrimPrefix(u.Path, "/"), nil
}

// StorageSpec is what an admin registers for a storage endpoint.
type StorageSpec struct {
	// URL is the server: gsiftp://host[:port], ftp://... or root://...
	URL string
	// Via is the agent that moves the bytes between this server and
	// another storage server it cannot copy with ("": none).
	Via string
	// MaxCC and MaxThroughput bound what the scheduler starts on it
	// (0: no limit, and its capacity is learned from what it moves).
	MaxCC         int
	MaxThroughput float64
	// Credential, if not nil, replaces the endpoint's (an empty one
	// removes it); nil keeps the one it has.
	Credential *Credential
}

// Credential is a storage endpoint's credential as the service keeps
// it: what the backends present, and how to get a fresh one.
type Credential struct {
	backend.Credential
	// Refresh, if set, is a command (argv) the server runs for a fresh
	// credential when this one is within a quarter of its life, or ten
	// minutes, of Expires: it prints the credential's JSON (the fields
	// above) on its standard output, as voms-proxy-init and oidc-token
	// wrappers can. Long transfers then never present an expired one.
	Refresh []string `json:"refresh,omitempty"`
	// Issued is when the server stored this credential.
	Issued time.Time `json:"issued,omitzero"`
}

// Info describes a credential without any secret in it.
func (c *Credential) Info() string {
	if c == nil || (c.Credential.Empty() && len(c.Refresh) == 0) {
		return ""
	}
	s := c.Credential.String()
	if !c.Expires.IsZero() {
		s += ", expires " + c.Expires.UTC().Format(time.RFC3339)
	}
	if len(c.Refresh) > 0 {
		s += ", refreshed by " + path.Base(c.Refresh[0])
	}
	return s
}

// PutStorageEndpoint registers or changes a storage endpoint (admins
// only). Its name must not be an agent's.
func (s *Server) PutStorageEndpoint(ctx context.Context, c Caller, name string, spec StorageSpec) (store.Endpoint, error) {
	if !c.User.Admin {
		return store.Endpoint{}, fmt.Errorf("%w: only admins register storage endpoints", ErrForbidden)
	}
	if !wire.ValidName(name) {
		return store.Endpoint{}, fmt.Errorf("%w: endpoint name %q: want 1-64 letters, digits and ._-@", ErrInvalid, name)
	}
	base, p, err := StorageBase(spec.URL)
	if err != nil {
		return store.Endpoint{}, err
	}
	if p != "/" {
		return store.Endpoint{}, fmt.Errorf("%w: storage URL %q: give the server only (scheme://host:port); jobs name paths on it, and access rules narrow them", ErrInvalid, spec.URL)
	}
	if spec.MaxCC < 0 || spec.MaxThroughput < 0 {
		return store.Endpoint{}, fmt.Errorf("%w: negative limits", ErrInvalid)
	}
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("server: %w", err)
	}
	var prev *store.Endpoint
	for i, e := range eps {
		switch {
		case e.Name == name && !e.Storage():
			return store.Endpoint{}, fmt.Errorf("%w: %q is an agent's name", ErrConflict, name)
		case e.Name == name:
			prev = &eps[i]
		case e.Storage() && e.URL == base:
			return store.Endpoint{}, fmt.Errorf("%w: %s is endpoint %q already", ErrConflict, base, e.Name)
		}
	}
	if spec.Via != "" {
		var ok bool
		for _, e := range eps {
			ok = ok || (e.Name == spec.Via && !e.Storage())
		}
		if !ok {
			return store.Endpoint{}, fmt.Errorf("%w: via %q: no agent of that name has joined", ErrInvalid, spec.Via)
		}
	}
	if spec.Credential != nil {
		if err := checkCredential(protocol(base[:strings.Index(base, ":")]), spec.Credential); err != nil {
			return store.Endpoint{}, err
		}
	}
	now := s.now()
	e := store.Endpoint{Name: name, URL: base, Via: spec.Via, MaxCC: spec.MaxCC, MaxThroughput: spec.MaxThroughput,
		Registered: now, LastSeen: now, Up: true}
	if prev != nil {
		e.Registered = prev.Registered
	}
	if spec.Credential != nil {
		if err := s.putCredential(ctx, name, spec.Credential); err != nil {
			return store.Endpoint{}, err
		}
	}
	if err := s.st.UpsertEndpoint(ctx, e); err != nil {
		return store.Endpoint{}, fmt.Errorf("server: %w", err)
	}
	s.log.Info("storage endpoint registered", "by", c.User.Name, "endpoint", name, "url", base, "via", spec.Via,
		"max_cc", spec.MaxCC, "credential", spec.Credential.Info())
	s.post(func(w *world) { w.storeEndpoints([]store.Endpoint{e}); w.arrival() })
	return e, nil
}

// DeleteStorageEndpoint forgets a storage endpoint and its credential
// (admins only). Files that name it and have not ended fail when they
// next run on this server (no endpoint); other servers of a cluster
// learn it at their next restart.
func (s *Server) DeleteStorageEndpoint(ctx context.Context, c Caller, name string) error {
	if !c.User.Admin {
		return fmt.Errorf("%w: only admins remove storage endpoints", ErrForbidden)
	}
	e, err := s.storageEndpoint(ctx, name)
	if err != nil {
		return err
	}
	if err := s.st.DeleteEndpoint(ctx, e.Name); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	// The loop forgets it too: its files then fail, the endpoint
	// unknown, instead of running against a server no longer wanted.
	s.post(func(w *world) {
		if ep := w.eps[e.Name]; ep != nil {
			ep.removed = true
		}
	})
	s.log.Info("storage endpoint removed", "by", c.User.Name, "endpoint", name)
	return nil
}

// storageEndpoint returns the storage endpoint of that name.
func (s *Server) storageEndpoint(ctx context.Context, name string) (store.Endpoint, error) {
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return store.Endpoint{}, fmt.Errorf("server: %w", err)
	}
	for _, e := range eps {
		if e.Name == name && e.Storage() {
			return e, nil
		}
	}
	return store.Endpoint{}, fmt.Errorf("%w: no storage endpoint %q", ErrNotFound, name)
}

// isStorage reports whether the endpoint named is a storage endpoint
// (the server reaches it itself: no heartbeat to wait for).
func (s *Server) isStorage(ctx context.Context, name string) bool {
	_, err := s.storageEndpoint(ctx, name)
	return err == nil
}

// StorageCredentialInfo describes endpoint name's credential without its
// secrets ("" if it has none).
func (s *Server) StorageCredentialInfo(ctx context.Context, name string) string {
	c, err := s.loadCredential(ctx, name)
	if err != nil {
		return ""
	}
	return c.Info()
}

// checkCredential refuses what a protocol cannot present, when it is
// registered rather than when a transfer first needs it.
func checkCredential(proto string, c *Credential) error {
	if c.Empty() && len(c.Refresh) == 0 {
		return nil
	}
	switch {
	case proto == "gridftp" && c.Token != "":
		return fmt.Errorf("%w: a GridFTP server takes a user and password or an X.509 proxy, not a token", ErrInvalid)
	case proto == "xrootd" && (c.Password != "" || c.X509Proxy != ""):
		return fmt.Errorf("%w: an XRootD endpoint takes a user name (unix) or a token, not a password or proxy", ErrInvalid)
	case proto == "s3" && (c.X509Proxy != "" || (c.Username == "") != (c.Password == "")):
		return fmt.Errorf("%w: an S3 endpoint takes an access key id (user) and its secret (password), and a session token if any", ErrInvalid)
	case proto == "http" && c.X509Proxy != "":
		return fmt.Errorf("%w: a WebDAV endpoint takes a bearer token or a user and password, not an X.509 proxy", ErrInvalid)
	case c.Password != "" && c.Username == "":
		return fmt.Errorf("%w: a password without a user name", ErrInvalid)
	}
	return nil
}

func (s *Server) putCredential(ctx context.Context, name string, c *Credential) error {
	if c.Empty() && len(c.Refresh) == 0 {
		return s.st.PutCredential(ctx, name, nil, s.now())
	}
	c.Issued = s.now()
	js, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("server: credential: %w", err)
	}
	return s.st.PutCredential(ctx, name, js, s.now())
}

func (s *Server) loadCredential(ctx context.Context, name string) (*Credential, error) {
	js, err := s.st.Credential(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c Credential
	if err := json.Unmarshal(js, &c); err != nil {
		// Never the bytes: they are a secret, if a broken one.
		return nil, fmt.Errorf("credential of endpoint %q is unreadable; set it again", name)
	}
	return &c, nil
}

// credentialRefreshWait bounds a refresh command.
const credentialRefreshWait = time.Minute

// credential is endpoint name's credential to present now (nil: none):
// refreshed first by its command when it is near its end. A credential
// that has expired and cannot be refreshed is an error (a permission
// error: the run fails saying why, rather than logging in as nobody).
func (s *Server) credential(ctx context.Context, name string) (*backend.Credential, error) {
	c, err := s.loadCredential(ctx, name)
	if err != nil || c == nil {
		return nil, err
	}
	now := s.now()
	if !c.Expires.IsZero() && len(c.Refresh) > 0 {
		life := c.Expires.Sub(c.Issued)
		if margin := max(life/4, 10*time.Minute); c.Expires.Sub(now) < margin {
			fresh, err := s.refreshCredential(ctx, name, c)
			if err != nil {
				s.log.Warn("refreshing a storage endpoint's credential", "endpoint", name, "err", err)
				if !c.Expires.After(now) {
					return nil, fmt.Errorf("%w: the credential of endpoint %q expired at %s and its refresh failed: %v", backend.ErrPermission, name, c.Expires.UTC().Format(time.RFC3339), err)
				}
			} else {
				c = fresh
			}
		}
	}
	if !c.Expires.IsZero() && !c.Expires.After(now) {
		return nil, fmt.Errorf("%w: the credential of endpoint %q expired at %s (an admin gives it a new one: sluice endpoint add NAME URL with the new credential)", backend.ErrPermission, name, c.Expires.UTC().Format(time.RFC3339))
	}
	cred := c.Credential
	return &cred, nil
}

// refreshCredential runs c's refresh command and stores what it prints.
func (s *Server) refreshCredential(ctx context.Context, name string, c *Credential) (*Credential, error) {
	ctx, cancel := context.WithTimeout(ctx, credentialRefreshWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Refresh[0], c.Refresh[1:]...).Output()
	if err != nil {
		// Not its output or stderr: either may hold a secret.
		return nil, fmt.Errorf("%s: %w", path.Base(c.Refresh[0]), err)
	}
	var fresh Credential
	if err := json.Unmarshal(out, &fresh.Credential); err != nil {
		return nil, fmt.Errorf("%s printed no credential JSON", path.Base(c.Refresh[0]))
	}
	if fresh.Credential.Empty() {
		return nil, fmt.Errorf("%s printed an empty credential", path.Base(c.Refresh[0]))
	}
	fresh.Refresh = c.Refresh
	if err := s.putCredential(ctx, name, &fresh); err != nil {
		return nil, err
	}
	s.log.Info("storage endpoint's credential refreshed", "endpoint", name, "expires", fresh.Expires)
	return &fresh, nil
}

// storageEnd is a run's end on a storage endpoint.
type storageEnd struct {
	name string
	base string // scheme://host:port
	via  string
}

func (e *storageEnd) url(p string) string {
	return e.base + (&url.URL{Path: p}).EscapedPath()
}

// openStorage opens endpoint e's server with its credential.
func (s *Server) openStorage(ctx context.Context, e *storageEnd, write bool) (backend.Backend, func(), error) {
	cred, err := s.credential(ctx, e.name)
	if err != nil {
		return nil, nil, err
	}
	o, err := s.cfg.Backends.Open(ctx, e.base+"/", backend.OpenOptions{Write: write, Credential: cred})
	if err != nil {
		return nil, nil, fmt.Errorf("endpoint %s: %w", e.name, err)
	}
	closer := func() {}
	if o.Close != nil {
		closer = func() { o.Close() }
	}
	return o.Backend, closer, nil
}

// Third-party copies: the servers' own, through the backends that can.
type (
	// rangeCopier is a backend whose server copies a range from another
	// server of its protocol (GridFTP).
	rangeCopier interface {
		CopyRangeFrom(ctx context.Context, src backend.Backend, srcPath, dstPath string, off, n int64, progress func(int64)) error
	}
	// fileCopier is one whose server copies whole files (XRootD).
	fileCopier interface {
		CopyFileFrom(ctx context.Context, src backend.Backend, srcPath, dstPath string, progress func(int64)) error
	}
)

// runEnds is how a run reaches its two ends: backends for the metadata
// (stat, allocation, checksums, rename) and the function that moves each
// range without the bytes passing through the server.
type runEnds struct {
	src, dst backend.Backend
	pull     engine.PullFunc
	whole    bool // pull copies whole files only
	// agentSrc and agentDst are the ends that are agents (nil if not):
	// what multi-source runs and batches need.
	agentSrc, agentDst *sluice.Backend
	srcTok             sluice.TokenSource
	// subWrite, if not 0, is what a request moves, and the least
	// (engine.Spec.PullMin): each range a storage server sends or takes
	// costs a new data connection (and its slow start), where agents
	// keep theirs open.
	subWrite int64
	close    func()
}

// openEnds opens both ends of p's run.
func (s *Server) openEnds(ctx context.Context, p plan) (*runEnds, error) {
	if p.srcURL == "" || p.dstURL == "" {
		return nil, fmt.Errorf("%w: endpoint not registered", backend.ErrInvalid)
	}
	if p.srcStorage == nil && p.dstStorage == nil {
		src, dst, srcTok, err := s.backends(ctx, p)
		if err != nil {
			return nil, err
		}
		base := pullBase(p.srcURL)
		return &runEnds{src: src, dst: dst, agentSrc: src, agentDst: dst, srcTok: srcTok, close: func() {},
			pull: func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
				tok, err := srcTok()
				if err != nil {
					return err
				}
				return dst.PullProgress(ctx, sluice.FileURL(base, srcPath), tok, dstPath, off, n, progress)
			}}, nil
	}
	if len(p.replicas) > 0 {
		return nil, fmt.Errorf("%w: a file with replicas must be on agents", backend.ErrInvalid)
	}
	sub := fmt.Sprintf("job %d file %d", p.task.JobID, p.task.Index)
	e := &runEnds{}
	var closers []func()
	e.close = func() {
		for _, f := range closers {
			f()
		}
	}
	fail := func(err error) (*runEnds, error) { e.close(); return nil, err }
	// The storage ends, opened here for their metadata.
	if p.srcStorage != nil {
		b, c, err := s.openStorage(ctx, p.srcStorage, false)
		if err != nil {
			return fail(err)
		}
		e.src, closers = b, append(closers, c)
	}
	if p.dstStorage != nil {
		b, c, err := s.openStorage(ctx, p.dstStorage, true)
		if err != nil {
			return fail(err)
		}
		e.dst, closers = b, append(closers, c)
	}
	dstDir := path.Dir(p.dstPath)
	e.subWrite = storageSubWrite
	_, copies := e.dst.(rangeCopier)
	if _, ok := e.dst.(fileCopier); ok {
		copies = true
	}
	switch {
	case p.srcStorage != nil && p.dstStorage != nil && copies && protocol(scheme3(p.srcStorage.base)) == protocol(scheme3(p.dstStorage.base)):
		switch d := e.dst.(type) {
		case rangeCopier:
			src := e.src
			e.pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
				return d.CopyRangeFrom(ctx, src, srcPath, dstPath, off, n, progress)
			}
		case fileCopier:
			src := e.src
			e.whole = true
			e.pull = func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
				if off != 0 {
					return fmt.Errorf("%w: a whole-file copy asked for a range at %d", backend.ErrInvalid, off)
				}
				return d.CopyFileFrom(ctx, src, srcPath, dstPath, progress)
			}
		default:
			return fail(fmt.Errorf("%w: %s cannot copy from %s itself", backend.ErrInvalid, p.dstStorage.name, p.srcStorage.name))
		}
	case p.srcStorage != nil && p.dstStorage != nil:
		via := p.dstStorage.via
		if via == "" {
			via = p.srcStorage.via
		}
		if via == "" {
			return fail(fmt.Errorf("%w: %s and %s cannot copy between themselves and neither names an agent to move their bytes (sluice endpoint add ... --via AGENT)", backend.ErrInvalid, p.srcStorage.name, p.dstStorage.name))
		}
		viaURL, ok := s.agentURL(via)
		if !ok {
			return fail(fmt.Errorf("agent %s, which moves the bytes of %s, has not been heard from", via, p.dstStorage.name))
		}
		tok, err := s.dataTokenSource(auth.Claims{Sub: sub, Scope: auth.ScopeRemote, Prefix: "/", Aud: via,
			Remotes: []string{p.srcStorage.base, p.dstStorage.base}})
		if err != nil {
			return fail(err)
		}
		a, err := s.agent(ctx, viaURL, tok)
		if err != nil {
			return fail(err)
		}
		e.pull = s.copyPull(a, p.srcStorage, p.dstStorage)
		e.src, e.dst = s.summedBy(a, p.srcStorage, e.src), s.summedBy(a, p.dstStorage, e.dst)
	case p.srcStorage != nil:
		// To an agent: it reads the storage itself.
		dstTok, err := s.withRemotes(p, auth.Claims{Sub: sub, Scope: auth.ScopeRW, Prefix: dstDir, Base: baseFor(p.dstBase, dstDir), Aud: p.dstAud}, p.srcStorage.base)
		if err != nil {
			return fail(err)
		}
		a, err := s.agent(ctx, p.dstURL, dstTok)
		if err != nil {
			return fail(err)
		}
		e.dst, e.agentDst = a, a
		e.src = s.summedBy(a, p.srcStorage, e.src)
		e.pull = s.copyPull(a, p.srcStorage, nil)
	default:
		// From an agent: it writes the storage itself.
		srcTok, err := s.withRemotes(p, auth.Claims{Sub: sub, Scope: auth.ScopeRead, Prefix: p.srcPath, Base: baseFor(p.srcBase, p.srcPath), Aud: p.srcAud}, p.dstStorage.base)
		if err != nil {
			return fail(err)
		}
		a, err := s.agent(ctx, p.srcURL, srcTok)
		if err != nil {
			return fail(err)
		}
		e.src, e.agentSrc = a, a
		e.dst = s.summedBy(a, p.dstStorage, e.dst)
		e.pull = s.copyPull(a, nil, p.dstStorage)
	}
	return e, nil
}

// storageSubWrite is runEnds.subWrite for runs with a storage end: 8
// MiB, a BDP of a 10 Gb/s path at 6 ms (engine.DefaultChunkMin), under
// the 64 MiB the GridFTP backend moves with one RETR of its own.
const storageSubWrite = 8 << 20

// withRemotes mints the tokens of claims c with the storage servers
// remotes added. As dataTokens does, it refuses a token without a link
// base to a user held to access rules.
func (s *Server) withRemotes(p plan, c auth.Claims, remotes ...string) (sluice.TokenSource, error) {
	if p.restricted && c.Base == "" {
		return nil, fmt.Errorf("%w: a data token for %s would cover more than the access rules grant", backend.ErrPermission, c.Prefix)
	}
	c.Remotes = remotes
	return s.dataTokenSource(c)
}

// copyPull is a PullFunc in which agent a moves each range: from the
// storage src (or a's own file if nil) to the storage dst (or a's own
// file).
func (s *Server) copyPull(a *sluice.Backend, src, dst *storageEnd) engine.PullFunc {
	return func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
		in := sluice.CopyRequest{From: sluice.CopyEnd{Path: srcPath}, To: sluice.CopyEnd{Path: dstPath}, Offset: off, Length: n}
		if src != nil {
			cred, err := s.credential(ctx, src.name)
			if err != nil {
				return err
			}
			in.From = sluice.CopyEnd{URL: src.url(srcPath), Credential: cred}
		}
		if dst != nil {
			cred, err := s.credential(ctx, dst.name)
			if err != nil {
				return err
			}
			in.To = sluice.CopyEnd{URL: dst.url(dstPath), Credential: cred}
		}
		return a.CopyRange(ctx, in, progress)
	}
}

// summedBy is storage backend b of end e with its checksums computed by
// agent a (POST /v1/remotesum) rather than by this server: where the
// storage cannot sum a file itself (S3, WebDAV without digests) the file
// is read to sum it, and the reading is the agent's, never the server's.
// A backend.WholeWriter stays one.
func (s *Server) summedBy(a *sluice.Backend, e *storageEnd, b backend.Backend) backend.Backend {
	sb := agentSummed{Backend: b, sum: func(ctx context.Context, p, algo string) (string, error) {
		cred, err := s.credential(ctx, e.name)
		if err != nil {
			return "", err
		}
		return a.RemoteChecksum(ctx, sluice.RemoteSumRequest{URL: e.url(p), Credential: cred, Algo: algo})
	}}
	if _, ok := b.(backend.WholeWriter); ok {
		return agentSummedWhole{sb}
	}
	return sb
}

// agentSummed is a storage backend whose Checksum an agent computes.
type agentSummed struct {
	backend.Backend
	sum func(ctx context.Context, p, algo string) (string, error)
}

func (b agentSummed) Checksum(ctx context.Context, p, algo string) (string, error) {
	return b.sum(ctx, p, algo)
}

// agentSummedWhole is agentSummed of a backend.WholeWriter.
type agentSummedWhole struct{ agentSummed }

func (agentSummedWhole) WritesWhole() {}

// scheme3 is the scheme of a scheme://... URL.
func scheme3(u string) string {
	s, _, _ := strings.Cut(u, "://")
	return s
}

// storageOf is e's storage end, or nil for an agent.
func storageOf(e store.Endpoint) *storageEnd {
	if !e.Storage() {
		return nil
	}
	return &storageEnd{name: e.Name, base: e.URL, via: e.Via}
}

// agentURL is the URL of the agent named, if it has joined.
func (s *Server) agentURL(name string) (string, bool) {
	s.mu.Lock()
	a := s.agents[name]
	s.mu.Unlock()
	if a != nil {
		return a.ep.URL, true
	}
	return "", false
}
