package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/wan"
)

// The Policy Service experiments of Chervenak et al., "Adaptation and
// Policy-Based Resource Allocation for Efficient Bulk Data Transfers in High
// Performance Computing Environments", §III, on the emulated
// testbed: clients move one dataset between the profile's source and one
// destination, each as `sluice cp --policy-server` does (copyjob's
// adaptive client, an allocation from the live server's Policy Service),
// and the streams each uses over time are recorded, as the paper's Figs.
// 5-9 plot them.

// PolicyExp is one experiment: a Policy Service configuration and the
// clients' parameters (the paper's Tables III-VIII). A zero Service means
// no Policy Service: the clients run at c_max, as the paper's
// non-adaptive client.
type PolicyExp struct {
	Name        string
	Variant     string // "" or, for a comparison, "adaptive"/"non-adaptive"
	Description string
	Clients     int
	Service     server.PolicyParams
	Client      policy.AdaptiveParams
}

func (e PolicyExp) usesService() bool { return e.Service != (server.PolicyParams{}) }

// Label is the experiment's name and variant.
func (e PolicyExp) Label() string {
	if e.Variant == "" {
		return e.Name
	}
	return e.Name + "/" + e.Variant
}

// PolicyExpNames are the experiments PolicyExps knows.
var PolicyExpNames = []string{"slow-client", "fast-client", "slow-ps", "fast-ps", "constrained"}

// The paper's common parameters (Table III) and its rate threshold, which
// it does not give: a change of a tenth of the rate.
const (
	paperPairMax   = 128
	paperClientMax = 32
	paperP         = 4
	paperThreshold = 0.1
	leaseSeconds   = 300
)

// PolicyExps returns the variants of the named experiment: one for the
// slow/fast ones, the adaptive client and the non-adaptive one for
// "constrained".
func PolicyExps(name string) ([]PolicyExp, error) {
	ps := func(initial, update int) server.PolicyParams {
		return server.PolicyParams{Initial: initial, Update: update, PairMax: paperPairMax, ClientMax: paperClientMax, LeaseSeconds: leaseSeconds}
	}
	adaptive := func(ci, d int) policy.AdaptiveParams {
		return policy.AdaptiveParams{Ci: ci, Cmax: 8, Delta: 1, D: d, P: paperP, T: paperThreshold, Relative: true}
	}
	follow := func(d int) policy.AdaptiveParams {
		return policy.AdaptiveParams{Cmax: 8, Delta: 1, D: d, P: paperP, Relative: true, Follow: true}
	}
	switch name {
	case "slow-client": // Table IV
		return []PolicyExp{{Name: name, Clients: 8, Service: ps(32, 0), Client: adaptive(1, 4),
			Description: "8 clients adapt slowly (c_i 1, d 4) within 32 streams each; 128 per pair"}}, nil
	case "fast-client": // Table V
		return []PolicyExp{{Name: name, Clients: 8, Service: ps(32, 0), Client: adaptive(4, 2),
			Description: "8 clients adapt fast (c_i 4, d 2) within 32 streams each; 128 per pair"}}, nil
	case "slow-ps": // Table VI
		return []PolicyExp{{Name: name, Clients: 8, Service: ps(4, 4), Client: follow(4),
			Description: "the service grants 4 streams, then 4 more every 4 files; clients follow it"}}, nil
	case "fast-ps": // Table VII
		return []PolicyExp{{Name: name, Clients: 8, Service: ps(16, 4), Client: follow(2),
			Description: "the service grants 16 streams, then 4 more every 2 files; clients follow it"}}, nil
	case "constrained": // Table VIII
		return []PolicyExp{
			{Name: name, Variant: "adaptive", Clients: 1,
				Service:     server.PolicyParams{Initial: 160, Update: 32, PairMax: 1024, ClientMax: 1024, LeaseSeconds: leaseSeconds},
				Client:      policy.AdaptiveParams{Ci: 20, Cmax: 128, Delta: 4, D: 2, P: 8, T: paperThreshold, Relative: true},
				Description: "one client, fast adaptation (c_i 20, Δ 4, d 2, p 8, max 128) and fast allocation increases (160, +32)"},
			{Name: name, Variant: "non-adaptive", Clients: 1,
				Client:      policy.AdaptiveParams{Ci: 128, Cmax: 128, D: 2, P: 8, Relative: true},
				Description: "one client, always 128 files × 8 streams, no Policy Service"},
		}, nil
	}
	return nil, fmt.Errorf("policy experiment %q: want one of %s", name, strings.Join(PolicyExpNames, ", "))
}

// PolicyExpOptions tunes a run.
type PolicyExpOptions struct {
	// Files is the number of files of the dataset (default 488, the
	// paper's), sizes drawn log-uniformly in [MinSize, MaxSize] (default
	// 2 MiB and 8 MiB: the paper's 533 MB average scaled down).
	Files            int
	MinSize, MaxSize int64
	// Seed draws the sizes (default 1).
	Seed uint64
	// Dir holds the run's files (default: a temporary directory).
	Dir string
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Net, if set, carries the data over an emulated wide-area network
	// (see Up) instead of loopback with the profile's emulation.
	Net *wan.Net
	// Sample is the period of the throughput series (default 0.5 s).
	Sample time.Duration
}

