package copyjob

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/linkmon"
	"github.com/sluice-dtn/sluice/multisrc"
	"github.com/sluice-dtn/sluice/multisrc/forecast"
)

// Multi-source downloads (seed paper 002): one file with replicas at
// several sources, its bytes split across them by a multisrc policy from
// each link's predicted bandwidth mean and variability, moved by the engine
// with every replica at once.

// Dynamic is the split of TCS with work stealing (engine Spec.Steal): a
// replica that has sent its part takes over the tail of the slowest.
const Dynamic = "tcs-dynamic"

// SplitNames are the --split values: the paper's policies, the variant
// that subtracts the variability, and the dynamic mode.
func SplitNames() []string {
	var out []string
	for _, p := range multisrc.Policies() {
		out = append(out, string(p))
	}
	return append(out, Dynamic)
}

// MultiOptions tunes RunMulti.
type MultiOptions struct {
	// Split is one of SplitNames (default "tcs").
	Split string
	// Monitor, if set, has been sampling the links (one per source, in
	// order) and keeps doing so; otherwise RunMulti probes them for
	// ProbeTime (default 2 s) before planning.
	Monitor   *linkmon.Monitor
	ProbeTime time.Duration
	// History, if set, is what the plan is made from instead of the
	// monitor's live series (a linkmon.Snapshot: several copies planned
	// from one moment's knowledge); Monitor still observes the copy.
	History linkmon.History
	// CheckReplicas compares the replicas' checksums before the copy (a
	// full read at each source; sizes are always compared).
	CheckReplicas bool
	// Checksum, JournalDir, SubWrite and ChunkMin are as in Options; CC
	// is the partial transfers per replica (default 1: one stream per
	// source, as in the paper).
	Checksum, JournalDir string
	SubWrite, ChunkMin   int64
	CC                   int
	// Window is the forecaster's error window (default 10).
	Window int
}

// LinkPlan is what the planner knew and decided for one replica.
type LinkPlan struct {
	Source    string  `json:"source"`
	Mean      float64 `json:"mean_bps"`
	SD        float64 `json:"sd_bps"`
	TF        float64 `json:"tuning_factor"`
	Effective float64 `json:"effective_bps"`
	Latency   float64 `json:"latency_s"`
	Samples   int     `json:"samples"`
	Planned   int64   `json:"planned_bytes"`
	// Predicted is the planned part's predicted time, s.
	Predicted float64 `json:"predicted_s"`
}

