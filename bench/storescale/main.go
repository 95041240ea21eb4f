// Command storescale is the store scale benchmark, the target of
// docs/SCALING.md: "1 M queued tasks, 10 k running, 1 k endpoints: scheduler
// snapshot build and decision write per cycle under 200 ms on PostgreSQL".
//
// It creates a fresh PostgreSQL database (sluice_scale_<pid>, dropped at
// the end unless -keep), opens it with store.Open (so the migrations run
// and every row goes in through the store's own schema and queries),
// loads the endpoints and jobs with UpsertEndpoint and CreateJob, and
// then, for each lease layout (one server owning every partition, and
// three servers owning a third each), measures:
//
//   - the start-up claim: ClaimTasks in batches until every active task of
//     the owner's partitions is claimed (what a server does when it takes
//     partitions over);
//   - per scheduling cycle, repeated: ClaimTasks with nothing new,
//     CanceledJobs, EndpointLoads + PutEndpointLoads, the in-memory
//     snapshot build, UpdateTasksFenced of the cycle's decisions (N queued
//     tasks started, with audit entries, for several N), and every
//     -progress-every cycles SaveProgress of the running tasks' Done
//     (the 2 s progress save);
//   - outside the target, but part of a server's steady store traffic:
//     the completions that keep the running set at its size, and
//     RenewLeases of the owner's partitions.
//
// The snapshot is built by the service's own builder (dispatch.Builder:
// the same records in one reused slab, the same endpoint accounting and
// ID order) from the bench's in-memory tasks, without the world's other
// bookkeeping (down endpoints, estimates, riders). The live code itself is
// timed by BenchmarkSnapshot in server/ (bench/store-scale.sh runs it
// too).
//
// Usage: see bench/store-scale.sh.
package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-dtn/sluice/dispatch"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

const defaultURL = "postgres:///sluice_test?host=/var/run/postgresql"

type config struct {
	admin         string
	keep          bool
	endpoints     int
	queued        int
	running       int
	jobSize       int
	claimBatch    int
	cycles        int
	decisions     []int
	cycle         time.Duration
	progressEvery int
	layouts       []int
	loadMaxAge    time.Duration
	explain       bool
	analyze       bool
	seed          uint64
	snapshotOnly  bool
	cpuProfile    string
	loadOnly      bool
}

