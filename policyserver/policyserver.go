// Package policyserver hosts the Policy Service (Chervenak et al.,
// "Adaptation and Policy-Based Resource Allocation for Efficient Bulk Data
// Transfers in High Performance Computing Environments") in a server:
// clients (outside transfer tools, `sluice cp --policy-server`, and the
// scheduling loop itself for the service's own jobs) ask for streams on an
// endpoint pair and get an allocation, a lease they renew by updating it.
// Package policy owns the rules; this package checks callers (a user
// touches only their own allocations, and holds at most
// MaxAllocationsPerUser), persists every change in the store (a restarted
// server honours the leases it granted) and keeps the configuration,
// which admins change without a restart.
package policyserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/policy/starlarkpolicy"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Store is what the host asks of the store.
type Store interface {
	Setting(ctx context.Context, key string) (string, error)
	PutSetting(ctx context.Context, key, value string) error
	Allocations(ctx context.Context) ([]store.Allocation, error)
	SaveAllocations(ctx context.Context, put []store.Allocation, del []store.AllocationGone) error
}

// Config configures a Host.
type Config struct {
	Store Store
	// Policy is the server's --policy: "" (the stored configuration
	// decides), greedy, weighted-shares or starlark:PATH, which then
	// decides at every start.
	Policy string
	Clock  clock.Clock  // default clock.System
	Log    *slog.Logger // default slog.Default
}

// Host is the Policy Service of one server.
type Host struct {
	st    Store
	flag  string // Config.Policy
	clock clock.Clock
	log   *slog.Logger

	// The service: held for reading by each operation, for writing
	// while SetConfig swaps it.
	mu   sync.RWMutex
	svc  *policy.Service
	cfg  wire.PolicyConfig
	star policy.Policy // the server's own Starlark policy, or nil
	// gone holds the allocations whose leases ran out, for the next
	// write to delete from the store (under goneMu).
	goneMu sync.Mutex
	gone   []store.AllocationGone
	// keys serialize, per allocation or per user (striped by a hash of
	// the key), an operation on the service with its write to the store,
	// so that the store sees one allocation's changes in the order the
	// service made them, and a user's count of allocations cannot be
	// passed by requests at once.
	keys [64]sync.Mutex
}

// Setting is the store setting holding the configuration as JSON.
const Setting = "policy.config"

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
func checkParams(p wire.PolicyParams) error {
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
func checkInitial(policyName string, p wire.PolicyParams) error {
	if p.Initial == 0 && p.PairMax > 0 && p.ClientMax > 0 {
		return fmt.Errorf("initial 0: %s starts every allocation at initial streams and grows it from there, so no client would ever get one; close the pair with pair_max 0 instead", policyName)
	}
	return nil
}

func toParams(p wire.PolicyParams) policy.Params {
	return policy.Params{Initial: p.Initial, Update: p.Update, PairMax: p.PairMax, ClientMax: p.ClientMax,
		Lease: time.Duration(p.LeaseSeconds * float64(time.Second))}
}

func fromParams(p policy.Params) wire.PolicyParams {
	return wire.PolicyParams{Initial: p.Initial, Update: p.Update, PairMax: p.PairMax, ClientMax: p.ClientMax,
		LeaseSeconds: p.Lease.Seconds()}
}

// defaultPolicyConfig is the paper's Table III/VII setting.
func defaultPolicyConfig() wire.PolicyConfig {
	return wire.PolicyConfig{Policy: "greedy", Defaults: fromParams(policy.DefaultParams())}
}

// newPolicyService builds the service from cfg; starlark, if set, is the
// server's own Starlark policy, which wins over cfg.Policy.
func (h *Host) newPolicyService(cfg wire.PolicyConfig, starlark policy.Policy) (*policy.Service, error) {
	pc := policy.Config{Defaults: toParams(cfg.Defaults), Pairs: map[policy.Pair]policy.Params{},
		AnyPair: true, Weights: cfg.Weights, PairWeights: map[policy.Pair]map[string]float64{},
		OnPolicyError: func(err error) { h.log.Warn("policy error", "err", err) },
		OnExpire:      h.noteExpired}
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
		return nil, fmt.Errorf("%w: policy %q: want greedy or weighted-shares (Starlark policies come from the server's --policy)", wire.ErrInvalid, cfg.Policy)
	}
	svc, err := policy.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrInvalid, err)
	}
	return svc, nil
}

