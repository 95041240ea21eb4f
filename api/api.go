// Package api owns the HTTP interface of `sluice serve`: the REST API
// under /v1 (described by OpenAPI 3.1 at /openapi.json, built with huma),
// the server-sent event stream, agent registration, and Prometheus
// /metrics. It authenticates callers and translates between JSON and the
// server package's methods; it holds no state of its own.
//
// Errors are RFC 9457 problem documents (application/problem+json).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/web"
	"github.com/sluice-dtn/sluice/wire"
)

// Version is the API's version in the OpenAPI document.
const Version = "1.0.0"

// maxJobBody bounds a submission: 1,000,000 files of a few hundred bytes.
const maxJobBody = 512 << 20

// jobBodyReadTimeout bounds the reading of a submission's body: the
// largest at 10 Mb/s takes about seven minutes. (Only an authenticated
// caller gets as far as its body: authFirst.)
const jobBodyReadTimeout = 10 * time.Minute

// New returns the service's HTTP handler.
func New(s *server.Server) http.Handler {
	mux := http.NewServeMux()
	cfg := huma.DefaultConfig("Sluice", Version)
	cfg.Info.Description = "Schedules and moves bulk scientific data between storage endpoints."
	cfg.OpenAPIPath = "/openapi"
	// The reference at /docs is package web's, served from the binary:
	// huma's page loads its renderer from a CDN.
	cfg.DocsPath = ""
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "An API token (`sluice api-token create`)."},
	}
	// No "$schema" links in bodies: clients post back what they read.
	cfg.CreateHooks = nil
	api := humago.New(mux, cfg)
	api.UseMiddleware(authFirst(api, s))
	// After authFirst: only an authenticated body is read. The schemas
	// it checks against exist once the operations are registered.
	var jobs *jobValidation
	api.UseMiddleware(func(ctx huma.Context, next func(huma.Context)) { jobs.middleware(ctx, next) })
	h := &handlers{s: s}
	h.register(api)
	jobs = newJobValidation(api)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	dash := web.Handler() // the dashboard: its page at /, its assets under /ui/
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /ui/", dash)
	docs := web.Docs() // the API reference: its page at /docs, its assets under /docs/
	mux.Handle("GET /docs", docs)
	mux.Handle("GET /docs/", docs)
	// FTS3's REST API, for FTS3's clients (fts3rest.go): outside the mux,
	// whose redirects of the doubled slashes they send would break them.
	fts3 := &fts3Handler{s: s, jobs: jobs}
	return bodyDeadlineEnds(withFTS3(fts3, withBearer(problemAnswers(mux))))
}

// authFirst checks the credentials of an operation that needs them
// before its body is read: huma reads and validates a body (up to the
// operation's limit, 512 MiB for a job) before the handler runs, and the
// decoding takes many times the body's size in memory, so an
// unauthenticated request must be answered 401 at once. Agents'
// operations take the join token; every other one an API token, whose
// caller is kept for the handler (no second lookup).
func authFirst(api huma.API, s *server.Server) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		if op == nil || len(op.Security) == 0 {
			next(ctx)
			return
		}
		tok := token(ctx.Header("Authorization"))
		var err error
		if slices.Contains(op.Tags, "agents") {
			err = s.CheckJoin(tok)
		} else {
			var c server.Caller
			if c, err = s.Authenticate(ctx.Context(), tok); err == nil {
				ctx = huma.WithValue(ctx, callerKey{}, c)
			}
		}
		if err != nil {
			status := http.StatusUnauthorized
			switch {
			case errors.Is(err, server.ErrUnauthorized):
			case store.Unavailable(err):
				status = http.StatusServiceUnavailable
			default:
				status = http.StatusInternalServerError
			}
			_ = huma.WriteErr(api, ctx, status, err.Error())
			return
		}
		next(ctx)
	}
}

type callerKey struct{}

type handlers struct{ s *server.Server }

var bearer = []map[string][]string{{"bearer": {}}}

type bearerKey struct{}

// withBearer puts the request's bearer token in its context, where the
// handlers find it (the operations declare the bearer security scheme in
// the OpenAPI document).
func withBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := token(r.Header.Get("Authorization"))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bearerKey{}, tok)))
	})
}

// token is the credentials of an Authorization header of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 §11.1), as the agents
// read it too.
func token(h string) string {
	scheme, t, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(t)
}

func bearerOf(ctx context.Context) string {
	t, _ := ctx.Value(bearerKey{}).(string)
	return t
}