func main() {
	var cfg config
	var decisions, layouts string
	flag.BoolVar(&cfg.keep, "keep", false, "keep the database at the end (its URL is printed)")
	flag.IntVar(&cfg.endpoints, "endpoints", 1000, "endpoints (= partitions)")
	flag.IntVar(&cfg.queued, "queued", 1000000, "queued tasks")
	flag.IntVar(&cfg.running, "running", 10000, "running tasks")
	flag.IntVar(&cfg.jobSize, "job-size", 10000, "tasks per CreateJob")
	flag.IntVar(&cfg.claimBatch, "claim-batch", 1000, "ClaimTasks limit in the start-up claim (the store's default is 1000)")
	flag.IntVar(&cfg.cycles, "cycles", 50, "cycles measured per decision batch size")
	flag.StringVar(&decisions, "decisions", "50,200,1000", "tasks started per cycle (comma-separated list; one series of -cycles each)")
	flag.DurationVar(&cfg.cycle, "cycle", 500*time.Millisecond, "scheduling cycle period (cycles are paced at this rate)")
	flag.IntVar(&cfg.progressEvery, "progress-every", 4, "progress save every this many cycles (2 s at 0.5 s cycles)")
	flag.StringVar(&layouts, "servers", "1,3", "lease layouts: numbers of servers sharing the partitions")
	flag.DurationVar(&cfg.loadMaxAge, "load-max-age", 10*time.Minute, "maxAge passed to EndpointLoads")
	flag.BoolVar(&cfg.explain, "explain", true, "print EXPLAIN ANALYZE of the claim and cancellation queries")
	flag.BoolVar(&cfg.analyze, "analyze", true, "ANALYZE the tables after the load (as autovacuum's auto-analyze would soon)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed")
	flag.BoolVar(&cfg.loadOnly, "load-only", false, "stop after the load (with -keep: a database in the pre-claim state, for EXPLAIN work)")
	flag.BoolVar(&cfg.snapshotOnly, "snapshot-only", false, "only time the in-memory snapshot build, with synthetic tasks and no database")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "with -snapshot-only: write a CPU profile of the builds to this file")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: storescale [flags] [POSTGRES_URL]\n\nPOSTGRES_URL (default %s) must allow CREATE DATABASE.\n\n", defaultURL)
		flag.PrintDefaults()
	}
	flag.Parse()
	cfg.admin = defaultURL
	if flag.NArg() > 0 {
		cfg.admin = flag.Arg(0)
	}
	var err error
	if cfg.decisions, err = intList(decisions); err != nil {
		fatal(fmt.Errorf("-decisions: %w", err))
	}
	if cfg.layouts, err = intList(layouts); err != nil {
		fatal(fmt.Errorf("-servers: %w", err))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.snapshotOnly {
		err = snapshotOnly(cfg)
	} else {
		err = run(ctx, cfg)
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "storescale:", err)
	os.Exit(1)
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

// --- the database ---

// adminExec runs one statement through the admin URL.
func adminExec(ctx context.Context, admin, q string) error {
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return fmt.Errorf("parse admin URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// freshDatabase creates sluice_scale_<pid> and returns its URL and a
// function that drops it.
func freshDatabase(ctx context.Context, admin string) (string, func(context.Context) error, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("parse %q: %w", admin, err)
	}
	name := fmt.Sprintf("sluice_scale_%d", os.Getpid())
	if err := adminExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	u.Path = "/" + name
	drop := func(ctx context.Context) error {
		return adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

// inspector is a plain connection for read-only questions the Store does
// not answer: table sizes, statistics, EXPLAIN. It writes nothing but
// ANALYZE.
type inspector struct{ db *sql.DB }

func openInspector(ctx context.Context, dbURL string) (*inspector, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("inspector: parse URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("inspector: %w", err)
	}
	return &inspector{db: db}, nil
}

func (in *inspector) printf(ctx context.Context, format, q string) error {
	rows, err := in.db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("inspector: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("inspector: %w", err)
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("inspector: %w", err)
		}
		fmt.Printf(format, vals...)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inspector: %w", err)
	}
	return nil
}

func (in *inspector) tableStats(ctx context.Context, when string) error {
	fmt.Printf("\n-- table statistics (%s)\n", when)
	fmt.Printf("  %-14s %10s %10s %10s %10s  %-8s %-8s\n", "table", "live", "dead", "heap MB", "index MB", "autovac", "autoanl")
	return in.printf(ctx, "  %-14s %10d %10d %10.1f %10.1f  %-8v %-8v\n", `
		SELECT relname::text, n_live_tup, n_dead_tup,
			(pg_relation_size(relid) / 1048576.0)::float8, (pg_indexes_size(relid) / 1048576.0)::float8,
			autovacuum_count, autoanalyze_count
		FROM pg_stat_user_tables WHERE relname IN ('tasks', 'jobs', 'audit', 'leases', 'endpoint_load')
		ORDER BY relname`)
}

func (in *inspector) indexSizes(ctx context.Context) error {
	fmt.Printf("\n-- tasks indexes\n")
	return in.printf(ctx, "  %-16s %8.1f MB  scans %d\n", `
		SELECT indexrelname::text, (pg_relation_size(indexrelid) / 1048576.0)::float8, idx_scan
		FROM pg_stat_user_indexes WHERE relname = 'tasks' ORDER BY indexrelname`)
}

// claimSQL is the query ClaimTasks runs on PostgreSQL (store/cluster.go
// as of commit cdb8d6f: a LATERAL probe of each held partition), copied
// here for EXPLAIN only: keep it in step with the store.
const claimSQL = `WITH c AS (
		SELECT x.id AS cid, l.term AS cterm FROM leases l, LATERAL (
			SELECT t.id FROM tasks t
			WHERE t.src_endpoint = l.name AND t.claim < l.term AND t.state NOT IN ('done', 'failed', 'canceled')
			LIMIT $2 FOR UPDATE OF t SKIP LOCKED) x
		WHERE l.owner = $1 AND l.expires > (extract(epoch from clock_timestamp()) * 1000000000)::bigint
		LIMIT $2)
	UPDATE tasks SET claim = c.cterm FROM c WHERE tasks.id = c.cid RETURNING tasks.id`

// canceledSQL is CanceledJobs' query (store/cluster.go).
const canceledSQL = `SELECT id FROM jobs WHERE state = 'canceled' AND finished >= $1 ORDER BY id`

// explain prints EXPLAIN (ANALYZE, BUFFERS) of q in a transaction that is
// rolled back, so the claim's UPDATE changes nothing.
func (in *inspector) explain(ctx context.Context, title, q string, args ...any) error {
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	defer tx.Rollback() //nolint:errcheck // rolled back on purpose
	rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	defer rows.Close()
	fmt.Printf("\n-- EXPLAIN ANALYZE: %s\n", title)
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("explain %s: %w", title, err)
		}
		fmt.Println("  " + line)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	return nil
}

// explainGeneric prints EXPLAIN ANALYZE of q as a prepared statement
// under its generic plan (plan_cache_mode = force_generic_plan). The
// store's queries go through pgx's statement cache, that is server-side
// prepared statements, and PostgreSQL switches a prepared statement to
// its generic plan after five executions if that plan does not look
// dearer than the custom ones: the plan ClaimTasks runs with can be this
// one rather than the custom plan explain shows. args are SQL literals.
func (in *inspector) explainGeneric(ctx context.Context, title, q string, args ...string) error {
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	defer tx.Rollback() //nolint:errcheck // rolled back on purpose
	for _, stmt := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE bench_generic AS " + q} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("explain %s: %w", title, err)
		}
	}
	rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_generic("+strings.Join(args, ", ")+")")
	if err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	fmt.Printf("\n-- EXPLAIN ANALYZE, generic plan of the prepared statement: %s\n", title)
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return fmt.Errorf("explain %s: %w", title, err)
		}
		fmt.Println("  " + line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	if _, err := tx.ExecContext(ctx, "DEALLOCATE bench_generic"); err != nil {
		return fmt.Errorf("explain %s: %w", title, err)
	}
	return nil
}