// New builds the Policy Service from the stored configuration and
// allocations, and the server's --policy (Config.Policy).
func New(ctx context.Context, cfg Config) (*Host, error) {
	h := &Host{st: cfg.Store, flag: cfg.Policy, clock: cfg.Clock, log: cfg.Log}
	if h.clock == nil {
		h.clock = clock.System{}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if err := h.load(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Host) now() time.Time { return h.clock.Now() }

// load reads the configuration and the allocations from the store.
func (h *Host) load(ctx context.Context) error {
	cfg := defaultPolicyConfig()
	raw, err := h.st.Setting(ctx, Setting)
	saved := err == nil // an administrator set it through the API
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return fmt.Errorf("policy: stored configuration: %w", err)
		}
	}
	// --policy, when given, decides the policy at every start (and
	// SetConfig keeps to it); without it the stored configuration does,
	// as an administrator last set it through the API.
	var star policy.Policy
	if h.flag != "" {
		if star, err = starlarkpolicy.Load(h.flag, starlarkpolicy.Options{}); err != nil {
			return fmt.Errorf("policy: --policy: %w", err)
		}
		if _, ok := star.(*starlarkpolicy.Policy); !ok {
			if saved && cfg.Policy != h.flag && cfg.Policy != "" {
				h.log.Warn("--policy overrides the policy stored through the API", "policy", h.flag, "stored", cfg.Policy)
			}
			cfg.Policy, star = h.flag, nil
		}
	}
	svc, err := h.newPolicyService(cfg, star)
	if err != nil {
		return err
	}
	stored, err := h.st.Allocations(ctx)
	if err != nil {
		return err
	}
	as := make([]policy.Allocation, len(stored))
	for i, a := range stored {
		as[i] = policy.Allocation{ID: a.ID, Pair: policy.Pair{Src: a.Src, Dst: a.Dst}, Client: a.Client, VO: a.VO,
			Streams: a.Streams, Want: a.Want, Draining: a.Draining, Reason: a.Reason, Created: a.Created, Expires: a.Expires}
	}
	if err := svc.Restore(as); err != nil {
		return fmt.Errorf("policy: restoring allocations: %w", err)
	}
	h.mu.Lock()
	h.svc, h.cfg, h.star = svc, cfg, star
	h.mu.Unlock()
	return nil
}

// AllocationRequest asks for streams on a pair.
type AllocationRequest struct {
	Source, Destination string // names of registered endpoints, as registered
	// Client names the caller's transfer client; allocations belong to
	// the user and this name (default: the user's name).
	Client string
	Want   int // total streams wanted; 0: as many as the policy gives
}

// clientOf is the policy identity of a caller: its user (so one user
// cannot touch another's allocations) and VO.
func clientOf(u store.User, client string) policy.Caller {
	id := u.Name
	if client != "" {
		id += "/" + client
	}
	return policy.Caller{Client: id, VO: u.VO}
}

// apiErr maps the policy package's errors to the API's (package wire's).
func (h *Host) apiErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, policy.ErrNotFound):
		return fmt.Errorf("%w: %w", wire.ErrNotFound, err)
	case errors.Is(err, policy.ErrForbidden):
		// Another user's allocation is not shown to exist, nor whose
		// it is: the answer is the one for an unknown id.
		return fmt.Errorf("%w: no such allocation", wire.ErrNotFound)
	case errors.Is(err, policy.ErrInvalid):
		return fmt.Errorf("%w: %w", wire.ErrInvalid, err)
	case errors.Is(err, policy.ErrPolicy):
		// The operator's policy is broken: the caller can do nothing
		// about it, and its details (a file path, a stack) are the
		// operator's.
		h.log.Error("the policy failed", "err", err)
		return errors.New("the Policy Service's policy failed; the server log says why")
	}
	return err
}

// Service returns the Policy Service and a function to call when the
// operation on it is over: SetConfig swaps the service, and waits
// for operations on the old one to end so that none is lost.
func (h *Host) Service() (*policy.Service, func()) {
	h.mu.RLock()
	return h.svc, h.mu.RUnlock
}

