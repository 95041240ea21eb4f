package policy

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Config configures a Service. The zero Config is a greedy service that
// admits no pair.
type Config struct {
	// Defaults are the Params of pairs without their own; the zero value
	// means DefaultParams().
	Defaults Params
	// Pairs are the known pairs and their Params.
	Pairs map[Pair]Params
	// AnyPair admits pairs not in Pairs, with Defaults. Without it a
	// request for an unknown pair fails with ErrUnknownPair.
	AnyPair bool
	// Weights are VO weights on every pair (WeightedShares); a VO not
	// listed weighs 1.
	Weights map[string]float64
	// PairWeights override Weights on one pair, VO by VO.
	PairWeights map[Pair]map[string]float64
	// Policy decides grants; nil means Greedy.
	Policy Policy
	// OnPolicyError, if set, receives the errors a policy's Remove
	// returns, which cannot fail a release or an expiry.
	OnPolicyError func(error)
	// OnExpire, if set, receives every allocation whose lease ran out,
	// whichever operation ended it (a Get or List too), so that a
	// caller mirroring allocations in a store can forget it. It is
	// called under the Service's lock: it must not call the Service.
	OnExpire func(Allocation)
	// NewID, if set, makes allocation IDs (it must not return one in use
	// twice; a collision is retried); the default is 26 random base32
	// characters, so IDs stay unique across restarts.
	NewID func() string
}

// Service allocates streams to clients, per pair, under a Policy. All its
// methods are safe for concurrent use.
type Service struct {
	mu            sync.Mutex
	policy        Policy
	defaults      Params
	pairs         map[Pair]Params
	anyPair       bool
	weights       map[string]float64
	pairWeights   map[Pair]map[string]float64
	allocs        map[string]*Allocation
	byPair        map[Pair]*pairState
	nextExpiry    time.Time // no allocation expires before; zero when none
	newID         func() string
	onPolicyError func(error)
	onExpire      func(Allocation)

	// afterOp, set by tests, runs under the lock at the end of every
	// operation that changes state, to check invariants.
	afterOp func()
}

// pairState is the live allocations of one pair.
type pairState struct {
	used   int           // Σ Streams + Draining: the paper's s_a
	allocs []*Allocation // oldest first
}

