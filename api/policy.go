package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/wire"
)

// The Policy Service's API keeps the shape of the paper's implementation
// (Chervenak et al., "Adaptation and Policy-Based Resource Allocation for
// Efficient Bulk Data Transfers in High Performance Computing Environments"):
// POST an allocation request for a source and a
// destination, get an id and a number of streams; update it to ask for
// more (or a given number); delete it to release the streams.

// AllocationIn is wire.AllocationIn: the API documents live in package wire.
type AllocationIn = wire.AllocationIn

// AllocationUpdateIn is wire.AllocationUpdateIn: the API documents live in package wire.
type AllocationUpdateIn = wire.AllocationUpdateIn

// AllocationOut is wire.AllocationOut: the API documents live in package wire.
type AllocationOut = wire.AllocationOut

func allocationOut(a policy.Allocation) AllocationOut {
	return AllocationOut{ID: a.ID, Source: a.Pair.Src, Destination: a.Pair.Dst, Client: a.Client, VO: a.VO,
		Streams: a.Streams, Want: a.Want, Shrunk: a.Shrunk, Reason: a.Reason, MaxStreams: a.Max, Created: a.Created, Expires: a.Expires}
}

type allocationIn struct{ Body AllocationIn }
type allocationBody struct{ Body AllocationOut }
type allocationCreated struct {
	Status int
	Body   AllocationOut
}
type allocationIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"64"`
}
type allocationUpdateIn struct {
	ID   string `path:"id" minLength:"1" maxLength:"64"`
	Body AllocationUpdateIn
}
type allocationReleaseIn struct {
	ID     string `path:"id" minLength:"1" maxLength:"64"`
	Client string `query:"client" maxLength:"128" doc:"The client name given at the request, if any."`
}
type allocationsOut struct{ Body []AllocationOut }
type policyBody struct{ Body server.PolicyConfig }
type policyIn struct{ Body server.PolicyConfig }
type usageOut struct{ Body []server.PairUsage }

func (h *handlers) registerPolicy(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "request-allocation", Method: http.MethodPost, Path: "/v1/allocations", Tags: []string{"policy"},
		Summary:       "Request streams between two endpoints",
		Description:   "The Policy Service's PROVISION for a new transfer (Chervenak et al., Fig. 2). The allocation is a lease: renew it with an update before it expires, release it when done.",
		DefaultStatus: http.StatusCreated, Security: bearer,
	}, h.requestAllocation)
	huma.Register(api, huma.Operation{
		OperationID: "list-allocations", Method: http.MethodGet, Path: "/v1/allocations", Tags: []string{"policy"},
		Summary: "List allocations", Description: "Users see their own; admins see all.", Security: bearer,
	}, h.listAllocations)
	huma.Register(api, huma.Operation{
		OperationID: "get-allocation", Method: http.MethodGet, Path: "/v1/allocations/{id}", Tags: []string{"policy"},
		Summary: "Get an allocation", Security: bearer,
	}, h.getAllocation)
	huma.Register(api, huma.Operation{
		OperationID: "update-allocation", Method: http.MethodPut, Path: "/v1/allocations/{id}", Tags: []string{"policy"},
		Summary:     "Update an allocation",
		Description: "Renews the lease and asks for more streams (streams 0) or a given number. The answer's shrunk says what the service took back since the last update.",
		Security:    bearer,
	}, h.updateAllocation)
	huma.Register(api, huma.Operation{
		OperationID: "release-allocation", Method: http.MethodDelete, Path: "/v1/allocations/{id}", Tags: []string{"policy"},
		Summary: "Release an allocation", DefaultStatus: http.StatusNoContent, Security: bearer,
	}, h.releaseAllocation)
	huma.Register(api, huma.Operation{
		OperationID: "get-policy", Method: http.MethodGet, Path: "/v1/policy", Tags: []string{"policy"},
		Summary: "The Policy Service's configuration", Security: bearer,
	}, h.getPolicy)
	huma.Register(api, huma.Operation{
		OperationID: "set-policy", Method: http.MethodPut, Path: "/v1/policy", Tags: []string{"policy"},
		Summary:     "Change the Policy Service's configuration (admins)",
		Description: "Parameters per pair (s_i, s_u, s_pmax, s_cmax, lease) and VO weights apply from the next request; no restart.",
		Security:    bearer,
	}, h.setPolicy)
	huma.Register(api, huma.Operation{
		OperationID: "policy-usage", Method: http.MethodGet, Path: "/v1/policy/usage", Tags: []string{"policy"},
		Summary: "Allocated streams per pair and VO (admins)", Security: bearer,
	}, h.policyUsage)
}

func (h *handlers) requestAllocation(ctx context.Context, in *allocationIn) (*allocationCreated, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.s.RequestAllocation(ctx, c, server.AllocationRequest{Source: in.Body.Source, Destination: in.Body.Destination,
		Client: in.Body.Client, Want: in.Body.Streams})
	if err != nil {
		return nil, problem(err)
	}
	return &allocationCreated{Status: http.StatusCreated, Body: allocationOut(a)}, nil
}

func (h *handlers) listAllocations(ctx context.Context, in *struct{}) (*allocationsOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	out := &allocationsOut{Body: []AllocationOut{}}
	for _, a := range h.s.Allocations(ctx, c) {
		out.Body = append(out.Body, allocationOut(a))
	}
	return out, nil
}

func (h *handlers) getAllocation(ctx context.Context, in *allocationIDIn) (*allocationBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.s.Allocation(ctx, c, in.ID)
	if err != nil {
		return nil, problem(err)
	}
	return &allocationBody{Body: allocationOut(a)}, nil
}

func (h *handlers) updateAllocation(ctx context.Context, in *allocationUpdateIn) (*allocationBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.s.UpdateAllocation(ctx, c, in.ID, in.Body.Client, in.Body.Streams)
	if err != nil {
		return nil, problem(err)
	}
	return &allocationBody{Body: allocationOut(a)}, nil
}

func (h *handlers) releaseAllocation(ctx context.Context, in *allocationReleaseIn) (*struct{}, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	return nil, problem(h.s.ReleaseAllocation(ctx, c, in.ID, in.Client))
}

func (h *handlers) getPolicy(ctx context.Context, in *struct{}) (*policyBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	return &policyBody{Body: h.s.Policy(ctx, c)}, nil
}

func (h *handlers) setPolicy(ctx context.Context, in *policyIn) (*policyBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := h.s.SetPolicy(ctx, c, in.Body)
	if err != nil {
		return nil, problem(err)
	}
	return &policyBody{Body: cfg}, nil
}

func (h *handlers) policyUsage(ctx context.Context, in *struct{}) (*usageOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	u, err := h.s.PolicyUsage(ctx, c)
	if err != nil {
		return nil, problem(err)
	}
	return &usageOut{Body: u}, nil
}