// sqlString is s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// --- the run ---

func run(ctx context.Context, cfg config) (err error) {
	host, _ := os.Hostname()
	fmt.Printf("storescale: %d endpoints, %d queued + %d running tasks, jobs of %d, %d cycles per decision size %v, cycle %v, progress every %d cycles, layouts %v servers\n",
		cfg.endpoints, cfg.queued, cfg.running, cfg.jobSize, cfg.cycles, cfg.decisions, cfg.cycle, cfg.progressEvery, cfg.layouts)
	fmt.Printf("machine: %s, %s/%s, %d CPUs (GOMAXPROCS %d), %s\n", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())

	dbURL, drop, err := freshDatabase(ctx, cfg.admin)
	if err != nil {
		return err
	}
	fmt.Printf("database: %s\n", redact(dbURL))
	defer func() {
		if cfg.keep {
			fmt.Printf("\nkept database %s\n", redact(dbURL))
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := drop(dctx); derr != nil && err == nil {
			err = fmt.Errorf("drop database: %w", derr)
		}
	}()

	t0 := time.Now()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	fmt.Printf("store.Open (migrations): %v\n", time.Since(t0).Round(time.Millisecond))
	in, err := openInspector(ctx, dbURL)
	if err != nil {
		return err
	}
	defer in.db.Close()
	if err := in.printf(ctx, "postgres: %v; shared_buffers %v, work_mem %v, synchronous_commit %v\n",
		`SELECT version(), current_setting('shared_buffers'), current_setting('work_mem'), current_setting('synchronous_commit')`); err != nil {
		return err
	}

	b := &bench{cfg: cfg, st: st, in: in, dbURL: dbURL, rng: rand.New(rand.NewPCG(cfg.seed, 42))}
	if err := b.load(ctx); err != nil {
		return err
	}
	if cfg.loadOnly {
		return nil
	}
	for _, n := range cfg.layouts {
		if err := b.layout(ctx, n); err != nil {
			return fmt.Errorf("layout with %d servers: %w", n, err)
		}
	}
	if err := in.tableStats(ctx, "end"); err != nil {
		return err
	}
	return in.indexSizes(ctx)
}

func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

type bench struct {
	cfg     config
	st      store.Store
	in      *inspector
	dbURL   string
	rng     *rand.Rand
	eps     []string
	owner   store.User
	layoutN int
	// leases of the previous layout, released before the next one.
	held map[string]map[string]int64
}

func epName(i int) string { return fmt.Sprintf("ep%04d", i) }

// load registers the endpoints and creates the jobs: the queued tasks in
// jobs of cfg.jobSize, then the running ones. Task g's source is endpoint
// g mod E, so every partition's tasks are spread over the whole ID range
// (as they are when jobs of many sources arrive over time).
func (b *bench) load(ctx context.Context) error {
	cfg := b.cfg
	fmt.Printf("\n== load\n")
	t0 := time.Now()
	now := time.Now().UTC()
	for i := range cfg.endpoints {
		e := store.Endpoint{Name: epName(i), URL: fmt.Sprintf("https://dtn%04d.example.org:8443", i),
			MaxThroughput: 1.25e9, MaxCC: 64, Registered: now, LastSeen: now, Up: true}
		if err := b.st.UpsertEndpoint(ctx, e); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		b.eps = append(b.eps, e.Name)
	}
	fmt.Printf("UpsertEndpoint x %d: %v\n", cfg.endpoints, time.Since(t0).Round(time.Millisecond))
	u, err := b.st.EnsureUser(ctx, "bench", "bench-vo", false)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	b.owner = u

	total := cfg.queued + cfg.running
	g := 0
	var jobs int
	var createTimes []time.Duration
	t0 = time.Now()
	last := t0
	for g < total {
		running := g >= cfg.queued
		end := min(g+cfg.jobSize, total)
		if !running {
			end = min(end, cfg.queued)
		}
		tasks := make([]store.Task, 0, end-g)
		for i := g; i < end; i++ {
			tasks = append(tasks, b.task(i, i-g, running, now))
		}
		j := store.Job{OwnerID: u.ID, VO: u.VO, Label: fmt.Sprintf("scale %d", jobs), Class: store.ClassBatch,
			Checksum: "adler32", Retry: 3, Created: now}
		if jobs%2 == 0 {
			j.Class = store.ClassInteractive
		}
		c0 := time.Now()
		if _, err := b.st.CreateJob(ctx, &j, tasks); err != nil {
			return fmt.Errorf("load: job %d: %w", jobs, err)
		}
		createTimes = append(createTimes, time.Since(c0))
		jobs++
		g = end
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			fmt.Printf("  ... %d tasks, %.0f rows/s\n", g, float64(g)/time.Since(t0).Seconds())
		}
	}
	el := time.Since(t0)
	s := summarize(createTimes)
	fmt.Printf("CreateJob x %d (%d tasks each, %d queued + %d running): %v, %.0f tasks/s; per call median %s max %s\n",
		jobs, cfg.jobSize, cfg.queued, cfg.running, el.Round(time.Millisecond), float64(total)/el.Seconds(), ms(s.med), ms(s.max))
	if cfg.analyze {
		a0 := time.Now()
		if _, err := b.in.db.ExecContext(ctx, "ANALYZE"); err != nil {
			return fmt.Errorf("load: analyze: %w", err)
		}
		fmt.Printf("ANALYZE: %v\n", time.Since(a0).Round(time.Millisecond))
	}
	return b.in.tableStats(ctx, "after load")
}

