package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/pki"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/stork"
)

// serveConfig is the --config file of `sluice serve` (JSON); flags given
// on the command line override it.
type serveConfig struct {
	Listen           string  `json:"listen"`
	DB               string  `json:"db"`
	DataDir          string  `json:"data_dir"`
	Scheduler        string  `json:"scheduler"`
	CycleSeconds     float64 `json:"cycle_seconds"`
	HeartbeatTimeout float64 `json:"heartbeat_timeout_seconds"`
	DownGiveUp       float64 `json:"down_give_up_seconds"`
	DataTokenTTL     float64 `json:"data_token_ttl_seconds"`
	TotalMaxCC       int     `json:"total_max_cc"`
	StartupCost      float64 `json:"startup_cost_seconds"`
	Policy           string  `json:"policy"`
	ServerID         string  `json:"server_id"`
	LeaseTTL         float64 `json:"lease_ttl_seconds"`
	JournalWrites    float64 `json:"journal_writes"`
	BatchMax         string  `json:"batch_max"`
	BatchBDP         string  `json:"batch_bdp"`
	ListPage         int     `json:"list_page"`
	TLSCert          string  `json:"tls_cert"`
	TLSKey           string  `json:"tls_key"`
	CA               string  `json:"ca"`
	SampleEvery      float64 `json:"sample_every_seconds"`
	SampleKeep       float64 `json:"sample_keep_seconds"`
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "sluice")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "sluice")
	}
	return "sluice-data"
}

func newServeCmd() *cobra.Command {
	var cfgFile string
	c := serveConfig{Listen: "127.0.0.1:8080", Scheduler: server.DefaultScheduler, CycleSeconds: 0.5, HeartbeatTimeout: 10, DownGiveUp: server.DefaultDownGiveUp.Seconds(), DataTokenTTL: server.DefaultDataTokenTTL.Seconds(), LeaseTTL: server.DefaultLeaseTTL.Seconds(),
		SampleEvery: server.DefaultSampleEvery.Seconds(), SampleKeep: server.DefaultSampleKeep.Seconds()}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the scheduler service: REST API, store, and transfers between registered agents",
		Long: `serve runs the Sluice service: the REST API (OpenAPI at /openapi.json), the
store (SQLite in the data directory, or PostgreSQL with --db, shared by several
servers), and the scheduler of the transfers between the agents that join it.
Each start names the admin and join token files. See docs/operator-guide.md.`,
		Example: `  sluice serve --listen :8080 --tls-cert sched1.pem --tls-key sched1.key
  sluice serve --db postgres://sluice@db/sluice --server-id sched1 --listen :8080   # one of several`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfgFile != "" {
				if err := loadServeConfig(cfgFile, &c, cmd); err != nil {
					return err
				}
			}
			return runServe(cmd, c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgFile, "config", "", "JSON file with listen, db, data_dir, scheduler, cycle_seconds, heartbeat_timeout_seconds, down_give_up_seconds, total_max_cc, startup_cost_seconds, policy, server_id, lease_ttl_seconds, journal_writes, tls_cert, tls_key, ca, sample_every_seconds, sample_keep_seconds")
	f.StringVar(&c.ServerID, "server-id", "", "this server's name among several on one database: unique and stable across restarts (default: local with SQLite, HOSTNAME-PORT with PostgreSQL)")
	f.Float64Var(&c.JournalWrites, "journal-writes", server.DefaultJournalWrites, "checkpoint writes per second to the store over all runs: beyond, runs checkpoint less often than every second")
	f.Float64Var(&c.LeaseTTL, "lease-ttl", c.LeaseTTL, "seconds a partition's scheduling lease lasts unrenewed: how soon the others take over from a dead server")
	f.StringVar(&c.Listen, "listen", c.Listen, "address of the API (host:port)")
	f.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with; read again when the file changes (sluice ca issue makes one)")
	f.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&c.CA, "ca", "", "the site's CA certificate (PEM): agents' and storage servers' certificates are checked against it besides the system's")
	f.StringVar(&c.DB, "db", "", "store: postgres://... for PostgreSQL (default: SQLite file sluice.db in the data directory)")
	f.StringVar(&c.DataDir, "data-dir", "", "directory for the SQLite store and first-start tokens (default "+defaultDataDir()+")")
	f.StringVar(&c.Scheduler, "scheduler", c.Scheduler, fmt.Sprintf("scheduling algorithm: %v", sched.Names()))
	f.Float64Var(&c.CycleSeconds, "cycle", c.CycleSeconds, "scheduling period in seconds")
	f.Float64Var(&c.HeartbeatTimeout, "heartbeat-timeout", c.HeartbeatTimeout, "seconds without a heartbeat before an endpoint is marked down")
	f.Float64Var(&c.DataTokenTTL, "data-token-ttl", c.DataTokenTTL, "seconds each data token given to agents for a transfer lasts (a longer transfer gets fresh ones as it goes)")
	f.Float64Var(&c.DownGiveUp, "down-give-up", c.DownGiveUp, "seconds an endpoint may stay silent (no heartbeat) before the files waiting for it fail, saying so (negative: they wait for good)")
	f.IntVar(&c.TotalMaxCC, "total-max-cc", 0, "bound on the concurrency over all endpoints (0: none)")
	f.StringVar(&c.Policy, "policy", "", "Policy Service policy: greedy (default), weighted-shares, or starlark:FILE (a module with add, update and remove; checked at start)")
	f.IntVar(&c.ListPage, "list-page", server.DefaultListPage, "entries a listing of a directory a job copies whole asks its agent for at a time (1 to 10000)")
	f.StringVar(&c.BatchMax, "batch-max", "", "files up to this size (e.g. 8MiB) started in one cycle move in pull batches, back to back on one connection; 0 turns batching off (default: the engine's chunk size, 8 MiB)")
	f.StringVar(&c.BatchBDP, "batch-bdp", "", "one connection's bandwidth-delay product on your paths (e.g. 256KiB, the default): a batch carries 1 + this / the mean file size files")
	f.Float64Var(&c.SampleEvery, "sample-every", c.SampleEvery, "seconds between two samples of what this server schedules, for the dashboard's history")
	f.Float64Var(&c.SampleKeep, "sample-keep", c.SampleKeep, "seconds the dashboard's history is kept")
	f.Float64Var(&c.StartupCost, "startup-cost", server.DefaultStartupCost.Seconds(), "seconds a transfer's start (connections, authentication) costs on your paths; the scheduler weighs it against the gain of starting or preempting")
	moreFlags(cmd, "docs/operator-guide.md", "batch-bdp", "batch-max", "cycle", "data-token-ttl", "down-give-up", "heartbeat-timeout",
		"journal-writes", "lease-ttl", "list-page", "sample-every", "sample-keep", "startup-cost", "total-max-cc")
	return cmd
}

