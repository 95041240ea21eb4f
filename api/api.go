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

// New returns the service's HTTP handler.
func New(s *server.Server) http.Handler {
	mux := http.NewServeMux()
	cfg := huma.DefaultConfig("Sluice", Version)
	cfg.Info.Description = "Schedules and moves bulk scientific data between storage endpoints."
	cfg.OpenAPIPath = "/openapi"
	cfg.DocsPath = "/docs"
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "An API token (`sluice token create`)."},
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
	return withBearer(problemAnswers(mux))
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

// FileIn is one file of a submission. Sluice's own fields are source,
// destination and size; FTS3 clients send sources, destinations and
// filesize instead.
type FileIn struct {
	Source       string   `json:"source,omitempty" doc:"sluice://ENDPOINT/path of the file to copy."`
	Destination  string   `json:"destination,omitempty" doc:"sluice://ENDPOINT/path to write."`
	Sources      []string `json:"sources,omitempty" maxItems:"16" doc:"FTS3 form of source; several are replicas of one file on different endpoints, downloaded from all at once (see the job's selection)."`
	Destinations []string `json:"destinations,omitempty" maxItems:"1" doc:"FTS3 form of destination."`
	Size         *int64   `json:"size,omitempty" minimum:"0" maximum:"1152921504606846976" doc:"Size in bytes, at most 2^60 (1 EiB; a job's sizes add up to at most that too); stat'ed at the source if absent."`
	Filesize     *int64   `json:"filesize,omitempty" minimum:"0" maximum:"1152921504606846976" doc:"FTS3 form of size."`
	Checksum     string   `json:"checksum,omitempty" maxLength:"200" doc:"Expected checksum, ALGO:HEX (e.g. adler32:0a1b2c3d)."`
	Metadata     any      `json:"metadata,omitempty" doc:"FTS3 file metadata: not kept; a submission with some is answered with a warning."`
	Activity     string   `json:"activity,omitempty" maxLength:"200" doc:"FTS3 activity: not used for scheduling (priority and class are); a submission with one is answered with a warning."`
}

// ParamsIn is FTS3's "params" object. FTS3 has many more parameters than
// Sluice uses; the others are accepted, so that FTS3 tools can submit
// unchanged, but never silently: one that asks for something Sluice does
// not do (staging from tape, multihop, ...) is refused, and any other set
// to something other than its "off" value is named in the answer's
// warnings (see fts3Params).
type ParamsIn struct {
	_              struct{} `additionalProperties:"true"`
	VerifyChecksum any      `json:"verify_checksum,omitempty" doc:"true/false, or FTS3's both/source/target/none."`
	Priority       *int     `json:"priority,omitempty" minimum:"1" maximum:"5"`
	Retry          *int     `json:"retry,omitempty" minimum:"0" maximum:"100"`
	NoStreams      *int     `json:"nostreams,omitempty" minimum:"0" maximum:"1024" doc:"FTS3 form of streams."`
	Overwrite      *bool    `json:"overwrite,omitempty" doc:"FTS3's overwrite: false (FTS3's default) fails each file whose destination exists (\"destination exists; overwrite is not enabled\"); true replaces it."`

	// others are the parameters Sluice does not use, as sent.
	others map[string]json.RawMessage
}

// UnmarshalJSON decodes the parameters Sluice uses and keeps the others
// aside (to refuse or warn about), also under a decoder that disallows
// unknown fields (`sluice submit -f` checks a job file's own fields that
// way): FTS3 job files carry parameters such as job_metadata.
func (p *ParamsIn) UnmarshalJSON(b []byte) error {
	type params ParamsIn // without this method
	if err := json.Unmarshal(b, (*params)(p)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"verify_checksum", "priority", "retry", "nostreams", "overwrite"} {
		delete(all, k)
	}
	if len(all) > 0 {
		p.others = all
	}
	return nil
}

