package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/policy/starlarkpolicy"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// The Policy Service (Chervenak et al., "Adaptation and Policy-Based Resource
// Allocation for Efficient Bulk Data Transfers in High Performance Computing
// Environments") runs inside the server: clients
// (outside transfer tools, `sluice cp --policy-server`, and the
// scheduling loop itself for the service's own jobs) ask for streams on an
// endpoint pair and get an allocation, a lease they renew by updating it.
// Package policy owns the rules; this file checks callers, persists every
// change in the store (a restarted server honours the leases it granted)
// and keeps the configuration, which admins change without a restart.

// policySetting is the store setting holding the PolicyConfig as JSON.
const policySetting = "policy.config"

// PolicyConfig is wire.PolicyConfig: the API documents live in package wire.
type PolicyConfig = wire.PolicyConfig

// PolicyParams is wire.PolicyParams: the API documents live in package wire.
type PolicyParams = wire.PolicyParams

// PairPolicy is wire.PairPolicy: the API documents live in package wire.
type PairPolicy = wire.PairPolicy

// maxLeaseSeconds bounds a lease: far beyond any sensible one, and well
// inside what a time.Duration holds.
const maxLeaseSeconds = 366 * 24 * 3600

// minLeaseSeconds is the shortest lease: clients renew at a third of it,
// over the network, and the scheduling loop every cycle (0.5 s). A lease
// shorter than that ends before its client can renew it, and with every
// allocation gone at once the pair's limit holds nothing back.
const minLeaseSeconds = 1

// checkParams is Params.Validate with the API's names, and what the
// service would otherwise clamp without a word.
func checkParams(p PolicyParams) error {
	switch {
	case !(p.LeaseSeconds >= minLeaseSeconds && p.LeaseSeconds <= maxLeaseSeconds):
		return fmt.Errorf("lease_seconds %v: want %d to %d seconds (a year); clients renew at a third of the lease", p.LeaseSeconds, minLeaseSeconds, maxLeaseSeconds)
	case p.Initial > p.ClientMax:
		return fmt.Errorf("initial %d is above client_max %d: no allocation may hold it", p.Initial, p.ClientMax)
	}
	return toParams(p).Validate()
}

// checkInitial refuses, for the built-in policies, an open pair with
// initial 0: both start every allocation at s_i and grow it only from
// there, so no client would ever get a stream, and all would wait
// without an error.
func checkInitial(policyName string, p PolicyParams) error {
	if p.Initial == 0 && p.PairMax > 0 && p.ClientMax > 0 {
		return fmt.Errorf("initial 0: %s starts every allocation at initial streams and grows it from there, so no client would ever get one; close the pair with pair_max 0 instead", policyName)
	}
	return nil
}

func toParams(p PolicyParams) policy.Params {
	return policy.Params{Initial: p.Initial, Update: p.Update, PairMax: p.PairMax, ClientMax: p.ClientMax,
		Lease: time.Duration(p.LeaseSeconds * float64(time.Second))}
}

func fromParams(p policy.Params) PolicyParams {
	return PolicyParams{Initial: p.Initial, Update: p.Update, PairMax: p.PairMax, ClientMax: p.ClientMax,
		LeaseSeconds: p.Lease.Seconds()}
}

// defaultPolicyConfig is the paper's Table III/VII setting.
func defaultPolicyConfig() PolicyConfig {
	return PolicyConfig{Policy: "greedy", Defaults: fromParams(policy.DefaultParams())}
}

// newPolicyService builds the service from cfg; starlark, if set, is the
// server's own Starlark policy, which wins over cfg.Policy.
func (s *Server) newPolicyService(cfg PolicyConfig, starlark policy.Policy) (*policy.Service, error) {
	pc := policy.Config{Defaults: toParams(cfg.Defaults), Pairs: map[policy.Pair]policy.Params{},
		AnyPair: true, Weights: cfg.Weights, PairWeights: map[policy.Pair]map[string]float64{},
		OnPolicyError: func(err error) { s.log.Warn("policy error", "err", err) },
		OnExpire:      s.noteExpired}
	for _, p := range cfg.Pairs {
		pair := policy.Pair{Src: p.Source, Dst: p.Destination}
		pc.Pairs[pair] = toParams(p.Params)
		if p.Weights != nil {
			pc.PairWeights[pair] = p.Weights
		}
	}
	switch {
	case starlark != nil:
		pc.Policy = starlark
	case cfg.Policy == "" || cfg.Policy == "greedy":
		pc.Policy = policy.Greedy{}
	case cfg.Policy == "weighted-shares":
		pc.Policy = policy.WeightedShares{}
	default:
		return nil, fmt.Errorf("%w: policy %q: want greedy or weighted-shares (Starlark policies come from the server's --policy)", ErrInvalid, cfg.Policy)
	}
	svc, err := policy.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return svc, nil
}

