package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/sse"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/estimate"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

type jobIDIn struct {
	ID int64 `path:"id" minimum:"1"`
}

type jobBody struct {
	Body JobOut
}

func (h *handlers) register(api huma.API) {
	h.registerPolicy(api)
	h.registerAccess(api)
	h.registerDataTokens(api)
	h.registerHistory(api)
	huma.Register(api, huma.Operation{
		OperationID: "submit-job", Method: http.MethodPost, Path: "/v1/jobs", Tags: []string{"jobs"},
		Summary:       "Submit a job",
		Description:   "A job is a list of files, each with a source and a destination URL. The FTS3 job shape is accepted too. Returns 201 with the new job, or 200 with the earlier job when submission_id was used before.",
		DefaultStatus: http.StatusCreated, MaxBodyBytes: maxJobBody, Security: bearer,
		// A job of a million files is hundreds of MB: huma's 5 s would
		// refuse it from any but a fast client.
		BodyReadTimeout: jobBodyReadTimeout,
		// Validated file by file before huma reads it (jobbody.go).
		SkipValidateBody: true,
	}, h.submit)
	huma.Register(api, huma.Operation{
		OperationID: "list-jobs", Method: http.MethodGet, Path: "/v1/jobs", Tags: []string{"jobs"},
		Summary: "List jobs", Description: "Newest first. Users see their own jobs; admins see all.", Security: bearer,
	}, h.listJobs)
	huma.Register(api, huma.Operation{
		OperationID: "get-job", Method: http.MethodGet, Path: "/v1/jobs/{id}", Tags: []string{"jobs"},
		Summary: "Get a job's status", Security: bearer,
	}, h.getJob)
	huma.Register(api, huma.Operation{
		OperationID: "cancel-job", Method: http.MethodDelete, Path: "/v1/jobs/{id}", Tags: []string{"jobs"},
		Summary: "Cancel a job", Description: "Files not yet done are abandoned and their partial copies removed; files already done stay. A file that was already being put in place when the cancel came (verified, renamed) ends done, not canceled, so files_done may still rise by a few after the cancel returns.", Security: bearer,
	}, h.cancelJob)
	huma.Register(api, huma.Operation{
		OperationID: "list-files", Method: http.MethodGet, Path: "/v1/jobs/{id}/files", Tags: []string{"jobs"},
		Summary: "List a job's files", Security: bearer,
	}, h.listFiles)
	huma.Register(api, huma.Operation{
		OperationID: "job-audit", Method: http.MethodGet, Path: "/v1/jobs/{id}/audit", Tags: []string{"jobs"},
		Summary: "A job's state changes", Security: bearer,
	}, h.audit)
	huma.Register(api, huma.Operation{
		OperationID: "estimate", Method: http.MethodPost, Path: "/v1/estimate", Tags: []string{"estimation"},
		Summary:     "Estimate the best streams, throughput and time of a transfer",
		Description: "Samples the path with 1, 4, 16, ... streams (Yin, Yildirim et al., Algorithm 2, with levels four times apart), fits the parallel-stream model and returns the optimal streams, the predicted throughput (with the fit's uncertainty; never above every sample by more than that: a fitted curve that claims more is clamped, and clamped and note say so) and transfer time, the samples and what sampling cost. With use_history, a fresh stored answer for the endpoint pair is returned without sampling. Requests for different pairs run in parallel; one pair is sampled by one request at a time.",
		Security:    bearer,
	}, h.estimate)
	huma.Register(api, huma.Operation{
		OperationID: "list-endpoints", Method: http.MethodGet, Path: "/v1/endpoints", Tags: []string{"endpoints"},
		Summary: "List endpoints (agents and storage servers) with their live load", Security: bearer,
	}, h.endpoints)
	huma.Register(api, huma.Operation{
		OperationID: "put-storage-endpoint", Method: http.MethodPut, Path: "/v1/endpoints/{name}", Tags: []string{"endpoints"},
		Summary: "Register or change a storage endpoint (admins)",
		Description: "A GridFTP or XRootD server the service reaches itself, with the credential kept here. Jobs then name its files by its URLs " +
			"(gsiftp://host:port/path, root://host:port/path) or as sluice://NAME/path. Between two servers of one protocol the servers copy " +
			"the bytes themselves (third-party copy); between a server and an agent the agent reads or writes it; between a GridFTP and an " +
			"XRootD server the via agent moves them. Agents register themselves (sluice agent): their names cannot be taken.",
		Security: bearer,
	}, h.putStorageEndpoint)
	huma.Register(api, huma.Operation{
		OperationID: "delete-storage-endpoint", Method: http.MethodDelete, Path: "/v1/endpoints/{name}", Tags: []string{"endpoints"},
		Summary: "Remove a storage endpoint and its credential (admins)", Security: bearer, DefaultStatus: http.StatusNoContent,
	}, h.deleteStorageEndpoint)
	huma.Register(api, huma.Operation{
		OperationID: "status", Method: http.MethodGet, Path: "/v1/status", Tags: []string{"endpoints"},
		Summary: "The scheduler, its last cycle time and the files queued and running per class", Security: bearer,
	}, h.status)
	huma.Register(api, huma.Operation{
		OperationID: "create-token", Method: http.MethodPost, Path: "/v1/tokens", Tags: []string{"auth"},
		Summary:       "Create an API token",
		Description:   "Anyone may create a token for themselves; admins for any user (created in the given VO if new).",
		DefaultStatus: http.StatusCreated, Security: bearer,
	}, h.createToken)
	huma.Register(api, huma.Operation{
		OperationID: "list-tokens", Method: http.MethodGet, Path: "/v1/tokens", Tags: []string{"auth"},
		Summary: "List your API tokens (admins: ?user=NAME for another's); secrets are never shown", Security: bearer,
	}, h.listTokens)
	huma.Register(api, huma.Operation{
		OperationID: "revoke-token", Method: http.MethodDelete, Path: "/v1/tokens/{id}", Tags: []string{"auth"},
		Summary:       "Revoke one of your API tokens (admins: ?user=NAME for another's)",
		Description:   "The token stops working at once; event streams opened with it end within 15 s.",
		DefaultStatus: http.StatusNoContent, Security: bearer,
	}, h.revokeToken)
	huma.Register(api, huma.Operation{
		OperationID: "whoami", Method: http.MethodGet, Path: "/v1/whoami", Tags: []string{"auth"},
		Summary: "The caller's user", Security: bearer,
	}, h.whoami)
	huma.Register(api, huma.Operation{
		OperationID: "register-agent", Method: http.MethodPost, Path: "/v1/agents/register", Tags: []string{"agents"},
		Summary: "Register an agent (with the join token)", Security: bearer,
	}, h.registerAgent)
	huma.Register(api, huma.Operation{
		OperationID: "agent-heartbeat", Method: http.MethodPost, Path: "/v1/agents/heartbeat", Tags: []string{"agents"},
		Summary: "An agent's heartbeat (with the join token)", DefaultStatus: http.StatusNoContent, Security: bearer,
	}, h.heartbeat)
	sse.Register(api, huma.Operation{
		OperationID: "events", Method: http.MethodGet, Path: "/v1/events", Tags: []string{"events"},
		Summary:     "Stream of state changes and progress (server-sent events)",
		Description: "Events of the caller's jobs (an admin's: all jobs), optionally of one job. The first event is a keepalive, sent once the caller is subscribed: a client that reads a job after it has missed nothing of it. Progress events come about once a second per active job. A user holds at most 32 streams at once; past that, a stream sends one error event and ends.",
		Security:    bearer,
	}, map[string]any{"event": server.Event{}}, h.events)
}