func (o *PolicyExpOptions) defaults() error {
	if o.Files == 0 {
		o.Files = 488
	}
	if o.MinSize == 0 {
		o.MinSize = 2 << 20
	}
	if o.MaxSize == 0 {
		o.MaxSize = 8 << 20
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Sample <= 0 {
		o.Sample = 500 * time.Millisecond
	}
	if o.Files < 1 || o.MinSize < 1 || o.MaxSize < o.MinSize {
		return fmt.Errorf("policy experiment: %d files of %d..%d bytes: want at least one file and 1 <= min <= max", o.Files, o.MinSize, o.MaxSize)
	}
	return nil
}

// PolicyRun is what one variant measured.
type PolicyRun struct {
	Experiment string `json:"experiment"`
	Variant    string `json:"variant,omitempty"`
	Profile    string `json:"profile"`
	// Seconds is the wall time from the clients' start to the last file
	// verified at the destination.
	Seconds float64 `json:"seconds"`
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	// PeakStreams is the most streams the clients ran at once.
	PeakStreams int          `json:"peak_streams"`
	Clients     []ClientRun  `json:"clients"`
	Throughput  []ThroughPut `json:"throughput"`
}

// ClientRun is one client's part.
type ClientRun struct {
	Name     string               `json:"name"`
	Seconds  float64              `json:"seconds"`
	Files    int                  `json:"files"`
	Bytes    int64                `json:"bytes"`
	Timeline []copyjob.AdaptPoint `json:"timeline"`
}

// ThroughPut is the clients' aggregate rate over the Sample before At
// (seconds since the start), bytes/s.
type ThroughPut struct {
	At  float64 `json:"at"`
	Bps float64 `json:"bps"`
}

// RunPolicyExp runs one variant on profile tb (its Source and the first
// other endpoint are the pair): it starts the testbed, configures the
// Policy Service, writes the dataset at the source (file i belongs to
// client i mod Clients), runs the clients at once, verifies every file
// at the destination and returns what it measured.
func RunPolicyExp(ctx context.Context, tb *sim.Testbed, e PolicyExp, o PolicyExpOptions) (*PolicyRun, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := e.Client.Validate(); err != nil {
		return nil, err
	}
	src := tb.Source
	dst := ""
	for _, ep := range tb.Endpoints {
		if ep.Name != src {
			dst = ep.Name
			break
		}
	}
	if dst == "" {
		return nil, fmt.Errorf("policy experiment: profile %s has no endpoint besides its source %s", tb.Name, src)
	}
	logf := logger(o.Log)
	dir, cleanup, err := workDir(o.Dir, "sluice-policy-exp-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := Up(ctx, tb, dir, "seal", nil, o.Net)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if e.usesService() {
		cfg := server.PolicyConfig{Policy: "greedy", Defaults: e.Service,
			Pairs: []server.PairPolicy{{Source: src, Destination: dst, Params: e.Service}}}
		if _, err := c.Admin.SetPolicy(ctx, cfg); err != nil {
			return nil, fmt.Errorf("policy experiment: configuring the Policy Service: %w", err)
		}
	}

	// The dataset.
	rng := rand.New(rand.NewPCG(o.Seed, 488))
	sizes := map[string]int64{}
	var total int64
	lo, hi := math.Log(float64(o.MinSize)), math.Log(float64(o.MaxSize))
	for i := range o.Files {
		size := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
		rel := fmt.Sprintf("c%d/f%03d", i%e.Clients, i)
		if err := makeFile(filepath.Join(c.Roots[src], rel), size, int64(i)); err != nil {
			return nil, err
		}
		sizes[rel] = size
		total += size
	}
	logf("%s: %d clients, %d files, %.2f GB from %s to %s", e.Label(), e.Clients, o.Files, float64(total)/1e9, src, dst)

	run := &PolicyRun{Experiment: e.Name, Variant: e.Variant, Profile: tb.Name, Files: o.Files, Bytes: total}
	sets := make([]*copyjob.Dataset, e.Clients)
	for k := range e.Clients {
		if sets[k], err = c.policyDataset(ctx, src, dst, k, filepath.Join(dir, "journal")); err != nil {
			return nil, err
		}
	}

	// Every client at once, and the aggregate rate sampled beside them.
	start := time.Now()
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(o.Sample)
		defer t.Stop()
		var last int64
		lastAt := start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				var moved int64
				for _, d := range sets {
					moved += d.Progress().Done
				}
				run.Throughput = append(run.Throughput, ThroughPut{At: now.Sub(start).Seconds(), Bps: float64(moved-last) / now.Sub(lastAt).Seconds()})
				last, lastAt = moved, now
			}
		}
	})
	run.Clients = make([]ClientRun, e.Clients)
	errs := make([]error, e.Clients)
	var wg sync.WaitGroup
	for k := range e.Clients {
		wg.Go(func() {
			name := fmt.Sprintf("client%d", k)
			var al copyjob.Allocator
			if e.usesService() {
				al = c.Admin.NewAllocator(src, dst, name)
			}
			began := time.Since(start).Seconds()
			sum, tl, err := copyjob.RunAdaptive(ctx, sets[k], al, copyjob.AdaptiveOptions{Params: e.Client, Wait: 250 * time.Millisecond}, nil)
			for i := range tl { // from the common start, not the client's
				tl[i].At += began
			}
			run.Clients[k] = ClientRun{Name: name, Seconds: time.Since(start).Seconds(), Files: sum.Files, Bytes: sum.Bytes, Timeline: tl}
			if err != nil {
				errs[k] = fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		})
	}
	wg.Wait()
	run.Seconds = time.Since(start).Seconds()
	close(done)
	sampler.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := verifyCopies(c.Roots[dst], sizes); err != nil {
		return nil, err
	}
	run.PeakStreams = peakStreams(run.Clients)
	logf("%s: %.1f s, %.1f MB/s, peak %d streams", e.Label(), run.Seconds, float64(total)/1e6/run.Seconds, run.PeakStreams)
	return run, nil
}