// loadPolicy builds the Policy Service from the stored configuration and
// allocations.
func (s *Server) loadPolicy(ctx context.Context) error {
	cfg := defaultPolicyConfig()
	raw, err := s.st.Setting(ctx, policySetting)
	saved := err == nil // an administrator set it through the API
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return fmt.Errorf("server: stored policy configuration: %w", err)
		}
	}
	// --policy, when given, decides the policy at every start (and
	// SetPolicy keeps to it); without it the stored configuration does,
	// as an administrator last set it through the API.
	var star policy.Policy
	if s.cfg.Policy != "" {
		if star, err = starlarkpolicy.Load(s.cfg.Policy, starlarkpolicy.Options{}); err != nil {
			return fmt.Errorf("server: --policy: %w", err)
		}
		if _, ok := star.(*starlarkpolicy.Policy); !ok {
			if saved && cfg.Policy != s.cfg.Policy && cfg.Policy != "" {
				s.log.Warn("--policy overrides the policy stored through the API", "policy", s.cfg.Policy, "stored", cfg.Policy)
			}
			cfg.Policy, star = s.cfg.Policy, nil
		}
	}
	svc, err := s.newPolicyService(cfg, star)
	if err != nil {
		return err
	}
	stored, err := s.st.Allocations(ctx)
	if err != nil {
		return err
	}
	as := make([]policy.Allocation, len(stored))
	for i, a := range stored {
		as[i] = policy.Allocation{ID: a.ID, Pair: policy.Pair{Src: a.Src, Dst: a.Dst}, Client: a.Client, VO: a.VO,
			Streams: a.Streams, Want: a.Want, Draining: a.Draining, Reason: a.Reason, Created: a.Created, Expires: a.Expires}
	}
	if err := svc.Restore(as); err != nil {
		return fmt.Errorf("server: restoring allocations: %w", err)
	}
	s.polMu.Lock()
	s.pol, s.polCfg, s.polStar = svc, cfg, star
	s.polMu.Unlock()
	return nil
}

// AllocationRequest asks for streams on a pair.
type AllocationRequest struct {
	Source, Destination string // endpoint names
	// Client names the caller's transfer client; allocations belong to
	// the user and this name (default: the user's name).
	Client string
	Want   int // total streams wanted; 0: as many as the policy gives
}

// clientOf is the policy identity of a caller: its user (so one user
// cannot touch another's allocations) and VO.
func clientOf(c Caller, client string) policy.Caller {
	id := c.User.Name
	if client != "" {
		id += "/" + client
	}
	return policy.Caller{Client: id, VO: c.User.VO}
}

// policyErr maps the policy package's errors to the server's.
func (s *Server) policyErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, policy.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, policy.ErrForbidden):
		// Another user's allocation is not shown to exist, nor whose
		// it is: the answer is the one for an unknown id.
		return fmt.Errorf("%w: no such allocation", ErrNotFound)
	case errors.Is(err, policy.ErrInvalid):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, policy.ErrPolicy):
		// The operator's policy is broken: the caller can do nothing
		// about it, and its details (a file path, a stack) are the
		// operator's.
		s.log.Error("the policy failed", "err", err)
		return errors.New("the Policy Service's policy failed; the server log says why")
	}
	return err
}

// policyService returns the Policy Service and a function to call when
// the operation on it is over: SetPolicy swaps the service, and waits
// for operations on the old one to end so that none is lost.
func (s *Server) policyService() (*policy.Service, func()) {
	s.polMu.RLock()
	return s.pol, s.polMu.RUnlock
}

// persistAllocations writes what an operation changed: put, and the
// allocations that expired (or were released) since.
func (s *Server) persistAllocations(ctx context.Context, put []policy.Allocation, del []store.AllocationGone) error {
	sa := make([]store.Allocation, 0, len(put))
	for _, a := range put {
		sa = append(sa, store.Allocation{ID: a.ID, Src: a.Pair.Src, Dst: a.Pair.Dst, Client: a.Client, VO: a.VO,
			Streams: a.Streams, Want: a.Want, Draining: a.Draining, Reason: a.Reason, Created: a.Created, Expires: a.Expires})
	}
	return s.st.SaveAllocations(ctx, sa, del)
}

