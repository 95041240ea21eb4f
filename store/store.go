// Package store owns the service's durable state: users and their API
// tokens, jobs and their tasks (one task per file), endpoints (the agents
// that registered), checkpoints (the transfer engine's journals of
// completed byte ranges), observations (the throughput model's history),
// the estimation service's optimisations, the Policy Service's stream
// allocations, settings, an audit log of state changes, and the
// dashboard's history (each server's samples of what it schedules,
// history.go).
//
// Store is an interface with one implementation over database/sql and two
// dialects: embedded SQLite (modernc.org/sqlite, the default: one file in
// the data directory, WAL, one writer connection) and PostgreSQL (pgx,
// for several servers). Open picks the dialect from the URL and runs that
// dialect's goose migrations before returning, so a server never runs
// against a schema it does not know.
//
// Nothing the service needs after a restart lives only in memory: the
// scheduler's in-memory view of active tasks is rebuilt from ActiveTasks at
// start, and every state change is written here before it is acted upon or
// reported.
package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// Errors callers act on (test with errors.Is).
var (
	// ErrNotFound: no such row (or an expired token).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the change contradicts the stored state (for example a
	// task that is no longer in the state the caller expected).
	ErrConflict = errors.New("conflict")
)

// Task and job states.
const (
	// StateResolving: the task's size is not known yet; the service stats
	// the source before the task can be scheduled.
	StateResolving = "resolving"
	// StateQueued: waiting for the scheduler (also after a preemption or
	// a transient failure).
	StateQueued = "queued"
	// StateRunning: bytes are moving (or about to).
	StateRunning = "running"
	// Terminal states.
	StateDone     = "done"
	StateFailed   = "failed"
	StateCanceled = "canceled"

	// Job-only states: a job is active until every task is terminal, then
	// done (all done), failed (some failed) or canceled.
	StateActive = "active"
)

// MaxSize is the largest size, and byte count done, a task may have:
// 2^60 bytes (1 EiB), the bound the agents' file backend puts on every
// file and offset (backend/file.MaxSize; the server checks the two are
// equal). The service also takes no job whose files add up to more.
// Bounding every term keeps the sums of a job's bytes, in SQL and in
// Go, far from int64's limit; a stored row outside it (written by hand,
// or by an older version) is failed by FailOutOfRange, and counted as
// if it were at the bound meanwhile.
const MaxSize = 1 << 60

// Terminal reports whether a task state is final.
func Terminal(state string) bool {
	return state == StateDone || state == StateFailed || state == StateCanceled
}

// Transfer classes (STEAL).
const (
	ClassInteractive = "interactive"
	ClassBatch       = "batch"
)

// User is an account of the API. Users belong to a virtual organisation.
type User struct {
	ID      int64
	Name    string
	VO      string
	Admin   bool
	Created time.Time
}

// Token is an API bearer token. Only its SHA-256 (hex) is stored.
type Token struct {
	Hash    string
	UserID  int64
	Label   string
	Expires time.Time // zero: never
	Created time.Time
}