// Persist writes what an operation changed: put, and the
// allocations that expired (or were released) since.
func (h *Host) Persist(ctx context.Context, put []policy.Allocation, del []store.AllocationGone) error {
	sa := make([]store.Allocation, 0, len(put))
	for _, a := range put {
		sa = append(sa, store.Allocation{ID: a.ID, Src: a.Pair.Src, Dst: a.Pair.Dst, Client: a.Client, VO: a.VO,
			Streams: a.Streams, Want: a.Want, Draining: a.Draining, Reason: a.Reason, Created: a.Created, Expires: a.Expires})
	}
	return h.st.SaveAllocations(ctx, sa, del)
}

// noteExpired is the Policy Service's OnExpire: it keeps the allocation
// for Expired. Reads (a GET, a list, the loop's look-ups at start)
// expire allocations too, without writing; their rows would otherwise
// stay in the store for good.
func (h *Host) noteExpired(a policy.Allocation) {
	h.goneMu.Lock()
	// Conditional on the expiry seen here: with several servers on one
	// database, another may have renewed it since.
	h.gone = append(h.gone, store.AllocationGone{ID: a.ID, Expires: a.Expires})
	h.goneMu.Unlock()
}

// Expired ends the allocations whose leases ran out by now and returns
// the IDs of every allocation that expired since the last call, by
// whichever operation, so that the store forgets them with this write.
func (h *Host) Expired(svc *policy.Service, now time.Time) []store.AllocationGone {
	svc.Expire(now)
	h.goneMu.Lock()
	defer h.goneMu.Unlock()
	ids := h.gone
	h.gone = nil
	return ids
}

// lockKey locks the stripe of polKeys that key falls in.
func (h *Host) lockKey(key string) (unlock func()) {
	f := fnv.New32a()
	f.Write([]byte(key))
	m := &h.keys[f.Sum32()%uint32(len(h.keys))]
	m.Lock()
	return m.Unlock
}

// MaxAllocationsPerUser bounds the live allocations of one (non-admin)
// user, over all pairs and client names.
const MaxAllocationsPerUser = 64

// Request grants u an allocation on a pair of registered endpoints (the
// paper's initial PROVISION); the caller checked that they are.
func (h *Host) Request(ctx context.Context, u store.User, r AllocationRequest) (policy.Allocation, error) {
	if len(r.Client) > 128 {
		return policy.Allocation{}, fmt.Errorf("%w: client name longer than 128 bytes", wire.ErrInvalid)
	}
	// A NUL cannot be stored in PostgreSQL (the write failed, a server
	// error), and a newline forges lines in logs and listings.
	if !utf8.ValidString(r.Client) || strings.ContainsFunc(r.Client, unicode.IsControl) {
		return policy.Allocation{}, fmt.Errorf("%w: client name %q: control characters or invalid UTF-8", wire.ErrInvalid, r.Client)
	}
	svc, done := h.Service()
	defer done()
	now := h.now()
	del := h.Expired(svc, now)
	cl := clientOf(u, r.Client)
	if !u.Admin {
		// Counted and granted as one step: requests at once would all
		// count the same number.
		defer h.lockKey("user\x00" + u.Name)()
		// Each allocation is a client's share of a pair: one user
		// holding hundreds would take colleagues' share of their VO's
		// (weighted-shares splits a VO's streams among its clients).
		held := 0
		for _, a := range svc.List(now, policy.Filter{}) {
			if a.Client == u.Name || strings.HasPrefix(a.Client, u.Name+"/") {
				held++
			}
		}
		if held >= MaxAllocationsPerUser {
			_ = h.Persist(ctx, nil, del)
			return policy.Allocation{}, fmt.Errorf("%w: you hold %d allocations, the most one user may; release some (DELETE /v1/allocations/{id})", wire.ErrInvalid, held)
		}
	}
	a, err := svc.Request(now, policy.Request{Pair: policy.Pair{Src: r.Source, Dst: r.Destination},
		Client: cl.Client, VO: cl.VO, Want: r.Want})
	if err != nil {
		return policy.Allocation{}, h.apiErr(err)
	}
	if err := h.Persist(ctx, []policy.Allocation{a}, del); err != nil {
		// Not durable: take it back rather than grant a lease a
		// restart would forget.
		_ = svc.Release(now, a.ID, cl)
		return policy.Allocation{}, err
	}
	return a, nil
}

