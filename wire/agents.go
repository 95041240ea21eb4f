package wire

import "time"

// EndpointOut is an endpoint's status.
type EndpointOut struct {
	Name          string    `json:"name"`
	URL           string    `json:"url"`
	Up            bool      `json:"up"`
	MaxThroughput float64   `json:"max_throughput,omitempty" doc:"Configured maximum, bytes/s."`
	MaxCC         int       `json:"max_cc,omitempty"`
	Throughput    float64   `json:"throughput" doc:"Observed aggregate bytes/s now."`
	Peak          float64   `json:"peak_throughput,omitempty" doc:"Highest aggregate observed, bytes/s."`
	CC            int       `json:"cc" doc:"Concurrent partial transfers now."`
	Registered    time.Time `json:"registered"`
	LastSeen      time.Time `json:"last_seen"`
	Kind          string    `json:"kind" enum:"agent,storage" doc:"agent: a sluice agent that joined; storage: a GridFTP or XRootD server an admin registered, which the service reaches itself."`
	Via           string    `json:"via,omitempty" doc:"Storage endpoints: the agent that moves their bytes to and from a storage server they cannot copy with themselves."`
	Credential    string    `json:"credential,omitempty" doc:"Storage endpoints, to admins: what the credential holds and when it expires (never a secret)."`
}

// StorageEndpointIn registers or changes a storage endpoint (admins).
type StorageEndpointIn struct {
	URL           string        `json:"url" minLength:"1" maxLength:"2048" doc:"The server: gsiftp://host[:port], ftp://host[:port] or root://host[:port]; jobs then name files on it by such URLs or as sluice://NAME/path."`
	Via           string        `json:"via,omitempty" maxLength:"64" doc:"The agent that moves the bytes between this server and a storage server it cannot copy with (GridFTP and XRootD); a joined agent's name."`
	MaxCC         int           `json:"max_cc,omitempty" minimum:"0" doc:"Most partial transfers at once on it (0: no limit)."`
	MaxThroughput float64       `json:"max_throughput,omitempty" minimum:"0" doc:"Bytes/s (0: learned from what it moves)."`
	Credential    *CredentialIn `json:"credential,omitempty" doc:"Replaces the endpoint's credential ({} removes it); absent, it is kept. Kept by the server, never shown, sent only to the servers and agents of its transfers."`
}

// CredentialIn is a storage endpoint's credential.
type CredentialIn struct {
	Username  string    `json:"username,omitempty" doc:"FTP user, or XRootD user name (unix)."`
	Password  string    `json:"password,omitempty" doc:"FTP password."`
	Token     string    `json:"token,omitempty" doc:"Bearer token (XRootD)."`
	X509Proxy string    `json:"x509_proxy,omitempty" doc:"X.509 proxy certificate and key, PEM (gsiftp)."`
	Expires   time.Time `json:"expires,omitzero" doc:"When it stops working; with refresh, the server gets a fresh one before then."`
	Refresh   []string  `json:"refresh,omitempty" doc:"A command (argv) on the server that prints a fresh credential's JSON (these fields); run when the credential has a quarter of its life, or ten minutes, left."`
}

// AgentIn is what an agent reports.
type AgentIn struct {
	Name          string  `json:"name" minLength:"1" maxLength:"64"`
	URL           string  `json:"url" minLength:"1" maxLength:"2048" doc:"Where the agent serves: http(s)://host:port."`
	MaxThroughput float64 `json:"max_throughput,omitempty" minimum:"0" doc:"Bytes/s."`
	MaxCC         int     `json:"max_cc,omitempty" minimum:"0"`
}

// JoinedOut answers a registration.
type JoinedOut struct {
	Key              []byte  `json:"key" doc:"The data-token key (base64): accept tokens signed with it."`
	HeartbeatSeconds float64 `json:"heartbeat_seconds"`
	Scheduler        string  `json:"scheduler"`
}
