// Package testbed owns the emulated multi-DTN testbed: it starts a real
// server and one real agent per endpoint of a profile, each agent with the
// emulation layer of package emul on its data path (the endpoint's
// capacity, a per-connection cap, the contention knee, external load,
// connection start-up), replays a scaled trace through the live REST API,
// verifies every file, and measures what the simulator measures, so that
// SEAL and STEAL are judged on real bytes and the simulator is judged
// against them (Predict runs the simulator on the same profile and trace).
//
// A profile is a simulator testbed (sim.Testbed JSON, in sim/testbeds/)
// with a "replay" section: how traces are scaled down (sizes and time)
// and the emulated start-up latency. The same file drives the simulator,
// so a prediction and a measurement describe one system.
package testbed

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/trace"
	"github.com/sluice-dtn/sluice/wan"
	"github.com/sluice-dtn/sluice/wire"
)

// Load returns a profile: a built-in testbed name (sc15-mini, xsede-sg) or
// a JSON file, which must have a replay section.
func Load(nameOrPath string) (*sim.Testbed, error) {
	tb, err := sim.LoadTestbed(nameOrPath)
	if err != nil {
		return nil, err
	}
	if tb.Replay == nil {
		return nil, fmt.Errorf("testbed %s has no replay section: not a profile for real-bytes runs (try sc15-mini or xsede-sg)", nameOrPath)
	}
	return tb, nil
}

// Trace returns the named trace scaled for the profile: "smoke" (a two
// minute trace at 45% load, for CI), the SC'15 names (25, 45, 60, 45-4x,
// 60-hv), or a load ("0.3"); a "+batch" suffix adds SC'15 §6.4's 50 GB
// batch transfers at the start (60-hv has them already). It is generated at the full-scale capacity
// the profile stands for (its source capacity divided by size_scale ×
// time_scale), then sizes are multiplied by size_scale and arrivals
// divided by time_scale: every transfer keeps its share of the source,
// and the run takes 1/time_scale of the trace's time.
func Trace(tb *sim.Testbed, name string, seed int64) (*trace.Trace, error) {
	r := tb.Replay
	full := sim.Gbps(tb.Endpoint(tb.Source).CapacityGbps) / (r.SizeScale * r.TimeScale)
	spec := trace.GenSpec{Minutes: 15, Seed: seed, Source: tb.Source, Destinations: tb.Destinations(), SourceCapacity: full}
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), "%")
	n, withBatch := strings.CutSuffix(n, "+batch")
	switch n {
	case "smoke":
		spec.Load, spec.Minutes = 0.45, 2
	case "25", "45", "60":
		fmt.Sscanf(n, "%g", &spec.Load)
		spec.Load /= 100
	case "45-4x":
		spec.Load, spec.Variant = 0.45, "4x"
	case "60-hv":
		spec.Load, spec.Variant = 0.60, "hv"
	default:
		if _, err := fmt.Sscanf(n, "%g", &spec.Load); err != nil || spec.Load <= 0 {
			return nil, fmt.Errorf("trace %q: want smoke, 25, 45, 60, 45-4x, 60-hv or a load such as 0.3", name)
		}
		if spec.Load > 2 {
			spec.Load /= 100
		}
	}
	tr, err := trace.Generate(spec)
	if err != nil {
		return nil, err
	}
	if withBatch || spec.Variant == "hv" {
		// §6.4: 50 GB batch tasks that fill the capacity the
		// interactive load leaves, arriving at the start.
		if err := trace.AddBatch(tr, trace.BatchCountFor(spec.Load, full), sim.BatchSize, tb.Source, tb.Destinations(), 0, seed); err != nil {
			return nil, err
		}
	}
	out := &trace.Trace{Name: name}
	for _, x := range tr.Transfers {
		x.Arrival /= r.TimeScale
		x.Size = max(1, int64(math.Round(float64(x.Size)*r.SizeScale)))
		out.Transfers = append(out.Transfers, x)
	}
	return out, nil
}

// Options tunes a replay.
type Options struct {
	// Scheduler is the live service's scheduler (sched.Names).
	Scheduler string
	// Dir holds the run's files (default: a temporary directory, removed
	// afterwards).
	Dir string
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Timeout bounds the run after the last arrival (default 10 minutes).
	Timeout time.Duration
	// Net, if set, carries the data over an emulated wide-area network
	// instead of loopback (see Up).
	Net *wan.Net
}