type submitIn struct {
	Body JobIn
}

type submitOut struct {
	Status int
	Body   SubmitOut
}

// SubmitOut is wire.SubmitOut: the API documents live in package wire.
type SubmitOut = wire.SubmitOut

// jobSpec converts a submission, in either shape, to the server's form,
// with the warnings of its answer.
func jobSpec(in JobIn) (server.JobSpec, []string, error) {
	s, err := serverSpec(in)
	if err != nil {
		return s, nil, err
	}
	warnings, err := fts3Params(in.Params)
	if err != nil {
		return s, nil, err
	}
	return s, append(warnings, fileWarnings(in.Files)...), nil
}

// serverSpec is jobSpec without the warnings.
func serverSpec(in JobIn) (server.JobSpec, error) {
	s := server.JobSpec{
		Class: in.Class, Label: in.Label, VerifyChecksum: in.VerifyChecksum, Checksum: in.Checksum,
		Retry: in.Retry, SubmissionID: in.SubmissionID, Files: make([]server.FileSpec, len(in.Files)),
		Optimize: in.Optimization, Streams: in.Streams, Selection: in.Selection, PreserveModTime: in.PreserveMtime,
	}
	if in.Adaptive || in.AdaptiveParams != nil {
		s.Adaptive = &server.AdaptiveSpec{}
		if in.AdaptiveParams != nil {
			s.Adaptive = in.AdaptiveParams
		}
	}
	if in.Priority != nil {
		s.Priority = *in.Priority
	}
	if in.Deadline != nil {
		s.Deadline = *in.Deadline
	}
	switch {
	case in.SyncLevel != "":
		// A sync level replaces the files that differ by its test:
		// overwrite false (here or FTS3's) says the opposite.
		if (in.Overwrite != nil && !*in.Overwrite) || (in.Params != nil && in.Params.Overwrite != nil && !*in.Params.Overwrite) {
			return s, fmt.Errorf("sync_level %s replaces the files that differ from their source, and overwrite false says to replace nothing: give one", in.SyncLevel)
		}
		s.Overwrite = store.OverwriteSync + in.SyncLevel
	case in.Overwrite != nil && *in.Overwrite:
		s.Overwrite = store.OverwriteReplace
	case in.Params != nil:
		// FTS3's form: its overwrite, with its default (false) and
		// meaning (any file there fails).
		s.Overwrite = store.OverwriteFail
		if in.Params.Overwrite != nil && *in.Params.Overwrite {
			if in.Overwrite != nil {
				return s, fmt.Errorf("overwrite false and params.overwrite true: give one")
			}
			s.Overwrite = store.OverwriteReplace
		}
	}
	if p := in.Params; p != nil {
		if p.Priority != nil && in.Priority == nil {
			s.Priority = *p.Priority
		}
		if p.Retry != nil && in.Retry == nil {
			s.Retry = p.Retry
		}
		if p.NoStreams != nil && in.Streams == 0 {
			s.Streams = *p.NoStreams
		}
		if md, ok := p.Others()["job_metadata"]; ok && !isOff("job_metadata", md) {
			// Kept with the job and given back, as FTS3 does.
			s.Metadata = string(md)
		}
		if p.VerifyChecksum != nil && in.VerifyChecksum == nil {
			v, err := fts3Verify(p.VerifyChecksum)
			if err != nil {
				return s, err
			}
			s.VerifyChecksum = &v
		}
	}
	for i, f := range in.Files {
		fs := server.FileSpec{Source: f.Source, Destination: f.Destination, Size: -1, Checksum: f.Checksum, Recursive: f.Recursive}
		if f.Metadata != nil {
			md, err := json.Marshal(f.Metadata)
			if err != nil {
				return s, fmt.Errorf("files[%d]: metadata: %w", i, err)
			}
			fs.Metadata = string(md)
		}
		switch {
		case len(f.Sources) > 0 && f.Source != "":
			return s, fmt.Errorf("files[%d]: give source or sources, not both", i)
		case len(f.Sources) > 0:
			fs.Source, fs.Replicas = f.Sources[0], f.Sources[1:]
		}
		switch {
		case len(f.Destinations) == 1 && f.Destination != "":
			return s, fmt.Errorf("files[%d]: give destination or destinations, not both", i)
		case len(f.Destinations) == 1:
			fs.Destination = f.Destinations[0]
		}
		if fs.Source == "" || fs.Destination == "" {
			return s, fmt.Errorf("files[%d]: a source and a destination are required", i)
		}
		switch {
		case f.Size != nil && f.Filesize != nil && *f.Size != *f.Filesize:
			return s, fmt.Errorf("files[%d]: size and filesize disagree", i)
		case f.Size != nil:
			fs.Size = *f.Size
		case f.Filesize != nil:
			fs.Size = *f.Filesize
		}
		s.Files[i] = fs
	}
	return s, nil
}