// New returns a Service configured by cfg, or the first problem in cfg.
func New(cfg Config) (*Service, error) {
	s := &Service{
		policy:        cfg.Policy,
		defaults:      cfg.Defaults,
		pairs:         map[Pair]Params{},
		anyPair:       cfg.AnyPair,
		weights:       map[string]float64{},
		pairWeights:   map[Pair]map[string]float64{},
		allocs:        map[string]*Allocation{},
		byPair:        map[Pair]*pairState{},
		newID:         cfg.NewID,
		onPolicyError: cfg.OnPolicyError,
		onExpire:      cfg.OnExpire,
	}
	if s.policy == nil {
		s.policy = Greedy{}
	}
	if s.defaults == (Params{}) {
		s.defaults = DefaultParams()
	}
	if s.newID == nil {
		s.newID = rand.Text
	}
	if err := s.defaults.Validate(); err != nil {
		return nil, fmt.Errorf("policy: default %w", err)
	}
	for pair, p := range cfg.Pairs {
		if err := s.SetPairParams(pair, p); err != nil {
			return nil, err
		}
	}
	if err := s.SetWeights(Pair{}, cfg.Weights); err != nil {
		return nil, err
	}
	for pair, w := range cfg.PairWeights {
		if pair == (Pair{}) {
			return nil, fmt.Errorf("policy: pair weights: %w: empty pair", ErrInvalid)
		}
		if err := s.SetWeights(pair, w); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetPolicy replaces the policy, for allocations to come; the streams
// already granted stay.
func (s *Service) SetPolicy(p Policy) {
	if p == nil {
		p = Greedy{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = p
}

// SetDefaults replaces the Params of pairs without their own.
func (s *Service) SetDefaults(p Params) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("policy: default %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults = p
	return nil
}

// SetPairParams makes pair known with Params p, or changes them. New
// limits apply from the next operation; lowering PairMax or ClientMax
// below what is granted takes nothing back at once: Greedy only stops
// granting, WeightedShares moves allocations to their new targets at
// their next updates; ShrinkPair and Shrink take streams back now.
func (s *Service) SetPairParams(pair Pair, p Params) error {
	if err := pair.validate(); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("policy: pair %s: %w", pair, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pairs[pair] = p
	return nil
}

// PairParams returns the Params that apply to pair, or ErrUnknownPair.
func (s *Service) PairParams(pair Pair) (Params, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.paramsLocked(pair)
	if !ok {
		return Params{}, fmt.Errorf("policy: pair %s: %w", pair, ErrUnknownPair)
	}
	return p, nil
}

// SetWeights replaces the VO weights of pair, or the defaults of every
// pair when pair is the zero Pair. An empty map removes the override.
func (s *Service) SetWeights(pair Pair, weights map[string]float64) error {
	if pair != (Pair{}) {
		if err := pair.validate(); err != nil {
			return fmt.Errorf("policy: weights: %w", err)
		}
	}
	where := "default weights"
	if pair != (Pair{}) {
		where = "weights of pair " + pair.String()
	}
	for vo, w := range weights {
		if err := validWeight(vo, w); err != nil {
			return fmt.Errorf("policy: %s: %w", where, err)
		}
	}
	w := maps.Clone(weights)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case pair == (Pair{}):
		s.weights = w
		if s.weights == nil {
			s.weights = map[string]float64{}
		}
	case len(w) == 0:
		delete(s.pairWeights, pair)
	default:
		s.pairWeights[pair] = w
	}
	return nil
}

// Request grants a new allocation: the paper's PROVISION with streams[t]
// = 0. When the pair has no streams left the allocation is granted with
// none (Fig. 2 line 6); it holds the client's place, and an Update once
// streams are free gets it the initial slice.
func (s *Service) Request(now time.Time, r Request) (Allocation, error) {
	if err := r.Pair.validate(); err != nil {
		return Allocation{}, fmt.Errorf("policy: request: %w", err)
	}
	if r.Client == "" {
		return Allocation{}, fmt.Errorf("policy: request on %s: %w: empty client", r.Pair, ErrInvalid)
	}
	if err := validWant(r.Want); err != nil {
		return Allocation{}, fmt.Errorf("policy: request on %s by %q: %w", r.Pair, r.Client, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)

	params, ok := s.paramsLocked(r.Pair)
	if !ok {
		return Allocation{}, fmt.Errorf("policy: request on %s: %w", r.Pair, ErrUnknownPair)
	}
	v := s.viewLocked(now, r.Pair, params, r.VO)
	n, err := s.decide(func() (int, error) { return s.policy.Add(v, r) })
	if err != nil {
		return Allocation{}, fmt.Errorf("policy: request on %s by %q: %w", r.Pair, r.Client, err)
	}
	if r.Want > 0 {
		n = min(n, r.Want)
	}
	n = min(n, max(0, min(params.ClientMax, params.PairMax-v.Used)))

	a := &Allocation{
		ID:      s.uniqueIDLocked(),
		Pair:    r.Pair,
		Client:  r.Client,
		VO:      r.VO,
		Streams: n,
		Want:    r.Want,
		Created: now,
		Expires: now.Add(params.Lease),
	}
	s.insertLocked(a)
	out := *a
	out.Max = params.ClientMax
	return out, nil
}

// Update is the paper's PROVISION on an existing allocation: the policy
// may grow it (by s_u under Greedy), keep it or shrink it; want, if
// positive, caps the result, so an update with want equal to the current
// streams is a pure renewal and a smaller want gives streams back. It
// renews the lease, frees the streams that were Draining, and reports in
// Shrunk and Reason what the service took away since the client's
// previous Request or Update.
func (s *Service) Update(now time.Time, id string, c Caller, want int) (Allocation, error) {
	if err := validWant(want); err != nil {
		return Allocation{}, fmt.Errorf("policy: update %q: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)

	a, err := s.ownedLocked(id, c, "update")
	if err != nil {
		return Allocation{}, err
	}
	params := s.paramsOrDefaultsLocked(a.Pair)
	cur := a.Streams
	// The client hears of any shrink in this answer, so its Draining
	// streams are free from now on, for the policy as for the limits.
	v := s.viewLocked(now, a.Pair, params, a.VO)
	v.Used -= a.Draining
	in := *a
	in.Draining, in.Reason = 0, ""
	for i := range v.Allocations {
		if v.Allocations[i].ID == id {
			v.Allocations[i] = in
		}
	}
	r := Request{Pair: a.Pair, Client: a.Client, VO: a.VO, Want: want}
	n, err := s.decide(func() (int, error) { return s.policy.Update(v, in, r) })
	if err != nil {
		return Allocation{}, fmt.Errorf("policy: update %q on %s: %w", id, a.Pair, err)
	}
	if want > 0 {
		n = min(n, want)
	}
	// The service never grows an allocation past the limits; it leaves
	// shrinking to the policy, so a lowered limit is not enforced by
	// taking streams from whoever happens to update first.
	n = min(n, max(cur, min(params.ClientMax, params.PairMax-(v.Used-cur))))

	// What the client runs is cur + Draining; what it wished to keep is
	// that, or less if it asked for less.
	known := cur + a.Draining
	wish := known
	if want > 0 {
		wish = min(want, known)
	}
	shrunk := max(0, wish-n)
	reason := ""
	if shrunk > 0 {
		reason = a.Reason
		if reason == "" {
			reason = "reduced by policy " + s.policy.Name()
		}
	}

	s.byPair[a.Pair].used += n - cur - a.Draining
	a.Streams, a.Draining, a.Reason, a.Want = n, 0, "", want
	a.Expires = now.Add(params.Lease)
	s.noteExpiryLocked(a.Expires)

	out := *a
	out.Shrunk, out.Reason, out.Max = shrunk, reason, params.ClientMax
	return out, nil
}

// Release ends an allocation and returns its streams, Draining included,
// to the pair.
func (s *Service) Release(now time.Time, id string, c Caller) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)

	a, err := s.ownedLocked(id, c, "release")
	if err != nil {
		return err
	}
	s.removeLocked(now, a)
	return nil
}

// Get returns the live allocation id, whoever owns it.
func (s *Service) Get(now time.Time, id string) (Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	a, ok := s.allocs[id]
	if !ok {
		return Allocation{}, fmt.Errorf("policy: allocation %q: %w (released or lease expired)", id, ErrNotFound)
	}
	return s.answerLocked(a), nil
}

// Filter selects allocations in List; a zero field matches all.
type Filter struct {
	Pair       Pair
	Client, VO string
}

// List returns the live allocations that match f, oldest first.
func (s *Service) List(now time.Time, f Filter) []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	var out []Allocation
	for _, a := range s.sortedLocked() {
		if (f.Pair == Pair{} || f.Pair == a.Pair) && (f.Client == "" || f.Client == a.Client) && (f.VO == "" || f.VO == a.VO) {
			out = append(out, s.answerLocked(a))
		}
	}
	return out
}

// Expire ends the allocations whose lease ran out by now and returns them.
// Every operation does it first, so calling Expire is only needed to learn
// which allocations went (to delete them from a store, say).
func (s *Service) Expire(now time.Time) []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	return s.expireLocked(now)
}

// Shrink takes allocation id down to `to` streams, for reason; the client
// hears at its next Update and until then the streams it gives up are
// Draining. A target at or above the current streams changes nothing.
func (s *Service) Shrink(now time.Time, id string, to int, reason string) (Allocation, error) {
	if to < 0 {
		return Allocation{}, fmt.Errorf("policy: shrink %q to %d streams: %w: negative", id, to, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	a, ok := s.allocs[id]
	if !ok {
		return Allocation{}, fmt.Errorf("policy: shrink %q: %w (released or lease expired)", id, ErrNotFound)
	}
	s.shrinkLocked(a, to, reason)
	return *a, nil
}

// ShrinkPair takes the pair's granted streams (Draining aside) down to
// total, for reason, leveling from the top: the largest allocations lose
// streams first, and among equals the newest, so that what stays is
// spread as evenly as it was granted. It returns the allocations it
// changed. Streams already Draining stay counted until their clients
// hear, so the pair reaches total within one update interval.
func (s *Service) ShrinkPair(now time.Time, pair Pair, total int, reason string) ([]Allocation, error) {
	if total < 0 {
		return nil, fmt.Errorf("policy: shrink %s to %d streams: %w: negative", pair, total, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	if _, ok := s.paramsLocked(pair); !ok && s.byPair[pair] == nil {
		return nil, fmt.Errorf("policy: shrink %s: %w", pair, ErrUnknownPair)
	}
	ps := s.byPair[pair]
	if ps == nil {
		return nil, nil
	}
	streams := make([]int, len(ps.allocs))
	for i, a := range ps.allocs {
		streams[i] = a.Streams
	}
	var changed []Allocation
	for i, to := range Level(streams, total) {
		if a := ps.allocs[i]; to < a.Streams {
			s.shrinkLocked(a, to, reason)
			changed = append(changed, *a)
		}
	}
	return changed, nil
}

// EnforceLimits takes allocations over their pair's current limits down
// to them: each one above the per-client maximum to it, then each pair's
// granted total to the pair maximum, leveled as ShrinkPair does. Call it
// after lowering limits (SetDefaults, SetPairParams): the policies grow
// allocations only within the limits but never take streams back, so
// without it a client over a lowered limit keeps its streams for as long
// as it renews. The clients hear at their next Update (Shrunk, Reason).
// It returns the allocations it changed, oldest first.
func (s *Service) EnforceLimits(now time.Time) []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	changed := map[string]*Allocation{}
	for pair, ps := range s.byPair {
		p := s.paramsOrDefaultsLocked(pair)
		streams := make([]int, len(ps.allocs))
		for i, a := range ps.allocs {
			if a.Streams > p.ClientMax {
				s.shrinkLocked(a, p.ClientMax, fmt.Sprintf("the per-client limit on %s was lowered to %d streams", pair, p.ClientMax))
				changed[a.ID] = a
			}
			streams[i] = a.Streams
		}
		for i, to := range Level(streams, p.PairMax) {
			if a := ps.allocs[i]; to < a.Streams {
				s.shrinkLocked(a, to, fmt.Sprintf("the limit of %s was lowered to %d streams", pair, p.PairMax))
				changed[a.ID] = a
			}
		}
	}
	out := make([]Allocation, 0, len(changed))
	for _, a := range sortAllocs(slices.Collect(maps.Values(changed))) {
		out = append(out, *a)
	}
	return out
}

// Level caps streams so that their sum is at most total, cutting the
// largest first: every value becomes min(v, L) for the largest L that
// fits, and what is left under total goes back one stream at a time to
// the capped values, oldest (lowest index) first. The service levels
// allocations with it; a client holding several transfers under one
// allocation can level their streams the same way.
func Level(streams []int, total int) []int {
	sum, top := 0, 0
	for _, v := range streams {
		sum += v
		top = max(top, v)
	}
	out := slices.Clone(streams)
	if sum <= total {
		return out
	}
	capped := func(l int) int {
		n := 0
		for _, v := range streams {
			n += min(v, l)
		}
		return n
	}
	lo, hi := 0, top // capped(lo) <= total < capped(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; capped(mid) <= total {
			lo = mid
		} else {
			hi = mid
		}
	}
	slack := total - capped(lo)
	for i, v := range streams {
		out[i] = min(v, lo)
		if v > lo && slack > 0 {
			out[i]++
			slack--
		}
	}
	return out
}

// PairUsage is how much of a pair is allocated.
type PairUsage struct {
	Pair   Pair
	Params Params
	// Used counts Draining streams, which clients still run.
	Used, Draining, Allocations int
}

// Usage returns every known or used pair's usage, sorted by pair.
func (s *Service) Usage(now time.Time) []PairUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	s.expireLocked(now)
	seen := map[Pair]bool{}
	var out []PairUsage
	add := func(pair Pair) {
		if seen[pair] {
			return
		}
		seen[pair] = true
		u := PairUsage{Pair: pair, Params: s.paramsOrDefaultsLocked(pair)}
		if ps := s.byPair[pair]; ps != nil {
			u.Used, u.Allocations = ps.used, len(ps.allocs)
			for _, a := range ps.allocs {
				u.Draining += a.Draining
			}
		}
		out = append(out, u)
	}
	for pair := range s.pairs {
		add(pair)
	}
	for pair := range s.byPair {
		add(pair)
	}
	slices.SortFunc(out, func(a, b PairUsage) int {
		return cmp.Or(cmp.Compare(a.Pair.Src, b.Pair.Src), cmp.Compare(a.Pair.Dst, b.Pair.Dst))
	})
	return out
}

// State returns every allocation, oldest first, for the caller to store.
func (s *Service) State() []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Allocation, 0, len(s.allocs))
	for _, a := range s.sortedLocked() {
		out = append(out, *a)
	}
	return out
}

// Restore replaces every allocation with allocs, as State returned them,
// after a restart. Leases keep their expiry times, so allocations whose
// clients went away during the outage end at the next operation; a caller
// that wants to give clients time to come back extends Expires first.
// Pairs must be known; limits are not re-checked, since configuration
// may have changed and taking streams back is ShrinkPair's job.
func (s *Service) Restore(allocs []Allocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.checkLocked()
	fresh := make(map[string]*Allocation, len(allocs))
	for i, a := range allocs {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("policy: restore allocation %d (%q): %w: %s", i, a.ID, ErrInvalid, fmt.Sprintf(format, args...))
		}
		switch {
		case a.ID == "":
			return bad("empty ID")
		case fresh[a.ID] != nil:
			return bad("duplicate ID")
		case a.Pair.validate() != nil:
			return bad("empty source or destination")
		case a.Client == "":
			return bad("empty client")
		case a.Streams < 0 || a.Streams > MaxStreams || a.Draining < 0 || a.Draining > MaxStreams || validWant(a.Want) != nil:
			return bad("stream counts %d/%d/%d out of range", a.Streams, a.Draining, a.Want)
		}
		if _, ok := s.paramsLocked(a.Pair); !ok {
			return fmt.Errorf("policy: restore allocation %d (%q) on %s: %w", i, a.ID, a.Pair, ErrUnknownPair)
		}
		a.Shrunk = 0
		fresh[a.ID] = &a
	}
	s.allocs = map[string]*Allocation{}
	s.byPair = map[Pair]*pairState{}
	s.nextExpiry = time.Time{}
	for _, a := range sortAllocs(slices.Collect(maps.Values(fresh))) {
		s.insertLocked(a)
	}
	return nil
}