// Job is one submission: a list of files moved under one id.
type Job struct {
	ID      int64
	OwnerID int64
	// Metadata is what the submitter attached to the job (JSON, as sent;
	// FTS3's job_metadata), or "": written by CreateJob, read by Job.
	Metadata string
	Owner    string // the owner's name (filled by reads)
	VO       string // the owner's VO at submission
	// SubmissionID, if set, makes submission idempotent per owner: a
	// second CreateJob with the same owner and SubmissionID returns the
	// first job.
	SubmissionID   string
	Label          string
	Class          string // ClassInteractive or ClassBatch
	Priority       int
	Deadline       time.Time // zero: none
	VerifyChecksum bool
	// Checksum is the algorithm used to verify files ("adler32", ...,
	// "none").
	Checksum string
	Retry    int // transient failures tolerated per file
	// Optimize asks the service to estimate each endpoint pair's best
	// concurrency before the job's files start (from a fresh stored
	// Optimization, or by sampling the path) and to run them with it.
	Optimize bool
	// Streams, if > 0, fixes the concurrency of the job's files (FTS3's
	// nostreams); the scheduler still decides when they start.
	Streams int
	// Adaptive, if set, makes the job an adaptive client of the Policy
	// Service (Chervenak et al., Fig. 3): its parameters as JSON.
	Adaptive string
	// Selection is how files with replicas are split across them (a
	// multisrc policy, or tcs-dynamic); "" for the default.
	Selection string
	// Overwrite is what the job does with a file already at a
	// destination: OverwriteKeep, OverwriteFail, OverwriteReplace or a
	// sync level (OverwriteSync).
	Overwrite string
	// PreserveModTime gives each file its source's modification time.
	PreserveModTime bool
	// Listings are the job's recursive items, given to CreateJob (which
	// stores them with the job); Listing says, when the job is read,
	// whether one of them is still being listed.
	Listings []Listing
	Listing  bool
	// ListingError is why a listing of the job stopped before its end
	// ("" if none did): the job fails with it.
	ListingError string
	State        string
	Created      time.Time
	Finished     time.Time // zero while active

	// Counters, filled by Job and Jobs from the job's tasks.
	Files, FilesDone, FilesFailed, FilesCanceled int
	// FilesInPlace counts, of FilesDone, those found already at their
	// destinations (same size and checksum) and not copied: done tasks
	// whose Error is NoteInPlace.
	FilesInPlace int
	// BytesDone counts the files done and the partial progress of those
	// still to end; a failed or canceled file's partial copy is removed,
	// so its bytes are not counted.
	Bytes, BytesDone int64
}

// Job.Overwrite values.
const (
	// OverwriteKeep (Sluice's default) replaces nothing: a file at the
	// destination identical to the source (same size and checksum) is
	// recorded done without being copied (NoteInPlace), any other fails.
	OverwriteKeep = ""
	// OverwriteFail (FTS3's overwrite false) fails every file whose
	// destination exists.
	OverwriteFail = "fail"
	// OverwriteReplace replaces what is at the destination.
	OverwriteReplace = "replace"
	// OverwriteSync is the prefix of the sync levels (Globus's
	// sync_level): OverwriteSync and one of backend.SyncLevels.
	// A file at the destination that matches the source by the level's
	// test is recorded done without being copied (NoteInPlace); any
	// other is replaced.
	OverwriteSync = "sync-"
)

// SyncLevel is the sync level of a job's Overwrite, or "" if it has none.
func SyncLevel(overwrite string) string {
	if l, ok := strings.CutPrefix(overwrite, OverwriteSync); ok && backend.ValidSyncLevel(l) {
		return l
	}
	return ""
}

// Replaces says whether a job with this Overwrite replaces a file at the
// destination that it copies (OverwriteReplace, and the sync levels:
// what they copy differs from the source).
func Replaces(overwrite string) bool {
	return overwrite == OverwriteReplace || SyncLevel(overwrite) != ""
}

// NoteInPlace is the Error of a done task whose file was found at its
// destination, identical to the source (or, for a sync level, matching
// it by the level's test), and not copied.
// A done task's Error holds no error: it is the note of how it ended.
const NoteInPlace = "already in place"

// Listing is a directory a job copies whole (a recursive item): the
// service lists its source a page at a time (ListPage) and adds a task
// per file found, the page and its cursor in one transaction (AddListed).
// A job is not done while one of its listings is not.
type Listing struct {
	JobID int64
	Item  int // the item's position in the submission
	// Src and Dst are the directories' URLs (sluice://endpoint/path);
	// SrcEndpoint (the listing's partition: its owner lists it) and
	// DstEndpoint the names of their endpoints.
	Src, Dst                 string
	SrcEndpoint, DstEndpoint string
	// LastPath is the path of the last entry listed (the cursor); ""
	// before the first page.
	LastPath string
	// Files and Dirs count the tasks added and the directories made.
	Files, Dirs int64
	Done        bool
	// Error says why a listing stopped before its end (the source
	// directory is gone, say); its job then fails.
	Error string
}

