package server

import (
	"context"
	"fmt"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/policyserver"
	"github.com/sluice-dtn/sluice/wire"
)

// The Policy Service runs inside the server (package policyserver hosts
// it; package policy owns its rules). The API's calls go through here,
// which resolves endpoint names; the loop asks it for its VOs' and
// adaptive jobs' allocations (voalloc.go, adaptive.go).

// PolicyConfig is wire.PolicyConfig: the API documents live in package wire.
type PolicyConfig = wire.PolicyConfig

// PolicyParams is wire.PolicyParams: the API documents live in package wire.
type PolicyParams = wire.PolicyParams

// PairPolicy is wire.PairPolicy: the API documents live in package wire.
type PairPolicy = wire.PairPolicy

// PairUsage is wire.PairUsage: the API documents live in package wire.
type PairUsage = wire.PairUsage

// AllocationRequest is policyserver.AllocationRequest, with Source and
// Destination as the caller names them (resolved by RequestAllocation).
type AllocationRequest = policyserver.AllocationRequest

// MaxAllocationsPerUser bounds the live allocations of one (non-admin)
// user, over all pairs and client names.
const MaxAllocationsPerUser = policyserver.MaxAllocationsPerUser

// loadPolicy builds the Policy Service from the store and --policy.
func (s *Server) loadPolicy(ctx context.Context) error {
	h, err := policyserver.New(ctx, policyserver.Config{Store: s.st, Policy: s.cfg.Policy, Clock: clockOf(s), Log: s.log})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.pol = h
	return nil
}

// policyService returns the Policy Service and the function to call when
// the operation on it is over (policyserver.Host.Service).
func (s *Server) policyService() (*policy.Service, func()) { return s.pol.Service() }

// RequestAllocation grants an allocation on a pair of registered
// endpoints (the paper's initial PROVISION).
func (s *Server) RequestAllocation(ctx context.Context, c Caller, r AllocationRequest) (policy.Allocation, error) {
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return policy.Allocation{}, err
	}
	for _, e := range []*string{&r.Source, &r.Destination} {
		ep, ok := idx[*e]
		if !ok {
			return policy.Allocation{}, fmt.Errorf("%w: no endpoint %q is registered (see `sluice endpoints`)", ErrInvalid, *e)
		}
		*e = ep.Name
	}
	return s.pol.Request(ctx, c.User, r)
}

// UpdateAllocation is the paper's update PROVISION: it renews the lease
// and may grow (or, told by want, shrink) the allocation; Shrunk reports
// what the service took back since the last update.
func (s *Server) UpdateAllocation(ctx context.Context, c Caller, id, client string, want int) (policy.Allocation, error) {
	return s.pol.Update(ctx, c.User, id, client, want)
}

// ReleaseAllocation returns an allocation's streams to the pair.
func (s *Server) ReleaseAllocation(ctx context.Context, c Caller, id, client string) error {
	return s.pol.Release(ctx, c.User, id, client)
}

// Allocation returns one allocation the caller may see.
func (s *Server) Allocation(ctx context.Context, c Caller, id string) (policy.Allocation, error) {
	return s.pol.Get(ctx, c.User, id)
}

// Allocations lists the live allocations the caller may see (admins: all),
// by pair then ID.
func (s *Server) Allocations(ctx context.Context, c Caller) []policy.Allocation {
	return s.pol.List(ctx, c.User)
}

// PolicyUsage is every pair's allocated streams, per VO (admins).
func (s *Server) PolicyUsage(ctx context.Context, c Caller) ([]PairUsage, error) {
	return s.pol.Usage(ctx, c.User)
}

// Policy returns the configuration (any user may read the rules).
func (s *Server) Policy(ctx context.Context, c Caller) PolicyConfig { return s.pol.Config() }

// SetPolicy replaces the configuration at run time (admins): parameters
// per pair and per VO apply from the next operation; allocations already
// granted keep their streams (lowered limits bind as they are updated).
func (s *Server) SetPolicy(ctx context.Context, c Caller, cfg PolicyConfig) (PolicyConfig, error) {
	return s.pol.SetConfig(ctx, c.User, cfg)
}
