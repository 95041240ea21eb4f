package server

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// timedStore is the server's store with every call timed: the one place
// where sluice_store_operation_seconds and sluice_store_errors_total are
// measured (New wraps Config.Store in it), rather than timers around the
// calls throughout the server. Each method is its store.Store namesake.
// The interface is not embedded: a method added to it then stops the
// build here, where embedding would let it pass untimed without a word.
type timedStore struct {
	s   store.Store
	met *metrics
}

// done records one call of operation op that began at start and ended
// with *err (a pointer: it is deferred before the call returns).
func (ts timedStore) done(op string, start time.Time, err *error) {
	ts.met.storeSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if storeFailed(*err) {
		ts.met.storeErrors.WithLabelValues(op).Inc()
	}
}

// untimed are the store's methods timedStore passes through untimed.
var untimed = map[string]bool{"Dialect": true, "Close": true, "Listen": true}

// storeFailed reports whether err is the store failing, not one of the
// answers callers expect and act on: not found, a conflict, a lease
// another server holds now, or the caller giving up (its context
// canceled, a shutdown).
func storeFailed(err error) bool {
	return err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) &&
		!errors.Is(err, store.ErrStaleTerm) && !errors.Is(err, context.Canceled)
}

// Dialect, Close and Listen pass through untimed: the first two do not
// reach the database's work, and Listen only opens a channel whose waits
// are no call's latency.
func (ts timedStore) Dialect() string { return ts.s.Dialect() }

func (ts timedStore) Close() error { return ts.s.Close() }

func (ts timedStore) Check(ctx context.Context) (err error) {
	defer ts.done("Check", time.Now(), &err)
	return ts.s.Check(ctx)
}

func (ts timedStore) Setting(ctx context.Context, key string) (_ string, err error) {
	defer ts.done("Setting", time.Now(), &err)
	return ts.s.Setting(ctx, key)
}

func (ts timedStore) InitSetting(ctx context.Context, key string, value string) (_ string, err error) {
	defer ts.done("InitSetting", time.Now(), &err)
	return ts.s.InitSetting(ctx, key, value)
}

func (ts timedStore) PutSetting(ctx context.Context, key string, value string) (err error) {
	defer ts.done("PutSetting", time.Now(), &err)
	return ts.s.PutSetting(ctx, key, value)
}

func (ts timedStore) EnsureUser(ctx context.Context, name string, vo string, admin bool) (_ store.User, err error) {
	defer ts.done("EnsureUser", time.Now(), &err)
	return ts.s.EnsureUser(ctx, name, vo, admin)
}

func (ts timedStore) AddToken(ctx context.Context, t store.Token) (err error) {
	defer ts.done("AddToken", time.Now(), &err)
	return ts.s.AddToken(ctx, t)
}

func (ts timedStore) UserByToken(ctx context.Context, hash string, now time.Time) (_ store.User, err error) {
	defer ts.done("UserByToken", time.Now(), &err)
	return ts.s.UserByToken(ctx, hash, now)
}

func (ts timedStore) TokenUser(ctx context.Context, hash string, now time.Time) (_ store.User, _ time.Time, err error) {
	defer ts.done("TokenUser", time.Now(), &err)
	return ts.s.TokenUser(ctx, hash, now)
}

func (ts timedStore) UserByName(ctx context.Context, name string) (_ store.User, err error) {
	defer ts.done("UserByName", time.Now(), &err)
	return ts.s.UserByName(ctx, name)
}

func (ts timedStore) Tokens(ctx context.Context, userID int64) (_ []store.Token, err error) {
	defer ts.done("Tokens", time.Now(), &err)
	return ts.s.Tokens(ctx, userID)
}

func (ts timedStore) DeleteToken(ctx context.Context, userID int64, prefix string) (err error) {
	defer ts.done("DeleteToken", time.Now(), &err)
	return ts.s.DeleteToken(ctx, userID, prefix)
}

func (ts timedStore) CountUsers(ctx context.Context) (_ int, err error) {
	defer ts.done("CountUsers", time.Now(), &err)
	return ts.s.CountUsers(ctx)
}

func (ts timedStore) CreateJob(ctx context.Context, j *store.Job, tasks []store.Task) (_ bool, err error) {
	defer ts.done("CreateJob", time.Now(), &err)
	return ts.s.CreateJob(ctx, j, tasks)
}

