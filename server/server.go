// Package server owns the live service behind `sluice serve`: it accepts
// jobs (lists of files), keeps them in the store, registers the agents
// (endpoints) and watches their heartbeats, and runs the scheduling loop
// that turns the same pure scheduler as the simulator (package sched) into
// transfers between agents (package engine, third-party: the destination
// agent pulls byte ranges from the source agent, so no data passes through
// the server).
//
// One goroutine, the loop, owns every active task's in-memory state; API
// calls, transfer goroutines and timers hand it closures (Server.do). Every
// state change is written to the store before it is reported, and the
// store is what a restarted server rebuilds from: running tasks become
// queued again and resume from the checkpoints the engine keeps in the
// store (engine.Journals).
//
// The HTTP API lives in package api; this package exposes plain methods.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/estimate"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/policyserver"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Defaults for Config's zero fields.
const (
	// DefaultStoreCheck: a stat of the database file each time, so
	// cheap; the sooner a removed database is noticed, the less is
	// written to a file that only this process can still reach.
	DefaultStoreCheck       = time.Second
	DefaultCycle            = 500 * time.Millisecond // SC'15 §4.4
	DefaultHeartbeatTimeout = 10 * time.Second
	DefaultHeartbeatEvery   = 2 * time.Second
	DefaultDownGiveUp       = 24 * time.Hour
	DefaultRetry            = 3
	DefaultDataTokenTTL     = 24 * time.Hour
	DefaultEndpointMax      = 1.25e9 // 10 Gb/s: the prior until an endpoint's maximum is known
	// DefaultEndpointMaxCC bounds the concurrent transfers at an
	// endpoint whose agent declares no --max-cc: SEAL starts small files
	// without a saturation test, and a job of a million small files must
	// not open a million connections.
	DefaultEndpointMaxCC = 32
	// DefaultStartupCost is what the scheduler is told a transfer's
	// start costs when the operator does not say (SC'15's figure for
	// GridFTP on a WAN: connections and authentication).
	DefaultStartupCost = 500 * time.Millisecond
	// DefaultJournalWrites is Config.JournalWrites's default.
	DefaultJournalWrites = 500
)

// Errors the API maps to statuses: package wire's, so that the packages
// behind the server (access, estimation) return the same ones.
var (
	ErrUnauthorized = wire.ErrUnauthorized
	ErrForbidden    = wire.ErrForbidden
	ErrNotFound     = wire.ErrNotFound
	ErrInvalid      = wire.ErrInvalid
	ErrUnavailable  = wire.ErrUnavailable
	ErrConflict     = wire.ErrConflict
)

// DefaultScheduler is the live service's scheduler unless configured
// otherwise. The simulator and the testbed keep the paper's seal as their
// default, so that the paper's experiments reproduce as published.
const DefaultScheduler = "seal+"