func fts3Verify(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "both", "source", "target", "true", "b", "s", "t":
			return true, nil
		case "none", "false", "n", "":
			return false, nil
		}
	}
	return false, fmt.Errorf("params.verify_checksum %v: want true, false, both, source, target or none", v)
}

func (h *handlers) submit(ctx context.Context, in *submitIn) (*submitOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	spec, warnings, err := jobSpec(in.Body)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity(err.Error())
	}
	j, created, err := h.s.Submit(ctx, c, spec)
	if err != nil {
		return nil, problem(err)
	}
	out := &submitOut{Status: http.StatusCreated, Body: SubmitOut{JobOut: jobOut(server.JobStatus{Job: j}), Warnings: warnings}}
	if !created {
		out.Status = http.StatusOK
		st, err := h.s.Job(ctx, c, j.ID)
		if err != nil {
			return nil, problem(err)
		}
		out.Body.JobOut = jobOut(st)
	}
	return out, nil
}

type listJobsIn struct {
	State  string `query:"state" enum:"active,done,failed,canceled," doc:"Only jobs in this state."`
	User   string `query:"user" maxLength:"64" doc:"Only this user's jobs (admins; a user may name only themselves)."`
	VO     string `query:"vo" maxLength:"64" doc:"Only jobs submitted in this VO."`
	Search string `query:"q" maxLength:"256" doc:"Only jobs whose label contains this (ignoring case)."`
	Limit  int    `query:"limit" minimum:"0" maximum:"1000" default:"100"`
	Before int64  `query:"before" minimum:"0" doc:"Only jobs with a smaller id (paging)."`
}

