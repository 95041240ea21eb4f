package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/linkmon"
	"github.com/sluice-dtn/sluice/multisrc"
)

// The multi-source evaluation of Yang, Schopf, Foster, "Improving Parallel
// Data Transfer Times Using Predicted Variances in Shared Networks", §5 on
// real bytes: three emulated replicas whose bandwidth varies over time with
// the mean and standard deviation of the paper's Table 1 (scaled to this
// machine), one destination (this process, as the paper's client machine), a
// link monitor sampling all three all along, and the policies alternated run
// by run so that adjacent runs see similar conditions (§5.1).

// MultiLink is one replica's link: bandwidth mean and SD in Mb/s as the
// paper's Table 1 gives them.
type MultiLink struct {
	Name     string  `json:"name"`
	MeanMbps float64 `json:"mean_mbps"`
	SDMbps   float64 `json:"sd_mbps"`
}

// MultiConfig is one of the paper's configurations.
type MultiConfig struct {
	Name   string
	Links  []MultiLink
	DataMB float64 // the paper's file size, MB
}

// MultiConfigs are Table 1's four configurations.
var MultiConfigs = map[string]MultiConfig{
	"fig3": {Name: "fig3", DataMB: 200, Links: []MultiLink{
		{"cirque.ucsd.edu", 3.51, 1.44}, {"nouba.ucsd.edu", 51.02, 23.79}, {"dralion.ucsd.edu", 19.43, 12.76}}},
	"fig4": {Name: "fig4", DataMB: 200, Links: []MultiLink{
		{"torc1.cs.utk.edu", 1.51, 0.04}, {"nouba.ucsd.edu", 47.77, 15.77}, {"dralion.ucsd.edu", 39.75, 12.98}}},
	"fig5": {Name: "fig5", DataMB: 150, Links: []MultiLink{
		{"torc1.cs.utk.edu", 1.54, 0.025}, {"mssc01.cs.utk.edu", 1.70, 0.032}, {"dralion.ucsd.edu", 48.99, 11.59}}},
	"fig6": {Name: "fig6", DataMB: 100, Links: []MultiLink{
		{"torc1.cs.utk.edu", 1.56, 0.051}, {"mssc01.cs.utk.edu", 1.72, 0.012}, {"mckinley.cs.uh.edu", 2.71, 0.174}}},
}

// MultiConfigNames lists them in order.
var MultiConfigNames = []string{"fig3", "fig4", "fig5", "fig6"}

// Scaling: a Mb/s of the paper is BWScale bytes/s here (4 × 125 kB/s:
// the links four times as fast) and a MB of data DataScale bytes (an
// eighth), so a run takes 1/32 of the paper's time: two seconds rather
// than a minute. The bandwidth varies every StepSeconds (the paper's NWS
// sampled every 10 s; a thirty-second of it is 0.3 s) as an AR(1) process
// with Persistence per step, so the recent past says something about the
// next seconds, as on a shared network, without repeating it.
const (
	BWScale     = 4 * 125e3
	DataScale   = 1e6 / 8
	StepSeconds = 0.25
	Persistence = 0.9
)

// MultiOptions tunes a run of an evaluation.
type MultiOptions struct {
	Runs     int      // run groups (one run of each policy each); default 30
	Policies []string // default: copyjob.SplitNames()
	Seed     uint64
	Dir      string
	Log      io.Writer
	// Warmup is how long the monitor samples before the first run
	// (default 10 s).
	Warmup time.Duration
	// SameLinks runs every policy of a group against the same stretch of
	// the links (common random numbers) instead of one after another on
	// a link that keeps varying: at the start of a group the monitor's
	// history is frozen and every emulated link's clock noted; before
	// each policy's run the links are rewound to that clock, and the
	// plan is made from the frozen history. So the policies of a group
	// differ only by how they split the file, and their differences are
	// measured free of the links' run-to-run variation (the paper, on
	// real networks, could only alternate). After the group the links
	// go on from where the longest run left them, the replays are taken
	// out of the monitor's history, and it samples for Settle (default
	// 2 s) before the next group. The monitor does not probe during a
	// group's runs (its history is frozen then), so no probe shares a
	// link with a timed transfer.
	SameLinks bool
	Settle    time.Duration
	// Traces, if set, is a directory of measured bandwidth series (see
	// LoadLinkTraces): each link plays its series, scaled to its Table 1
	// mean, instead of the AR(1) process.
	Traces string
	// Drift changes the slow links' level (below SlowMbps) every
	// Drift.Block seconds; with Traces only. Zero: none.
	Drift Drift
}