// Config configures a Server.
type Config struct {
	Store store.Store
	// Scheduler is the algorithm's name (sched.New): seal+, seal, steal,
	// ...; default seal+, which beats the paper's SEAL and the static
	// baselines in the simulator's grid and on real bytes
	// (docs/results/seal-plus.md).
	Scheduler string
	// Cycle is the scheduling period (default 0.5 s).
	Cycle time.Duration
	// HeartbeatTimeout: an agent silent this long is marked down and its
	// running tasks are re-queued (default 10 s).
	HeartbeatTimeout time.Duration
	// DownGiveUp: the files waiting for an endpoint that has sent no
	// heartbeat for this long fail, each saying which endpoint is down
	// and since when, so that their jobs end instead of waiting for an
	// agent that may never come back (default DefaultDownGiveUp;
	// negative: wait for good). The last heartbeat is the store's, so
	// a restart of the server does not reset the count.
	DownGiveUp time.Duration
	// HeartbeatEvery is what agents are told to use (default 2 s).
	HeartbeatEvery time.Duration
	// DataDir receives admin.token and join.token on first start.
	DataDir string
	// TotalMaxCC bounds the concurrency over all endpoints (0: none).
	TotalMaxCC int
	// Logger (nil: discard).
	Logger *slog.Logger
	// Client is used to reach agents (nil: a client with
	// sluice.NewTransport).
	Client *http.Client
	// ListPage is how many entries a listing of a directory a job
	// copies whole asks its agent for at a time (0: DefaultListPage).
	ListPage int
	// Backends opens endpoints by URL scheme (nil: every backend
	// Sluice has, backend/all).
	Backends *backend.Registry
	// ChunkMin and SubWrite are passed to the engine (0: its defaults).
	ChunkMin, SubWrite int64
	// BatchMax: files of at most this many bytes, started in the same
	// cycle, move in pull batches (pipelining, batch.go). 0: ChunkMin;
	// negative: never.
	BatchMax int64
	// BatchBDP is one connection's bandwidth-delay product on the
	// endpoints' paths, which sets how many small files share a batch:
	// 1 + BatchBDP / their mean size (default DefaultBatchBDP).
	BatchBDP int64
	// Registry receives the service's metrics (nil: a new one).
	Registry *prometheus.Registry
	// Clock tells the service the time (nil: the system's). The loop,
	// the Policy Service, leases, tokens and heartbeats read it; a test
	// or a deterministic simulation gives a clock.Fake and drives the
	// loop's steps itself (see Run).
	Clock clock.Clock
	// Estimator, if set, is the throughput model to start from (for
	// example one trained on a calibration campaign, as SC'15 §4.2
	// assumes); the store's observations are added to it. Nil: an empty
	// history with a capacity-based prior.
	Estimator *model.History
	// StartupCost is the cost of starting a transfer (opening and
	// authenticating its connections) on these endpoints' paths, as told
	// to the scheduler, which weighs it against the gain of a start or a
	// preemption (default DefaultStartupCost).
	StartupCost time.Duration
	// Policy is the Policy Service's policy: "greedy" (default),
	// "weighted-shares" or "starlark:PATH" (a module checked at start).
	// Admins change parameters and weights through the API; a Starlark
	// policy only here.
	Policy string
	// DataTokenTTL is how long each data token of a run lasts
	// (DefaultDataTokenTTL if 0). A run that outlives one is given a
	// fresh one as it goes.
	DataTokenTTL time.Duration
	// HistoryTTL is how long a stored optimisation answers estimate
	// requests with use_history, and jobs with optimization (default 1 h).
	HistoryTTL time.Duration

	// Several servers on one PostgreSQL database (cluster.go).
	// ServerID names this server in leases and the audit log; it must be
	// unique among the servers and stable across restarts (a restart
	// under the same ID takes its partitions back at once). Default
	// "local".
	ServerID string
	// URL is where this server's API is reached, for the servers table.
	URL string
	// LeaseTTL is how long a partition's lease lasts without renewal
	// (renewed every third of it): the longest a dead server's partitions
	// wait for another (default 10 s).
	LeaseTTL time.Duration
	// JournalWrites bounds the engine's checkpoint writes to the store,
	// per second over all this server's runs (default 500): with many
	// transfers running, each checkpoints less often than every second
	// (a crash then re-sends a little more), so that the journals do not
	// become the database's main load.
	JournalWrites float64
	// PollEvery is how often the store is polled for new work,
	// cancellations and loads when no NOTIFY hint comes (default 1 s).
	PollEvery time.Duration
	// SampleEvery is how often the loop records what it schedules in
	// the dashboard's history, and SampleKeep how long the samples are
	// kept (defaults DefaultSampleEvery, DefaultSampleKeep; history.go).
	SampleEvery, SampleKeep time.Duration
	// StoreCheck is how often the loop checks that the store still is
	// the database it opened (store.Store.Check: a SQLite file removed
	// or replaced under the server), and stops with an error if not
	// (default DefaultStoreCheck).
	StoreCheck time.Duration
}

