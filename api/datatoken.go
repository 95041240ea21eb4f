package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/wire"
)

type dataTokenIn struct{ Body wire.DataTokenIn }
type dataTokenOut struct{ Body wire.DataTokenOut }

func (h *handlers) registerDataTokens(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "create-data-token", Method: http.MethodPost, Path: "/v1/data-tokens", Tags: []string{"auth"},
		Summary: "A data token to read or write one path of an agent directly",
		Description: "What `sluice cp` uses after `sluice login` for sluice://ENDPOINT/path: a token the agent accepts, checked against the caller's access rules as a job's file would be " +
			"(reading the path, or writing in its directory), lasting an hour. Storage endpoints are refused: their credentials stay with the service.",
		DefaultStatus: http.StatusCreated, Security: bearer,
	}, h.createDataToken)
}

func (h *handlers) createDataToken(ctx context.Context, in *dataTokenIn) (*dataTokenOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := h.s.DataToken(ctx, c, server.DataTokenRequest{URL: in.Body.URL, Write: in.Body.Write})
	if err != nil {
		return nil, problem(err)
	}
	return &dataTokenOut{Body: wire.DataTokenOut{
		Endpoint: t.Endpoint, Agent: t.Agent, Path: t.Path, Prefix: t.Prefix,
		Scope: t.Scope, Token: t.Token, Expires: t.Expires,
	}}, nil
}