// validWant checks a client's want: 0 (policy decides) to MaxStreams.
func validWant(want int) error {
	if want < 0 || want > MaxStreams {
		return fmt.Errorf("want %d streams: %w: want 0..%d", want, ErrInvalid, MaxStreams)
	}
	return nil
}

// decide runs a policy decision, turning failures and panics into
// ErrPolicy, and rejects negative answers.
func (s *Service) decide(f func() (int, error)) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, fmt.Errorf("%w: %s panicked: %v", ErrPolicy, s.policy.Name(), p)
		}
	}()
	n, err = f()
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %s: %w", ErrPolicy, s.policy.Name(), err)
	case n < 0:
		return 0, fmt.Errorf("%w: %s answered %d streams", ErrPolicy, s.policy.Name(), n)
	}
	return n, nil
}

// ownedLocked finds allocation id and checks c owns it.
func (s *Service) ownedLocked(id string, c Caller, op string) (*Allocation, error) {
	a, ok := s.allocs[id]
	if !ok {
		return nil, fmt.Errorf("policy: %s %q: %w (released or lease expired)", op, id, ErrNotFound)
	}
	if a.Owner() != c {
		return nil, fmt.Errorf("policy: %s %q by client %q of VO %q: %w (client %q of VO %q)", op, id, c.Client, c.VO, ErrForbidden, a.Client, a.VO)
	}
	return a, nil
}

