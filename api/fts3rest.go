package api

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// FTS3's REST API, as FTS3's own client (fts3.rest.client.easy) and
// tools written against fts-rest speak it, under FTS3Prefix: a client's
// endpoint is http://SERVER/fts3. The caller authenticates with a Sluice
// API token as the client's fts_access_token (sent as a bearer token);
// there is no X.509 and no delegation.
//
// These are plain net/http handlers, not huma operations: FTS3's shapes
// do not fit an OpenAPI description (GET /jobs/ID,ID answers a list, or
// 207 with a list of errors, where GET /jobs/ID answers one object; the
// fields of ?files= choose the answer's fields; errors are FTS3's
// {"status", "message"}, which its client reads, not problem documents),
// and FTS3's client asks for paths with a doubled slash
// (http://SERVER/fts3//jobs/1: it joins the endpoint and a path that
// starts with /), which the mux would answer with a redirect, and
// requests turns a redirected POST into a GET. The submission is
// converted to Sluice's job (wire.JobIn, with FTS3's params) and goes
// through the same schema, conversion, refusals and warnings as an FTS3
// job posted to /v1/jobs.

// FTS3Prefix is where FTS3's API is served.
const FTS3Prefix = "/fts3"

// fts3APIVersion is the version of fts-rest whose calls are answered
// here (its API_VERSION).
var fts3APIVersion = wire.FTS3Version{Major: 3, Minor: 13, Patch: 4}

// fts3Resources are the first path elements of FTS3's API that Sluice
// does not serve: a request for one is answered 501, naming it, rather
// than 404 as for a path FTS3 does not have either.
var fts3Resources = map[string]string{
	"delegation":     "delegation: Sluice authorises with its own API tokens, given as the client's access token",
	"config":         "FTS3's configuration: Sluice is configured by its own flags and API",
	"ban":            "banning storage elements and users",
	"archive":        "the archive of old jobs: finished jobs stay in GET /jobs/ID",
	"files":          "listing files across jobs: list a job's files with GET /jobs/ID/files",
	"optimizer":      "FTS3's optimizer: Sluice's scheduler chooses concurrency (GET /v1/status)",
	"api-docs":       "FTS3's API documents: Sluice's own API is described at /openapi.json",
	"snapshot":       "FTS3's queue snapshot: see GET /v1/status",
	"status":         "FTS3's server status: see GET /v1/status",
	"oauth2":         "FTS3's OAuth2 client registration: use a Sluice API token",
	"cs":             "cloud storage registration: storage endpoints are registered with PUT /v1/endpoints/NAME",
	"cloudStorage":   "cloud storage registration: storage endpoints are registered with PUT /v1/endpoints/NAME",
	"serverstatus":   "FTS3's server status: see GET /v1/status",
	"datamanagement": "data management (deletion, staging): Sluice only copies files",
	"admin":          "FTS3's administration",
}

// fts3Handler serves FTS3's API.
type fts3Handler struct {
	s    *server.Server
	jobs *jobValidation // the schema of a submission (jobbody.go)
}