// MultiReport is what RunMulti did.
type MultiReport struct {
	Split   string     `json:"split"`
	Bytes   int64      `json:"bytes"`
	Seconds float64    `json:"seconds"` // the copy, after planning
	PlanS   float64    `json:"plan_seconds"`
	Links   []LinkPlan `json:"links"`
	// Predicted is the plan's predicted transfer time (the latest link).
	Predicted float64 `json:"predicted_s"`
	Checksum  string  `json:"checksum,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// RunMulti copies one file from its replicas srcs (every endpoint a file;
// their sizes must agree) to dst: it plans the split with o.Split over the
// links' predicted bandwidth, then moves the parts from every replica at
// once through the engine (journal, resume, checksum, rename as for one
// source). dst ending in "/" is a directory that receives the file under
// the first source's name.
func RunMulti(ctx context.Context, srcs []Endpoint, dst Endpoint, o MultiOptions) (MultiReport, error) {
	rep := MultiReport{Split: o.Split}
	if rep.Split == "" {
		rep.Split = string(multisrc.TCS)
	}
	pol := multisrc.Policy(rep.Split)
	steal := rep.Split == Dynamic
	if steal {
		pol = multisrc.TCS
	} else if _, err := multisrc.ParsePolicy(rep.Split); err != nil {
		return rep, fmt.Errorf("copyjob: split %q: want one of %s", rep.Split, strings.Join(SplitNames(), ", "))
	}
	if len(srcs) < 2 {
		return rep, fmt.Errorf("copyjob: %w: a multi-source copy needs at least two replicas", backend.ErrInvalid)
	}
	if o.JournalDir == "" {
		return rep, fmt.Errorf("copyjob: %w: a journal directory is required", backend.ErrInvalid)
	}
	if o.ProbeTime <= 0 {
		o.ProbeTime = 2 * time.Second
	}
	start := time.Now()
	size, err := checkReplicas(ctx, srcs, o)
	if err != nil {
		return rep, err
	}
	rep.Bytes = size
	dstPath := dst.Path
	if strings.HasSuffix(dstPath, "/") {
		dstPath += path.Base(strings.TrimSuffix(srcs[0].Path, "/"))
	}

	mon := o.Monitor
	if mon == nil {
		var links []linkmon.Link
		for _, s := range srcs {
			links = append(links, linkmon.Link{Name: s.URL, Backend: s.Backend, Path: s.Path, Size: size})
		}
		mon = linkmon.New(links, linkmon.Options{})
		if err := mon.Collect(ctx, o.ProbeTime); err != nil {
			return rep, err
		}
	}
	var hist linkmon.History = mon
	if o.History != nil {
		hist = o.History
	}
	links, plans := predictLinks(hist, srcs, size, o.Window)
	var unmeasured []string
	for i, l := range links {
		if !(l.Mean > 0) {
			unmeasured = append(unmeasured, srcs[i].URL)
		}
	}
	var alloc []int64
	if len(unmeasured) > 0 {
		// A replica the probes could not measure (too slow to answer
		// within the probe time, or failing) would be planned out: plan
		// equal parts instead and let the replicas that finish first
		// take over from the others, which needs no prediction. The
		// engine drops a replica that fails.
		alloc = equalParts(size, len(srcs))
		steal = true
		rep.Split += " (equal parts with stealing: no measurement of " + strings.Join(unmeasured, ", ") + ")"
	} else if alloc, err = multisrc.Split(pol, links, size, 64<<10); err != nil {
		return rep, fmt.Errorf("copyjob: planning the split: %w", err)
	}
	fin := multisrc.Finish(pol, links, alloc)
	for i := range plans {
		plans[i].Effective = multisrc.EffectiveBW(pol, links[i])
		plans[i].Planned = alloc[i]
		// No prediction for a link without one (JSON has no infinity).
		if f := fin[i]; f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
			plans[i].Predicted = f
			rep.Predicted = max(rep.Predicted, f)
		}
	}
	rep.Links = plans
	rep.PlanS = time.Since(start).Seconds()

	spec := engine.Spec{
		Dst: dst.Backend, DstPath: dstPath, Size: size, CC: max(1, o.CC),
		ChunkMin: o.ChunkMin, SubWrite: o.SubWrite, Checksum: o.Checksum, Steal: steal,
		Journal: journalFor(o.JournalDir, "multi:"+srcs[0].URL, dst.URL+dstPath),
	}
	for i, s := range srcs {
		src := engine.Source{Name: s.URL, Backend: mon.Observe(i), Path: s.Path, Share: float64(alloc[i])}
		if m := links[i].Mean; m > 0 && !math.IsInf(m, 0) {
			src.Rate = m // the prediction stealing weighs it by until it delivers
		}
		if pull := pullerFor(s, dst); pull != nil {
			src.Pull = pull
			src.Backend = s.Backend
		}
		spec.Sources = append(spec.Sources, src)
	}
	copyStart := time.Now()
	res, err := engine.Run(ctx, spec)
	rep.Seconds = time.Since(copyStart).Seconds()
	rep.Checksum, rep.Note = res.Checksum, res.Note
	if err != nil {
		return rep, fmt.Errorf("%s -> %s: %w", srcs[0].URL, dstPath, err)
	}
	return rep, nil
}

// checkReplicas stats every replica at once and returns their common
// size; with o.CheckReplicas it also compares their checksums. A replica
// that cannot be reached is left to the engine (which carries on without
// it), but at least one must answer.
func checkReplicas(ctx context.Context, srcs []Endpoint, o MultiOptions) (int64, error) {
	infos := make([]backend.FileInfo, len(srcs))
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, s := range srcs {
		wg.Go(func() { infos[i], errs[i] = s.Backend.Stat(ctx, s.Path) })
	}
	wg.Wait()
	size := int64(-1)
	var first string
	for i, s := range srcs {
		switch {
		case errs[i] != nil:
			continue
		case infos[i].IsDir:
			return 0, fmt.Errorf("copyjob: %w: replica %s is a directory: a multi-source copy moves one file", backend.ErrInvalid, s.URL)
		case size < 0:
			size, first = infos[i].Size, s.URL
		case infos[i].Size != size:
			return 0, fmt.Errorf("copyjob: %w: replica %s has %d bytes and %s has %d: not copies of one file", backend.ErrInvalid, s.URL, infos[i].Size, first, size)
		}
	}
	if size < 0 {
		return 0, fmt.Errorf("copyjob: no replica can be read: %w", errors.Join(errs...))
	}
	if !o.CheckReplicas || o.Checksum == "none" {
		return size, nil
	}
	algo := o.Checksum
	if algo == "" {
		algo = engine.DefaultChecksum
	}
	sums := make([]string, len(srcs))
	for i, s := range srcs {
		if errs[i] != nil {
			continue
		}
		wg.Go(func() { sums[i], errs[i] = s.Backend.Checksum(ctx, s.Path, algo) })
	}
	wg.Wait()
	var differ []string
	for i, s := range srcs {
		if errs[i] == nil {
			differ = append(differ, fmt.Sprintf("%s has %s", s.URL, sums[i]))
		}
	}
	for i := range srcs {
		if errs[i] == nil && sums[i] != sums[firstOK(errs)] {
			return 0, fmt.Errorf("copyjob: %w: the replicas' %s checksums differ (%s): not copies of one file", backend.ErrInvalid, algo, strings.Join(differ, ", "))
		}
	}
	return size, nil
}

// firstOK is the index of the first nil error.
func firstOK(errs []error) int {
	for i, err := range errs {
		if err == nil {
			return i
		}
	}
	return 0
}

// equalParts splits size into n parts that differ by at most one byte.
func equalParts(size int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size / int64(n)
		if int64(i) < size%int64(n) {
			out[i]++
		}
	}
	return out
}

// predictLinks turns the monitor's series into the planner's links: the
// predicted mean and SD of each link's bandwidth over an interval as long
// as the transfer is expected to take (eq. 4: the aggregation degree is
// that time times the sampling frequency; the expected time is the size
// over the links' summed recent means), and the probes' latency.
func predictLinks(mon linkmon.History, srcs []Endpoint, size int64, window int) ([]multisrc.Link, []LinkPlan) {
	series := make([][]float64, len(srcs))
	var sum float64
	for i := range srcs {
		series[i] = mon.Series(i)
		if m, _, ok := forecast.Interval(series[i], len(series[i]), window); ok {
			sum += m
		}
	}
	expected := 1.0
	if sum > 0 {
		expected = float64(size) / sum
	}
	m := forecast.Degree(expected, mon.Hz())
	links := make([]multisrc.Link, len(srcs))
	plans := make([]LinkPlan, len(srcs))
	for i, s := range srcs {
		mean, sd, _ := forecast.Interval(series[i], m, window)
		links[i] = multisrc.Link{Name: s.URL, Mean: mean, SD: sd, Latency: mon.Latency(i)}
		plans[i] = LinkPlan{Source: s.URL, Mean: mean, SD: sd, TF: multisrc.TuningFactor(mean, sd),
			Latency: links[i].Latency, Samples: len(series[i])}
	}
	return links, plans
}
