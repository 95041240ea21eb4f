package wire

import "time"

// UserOut is a user.
type UserOut struct {
	Name  string `json:"name"`
	VO    string `json:"vo"`
	Admin bool   `json:"admin"`
}

// TokenIn asks for an API token.
type TokenIn struct {
	User       string `json:"user,omitempty" maxLength:"64" doc:"Whose token (default: the caller)."`
	VO         string `json:"vo,omitempty" maxLength:"64" doc:"The user's VO if the user is new (default: default)."`
	Admin      bool   `json:"admin,omitempty" doc:"Make a new user an admin (admins only)."`
	TTLSeconds int64  `json:"ttl_seconds,omitempty" minimum:"0" maximum:"315360000" doc:"Lifetime, at most ten years; 0: no expiry."`
	Label      string `json:"label,omitempty" maxLength:"256"`
}

// TokenOut is a new token, shown once.
type TokenOut struct {
	Token   string     `json:"token"`
	User    string     `json:"user"`
	VO      string     `json:"vo"`
	Admin   bool       `json:"admin"`
	Expires *time.Time `json:"expires,omitempty"`
}

// TokenInfo describes an API token without its secret: ID is the start
// of its hash, which names it for RevokeToken.
type TokenInfo struct {
	ID      string    `json:"id" doc:"Names the token for revocation (the start of its hash)."`
	Label   string    `json:"label,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero" doc:"Absent: no expiry."`
	Expired bool      `json:"expired,omitempty"`
}
