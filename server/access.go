package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Access rules: which files of which endpoints a user's jobs may read and
// write. Agents serve everything under their root to the server, which
// mints the data tokens; without rules any user could copy any file of
// any agent, or overwrite it. So a job of a user who is not an admin is
// checked file by file when it is submitted (sources and replicas need
// read access, destinations write access), and so is an estimate's
// sample. Admins may use every path. With no rule, users may use none:
// an admin grants access with `sluice access set FILE` (PUT /v1/access).
//
// A rule names an endpoint (or "*" for every endpoint), a path prefix
// (matched by whole path elements: /data/cms covers /data/cms/x, not
// /data/cmsx), who it is for (a user name, a VO, or "*" for every user;
// both a user and a VO: that user only while in that VO), and the access:
// read, or write (which includes read). The prefix may contain {user} and
// {vo}, replaced by the caller's name and VO, so that one rule gives each
// user a home:
//
//	{"rules": [
//	  {"endpoint": "*", "path": "/home/{user}", "user": "*", "access": "write"},
//	  {"endpoint": "dtn1", "path": "/data/{vo}", "vo": "*", "access": "read"},
//	  {"endpoint": "dtn2", "path": "/incoming/cms", "vo": "cms", "access": "write"}
//	]}
//
// The rules live in the store (settings), so every server of a cluster
// sees the same ones and a restart keeps them.

// AccessRule is wire.AccessRule: the API documents live in package wire.
type AccessRule = wire.AccessRule

// AccessConfig is wire.AccessConfig: the API documents live in package wire.
type AccessConfig = wire.AccessConfig

// accessKey is the settings key of the rules (JSON).
const accessKey = "access"

// maxAccessRules bounds the rules: each submitted file is checked against
// them.
const maxAccessRules = 1000

// Access kinds a job needs.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// validate checks the rules and returns them with paths cleaned.
func validateAccess(a AccessConfig) (AccessConfig, error) {
	if len(a.Rules) > maxAccessRules {
		return a, fmt.Errorf("%w: %d access rules; at most %d", ErrInvalid, len(a.Rules), maxAccessRules)
	}
	out := AccessConfig{Rules: make([]AccessRule, len(a.Rules))}
	for i, r := range a.Rules {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: access rule %d: "+format, append([]any{ErrInvalid, i + 1}, args...)...)
		}
		switch {
		case r.Endpoint == "":
			return a, bad("endpoint missing (a name, or * for every endpoint)")
		case r.Endpoint != "*" && !validName(r.Endpoint):
			return a, bad("endpoint %q is not an endpoint name", r.Endpoint)
		case r.User == "" && r.VO == "":
			return a, bad("say who it is for: user, vo, or user \"*\" for everyone")
		case r.User != "" && r.User != "*" && !validName(r.User):
			return a, bad("user %q is not a user name", r.User)
		case r.VO != "" && r.VO != "*" && !validName(r.VO):
			return a, bad("vo %q is not a VO name", r.VO)
		case r.Access != AccessRead && r.Access != AccessWrite:
			return a, bad("access %q: want read or write", r.Access)
		case !strings.HasPrefix(r.Path, "/"):
			return a, bad("path %q: want an absolute path prefix such as /data", r.Path)
		}
		for _, el := range strings.Split(r.Path, "/") {
			if el == ".." || el == "." {
				return a, bad("path %q: no . or .. elements", r.Path)
			}
		}
		rest := strings.NewReplacer("{user}", "", "{vo}", "").Replace(r.Path)
		if strings.ContainsAny(rest, "{}") {
			return a, bad("path %q: only {user} and {vo} may stand for the caller", r.Path)
		}
		r.Path = path.Clean(r.Path)
		out.Rules[i] = r
	}
	return out, nil
}

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
	mine := AccessConfig{Rules: []AccessRule{}}
	for _, r := range a.Rules {
		if ruleApplies(r, c.User) {
			r.Path = rulePrefix(r, c.User)
			mine.Rules = append(mine.Rules, r)
		}
	}
	return mine, nil
}