func (h *handlers) caller(ctx context.Context) (server.Caller, error) {
	if c, ok := ctx.Value(callerKey{}).(server.Caller); ok {
		return c, nil // authenticated before the body was read (authFirst)
	}
	c, err := h.s.Authenticate(ctx, bearerOf(ctx))
	return c, problem(err)
}

// problem maps the server's errors to statuses.
func problem(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, server.ErrUnauthorized):
		return huma.Error401Unauthorized(err.Error())
	case errors.Is(err, server.ErrForbidden):
		return huma.Error403Forbidden(err.Error())
	case errors.Is(err, server.ErrNotFound):
		return huma.Error404NotFound(err.Error())
	case errors.Is(err, server.ErrInvalid):
		return huma.Error422UnprocessableEntity(err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return huma.Error503ServiceUnavailable("request interrupted: " + err.Error())
	case errors.Is(err, server.ErrUnavailable):
		return huma.Error503ServiceUnavailable(err.Error())
	case errors.Is(err, server.ErrConflict):
		return huma.Error409Conflict(err.Error())
	case store.Unavailable(err):
		// The database's disk is full, or it is down: nothing was
		// done, and the same request may go through later.
		return huma.Error503ServiceUnavailable("the service's database cannot take requests now; try again later: " + err.Error())
	}
	return huma.Error500InternalServerError(err.Error())
}

// FileIn is wire.FileIn: the API documents live in package wire.
type FileIn = wire.FileIn

// ParamsIn is wire.ParamsIn: the API documents live in package wire.
type ParamsIn = wire.ParamsIn

// JobIn is wire.JobIn: the API documents live in package wire.
type JobIn = wire.JobIn

// JobOut is wire.JobOut: the API documents live in package wire.
type JobOut = wire.JobOut

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func jobOut(j server.JobStatus) JobOut {
	return JobOut{
		ID: j.ID, Owner: j.Owner, VO: j.VO, Label: j.Label, Class: j.Class, Priority: j.Priority,
		State: j.State, SubmissionID: j.SubmissionID, Created: j.Created, Finished: timePtr(j.Finished),
		Deadline: timePtr(j.Deadline), VerifyChecksum: j.VerifyChecksum, Checksum: j.Checksum,
		Optimization: j.Optimize, Streams: j.Streams, Adaptive: j.Adaptive != "", Selection: j.Selection, Overwrite: store.Replaces(j.Overwrite), IfExists: ifExists(j.Overwrite), SyncLevel: store.SyncLevel(j.Overwrite), PreserveMtime: j.PreserveModTime, Listing: j.Listing, ListingError: j.ListingError, Files: j.Files, FilesDone: j.FilesDone, FilesInPlace: j.FilesInPlace, FilesFailed: j.FilesFailed, FilesCanceled: j.FilesCanceled,
		Bytes: j.Bytes, BytesDone: j.BytesDone, Throughput: j.Throughput, ETA: j.ETA, Metadata: rawJSON(j.Metadata),
	}
}

// rawJSON is stored metadata as the API gives it back (nil: none).
func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// ifExists is JobOut.IfExists for a store.Job's Overwrite.
func ifExists(overwrite string) string {
	switch overwrite {
	case store.OverwriteFail:
		return "fail"
	case store.OverwriteReplace:
		return "replace"
	}
	if store.SyncLevel(overwrite) != "" {
		return "sync"
	}
	return "skip_identical"
}

// FileOut is wire.FileOut: the API documents live in package wire.
type FileOut = wire.FileOut

func fileOut(t store.Task) FileOut {
	f := FileOut{
		// URLs, as submitted: names percent-encoded.
		Index: t.Index, Source: sluice.EncodeURL(t.Src), Destination: sluice.EncodeURL(t.Dst), Size: t.Size, State: t.State, CC: t.CC,
		BytesDone: t.Done, Attempts: t.Attempts, Preemptions: t.Preemptions, Checksum: t.Checksum,
		Expected: t.Expected, Throughput: t.Throughput, Wait: t.Wait, Transfer: t.Trans,
		Started: timePtr(t.Started), Finished: timePtr(t.Finished), Error: t.Error, Metadata: rawJSON(t.Metadata),
	}
	if t.State == store.StateDone {
		// A done task's error column holds its note (store.NoteInPlace).
		f.Note, f.Error = t.Error, ""
	}
	if t.State == store.StateDone && t.Trans > 0 {
		f.Slowdown = math.Max(1, t.Finished.Sub(t.Arrival).Seconds()/t.Trans)
	}
	return f
}

// EndpointOut is wire.EndpointOut: the API documents live in package wire.
type EndpointOut = wire.EndpointOut

// AgentIn is wire.AgentIn: the API documents live in package wire.
type AgentIn = wire.AgentIn
