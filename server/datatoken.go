package server

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/auth"
)

// DataTokenLife is how long a data token handed to a user lasts. `sluice
// cp` asks again when a quarter of it is left, so a copy may run for
// days while a stolen token is good for an hour at most.
const DataTokenLife = time.Hour

// DataTokenRequest asks for a data token for one path of an agent: what
// `sluice cp` needs to read or write sluice://ENDPOINT/path itself, with
// the caller's login instead of the agent's key.
type DataTokenRequest struct {
	// URL is sluice://ENDPOINT/path; a path ending in "/" names a
	// directory (the destination of several files).
	URL string
	// Write asks for reading and writing in the path's directory (where
	// a copy writes its temporary file and renames it), or in the
	// directory itself when the path ends in "/"; otherwise reading the
	// path and what is below it.
	Write bool
}

// DataToken is a data token for one agent, scoped as a job's would be.
type DataToken struct {
	Endpoint string
	// Agent is the agent's address for `sluice cp`: sluice://host:port or
	// sluices://host:port.
	Agent   string
	Path    string // the cleaned path asked for
	Prefix  string // what the token covers
	Scope   string // auth.ScopeRead or auth.ScopeRW
	Token   string
	Expires time.Time
}

// DataToken mints a data token for the caller to read or write one path
// of an agent directly. It is checked as a job's file would be: the
// caller's access rules allow the path (reading) or its directory
// (writing, AllowWriteIn), and the token carries the rule's link base, so
// a link the caller made cannot lead the agent into another user's files.
// Storage endpoints are refused: their credentials never leave the
// service.
func (s *Server) DataToken(ctx context.Context, c Caller, req DataTokenRequest) (DataToken, error) {
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return DataToken{}, err
	}
	scheme, rest, _ := strings.Cut(req.URL, "://")
	if scheme != "sluice" && scheme != "sluices" {
		return DataToken{}, fmt.Errorf("%w: %q: want sluice://ENDPOINT/path", ErrInvalid, req.URL)
	}
	if host, _, _ := strings.Cut(rest, "/"); strings.Contains(host, ":") {
		return DataToken{}, fmt.Errorf("%w: %q: name the endpoint (sluice://NAME/path, see `sluice endpoints`), not its address", ErrInvalid, req.URL)
	}
	e, p, err := parseFileURL(idx, req.URL)
	if err != nil {
		return DataToken{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if e.Storage() {
		return DataToken{}, fmt.Errorf("%w: %s is a storage endpoint (%s): its credential stays with the service; copy to or from it with a job (sluice submit)", ErrInvalid, e.Name, e.URL)
	}
	acc, err := s.accessFor(ctx, c)
	if err != nil {
		return DataToken{}, err
	}
	t := DataToken{Endpoint: e.Name, Agent: pullBase(e.URL), Path: p, Prefix: p, Scope: auth.ScopeRead}
	need := AccessRead
	if req.Write {
		need, t.Scope = AccessWrite, auth.ScopeRW
		if !strings.HasSuffix(req.URL, "/") {
			t.Prefix = path.Dir(p)
		}
		if err := acc.AllowWriteIn(e.Name, t.Prefix); err != nil {
			return DataToken{}, err
		}
	} else if err := acc.Allow(e.Name, p, AccessRead); err != nil {
		return DataToken{}, err
	}
	t.Expires = s.now().Add(DataTokenLife).Truncate(time.Second)
	claims := auth.Claims{
		Sub: "cp by " + c.User.Name, Scope: t.Scope, Prefix: t.Prefix,
		Base: baseFor(acc.LinkBase(e.Name, t.Prefix, need), t.Prefix),
		Aud:  e.Name, Exp: t.Expires.Unix(),
	}
	if t.Token, err = auth.Mint(s.agentKey(e.Name), claims); err != nil {
		return DataToken{}, fmt.Errorf("server: data token for %s: %w", e.Name, err)
	}
	s.log.Info("data token", "user", c.User.Name, "endpoint", e.Name, "prefix", t.Prefix, "scope", t.Scope, "expires", t.Expires)
	return t, nil
}
