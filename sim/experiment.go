package sim

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// TraceSpec names a workload: one of the SC'15 traces ("25", "45", "60",
// "45-4x", "60-hv"), any load as a number ("0.3" or "30"), or a file.
type TraceSpec struct {
	Name   string
	Format string // for files: csv, jsonl, gridftp or "" to guess
	Seed   int64
	// Report, if set, is told what the loader read from a file and what
	// it left out (a transfer log's failed transfers, malformed lines),
	// so that a user replaying their own log can see it.
	Report func(*trace.LoadReport) `json:"-"`
}

// paperTraces maps the SC'15 trace names to generator settings.
var paperTraces = map[string]struct {
	load    float64
	variant string
}{
	"25": {0.25, ""}, "45": {0.45, ""}, "60": {0.60, ""}, "45-4x": {0.45, "4x"}, "60-hv": {0.60, "hv"},
}

// LoadTrace produces the trace a spec names, with endpoints fitted to tb:
// generated traces use tb's source and destinations; files keep endpoints
// tb knows and map the others onto its source and (by weight) its
// destinations, as the paper did for logs without destinations.
func LoadTrace(tb *Testbed, ts TraceSpec) (*trace.Trace, error) {
	name := strings.TrimSuffix(strings.TrimSpace(ts.Name), "%")
	name = strings.ReplaceAll(name, "%", "")
	if p, ok := paperTraces[strings.ToLower(name)]; ok {
		return generate(tb, p.load, p.variant, ts.Seed)
	}
	if v, err := strconv.ParseFloat(name, 64); err == nil && !strings.ContainsAny(ts.Name, "/") {
		if v > 2 {
			v /= 100
		}
		return generate(tb, v, "", ts.Seed)
	}
	tr, rep, err := trace.ReadFile(ts.Name, ts.Format)
	if err != nil {
		return nil, err
	}
	if ts.Report != nil && rep != nil {
		seen := map[string]bool{}
		for _, x := range tr.Transfers {
			if tb.Has(x.Src) && tb.Has(x.Dst) {
				continue
			}
			rep.Remapped++
			for _, n := range []string{x.Src, x.Dst} {
				if !tb.Has(n) && !seen[n] && len(rep.Unknown) < trace.MaxWarnings {
					seen[n] = true
					rep.Unknown = append(rep.Unknown, strconv.Quote(n))
				}
			}
		}
		ts.Report(rep)
	}
	return trace.Remap(tr, tb.Source, tb.Destinations(), tb.Has, ts.Seed), nil
}

func generate(tb *Testbed, load float64, variant string, seed int64) (*trace.Trace, error) {
	return trace.Generate(trace.GenSpec{
		Load: load, Minutes: 15, Variant: variant, Seed: seed,
		Source: tb.Source, Destinations: tb.Destinations(),
		SourceCapacity: Gbps(tb.Endpoint(tb.Source).CapacityGbps),
	})
}

// job is one simulation of a batch run in parallel.
type job struct {
	tb   *Testbed
	tr   *trace.Trace
	name string
	so   sched.Options
	opt  Options
	res  *Result
	err  error
}

// runJobs runs independent simulations on all cores. Each run is
// deterministic on its own, so the results do not depend on the order.
func runJobs(jobs []*job) error {
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := sched.New(j.name, j.so)
			if err != nil {
				j.err = err
				return
			}
			j.res, j.err = Run(j.tb, j.tr, s, j.opt)
			if j.err != nil {
				j.err = fmt.Errorf("%s on trace %s: %w", j.name, j.tr.Name, j.err)
			}
		}()
	}
	wg.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return j.err
		}
	}
	return nil
}

// SchedStats is one scheduler's figures on one trace (the JSON shape of
// `sluice sim compare`).
type SchedStats struct {
	AvgSlowdown   float64          `json:"avg_slowdown"`
	AvgTurnaround float64          `json:"avg_turnaround"`
	MaxSlowdown   float64          `json:"max_slowdown"`
	MaxTurnaround float64          `json:"max_turnaround"`
	ByClass       map[string]Stats `json:"by_class"`
	Preemptions   int              `json:"preemptions"`
	Starts        int              `json:"starts"`
	Resizes       int              `json:"resizes"`
	Makespan      float64          `json:"makespan"`
}