func (s *Service) paramsLocked(pair Pair) (Params, bool) {
	if p, ok := s.pairs[pair]; ok {
		return p, true
	}
	return s.defaults, s.anyPair && pair.validate() == nil
}

// paramsOrDefaultsLocked is for pairs that hold allocations, which were
// known when granted.
func (s *Service) paramsOrDefaultsLocked(pair Pair) Params {
	p, _ := s.paramsLocked(pair)
	return p
}

func (s *Service) weightLocked(pair Pair, vo string) float64 {
	if w, ok := s.pairWeights[pair][vo]; ok {
		return w
	}
	if w, ok := s.weights[vo]; ok {
		return w
	}
	return 1
}

// viewLocked builds the policy's view of pair; vo is the requester's.
func (s *Service) viewLocked(now time.Time, pair Pair, params Params, vo string) View {
	v := View{Pair: pair, Params: params, Now: now, Weights: map[string]float64{vo: s.weightLocked(pair, vo)}}
	if ps := s.byPair[pair]; ps != nil {
		v.Used = ps.used
		v.Allocations = make([]Allocation, len(ps.allocs))
		for i, a := range ps.allocs {
			v.Allocations[i] = *a
			if _, ok := v.Weights[a.VO]; !ok {
				v.Weights[a.VO] = s.weightLocked(pair, a.VO)
			}
		}
	}
	return v
}