type listJobsOut struct {
	Body []JobOut
}

func (h *handlers) listJobs(ctx context.Context, in *listJobsIn) (*listJobsOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	js, err := h.s.JobsFor(ctx, c, in.User, store.JobFilter{State: in.State, VO: in.VO, Search: in.Search, Limit: in.Limit, Before: in.Before})
	if err != nil {
		return nil, problem(err)
	}
	out := &listJobsOut{Body: make([]JobOut, len(js))}
	for i, j := range js {
		out.Body[i] = jobOut(j)
	}
	return out, nil
}

func (h *handlers) getJob(ctx context.Context, in *jobIDIn) (*jobBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	j, err := h.s.Job(ctx, c, in.ID)
	if err != nil {
		return nil, problem(err)
	}
	return &jobBody{Body: jobOut(j)}, nil
}

func (h *handlers) cancelJob(ctx context.Context, in *jobIDIn) (*jobBody, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	j, err := h.s.Cancel(ctx, c, in.ID)
	if err != nil {
		return nil, problem(err)
	}
	return &jobBody{Body: jobOut(j)}, nil
}

type listFilesIn struct {
	ID    int64  `path:"id" minimum:"1"`
	From  int    `query:"from" minimum:"0" doc:"First file index."`
	Limit int    `query:"limit" minimum:"0" maximum:"100000" default:"1000" doc:"At most this many files (0: the default, 1000)."`
	State string `query:"state" enum:"resolving,queued,running,done,failed,canceled," doc:"Only files in this state (a job's failed files, say); the next page starts from the last file's index + 1."`
}

type listFilesOut struct {
	Body []FileOut
}

func (h *handlers) listFiles(ctx context.Context, in *listFilesIn) (*listFilesOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := h.s.FilesInState(ctx, c, in.ID, in.State, in.From, in.Limit)
	if err != nil {
		return nil, problem(err)
	}
	out := &listFilesOut{Body: make([]FileOut, len(ts))}
	for i, t := range ts {
		out.Body[i] = fileOut(t)
	}
	return out, nil
}