// policyDataset prepares client k's copy of c<k>/ from src to dst's
// out/, as `sluice cp -r` would: the destination agent pulls each file's
// ranges from the source (third-party), every file verified.
func (c *Cluster) policyDataset(ctx context.Context, src, dst string, k int, journal string) (*copyjob.Dataset, error) {
	exp := time.Now().Add(2 * time.Hour).Unix()
	rtok, err := auth.Mint(c.Keys[src], auth.Claims{Sub: "policy-exp", Scope: auth.ScopeRead, Prefix: "/", Aud: auth.AnyAudience, Exp: exp})
	if err != nil {
		return nil, err
	}
	wtok, err := auth.Mint(c.Keys[dst], auth.Claims{Sub: "policy-exp", Scope: auth.ScopeRW, Prefix: "/", Aud: auth.AnyAudience, Exp: exp})
	if err != nil {
		return nil, err
	}
	// A transport per client: the paper's clients run on separate hosts.
	tr := sluice.NewTransport()
	tr.MaxIdleConnsPerHost = 1024
	if c.net != nil {
		// The clients sit beside the network, as the server does: their
		// requests reach the agents inside their hosts, and the data
		// crosses the network from agent to agent.
		tr.DialContext = c.net.DialInto
	}
	hc := &http.Client{Transport: tr}
	backends := all.Registry()
	host := func(u string) string { return "sluice://" + strings.TrimPrefix(u, "http://") }
	dir := fmt.Sprintf("/c%d", k)
	s, _, err := copyjob.Open(ctx, backends, host(c.Agents[src])+dir, backend.OpenOptions{HTTPClient: hc, Tokens: fixedToken(rtok)})
	if err != nil {
		return nil, err
	}
	d, _, err := copyjob.Open(ctx, backends, host(c.Agents[dst])+"/out/", backend.OpenOptions{Write: true, HTTPClient: hc, Tokens: fixedToken(wtok)})
	if err != nil {
		return nil, err
	}
	return copyjob.PrepareDataset(ctx, []copyjob.Endpoint{s}, d, copyjob.Options{
		Recursive: true, Checksum: "adler32", JournalDir: filepath.Join(journal, fmt.Sprint(k)),
		// The dataset's files are the paper's scaled down, and so are
		// their parts: p ranges of a 2 MiB file are 256 KiB each; none
		// goes through the journaling engine.
		PartMin: 256 << 10, ChunkMin: 64 << 20,
	})
}

// verifyCopies checks that every file of the dataset is at the
// destination (out/c<k>/...) with its size, and that no temporary file is
// left; the copies verified each file's checksum as it landed.
func verifyCopies(root string, sizes map[string]int64) error {
	n := 0
	err := filepath.Walk(filepath.Join(root, "out"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(filepath.Join(root, "out"), p)
		want, ok := sizes[filepath.ToSlash(rel)]
		if !ok {
			return fmt.Errorf("policy experiment: unexpected file %s at the destination", rel)
		}
		if fi.Size() != want {
			return fmt.Errorf("policy experiment: %s has %d bytes, want %d", rel, fi.Size(), want)
		}
		n++
		return nil
	})
	if err != nil {
		return err
	}
	if n != len(sizes) {
		return fmt.Errorf("policy experiment: %d of %d files at the destination", n, len(sizes))
	}
	return nil
}

// peakStreams is the most streams the clients' timelines show at once.
func peakStreams(cs []ClientRun) int {
	type ev struct {
		at    float64
		delta int
	}
	var evs []ev
	for _, c := range cs {
		prev := 0
		for _, p := range c.Timeline {
			evs = append(evs, ev{p.At, p.Streams - prev})
			prev = p.Streams
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