// Task is one file of a job: the unit the scheduler schedules.
type Task struct {
	ID    int64
	JobID int64
	Index int // position in the job's file list
	// Src and Dst are URLs (sluice://endpoint/path); SrcEndpoint and
	// DstEndpoint the names of the endpoints they resolve to.
	Src, Dst                 string
	SrcEndpoint, DstEndpoint string
	// Replicas are other copies of Src (sluice://endpoint/path URLs): the
	// file is downloaded from all of them at once (Yang, Schopf, Foster).
	Replicas []string
	// Metadata is what the submitter attached to the file (JSON, as
	// sent; FTS3's files[].metadata), or "": written by CreateJob, read
	// by Tasks only (the scheduler's reads leave it out).
	Metadata    string
	Size        int64  // -1 while unknown (StateResolving)
	Expected    string // user's checksum of the file, "algo:hex", or ""
	Batch       bool
	State       string
	CC          int   // concurrency of the current or last run
	Done        int64 // bytes known to be written (checkpointed)
	Attempts    int   // transient failures so far
	Preemptions int
	Arrival     time.Time
	Started     time.Time // first start; zero if never
	Finished    time.Time // zero unless terminal
	Wait        float64   // seconds queued so far (SEAL's WT)
	Trans       float64   // seconds running so far (TT_trans)
	Checksum    string    // verified checksum "algo:hex" when done
	Throughput  float64   // average bytes/s of the final run
	Error       string    // why it failed (or last transient error); for a done task, a note (NoteInPlace) or ""
	// Term is the lease term of the task's partition (its source
	// endpoint) under which a scheduler claimed it (ClaimTasks); 0 if
	// unclaimed. UpdateTasksFenced writes only under the current term.
	Term int64
}

// Endpoint is an agent known to the service, or a storage server an
// admin registered (Storage).
type Endpoint struct {
	Name string
	// URL is where the agent serves, http(s)://host:port, or a storage
	// server's scheme://host:port (gsiftp, ftp, root).
	URL string
	// Via, for a storage endpoint, is the agent that moves its bytes
	// when the other end of a copy is a storage server it cannot copy
	// with itself (no agent of its own is at either end).
	Via string
	// MaxThroughput (bytes/s) and MaxCC are what the operator configured
	// on the agent (0: unknown / no limit).
	MaxThroughput float64
	MaxCC         int
	Registered    time.Time
	LastSeen      time.Time
	Up            bool
}

// Storage reports whether e is a storage server the service reaches
// itself, not an agent.
func (e Endpoint) Storage() bool {
	scheme, _, _ := strings.Cut(e.URL, "://")
	return scheme != "" && scheme != "http" && scheme != "https"
}

// Observation is one measured transfer, the throughput model's history
// (model.Obs plus when it was made).
type Observation struct {
	Src, Dst         string
	CC               int
	SrcLoad, DstLoad int
	Size             int64
	Throughput       float64
	At               time.Time
}

// Optimization is one answer of the estimation service for an endpoint
// pair: the concurrency that maximises throughput, what it predicts, and
// what finding out cost. Stored so that later requests with use_history
// (and jobs with Optimize) can answer without sampling again.
type Optimization struct {
	ID         int64
	Src, Dst   string // endpoint names
	Streams    int
	Throughput float64 // predicted bytes/s at Streams
	// Fitted is the fitted curve's bytes/s at Streams, Uncertainty its
	// relative half-width; Throughput is lower than Fitted when Clamped
	// to what the samples support, and Note says why (model.Bounded).
	Fitted      float64
	Uncertainty float64
	Clamped     bool
	Note        string
	// SampleBytes is the size of each sample transfer; Samples the
	// measured (streams, bytes/s) points, as JSON.
	SampleBytes int64
	Samples     string
	// Model says how Streams was chosen (the fit, or why a fallback
	// was used).
	Model string
	// Cost is the seconds spent sampling and CostBytes the bytes moved.
	Cost      float64
	CostBytes int64
	At        time.Time
}

// Allocation is a Policy Service grant of streams on an endpoint pair to
// one client (package policy owns the rules; the store keeps the leases
// so that a restarted server still honours them).
type Allocation struct {
	ID               string
	Src, Dst         string
	Client, VO       string
	Streams, Want    int
	Draining         int
	Reason           string
	Created, Expires time.Time
}