// noteExpired is the Policy Service's OnExpire: it keeps the allocation
// for expiredIDs. Reads (a GET, a list, the loop's look-ups at start)
// expire allocations too, without writing; their rows would otherwise
// stay in the store for good.
func (s *Server) noteExpired(a policy.Allocation) {
	s.polGoneMu.Lock()
	// Conditional on the expiry seen here: with several servers on one
	// database, another may have renewed it since.
	s.polGone = append(s.polGone, store.AllocationGone{ID: a.ID, Expires: a.Expires})
	s.polGoneMu.Unlock()
}

// expiredIDs ends the allocations whose leases ran out by now and returns
// the IDs of every allocation that expired since the last call, by
// whichever operation, so that the store forgets them with this write.
func (s *Server) expiredIDs(svc *policy.Service, now time.Time) []store.AllocationGone {
	svc.Expire(now)
	s.polGoneMu.Lock()
	defer s.polGoneMu.Unlock()
	ids := s.polGone
	s.polGone = nil
	return ids
}

// lockKey locks the stripe of polKeys that key falls in.
func (s *Server) lockKey(key string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(key))
	m := &s.polKeys[h.Sum32()%uint32(len(s.polKeys))]
	m.Lock()
	return m.Unlock
}

// MaxAllocationsPerUser bounds the live allocations of one (non-admin)
// user, over all pairs and client names.
const MaxAllocationsPerUser = 64

// RequestAllocation grants an allocation on a pair of registered
// endpoints (the paper's initial PROVISION).
func (s *Server) RequestAllocation(ctx context.Context, c Caller, r AllocationRequest) (policy.Allocation, error) {
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return policy.Allocation{}, err
	}
	for _, e := range []string{r.Source, r.Destination} {
		if _, ok := idx[e]; !ok {
			return policy.Allocation{}, fmt.Errorf("%w: no endpoint %q is registered (see `sluice endpoints`)", ErrInvalid, e)
		}
	}
	if len(r.Client) > 128 {
		return policy.Allocation{}, fmt.Errorf("%w: client name longer than 128 bytes", ErrInvalid)
	}
	// A NUL cannot be stored in PostgreSQL (the write failed, a server
	// error), and a newline forges lines in logs and listings.
	if !utf8.ValidString(r.Client) || strings.ContainsFunc(r.Client, unicode.IsControl) {
		return policy.Allocation{}, fmt.Errorf("%w: client name %q: control characters or invalid UTF-8", ErrInvalid, r.Client)
	}
	svc, done := s.policyService()
	defer done()
	now := s.now()
	del := s.expiredIDs(svc, now)
	cl := clientOf(c, r.Client)
	if !c.User.Admin {
		// Counted and granted as one step: requests at once would all
		// count the same number.
		defer s.lockKey("user\x00" + c.User.Name)()
		// Each allocation is a client's share of a pair: one user
		// holding hundreds would take colleagues' share of their VO's
		// (weighted-shares splits a VO's streams among its clients).
		held := 0
		for _, a := range svc.List(now, policy.Filter{}) {
			if a.Client == c.User.Name || strings.HasPrefix(a.Client, c.User.Name+"/") {
				held++
			}
		}
		if held >= MaxAllocationsPerUser {
			_ = s.persistAllocations(ctx, nil, del)
			return policy.Allocation{}, fmt.Errorf("%w: you hold %d allocations, the most one user may; release some (DELETE /v1/allocations/{id})", ErrInvalid, held)
		}
	}
	a, err := svc.Request(now, policy.Request{Pair: policy.Pair{Src: idx[r.Source].Name, Dst: idx[r.Destination].Name},
		Client: cl.Client, VO: cl.VO, Want: r.Want})
	if err != nil {
		return policy.Allocation{}, s.policyErr(err)
	}
	if err := s.persistAllocations(ctx, []policy.Allocation{a}, del); err != nil {
		// Not durable: take it back rather than grant a lease a
		// restart would forget.
		_ = svc.Release(now, a.ID, cl)
		return policy.Allocation{}, err
	}
	return a, nil
}

