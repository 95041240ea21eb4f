package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Access rules (package access decides; the server keeps them and asks).
// The rules live in the store (settings), so every server of a cluster
// sees the same ones and a restart keeps them.

// AccessRule is wire.AccessRule: the API documents live in package wire.
type AccessRule = wire.AccessRule

// AccessConfig is wire.AccessConfig: the API documents live in package wire.
type AccessConfig = wire.AccessConfig

// accessKey is the settings key of the rules (JSON).
const accessKey = "access"

// Access kinds a job needs.
const (
	AccessRead  = access.Read
	AccessWrite = access.Write
)

// accessRules reads the rules from the store (none if never set).
func (s *Server) accessRules(ctx context.Context) (AccessConfig, error) {
	v, err := s.st.Setting(ctx, accessKey)
	if errors.Is(err, store.ErrNotFound) || (err == nil && v == "") {
		return AccessConfig{}, nil
	}
	if err != nil {
		return AccessConfig{}, fmt.Errorf("server: access rules: %w", err)
	}
	var a AccessConfig
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return AccessConfig{}, fmt.Errorf("server: access rules in the store do not parse: %w", err)
	}
	return a, nil
}

// Access returns the rules: all of them to an admin, to anyone else the
// ones that apply to them (with {user} and {vo} filled in).
func (s *Server) Access(ctx context.Context, c Caller) (AccessConfig, error) {
	a, err := s.accessRules(ctx)
	if err != nil {
		return AccessConfig{}, err
	}
	if c.User.Admin {
		if a.Rules == nil {
			a.Rules = []AccessRule{} // JSON [], as the schema says
		}
		return a, nil
	}
	return access.Mine(a, accessUser(c.User)), nil
}

// SetAccess replaces the rules (admins only).
func (s *Server) SetAccess(ctx context.Context, c Caller, a AccessConfig) (AccessConfig, error) {
	if !c.User.Admin {
		return AccessConfig{}, fmt.Errorf("%w: only an admin can change access rules", ErrForbidden)
	}
	a, err := access.Validate(a)
	if err != nil {
		return AccessConfig{}, err
	}
	if a.Rules == nil {
		a.Rules = []AccessRule{}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return AccessConfig{}, fmt.Errorf("server: %w", err)
	}
	if err := s.st.PutSetting(ctx, accessKey, string(b)); err != nil {
		return AccessConfig{}, fmt.Errorf("server: saving access rules: %w", err)
	}
	s.log.Info("access rules changed", "by", c.User.Name, "rules", len(a.Rules))
	return a, nil
}

// accessUser is who u is to the access rules.
func accessUser(u store.User) access.User {
	return access.User{Name: u.Name, VO: u.VO, Admin: u.Admin}
}

// accessFor returns the check of c's paths, the rules read once.
func (s *Server) accessFor(ctx context.Context, c Caller) (*access.Check, error) {
	if c.User.Admin {
		return access.NewCheck(accessUser(c.User), nil), nil
	}
	a, err := s.accessRules(ctx)
	if err != nil {
		return nil, err
	}
	return access.NewCheck(accessUser(c.User), a.Rules), nil
}

// jobAccess returns the access check of job j's owner, as it stands now,
// for the link bases of its data tokens. Checks are kept for
// accessCacheFor, so that starting many files does not read the rules
// and the user once each. When they cannot be read (the database is
// down) it returns the error, and nothing is cached: a file does not
// start without its owner's rules, since tokens minted without them
// would not bound the links of a user held to rules.
func (w *world) jobAccess(j *jobState) (*access.Check, error) {
	now := w.now()
	if now.Sub(w.accessAt) > accessCacheFor {
		clear(w.access)
		w.accessAt = now
	}
	if a, ok := w.access[j.Owner]; ok {
		return a, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	defer cancel()
	u, err := w.s.st.UserByName(ctx, j.Owner)
	if err != nil {
		return nil, fmt.Errorf("reading the access rules of %s: %w", j.Owner, err)
	}
	a, err := w.s.accessFor(ctx, Caller{User: u})
	if err != nil {
		return nil, fmt.Errorf("reading the access rules of %s: %w", j.Owner, err)
	}
	if w.access == nil {
		w.access = map[string]*access.Check{}
	}
	w.access[j.Owner] = a
	return a, nil
}

// accessCacheFor is how long jobAccess keeps a user's access check.
const accessCacheFor = 5 * time.Second