// AuditOut is wire.AuditOut: the API documents live in package wire.
type AuditOut = wire.AuditOut

type auditOut struct {
	Body []AuditOut
}

type auditIn struct {
	ID    int64 `path:"id" minimum:"1"`
	From  int   `query:"from" minimum:"0" doc:"First entry (0: the oldest)."`
	Limit int   `query:"limit" minimum:"0" maximum:"100000" default:"1000" doc:"At most this many entries (0: the default, 1000)."`
}

func (h *handlers) audit(ctx context.Context, in *auditIn) (*auditOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	es, err := h.s.Audit(ctx, c, in.ID, in.From, in.Limit)
	if err != nil {
		return nil, problem(err)
	}
	out := &auditOut{Body: make([]AuditOut, len(es))}
	for i, e := range es {
		out.Body[i] = AuditOut{At: e.At, Task: e.TaskID, Actor: e.Actor, From: e.From, To: e.To, Detail: e.Detail, Term: e.Term}
	}
	return out, nil
}

type endpointsIn struct{}

type endpointsOut struct {
	Body []EndpointOut
}

func (h *handlers) endpoints(ctx context.Context, in *endpointsIn) (*endpointsOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	es, err := h.s.Endpoints(ctx)
	if err != nil {
		return nil, problem(err)
	}
	out := &endpointsOut{Body: make([]EndpointOut, len(es))}
	for i, e := range es {
		out.Body[i] = endpointOut(ctx, h.s, c, e)
	}
	return out, nil
}

// endpointOut is e as the API shows it to c: a storage endpoint's
// credential described to admins only, and never its secrets.
func endpointOut(ctx context.Context, s *server.Server, c server.Caller, e server.EndpointStatus) EndpointOut {
	o := EndpointOut{Name: e.Name, URL: e.URL, Up: e.Up, MaxThroughput: e.MaxThroughput, MaxCC: e.MaxCC,
		Throughput: e.Throughput, Peak: e.Peak, CC: e.CC, Registered: e.Registered, LastSeen: e.LastSeen, Kind: "agent"}
	if e.Storage() {
		o.Kind, o.Via = "storage", e.Via
		if c.User.Admin {
			o.Credential = s.StorageCredentialInfo(ctx, e.Name)
		}
	}
	return o
}

type storageEndpointIn struct {
	Name string `path:"name" minLength:"1" maxLength:"64"`
	Body wire.StorageEndpointIn
}

type storageEndpointOut struct{ Body EndpointOut }

func (h *handlers) putStorageEndpoint(ctx context.Context, in *storageEndpointIn) (*storageEndpointOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	spec := server.StorageSpec{URL: in.Body.URL, Via: in.Body.Via, MaxCC: in.Body.MaxCC, MaxThroughput: in.Body.MaxThroughput}
	if cr := in.Body.Credential; cr != nil {
		spec.Credential = &server.Credential{Credential: backend.Credential{Username: cr.Username, Password: cr.Password,
			Token: cr.Token, X509Proxy: cr.X509Proxy, Expires: cr.Expires}, Refresh: cr.Refresh}
	}
	e, err := h.s.PutStorageEndpoint(ctx, c, in.Name, spec)
	if err != nil {
		return nil, problem(err)
	}
	return &storageEndpointOut{Body: endpointOut(ctx, h.s, c, server.EndpointStatus{Endpoint: e})}, nil
}

type endpointNameIn struct {
	Name string `path:"name" minLength:"1" maxLength:"64"`
}

func (h *handlers) deleteStorageEndpoint(ctx context.Context, in *endpointNameIn) (*struct{}, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.s.DeleteStorageEndpoint(ctx, c, in.Name); err != nil {
		return nil, problem(err)
	}
	return nil, nil
}

// ClassOut counts one class's files.
type ClassOut struct {
	Queued  int `json:"queued" doc:"Files waiting (queued, or being stat'ed)."`
	Running int `json:"running"`
}