// Server is the live service.
type Server struct {
	cfg    Config
	st     store.Store
	log    *slog.Logger
	client *http.Client
	sch    sched.Scheduler
	key    []byte // data-token key, shared with agents at registration
	join   string // SHA-256 of the join token
	epoch  time.Time
	inbox  chan func(*world)
	// sweepSoon asks the loop for a sweep of owed partial-file removals
	// at its next tick (an agent registered again).
	sweepSoon atomic.Bool
	events    *broker
	met       *metrics

	mu      sync.Mutex
	agents  map[string]*agentState    // by endpoint name; heartbeats (under mu)
	jobLive map[int64]jobLive         // live figures of active jobs (under mu)
	epLive  map[string]EndpointStatus // live load of endpoints (under mu)
	nowStat Status                    // the loop's figures (under mu)

	estimating estimate.PairLocks // one sampling per endpoint pair at a time
	// agentCallTimeout and endpointPoll: see the constants of their
	// names (estimate.go).
	agentCallTimeout, endpointPoll time.Duration

	wake    chan struct{}           // hints for the coordinator (cluster.go)
	ownLoad map[string]cluster.Load // this server's load per endpoint, to publish (under mu)
	// givenUp: partitions (-> term) the loop dropped after a refused
	// write, for the coordinator to release (under mu).
	givenUp map[string]int64

	pol *policyserver.Host // the Policy Service (policy.go)

	// Files written on first start, for the CLI to print.
	AdminTokenFile, JoinTokenFile string
	// spawn runs the loop's asynchronous work (runs, pauses, stats,
	// removals, sweeps): each in a goroutine in the service; a
	// deterministic simulation runs them in an order it chooses.
	spawn func(func())
	// runs carries out the loop's transfers and stats (runner).
	runs runner
	// inline, if set, is the simulation's inbox (see loopInbox).
	inline loopInbox
}