func (s *Service) uniqueIDLocked() string {
	for {
		if id := s.newID(); id != "" && s.allocs[id] == nil {
			return id
		}
	}
}

func (s *Service) insertLocked(a *Allocation) {
	s.allocs[a.ID] = a
	ps := s.byPair[a.Pair]
	if ps == nil {
		ps = &pairState{}
		s.byPair[a.Pair] = ps
	}
	ps.allocs = append(ps.allocs, a)
	ps.used += a.Streams + a.Draining
	s.noteExpiryLocked(a.Expires)
}

func (s *Service) noteExpiryLocked(t time.Time) {
	if s.nextExpiry.IsZero() || t.Before(s.nextExpiry) {
		s.nextExpiry = t
	}
}

// removeLocked drops a, tells the policy, and frees its streams.
func (s *Service) removeLocked(now time.Time, a *Allocation) {
	params := s.paramsOrDefaultsLocked(a.Pair)
	v := s.viewLocked(now, a.Pair, params, a.VO)
	if _, err := s.decide(func() (int, error) { return 0, s.policy.Remove(v, *a) }); err != nil && s.onPolicyError != nil {
		s.onPolicyError(fmt.Errorf("policy: remove %q on %s: %w", a.ID, a.Pair, err))
	}
	delete(s.allocs, a.ID)
	ps := s.byPair[a.Pair]
	ps.used -= a.Streams + a.Draining
	ps.allocs = slices.DeleteFunc(ps.allocs, func(b *Allocation) bool { return b == a })
	if len(ps.allocs) == 0 {
		delete(s.byPair, a.Pair)
	}
}