// StatusOut is what the service is doing now.
type StatusOut struct {
	Scheduler    string   `json:"scheduler"`
	CycleSeconds float64  `json:"cycle_seconds" doc:"How long the last scheduling cycle took."`
	Period       float64  `json:"period_seconds" doc:"Time between scheduling cycles."`
	Interactive  ClassOut `json:"interactive"`
	Batch        ClassOut `json:"batch"`
	Server       string   `json:"server" doc:"This server's ID (several servers may share one database)."`
	Partitions   []string `json:"partitions" doc:"Source endpoints whose transfers this server schedules; the queue figures are theirs."`
}

type statusOut struct{ Body StatusOut }

func (h *handlers) status(ctx context.Context, _ *struct{}) (*statusOut, error) {
	if _, err := h.caller(ctx); err != nil {
		return nil, err
	}
	st := h.s.Status()
	return &statusOut{Body: StatusOut{Scheduler: st.Scheduler, CycleSeconds: st.CycleSeconds, Period: st.Period,
		Interactive: ClassOut{st.Interactive.Queued, st.Interactive.Running}, Batch: ClassOut{st.Batch.Queued, st.Batch.Running},
		Server: st.Server, Partitions: nonNil(st.Partitions)}}, nil
}

// TokenIn is wire.TokenIn: the API documents live in package wire.
type TokenIn = wire.TokenIn

// TokenOut is wire.TokenOut: the API documents live in package wire.
type TokenOut = wire.TokenOut

type tokenIn struct {
	Body TokenIn
}

type tokenOut struct {
	Body TokenOut
}

type tokensIn struct {
	User string `query:"user" maxLength:"64" doc:"Another user's tokens (admins)."`
}

type tokensOut struct{ Body []server.TokenInfo }

func (h *handlers) listTokens(ctx context.Context, in *tokensIn) (*tokensOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := h.s.Tokens(ctx, c, in.User)
	if err != nil {
		return nil, problem(err)
	}
	if ts == nil {
		ts = []server.TokenInfo{}
	}
	return &tokensOut{Body: ts}, nil
}

type revokeIn struct {
	ID   string `path:"id" maxLength:"64"`
	User string `query:"user" maxLength:"64" doc:"Another user's token (admins)."`
}

func (h *handlers) revokeToken(ctx context.Context, in *revokeIn) (*struct{}, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.s.RevokeToken(ctx, c, in.User, in.ID); err != nil {
		return nil, problem(err)
	}
	return nil, nil
}

func (h *handlers) createToken(ctx context.Context, in *tokenIn) (*tokenOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(in.Body.TTLSeconds) * time.Second
	tok, u, exp, err := h.s.CreateToken(ctx, c, in.Body.User, in.Body.VO, in.Body.Admin, ttl, in.Body.Label)
	if err != nil {
		return nil, problem(err)
	}
	out := &tokenOut{Body: TokenOut{Token: tok, User: u.Name, VO: u.VO, Admin: u.Admin}}
	if !exp.IsZero() {
		out.Body.Expires = &exp
	}
	return out, nil
}

// UserOut is wire.UserOut: the API documents live in package wire.
type UserOut = wire.UserOut

type whoamiOut struct {
	Body UserOut
}

func (h *handlers) whoami(ctx context.Context, in *endpointsIn) (*whoamiOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	return &whoamiOut{Body: UserOut{Name: c.User.Name, VO: c.User.VO, Admin: c.User.Admin}}, nil
}

type agentIn struct {
	Body AgentIn
}

// JoinedOut is wire.JoinedOut: the API documents live in package wire.
type JoinedOut = wire.JoinedOut

type joinedOut struct {
	Body JoinedOut
}

// agentInfo is what the server takes of an agent's report.
func agentInfo(in AgentIn) server.AgentInfo {
	return server.AgentInfo{Name: in.Name, URL: in.URL, MaxThroughput: in.MaxThroughput, MaxCC: in.MaxCC}
}

