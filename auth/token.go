// Package auth owns the bearer tokens sluice agents accept: their format
// (base64url JSON claims, a dot, base64url HMAC-SHA256 of the encoded
// claims), minting and verifying them with a shared key, deciding what a
// verified token allows (scope and path prefix), and the key file itself
// (generating it and loading it with a permission check). It has no notion
// of HTTP: the agent turns its errors into status codes.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// Errors Verify returns (wrapped with detail; test with errors.Is). All of
// them mean the request is unauthenticated.
var (
	ErrMalformed    = errors.New("malformed token")
	ErrBadSignature = errors.New("token signature does not match")
	ErrExpired      = errors.New("token expired")
	ErrAudience     = errors.New("token is for another audience")
)

// Errors Allows returns: the token is genuine but does not cover the request.
var (
	ErrScope  = errors.New("token scope does not allow the operation")
	ErrPrefix = errors.New("path is outside the token's prefix")
)

// Scopes a token can carry.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeRW    = "rw"
	// ScopeRemote grants nothing of the agent's own files: only the
	// Remotes (an agent relaying between two storage servers).
	ScopeRemote = "remote"
)

// AnyAudience is the audience that every agent accepts.
const AnyAudience = "*"

// MinKeySize is the smallest key, in bytes, Mint, Verify and LoadKey accept:
// HMAC-SHA256 gains nothing from more than 32 and is weakened by fewer.
const MinKeySize = 32

// maxTokenSize bounds what Verify decodes, so a hostile header cannot make
// it allocate much; real tokens are a few hundred bytes.
const maxTokenSize = 8 << 10

// b64 is strict so that a signature has exactly one encoding: a token
// cannot be altered (in its unused trailing bits) and still verify.
var b64 = base64.RawURLEncoding.Strict()

// Claims is what a token asserts.
type Claims struct {
	Sub    string `json:"sub"`    // who the token was issued to (for logs)
	Scope  string `json:"scope"`  // read, write or rw
	Prefix string `json:"prefix"` // the subtree the token covers, e.g. /data/run7
	Exp    int64  `json:"exp"`    // expiry, Unix seconds
	Aud    string `json:"aud"`    // the agent's name, or *
	// Base, if set, is a directory at or above Prefix that symbolic
	// links below it must not lead out of (the agent checks; without
	// Base it checks the links below Prefix). The service sets it to the
	// access rule that lets the user have the path: a token scoped to
	// /home/alice/x must not read /home/bob/secret through a link
	// /home/alice/x -> /home/bob/secret that alice made.
	Base string `json:"base,omitempty"`
	// Remotes are storage servers (scheme://host:port) the agent may
	// reach for the holder: read a range from, or write one to, with
	// the credential the request carries. Only the service mints them,
	// for its runs between an agent and a storage endpoint; without
	// them an agent reaches no server but other agents.
	Remotes []string `json:"remotes,omitempty"`
}

// AllowsRemote reports whether the token lets the agent reach the
// storage server base (scheme://host:port).
func (c Claims) AllowsRemote(base string) error {
	for _, r := range c.Remotes {
		if r == base {
			return nil
		}
	}
	return fmt.Errorf("%w: the token does not cover storage server %s", ErrPrefix, base)
}

// LinkBase is the directory symbolic links must stay below: Base if set,
// else Prefix.
func (c Claims) LinkBase() string {
	if c.Base != "" {
		return c.Base
	}
	return c.Prefix
}

// validate checks the claims' shape; Mint refuses to sign, and Verify
// refuses to trust, claims that could be misread.
func (c Claims) validate() error {
	switch c.Scope {
	case ScopeRead, ScopeWrite, ScopeRW:
	case ScopeRemote:
		if len(c.Remotes) == 0 {
			return errors.New("scope remote without remotes")
		}
	default:
		return fmt.Errorf("scope %q (want read, write, rw or remote)", c.Scope)
	}
	for _, r := range c.Remotes {
		if !remoteBase(r) {
			return fmt.Errorf("remote %q is not scheme://host:port", r)
		}
	}
	if c.Exp <= 0 {
		return errors.New("no expiry (exp)")
	}
	if c.Aud == "" {
		return errors.New("no audience (aud)")
	}
	if !strings.HasPrefix(c.Prefix, "/") {
		return fmt.Errorf("prefix %q does not start with /", c.Prefix)
	}
	if !cleanPath(c.Prefix) {
		return fmt.Errorf("prefix %q contains .. or NUL", c.Prefix)
	}
	if c.Base != "" {
		if !strings.HasPrefix(c.Base, "/") || !cleanPath(c.Base) {
			return fmt.Errorf("base %q is not an absolute path without .. or NUL", c.Base)
		}
		b, p := path.Clean(c.Base), path.Clean(c.Prefix)
		if b != "/" && p != b && !strings.HasPrefix(p, b+"/") {
			return fmt.Errorf("prefix %q is not below base %q", c.Prefix, c.Base)
		}
	}
	return nil
}

