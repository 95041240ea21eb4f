package wire

import "time"

// AllocationIn asks for streams between two endpoints.
type AllocationIn struct {
	Source      string `json:"source" minLength:"1" maxLength:"256" doc:"Source endpoint name."`
	Destination string `json:"destination" minLength:"1" maxLength:"256" doc:"Destination endpoint name."`
	Client      string `json:"client,omitempty" maxLength:"128" doc:"Names your transfer client (several per user); allocations belong to the user and this name."`
	Streams     int    `json:"streams,omitempty" minimum:"0" maximum:"65536" doc:"Total streams wanted; 0 (default): as many as the policy gives."`
}

// AllocationUpdateIn asks for more streams (streams 0), or for a given
// number, and renews the lease.
type AllocationUpdateIn struct {
	Streams int    `json:"streams,omitempty" minimum:"0" maximum:"65536" doc:"Total streams wanted; 0: as many more as the policy gives."`
	Client  string `json:"client,omitempty" maxLength:"128" doc:"The client name given at the request, if any."`
}

// AllocationOut is an allocation.
type AllocationOut struct {
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	Destination string    `json:"destination"`
	Client      string    `json:"client"`
	VO          string    `json:"vo"`
	Streams     int       `json:"streams" doc:"Streams the client may run now."`
	Want        int       `json:"want,omitempty"`
	Shrunk      int       `json:"shrunk,omitempty" doc:"Streams the service took back since your last update (run fewer)."`
	Reason      string    `json:"reason,omitempty" doc:"Why streams were taken back."`
	MaxStreams  int       `json:"max_streams,omitempty" doc:"The most streams this allocation can hold: the pair's per-client limit now."`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires" doc:"The lease ends then unless renewed by an update."`
}

// PolicyConfig is the Policy Service's configuration.
type PolicyConfig struct {
	// Policy is "greedy" (the paper's, default) or "weighted-shares";
	// a Starlark policy ("starlark:PATH") is loaded from the server's
	// own configuration (`sluice serve --policy`), never through the API.
	Policy string `json:"policy"`
	// Defaults apply to pairs without their own Params.
	Defaults PolicyParams `json:"defaults"`
	// Pairs override Defaults per endpoint pair.
	Pairs []PairPolicy `json:"pairs,omitempty"`
	// Weights are VO weights on every pair (weighted-shares).
	Weights map[string]float64 `json:"weights,omitempty"`
}

// PolicyParams are the paper's parameters (Table I).
type PolicyParams struct {
	Initial      int     `json:"initial" doc:"s_i: streams of a new allocation."`
	Update       int     `json:"update" doc:"s_u: streams added by an update."`
	PairMax      int     `json:"pair_max" doc:"s_pmax: most streams between the pair."`
	ClientMax    int     `json:"client_max" doc:"s_cmax: most streams of one allocation."`
	LeaseSeconds float64 `json:"lease_seconds" doc:"An allocation not updated for this long is released (1 s to a year)."`
}

// PairPolicy is one pair's parameters, and optionally its own VO weights.
type PairPolicy struct {
	Source      string             `json:"source"`
	Destination string             `json:"destination"`
	Params      PolicyParams       `json:"params"`
	Weights     map[string]float64 `json:"weights,omitempty"`
}

// PairUsage is one pair's allocated streams, in all and per VO.
type PairUsage struct {
	Source      string         `json:"source"`
	Destination string         `json:"destination"`
	PairMax     int            `json:"pair_max"`
	Used        int            `json:"used" doc:"Streams allocated (those being taken back included)."`
	Draining    int            `json:"draining" doc:"Streams taken back that clients have not yet heard of."`
	Allocations int            `json:"allocations"`
	PerVO       map[string]int `json:"per_vo" doc:"Streams allocated per VO."`
}