func (h *handlers) registerAgent(ctx context.Context, in *agentIn) (*joinedOut, error) {
	j, err := h.s.Register(ctx, bearerOf(ctx), agentInfo(in.Body))
	if err != nil {
		return nil, problem(err)
	}
	return &joinedOut{Body: JoinedOut{Key: j.Key, HeartbeatSeconds: j.HeartbeatEvery.Seconds(), Scheduler: h.s.Scheduler()}}, nil
}

func (h *handlers) heartbeat(ctx context.Context, in *agentIn) (*struct{}, error) {
	return nil, problem(h.s.Heartbeat(ctx, bearerOf(ctx), agentInfo(in.Body)))
}

type eventsIn struct {
	Job int64 `query:"job" minimum:"0" doc:"Only this job's events."`
}

func (h *handlers) events(ctx context.Context, in *eventsIn, send sse.Sender) {
	// authFirst answered 401 before the stream (and its 200) started.
	c, err := h.caller(ctx)
	if err != nil {
		send(sse.Message{Data: server.Event{Type: "error", Detail: err.Error()}})
		return
	}
	ch, done, err := h.s.Subscribe(c, in.Job)
	if err != nil {
		send(sse.Message{Data: server.Event{Type: "error", Detail: err.Error()}})
		return
	}
	defer done()
	// A first event at once: the response (and its 200) reaches the
	// client now, not at the first change or keepalive, so a dashboard
	// knows it is live.
	if send(sse.Message{Data: server.Event{Type: "keepalive", At: time.Now()}}) != nil {
		return
	}
	// A comment-like keepalive is not available through Sender; a
	// periodic heartbeat event keeps proxies from closing an idle stream.
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	// The stream ends when the caller's token does: an expired token must
	// not keep receiving events.
	var expired <-chan time.Time
	if !c.Expires.IsZero() {
		tm := time.NewTimer(time.Until(c.Expires))
		defer tm.Stop()
		expired = tm.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-expired:
			send(sse.Message{Data: server.Event{Type: "error", Detail: "the token expired"}})
			return
		case e := <-ch:
			if send(sse.Message{Data: e}) != nil {
				return
			}
		case <-keep.C:
			// A revoked token's stream ends here.
			if _, err := h.s.Authenticate(ctx, bearerOf(ctx)); err != nil {
				send(sse.Message{Data: server.Event{Type: "error", Detail: err.Error()}})
				return
			}
			if send(sse.Message{Data: server.Event{Type: "keepalive", At: time.Now()}}) != nil {
				return
			}
		}
	}
}

// EstimateIn is wire.EstimateIn: the API documents live in package wire.
type EstimateIn = wire.EstimateIn

// EstimateOut is wire.EstimateOut: the API documents live in package wire.
type EstimateOut = wire.EstimateOut

type estimateIn struct{ Body EstimateIn }
type estimateOut struct{ Body EstimateOut }

func (h *handlers) estimate(ctx context.Context, in *estimateIn) (*estimateOut, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	b := in.Body
	e, err := h.s.Estimate(ctx, c, estimate.Request{
		Source: b.Source, Destination: b.Destination, Size: b.Size, SampleBytes: b.SampleSize,
		UseHistory: b.UseHistory, MaxStreams: b.MaxStreams, Growth: b.Growth,
	})
	if err != nil {
		return nil, problem(err)
	}
	if e.Samples == nil {
		e.Samples = []estimate.Sample{}
	}
	return &estimateOut{Body: EstimateOut{
		Source: e.Source, Destination: e.Destination, Streams: e.Streams, Throughput: e.Throughput,
		Fitted: e.Fitted, Uncertainty: e.Uncertainty, Clamped: e.Clamped, Note: e.Note,
		Seconds: e.Seconds, Size: e.Size, SampleSize: e.SampleBytes, Samples: e.Samples, Model: e.Model,
		Cost: e.Cost, CostBytes: e.CostBytes, FromHistory: e.FromHistory, At: e.At,
	}}, nil
}

// nonNil makes an empty list [] rather than null in JSON.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