// MultiRun is one transfer.
type MultiRun struct {
	Group     int                `json:"group"`
	Policy    string             `json:"policy"`
	Seconds   float64            `json:"seconds"`
	Predicted float64            `json:"predicted_s"`
	Links     []copyjob.LinkPlan `json:"links"`
	Note      string             `json:"note,omitempty"`
}

// MultiResult is an evaluation: every run, and per policy the paper's
// Table 2 (mean and SD of transfer time), Table 3 (Compare counts over the
// paper's five policies) and Tables 4-5 (one-tailed paired and unpaired t
// tests of TCS against each other policy, p-values).
type MultiResult struct {
	Config    string                `json:"config"`
	Bytes     int64                 `json:"bytes"`
	Policies  []string              `json:"policies"`
	Runs      []MultiRun            `json:"runs"`
	Mean      map[string]float64    `json:"mean_s"`
	SD        map[string]float64    `json:"sd_s"`
	Compare   map[string][]int      `json:"compare"` // best, good, avg, poor, worst among the paper's five
	Paired    map[string]float64    `json:"paired_p"`
	Unpaired  map[string]float64    `json:"unpaired_p"`
	Samples   map[string][2]int     `json:"monitor_samples"` // probes, passive per link
	Links     []MultiLink           `json:"links"`
	SameLinks bool                  `json:"same_links,omitempty"`
	Measured  map[string][2]float64 `json:"measured_link_mbps"` // mean and SD of each link's monitor series, paper Mb/s
	// Traces are the measured series the links played (empty: AR(1)),
	// SeriesSeconds how long each link's lasts before it repeats, Drift
	// the slow links' drift.
	Traces        []LinkTrace `json:"traces,omitempty"`
	SeriesSeconds []float64   `json:"series_seconds,omitempty"`
	Drift         *Drift      `json:"drift,omitempty"`
	// GroupClocks are, with SameLinks, every link's clock (seconds into
	// its series) at each group's start: the stretch all the group's runs
	// met.
	GroupClocks [][]float64 `json:"group_clocks,omitempty"`
	// Intervals are bootstrap intervals over the run groups and the
	// acceptance criteria judged on them (see ComputeIntervals).
	Intervals *MultiIntervals `json:"intervals,omitempty"`
}

// The bootstrap intervals of an evaluation: 90%, from 10000 resamples of
// the run groups.
const (
	IntervalLevel     = 0.9
	IntervalResamples = 10000
)

// paperFive are the policies of the paper's Tables 2-5.
var paperFive = []string{"bos", "eas", "ms", "ntss", "tcs"}

// linkSeries is the emulated bandwidth of one link, bytes/s, every
// StepSeconds for d seconds: an AR(1) around the mean with the SD, held
// within [5% of the mean, the mean + 4 SD] (the emulation's capacity).
func linkSeries(l MultiLink, d float64, rng *rand.Rand) (capacity float64, steps []emul.Step) {
	mean, sd := l.MeanMbps*BWScale, l.SDMbps*BWScale
	capacity = mean + 4*sd
	z := rng.NormFloat64()
	for at := 0.0; at < d; at += StepSeconds {
		x := math.Min(capacity, math.Max(0.05*mean, mean+sd*z))
		steps = append(steps, emul.Step{At: at, Fraction: math.Min(0.999, 1-x/capacity)})
		z = Persistence*z + math.Sqrt(1-Persistence*Persistence)*rng.NormFloat64()
	}
	return capacity, steps
}