// withFTS3 sends the requests under FTS3Prefix to f, before the mux
// sees (and redirects) their doubled slashes.
func withFTS3(f *fts3Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, FTS3Prefix); ok && (rest == "" || rest[0] == '/') {
			f.serve(w, r, rest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fts3Error is an FTS3 error answer.
func fts3Error(w http.ResponseWriter, code int, format string, a ...any) {
	writeFTS3(w, code, wire.FTS3Error{Status: fts3Status(code), Message: fmt.Sprintf(format, a...)})
}

// fts3Status is FTS3's status text: "404 Not Found".
func fts3Status(code int) string {
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

func writeFTS3(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// fts3Code is the status of a server error, and its message: refusals
// of a request are 400, as FTS3 answers them (its client shows a 400's
// message; of a 422 it shows only the code).
func fts3Code(err error) int {
	switch {
	case errors.Is(err, server.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, server.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, server.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, server.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, server.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, server.ErrUnavailable), store.Unavailable(err),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (f *fts3Handler) serve(w http.ResponseWriter, r *http.Request, rest string) {
	// Every call needs a token, the API's root too, as FTS3's do: a
	// client with a wrong token fails when it opens its Context.
	c, err := f.s.Authenticate(r.Context(), token(r.Header.Get("Authorization")))
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	// Empty elements are the client's doubled slashes.
	var parts []string
	for _, p := range strings.Split(rest, "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	route := func(allowed ...string) bool {
		if slices.Contains(allowed, method) {
			return true
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		fts3Error(w, http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
		return false
	}
	switch {
	case len(parts) == 0:
		if route(http.MethodGet) {
			writeFTS3(w, http.StatusOK, wire.FTS3Root{API: fts3APIVersion, Implementation: "sluice " + Version})
		}
	case len(parts) == 1 && parts[0] == "whoami":
		if route(http.MethodGet) {
			writeFTS3(w, http.StatusOK, fts3Whoami(c))
		}
	case parts[0] == "jobs":
		f.jobsRoute(w, r, c, parts[1:], method)
	default:
		if why, ok := fts3Resources[parts[0]]; ok || parts[0] == "whoami" {
			if !ok {
				why = "certificate details: Sluice has no certificates"
			}
			fts3Error(w, http.StatusNotImplemented, "not supported by Sluice's FTS3 API: %s", why)
			return
		}
		fts3Error(w, http.StatusNotFound, "no such FTS3 resource: %s", r.URL.Path)
	}
}

// jobsRoute serves /jobs and below.
func (f *fts3Handler) jobsRoute(w http.ResponseWriter, r *http.Request, c server.Caller, parts []string, method string) {
	notImpl := func(what string) {
		fts3Error(w, http.StatusNotImplemented, "not supported by Sluice's FTS3 API: %s", what)
	}
	switch {
	case len(parts) == 0:
		switch method {
		case http.MethodPost, http.MethodPut:
			f.submit(w, r, c)
		case http.MethodGet:
			notImpl("listing jobs (FTS3 lists active jobs by DN, VO and state); Sluice lists them with GET /v1/jobs")
		default:
			w.Header().Set("Allow", "GET, POST, PUT")
			fts3Error(w, http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
		}
	case len(parts) == 1 && (parts[0] == "all" || parts[0] == "vo") && method == http.MethodDelete:
		notImpl("canceling all jobs, or a VO's, at once; cancel each job with DELETE /jobs/ID")
	case len(parts) == 2 && parts[0] == "vo":
		notImpl("canceling a VO's jobs at once; cancel each job with DELETE /jobs/ID")
	case len(parts) == 1:
		switch method {
		case http.MethodGet:
			f.getJobs(w, r, c, parts[0])
		case http.MethodDelete:
			f.cancel(w, r, c, parts[0])
		case http.MethodPost:
			notImpl("changing a submitted job (its priority): Sluice's jobs keep what they were submitted with")
		default:
			w.Header().Set("Allow", "GET, DELETE")
			fts3Error(w, http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
		}
	case len(parts) == 2 && method == http.MethodGet:
		switch parts[1] {
		case "files":
			f.files(w, r, c, parts[0])
		case "dm":
			f.dm(w, r, c, parts[0])
		default:
			f.jobField(w, r, c, parts[0], parts[1])
		}
	case len(parts) >= 3 && parts[1] == "files":
		notImpl("canceling single files of a job, or reading their retries; cancel the whole job with DELETE /jobs/ID")
	default:
		fts3Error(w, http.StatusNotFound, "no such FTS3 resource: %s", r.URL.Path)
	}
}

// fts3Whoami describes the caller as FTS3 describes a token's user.
func fts3Whoami(c server.Caller) wire.FTS3Whoami {
	level := "personal"
	if c.User.Admin {
		level = "all"
	}
	// FTS3's delegation id is derived from the user's identity; Sluice
	// keeps no delegated credential, and the id only has to be stable.
	sum := sha1.Sum([]byte(c.User.Name))
	return wire.FTS3Whoami{
		UserDN: c.User.Name, DN: []string{c.User.Name}, VOMSCred: []string{}, VOs: []string{c.User.VO}, VOsID: []string{},
		Roles: []string{}, Level: map[string]string{"transfer": level}, DelegationID: hex.EncodeToString(sum[:8]),
		Method: "oauth2", IsRoot: c.User.Admin,
	}
}

// fts3JobID parses a job id of a path; Sluice's ids are numbers.
func fts3JobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: no job with the id %q has been found (Sluice's job ids are numbers)", server.ErrNotFound, s)
	}
	return id, nil
}

// fts3Page is how many files are read at a time.
const fts3Page = server.FilesPage

// eachFile calls fn with each file of a job, a page at a time.
func (f *fts3Handler) eachFile(ctx context.Context, c server.Caller, id int64, fn func(store.Task) error) error {
	for from := 0; ; from += fts3Page {
		ts, err := f.s.Files(ctx, c, id, from, fts3Page)
		if err != nil {
			return fmt.Errorf("reading the files of job %d: %w", id, err)
		}
		for _, t := range ts {
			if err := fn(t); err != nil {
				return err
			}
		}
		if len(ts) < fts3Page {
			return nil
		}
	}
}

// job reads a job and its first page of files (its source and
// destination storage, and whether a file has started, come from them).
func (f *fts3Handler) job(ctx context.Context, c server.Caller, id int64) (wire.FTS3Job, error) {
	j, err := f.s.Job(ctx, c, id)
	if err != nil {
		return wire.FTS3Job{}, err
	}
	ts, err := f.s.Files(ctx, c, id, 0, fts3Page)
	if err != nil {
		return wire.FTS3Job{}, fmt.Errorf("reading the files of job %d: %w", id, err)
	}
	return fts3Job(j, ts), nil
}

// fts3JobState is a Sluice job's state as FTS3 names it:
//
//	active, no file started yet              SUBMITTED
//	active, a file running, ended or moving  ACTIVE
//	done (every file done)                   FINISHED
//	failed, some files done                  FINISHEDDIRTY
//	failed, no file done                     FAILED
//	canceled                                 CANCELED
//
// FTS3's READY (and its staging, deletion, archiving and QoS states) have
// no Sluice counterpart and are never answered.
func fts3JobState(j server.JobStatus, started bool) string {
	switch j.State {
	case store.StateDone:
		return "FINISHED"
	case store.StateFailed:
		if j.FilesDone > 0 {
			return "FINISHEDDIRTY"
		}
		return "FAILED"
	case store.StateCanceled:
		return "CANCELED"
	}
	if started || j.FilesDone+j.FilesFailed+j.FilesCanceled > 0 || j.BytesDone > 0 {
		return "ACTIVE"
	}
	return "SUBMITTED"
}

// fts3FileState is a Sluice file's state as FTS3 names it: resolving
// (the source being stat'ed) and queued (waiting for the scheduler,
// also again after a transient failure or a preemption) are SUBMITTED;
// running is ACTIVE; done FINISHED; failed FAILED; canceled CANCELED.
func fts3FileState(state string) string {
	switch state {
	case store.StateResolving, store.StateQueued:
		return "SUBMITTED"
	case store.StateRunning:
		return "ACTIVE"
	case store.StateDone:
		return "FINISHED"
	case store.StateFailed:
		return "FAILED"
	case store.StateCanceled:
		return "CANCELED"
	}
	return strings.ToUpper(state)
}

// fts3Reason is FTS3's reason for a job canceled by its owner.
const fts3Canceled = "Job canceled by the user"

func fts3Time(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(wire.FTS3TimeFormat)
	return &s
}

// storageOf is the scheme://host of a URL: FTS3's storage element.
func storageOf(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

func fts3Job(j server.JobStatus, first []store.Task) wire.FTS3Job {
	started := false
	var src, dst *string
	for i, t := range first {
		started = started || t.State == store.StateRunning || store.Terminal(t.State)
		s, d := storageOf(t.Src), storageOf(t.Dst)
		if i == 0 {
			src, dst = &s, &d
			continue
		}
		if src != nil && *src != s {
			src = nil
		}
		if dst != nil && *dst != d {
			dst = nil
		}
	}
	out := wire.FTS3Job{
		JobID: strconv.FormatInt(j.ID, 10), JobState: fts3JobState(j, started), JobType: "N",
		SourceSE: src, DestSE: dst, UserDN: j.Owner, VOName: j.VO, SubmitTime: *fts3Time(j.Created),
		JobFinished: fts3Time(j.Finished), Priority: j.Priority, VerifyChecksum: "n", OverwriteFlag: "N",
		Retry: j.Retry, CancelJob: j.State == store.StateCanceled, HTTPStatus: "200 Ok",
		JobMetadata: rawJSON(j.Metadata),
	}
	if j.VerifyChecksum {
		out.VerifyChecksum = "b"
	}
	if store.Replaces(j.Overwrite) {
		out.OverwriteFlag = "Y"
	}
	switch out.JobState {
	case "CANCELED":
		out.Reason = fts3Canceled
	case "FAILED", "FINISHEDDIRTY":
		// FTS3's words; Sluice's own reason when a listing failed.
		out.Reason = "One or more files failed. Please have a look at the details for more information"
		if j.ListingError != "" {
			out.Reason = j.ListingError
		}
	}
	return out
}

func fts3File(t store.Task, jobID int64, vo string) wire.FTS3File {
	out := wire.FTS3File{
		FileID: t.ID, FileIndex: t.Index, JobID: strconv.FormatInt(jobID, 10), FileState: fts3FileState(t.State), VOName: vo,
		SourceSE: storageOf(t.Src), DestSE: storageOf(t.Dst),
		SourceSURL: sluice.EncodeURL(t.Src), DestSURL: sluice.EncodeURL(t.Dst),
		StartTime: fts3Time(t.Started), FinishTime: fts3Time(t.Finished), TxDuration: t.Trans,
		Throughput: t.Throughput / (1 << 20), Retry: t.Attempts,
		FileMetadata: rawJSON(t.Metadata),
	}
	if t.Size >= 0 {
		size := t.Size
		out.Filesize, out.UserFilesize = &size, &size
	}
	switch {
	case t.Checksum != "":
		out.Checksum = &t.Checksum
	case t.Expected != "":
		out.Checksum = &t.Expected
	}
	switch t.State {
	case store.StateDone:
		// A done file's error column holds its note ("already in
		// place"): no reason, as FTS3 gives a finished file none.
	case store.StateCanceled:
		out.Reason = fts3Canceled
	default:
		// A failed file's error; a queued one's last transient error.
		out.Reason = t.Error
	}
	return out
}

// getJobs answers GET /jobs/ID or /jobs/ID,ID,...: one job, or a list of
// jobs and errors (207 if there are errors), with the files' fields named
// by ?files=F1,F2.
func (f *fts3Handler) getJobs(w http.ResponseWriter, r *http.Request, c server.Caller, list string) {
	var fields []string
	if q := r.URL.Query().Get("files"); q != "" {
		fields = strings.Split(q, ",")
	}
	eachJob(w, list, func(s string) (wire.FTS3Job, error) { return f.jobWithFiles(r.Context(), c, s, fields) })
}

// eachJob answers a request for one job or a list of them (ID or
// ID,ID,...) with what do gives for each: one id, the job or its error;
// several, a list of jobs and errors, 207 if there are errors.
func eachJob(w http.ResponseWriter, list string, do func(id string) (wire.FTS3Job, error)) {
	ids := strings.Split(list, ",")
	var out []any
	errs := 0
	for _, s := range ids {
		if s == "" {
			continue
		}
		j, err := do(s)
		if err != nil {
			if len(ids) == 1 {
				fts3Error(w, fts3Code(err), "%v", err)
				return
			}
			errs++
			out = append(out, map[string]string{"job_id": s, "http_status": fts3Status(fts3Code(err)), "http_message": err.Error()})
			continue
		}
		if len(ids) == 1 {
			writeFTS3(w, http.StatusOK, j)
			return
		}
		out = append(out, j)
	}
	code := http.StatusOK
	if errs > 0 {
		code = http.StatusMultiStatus
	}
	if out == nil {
		out = []any{}
	}
	writeFTS3(w, code, out)
}

func (f *fts3Handler) jobWithFiles(ctx context.Context, c server.Caller, s string, fields []string) (wire.FTS3Job, error) {
	id, err := fts3JobID(s)
	if err != nil {
		return wire.FTS3Job{}, err
	}
	j, err := f.job(ctx, c, id)
	if err != nil || len(fields) == 0 {
		return j, err
	}
	j.Files = []map[string]any{}
	err = f.eachFile(ctx, c, id, func(t store.Task) error {
		all, err := toMap(fts3File(t, id, j.VOName))
		if err != nil {
			return err
		}
		// FTS3 leaves out the fields it does not have.
		m := make(map[string]any, len(fields))
		for _, k := range fields {
			if v, ok := all[k]; ok {
				m[k] = v
			}
		}
		j.Files = append(j.Files, m)
		return nil
	})
	return j, err
}

// toMap is v's JSON object as a map.
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", v, err)
	}
	return m, nil
}

// jobField answers GET /jobs/ID/FIELD: one field of the job.
func (f *fts3Handler) jobField(w http.ResponseWriter, r *http.Request, c server.Caller, s, field string) {
	id, err := fts3JobID(s)
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	j, err := f.job(r.Context(), c, id)
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	m, err := toMap(j)
	if err != nil {
		fts3Error(w, http.StatusInternalServerError, "%v", err)
		return
	}
	v, ok := m[field]
	if !ok {
		fts3Error(w, http.StatusNotFound, "no such field of a job: %s", field)
		return
	}
	writeFTS3(w, http.StatusOK, v)
}

// files answers GET /jobs/ID/files: every file of the job, written a page
// at a time (a job may have a million).
func (f *fts3Handler) files(w http.ResponseWriter, r *http.Request, c server.Caller, s string) {
	id, err := fts3JobID(s)
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	j, err := f.s.Job(r.Context(), c, id)
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	// The first page before the answer starts: an error there is still
	// answered with its status.
	first, err := f.s.Files(r.Context(), c, id, 0, fts3Page)
	if err != nil {
		fts3Error(w, fts3Code(err), "reading the files of job %d: %v", id, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	io.WriteString(w, "[")
	n := 0
	write := func(ts []store.Task) error {
		for _, t := range ts {
			if n > 0 {
				io.WriteString(w, ",")
			}
			n++
			if err := enc.Encode(fts3File(t, id, j.VO)); err != nil {
				return err
			}
		}
		return nil
	}
	if write(first) != nil {
		return
	}
	for from := fts3Page; len(first) == fts3Page; from += fts3Page {
		if first, err = f.s.Files(r.Context(), c, id, from, fts3Page); err != nil {
			// The status is sent: an unfinished array tells the
			// client something went wrong.
			return
		}
		if write(first) != nil {
			return
		}
	}
	io.WriteString(w, "]\n")
}

// dm answers GET /jobs/ID/dm, a job's data management operations
// (deletions, staging), which FTS3's client reads with a job's files:
// Sluice's jobs have none.
func (f *fts3Handler) dm(w http.ResponseWriter, r *http.Request, c server.Caller, s string) {
	id, err := fts3JobID(s)
	if err == nil {
		_, err = f.s.Job(r.Context(), c, id)
	}
	if err != nil {
		fts3Error(w, fts3Code(err), "%v", err)
		return
	}
	writeFTS3(w, http.StatusOK, []any{})
}

// cancel answers DELETE /jobs/ID[,ID...] as FTS3 does: the job as the
// cancel left it, with http_status 200 Ok, or 304 Not Modified (and the
// job's final state) if it had ended already; several ids: a list, 207
// if one failed.
func (f *fts3Handler) cancel(w http.ResponseWriter, r *http.Request, c server.Caller, list string) {
	eachJob(w, list, func(s string) (wire.FTS3Job, error) { return f.cancelOne(r.Context(), c, s) })
}

func (f *fts3Handler) cancelOne(ctx context.Context, c server.Caller, s string) (wire.FTS3Job, error) {
	id, err := fts3JobID(s)
	if err != nil {
		return wire.FTS3Job{}, err
	}
	before, err := f.s.Job(ctx, c, id)
	if err != nil {
		return wire.FTS3Job{}, err
	}
	if before.State != store.StateActive {
		j, err := f.job(ctx, c, id)
		msg := "The job is in a terminal state"
		j.HTTPStatus, j.HTTPMessage = "304 Not Modified", &msg
		return j, err
	}
	if _, err := f.s.Cancel(ctx, c, id); err != nil {
		return wire.FTS3Job{}, err
	}
	return f.job(ctx, c, id)
}