// task builds the i-th task of the load (k-th of its job).
func (b *bench) task(g, k int, running bool, now time.Time) store.Task {
	e := b.cfg.endpoints
	src := g % e
	dst := (g*7 + 13) % e
	if dst == src {
		dst = (dst + 1) % e
	}
	size := int64(math.Exp(math.Log(1e6) + b.rng.Float64()*(math.Log(1e10)-math.Log(1e6))))
	t := store.Task{
		Index:       k,
		Src:         fmt.Sprintf("sluice://%s/data/set%03d/file%07d.dat", epName(src), g%1000, g),
		Dst:         fmt.Sprintf("sluice://%s/archive/set%03d/file%07d.dat", epName(dst), g%1000, g),
		SrcEndpoint: epName(src), DstEndpoint: epName(dst),
		Size:    size,
		Batch:   g%3 == 0,
		Arrival: now.Add(-time.Duration(b.rng.IntN(3600)) * time.Second),
	}
	if running {
		t.State = store.StateRunning
		t.CC = 1 + b.rng.IntN(8)
		t.Started = now.Add(-time.Duration(b.rng.IntN(600)) * time.Second)
		t.Done = b.rng.Int64N(size/2 + 1)
		t.Wait = float64(b.rng.IntN(600))
		t.Trans = float64(b.rng.IntN(600))
	}
	return t
}

// --- a server's view ---

// memTask is what a server keeps of one active task (a stand-in for
// server/world.go's task: the stored row plus loop state).
type memTask struct {
	store.Task
	since        time.Time
	notBefore    time.Time
	rate         float64
	pending      bool
	srcEp, dstEp *memEndpoint
}

type memEndpoint struct {
	store.Endpoint
	peak     float64
	observed float64
	cc       int
}

// server is one scheduler server: its partitions' leases and the active
// tasks it claimed.
type server struct {
	id     string
	st     store.Store
	terms  map[string]int64
	tasks  []*memTask // in the order claimed, as world.tasks walks
	byID   map[int64]*memTask
	queue  []*memTask // queued, by ID: the next starts
	runq   []*memTask // running, oldest start first: the next completions
	eps    map[string]*memEndpoint
	epoch  time.Time
	series *seriesSet
	// cyc builds the snapshots, as world.snapshot does (the same
	// dispatch.Builder, its memory reused from cycle to cycle).
	cyc dispatch.Builder
}

func (s *server) since(t time.Time) float64 { return t.Sub(s.epoch).Seconds() }