// RunMultiSource runs one configuration: Runs groups of one transfer per
// policy, alternated.
func RunMultiSource(ctx context.Context, cfg MultiConfig, o MultiOptions) (*MultiResult, error) {
	if o.Runs <= 0 {
		o.Runs = 30
	}
	if len(o.Policies) == 0 {
		o.Policies = copyjob.SplitNames()
	}
	if o.Warmup <= 0 {
		o.Warmup = 10 * time.Second
	}
	logf := logger(o.Log)
	dir, cleanup, err := workDir(o.Dir, "sluice-multisource-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	size := int64(cfg.DataMB * DataScale)
	key := make([]byte, 32)
	rng := rand.New(rand.NewPCG(o.Seed, 2))
	for i := range key {
		key[i] = byte(rng.Uint32())
	}
	tok, err := auth.Mint(key, auth.Claims{Sub: "multisource", Scope: auth.ScopeRead, Prefix: "/", Aud: auth.AnyAudience, Exp: time.Now().Add(24 * time.Hour).Unix()})
	if err != nil {
		return nil, err
	}
	// Long enough a bandwidth series for every run at the slowest
	// policy's pace, with room to spare.
	var slowest float64 = math.Inf(1)
	for _, l := range cfg.Links {
		slowest = math.Min(slowest, l.MeanMbps*BWScale)
	}
	horizon := o.Warmup.Seconds() + float64(o.Runs*len(o.Policies))*(float64(size)/(3*slowest)+2) + 600
	var traces []LinkTrace
	if o.Traces != "" {
		if traces, err = LoadLinkTraces(o.Traces, cfg); err != nil {
			return nil, err
		}
	} else if o.Drift.SD > 0 {
		return nil, errors.New("multisource: slow-link drift applies to measured series (Traces) only")
	}
	hc := &http.Client{Transport: sluice.NewTransport()}
	backends := all.Registry()
	var srcs []copyjob.Endpoint
	var links []linkmon.Link
	var shapers []*emul.Shaper
	var wg sync.WaitGroup
	// The agents and the monitor stop with ctx; cancel before waiting.
	defer func() { cancel(); wg.Wait() }()
	for i, l := range cfg.Links {
		// Replicas: one file, linked into every source's root.
		root := filepath.Join(dir, fmt.Sprintf("src%d", i))
		orig := filepath.Join(dir, "src0", "data.bin")
		if i == 0 {
			if err := makeFile(orig, size, 7); err != nil {
				return nil, err
			}
		} else if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		} else if err := os.Link(orig, filepath.Join(root, "data.bin")); err != nil {
			return nil, fmt.Errorf("multisource: making replica %d: %w", i, err)
		}
		var capacity float64
		var steps []emul.Step
		if traces != nil {
			capacity, steps = traceSteps(traces[i].Mbps, horizon, l.MeanMbps < SlowMbps, o.Drift, i)
		} else {
			capacity, steps = linkSeries(l, horizon, rand.New(rand.NewPCG(o.Seed, uint64(100+i))))
		}
		em := emul.Config{CapacityBps: capacity, External: steps}
		a, err := agent.New(agent.Config{Name: fmt.Sprintf("src%d", i), Root: root, Key: key, Emulation: &em})
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		shapers = append(shapers, a.Shaper())
		wg.Go(func() { defer a.Close(); a.Serve(ctx, ln, "", "") })
		ep, _, err := copyjob.Open(ctx, backends, "sluice://"+ln.Addr().String()+"/data.bin", backend.OpenOptions{HTTPClient: hc, Tokens: fixedToken(tok)})
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, ep)
		links = append(links, linkmon.Link{Name: l.Name, Backend: ep.Backend, Path: ep.Path, Size: size})
	}
	dstDir := filepath.Join(dir, "dst")
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		return nil, err
	}
	dst, closeDst, err := copyjob.Open(ctx, backends, "file://"+filepath.Join(dstDir, "data.bin"), backend.OpenOptions{Write: true})
	if err != nil {
		return nil, err
	}
	defer closeDst()
	// 256 KiB probes, the first 128 KiB (the emulation's burst) untimed:
	// short enough for the slowest link (0.75 MB/s) to answer within a
	// sampling period.
	mon := linkmon.New(links, linkmon.Options{Hz: 4, ProbeBytes: 256 << 10, SkipBytes: 128 << 10, Seed: o.Seed})
	wg.Go(func() { mon.Run(ctx) })
	logf("%s: %d replicas of %.1f MB; monitoring for %s", cfg.Name, len(srcs), float64(size)/1e6, o.Warmup)
	select {
	case <-time.After(o.Warmup):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	if o.Settle <= 0 {
		o.Settle = 2 * time.Second
	}
	res := &MultiResult{Config: cfg.Name, Bytes: size, Policies: o.Policies, Links: cfg.Links, SameLinks: o.SameLinks, Traces: traces}
	for _, t := range traces {
		res.SeriesSeconds = append(res.SeriesSeconds, float64(len(t.Mbps))*StepSeconds)
	}
	if o.Drift.SD > 0 {
		d := o.Drift
		res.Drift = &d
	}
	for g := range o.Runs {
		var snap *linkmon.Snapshot
		var clocks, ends []float64
		if o.SameLinks {
			snap = mon.Snapshot()
			for _, sh := range shapers {
				c := sh.Clock()
				clocks, ends = append(clocks, c), append(ends, c)
			}
			res.GroupClocks = append(res.GroupClocks, append([]float64(nil), clocks...))
		}
		for _, p := range o.Policies {
			os.Remove(filepath.Join(dstDir, "data.bin"))
			mo := copyjob.MultiOptions{Split: p, Monitor: mon, JournalDir: filepath.Join(dir, "journal"),
				SubWrite: 256 << 10, ChunkMin: 1 << 20}
			if o.SameLinks {
				mo.History = snap
				mon.Pause()
				for i, sh := range shapers {
					sh.Rewind(clocks[i])
				}
			}
			rep, err := copyjob.RunMulti(ctx, srcs, dst, mo)
			if err != nil {
				return nil, fmt.Errorf("%s run %d %s: %w", cfg.Name, g, p, err)
			}
			if o.SameLinks {
				for i, sh := range shapers {
					ends[i] = math.Max(ends[i], sh.Clock())
				}
			}
			res.Runs = append(res.Runs, MultiRun{Group: g, Policy: p, Seconds: rep.Seconds, Predicted: rep.Predicted, Links: rep.Links, Note: rep.Note})
			logf("%s group %d %-11s %6.2f s (predicted %6.2f s) %s", cfg.Name, g, p, rep.Seconds, rep.Predicted, shares(rep.Links, size))
		}
		if o.SameLinks {
			mon.Restore(snap)
			for i, sh := range shapers {
				sh.Rewind(ends[i])
			}
			mon.Resume()
			select {
			case <-time.After(o.Settle):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	res.summarise(mon, len(cfg.Links))
	if o.Runs >= 2 {
		if err := res.ComputeIntervals(IntervalResamples, IntervalLevel, o.Seed); err != nil {
			logf("%s: no intervals: %v", cfg.Name, err)
		}
	}
	return res, nil
}

func shares(ls []copyjob.LinkPlan, size int64) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteString("/")
		}
		fmt.Fprintf(&b, "%.0f%%", 100*float64(l.Planned)/float64(size))
	}
	return b.String()
}