func (ts timedStore) Job(ctx context.Context, id int64) (_ store.Job, err error) {
	defer ts.done("Job", time.Now(), &err)
	return ts.s.Job(ctx, id)
}

func (ts timedStore) Jobs(ctx context.Context, f store.JobFilter) (_ []store.Job, err error) {
	defer ts.done("Jobs", time.Now(), &err)
	return ts.s.Jobs(ctx, f)
}

func (ts timedStore) Tasks(ctx context.Context, jobID int64, from int, limit int) (_ []store.Task, err error) {
	defer ts.done("Tasks", time.Now(), &err)
	return ts.s.Tasks(ctx, jobID, from, limit)
}

func (ts timedStore) TasksInState(ctx context.Context, jobID int64, state string, from int, limit int) (_ []store.Task, err error) {
	defer ts.done("TasksInState", time.Now(), &err)
	return ts.s.TasksInState(ctx, jobID, state, from, limit)
}

func (ts timedStore) ActiveTasks(ctx context.Context) (_ []store.Task, err error) {
	defer ts.done("ActiveTasks", time.Now(), &err)
	return ts.s.ActiveTasks(ctx)
}

func (ts timedStore) UpdateTasks(ctx context.Context, tasks []store.Task, audit []store.AuditEntry) (err error) {
	defer ts.done("UpdateTasks", time.Now(), &err)
	return ts.s.UpdateTasks(ctx, tasks, audit)
}

func (ts timedStore) FinishJob(ctx context.Context, id int64, state string, at time.Time, actor string) (err error) {
	defer ts.done("FinishJob", time.Now(), &err)
	return ts.s.FinishJob(ctx, id, state, at, actor)
}

func (ts timedStore) CancelJob(ctx context.Context, id int64, at time.Time, actor string) (_ []int64, err error) {
	defer ts.done("CancelJob", time.Now(), &err)
	return ts.s.CancelJob(ctx, id, at, actor)
}

func (ts timedStore) DoneAfterCancel(ctx context.Context, id int64, checksum string, at time.Time, actor string) (_ bool, err error) {
	defer ts.done("DoneAfterCancel", time.Now(), &err)
	return ts.s.DoneAfterCancel(ctx, id, checksum, at, actor)
}

func (ts timedStore) Audit(ctx context.Context, jobID int64) (_ []store.AuditEntry, err error) {
	defer ts.done("Audit", time.Now(), &err)
	return ts.s.Audit(ctx, jobID)
}

func (ts timedStore) AuditPage(ctx context.Context, jobID int64, from int, limit int) (_ []store.AuditEntry, err error) {
	defer ts.done("AuditPage", time.Now(), &err)
	return ts.s.AuditPage(ctx, jobID, from, limit)
}

func (ts timedStore) PutCredential(ctx context.Context, endpoint string, cred []byte, at time.Time) (err error) {
	defer ts.done("PutCredential", time.Now(), &err)
	return ts.s.PutCredential(ctx, endpoint, cred, at)
}

func (ts timedStore) Credential(ctx context.Context, endpoint string) (_ []byte, err error) {
	defer ts.done("Credential", time.Now(), &err)
	return ts.s.Credential(ctx, endpoint)
}

func (ts timedStore) DeleteEndpoint(ctx context.Context, name string) (err error) {
	defer ts.done("DeleteEndpoint", time.Now(), &err)
	return ts.s.DeleteEndpoint(ctx, name)
}

func (ts timedStore) UpsertEndpoint(ctx context.Context, e store.Endpoint) (err error) {
	defer ts.done("UpsertEndpoint", time.Now(), &err)
	return ts.s.UpsertEndpoint(ctx, e)
}

func (ts timedStore) SetEndpointUp(ctx context.Context, name string, up bool, at time.Time) (err error) {
	defer ts.done("SetEndpointUp", time.Now(), &err)
	return ts.s.SetEndpointUp(ctx, name, up, at)
}

func (ts timedStore) Endpoints(ctx context.Context) (_ []store.Endpoint, err error) {
	defer ts.done("Endpoints", time.Now(), &err)
	return ts.s.Endpoints(ctx)
}

