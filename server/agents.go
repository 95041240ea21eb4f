package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/url"
	"time"

	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// agentState is the last heartbeat of an agent.
type agentState struct {
	ep     store.Endpoint
	last   time.Time
	stored time.Time // when the store last got its LastSeen
}

// AgentInfo is what an agent reports when it joins and at each heartbeat.
type AgentInfo struct {
	Name string
	// URL is where the agent serves (http://host:port or https://...).
	URL           string
	MaxThroughput float64 // bytes/s, 0: unknown
	MaxCC         int     // 0: no limit
}

// Joined is the server's answer to a registration.
type Joined struct {
	// Key is the agent's data-token key: the agent accepts tokens the
	// server mints with it for each transfer. Each agent has its own
	// (agentKey), so an agent, or whoever reads its memory, can mint
	// tokens for itself only, not for the other agents.
	Key            []byte
	HeartbeatEvery time.Duration
}

// agentKey is the data-token key of the agent named name: an HMAC of the
// name under the service's key. Every server of a cluster derives the
// same one from the shared key, and nothing per agent is stored.
func (s *Server) agentKey(name string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("sluice agent data-token key\x00"))
	m.Write([]byte(name))
	return m.Sum(nil)
}

// CheckJoin returns nil if token is the join token agents present.
func (s *Server) CheckJoin(token string) error { return s.checkJoin(token) }

func (s *Server) checkJoin(token string) error {
	if subtle.ConstantTimeCompare([]byte(hashToken(token)), []byte(s.join)) != 1 {
		return fmt.Errorf("%w: not the join token (see join.token in the server's data directory)", ErrUnauthorized)
	}
	return nil
}

func (a AgentInfo) check() error {
	if !wire.ValidName(a.Name) {
		return fmt.Errorf("%w: agent name %q (letters, digits, '.', '_', '-', '@')", ErrInvalid, a.Name)
	}
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%w: agent URL %q: want http(s)://host:port", ErrInvalid, a.URL)
	}
	if a.MaxThroughput < 0 || a.MaxCC < 0 {
		return fmt.Errorf("%w: negative limits", ErrInvalid)
	}
	return nil
}

// Register records an agent (endpoint) that presents the join token, and
// returns the data-token key it must accept.
func (s *Server) Register(ctx context.Context, joinToken string, a AgentInfo) (Joined, error) {
	if err := s.checkJoin(joinToken); err != nil {
		return Joined{}, err
	}
	if err := s.beat(ctx, a, true); err != nil {
		return Joined{}, err
	}
	s.log.Info("agent registered", "name", a.Name, "url", a.URL)
	// A restarted agent may be owed removals of partial files (see
	// sweepPartials): the next tick tries them.
	s.sweepSoon.Store(true)
	return Joined{Key: s.agentKey(a.Name), HeartbeatEvery: s.cfg.HeartbeatEvery}, nil
}

// Heartbeat records that an agent is alive (and its current limits).
func (s *Server) Heartbeat(ctx context.Context, joinToken string, a AgentInfo) error {
	if err := s.checkJoin(joinToken); err != nil {
		return err
	}
	return s.beat(ctx, a, false)
}

func (s *Server) beat(ctx context.Context, a AgentInfo, register bool) error {
	if err := a.check(); err != nil {
		return err
	}
	u, _ := url.Parse(a.URL)
	now := s.now()
	e := store.Endpoint{Name: a.Name, URL: u.Scheme + "://" + u.Host, MaxThroughput: a.MaxThroughput, MaxCC: a.MaxCC, Registered: now, LastSeen: now, Up: true}
	s.mu.Lock()
	known := s.agents[a.Name]
	s.mu.Unlock()
	if register || known == nil || known.ep.URL != e.URL {
		// An agent of this name beating to another server of the
		// cluster (or to this one since it restarted) is known from
		// the store only; a heartbeat stores its URL as a registration
		// does, so it must not take a live agent's name either.
		if err := s.nameFree(ctx, e, now); err != nil {
			return err
		}
	}
	s.mu.Lock()
	prev := s.agents[a.Name]
	if prev != nil && prev.ep.URL != e.URL && now.Sub(prev.last) < s.cfg.HeartbeatTimeout {
		s.mu.Unlock()
		return nameInUse(e.Name, prev.ep.URL, now.Sub(prev.last), s.cfg.HeartbeatTimeout)
	}
	changed := prev == nil || prev.ep.URL != e.URL || prev.ep.MaxThroughput != e.MaxThroughput || prev.ep.MaxCC != e.MaxCC
	// Other servers learn of heartbeats through the store: a few writes
	// per heartbeat timeout are enough for them to tell up from down.
	stale := prev == nil || now.Sub(prev.stored) >= s.cfg.HeartbeatTimeout/4
	st := &agentState{ep: e, last: now}
	if prev != nil {
		st.stored = prev.stored
	}
	if register || changed || stale {
		st.stored = now
	}
	s.agents[a.Name] = st
	s.mu.Unlock()
	if register || changed || stale {
		if err := s.st.UpsertEndpoint(ctx, e); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	if register {
		s.wakeUp() // a new partition to take
	}
	return nil
}

// nameFree refuses e's name while the store says another URL of that
// name beat within the heartbeat timeout: a second agent (or anyone with
// the join token) must not take a live agent's name and redirect its
// transfers. A restarted agent at a new address gets the name once the
// old one has been silent that long (its registration is retried).
func (s *Server) nameFree(ctx context.Context, e store.Endpoint, now time.Time) error {
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	for _, o := range eps {
		if o.Name == e.Name && o.Storage() {
			return fmt.Errorf("%w: %q is the name of a storage endpoint; give this agent another name", ErrConflict, e.Name)
		}
		if o.Name == e.Name && o.URL != e.URL && o.Up && now.Sub(o.LastSeen) < s.cfg.HeartbeatTimeout {
			return nameInUse(e.Name, o.URL, now.Sub(o.LastSeen), s.cfg.HeartbeatTimeout)
		}
	}
	return nil
}

func nameInUse(name, url string, silent, timeout time.Duration) error {
	return fmt.Errorf("%w: agent name %q is in use by a live agent at %s (last heard %s ago); stop it, or give this agent another name (the name is free %s after the other's last heartbeat)",
		ErrConflict, name, url, silent.Round(time.Millisecond), timeout)
}

// EndpointStatus is an endpoint with its live load.
type EndpointStatus struct {
	store.Endpoint
	Throughput float64 // observed aggregate bytes/s now
	CC         int     // concurrency the scheduler runs there now
	Peak       float64 // highest aggregate observed
}

// Endpoints lists the endpoints.
func (s *Server) Endpoints(ctx context.Context) ([]EndpointStatus, error) {
	eps, err := s.st.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	out := make([]EndpointStatus, len(eps))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range eps {
		out[i] = EndpointStatus{Endpoint: e}
		if l, ok := s.epLive[e.Name]; ok {
			out[i].Throughput, out[i].CC, out[i].Peak, out[i].Up = l.Throughput, l.CC, l.Peak, l.Up
		}
	}
	return out, nil
}