// UpdateAllocation is the paper's update PROVISION: it renews the lease
// and may grow (or, told by want, shrink) the allocation; Shrunk reports
// what the service took back since the last update.
func (s *Server) UpdateAllocation(ctx context.Context, c Caller, id, client string, want int) (policy.Allocation, error) {
	svc, done := s.policyService()
	defer done()
	// The update's write must not land after a release's delete (which
	// would bring the allocation back at the next start).
	defer s.lockKey("id\x00" + id)()
	now := s.now()
	del := s.expiredIDs(svc, now)
	a, err := svc.Update(now, id, s.ownerFor(svc, now, c, id, client), want)
	if err != nil {
		_ = s.persistAllocations(ctx, nil, del)
		return policy.Allocation{}, s.policyErr(err)
	}
	return a, s.persistAllocations(ctx, []policy.Allocation{a}, del)
}

// ReleaseAllocation returns an allocation's streams to the pair.
func (s *Server) ReleaseAllocation(ctx context.Context, c Caller, id, client string) error {
	svc, done := s.policyService()
	defer done()
	defer s.lockKey("id\x00" + id)()
	now := s.now()
	del := s.expiredIDs(svc, now)
	if err := svc.Release(now, id, s.ownerFor(svc, now, c, id, client)); err != nil {
		_ = s.persistAllocations(ctx, nil, del)
		return s.policyErr(err)
	}
	return s.persistAllocations(ctx, nil, append(del, store.AllocationGone{ID: id}))
}

// ownerFor is the policy identity c acts as on allocation id: admins act
// for its owner; users as themselves (with the client name they give, or
// the allocation's own when it is theirs).
func (s *Server) ownerFor(svc *policy.Service, now time.Time, c Caller, id, client string) policy.Caller {
	a, err := svc.Get(now, id)
	if err != nil {
		return clientOf(c, client)
	}
	if c.User.Admin {
		return a.Owner()
	}
	if client == "" && ownsClient(c.User.Name, a.Client) {
		return policy.Caller{Client: a.Client, VO: c.User.VO}
	}
	return clientOf(c, client)
}

// Allocation returns one allocation the caller may see.
func (s *Server) Allocation(ctx context.Context, c Caller, id string) (policy.Allocation, error) {
	svc, done := s.policyService()
	defer done()
	a, err := svc.Get(s.now(), id)
	if err != nil {
		return a, s.policyErr(err)
	}
	if !c.User.Admin && !ownedBy(a, c) {
		return policy.Allocation{}, fmt.Errorf("%w: allocation %q", ErrNotFound, id)
	}
	return a, nil
}

func ownedBy(a policy.Allocation, c Caller) bool {
	return a.VO == c.User.VO && ownsClient(c.User.Name, a.Client)
}

// ownsClient reports whether a policy client name is user's: the name
// itself, or user/NAME (clientOf).
func ownsClient(user, client string) bool {
	return client == user || strings.HasPrefix(client, user+"/")
}