// layout gives the partitions to n servers (round robin by endpoint) and
// runs the start-up claim and the cycles.
func (b *bench) layout(ctx context.Context, n int) error {
	cfg := b.cfg
	fmt.Printf("\n== layout: %d server(s) sharing %d partitions\n", n, cfg.endpoints)
	b.layoutN++
	// Release the previous layout's leases: the new owners' terms are
	// one higher, so every task is claimable again.
	for owner, terms := range b.held {
		for p, term := range terms {
			if err := b.st.ReleaseLease(ctx, p, owner, term); err != nil {
				return err
			}
		}
	}
	servers := make([]*server, n)
	for i := range servers {
		st := b.st
		if i > 0 {
			// Each further server has its own connection pool, as a
			// separate process would.
			var err error
			if st, err = store.Open(ctx, b.dbURL); err != nil {
				return fmt.Errorf("open store for server %d: %w", i, err)
			}
			defer st.Close()
		}
		servers[i] = &server{id: fmt.Sprintf("L%d-server-%d", b.layoutN, i+1), st: st, terms: map[string]int64{},
			byID: map[int64]*memTask{}, epoch: time.Now(), series: newSeriesSet()}
	}
	t0 := time.Now()
	for i, p := range b.eps {
		s := servers[i%n]
		l, ok, err := s.st.AcquireLease(ctx, p, s.id, time.Hour)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("lease %s held by %s", p, l.Owner)
		}
		s.terms[p] = l.Term
	}
	fmt.Printf("AcquireLease x %d: %v\n", len(b.eps), time.Since(t0).Round(time.Millisecond))
	b.held = map[string]map[string]int64{}
	for _, s := range servers {
		b.held[s.id] = s.terms
	}
	eps, err := b.st.Endpoints(ctx)
	if err != nil {
		return err
	}
	for _, s := range servers {
		s.eps = make(map[string]*memEndpoint, len(eps))
		for _, e := range eps {
			s.eps[e.Name] = &memEndpoint{Endpoint: e}
		}
	}

	// a. The start-up claim, all servers at once.
	if cfg.explain {
		title := fmt.Sprintf("ClaimTasks(%s, %d) at start-up (everything claimable)", servers[0].id, cfg.claimBatch)
		if err := b.in.explain(ctx, title, claimSQL, servers[0].id, cfg.claimBatch); err != nil {
			return err
		}
		if err := b.in.explainGeneric(ctx, title, claimSQL, sqlString(servers[0].id), strconv.Itoa(cfg.claimBatch)); err != nil {
			return err
		}
	}
	fmt.Printf("\n-- a. start-up claim (ClaimTasks, limit %d, until empty; %d server(s) concurrently)\n", cfg.claimBatch, n)
	var wall time.Duration
	{
		t0 := time.Now()
		g, gctx := errgroup.WithContext(ctx)
		for _, s := range servers {
			g.Go(func() error { return s.startupClaim(gctx, cfg.claimBatch) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
		wall = time.Since(t0)
	}
	total := 0
	for _, s := range servers {
		total += len(s.tasks)
	}
	fmt.Printf("all servers: %d tasks claimed in %v wall, %.0f rows/s\n", total, wall.Round(time.Millisecond), float64(total)/wall.Seconds())
	if err := b.in.tableStats(ctx, "after start-up claim"); err != nil {
		return err
	}

	// The first cycle's empty claim, right after the big claim (dead
	// index entries not yet vacuumed).
	for _, s := range servers {
		t0 := time.Now()
		got, err := s.st.ClaimTasks(ctx, s.id, 1000)
		if err != nil {
			return err
		}
		fmt.Printf("first empty ClaimTasks of %s: %s (%d rows)\n", s.id, ms(time.Since(t0)), len(got))
	}
	if cfg.explain {
		title := fmt.Sprintf("ClaimTasks(%s, 1000) with nothing new", servers[0].id)
		if err := b.in.explain(ctx, title, claimSQL, servers[0].id, 1000); err != nil {
			return err
		}
		if err := b.in.explainGeneric(ctx, title, claimSQL, sqlString(servers[0].id), "1000"); err != nil {
			return err
		}
		if err := b.in.explain(ctx, "CanceledJobs(now-30s)", canceledSQL, time.Now().Add(-30*time.Second).UnixNano()); err != nil {
			return err
		}
	}

	// c (standalone). Snapshot build with the whole claimed set.
	for _, s := range servers[:1] {
		s.snapshotReport()
	}

	// b. Cycles: every server runs its own loop, all at once.
	fmt.Printf("\n-- b. cycles (%d server(s) concurrently, paced at %v; %d cycles per decision size)\n", n, cfg.cycle, cfg.cycles)
	peers := []string{}
	if n == 1 {
		// One server owns everything, but other servers are alive (say
		// standbys) and publish their loads: EndpointLoads reads them.
		peers = []string{"standby-1", "standby-2"}
		for _, p := range peers {
			loads := make([]store.EndpointLoad, len(b.eps))
			for i, e := range b.eps {
				loads[i] = store.EndpointLoad{Endpoint: e, CC: i % 7, Throughput: float64(i) * 1e6}
			}
			if err := b.st.PutEndpointLoads(ctx, p, loads); err != nil {
				return err
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range servers {
		rng := rand.New(rand.NewPCG(cfg.seed+uint64(i), uint64(b.layoutN)))
		g.Go(func() error { return s.cycles(gctx, cfg, b.owner, rng, i == 0) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, s := range servers {
		fmt.Printf("\nserver %s (%d partitions, %d active tasks at start, %d queued and %d running now):\n",
			s.id, len(s.terms), len(s.tasks), len(s.queue), len(s.runq))
		s.series.print(cfg)
	}
	if len(servers) > 1 {
		all := newSeriesSet()
		for _, s := range servers {
			all.merge(s.series)
		}
		fmt.Printf("\nall %d servers pooled:\n", n)
		all.print(cfg)
	}
	if cfg.explain {
		title := fmt.Sprintf("ClaimTasks(%s, 1000) with nothing new, after the cycles", servers[0].id)
		if err := b.in.explain(ctx, title, claimSQL, servers[0].id, 1000); err != nil {
			return err
		}
		if err := b.in.explainGeneric(ctx, title, claimSQL, sqlString(servers[0].id), "1000"); err != nil {
			return err
		}
	}
	return b.in.tableStats(ctx, "after the cycles")
}

// startupClaim claims everything of s's partitions.
func (s *server) startupClaim(ctx context.Context, limit int) error {
	t0 := time.Now()
	var per []time.Duration
	last := t0
	for {
		if time.Since(last) > 30*time.Second {
			last = time.Now()
			fmt.Printf("  ... %s: %d claimed after %v, last call %s\n", s.id, len(s.tasks), time.Since(t0).Round(time.Second), ms(per[len(per)-1]))
		}
		c0 := time.Now()
		got, err := s.st.ClaimTasks(ctx, s.id, limit)
		if err != nil {
			return err
		}
		per = append(per, time.Since(c0))
		now := time.Now()
		for _, t := range got {
			m := &memTask{Task: t, since: now}
			s.tasks = append(s.tasks, m)
			s.byID[t.ID] = m
		}
		if len(got) < limit {
			break
		}
	}
	el := time.Since(t0)
	queued, running := 0, 0
	for _, t := range s.tasks {
		switch t.State {
		case store.StateQueued:
			s.queue = append(s.queue, t)
			queued++
		case store.StateRunning:
			s.runq = append(s.runq, t)
			running++
		}
	}
	slices.SortFunc(s.queue, func(a, b *memTask) int { return cmp.Compare(a.ID, b.ID) })
	sum := summarize(per)
	fmt.Printf("%s: %d tasks (%d queued, %d running) in %d calls, %v, %.0f rows/s; per call median %s p95 %s max %s\n",
		s.id, len(s.tasks), queued, running, len(per), el.Round(time.Millisecond), float64(len(s.tasks))/el.Seconds(),
		ms(sum.med), ms(sum.p95), ms(sum.max))
	return nil
}

// --- snapshot build (server/world.go snapshot() on the bench's tasks) ---

const (
	defaultEndpointMaxCC = 64
	startupCost          = 2.0
	checkpointEvery      = 5.0
)

// snapshot builds the scheduler's view from s.tasks (in claim order) with
// the service's builder, which puts them in ID order.
func (s *server) snapshot(now time.Time) *sched.Snapshot {
	b := &s.cyc
	b.Begin(dispatch.Params{Trigger: sched.Tick, Now: s.since(now), StartupCost: startupCost, Checkpoint: checkpointEvery, Tasks: len(s.tasks)})
	for name, e := range s.eps {
		e.observed, e.cc = 0, 0
		maxCC := e.MaxCC
		if maxCC <= 0 {
			maxCC = defaultEndpointMaxCC
		}
		thr := e.MaxThroughput
		if thr <= 0 {
			thr = e.peak
		}
		b.Endpoint(name, thr, maxCC)
	}
	for _, t := range s.tasks {
		switch t.State {
		case store.StateRunning:
			st := b.New()
			s.fillSchedTask(st, t)
			// eachUse without replicas: the source (share 1) and the
			// destination.
			b.Running(st, now.Sub(t.since).Seconds())
		case store.StateQueued:
			if t.Size < 0 || now.Before(t.notBefore) || !s.up(t) {
				continue
			}
			st := b.New()
			s.fillSchedTask(st, t)
			b.Waiting(st, now.Sub(t.since).Seconds())
		}
	}
	snap := b.Snapshot()
	for name, e := range snap.Endpoints {
		me := s.eps[name]
		me.observed, me.cc = e.Observed, e.CC
		if e.Observed > me.peak {
			me.peak = e.Observed
		}
	}
	return snap
}

func (s *server) fillSchedTask(st *sched.Task, t *memTask) {
	*st = sched.Task{
		ID: sched.TaskID(t.ID), Src: t.SrcEndpoint, Dst: t.DstEndpoint,
		Size: t.Size, Left: t.Size - t.Done, Batch: t.Batch,
		Arrival: s.since(t.Arrival), Wait: t.Wait, Trans: t.Trans,
	}
	if t.State == store.StateRunning {
		st.CC, st.Rate, st.Pending = t.CC, t.rate, t.pending
	}
}

// up reports whether both of t's endpoints are up, looking them up once.
func (s *server) up(t *memTask) bool {
	if t.srcEp == nil {
		t.srcEp = s.eps[t.SrcEndpoint]
	}
	if t.dstEp == nil {
		t.dstEp = s.eps[t.DstEndpoint]
	}
	return t.srcEp != nil && t.srcEp.Up && t.dstEp != nil && t.dstEp.Up
}

// snapshotOnly times the snapshot build over synthetic tasks (the load's
// tasks, as if claimed), without a database.
func snapshotOnly(cfg config) error {
	fmt.Printf("storescale -snapshot-only: %d queued + %d running tasks, %d endpoints, %d CPUs (GOMAXPROCS %d), %s\n",
		cfg.queued, cfg.running, cfg.endpoints, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	b := &bench{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 42))}
	s := &server{id: "snapshot-only", byID: map[int64]*memTask{}, epoch: time.Now(), eps: map[string]*memEndpoint{}}
	now := time.Now()
	for i := range cfg.endpoints {
		s.eps[epName(i)] = &memEndpoint{Endpoint: store.Endpoint{Name: epName(i), MaxThroughput: 1.25e9, MaxCC: 64, Up: true}}
	}
	for g := range cfg.queued + cfg.running {
		t := b.task(g, g, g >= cfg.queued, now)
		t.ID = int64(g + 1)
		if t.State == "" {
			t.State = store.StateQueued
		}
		s.tasks = append(s.tasks, &memTask{Task: t, since: now})
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	s.snapshotReport()
	return nil
}

// snapshotReport times the snapshot build alone, several times.
func (s *server) snapshotReport() {
	var d []time.Duration
	var snap *sched.Snapshot
	for range 15 {
		t0 := time.Now()
		snap = s.snapshot(time.Now())
		d = append(d, time.Since(t0))
	}
	sum := summarize(d)
	fmt.Printf("c. snapshot build of %s (%d waiting, %d running, %d endpoints), 15 builds: median %s p95 %s max %s\n",
		s.id, len(snap.Waiting), len(snap.Running), len(snap.Endpoints), ms(sum.med), ms(sum.p95), ms(sum.max))
}

// --- cycles ---

// Step names, in print order. The target's total is the sum of the
// first group (with the progress save amortised); the extras are store
// traffic outside it.
var (
	cycleSteps = []string{"claim (nothing new)", "canceled jobs", "endpoint loads (get)", "endpoint loads (put)", "snapshot build (in memory)", "decision write"}
	extraSteps = []string{"progress save (per call)", "completions write", "renew leases"}
)

func (s *server) cycles(ctx context.Context, cfg config, owner store.User, rng *rand.Rand, cancels bool) error {
	tick := time.NewTicker(cfg.cycle)
	defer tick.Stop()
	k := 0
	for _, n := range cfg.decisions {
		for c := range cfg.cycles {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			if cancels && c%10 == 0 {
				// A user cancels a small job now and then, so that
				// CanceledJobs has something to return.
				if err := s.cancelSmallJob(ctx, owner, k); err != nil {
					return err
				}
			}
			if err := s.cycle(ctx, cfg, n, k%cfg.progressEvery == 0, rng); err != nil {
				return fmt.Errorf("%s cycle %d (N=%d): %w", s.id, k, n, err)
			}
			k++
		}
	}
	return nil
}

func (s *server) cancelSmallJob(ctx context.Context, owner store.User, k int) error {
	tasks := make([]store.Task, 10)
	for i := range tasks {
		tasks[i] = store.Task{Index: i, Src: fmt.Sprintf("sluice://%s/c/%d/%d", epName(i), k, i), Dst: fmt.Sprintf("sluice://%s/c/%d/%d", epName(i+1), k, i),
			SrcEndpoint: epName(i), DstEndpoint: epName(i + 1), Size: 1e6,
			// Created terminal, so that no claimer (another server of
			// the layout) takes them between CreateJob and CancelJob.
			State: store.StateCanceled}
	}
	j := store.Job{OwnerID: owner.ID, VO: owner.VO, Label: "to cancel", Class: store.ClassInteractive}
	if _, err := s.st.CreateJob(ctx, &j, tasks); err != nil {
		return fmt.Errorf("cancel small job: %w", err)
	}
	if _, err := s.st.CancelJob(ctx, j.ID, time.Now(), "bench"); err != nil {
		return fmt.Errorf("cancel small job: %w", err)
	}
	return nil
}

func (s *server) cycle(ctx context.Context, cfg config, n int, progress bool, rng *rand.Rand) error {
	key := func(step string) string { return fmt.Sprintf("N=%d|%s", n, step) }
	var total time.Duration
	timed := func(step string, f func() error) error {
		t0 := time.Now()
		err := f()
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		s.series.add(key(step), d)
		if slices.Contains(cycleSteps, step) {
			total += d
		}
		return nil
	}
	if err := timed("claim (nothing new)", func() error {
		got, err := s.st.ClaimTasks(ctx, s.id, 1000)
		if err == nil && len(got) > 0 {
			err = fmt.Errorf("claimed %d tasks, expected none", len(got))
		}
		return err
	}); err != nil {
		return err
	}
	if err := timed("canceled jobs", func() error {
		_, err := s.st.CanceledJobs(ctx, time.Now().Add(-30*time.Second))
		return err
	}); err != nil {
		return err
	}
	if err := timed("endpoint loads (get)", func() error {
		_, err := s.st.EndpointLoads(ctx, s.id, cfg.loadMaxAge)
		return err
	}); err != nil {
		return err
	}
	if err := timed("endpoint loads (put)", func() error {
		loads := make([]store.EndpointLoad, 0, len(s.eps))
		for name, e := range s.eps {
			loads = append(loads, store.EndpointLoad{Endpoint: name, CC: e.cc, Throughput: e.observed})
		}
		return s.st.PutEndpointLoads(ctx, s.id, loads)
	}); err != nil {
		return err
	}
	if err := timed("snapshot build (in memory)", func() error {
		snap := s.snapshot(time.Now())
		if len(snap.Waiting) == 0 && len(s.queue) > 0 {
			return errors.New("empty snapshot")
		}
		return nil
	}); err != nil {
		return err
	}

	// The cycle's decisions: start the next n queued tasks.
	now := time.Now()
	n = min(n, len(s.queue))
	starts := s.queue[:n]
	s.queue = s.queue[n:]
	rows := make([]store.Task, 0, n)
	audit := make([]store.AuditEntry, 0, n)
	for _, t := range starts {
		cc := 1 + rng.IntN(8)
		t.Wait += now.Sub(t.since).Seconds()
		audit = append(audit, store.AuditEntry{At: now, JobID: t.JobID, TaskID: t.ID, Actor: "scheduler",
			From: t.State, To: store.StateRunning, Detail: fmt.Sprintf("cc=%d", cc)})
		t.State, t.CC, t.since, t.pending = store.StateRunning, cc, now, true
		if t.Started.IsZero() {
			t.Started = now
		}
		rows = append(rows, t.Task)
	}
	if err := timed("decision write", func() error {
		skipped, err := s.st.UpdateTasksFenced(ctx, s.id, rows, audit)
		if err == nil && len(skipped) > 0 {
			err = fmt.Errorf("%d tasks skipped", len(skipped))
		}
		return err
	}); err != nil {
		return err
	}
	s.runq = append(s.runq, starts...)
	s.series.add(key("total (target: claim..decision write)"), total)

	// Outside the target: completions keep the running set at its size.
	now = time.Now()
	done := s.runq[:n]
	s.runq = s.runq[n:]
	rows = rows[:0]
	audit = audit[:0]
	for _, t := range done {
		t.Trans += now.Sub(t.since).Seconds()
		audit = append(audit, store.AuditEntry{At: now, JobID: t.JobID, TaskID: t.ID, Actor: "scheduler",
			From: t.State, To: store.StateDone, Detail: "adler32:0badc0de"})
		t.State, t.Done, t.Finished, t.Checksum, t.Throughput = store.StateDone, t.Size, now, "adler32:0badc0de", 1e8
		rows = append(rows, t.Task)
	}
	if err := timed("completions write", func() error {
		_, err := s.st.UpdateTasksFenced(ctx, s.id, rows, audit)
		return err
	}); err != nil {
		return err
	}
	for _, t := range done {
		delete(s.byID, t.ID)
	}
	// Keep s.tasks free of terminal tasks now and then (the world drops
	// them at once; compaction here is not timed).
	if len(s.byID) < len(s.tasks)-20000 {
		s.tasks = slices.DeleteFunc(s.tasks, func(t *memTask) bool { return store.Terminal(t.State) })
	}
	for _, t := range s.runq {
		t.pending = false
		t.rate = 5e7
	}

	if progress {
		ps := make([]store.Progress, 0, len(s.runq))
		for _, t := range s.runq {
			t.Done = min(t.Size, t.Done+int64(1+rng.IntN(1<<26)))
			ps = append(ps, store.Progress{ID: t.ID, SrcEndpoint: t.SrcEndpoint, Term: t.Term, Done: t.Done})
		}
		if err := timed("progress save (per call)", func() error {
			return s.st.SaveProgress(ctx, s.id, ps) // as world.saveProgress
		}); err != nil {
			return err
		}
		if err := timed("renew leases", func() error {
			held, err := s.st.RenewLeases(ctx, s.id, s.terms, time.Hour)
			if err == nil && len(held) != len(s.terms) {
				err = fmt.Errorf("lost %d leases", len(s.terms)-len(held))
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// --- statistics ---

type summary struct {
	n             int
	med, p95, max time.Duration
}

func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{n: len(s), med: med, p95: q(0.95), max: s[len(s)-1]}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

type seriesSet struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

func newSeriesSet() *seriesSet { return &seriesSet{m: map[string][]time.Duration{}} }

func (s *seriesSet) add(key string, d time.Duration) {
	s.mu.Lock()
	s.m[key] = append(s.m[key], d)
	s.mu.Unlock()
}

func (s *seriesSet) merge(o *seriesSet) {
	for k, v := range o.m {
		s.m[k] = append(s.m[k], v...)
	}
}

func (s *seriesSet) print(cfg config) {
	fmt.Printf("  %-42s %6s %10s %10s %10s\n", "step (N = tasks started per cycle)", "n", "median", "p95", "max")
	for _, n := range cfg.decisions {
		fmt.Printf("  N=%d\n", n)
		line := func(name string, sum summary) {
			fmt.Printf("    %-40s %6d %10s %10s %10s\n", name, sum.n, ms(sum.med), ms(sum.p95), ms(sum.max))
		}
		get := func(step string) summary { return summarize(s.m[fmt.Sprintf("N=%d|%s", n, step)]) }
		for _, step := range cycleSteps {
			line(step, get(step))
		}
		prog := get("progress save (per call)")
		line("progress save / "+strconv.Itoa(cfg.progressEvery)+" (amortised)", summary{n: prog.n,
			med: prog.med / time.Duration(cfg.progressEvery), p95: prog.p95 / time.Duration(cfg.progressEvery), max: prog.max / time.Duration(cfg.progressEvery)})
		tot := get("total (target: claim..decision write)")
		line("TOTAL per cycle (+ amortised progress)", summary{n: tot.n,
			med: tot.med + prog.med/time.Duration(cfg.progressEvery), p95: tot.p95 + prog.p95/time.Duration(cfg.progressEvery),
			max: tot.max + prog.max/time.Duration(cfg.progressEvery)})
		snapDec := addSeries(s.m[fmt.Sprintf("N=%d|snapshot build (in memory)", n)], s.m[fmt.Sprintf("N=%d|decision write", n)])
		line("snapshot build + decision write", summarize(snapDec))
		fmt.Printf("    extras (not in the total):\n")
		for _, step := range extraSteps {
			line(step, get(step))
		}
	}
}

// addSeries adds two series sample by sample (same cycles).
func addSeries(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] + b[i]
	}
	return out
}
