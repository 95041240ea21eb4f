package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/wire"
)

// HistoryOut is wire.HistoryOut: the API documents live in package wire.
type HistoryOut = wire.HistoryOut

// FailureOut is wire.FailureOut: the API documents live in package wire.
type FailureOut = wire.FailureOut

func (h *handlers) registerHistory(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "history", Method: http.MethodGet, Path: "/v1/history", Tags: []string{"history"},
		Summary: "Throughput, queues and files done and failed over time, per endpoint and per link",
		Description: "The servers sample what they schedule every few seconds (sample_seconds) and keep a day of it; this sums the samples into buckets " +
			"(step_seconds, whole sampling intervals, aligned). Users see their own transfers; admins everyone's, or one user's or VO's.",
		Security: bearer,
	}, h.history)
	huma.Register(api, huma.Operation{
		OperationID: "list-failures", Method: http.MethodGet, Path: "/v1/failures", Tags: []string{"history"},
		Summary:     "Recent failed files, newest first, with why",
		Description: "Users see their own files; admins everyone's, or one user's or VO's. Page with before and before_id (the last entry's finished and its job's file).",
		Security:    bearer,
	}, h.failures)
}

type historyIn struct {
	From time.Time `query:"from" doc:"Start (RFC 3339; default: an hour before to). History is kept for a day or so (the server's --sample-keep): an earlier start is cut to the oldest kept."`
	To   time.Time `query:"to" doc:"End (RFC 3339; default: now)."`
	Step int       `query:"step" minimum:"0" maximum:"604800" doc:"Bucket width in seconds (0: about 240 buckets; at least the sampling interval; at most 1000 buckets)."`
	User string    `query:"user" maxLength:"64" doc:"One user's transfers (admins; a user may name only themselves)."`
	VO   string    `query:"vo" maxLength:"64" doc:"One VO's transfers."`
}

type historyOut struct{ Body HistoryOut }

func (h *handlers) history(ctx context.Context, in *historyIn) (*historyOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	out, err := h.s.History(ctx, c, server.HistoryQuery{From: in.From, To: in.To, Step: time.Duration(in.Step) * time.Second, User: in.User, VO: in.VO})
	if err != nil {
		return nil, problem(err)
	}
	return &historyOut{Body: out}, nil
}

type failuresIn struct {
	User     string    `query:"user" maxLength:"64" doc:"One user's files (admins; a user may name only themselves)."`
	VO       string    `query:"vo" maxLength:"64" doc:"One VO's files."`
	Search   string    `query:"q" maxLength:"256" doc:"Only files whose source, destination, error or job label contains this (ignoring case)."`
	Before   time.Time `query:"before" doc:"Only files that failed before this time (or at it, with a smaller before_id): paging."`
	BeforeID int64     `query:"before_id" minimum:"0" doc:"With before: the last entry's task id (id), for paging."`
	Limit    int       `query:"limit" minimum:"0" maximum:"1000" default:"100"`
}

type failuresOut struct{ Body []FailureOut }

func (h *handlers) failures(ctx context.Context, in *failuresIn) (*failuresOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	fs, err := h.s.Failures(ctx, c, server.FailureQuery{User: in.User, VO: in.VO, Search: in.Search, Before: in.Before, BeforeID: in.BeforeID, Limit: in.Limit})
	if err != nil {
		return nil, problem(err)
	}
	out := &failuresOut{Body: make([]FailureOut, len(fs))}
	for i, f := range fs {
		out.Body[i] = FailureOut{ID: f.ID, Job: f.JobID, Index: f.Index, Label: f.Label, Owner: f.Owner, VO: f.VO,
			Source: sluice.EncodeURL(f.Src), Destination: sluice.EncodeURL(f.Dst), SrcEndpoint: f.SrcEndpoint, DstEndpoint: f.DstEndpoint,
			Size: f.Size, Attempts: f.Attempts, Finished: f.Finished, Error: f.Error}
	}
	return out, nil
}