// loadServeConfig reads the config file into c, except for the settings
// given as flags.
func loadServeConfig(name string, c *serveConfig, cmd *cobra.Command) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("serve: --config: %w", err)
	}
	var fc serveConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return fmt.Errorf("serve: --config %s: %w", name, err)
	}
	set := func(flag string, apply func()) {
		if !cmd.Flags().Changed(flag) {
			apply()
		}
	}
	if fc.Listen != "" {
		set("listen", func() { c.Listen = fc.Listen })
	}
	if fc.DB != "" {
		set("db", func() { c.DB = fc.DB })
	}
	if fc.DataDir != "" {
		set("data-dir", func() { c.DataDir = fc.DataDir })
	}
	if fc.Scheduler != "" {
		set("scheduler", func() { c.Scheduler = fc.Scheduler })
	}
	if fc.CycleSeconds != 0 {
		set("cycle", func() { c.CycleSeconds = fc.CycleSeconds })
	}
	if fc.HeartbeatTimeout != 0 {
		set("heartbeat-timeout", func() { c.HeartbeatTimeout = fc.HeartbeatTimeout })
	}
	if fc.DownGiveUp != 0 {
		set("down-give-up", func() { c.DownGiveUp = fc.DownGiveUp })
	}
	if fc.DataTokenTTL != 0 {
		set("data-token-ttl", func() { c.DataTokenTTL = fc.DataTokenTTL })
	}
	if fc.TotalMaxCC != 0 {
		set("total-max-cc", func() { c.TotalMaxCC = fc.TotalMaxCC })
	}
	if fc.Policy != "" {
		set("policy", func() { c.Policy = fc.Policy })
	}
	if fc.StartupCost != 0 {
		set("startup-cost", func() { c.StartupCost = fc.StartupCost })
	}
	if fc.ServerID != "" {
		set("server-id", func() { c.ServerID = fc.ServerID })
	}
	if fc.JournalWrites != 0 {
		set("journal-writes", func() { c.JournalWrites = fc.JournalWrites })
	}
	if fc.LeaseTTL != 0 {
		set("lease-ttl", func() { c.LeaseTTL = fc.LeaseTTL })
	}
	if fc.BatchMax != "" {
		set("batch-max", func() { c.BatchMax = fc.BatchMax })
	}
	if fc.BatchBDP != "" {
		set("batch-bdp", func() { c.BatchBDP = fc.BatchBDP })
	}
	if fc.SampleEvery != 0 {
		set("sample-every", func() { c.SampleEvery = fc.SampleEvery })
	}
	if fc.SampleKeep != 0 {
		set("sample-keep", func() { c.SampleKeep = fc.SampleKeep })
	}
	if fc.ListPage != 0 {
		set("list-page", func() { c.ListPage = fc.ListPage })
	}
	if fc.TLSCert != "" {
		set("tls-cert", func() { c.TLSCert = fc.TLSCert })
	}
	if fc.TLSKey != "" {
		set("tls-key", func() { c.TLSKey = fc.TLSKey })
	}
	if fc.CA != "" {
		set("ca", func() { c.CA = fc.CA })
	}
	return nil
}

