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