// summarise computes the paper's tables from the runs.
func (r *MultiResult) summarise(mon *linkmon.Monitor, nlinks int) {
	times := map[string][]float64{}
	groups := map[int]map[string]float64{}
	for _, x := range r.Runs {
		times[x.Policy] = append(times[x.Policy], x.Seconds)
		if groups[x.Group] == nil {
			groups[x.Group] = map[string]float64{}
		}
		groups[x.Group][x.Policy] = x.Seconds
	}
	r.Mean, r.SD = map[string]float64{}, map[string]float64{}
	for p, ts := range times {
		r.Mean[p], r.SD[p] = multisrc.MeanSD(ts)
	}
	var five []string
	for _, p := range paperFive {
		if _, ok := times[p]; ok {
			five = append(five, p)
		}
	}
	var tab [][]float64
	for g := 0; g < len(groups); g++ {
		row := make([]float64, len(five))
		for i, p := range five {
			row[i] = groups[g][p]
		}
		tab = append(tab, row)
	}
	r.Compare = map[string][]int{}
	for i, c := range multisrc.Compare(tab) {
		r.Compare[five[i]] = c
	}
	r.Paired, r.Unpaired = map[string]float64{}, map[string]float64{}
	if tcs, ok := times["tcs"]; ok {
		for p, ts := range times {
			if p == "tcs" {
				continue
			}
			if v, err := multisrc.TTestPaired(tcs, ts); err == nil {
				r.Paired[p] = v
			}
			if v, err := multisrc.TTestWelch(tcs, ts); err == nil {
				r.Unpaired[p] = v
			}
		}
	}
	r.Samples, r.Measured = map[string][2]int{}, map[string][2]float64{}
	for i := range nlinks {
		pr, pa := mon.Counts(i)
		name := r.Links[i].Name
		r.Samples[name] = [2]int{pr, pa}
		m, sd := multisrc.MeanSD(mon.Series(i))
		r.Measured[name] = [2]float64{m / BWScale, sd / BWScale}
	}
}

// fixedToken gives every path the one token tok (minted for the whole
// experiment).
func fixedToken(tok string) func(string, bool) (backend.TokenSource, error) {
	return func(string, bool) (backend.TokenSource, error) {
		return backend.StaticToken(tok), nil
	}
}