// SetAccess replaces the rules (admins only).
func (s *Server) SetAccess(ctx context.Context, c Caller, a AccessConfig) (AccessConfig, error) {
	if !c.User.Admin {
		return AccessConfig{}, fmt.Errorf("%w: only an admin can change access rules", ErrForbidden)
	}
	a, err := validateAccess(a)
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

func ruleApplies(r AccessRule, u store.User) bool {
	// A name that is a path element of its own would move the prefix
	// ("/home/.." is "/"): such a rule does not apply (validName refuses
	// these names; a store written otherwise is not trusted).
	for _, n := range []string{u.Name, u.VO} {
		if n == "." || n == ".." || strings.Contains(n, "/") {
			return false
		}
	}
	if r.User != "" && r.User != "*" && r.User != u.Name {
		return false
	}
	if r.VO != "" && r.VO != "*" && r.VO != u.VO {
		return false
	}
	return true
}

func rulePrefix(r AccessRule, u store.User) string {
	return path.Clean(strings.NewReplacer("{user}", u.Name, "{vo}", u.VO).Replace(r.Path))
}

// allows reports whether r lets u have access need to path p on
// endpoint ep (p clean and absolute, as parseFileURL returns it).
func ruleAllows(r AccessRule, u store.User, ep, p, need string) bool {
	if (r.Endpoint != "*" && r.Endpoint != ep) || !ruleApplies(r, u) {
		return false
	}
	if need == AccessWrite && r.Access != AccessWrite {
		return false
	}
	return under(p, rulePrefix(r, u))
}

// under reports whether p is prefix or inside it, by whole elements.
func under(p, prefix string) bool {
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// accessCheck checks paths against the rules for one caller, the rules
// read once.
type accessCheck struct {
	u     store.User
	admin bool
	rules []AccessRule
}

func (s *Server) accessFor(ctx context.Context, c Caller) (*accessCheck, error) {
	if c.User.Admin {
		return &accessCheck{u: c.User, admin: true}, nil
	}
	a, err := s.accessRules(ctx)
	if err != nil {
		return nil, err
	}
	return &accessCheck{u: c.User, rules: a.Rules}, nil
}

// check returns nil if the caller may have access need to path p of
// endpoint ep, and an ErrForbidden error saying what is missing
// otherwise.
func (a *accessCheck) check(ep, p, need string) error {
	if a.admin {
		return nil
	}
	for _, r := range a.rules {
		if ruleAllows(r, a.u, ep, p, need) {
			return nil
		}
	}
	verb := "read"
	if need == AccessWrite {
		verb = "write"
	}
	return fmt.Errorf("%w: user %s (VO %s) may not %s sluice://%s%s: no access rule allows it (an admin grants access with `sluice access set`; `sluice access show` lists yours)",
		ErrForbidden, a.u.Name, a.u.VO, verb, ep, p)
}

// checkWriteIn is check for writing in directory dir itself, not only in
// files below it: a run writes its temporary file in its destination's
// directory (and an estimate its samples in theirs), and the data token
// it gets covers that whole directory. It is what a destination needs:
// write access to the file's path alone let a user granted /home/alice
// submit the destination /home/alice, whose run wrote
// /home/.alice.tN.sluice-part with a read-write token for all of /home.
func (a *accessCheck) checkWriteIn(ep, dir string) error {
	if err := a.check(ep, dir, AccessWrite); err != nil {
		return fmt.Errorf("files are written in their directory (%s), under a temporary name first: %w", dir, err)
	}
	return nil
}

// linkBase is the directory the symbolic links on path p of endpoint ep
// must stay below, in a data token for a job of the checked user that
// needs access need (auth.Claims.Base): the broadest rule that lets the
// user have p. Rules are checked by name, and the agent follows links
// inside its root: without it a token for /home/alice/x read
// /home/bob/secret through a link /home/alice/x -> /home/bob/secret that
// alice made. "" (the token's prefix bounds the links) for an admin's
// job, whose paths no rule restricts, and when no rule allows p any more
// (the rules changed after the submission).
func (a *accessCheck) linkBase(ep, p, need string) string {
	if a.admin {
		return ""
	}
	best := ""
	for _, r := range a.rules {
		if ruleAllows(r, a.u, ep, p, need) {
			if pre := rulePrefix(r, a.u); best == "" || len(pre) < len(best) {
				best = pre
			}
		}
	}
	return best
}

// jobAccess returns the access check of job j's owner, as it stands now,
// for the link bases of its data tokens. Checks are kept for
// accessCacheFor, so that starting many files does not read the rules
// and the user once each. When they cannot be read (the database is
// down) it returns the error, and nothing is cached: a file does not
// start without its owner's rules, since tokens minted without them
// would not bound the links of a user held to rules.
func (w *world) jobAccess(j *jobState) (*accessCheck, error) {
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
		w.access = map[string]*accessCheck{}
	}
	w.access[j.Owner] = a
	return a, nil
}

// accessCacheFor is how long jobAccess keeps a user's access check.
const accessCacheFor = 5 * time.Second