func (ts timedStore) PutCheckpoint(ctx context.Context, key string, data []byte) (err error) {
	defer ts.done("PutCheckpoint", time.Now(), &err)
	return ts.s.PutCheckpoint(ctx, key, data)
}

func (ts timedStore) Checkpoint(ctx context.Context, key string) (_ []byte, err error) {
	defer ts.done("Checkpoint", time.Now(), &err)
	return ts.s.Checkpoint(ctx, key)
}

func (ts timedStore) DeleteCheckpoint(ctx context.Context, key string) (err error) {
	defer ts.done("DeleteCheckpoint", time.Now(), &err)
	return ts.s.DeleteCheckpoint(ctx, key)
}

func (ts timedStore) EndedWithCheckpoint(ctx context.Context) (_ []store.Task, err error) {
	defer ts.done("EndedWithCheckpoint", time.Now(), &err)
	return ts.s.EndedWithCheckpoint(ctx)
}

func (ts timedStore) AddObservation(ctx context.Context, o store.Observation) (err error) {
	defer ts.done("AddObservation", time.Now(), &err)
	return ts.s.AddObservation(ctx, o)
}

func (ts timedStore) AddObservations(ctx context.Context, obs []store.Observation) (err error) {
	defer ts.done("AddObservations", time.Now(), &err)
	return ts.s.AddObservations(ctx, obs)
}

func (ts timedStore) DeleteCheckpoints(ctx context.Context, keys []string) (err error) {
	defer ts.done("DeleteCheckpoints", time.Now(), &err)
	return ts.s.DeleteCheckpoints(ctx, keys)
}

func (ts timedStore) Observations(ctx context.Context, limit int) (_ []store.Observation, err error) {
	defer ts.done("Observations", time.Now(), &err)
	return ts.s.Observations(ctx, limit)
}

func (ts timedStore) AddOptimization(ctx context.Context, o *store.Optimization) (err error) {
	defer ts.done("AddOptimization", time.Now(), &err)
	return ts.s.AddOptimization(ctx, o)
}

func (ts timedStore) LatestOptimization(ctx context.Context, src string, dst string) (_ store.Optimization, err error) {
	defer ts.done("LatestOptimization", time.Now(), &err)
	return ts.s.LatestOptimization(ctx, src, dst)
}

func (ts timedStore) SaveAllocations(ctx context.Context, put []store.Allocation, del []store.AllocationGone) (err error) {
	defer ts.done("SaveAllocations", time.Now(), &err)
	return ts.s.SaveAllocations(ctx, put, del)
}

func (ts timedStore) Allocations(ctx context.Context) (_ []store.Allocation, err error) {
	defer ts.done("Allocations", time.Now(), &err)
	return ts.s.Allocations(ctx)
}

func (ts timedStore) AddSamples(ctx context.Context, samples []store.Sample, pruneBefore time.Time) (err error) {
	defer ts.done("AddSamples", time.Now(), &err)
	return ts.s.AddSamples(ctx, samples, pruneBefore)
}

func (ts timedStore) Samples(ctx context.Context, q store.SampleQuery) (_ []store.SampleSum, err error) {
	defer ts.done("Samples", time.Now(), &err)
	return ts.s.Samples(ctx, q)
}

func (ts timedStore) FailedTasks(ctx context.Context, f store.FailureFilter) (_ []store.Failure, err error) {
	defer ts.done("FailedTasks", time.Now(), &err)
	return ts.s.FailedTasks(ctx, f)
}

func (ts timedStore) AcquireLease(ctx context.Context, partition string, owner string, ttl time.Duration) (_ store.Lease, _ bool, err error) {
	defer ts.done("AcquireLease", time.Now(), &err)
	return ts.s.AcquireLease(ctx, partition, owner, ttl)
}

func (ts timedStore) RenewLeases(ctx context.Context, owner string, terms map[string]int64, ttl time.Duration) (_ map[string]int64, err error) {
	defer ts.done("RenewLeases", time.Now(), &err)
	return ts.s.RenewLeases(ctx, owner, terms, ttl)
}

func (ts timedStore) ReleaseLease(ctx context.Context, partition string, owner string, term int64) (err error) {
	defer ts.done("ReleaseLease", time.Now(), &err)
	return ts.s.ReleaseLease(ctx, partition, owner, term)
}