// Run is what a replay measured.
type Run struct {
	Result   *sim.Result `json:"result"`
	Files    int         `json:"files"`
	Verified int         `json:"verified"` // files done with an end-to-end checksum
	Bytes    int64       `json:"bytes"`
	Seconds  float64     `json:"seconds"` // wall time from the first arrival to the last completion
	// StartupCost is the start-up cost the server told its scheduler, s.
	StartupCost float64 `json:"startup_cost_seconds"`
	// Endpoints is each endpoint's aggregate throughput as the server
	// observed it, sampled every second of the run.
	Endpoints []EndpointSeries `json:"endpoint_series,omitempty"`
	// Network is what the emulated WAN carried during the run (Options.Net).
	Network *NetUse `json:"network,omitempty"`
}

// NetUse is what an emulated WAN's forwarder counted during a run.
type NetUse struct {
	Profile string `json:"profile"`
	// Bytes crossed every link, both directions (data, acknowledgements
	// and control), IP packets' bytes.
	Bytes uint64 `json:"bytes"`
	// Lost segments by cause: the paths' random loss, and full queues
	// (a path's, a NIC's egress or ingress).
	RandomDrops uint64 `json:"random_drops"`
	QueueDrops  uint64 `json:"queue_drops"`
	// ForwarderCPU is the forwarder's CPU time, s.
	ForwarderCPU float64 `json:"forwarder_cpu_seconds"`
}

// netUse is the difference of two readings of a network's counters
// (of one network, so its links come in the same order).
func netUse(before, after *wan.Status) *NetUse {
	u := &NetUse{Profile: after.Profile, ForwarderCPU: after.CPUSeconds - before.CPUSeconds}
	for i, l := range after.Links {
		var b wan.LinkStatus
		if i < len(before.Links) {
			b = before.Links[i]
		}
		u.Bytes += l.Bytes - b.Bytes
		u.RandomDrops += l.RandomDrops + l.BurstDrops - b.RandomDrops - b.BurstDrops
		u.QueueDrops += l.QueueDrops + l.EgressDrops + l.IngressDrops - b.QueueDrops - b.EgressDrops - b.IngressDrops
	}
	return u
}

// EndpointSeries is one endpoint's observed throughput over a run: T[i]
// seconds after the first arrival it moved Bps[i] bytes/s with CC[i]
// partial transfers.
type EndpointSeries struct {
	Name string    `json:"name"`
	T    []float64 `json:"t"`
	Bps  []float64 `json:"bps"`
	CC   []int     `json:"cc"`
}