// New opens the service on cfg.Store: it loads (or, on an empty store,
// creates) the data-token key, the admin user and token, and the join
// token.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: no store")
	}
	if cfg.Scheduler == "" {
		cfg.Scheduler = DefaultScheduler
	}
	sch, err := sched.New(cfg.Scheduler, sched.Options{})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Cycle <= 0 {
		cfg.Cycle = DefaultCycle
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.DownGiveUp == 0 {
		cfg.DownGiveUp = DefaultDownGiveUp
	}
	if cfg.HeartbeatEvery <= 0 {
		cfg.HeartbeatEvery = DefaultHeartbeatEvery
	}
	if cfg.StartupCost <= 0 {
		cfg.StartupCost = DefaultStartupCost
	}
	if cfg.HistoryTTL <= 0 {
		cfg.HistoryTTL = estimate.DefaultHistoryTTL
	}
	if cfg.ServerID == "" {
		cfg.ServerID = "local"
	}
	if err := checkServerID(cfg.ServerID); err != nil {
		return nil, err
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.StoreCheck <= 0 {
		cfg.StoreCheck = DefaultStoreCheck
	}
	if cfg.JournalWrites <= 0 {
		cfg.JournalWrites = DefaultJournalWrites
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: sluice.NewTransport()}
	}
	if cfg.Backends == nil {
		cfg.Backends = all.Registry()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	met := newMetrics(cfg.Registry)
	s := &Server{
		// Every store call the server makes is timed here (timedStore).
		cfg: cfg, st: timedStore{s: cfg.Store, met: met}, met: met, log: cfg.Logger, client: cfg.Client, sch: sch,
		epoch:  cfg.Clock.Now(),
		inbox:  make(chan func(*world), 1024),
		events: newBroker(cfg.Clock),
		agents: map[string]*agentState{},
		wake:   make(chan struct{}, 1),

		agentCallTimeout: agentCallTimeout,
		endpointPoll:     endpointPoll,
	}
	s.spawn = func(f func()) { go f() }
	s.runs = engineRunner{s}
	if err := s.bootstrap(ctx); err != nil {
		return nil, err
	}
	if err := s.loadPolicy(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SetURL sets where this server's API is reached (Config.URL), once the
// listener is open; call it before Run.
func (s *Server) SetURL(u string) { s.cfg.URL = u }

// Scheduler is the name of the scheduling algorithm in use.
func (s *Server) Scheduler() string { return s.sch.Name() }

// Registry is where the service's metrics are registered.
func (s *Server) Registry() *prometheus.Registry { return s.cfg.Registry }

// bootstrap makes sure the store has a data key, a join token and an
// admin. Secrets are created once, by whichever server gets there first
// (InitSetting), and the plain tokens are written to files in DataDir only
// by the server that created them.
func (s *Server) bootstrap(ctx context.Context) error {
	if err := s.checkNotRestart(ctx); err != nil {
		return err
	}
	key, err := s.st.InitSetting(ctx, "data_key", base64.StdEncoding.EncodeToString(randomBytes(32)))
	if err != nil {
		return fmt.Errorf("server: data key: %w", err)
	}
	if s.key, err = base64.StdEncoding.DecodeString(key); err != nil || len(s.key) < 32 {
		return fmt.Errorf("server: the stored data key is damaged")
	}
	joinTok := newToken("sj_")
	joinHash, err := s.st.InitSetting(ctx, "join_token_sha256", hashToken(joinTok))
	if err != nil {
		return fmt.Errorf("server: join token: %w", err)
	}
	s.join = joinHash
	n, err := s.st.CountUsers(ctx)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if n > 0 {
		return nil
	}
	admin, err := s.st.EnsureUser(ctx, "admin", "admin", true)
	if err != nil {
		return fmt.Errorf("server: admin user: %w", err)
	}
	adminTok := newToken("sk_")
	if err := s.st.AddToken(ctx, store.Token{Hash: hashToken(adminTok), UserID: admin.ID, Label: "bootstrap", Created: s.now()}); err != nil {
		return fmt.Errorf("server: admin token: %w", err)
	}
	if s.cfg.DataDir == "" {
		return errors.New("server: a data directory is needed to write the first admin token")
	}
	if err := os.MkdirAll(s.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("server: data directory: %w", err)
	}
	s.AdminTokenFile = filepath.Join(s.cfg.DataDir, "admin.token")
	if err := writeSecret(s.AdminTokenFile, adminTok); err != nil {
		return err
	}
	if joinHash == hashToken(joinTok) {
		s.JoinTokenFile = filepath.Join(s.cfg.DataDir, "join.token")
		if err := writeSecret(s.JoinTokenFile, joinTok); err != nil {
			return err
		}
	}
	return nil
}

// firstStartFiles are the files a first start writes to the data
// directory (bootstrap).
var firstStartFiles = []string{"admin.token", "join.token"}

// checkNotRestart refuses a first start in a data directory that holds
// an earlier server's tokens: its database is gone (removed, lost, or
// --db names another one), and starting afresh would replace its admin
// token and join token and forget every user, job and access rule, locking
// out every agent that joined. The operator decides: restore the
// database, or move the files away to start afresh for real.
//
// The files are looked at before the store: a server of a cluster writes
// them only after its first start's settings are stored, so one that
// sees them also sees those settings, and servers starting together on
// one new database (sharing a data directory) do not refuse each other.
func (s *Server) checkNotRestart(ctx context.Context) error {
	if s.cfg.DataDir == "" {
		return nil
	}
	var found []string
	for _, f := range firstStartFiles {
		p := filepath.Join(s.cfg.DataDir, f)
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("server: data directory: %w", err)
		}
	}
	if len(found) == 0 {
		return nil
	}
	if _, err := s.st.Setting(ctx, "data_key"); err == nil {
		return nil // a restart: the store is this data directory's
	} else if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("server: data key: %w", err)
	}
	fix := "restore the database from a backup"
	// A server that noticed its SQLite file removed saved a copy
	// (store.ErrDatabaseGone): the most recent state there is.
	if saved, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "*.saved-*")); len(saved) > 0 {
		fix = fmt.Sprintf("restore the database from a backup or from a copy a server saved when its file went missing (%s)", strings.Join(saved, ", "))
	}
	return fmt.Errorf("server: the database is empty, but the data directory holds an earlier server's %s: "+
		"its database was removed or lost, or --db names another one; starting afresh would replace those tokens and lock out every agent and user. "+
		"To go on, %s; to really start afresh (every agent must join again with the new join token), move %s away",
		strings.Join(found, " and "), fix, strings.Join(found, " and "))
}