func (ts timedStore) Leases(ctx context.Context) (_ []store.Lease, err error) {
	defer ts.done("Leases", time.Now(), &err)
	return ts.s.Leases(ctx)
}

func (ts timedStore) ServerBeat(ctx context.Context, id string, url string, ttl time.Duration) (_ []store.ServerInfo, err error) {
	defer ts.done("ServerBeat", time.Now(), &err)
	return ts.s.ServerBeat(ctx, id, url, ttl)
}

func (ts timedStore) ClaimTasks(ctx context.Context, owner string, limit int) (_ []store.Task, err error) {
	defer ts.done("ClaimTasks", time.Now(), &err)
	return ts.s.ClaimTasks(ctx, owner, limit)
}

func (ts timedStore) UpdateTasksFenced(ctx context.Context, owner string, tasks []store.Task, audit []store.AuditEntry) (_ []int64, err error) {
	defer ts.done("UpdateTasksFenced", time.Now(), &err)
	return ts.s.UpdateTasksFenced(ctx, owner, tasks, audit)
}

func (ts timedStore) SaveProgress(ctx context.Context, owner string, ps []store.Progress) (err error) {
	defer ts.done("SaveProgress", time.Now(), &err)
	return ts.s.SaveProgress(ctx, owner, ps)
}

func (ts timedStore) CheckClaim(ctx context.Context, owner string, taskID int64, term int64) (err error) {
	defer ts.done("CheckClaim", time.Now(), &err)
	return ts.s.CheckClaim(ctx, owner, taskID, term)
}

func (ts timedStore) PutCheckpointFenced(ctx context.Context, key string, data []byte, owner string, taskID int64, term int64) (err error) {
	defer ts.done("PutCheckpointFenced", time.Now(), &err)
	return ts.s.PutCheckpointFenced(ctx, key, data, owner, taskID, term)
}

func (ts timedStore) PutCheckpointsFenced(ctx context.Context, owner string, puts []store.CheckpointPut) (_ []error, err error) {
	defer ts.done("PutCheckpointsFenced", time.Now(), &err)
	return ts.s.PutCheckpointsFenced(ctx, owner, puts)
}

func (ts timedStore) CanceledJobs(ctx context.Context, since time.Time) (_ []int64, err error) {
	defer ts.done("CanceledJobs", time.Now(), &err)
	return ts.s.CanceledJobs(ctx, since)
}

func (ts timedStore) FinishJobIfDone(ctx context.Context, id int64, at time.Time, actor string) (_ string, err error) {
	defer ts.done("FinishJobIfDone", time.Now(), &err)
	return ts.s.FinishJobIfDone(ctx, id, at, actor)
}

func (ts timedStore) ActiveListings(ctx context.Context) (_ []store.Listing, err error) {
	defer ts.done("ActiveListings", time.Now(), &err)
	return ts.s.ActiveListings(ctx)
}

func (ts timedStore) AddListed(ctx context.Context, l store.Listing, next store.Listing, tasks []store.Task) (err error) {
	defer ts.done("AddListed", time.Now(), &err)
	return ts.s.AddListed(ctx, l, next, tasks)
}

func (ts timedStore) FailOutOfRange(ctx context.Context, at time.Time, actor string) (_ []store.Task, err error) {
	defer ts.done("FailOutOfRange", time.Now(), &err)
	return ts.s.FailOutOfRange(ctx, at, actor)
}

func (ts timedStore) PutEndpointLoads(ctx context.Context, server string, loads []store.EndpointLoad) (err error) {
	defer ts.done("PutEndpointLoads", time.Now(), &err)
	return ts.s.PutEndpointLoads(ctx, server, loads)
}

func (ts timedStore) EndpointLoads(ctx context.Context, except string, maxAge time.Duration) (_ []store.EndpointLoad, err error) {
	defer ts.done("EndpointLoads", time.Now(), &err)
	return ts.s.EndpointLoads(ctx, except, maxAge)
}

func (ts timedStore) Notify(ctx context.Context, channel string) (err error) {
	defer ts.done("Notify", time.Now(), &err)
	return ts.s.Notify(ctx, channel)
}

func (ts timedStore) Listen(ctx context.Context, channel string) <-chan struct{} {
	return ts.s.Listen(ctx, channel)
}