// Change is a percentage change of average turnaround and slowdown
// (negative is better).
type Change struct {
	Turnaround float64 `json:"turnaround_pct"`
	Slowdown   float64 `json:"slowdown_pct"`
}

// TraceComparison is one trace's block of `sluice sim compare`.
type TraceComparison struct {
	Trace      string                `json:"trace"`
	Tasks      int                   `json:"tasks"`
	Schedulers map[string]SchedStats `json:"schedulers"`
	// VsBaseCC1 is, per scheduler and size class ("all" for overall), the
	// change relative to BaseCC1 (Figure 3 left and centre).
	VsBaseCC1 map[string]map[string]Change `json:"vs_basecc1,omitempty"`
	// Best is the best baseline by average slowdown; SEALVsBest is the
	// change of SEAL (or the first non-baseline scheduler) relative to it,
	// in averages and worst cases (Figure 3 right).
	Best        string  `json:"best_baseline,omitempty"`
	Subject     string  `json:"subject,omitempty"`
	AvgVsBest   *Change `json:"avg_vs_best,omitempty"`
	WorstVsBest *Change `json:"worst_vs_best,omitempty"`
}

// Comparison is `sluice sim compare`.
type Comparison struct {
	Testbed string            `json:"testbed"`
	Seed    int64             `json:"seed"`
	Traces  []TraceComparison `json:"traces"`
}

func pct(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return 100 * (x - base) / base
}

func isBaseline(name string) bool {
	return strings.HasPrefix(name, "base") || name == "globus"
}

// Compare runs every scheduler on every trace.
func Compare(tb *Testbed, traces []TraceSpec, schedulers []string, so sched.Options, opt Options) (*Comparison, error) {
	var jobs []*job
	var trs []*trace.Trace
	for _, ts := range traces {
		tr, err := LoadTrace(tb, ts)
		if err != nil {
			return nil, err
		}
		trs = append(trs, tr)
		for _, s := range schedulers {
			jobs = append(jobs, &job{tb: tb, tr: tr, name: s, so: so, opt: opt})
		}
	}
	if err := runJobs(jobs); err != nil {
		return nil, err
	}
	out := &Comparison{Testbed: tb.Name}
	if len(traces) > 0 {
		out.Seed = traces[0].Seed
	}
	for i, tr := range trs {
		tc := TraceComparison{Trace: tr.Name, Tasks: len(tr.Transfers), Schedulers: map[string]SchedStats{}}
		for _, j := range jobs[i*len(schedulers) : (i+1)*len(schedulers)] {
			r := j.res
			tc.Schedulers[j.name] = SchedStats{
				AvgSlowdown: r.Interactive.AvgSlowdown, AvgTurnaround: r.Interactive.AvgTurnaround,
				MaxSlowdown: r.Interactive.MaxSlowdown, MaxTurnaround: r.Interactive.MaxTurnaround,
				ByClass: r.ByClass, Preemptions: r.Preemptions, Starts: r.Starts, Resizes: r.Resizes, Makespan: r.Makespan,
			}
		}
		if b1, ok := tc.Schedulers["basecc1"]; ok {
			tc.VsBaseCC1 = map[string]map[string]Change{}
			for name, s := range tc.Schedulers {
				if name == "basecc1" {
					continue
				}
				m := map[string]Change{"all": {pct(s.AvgTurnaround, b1.AvgTurnaround), pct(s.AvgSlowdown, b1.AvgSlowdown)}}
				for cl, st := range s.ByClass {
					if bc, ok := b1.ByClass[cl]; ok {
						m[cl] = Change{pct(st.AvgTurnaround, bc.AvgTurnaround), pct(st.AvgSlowdown, bc.AvgSlowdown)}
					}
				}
				tc.VsBaseCC1[name] = m
			}
		}
		best := ""
		for _, name := range schedulers {
			if s, ok := tc.Schedulers[name]; ok && isBaseline(name) && (best == "" || s.AvgSlowdown < tc.Schedulers[best].AvgSlowdown) {
				best = name
			}
		}
		subject := ""
		for _, name := range schedulers {
			if !isBaseline(name) {
				subject = name
				break
			}
		}
		if best != "" && subject != "" {
			b, s := tc.Schedulers[best], tc.Schedulers[subject]
			tc.Best, tc.Subject = best, subject
			tc.AvgVsBest = &Change{pct(s.AvgTurnaround, b.AvgTurnaround), pct(s.AvgSlowdown, b.AvgSlowdown)}
			tc.WorstVsBest = &Change{pct(s.MaxTurnaround, b.MaxTurnaround), pct(s.MaxSlowdown, b.MaxSlowdown)}
		}
		out.Traces = append(out.Traces, tc)
	}
	return out, nil
}

