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

// DataTokenIn asks for a data token for one path of an agent, for
// reading or writing it directly (sluice cp with the service's names).
type DataTokenIn struct {
	URL   string `json:"url" minLength:"1" maxLength:"4096" doc:"sluice://ENDPOINT/path of an agent (by the endpoint's name); a path ending in / names a directory."`
	Write bool   `json:"write,omitempty" doc:"Read and write in the path's directory (in the path itself when it ends in /), where a copy writes its temporary file and renames it; otherwise read the path and what is below it."`
}

// DataTokenOut is a data token for one agent, scoped by the caller's
// access rules as a job's file would be.
type DataTokenOut struct {
	Endpoint string    `json:"endpoint"`
	Agent    string    `json:"agent" doc:"The agent's address, sluice://host:port or sluices://host:port (TLS)."`
	Path     string    `json:"path" doc:"The path asked for, cleaned."`
	Prefix   string    `json:"prefix" doc:"What the token covers: the path (reading) or its directory (writing)."`
	Scope    string    `json:"scope" doc:"read, or rw."`
	Token    string    `json:"token" doc:"Bearer token for the agent's data requests."`
	Expires  time.Time `json:"expires" doc:"Ask for a new one before then."`
}
