package backend

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// TokenSource gives the bearer token to present now (a fresh one before
// the last expires). It must be safe for concurrent use.
type TokenSource func() (string, error)

// StaticToken is a TokenSource that always gives tok (a token given by
// the user, or minted for one short operation or a whole experiment).
func StaticToken(tok string) TokenSource { return func() (string, error) { return tok, nil } }

// OpenOptions is what opening a location may need beside its URL.
type OpenOptions struct {
	// Write says the location will be written to (a backend that takes
	// credentials asks for write access, else read).
	Write bool
	// HTTPClient is the client of backends that speak HTTP (nil: their
	// default).
	HTTPClient *http.Client
	// Tokens gives the bearer tokens for a path, for backends whose
	// servers take them (sluice agents); nil where the caller has none.
	Tokens func(path string, write bool) (TokenSource, error)
	// Credential, if not nil, is how to log in to a storage server
	// (a service keeps one per storage endpoint); nil: the backend's
	// default (anonymous FTP, XRootD's default user name).
	Credential *Credential
}

// Credential is what a storage server may want of its clients. A
// backend uses the fields its protocol has and refuses, with
// ErrInvalid, a credential it cannot present (so that a misconfigured
// endpoint fails saying so rather than logging in anonymously).
type Credential struct {
	// Username and Password log in to an FTP server (USER, PASS);
	// Username alone is XRootD's user name (unix authentication).
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Token is a bearer token (XRootD's ztn, HTTP's Authorization).
	Token string `json:"token,omitempty"`
	// X509Proxy is a proxy certificate with its key, PEM, for GSI
	// (gsiftp://): what X509_USER_PROXY names.
	X509Proxy string `json:"x509_proxy,omitempty"`
	// Expires, if not zero, is when the credential stops working (a
	// proxy's or token's end); a service refreshes it before then.
	Expires time.Time `json:"expires,omitzero"`
}

// Empty reports whether c carries nothing to present.
func (c *Credential) Empty() bool {
	return c == nil || (c.Username == "" && c.Password == "" && c.Token == "" && c.X509Proxy == "")
}

// String never shows a secret: a credential printed by mistake (in a
// log line, an error) names only what it holds.
func (c Credential) String() string {
	var has []string
	for _, f := range []struct{ name, v string }{{"username", c.Username}, {"password", c.Password}, {"token", c.Token}, {"x509 proxy", c.X509Proxy}} {
		if f.v != "" {
			has = append(has, f.name)
		}
	}
	if len(has) == 0 {
		return "credential{}"
	}
	return "credential{" + strings.Join(has, ", ") + "}"
}

// Opened is a location opened by a Registry: the backend, the
// location's path in it, the location's canonical URL, and how to
// release the backend.
type Opened struct {
	Backend Backend
	Path    string
	URL     string
	// Tokens are the tokens the backend presents, if it takes any (an
	// agent that pulls from this one needs them too).
	Tokens TokenSource
	// Close releases the backend's connections; nil if there is nothing
	// to release.
	Close func() error
}

// OpenFunc opens a location whose URL has one of the schemes it was
// registered for (for "file", also a plain local path).
type OpenFunc func(ctx context.Context, loc string, o OpenOptions) (Opened, error)

// Registry maps URL schemes to the backends that serve them. Each
// backend package offers an Open function; package backend/all registers
// every backend Sluice has. A Registry is built once, then only read.
type Registry struct {
	open    map[string]OpenFunc
	schemes []string // in registration order, for messages
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{open: map[string]OpenFunc{}} }

// Register makes open serve the given schemes ("file" also serves plain
// local paths). A scheme registered twice is a programming error.
func (r *Registry) Register(open OpenFunc, schemes ...string) {
	for _, s := range schemes {
		if _, dup := r.open[s]; dup {
			panic(fmt.Sprintf("backend: scheme %q registered twice", s))
		}
		r.open[s] = open
		r.schemes = append(r.schemes, s)
	}
}

// Schemes returns the registered schemes, in registration order.
func (r *Registry) Schemes() []string { return slices.Clone(r.schemes) }

// Open opens location loc: a URL (scheme://...) of a registered scheme,
// or a local path, which the "file" backend serves.
func (r *Registry) Open(ctx context.Context, loc string, o OpenOptions) (Opened, error) {
	scheme := "file"
	if s, _, ok := strings.Cut(loc, "://"); ok {
		scheme = s
	}
	open := r.open[scheme]
	if open == nil {
		return Opened{}, fmt.Errorf("%s: unsupported URL scheme %q (this build serves local paths and %s)",
			loc, scheme, strings.Join(r.urlForms(), ", "))
	}
	return open(ctx, loc, o)
}

// urlForms is the registered schemes as a reader would write them.
func (r *Registry) urlForms() []string {
	out := make([]string, len(r.schemes))
	for i, s := range r.schemes {
		out[i] = s + "://"
	}
	return out
}