// Allocations lists the live allocations the caller may see (admins: all),
// by pair then ID.
func (s *Server) Allocations(ctx context.Context, c Caller) []policy.Allocation {
	svc, done := s.policyService()
	defer done()
	var out []policy.Allocation
	for _, a := range svc.List(s.now(), policy.Filter{}) {
		if c.User.Admin || ownedBy(a, c) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pair != out[j].Pair {
			return out[i].Pair.String() < out[j].Pair.String()
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// PairUsage is wire.PairUsage: the API documents live in package wire.
type PairUsage = wire.PairUsage

// PolicyUsage is every pair's allocated streams, per VO (admins).
func (s *Server) PolicyUsage(ctx context.Context, c Caller) ([]PairUsage, error) {
	if !c.User.Admin {
		return nil, fmt.Errorf("%w: only admins see every pair's allocations", ErrForbidden)
	}
	svc, done := s.policyService()
	defer done()
	now := s.now()
	perVO := map[policy.Pair]map[string]int{}
	for _, a := range svc.List(now, policy.Filter{}) {
		if perVO[a.Pair] == nil {
			perVO[a.Pair] = map[string]int{}
		}
		perVO[a.Pair][a.VO] += a.Streams + a.Draining
	}
	out := []PairUsage{}
	for _, u := range svc.Usage(now) {
		v := perVO[u.Pair]
		if v == nil {
			v = map[string]int{}
		}
		out = append(out, PairUsage{Source: u.Pair.Src, Destination: u.Pair.Dst, PairMax: u.Params.PairMax,
			Used: u.Used, Draining: u.Draining, Allocations: u.Allocations, PerVO: v})
	}
	return out, nil
}

// Policy returns the configuration (any user may read the rules).
func (s *Server) Policy(ctx context.Context, c Caller) PolicyConfig {
	s.polMu.RLock()
	defer s.polMu.RUnlock()
	cfg := s.polCfg
	if s.polStar != nil {
		cfg.Policy = s.cfg.Policy
	}
	return cfg
}

// SetPolicy replaces the configuration at run time (admins): parameters
// per pair and per VO apply from the next operation; allocations already
// granted keep their streams (lowered limits bind as they are updated).
func (s *Server) SetPolicy(ctx context.Context, c Caller, cfg PolicyConfig) (PolicyConfig, error) {
	if !c.User.Admin {
		return PolicyConfig{}, fmt.Errorf("%w: only admins change the policy", ErrForbidden)
	}
	if cfg.Policy == "" && !strings.HasPrefix(s.cfg.Policy, "starlark:") {
		// "" is the default policy: the one --policy names, else
		// greedy. On a server started with --policy weighted-shares
		// it ran greedy (ignoring the weights just accepted) until the
		// next start.
		cfg.Policy = cmp.Or(s.cfg.Policy, "greedy")
	}
	if err := checkParams(cfg.Defaults); err != nil {
		return PolicyConfig{}, fmt.Errorf("%w: defaults: %w", ErrInvalid, err)
	}
	weights := len(cfg.Weights) > 0
	seen := map[[2]string]bool{}
	for _, p := range cfg.Pairs {
		if p.Source == "" || p.Destination == "" {
			return PolicyConfig{}, fmt.Errorf("%w: a pair needs a source and a destination", ErrInvalid)
		}
		if seen[[2]string{p.Source, p.Destination}] {
			return PolicyConfig{}, fmt.Errorf("%w: pair %s->%s is listed twice", ErrInvalid, p.Source, p.Destination)
		}
		seen[[2]string{p.Source, p.Destination}] = true
		if err := checkParams(p.Params); err != nil {
			return PolicyConfig{}, fmt.Errorf("%w: pair %s->%s: %w", ErrInvalid, p.Source, p.Destination, err)
		}
		weights = weights || len(p.Weights) > 0
	}
	name := cmp.Or(cfg.Policy, s.cfg.Policy, "greedy")
	if weights && name == "greedy" {
		return PolicyConfig{}, fmt.Errorf("%w: VO weights apply to the weighted-shares policy; greedy ignores them", ErrInvalid)
	}
	if name == "greedy" || name == "weighted-shares" {
		if err := checkInitial(name, cfg.Defaults); err != nil {
			return PolicyConfig{}, fmt.Errorf("%w: defaults: %w", ErrInvalid, err)
		}
		for _, p := range cfg.Pairs {
			if err := checkInitial(name, p.Params); err != nil {
				return PolicyConfig{}, fmt.Errorf("%w: pair %s->%s: %w", ErrInvalid, p.Source, p.Destination, err)
			}
		}
	}
	s.polMu.Lock()
	defer s.polMu.Unlock()
	if s.polStar != nil && cfg.Policy != "" && cfg.Policy != s.cfg.Policy {
		return PolicyConfig{}, fmt.Errorf("%w: the server runs the Starlark policy %s (--policy); change it there", ErrInvalid, s.cfg.Policy)
	}
	if s.polStar == nil && s.cfg.Policy != "" && cfg.Policy != "" && cfg.Policy != s.cfg.Policy {
		// The flag would undo the change at the next start.
		return PolicyConfig{}, fmt.Errorf("%w: the server was started with --policy %s, which decides the policy at every start: change it there, or start without --policy to set it here", ErrInvalid, s.cfg.Policy)
	}
	// A new service with the new rules and the current allocations:
	// checked in full before anything changes.
	svc, err := s.newPolicyService(cfg, s.polStar)
	if err != nil {
		return PolicyConfig{}, err
	}
	if err := svc.Restore(s.pol.State()); err != nil {
		return PolicyConfig{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return PolicyConfig{}, err
	}
	if err := s.st.PutSetting(ctx, policySetting, string(raw)); err != nil {
		return PolicyConfig{}, err
	}
	// Lowered limits bind now: allocations above them shrink, and their
	// clients (the scheduler's VOs included) hear at the next update.
	if shrunk := svc.EnforceLimits(s.now()); len(shrunk) > 0 {
		s.log.Info("policy change shrank allocations over the new limits", "allocations", len(shrunk))
		if err := s.persistAllocations(ctx, shrunk, nil); err != nil {
			s.log.Warn("storing allocations", "err", err)
		}
	}
	s.pol, s.polCfg = svc, cfg
	return cfg, nil
}