// Update is the paper's update PROVISION: it renews the lease
// and may grow (or, told by want, shrink) the allocation; Shrunk reports
// what the service took back since the last update.
func (h *Host) Update(ctx context.Context, u store.User, id, client string, want int) (policy.Allocation, error) {
	svc, done := h.Service()
	defer done()
	// The update's write must not land after a release's delete (which
	// would bring the allocation back at the next start).
	defer h.lockKey("id\x00" + id)()
	now := h.now()
	del := h.Expired(svc, now)
	a, err := svc.Update(now, id, h.ownerFor(svc, now, u, id, client), want)
	if err != nil {
		_ = h.Persist(ctx, nil, del)
		return policy.Allocation{}, h.apiErr(err)
	}
	return a, h.Persist(ctx, []policy.Allocation{a}, del)
}

// Release returns an allocation's streams to the pair.
func (h *Host) Release(ctx context.Context, u store.User, id, client string) error {
	svc, done := h.Service()
	defer done()
	defer h.lockKey("id\x00" + id)()
	now := h.now()
	del := h.Expired(svc, now)
	if err := svc.Release(now, id, h.ownerFor(svc, now, u, id, client)); err != nil {
		_ = h.Persist(ctx, nil, del)
		return h.apiErr(err)
	}
	return h.Persist(ctx, nil, append(del, store.AllocationGone{ID: id}))
}

// ownerFor is the policy identity u acts as on allocation id: admins act
// for its owner; users as themselves (with the client name they give, or
// the allocation's own when it is theirs).
func (h *Host) ownerFor(svc *policy.Service, now time.Time, u store.User, id, client string) policy.Caller {
	a, err := svc.Get(now, id)
	if err != nil {
		return clientOf(u, client)
	}
	if u.Admin {
		return a.Owner()
	}
	if client == "" && ownsClient(u.Name, a.Client) {
		return policy.Caller{Client: a.Client, VO: u.VO}
	}
	return clientOf(u, client)
}

// Get returns one allocation u may see.
func (h *Host) Get(ctx context.Context, u store.User, id string) (policy.Allocation, error) {
	svc, done := h.Service()
	defer done()
	a, err := svc.Get(h.now(), id)
	if err != nil {
		return a, h.apiErr(err)
	}
	if !u.Admin && !ownedBy(a, u) {
		return policy.Allocation{}, fmt.Errorf("%w: allocation %q", wire.ErrNotFound, id)
	}
	return a, nil
}

func ownedBy(a policy.Allocation, u store.User) bool {
	return a.VO == u.VO && ownsClient(u.Name, a.Client)
}

// ownsClient reports whether a policy client name is user's: the name
// itself, or user/NAME (clientOf).
func ownsClient(user, client string) bool {
	return client == user || strings.HasPrefix(client, user+"/")
}