// agentClient is the server's client of agents: the agents' transport
// (sluice.NewTransport), verifying their certificates against cfg's
// roots.
func agentClient(cfg *tls.Config) *http.Client {
	t := sluice.NewTransport()
	t.TLSClientConfig = cfg
	return &http.Client{Transport: t}
}

func runServe(cmd *cobra.Command, c serveConfig) error {
	if c.CycleSeconds <= 0 || c.HeartbeatTimeout <= 0 || c.TotalMaxCC < 0 || c.StartupCost <= 0 || c.LeaseTTL <= 0 || c.JournalWrites <= 0 || c.DownGiveUp == 0 {
		return errors.New("serve: --cycle, --heartbeat-timeout, --startup-cost, --lease-ttl and --journal-writes must be positive, --total-max-cc not negative, --down-give-up not 0")
	}
	if c.ListPage < 1 || c.ListPage > 10000 {
		return fmt.Errorf("serve: --list-page %d: want 1 to 10000 entries", c.ListPage)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	var certs *pki.Reloader
	if c.TLSCert != "" {
		var err error
		if certs, err = pki.NewReloader(c.TLSCert, c.TLSKey); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	outbound, err := pki.ClientTLS(c.CA)
	if err != nil {
		return fmt.Errorf("serve: --ca: %w", err)
	}
	if c.DataTokenTTL < 1 {
		return fmt.Errorf("serve: --data-token-ttl %g: want at least 1 second", c.DataTokenTTL)
	}
	var batchMax int64 // 0: the server's default
	switch strings.TrimSpace(c.BatchMax) {
	case "":
	case "0":
		batchMax = -1 // off
	default:
		n, err := stork.ParseSize("--batch-max", c.BatchMax)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		batchMax = n
	}
	var batchBDP int64
	if c.BatchBDP != "" {
		n, err := stork.ParseSize("--batch-bdp", c.BatchBDP)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		batchBDP = n
	}
	if c.DataDir == "" {
		c.DataDir = defaultDataDir()
	}
	if c.DB == "" {
		c.DB = filepath.Join(c.DataDir, "sluice.db")
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, c.DB)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer st.Close()
	if c.ServerID == "" && st.Dialect() == "postgres" {
		c.ServerID = defaultServerID(c.Listen)
	}
	srv, err := server.New(ctx, server.Config{
		ServerID: c.ServerID,
		LeaseTTL: time.Duration(c.LeaseTTL * float64(time.Second)), JournalWrites: c.JournalWrites,
		Store: st, Scheduler: c.Scheduler, DataDir: c.DataDir, Logger: log,
		Cycle:            time.Duration(c.CycleSeconds * float64(time.Second)),
		HeartbeatTimeout: time.Duration(c.HeartbeatTimeout * float64(time.Second)),
		DownGiveUp:       time.Duration(c.DownGiveUp * float64(time.Second)),
		DataTokenTTL:     time.Duration(c.DataTokenTTL * float64(time.Second)),
		TotalMaxCC:       c.TotalMaxCC,
		StartupCost:      time.Duration(c.StartupCost * float64(time.Second)),
		Policy:           c.Policy,
		BatchMax:         batchMax,
		BatchBDP:         batchBDP,
		ListPage:         c.ListPage,
		SampleEvery:      time.Duration(c.SampleEvery * float64(time.Second)),
		SampleKeep:       time.Duration(c.SampleKeep * float64(time.Second)),
		Client:           agentClient(outbound),
	})
	if err != nil {
		return err
	}
	// Listen only now: the tokens of a first start are written, so that
	// whoever sees the port open can read them.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer ln.Close()
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	srv.SetURL(scheme + "://" + ln.Addr().String())
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "sluice serve: scheduler %s, store %s (%s), API %s://%s/ (OpenAPI at /openapi.json)\n", srv.Scheduler(), st.Dialect(), redact(c.DB), scheme, ln.Addr())
	if certs == nil {
		fmt.Fprintln(out, "plain HTTP: API and join tokens cross the network unencrypted; for a demo on loopback only (serve HTTPS with --tls-cert and --tls-key: sluice ca init, sluice ca issue HOST)")
	} else {
		ln = tls.NewListener(ln, &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12})
	}
	if st.Dialect() == "postgres" {
		fmt.Fprintf(out, "server ID %s: schedules a share of the endpoints with the other servers on this database\n", srv.Status().Server)
	}
	printTokenFiles(out, c.DataDir, srv.AdminTokenFile, srv.JoinTokenFile)
	hs := apiServer(api.New(srv), log)
	// The loop and the HTTP server each report on their own channel, so
	// that the stop below knows whether the loop has already returned
	// (and must not be waited for again).
	runc := make(chan error, 1)
	go func() { runc <- srv.Run(ctx) }()
	httpc := make(chan error, 1)
	go func() { httpc <- hs.Serve(ln) }()
	return stopServe(ctx, stop, hs, runc, httpc, log, serveStopWait)
}

