// Package access decides which files of which endpoints a user's jobs may
// read and write: the rules an administrator sets (PUT /v1/access), their
// validation, and the check of one path against them, including the
// directory a data token's symbolic links must stay below. It is pure: the
// rules come in, a decision goes out; the server keeps them in its store
// and asks here.
//
// Agents serve everything under their root to the server, which mints
// the data tokens; without rules any user could copy any file of any
// agent, or overwrite it. So a job of a user who is not an admin is
// checked file by file when it is submitted (sources and replicas need
// read access, destinations write access), and so is an estimate's
// sample. Admins may use every path. With no rule, users may use none.
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
package access

import (
	"fmt"
	"path"
	"strings"

	"github.com/sluice-dtn/sluice/wire"
)

// Rule is wire.AccessRule: the API documents live in package wire.
type Rule = wire.AccessRule

// Config is wire.AccessConfig: the API documents live in package wire.
type Config = wire.AccessConfig

// Access kinds a job needs.
const (
	Read  = "read"
	Write = "write"
)

// MaxRules bounds the rules: each submitted file is checked against them.
const MaxRules = 1000

// User is who asks: a user's name and VO, and whether they are an admin
// (whom no rule restricts).
type User struct {
	Name, VO string
	Admin    bool
}

// Validate checks the rules and returns them with paths cleaned. Its
// errors wrap wire.ErrInvalid and say which rule is wrong and why.
func Validate(a Config) (Config, error) {
	if len(a.Rules) > MaxRules {
		return a, fmt.Errorf("%w: %d access rules; at most %d", wire.ErrInvalid, len(a.Rules), MaxRules)
	}
	out := Config{Rules: make([]Rule, len(a.Rules))}
	for i, r := range a.Rules {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: access rule %d: "+format, append([]any{wire.ErrInvalid, i + 1}, args...)...)
		}
		switch {
		case r.Endpoint == "":
			return a, bad("endpoint missing (a name, or * for every endpoint)")
		case r.Endpoint != "*" && !wire.ValidName(r.Endpoint):
			return a, bad("endpoint %q is not an endpoint name", r.Endpoint)
		case r.User == "" && r.VO == "":
			return a, bad("say who it is for: user, vo, or user \"*\" for everyone")
		case r.User != "" && r.User != "*" && !wire.ValidName(r.User):
			return a, bad("user %q is not a user name", r.User)
		case r.VO != "" && r.VO != "*" && !wire.ValidName(r.VO):
			return a, bad("vo %q is not a VO name", r.VO)
		case r.Access != Read && r.Access != Write:
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

// Mine returns the rules that apply to u, with {user} and {vo} filled in:
// what a user who is not an admin is shown of the rules.
func Mine(a Config, u User) Config {
	mine := Config{Rules: []Rule{}}
	for _, r := range a.Rules {
		if applies(r, u) {
			r.Path = prefix(r, u)
			mine.Rules = append(mine.Rules, r)
		}
	}
	return mine
}

func applies(r Rule, u User) bool {
	// A name that is a path element of its own would move the prefix
	// ("/home/.." is "/"): such a rule does not apply (wire.ValidName
	// refuses these names; a store written otherwise is not trusted).
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

func prefix(r Rule, u User) string {
	return path.Clean(strings.NewReplacer("{user}", u.Name, "{vo}", u.VO).Replace(r.Path))
}

// allows reports whether r lets u have access need to path p on
// endpoint ep (p clean and absolute).
func allows(r Rule, u User, ep, p, need string) bool {
	if (r.Endpoint != "*" && r.Endpoint != ep) || !applies(r, u) {
		return false
	}
	if need == Write && r.Access != Write {
		return false
	}
	return Under(p, prefix(r, u))
}

// Under reports whether p is prefix or inside it, by whole elements.
func Under(p, prefix string) bool {
	return prefix == "/" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// Check checks paths against the rules for one user, the rules read once.
type Check struct {
	u     User
	rules []Rule
}

// NewCheck returns the check of u's paths against rules (ignored for an
// admin).
func NewCheck(u User, rules []Rule) *Check {
	if u.Admin {
		rules = nil
	}
	return &Check{u: u, rules: rules}
}

// Admin reports whether the user is an admin, whose paths no rule
// restricts.
func (a *Check) Admin() bool { return a.u.Admin }

// Allow returns nil if the user may have access need to path p (clean and
// absolute) of endpoint ep, and an error wrapping wire.ErrForbidden that
// says what is missing otherwise.
func (a *Check) Allow(ep, p, need string) error {
	if a.u.Admin {
		return nil
	}
	for _, r := range a.rules {
		if allows(r, a.u, ep, p, need) {
			return nil
		}
	}
	verb := "read"
	if need == Write {
		verb = "write"
	}
	return fmt.Errorf("%w: user %s (VO %s) may not %s sluice://%s%s: no access rule allows it (an admin grants access with `sluice access set`; `sluice access show` lists yours)",
		wire.ErrForbidden, a.u.Name, a.u.VO, verb, ep, p)
}

// AllowWriteIn is Allow for writing in directory dir itself, not only in
// files below it: a run writes its temporary file in its destination's
// directory (and an estimate its samples in theirs), and the data token
// it gets covers that whole directory. It is what a destination needs:
// write access to the file's path alone let a user granted /home/alice
// submit the destination /home/alice, whose run wrote
// /home/.alice.tN.sluice-part with a read-write token for all of /home.
func (a *Check) AllowWriteIn(ep, dir string) error {
	if err := a.Allow(ep, dir, Write); err != nil {
		return fmt.Errorf("files are written in their directory (%s), under a temporary name first: %w", dir, err)
	}
	return nil
}

// LinkBase is the directory the symbolic links on path p of endpoint ep
// must stay below, in a data token for a job of the checked user that
// needs access need (auth.Claims.Base): the broadest rule that lets the
// user have p. Rules are checked by name, and the agent follows links
// inside its root: without it a token for /home/alice/x read
// /home/bob/secret through a link /home/alice/x -> /home/bob/secret that
// alice made. "" (the token's prefix bounds the links) for an admin's
// job, whose paths no rule restricts, and when no rule allows p any more
// (the rules changed after the submission).
func (a *Check) LinkBase(ep, p, need string) string {
	if a.u.Admin {
		return ""
	}
	best := ""
	for _, r := range a.rules {
		if allows(r, a.u, ep, p, need) {
			if pre := prefix(r, a.u); best == "" || len(pre) < len(best) {
				best = pre
			}
		}
	}
	return best
}