// writeSecret writes a token to name, readable by its owner only. It is
// written to a new temporary file (mode 0600) and renamed over name:
// os.WriteFile would keep the mode of a file already there (a leftover
// of an earlier installation, say 0644) and follow a symbolic link at
// name, leaving the secret readable by others.
func writeSecret(name, value string) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return fmt.Errorf("server: writing %s: %w", name, err)
	}
	defer os.Remove(f.Name()) // after the rename, nothing is there
	err = f.Chmod(0o600)      // CreateTemp's mode, made explicit
	if err == nil {
		_, err = f.WriteString(value + "\n")
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("server: writing %s: %w", name, err)
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return b
}

func newToken(prefix string) string {
	return prefix + base64.RawURLEncoding.EncodeToString(randomBytes(24))
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Caller is an authenticated API user.
type Caller struct {
	User store.User
	// Expires is when the token the caller presented expires (zero:
	// never): tokens it creates, and event streams it opens, end then
	// too.
	Expires time.Time
}

// Authenticate returns the user a bearer token belongs to.
func (s *Server) Authenticate(ctx context.Context, bearer string) (Caller, error) {
	bearer = strings.TrimSpace(bearer)
	if bearer == "" {
		return Caller{}, fmt.Errorf("%w: no bearer token (create one with `sluice api-token create`)", ErrUnauthorized)
	}
	u, exp, err := s.st.TokenUser(ctx, hashToken(bearer), s.now())
	if errors.Is(err, store.ErrNotFound) {
		return Caller{}, fmt.Errorf("%w: unknown or expired token", ErrUnauthorized)
	}
	if err != nil {
		return Caller{}, fmt.Errorf("server: %w", err)
	}
	return Caller{User: u, Expires: exp}, nil
}

// CreateToken creates an API token for the named user (creating the user
// in vo if needed). Only admins may create tokens for others; anyone may
// create one for themselves, expiring no later than the token they use
// (a short-lived token must not buy a permanent one).
func (s *Server) CreateToken(ctx context.Context, c Caller, user, vo string, admin bool, ttl time.Duration, label string) (string, store.User, time.Time, error) {
	if user == "" {
		user = c.User.Name
	}
	if !c.User.Admin && (user != c.User.Name || admin) {
		return "", store.User{}, time.Time{}, fmt.Errorf("%w: only an admin can create tokens for other users or admin tokens", ErrForbidden)
	}
	if !wire.ValidName(user) {
		return "", store.User{}, time.Time{}, fmt.Errorf("%w: user name %q (letters, digits, '.', '_', '-', '@')", ErrInvalid, user)
	}
	if vo == "" {
		vo = "default"
	}
	if !wire.ValidName(vo) {
		return "", store.User{}, time.Time{}, fmt.Errorf("%w: VO name %q (letters, digits, '.', '_', '-', '@')", ErrInvalid, vo)
	}
	u, err := s.st.EnsureUser(ctx, user, vo, admin)
	if err != nil {
		return "", store.User{}, time.Time{}, fmt.Errorf("server: %w", err)
	}
	tok := newToken("sk_")
	t := store.Token{Hash: hashToken(tok), UserID: u.ID, Label: label, Created: s.now()}
	if ttl > 0 {
		t.Expires = t.Created.Add(ttl)
	}
	if !c.User.Admin && !c.Expires.IsZero() && (t.Expires.IsZero() || t.Expires.After(c.Expires)) {
		t.Expires = c.Expires
	}
	if err := s.st.AddToken(ctx, t); err != nil {
		return "", store.User{}, time.Time{}, fmt.Errorf("server: %w", err)
	}
	return tok, u, t.Expires, nil
}

// TokenInfo is wire.TokenInfo: the API documents live in package wire.
type TokenInfo = wire.TokenInfo

// tokenIDLen is how much of a token's hash its ID shows.
const tokenIDLen = 12

// tokenOwner is the user whose tokens the caller asks about: themselves,
// or (admins only) the named user.
func (s *Server) tokenOwner(ctx context.Context, c Caller, user string) (store.User, error) {
	if user == "" || user == c.User.Name {
		return c.User, nil
	}
	if !c.User.Admin {
		return store.User{}, fmt.Errorf("%w: only an admin can see or revoke another user's tokens", ErrForbidden)
	}
	u, err := s.st.UserByName(ctx, user)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, fmt.Errorf("%w: no user %q", ErrNotFound, user)
	}
	if err != nil {
		return store.User{}, fmt.Errorf("server: %w", err)
	}
	return u, nil
}