// serveStopWait is how long a stopping server waits for its loop to stop
// its transfers (their checkpoints then are in the store).
const serveStopWait = 20 * time.Second

// stopServe waits for a signal (ctx ends), the loop's end (runc) or the
// HTTP server's (httpc), then stops the rest and returns the error that
// made it stop: nil only after a signal, so that every fatal error exits
// non-zero, at once, and a supervisor restarts the service or reports it
// (with exit status 0, systemd's Restart=on-failure does neither).
func stopServe(ctx context.Context, stop context.CancelFunc, hs *http.Server, runc, httpc <-chan error, log *slog.Logger, wait time.Duration) error {
	var fatal error
	runDone := false
	select {
	case <-ctx.Done():
	case err := <-runc:
		runDone = true
		fatal = loopError(ctx, err)
		if fatal == nil && ctx.Err() == nil {
			// Run returns nil only once ctx ends: if it has not, this
			// is a bug, but still not a clean stop.
			fatal = errors.New("serve: the scheduling loop stopped")
		}
	case err := <-httpc:
		fatal = fmt.Errorf("serve: API server: %w", err)
	}
	stop() // the loop stops its transfers, if it still runs
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if !runDone {
		// Run returns once the loop has stopped its transfers (their
		// checkpoints are in the store).
		select {
		case err := <-runc:
			if fatal == nil {
				fatal = loopError(ctx, err)
			}
		case <-time.After(wait):
			if fatal == nil {
				fatal = fmt.Errorf("serve: the scheduling loop did not stop its transfers within %s", wait)
			}
		}
	}
	if fatal != nil {
		return fatal
	}
	log.Info("stopped")
	return nil
}

// loopError is the fatal error of the loop's return err: none when the
// loop was stopped by a signal (ctx ended), even halfway through loading
// its state (which then fails with ctx's error).
func loopError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// The API server's connection limits. Every request is timed to its end
// of header; a connection idle between requests is closed after
// apiIdleTimeout. Without one (net/http then falls back on ReadTimeout,
// also unset) a client that sent one request, even an unauthenticated
// GET /healthz, could hold its connection, a goroutine and a file
// descriptor for ever, and enough of them exhaust the server's file
// descriptors. Event streams are requests in progress, not idle: they
// are not cut.
const (
	apiReadHeaderTimeout = 30 * time.Second
	apiIdleTimeout       = 2 * time.Minute
	apiMaxHeaderBytes    = 64 << 10 // tokens are ~50 bytes; 1 MiB (the default) is far more than any client sends
)

// apiServer is the HTTP server of the REST API, the event stream and the
// dashboard.
func apiServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: apiReadHeaderTimeout, IdleTimeout: apiIdleTimeout,
		MaxHeaderBytes: apiMaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// defaultServerID is HOSTNAME-PORT (of --listen): unique per host and
// port, and the same after a restart, so that a restarted server takes its
// partitions back at once.
func defaultServerID(listen string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "sluice"
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		// No fixed port: no stable name either; a restart then waits
		// for its old leases to expire.
		port = fmt.Sprintf("%d", os.Getpid())
	}
	id := h + "-" + port
	var b strings.Builder
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

// redact hides a password in a database URL.
func redact(db string) string {
	if u, err := url.Parse(db); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.Redacted()
		}
	}
	return db
}

// startCPUProfile profiles the process into file until the returned stop.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// printTokenFiles says where the admin and join tokens are: the files a
// first start wrote, or those an earlier start left in the data
// directory. A first start that fails after writing them (its port
// taken, say) never got to say where they are, and the retry, no longer a
// first start, said nothing either; so every start names them while they
// are there.
func printTokenFiles(w io.Writer, dataDir, adminWritten, joinWritten string) {
	for _, f := range []struct{ written, name, first, later string }{
		{adminWritten, "admin.token", "first start: admin API token in %s\n", "admin API token (of the first start) in %s\n"},
		{joinWritten, "join.token", "first start: agents join with the token in %s\n", "agents join with the token in %s\n"},
	} {
		if f.written != "" {
			fmt.Fprintf(w, f.first, f.written)
			continue
		}
		if dataDir == "" {
			continue
		}
		p := filepath.Join(dataDir, f.name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			fmt.Fprintf(w, f.later, p)
		}
	}
}