// AllocationGone names an allocation to delete. With Expires set the
// deletion is conditional: the row goes only if its stored expiry is no
// later. A server that saw the lease run out then leaves alone an
// allocation another server (sharing the database) renewed meanwhile;
// a release (Expires zero) deletes it whatever its expiry.
type AllocationGone struct {
	ID      string
	Expires time.Time
}

// AuditEntry records one state change.
type AuditEntry struct {
	At     time.Time
	JobID  int64
	TaskID int64 // 0 for job-level entries
	Actor  string
	From   string
	To     string
	Detail string
	// Term is the lease term the scheduler held when it made the change
	// (0 for changes made outside the scheduler, such as a user's
	// cancel): per partition, terms in the log never go down.
	Term int64
}

// JobFilter selects jobs.
type JobFilter struct {
	OwnerID int64  // 0: any owner
	VO      string // "": any VO (the owner's at submission)
	State   string // "": any state
	// Search, if set, keeps the jobs whose label contains it (ignoring
	// case).
	Search string
	Limit  int // 0: a default of 100
	// Before, if non-zero, returns jobs with ID < Before (paging, newest
	// first).
	Before int64
}

// Store is the service's durable state. Implementations are safe for
// concurrent use.
type Store interface {
	// Dialect is "sqlite" or "postgres".
	Dialect() string
	Close() error
	// Check reports whether the store still is the database it opened:
	// on SQLite, that the file at its path was neither removed nor
	// replaced since (see sqlStore.Check); on PostgreSQL, always nil (the
	// database server owns its files). Cheap: call it often.
	Check(ctx context.Context) error

	// Setting returns a server setting (ErrNotFound if unset).
	Setting(ctx context.Context, key string) (string, error)
	// InitSetting stores value under key unless the key is set already,
	// and returns what is stored (so that racing servers agree).
	InitSetting(ctx context.Context, key, value string) (string, error)
	// PutSetting stores value under key, replacing what was there.
	PutSetting(ctx context.Context, key, value string) error

	// EnsureUser returns the user with this name, creating it with vo
	// and admin if it does not exist.
	EnsureUser(ctx context.Context, name, vo string, admin bool) (User, error)
	// AddToken stores a token (by hash) for a user.
	AddToken(ctx context.Context, t Token) error
	// UserByToken returns the user of an unexpired token (ErrNotFound).
	UserByToken(ctx context.Context, hash string, now time.Time) (User, error)
	// TokenUser is UserByToken that also returns when the token expires
	// (zero: never).
	TokenUser(ctx context.Context, hash string, now time.Time) (User, time.Time, error)
	// UserByName returns the named user (ErrNotFound).
	UserByName(ctx context.Context, name string) (User, error)
	// Tokens lists a user's tokens (Hash included), oldest first.
	Tokens(ctx context.Context, userID int64) ([]Token, error)
	// DeleteToken removes the user's token whose hash begins with prefix
	// (ErrNotFound if none; ErrConflict if several do).
	DeleteToken(ctx context.Context, userID int64, prefix string) error
	// CountUsers is the number of users (zero on a fresh store).
	CountUsers(ctx context.Context) (int, error)

	// CreateJob inserts a job and its tasks in one transaction, setting
	// their IDs (task JobID and ID fields are filled). If the owner
	// already has a job with j.SubmissionID (non-empty), nothing is
	// inserted, *j is set to that job and created is false.
	CreateJob(ctx context.Context, j *Job, tasks []Task) (created bool, err error)
	// Job returns one job with its counters.
	Job(ctx context.Context, id int64) (Job, error)
	// Jobs lists jobs with their counters, newest first.
	Jobs(ctx context.Context, f JobFilter) ([]Job, error)
	// Tasks lists a job's tasks by index, from index >= from, at most
	// limit (0: all).
	Tasks(ctx context.Context, jobID int64, from, limit int) ([]Task, error)
	// TasksInState is Tasks of the tasks in one state only (a job's
	// failed files, without reading the others).
	TasksInState(ctx context.Context, jobID int64, state string, from, limit int) ([]Task, error)
	// ActiveTasks returns every task that is not terminal, by ID.
	ActiveTasks(ctx context.Context) ([]Task, error)
	// UpdateTasks writes the mutable fields of tasks (State, Size,
	// SrcEndpoint, DstEndpoint, CC, Done, Attempts, Preemptions, Started,
	// Finished, Wait, Trans, Checksum, Throughput, Error) and appends the
	// audit entries, all in one transaction.
	UpdateTasks(ctx context.Context, tasks []Task, audit []AuditEntry) error
	// FinishJob sets a job's terminal state and finish time, with an audit
	// entry.
	FinishJob(ctx context.Context, id int64, state string, at time.Time, actor string) error
	// CancelJob marks the job and all its non-terminal tasks canceled and
	// returns the IDs of the tasks it canceled. Canceling a terminal job
	// is a no-op (nil, nil).
	CancelJob(ctx context.Context, id int64, at time.Time, actor string) ([]int64, error)
	// DoneAfterCancel records as done a canceled task whose file was
	// found in place and verified after the cancel (its run was past its
	// last check, and the server stopped before writing done). It writes
	// only a task still canceled, and reports whether it did.
	DoneAfterCancel(ctx context.Context, id int64, checksum string, at time.Time, actor string) (bool, error)
	// Audit returns a job's audit entries, oldest first.
	Audit(ctx context.Context, jobID int64) ([]AuditEntry, error)
	// AuditPage returns at most limit of a job's audit entries, oldest
	// first, skipping the first from (limit <= 0: all from there on).
	AuditPage(ctx context.Context, jobID int64, from, limit int) ([]AuditEntry, error)

	// PutCredential keeps the credential of a storage endpoint (opaque
	// bytes; nil or empty removes it); Credential reads it (ErrNotFound
	// if there is none). Kept apart from Endpoints, which every caller
	// may list.
	PutCredential(ctx context.Context, endpoint string, cred []byte, at time.Time) error
	Credential(ctx context.Context, endpoint string) ([]byte, error)
	// DeleteEndpoint forgets an endpoint and its credential.
	DeleteEndpoint(ctx context.Context, name string) error
	// UpsertEndpoint registers an endpoint or updates its URL, limits,
	// LastSeen and Up (Registered is kept from the first registration).
	UpsertEndpoint(ctx context.Context, e Endpoint) error
	// SetEndpointUp records a heartbeat (up=true, LastSeen=at) or marks an
	// endpoint down (LastSeen unchanged).
	SetEndpointUp(ctx context.Context, name string, up bool, at time.Time) error
	// Endpoints lists endpoints by name.
	Endpoints(ctx context.Context) ([]Endpoint, error)

	// PutCheckpoint stores an engine journal under key, replacing it.
	PutCheckpoint(ctx context.Context, key string, data []byte) error
	// Checkpoint returns the journal stored under key (ErrNotFound).
	Checkpoint(ctx context.Context, key string) ([]byte, error)
	// DeleteCheckpoint removes it (no error if absent).
	DeleteCheckpoint(ctx context.Context, key string) error
	// EndedWithCheckpoint returns the tasks that are done, failed or
	// canceled and still have a checkpoint under "task/ID": their
	// partial files may still be at the destination.
	EndedWithCheckpoint(ctx context.Context) ([]Task, error)

	// AddObservation appends one observation.
	AddObservation(ctx context.Context, o Observation) error
	// AddObservations appends several in one transaction, in order.
	AddObservations(ctx context.Context, obs []Observation) error
	// DeleteCheckpoints removes several checkpoints (absent ones are no
	// error) in one statement.
	DeleteCheckpoints(ctx context.Context, keys []string) error
	// Observations returns the newest limit observations, oldest first.
	Observations(ctx context.Context, limit int) ([]Observation, error)

	// AddOptimization stores an estimate (setting its ID).
	AddOptimization(ctx context.Context, o *Optimization) error
	// LatestOptimization returns the newest estimate for the pair
	// (ErrNotFound if there is none).
	LatestOptimization(ctx context.Context, src, dst string) (Optimization, error)

	// SaveAllocations writes put (inserted or replaced by ID) and
	// deletes the allocations in del, in one transaction.
	SaveAllocations(ctx context.Context, put []Allocation, del []AllocationGone) error
	// Allocations returns every stored allocation, by ID.
	Allocations(ctx context.Context) ([]Allocation, error)

	// AddSamples writes a server's history samples and prunes every
	// server's older than pruneBefore (history.go); Samples sums them
	// into buckets for the dashboard's charts. FailedTasks lists failed
	// files, newest first.
	AddSamples(ctx context.Context, samples []Sample, pruneBefore time.Time) error
	Samples(ctx context.Context, q SampleQuery) ([]SampleSum, error)
	FailedTasks(ctx context.Context, f FailureFilter) ([]Failure, error)

	// Several servers (cluster.go): scheduling leases per partition
	// (source endpoint), task claiming and fenced writes, the live
	// servers, their published endpoint loads, and wake-up hints.
	AcquireLease(ctx context.Context, partition, owner string, ttl time.Duration) (Lease, bool, error)
	RenewLeases(ctx context.Context, owner string, terms map[string]int64, ttl time.Duration) (map[string]int64, error)
	ReleaseLease(ctx context.Context, partition, owner string, term int64) error
	Leases(ctx context.Context) ([]Lease, error)
	ServerBeat(ctx context.Context, id, url string, ttl time.Duration) ([]ServerInfo, error)
	ClaimTasks(ctx context.Context, owner string, limit int) ([]Task, error)
	UpdateTasksFenced(ctx context.Context, owner string, tasks []Task, audit []AuditEntry) (skipped []int64, err error)
	SaveProgress(ctx context.Context, owner string, ps []Progress) error
	CheckClaim(ctx context.Context, owner string, taskID, term int64) error
	// PutCheckpointFenced is PutCheckpoint under the claim CheckClaim
	// checks, in the same statement: a *StaleTermError, and nothing
	// written, if task taskID is no longer claimed under term or owner no
	// longer holds its partition's lease under that term. A server that
	// lost a partition while a run went on cannot overwrite the journal
	// of the new owner's run.
	PutCheckpointFenced(ctx context.Context, key string, data []byte, owner string, taskID, term int64) error
	// PutCheckpointsFenced is PutCheckpointFenced for many checkpoints
	// in one transaction (the files of a pull batch): errs[i] is puts[i]'s
	// own refusal (a *StaleTermError, nothing written for it), err the
	// transaction's (nothing written).
	PutCheckpointsFenced(ctx context.Context, owner string, puts []CheckpointPut) (errs []error, err error)
	CanceledJobs(ctx context.Context, since time.Time) ([]int64, error)
	FinishJobIfDone(ctx context.Context, id int64, at time.Time, actor string) (string, error)
	// ActiveListings returns the listings not done of active jobs.
	ActiveListings(ctx context.Context) ([]Listing, error)
	// AddListed records a page of listing l (as read, l.LastPath the
	// cursor the page resumed after) as next (its new cursor, counts,
	// Done and Error) and adds tasks, the page's files, to the job, with
	// the next indices: all or nothing. ErrConflict if the listing's
	// cursor moved meanwhile (another server listed the same page, or a
	// page recorded before a restart): nothing is written, and the caller
	// lists again from the stored cursor. A job that ended meanwhile
	// (canceled) gets no tasks; its listing is recorded done.
	AddListed(ctx context.Context, l Listing, next Listing, tasks []Task) error
	// FailOutOfRange fails the tasks still to end whose size is not in
	// [-1, MaxSize] or whose done is not in [0, MaxSize], with an error
	// and an audit entry saying so, and returns them (as they were).
	// No submission makes such a row; a server runs it at start so that
	// one written otherwise is named and ended rather than scheduled.
	FailOutOfRange(ctx context.Context, at time.Time, actor string) ([]Task, error)
	PutEndpointLoads(ctx context.Context, server string, loads []EndpointLoad) error
	EndpointLoads(ctx context.Context, except string, maxAge time.Duration) ([]EndpointLoad, error)
	Notify(ctx context.Context, channel string) error
	Listen(ctx context.Context, channel string) <-chan struct{}
}
