package wire

import (
	"errors"
	"strings"
)

// The kinds of failure the API maps to HTTP statuses (401, 403, 404, 422,
// 503, 409). The packages behind the API wrap them, so that a refusal
// reads the same whichever package made it.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrNotFound     = errors.New("not found")
	ErrInvalid      = errors.New("invalid request")
	// ErrUnavailable: an endpoint the request needs did not answer
	// (down, restarting, unreachable); the same request may work later.
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict: the request clashes with the current state (an agent
	// name in use by a live agent elsewhere); it may work later.
	ErrConflict = errors.New("conflict")
)

// ValidName reports whether s may name a user, a VO, an endpoint or an
// agent: 1-64 letters, digits and ._-@, and not "." or "..". Names stand
// in paths too (access rules' {user} and {vo}), where "." and ".." would
// move a prefix.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)) {
			return false
		}
	}
	return true
}