// MarshalJSON writes the parameters Sluice uses and the others as they
// were read, so that a client that decoded a job file (sluice submit -f)
// passes them on, for the service to refuse or warn about.
func (p ParamsIn) MarshalJSON() ([]byte, error) {
	type params ParamsIn // without this method
	b, err := json.Marshal(params(p))
	if err != nil || len(p.others) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range p.others {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// JobIn is a submission.
type JobIn struct {
	Files          []FileIn             `json:"files" minItems:"1" maxItems:"1000000"`
	Class          string               `json:"class,omitempty" enum:"interactive,batch" doc:"interactive (default) or batch (STEAL's background class)."`
	Priority       *int                 `json:"priority,omitempty" minimum:"1" maximum:"5"`
	Label          string               `json:"label,omitempty" maxLength:"256"`
	Deadline       *time.Time           `json:"deadline,omitempty" doc:"When the job should be done by (RFC 3339, in the future). Recorded and returned with the job; the scheduler does not order by it: use priority."`
	VerifyChecksum *bool                `json:"verify_checksum,omitempty" doc:"Verify each file end to end (default true)."`
	Checksum       string               `json:"checksum_algorithm,omitempty" enum:"adler32,md5,sha256,crc32c,none" doc:"Algorithm used to verify (default adler32)."`
	Retry          *int                 `json:"retry,omitempty" minimum:"0" maximum:"100" doc:"Transient failures tolerated per file (default 3)."`
	SubmissionID   string               `json:"submission_id,omitempty" maxLength:"256" doc:"Makes submission idempotent: the same id returns the first job."`
	Params         *ParamsIn            `json:"params,omitempty" doc:"FTS3 job parameters."`
	Streams        int                  `json:"streams,omitempty" minimum:"0" maximum:"1024" doc:"Fix each file's concurrency (partial transfers at once); 0: the scheduler chooses."`
	Adaptive       bool                 `json:"adaptive,omitempty" doc:"Run as an adaptive client of the Policy Service (Chervenak et al., Fig. 3): request streams per pair, keep min(c_i, streams/p) files in flight, adapt every d files."`
	AdaptiveParams *server.AdaptiveSpec `json:"adaptive_params,omitempty" doc:"The adaptive client's parameters (defaults: ci 4, cmax 8, delta 2, d 4, p 4, t 0.1); giving them makes the job adaptive. p above a pair's per-client limit is refused."`
	Selection      string               `json:"selection,omitempty" enum:"bos,eas,ms,ntss,tcs,tcs-minus,tcs-dynamic," doc:"How a file with several sources is split across them (Yang, Schopf, Foster): bos (best source only), eas (equal parts), ms, ntss, tcs (Tuned Conservative Scheduling, default), tcs-minus, tcs-dynamic (tcs with work stealing)."`
	Optimization   bool                 `json:"optimization,omitempty" doc:"Estimate each endpoint pair's best concurrency first (from history when fresh, else by sampling the path) and run the files with it."`
	Overwrite      *bool                `json:"overwrite,omitempty" doc:"Replace files already at their destinations. Default false: nothing is replaced; a file already in place (same size and checksum as the source) is recorded done without being copied (note \"already in place\"), any other fails. An FTS3 job (one with params) follows FTS3's params.overwrite instead: false fails every file whose destination exists."`
}

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
		Optimization: j.Optimize, Streams: j.Streams, Adaptive: j.Adaptive != "", Selection: j.Selection, Overwrite: j.Overwrite == store.OverwriteReplace, IfExists: ifExists(j.Overwrite), Files: j.Files, FilesDone: j.FilesDone, FilesInPlace: j.FilesInPlace, FilesFailed: j.FilesFailed, FilesCanceled: j.FilesCanceled,
		Bytes: j.Bytes, BytesDone: j.BytesDone, Throughput: j.Throughput, ETA: j.ETA,
	}
}

// ifExists is JobOut.IfExists for a store.Job's Overwrite.
func ifExists(overwrite string) string {
	switch overwrite {
	case store.OverwriteFail:
		return "fail"
	case store.OverwriteReplace:
		return "replace"
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
		Started: timePtr(t.Started), Finished: timePtr(t.Finished), Error: t.Error,
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
