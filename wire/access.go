package wire

// AccessRule grants one kind of access to paths under a prefix.
type AccessRule struct {
	Endpoint string `json:"endpoint" doc:"endpoint name, or * for every endpoint"`
	Path     string `json:"path" doc:"path prefix, matched by whole elements; {user} and {vo} stand for the caller's name and VO"`
	User     string `json:"user,omitempty" doc:"user name, or * for every user"`
	VO       string `json:"vo,omitempty" doc:"VO name, or * for every VO"`
	Access   string `json:"access" enum:"read,write" doc:"read, or write (includes read)"`
}

// AccessConfig is the whole set of rules.
type AccessConfig struct {
	Rules []AccessRule `json:"rules" doc:"access rules; a path is allowed if any rule allows it"`
}