// sampleEndpoints records every endpoint's observed throughput each second
// until ctx ends, and returns the series (by endpoint name, sorted).
func sampleEndpoints(ctx context.Context, c *Cluster, start time.Time) func() []EndpointSeries {
	byName := map[string]*EndpointSeries{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				es, err := c.Admin.Endpoints(ctx)
				if err != nil {
					continue // a sample missed; the run goes on
				}
				for _, e := range es {
					s := byName[e.Name]
					if s == nil {
						s = &EndpointSeries{Name: e.Name}
						byName[e.Name] = s
					}
					s.T = append(s.T, now.Sub(start).Seconds())
					s.Bps = append(s.Bps, e.Throughput)
					s.CC = append(s.CC, e.CC)
				}
			}
		}
	}()
	return func() []EndpointSeries {
		<-done
		out := make([]EndpointSeries, 0, len(byName))
		for _, s := range byName {
			out = append(out, *s)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
}

// Replay starts the profile's server and agents, replays tr through the
// API in real time, waits for every transfer, and measures.
func Replay(ctx context.Context, tb *sim.Testbed, tr *trace.Trace, o Options) (*Run, error) {
	if _, err := sched.New(o.Scheduler, sched.Options{}); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	logf := logger(o.Log)
	dir, cleanup, err := workDir(o.Dir, "sluice-testbed-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := Up(ctx, tb, dir, o.Scheduler, nil, o.Net)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	logf("testbed %s up: server %s, %d agents; creating source files", tb.Name, c.URL, len(c.Agents))
	var total int64
	for _, x := range tr.Transfers {
		if err := makeFile(filepath.Join(c.Roots[x.Src], "t", fmt.Sprint(x.ID)), x.Size, x.ID); err != nil {
			return nil, err
		}
		total += x.Size
	}
	logf("replaying %d transfers (%.2f GB) under %s", len(tr.Transfers), float64(total)/1e9, o.Scheduler)
	jobs := make(map[int64]trace.Transfer, len(tr.Transfers))
	submitted := make(map[int64]time.Time, len(tr.Transfers))
	var netBefore *wan.Status
	if o.Net != nil {
		if netBefore, err = o.Net.Status(ctx); err != nil {
			return nil, fmt.Errorf("testbed: reading the network's counters: %w", err)
		}
	}
	start := time.Now()
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	series := sampleEndpoints(sctx, c, start)
	for _, x := range tr.Transfers {
		if d := time.Until(start.Add(time.Duration(x.Arrival * float64(time.Second)))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		size := x.Size
		in := api.JobIn{Files: []api.FileIn{{
			Source:      fmt.Sprintf("sluice://%s/t/%d", x.Src, x.ID),
			Destination: fmt.Sprintf("sluice://%s/t/%d", x.Dst, x.ID),
			Size:        &size,
		}}, Label: fmt.Sprintf("trace %s transfer %d", tr.Name, x.ID)}
		if x.Batch {
			in.Class = store.ClassBatch
		}
		at := time.Now()
		j, _, err := c.Admin.Submit(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("submitting transfer %d: %w", x.ID, err)
		}
		jobs[j.ID] = x
		submitted[j.ID] = at
	}
	logf("all %d transfers submitted after %.1f s; waiting", len(jobs), time.Since(start).Seconds())
	deadline := time.Now().Add(o.Timeout)
	last := time.Now()
	for {
		active, err := c.Admin.Jobs(ctx, store.StateActive, 1)
		if err != nil {
			return nil, err
		}
		if len(active) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("transfers still running %s after the last arrival", o.Timeout)
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			logf("  %.0f s: still running", time.Since(start).Seconds())
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	stopSampling()
	run := &Run{Files: len(jobs), Bytes: total, StartupCost: ServerStartupCost(tb).Seconds(), Endpoints: series()}
	if o.Net != nil {
		after, err := o.Net.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("testbed: reading the network's counters: %w", err)
		}
		run.Network = netUse(netBefore, after)
		// Every byte must have crossed the network: a transfer that
		// found a shorter way (loopback) would measure nothing.
		if run.Network.Bytes < uint64(total) {
			return run, fmt.Errorf("testbed: the network carried %d bytes, fewer than the %d transferred: the data did not cross it", run.Network.Bytes, total)
		}
	}
	var tasks []sim.TaskResult
	startup := tb.Replay.StartupSeconds
	ids := make([]int64, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var failed []string
	for _, id := range ids {
		x := jobs[id]
		fs, err := c.Admin.Files(ctx, id, 0, 1)
		if err != nil {
			return nil, err
		}
		if len(fs) != 1 {
			return nil, fmt.Errorf("job %d has %d files", id, len(fs))
		}
		f := fs[0]
		if f.State != store.StateDone {
			failed = append(failed, fmt.Sprintf("transfer %d: %s %s", x.ID, f.State, f.Error))
			continue
		}
		fi, err := os.Stat(filepath.Join(c.Roots[x.Dst], "t", fmt.Sprint(x.ID)))
		if err != nil || fi.Size() != x.Size || f.Checksum == "" {
			failed = append(failed, fmt.Sprintf("transfer %d: destination missing, of the wrong size or unverified", x.ID))
			continue
		}
		run.Verified++
		arr := submitted[id].Sub(start).Seconds()
		fin := f.Finished.Sub(start).Seconds()
		t := sim.TaskResult{ID: x.ID, Size: x.Size, Batch: x.Batch, Arrival: arr, Finish: fin,
			Wait: f.Wait, Run: f.Transfer, IdealTT: tb.IdealTT(x.Src, x.Dst, x.Size, startup),
			Turnaround: fin - arr, Preempted: f.Preemptions}
		t.Slowdown = sim.BoundedSlowdown(t.Wait, t.Run, t.IdealTT, bound(tb))
		tasks = append(tasks, t)
		run.Seconds = math.Max(run.Seconds, fin)
	}
	if len(failed) > 0 {
		return run, fmt.Errorf("%d of %d transfers not verified: %s", len(failed), len(jobs), strings.Join(failed[:min(5, len(failed))], "; "))
	}
	run.Result = sim.Summarize(tb.Name, tr.Name, o.Scheduler, tasks, tb.Replay.SizeScale)
	logf("done: %d files verified in %.1f s", run.Verified, run.Seconds)
	return run, nil
}

// Predict runs the simulator on the same profile and trace: what the
// simulator says the replay will measure. It is a prediction of the live
// service, so the simulator shows the scheduler the world as the service
// does (sim.Options.Live: rates from the engine's meter read at ticks,
// tasks pending until their first sub-write, victims paused at once, the
// model fed by completions, the service's stated start-up cost), not the
// paper's idealised view that `sluice sim` keeps.
func Predict(tb *sim.Testbed, tr *trace.Trace, scheduler string) (*sim.Result, error) {
	return PredictTold(tb, tr, scheduler, ServerStartupCost(tb))
}

// PredictTold is Predict for a server that told its scheduler the given
// start-up cost (runs recorded by an earlier version of Up, which always
// told it the server's default).
func PredictTold(tb *sim.Testbed, tr *trace.Trace, scheduler string, told time.Duration) (*sim.Result, error) {
	s, err := sched.New(scheduler, sched.Options{})
	if err != nil {
		return nil, err
	}
	live := sim.LiveDefaults()
	live.StartupCost = told.Seconds()
	opt := sim.Options{Startup: tb.Replay.StartupSeconds, NoStartup: tb.Replay.StartupSeconds == 0, Cycle: cycle(tb).Seconds(), Live: live}
	r, err := sim.Run(tb, tr, s, opt)
	if err != nil {
		return nil, err
	}
	for i := range r.Tasks {
		t := &r.Tasks[i]
		t.Slowdown = sim.BoundedSlowdown(t.Wait, t.Run, t.IdealTT, bound(tb))
	}
	out := sim.Summarize(tb.Name, tr.Name, scheduler, r.Tasks, tb.Replay.SizeScale)
	out.Starts, out.Resizes, out.SpareUsed, out.Window = r.Starts, r.Resizes, r.SpareUsed, r.Window
	return out, nil
}

// cycle is the scheduling period in replay time.
func cycle(tb *sim.Testbed) time.Duration {
	if tb.Replay == nil {
		return server.DefaultCycle
	}
	return time.Duration(float64(server.DefaultCycle) / tb.Replay.TimeScale)
}

// bound is the slowdown's interactive threshold in replay time: SC'15's
// one second of the trace, compressed with it.
func bound(tb *sim.Testbed) float64 { return sim.Bound / tb.Replay.TimeScale }

// ServerStartupCost is the start-up cost the testbed's server tells its
// scheduler: the profile's emulated connection start-up, which an
// operator would measure on their paths (the server's default when the
// profile has none).
func ServerStartupCost(tb *sim.Testbed) time.Duration {
	if tb.Replay == nil || tb.Replay.StartupSeconds <= 0 {
		return server.DefaultStartupCost
	}
	return time.Duration(tb.Replay.StartupSeconds * float64(time.Second))
}

// Cluster is a running testbed: a server and its agents in this process,
// talking over HTTP as separate hosts would (over loopback, or between
// the hosts of an emulated WAN).
type Cluster struct {
	URL        string            // the server's API
	AdminToken string            // an admin API token
	Admin      *client.Client    // a client with it
	Roots      map[string]string // each endpoint's directory
	Agents     map[string]string // each endpoint's agent URL
	Keys       map[string][]byte // each agent's data-token key
	DataDir    string

	net   *wan.Net // nil: loopback
	stop  context.CancelFunc
	wg    sync.WaitGroup
	st    store.Store
	close sync.Once
	// done is closed when the server's loop has returned, with runErr
	// its error.
	done   chan struct{}
	runErr error
}

// Done is closed when the server has stopped: after Close, or on its own
// after a fatal error (Err).
func (c *Cluster) Done() <-chan struct{} { return c.done }

// Err is the error the server stopped with, once Done is closed (nil
// after Close).
func (c *Cluster) Err() error {
	select {
	case <-c.done:
		return c.runErr
	default:
		return nil
	}
}

// Up starts the server (SQLite in dir) and one agent per endpoint of tb.
// Logs go to logw (nil: discarded).
//
// With n nil the agents listen on loopback and package emul shapes their
// data path as the profile says. With n, each endpoint is the host of
// the same name in the emulated WAN: its agent listens on the host's
// address and pulls from the others across the network, from inside the
// host, and nothing is emulated in the agent (kernel TCP over the
// network's paths decides every rate). The server stays beside the
// network and reaches each agent inside its host (wan.Net.DialInto), so
// the control plane loads no path, as on loopback.
func Up(ctx context.Context, tb *sim.Testbed, dir, scheduler string, logw io.Writer, n *wan.Net) (*Cluster, error) {
	log := slog.New(slog.DiscardHandler)
	if logw != nil {
		log = slog.New(slog.NewTextHandler(logw, nil))
	}
	ctx, stop := context.WithCancel(ctx)
	c := &Cluster{Roots: map[string]string{}, Agents: map[string]string{}, Keys: map[string][]byte{}, DataDir: filepath.Join(dir, "server"), stop: stop,
		done: make(chan struct{}), net: n}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	if n != nil {
		for _, e := range tb.Endpoints {
			if !n.Addr(e.Name).IsValid() {
				return fail(fmt.Errorf("testbed: endpoint %s of %s is no host of network %s", e.Name, tb.Name, n.Profile.Name))
			}
		}
	}
	st, err := store.Open(ctx, filepath.Join(c.DataDir, "sluice.db"))
	if err != nil {
		return fail(err)
	}
	c.st = st
	var srvClient *http.Client // nil: the server's default
	if n != nil {
		t := sluice.NewTransport()
		t.DialContext = n.DialInto
		srvClient = &http.Client{Transport: t}
	}
	srv, err := server.New(ctx, server.Config{
		Client: srvClient,
		Store:  st, Scheduler: scheduler, DataDir: c.DataDir, Logger: log,
		TotalMaxCC: tb.TotalMaxCC,
		// SC'15's 0.5 s cycle, compressed with the trace.
		Cycle: cycle(tb),
		// The history an operator would bring (SC'15 §4.2): the profile's
		// own model, as the simulator's estimator starts from.
		Estimator: sim.Train(tb),
		// The operator knows the cost of a start on these paths: the
		// emulation's connection start-up.
		StartupCost: ServerStartupCost(tb),
		// Every file is its own transfer, as in the SC'15 testbed
		// (GridFTP without pipelining) and in the simulator, whose
		// predictions are checked against these runs: pull batches
		// (the service's default for small files) would share
		// connections the simulator gives each file.
		BatchMax: -1,
	})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: api.New(srv), ReadHeaderTimeout: 30 * time.Second}
	c.URL = "http://" + ln.Addr().String()
	c.wg.Add(2)
	go func() { defer c.wg.Done(); hs.Serve(ln) }()
	go func() {
		defer c.wg.Done()
		c.runErr = srv.Run(ctx)
		close(c.done)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	tok, err := os.ReadFile(filepath.Join(c.DataDir, "admin.token"))
	if err != nil {
		return fail(fmt.Errorf("testbed: the server wrote no admin token: %w", err))
	}
	c.AdminToken = strings.TrimSpace(string(tok))
	if c.Admin, err = client.New(c.URL, c.AdminToken, nil); err != nil {
		return fail(err)
	}
	jt, err := os.ReadFile(filepath.Join(c.DataDir, "join.token"))
	if err != nil {
		return fail(fmt.Errorf("testbed: the server wrote no join token: %w", err))
	}
	join := strings.TrimSpace(string(jt))
	for _, e := range tb.Endpoints {
		root := filepath.Join(dir, "dtn", e.Name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			return fail(err)
		}
		var aln net.Listener
		var pullClient *http.Client // nil: the agent's default
		var em *emul.Config
		if n == nil {
			aln, err = net.Listen("tcp", "127.0.0.1:0")
			cfg := Emulation(tb, e.Name)
			em = &cfg
		} else if aln, err = n.Listen(e.Name, 0); err == nil {
			pullClient, err = hostClient(n, e.Name)
		}
		if err != nil {
			if aln != nil {
				aln.Close()
			}
			return fail(err)
		}
		// The agent joins as `sluice agent` does: over the API, with
		// the agent's own join and heartbeat loop.
		j := &agent.Joiner{Servers: []string{c.URL}, Token: join, Log: log,
			Info: wire.AgentIn{Name: e.Name, URL: "http://" + aln.Addr().String(), MaxThroughput: sim.Gbps(e.CapacityGbps), MaxCC: e.MaxCC}}
		joined, err := j.Join(ctx)
		if err != nil {
			aln.Close()
			return fail(err)
		}
		a, err := agent.New(agent.Config{Name: e.Name, Root: root, Key: joined.Key, Logger: log, Emulation: em, Client: pullClient})
		if err != nil {
			aln.Close()
			return fail(err)
		}
		j.SetHealth(a.Check)
		c.Roots[e.Name], c.Agents[e.Name], c.Keys[e.Name] = root, j.Info.URL, joined.Key
		c.wg.Add(2)
		go func() { defer c.wg.Done(); defer a.Close(); a.Serve(ctx, aln, "", "") }()
		go func() {
			defer c.wg.Done()
			j.Heartbeats(ctx, time.Duration(joined.HeartbeatSeconds*float64(time.Second)))
		}()
	}
	// Ready when the scheduler sees every endpoint up.
	for i := 0; i < 100; i++ {
		es, err := c.Admin.Endpoints(ctx)
		up := 0
		for _, e := range es {
			if e.Up {
				up++
			}
		}
		if err == nil && up == len(tb.Endpoints) {
			return c, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fail(errors.New("testbed: the agents did not come up"))
}

// hostClient is an agent's client for pulls inside host: it dials from
// the host's namespace. Its transport is wrapped so that the agent keeps
// this dialling (an agent replaces an *http.Transport's dialler with its
// own checks of pull sources).
func hostClient(n *wan.Net, host string) (*http.Client, error) {
	dial, err := n.DialFrom(host)
	if err != nil {
		return nil, err
	}
	t := sluice.NewTransport()
	t.ReadBufferSize, t.WriteBufferSize = 64<<10, 64<<10
	t.DialContext = dial
	return &http.Client{Transport: hostTransport{t}}, nil
}

type hostTransport struct{ *http.Transport }

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return h.Transport.RoundTrip(r)
}

// Close stops the server and the agents.
func (c *Cluster) Close() {
	c.close.Do(func() {
		c.stop()
		c.wg.Wait()
		if c.st != nil {
			c.st.Close()
		}
	})
}

// Emulation is the emul configuration of one endpoint of a profile: its
// capacity, knee and external load as the simulator models them, the
// profile's per-connection cap and start-up latency.
func Emulation(tb *sim.Testbed, name string) emul.Config {
	e := tb.Endpoint(name)
	cfg := emul.Config{
		CapacityBps: sim.Gbps(e.CapacityGbps), ConnBps: sim.Gbps(tb.ConnGbps),
		Knee: e.Knee, Decline: e.Decline,
	}
	if e.ConnGbps > 0 {
		cfg.ConnBps = sim.Gbps(e.ConnGbps)
	}
	if tb.Replay != nil {
		cfg.StartupMs = tb.Replay.StartupSeconds * 1000
	}
	for _, s := range e.ExternalLoad {
		cfg.External = append(cfg.External, emul.Step{At: s.At, Fraction: s.Fraction})
	}
	return cfg
}

// logger returns a printf to w, one line per call (nil: discards).
func logger(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", a...)
		}
	}
}

// workDir returns dir, or a new temporary directory named after prefix and
// a function that removes it (a no-op for a given dir).
func workDir(dir, prefix string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// makeFile writes size bytes that differ between files (so that a mix-up
// fails verification) without paying for random generation per byte: a
// random block, stamped with the file's id at every block.
func makeFile(name string, size, id int64) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	block := make([]byte, 1<<20)
	rand.Read(block)
	for off := int64(0); off < size; off += int64(len(block)) {
		n := min(int64(len(block)), size-off)
		copy(block, fmt.Sprintf("%d@%d;", id, off))
		if _, err := f.Write(block[:n]); err != nil {
			f.Close()
			return fmt.Errorf("testbed: creating %s: %w", name, err)
		}
	}
	return f.Close()
}