// Tokens lists the caller's API tokens (an admin: any user's).
func (s *Server) Tokens(ctx context.Context, c Caller, user string) ([]TokenInfo, error) {
	u, err := s.tokenOwner(ctx, c, user)
	if err != nil {
		return nil, err
	}
	ts, err := s.st.Tokens(ctx, u.ID)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	now := s.now()
	out := make([]TokenInfo, len(ts))
	for i, t := range ts {
		out[i] = TokenInfo{ID: t.Hash[:min(tokenIDLen, len(t.Hash))], Label: t.Label, Created: t.Created, Expires: t.Expires,
			Expired: !t.Expires.IsZero() && !t.Expires.After(now)}
	}
	return out, nil
}

// RevokeToken deletes one of the caller's API tokens (an admin: any
// user's), named by its ID (TokenInfo.ID, or more of the hash). It stops
// working at once; an event stream opened with it ends at its next
// check.
func (s *Server) RevokeToken(ctx context.Context, c Caller, user, id string) error {
	u, err := s.tokenOwner(ctx, c, user)
	if err != nil {
		return err
	}
	id = strings.ToLower(strings.TrimSpace(id))
	if len(id) < 8 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: token id %q: want at least 8 hex digits, as `sluice api-token list` shows", ErrInvalid, id)
	}
	switch err := s.st.DeleteToken(ctx, u.ID, id); {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %s has no token %s", ErrNotFound, u.Name, id)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	case err != nil:
		return fmt.Errorf("server: %w", err)
	}
	s.log.Info("API token revoked", "user", u.Name, "token", id, "by", c.User.Name)
	return nil
}

// do hands f to the loop; it returns false if ctx ends first.
func (s *Server) do(ctx context.Context, f func(*world)) bool {
	if s.inline != nil {
		s.inline.do(f)
		return true
	}
	select {
	case s.inbox <- f:
		return true
	case <-ctx.Done():
		return false
	}
}

// post hands f to the loop from a transfer goroutine; it never blocks the
// caller for long, as the loop drains the inbox every cycle.
func (s *Server) post(f func(*world)) {
	if s.inline != nil {
		s.inline.post(f)
		return
	}
	s.inbox <- f
}

// since is a time in the scheduler's clock: seconds since the server
// started.
func (s *Server) since(t time.Time) float64 { return t.Sub(s.epoch).Seconds() }

// now is the service's time (Config.Clock; New sets the system's where
// none is given, and so does this for a Server a test made by hand).
func (s *Server) now() time.Time {
	if s.cfg.Clock == nil {
		return time.Now()
	}
	return s.cfg.Clock.Now()
}

// now is the service's time, as the loop reads it.
func (w *world) now() time.Time { return w.s.now() }