// expireLocked ends the allocations whose lease ran out by now. An
// allocation expires at its Expires instant.
func (s *Service) expireLocked(now time.Time) []Allocation {
	if len(s.allocs) == 0 || now.Before(s.nextExpiry) {
		return nil
	}
	var gone []*Allocation
	next := time.Time{}
	for _, a := range s.allocs {
		if !now.Before(a.Expires) {
			gone = append(gone, a)
		} else if next.IsZero() || a.Expires.Before(next) {
			next = a.Expires
		}
	}
	out := make([]Allocation, 0, len(gone))
	for _, a := range sortAllocs(gone) {
		s.removeLocked(now, a)
		out = append(out, *a)
		if s.onExpire != nil {
			s.onExpire(*a)
		}
	}
	s.nextExpiry = next
	return out
}

func (s *Service) shrinkLocked(a *Allocation, to int, reason string) {
	if to >= a.Streams {
		return
	}
	if reason == "" {
		reason = "shrunk by the service"
	}
	a.Draining += a.Streams - to
	a.Streams = to
	a.Reason = reason
}

func (s *Service) sortedLocked() []*Allocation {
	return sortAllocs(slices.Collect(maps.Values(s.allocs)))
}

func sortAllocs(as []*Allocation) []*Allocation {
	slices.SortFunc(as, func(a, b *Allocation) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return as
}

// answerLocked is a copy of a for a caller, with Max, its pair's
// per-client limit now.
func (s *Service) answerLocked(a *Allocation) Allocation {
	out := *a
	out.Max = s.paramsOrDefaultsLocked(a.Pair).ClientMax
	return out
}

// checkLocked runs the test hook, if any.
func (s *Service) checkLocked() {
	if s.afterOp != nil {
		s.afterOp()
	}
}

// invariantsLocked checks the bookkeeping and the limits: every count
// non-negative, each pair's used equal to what its allocations hold and
// within PairMax, each allocation within ClientMax. Limits lowered at run
// time are exceeded until allocations shrink, so tests that lower them do
// not use it.
func (s *Service) invariantsLocked() error {
	n := 0
	for pair, ps := range s.byPair {
		params := s.paramsOrDefaultsLocked(pair)
		sum, draining := 0, 0
		for _, a := range ps.allocs {
			n++
			draining += a.Draining
			if s.allocs[a.ID] != a || a.Pair != pair {
				return fmt.Errorf("allocation %q indexed under %s, is %v", a.ID, pair, a)
			}
			if a.Streams < 0 || a.Draining < 0 {
				return fmt.Errorf("allocation %q: negative counts %d/%d", a.ID, a.Streams, a.Draining)
			}
			if a.Streams > params.ClientMax {
				return fmt.Errorf("allocation %q: %d streams > client max %d", a.ID, a.Streams, params.ClientMax)
			}
			sum += a.Streams + a.Draining
		}
		if sum != ps.used {
			return fmt.Errorf("pair %s: used %d, allocations hold %d", pair, ps.used, sum)
		}
		// Streams Draining still run until their clients hear, and after
		// a lowered limit (EnforceLimits) they may take the pair over
		// its new maximum until then; what is granted may not.
		if ps.used-draining > params.PairMax {
			return fmt.Errorf("pair %s: %d streams granted > pair max %d", pair, ps.used-draining, params.PairMax)
		}
	}
	if n != len(s.allocs) {
		return fmt.Errorf("%d allocations indexed by pair, %d by ID", n, len(s.allocs))
	}
	return nil
}