// StealPoint is one point of Figure 6.
type StealPoint struct {
	Scheme string `json:"scheme"`
	// SpareUsed is B_B/(B_T-B_I); NormSlowdown is SD_I/SD_{I+B}.
	SpareUsed      float64 `json:"spare_used"`
	NormSlowdown   float64 `json:"norm_slowdown"`
	AvgSlowdownInt float64 `json:"avg_interactive_slowdown"`
	Preemptions    int     `json:"preemptions"`
}

// StealTrace is one trace's block of `sluice sim steal`.
type StealTrace struct {
	Trace      string       `json:"trace"`
	BatchTasks int          `json:"batch_tasks"`
	SDI        float64      `json:"sd_i"` // interactive-only SEAL average slowdown
	Points     []StealPoint `json:"points"`
}

// StealResult is `sluice sim steal`.
type StealResult struct {
	Testbed string       `json:"testbed"`
	Seed    int64        `json:"seed"`
	Traces  []StealTrace `json:"traces"`
}

// BatchSize is the size of the SC'15 §6.4 batch tasks.
const BatchSize = 50e9

// Steal runs the §6.4 experiment: each trace's tasks are interactive, and
// 50 GB batch tasks that fill the unused capacity arrive at t = 0.
func Steal(tb *Testbed, traces []TraceSpec, lambdas []float64, so sched.Options, opt Options) (*StealResult, error) {
	out := &StealResult{Testbed: tb.Name}
	if len(traces) > 0 {
		out.Seed = traces[0].Seed
	}
	type plan struct {
		scheme string
		j      *job
	}
	var all []*job
	var plans [][]plan
	var bases []*job
	var names []string
	var nb []int
	for _, ts := range traces {
		tr, err := LoadTrace(tb, ts)
		if err != nil {
			return nil, err
		}
		window := 0.0
		for _, x := range tr.Transfers {
			window = math.Max(window, x.Arrival)
		}
		window = math.Max(window, 900)
		o := opt
		o.Window = window
		base := &job{tb: tb, tr: tr, name: "seal", so: so, opt: o}
		withB := tr.Clone()
		srcCap := Gbps(tb.Endpoint(tb.Source).CapacityGbps)
		load := float64(tr.Stats().Bytes) / (srcCap * window)
		n := trace.BatchCountFor(load, srcCap)
		if err := trace.AddBatch(withB, n, BatchSize, tb.Source, tb.Destinations(), 0, ts.Seed); err != nil {
			return nil, err
		}
		var ps []plan
		for _, l := range lambdas {
			s := so
			s.Lambda = l
			ps = append(ps, plan{fmt.Sprintf("steal/λ=%g", l), &job{tb: tb, tr: withB, name: "steal", so: s, opt: o}})
		}
		o2 := o
		o2.BatchShift = 3600
		ps = append(ps,
			plan{"seal1", &job{tb: tb, tr: withB, name: "seal", so: so, opt: o}},
			plan{"seal2", &job{tb: tb, tr: withB, name: "seal", so: so, opt: o2}},
			plan{"basevary", &job{tb: tb, tr: withB, name: "basevary", so: so, opt: o}},
		)
		all = append(all, base)
		for _, p := range ps {
			all = append(all, p.j)
		}
		plans = append(plans, ps)
		bases = append(bases, base)
		names = append(names, tr.Name)
		nb = append(nb, n)
	}
	if err := runJobs(all); err != nil {
		return nil, err
	}
	for i := range plans {
		st := StealTrace{Trace: names[i], BatchTasks: nb[i], SDI: bases[i].res.Interactive.AvgSlowdown}
		for _, p := range plans[i] {
			r := p.j.res
			st.Points = append(st.Points, StealPoint{
				Scheme: p.scheme, SpareUsed: r.SpareUsed,
				NormSlowdown:   st.SDI / r.Interactive.AvgSlowdown,
				AvgSlowdownInt: r.Interactive.AvgSlowdown, Preemptions: r.Preemptions,
			})
		}
		out.Traces = append(out.Traces, st)
	}
	return out, nil
}