// remoteBase reports whether r is scheme://host:port and nothing more.
func remoteBase(r string) bool {
	u, err := url.Parse(r)
	return err == nil && u.Scheme != "" && u.Host != "" && u.Port() != "" && u.User == nil &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && r == u.Scheme+"://"+u.Host
}

// cleanPath reports whether p has no ".." element and no NUL byte: such a
// path could mean something else once a file system resolves it.
func cleanPath(p string) bool {
	if strings.ContainsRune(p, 0) {
		return false
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return false
		}
	}
	return true
}

func mac(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Mint signs c with key.
func Mint(key []byte, c Claims) (string, error) {
	if len(key) < MinKeySize {
		return "", fmt.Errorf("mint token: key has %d bytes, need at least %d", len(key), MinKeySize)
	}
	if err := c.validate(); err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	payload := b64.EncodeToString(js)
	return payload + "." + b64.EncodeToString(mac(key, payload)), nil
}

// Verify checks token's signature with key, then that it has not expired
// at now and that it is meant for aud (or for any audience), and returns
// its claims. The signature is checked before the payload is parsed, so
// nothing an outsider wrote is interpreted.
func Verify(key []byte, token string, now time.Time, aud string) (Claims, error) {
	if len(key) < MinKeySize {
		// A short key is a configuration error, but refusing is the only
		// safe answer to the request.
		return Claims{}, fmt.Errorf("%w: verifier key too short", ErrBadSignature)
	}
	if len(token) > maxTokenSize {
		return Claims{}, fmt.Errorf("%w: %d bytes long", ErrMalformed, len(token))
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || payload == "" || strings.Contains(sig, ".") {
		return Claims{}, fmt.Errorf("%w: want PAYLOAD.SIGNATURE", ErrMalformed)
	}
	got, err := b64.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return Claims{}, fmt.Errorf("%w: signature is not %d bytes of base64url", ErrMalformed, sha256.Size)
	}
	if !hmac.Equal(got, mac(key, payload)) {
		return Claims{}, ErrBadSignature
	}
	js, err := b64.DecodeString(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	var c Claims
	if err := json.Unmarshal(js, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not the claims JSON", ErrMalformed)
	}
	if err := c.validate(); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if now.Unix() >= c.Exp {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Exp, 0).UTC().Format(time.RFC3339))
	}
	if c.Aud != AnyAudience && c.Aud != aud {
		return Claims{}, fmt.Errorf("%w: %q, this is %q", ErrAudience, c.Aud, aud)
	}
	return c, nil
}

// Op is what a request does to a path.
type Op int

// Operations, matching the scopes that allow them.
const (
	Read Op = iota + 1
	Write
)

func (o Op) String() string {
	switch o {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Allows reports (as nil) whether the claims let a request do op on p, a
// slash path relative to the agent's root ("/a/b" and "a/b" are the same).
// The prefix covers itself and what is below it, by whole path elements:
// "/a/b" covers "/a/b" and "/a/b/c" but not "/a/bc"; "/" covers everything.
func (c Claims) Allows(op Op, p string) error {
	switch {
	case op == Read && (c.Scope == ScopeRead || c.Scope == ScopeRW):
	case op == Write && (c.Scope == ScopeWrite || c.Scope == ScopeRW):
	default:
		return fmt.Errorf("%w: scope %q, operation %s", ErrScope, c.Scope, op)
	}
	if !cleanPath(p) || !cleanPath(c.Prefix) || !strings.HasPrefix(c.Prefix, "/") {
		// Never decide on a path that a file system could resolve
		// differently; the agent refuses these before asking anyway.
		return fmt.Errorf("%w: %q is not a plain path", ErrPrefix, p)
	}
	pre := path.Clean(c.Prefix)
	q := path.Clean("/" + p)
	if pre == "/" || q == pre || strings.HasPrefix(q, pre+"/") {
		return nil
	}
	return fmt.Errorf("%w: %q is not below %q", ErrPrefix, q, pre)
}

// Minter mints tokens with one set of claims for as long as it is used: the
// same token until a quarter of its life is left, then a fresh one
// expiring TTL later. A copy or a transfer that outlives one token (a
// short-lived one, as tokens should be) keeps going with the next, and a
// token that leaks is good for TTL at most. It is safe for concurrent use.
type Minter struct {
	Key    []byte
	Claims Claims // Exp is set on each token minted
	TTL    time.Duration
	Now    func() time.Time // nil: time.Now

	mu      sync.Mutex
	tok     string
	expires time.Time
}

// Token returns the token to present now.
func (m *Minter) Token() (string, error) {
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := now()
	if m.tok != "" && m.expires.Sub(t) > m.TTL/4 {
		return m.tok, nil
	}
	// Whole seconds: a token's expiry is a Unix time.
	exp := t.Add(m.TTL).Truncate(time.Second)
	c := m.Claims
	c.Exp = exp.Unix()
	tok, err := Mint(m.Key, c)
	if err != nil {
		return "", err
	}
	m.tok, m.expires = tok, exp
	return tok, nil
}