// List lists the live allocations u may see (admins: all),
// by pair then ID.
func (h *Host) List(ctx context.Context, u store.User) []policy.Allocation {
	svc, done := h.Service()
	defer done()
	var out []policy.Allocation
	for _, a := range svc.List(h.now(), policy.Filter{}) {
		if u.Admin || ownedBy(a, u) {
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

// Usage is every pair's allocated streams, per VO (admins).
func (h *Host) Usage(ctx context.Context, u store.User) ([]wire.PairUsage, error) {
	if !u.Admin {
		return nil, fmt.Errorf("%w: only admins see every pair's allocations", wire.ErrForbidden)
	}
	svc, done := h.Service()
	defer done()
	now := h.now()
	perVO := map[policy.Pair]map[string]int{}
	for _, a := range svc.List(now, policy.Filter{}) {
		if perVO[a.Pair] == nil {
			perVO[a.Pair] = map[string]int{}
		}
		perVO[a.Pair][a.VO] += a.Streams + a.Draining
	}
	out := []wire.PairUsage{}
	for _, u := range svc.Usage(now) {
		v := perVO[u.Pair]
		if v == nil {
			v = map[string]int{}
		}
		out = append(out, wire.PairUsage{Source: u.Pair.Src, Destination: u.Pair.Dst, PairMax: u.Params.PairMax,
			Used: u.Used, Draining: u.Draining, Allocations: u.Allocations, PerVO: v})
	}
	return out, nil
}

// Config returns the configuration (any user may read the rules).
func (h *Host) Config() wire.PolicyConfig {
	h.mu.RLock()
	defer h.mu.RUnlock()
	cfg := h.cfg
	if h.star != nil {
		cfg.Policy = h.flag
	}
	return cfg
}

// SetConfig replaces the configuration at run time (admins): parameters
// per pair and per VO apply from the next operation; allocations already
// granted keep their streams (lowered limits bind as they are updated).
func (h *Host) SetConfig(ctx context.Context, u store.User, cfg wire.PolicyConfig) (wire.PolicyConfig, error) {
	if !u.Admin {
		return wire.PolicyConfig{}, fmt.Errorf("%w: only admins change the policy", wire.ErrForbidden)
	}
	if cfg.Policy == "" && !strings.HasPrefix(h.flag, "starlark:") {
		// "" is the default policy: the one --policy names, else
		// greedy. On a server started with --policy weighted-shares
		// it ran greedy (ignoring the weights just accepted) until the
		// next start.
		cfg.Policy = cmp.Or(h.flag, "greedy")
	}
	if err := checkParams(cfg.Defaults); err != nil {
		return wire.PolicyConfig{}, fmt.Errorf("%w: defaults: %w", wire.ErrInvalid, err)
	}
	weights := len(cfg.Weights) > 0
	seen := map[[2]string]bool{}
	for _, p := range cfg.Pairs {
		if p.Source == "" || p.Destination == "" {
			return wire.PolicyConfig{}, fmt.Errorf("%w: a pair needs a source and a destination", wire.ErrInvalid)
		}
		if seen[[2]string{p.Source, p.Destination}] {
			return wire.PolicyConfig{}, fmt.Errorf("%w: pair %s->%s is listed twice", wire.ErrInvalid, p.Source, p.Destination)
		}
		seen[[2]string{p.Source, p.Destination}] = true
		if err := checkParams(p.Params); err != nil {
			return wire.PolicyConfig{}, fmt.Errorf("%w: pair %s->%s: %w", wire.ErrInvalid, p.Source, p.Destination, err)
		}
		weights = weights || len(p.Weights) > 0
	}
	name := cmp.Or(cfg.Policy, h.flag, "greedy")
	if weights && name == "greedy" {
		return wire.PolicyConfig{}, fmt.Errorf("%w: VO weights apply to the weighted-shares policy; greedy ignores them", wire.ErrInvalid)
	}
	if name == "greedy" || name == "weighted-shares" {
		if err := checkInitial(name, cfg.Defaults); err != nil {
			return wire.PolicyConfig{}, fmt.Errorf("%w: defaults: %w", wire.ErrInvalid, err)
		}
		for _, p := range cfg.Pairs {
			if err := checkInitial(name, p.Params); err != nil {
				return wire.PolicyConfig{}, fmt.Errorf("%w: pair %s->%s: %w", wire.ErrInvalid, p.Source, p.Destination, err)
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.star != nil && cfg.Policy != "" && cfg.Policy != h.flag {
		return wire.PolicyConfig{}, fmt.Errorf("%w: the server runs the Starlark policy %s (--policy); change it there", wire.ErrInvalid, h.flag)
	}
	if h.star == nil && h.flag != "" && cfg.Policy != "" && cfg.Policy != h.flag {
		// The flag would undo the change at the next start.
		return wire.PolicyConfig{}, fmt.Errorf("%w: the server was started with --policy %s, which decides the policy at every start: change it there, or start without --policy to set it here", wire.ErrInvalid, h.flag)
	}
	// A new service with the new rules and the current allocations:
	// checked in full before anything changes.
	svc, err := h.newPolicyService(cfg, h.star)
	if err != nil {
		return wire.PolicyConfig{}, err
	}
	if err := svc.Restore(h.svc.State()); err != nil {
		return wire.PolicyConfig{}, fmt.Errorf("%w: %w", wire.ErrInvalid, err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return wire.PolicyConfig{}, err
	}
	if err := h.st.PutSetting(ctx, Setting, string(raw)); err != nil {
		return wire.PolicyConfig{}, err
	}
	// Lowered limits bind now: allocations above them shrink, and their
	// clients (the scheduler's VOs included) hear at the next update.
	if shrunk := svc.EnforceLimits(h.now()); len(shrunk) > 0 {
		h.log.Info("policy change shrank allocations over the new limits", "allocations", len(shrunk))
		if err := h.Persist(ctx, shrunk, nil); err != nil {
			h.log.Warn("storing allocations", "err", err)
		}
	}
	h.svc, h.cfg = svc, cfg
	return cfg, nil
}
