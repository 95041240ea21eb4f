package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/server"
)

type accessBody struct{ Body server.AccessConfig }
type accessIn struct{ Body server.AccessConfig }

func (h *handlers) registerAccess(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "get-access", Method: http.MethodGet, Path: "/v1/access", Tags: []string{"access"},
		Summary:     "Access rules: which paths of which endpoints users' jobs may read and write",
		Description: "Admins see every rule; other users the rules that apply to them, with {user} and {vo} filled in.",
		Security:    bearer,
	}, h.getAccess)
	huma.Register(api, huma.Operation{
		OperationID: "set-access", Method: http.MethodPut, Path: "/v1/access", Tags: []string{"access"},
		Summary: "Replace the access rules (admins)",
		Description: "A job of a user who is not an admin may read a source (or replica) and write a destination only where a rule allows it; " +
			"with no rule, nowhere. Rules apply to jobs and estimates submitted afterwards.",
		Security: bearer,
	}, h.setAccess)
}

func (h *handlers) getAccess(ctx context.Context, in *struct{}) (*accessBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.s.Access(ctx, c)
	if err != nil {
		return nil, problem(err)
	}
	return &accessBody{Body: a}, nil
}

func (h *handlers) setAccess(ctx context.Context, in *accessIn) (*accessBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	a, err := h.s.SetAccess(ctx, c, in.Body)
	if err != nil {
		return nil, problem(err)
	}
	return &accessBody{Body: a}, nil
}
