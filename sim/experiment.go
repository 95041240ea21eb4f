package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
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
//
// A name is a file when a file (not a directory) of that name exists or
// when ts.Format is set; otherwise it is one of the SC'15 traces or a
// finite load (0.3 or 30), and failing those, a file that is missing (or
// a directory), which is an error saying so.
func LoadTrace(tb *Testbed, ts TraceSpec) (*trace.Trace, error) {
	fi, statErr := os.Stat(ts.Name)
	isFile := statErr == nil && !fi.IsDir()
	if !isFile && ts.Format == "" {
		if load, variant, ok := generatedTrace(ts.Name); ok {
			return generate(tb, load, variant, ts.Seed)
		}
	}
	tr, rep, err := trace.ReadFile(ts.Name, ts.Format)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && ts.Format == "" {
			return nil, fmt.Errorf("trace %q: no such file, and not one of the SC'15 traces (%s) or a load (such as 0.3 or 30)",
				ts.Name, strings.Join(PaperTraceNames(), ", "))
		}
		return nil, err
	}
	// Run would refuse it as "sim: empty trace", naming no file.
	if len(tr.Transfers) == 0 {
		return nil, fmt.Errorf("trace %s: no transfer to replay (%s)", ts.Name, rep)
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

// PaperTraceNames are the names of the SC'15 traces LoadTrace generates.
func PaperTraceNames() []string { return []string{"25", "45", "60", "45-4x", "60-hv"} }

// generatedTrace reads name as a trace LoadTrace generates: an SC'15
// trace ("45", "45%", "60-hv") or a load as a fraction or a percentage
// ("0.3", "30"), which must be a finite number: "nan" and "inf" are not
// loads.
func generatedTrace(name string) (load float64, variant string, ok bool) {
	n := strings.ReplaceAll(strings.TrimSpace(name), "%", "")
	if p, ok := paperTraces[strings.ToLower(n)]; ok {
		return p.load, p.variant, true
	}
	if n == "" || strings.ContainsFunc(n, func(r rune) bool { return !strings.ContainsRune("0123456789.eE+-", r) }) {
		return 0, "", false
	}
	v, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, "", false
	}
	if v > 2 {
		v /= 100
	}
	return v, "", true
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
	Trace string `json:"trace"`
	Tasks int    `json:"tasks"`
	// Interactive is how many of the tasks are interactive: the figures
	// are over them. With none, Note says so and there are no changes
	// against the baselines.
	Interactive int                   `json:"interactive_tasks"`
	Note        string                `json:"note,omitempty"`
	Schedulers  map[string]SchedStats `json:"schedulers"`
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
		for _, x := range tr.Transfers {
			if !x.Batch {
				tc.Interactive++
			}
		}
		for _, j := range jobs[i*len(schedulers) : (i+1)*len(schedulers)] {
			r := j.res
			tc.Schedulers[j.name] = SchedStats{
				AvgSlowdown: r.Interactive.AvgSlowdown, AvgTurnaround: r.Interactive.AvgTurnaround,
				MaxSlowdown: r.Interactive.MaxSlowdown, MaxTurnaround: r.Interactive.MaxTurnaround,
				ByClass: r.ByClass, Preemptions: r.Preemptions, Starts: r.Starts, Resizes: r.Resizes, Makespan: r.Makespan,
			}
		}
		if tc.Interactive == 0 {
			tc.Note = fmt.Sprintf("all %d tasks are batch tasks: there is no interactive transfer to compare slowdown and turnaround on", tc.Tasks)
			out.Traces = append(out.Traces, tc)
			continue
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
	// NormSlowdown and AvgSlowdownInt are NaN (JSON null) when the trace
	// has no interactive transfer: there is no interactive slowdown to
	// compare.
	SpareUsed      float64 `json:"spare_used"`
	NormSlowdown   float64 `json:"norm_slowdown"`
	AvgSlowdownInt float64 `json:"avg_interactive_slowdown"`
	Preemptions    int     `json:"preemptions"`
}

// MarshalJSON writes the undefined (NaN) ratios as null, which
// encoding/json cannot do for a float64.
func (p StealPoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Scheme         string   `json:"scheme"`
		SpareUsed      float64  `json:"spare_used"`
		NormSlowdown   *float64 `json:"norm_slowdown"`
		AvgSlowdownInt *float64 `json:"avg_interactive_slowdown"`
		Preemptions    int      `json:"preemptions"`
	}{p.Scheme, p.SpareUsed, finiteOrNil(p.NormSlowdown), finiteOrNil(p.AvgSlowdownInt), p.Preemptions})
}

// finiteOrNil is &v, or nil (JSON null) if v is NaN or infinite.
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// StealTrace is one trace's block of `sluice sim steal`.
type StealTrace struct {
	Trace string `json:"trace"`
	// BatchTasks is how many 50 GB batch tasks were added; OwnBatch how
	// many batch tasks the trace itself had (kept, as batch work, in the
	// runs with batch tasks) and Interactive how many interactive ones.
	BatchTasks  int `json:"batch_tasks"`
	OwnBatch    int `json:"own_batch_tasks,omitempty"`
	Interactive int `json:"interactive_tasks"`
	// Window is the accounting window in seconds: the trace's span, at
	// least the paper's 15 minutes. The added batch work fills the
	// source's capacity left over in it.
	Window float64 `json:"window"`
	// SDI is the interactive-only SEAL average slowdown, NaN (JSON null)
	// when the trace has no interactive transfer; Note then says so.
	SDI    float64      `json:"sd_i"`
	Note   string       `json:"note,omitempty"`
	Points []StealPoint `json:"points"`
}

// MarshalJSON writes an undefined SDI as null.
func (t StealTrace) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Trace       string       `json:"trace"`
		BatchTasks  int          `json:"batch_tasks"`
		OwnBatch    int          `json:"own_batch_tasks,omitempty"`
		Interactive int          `json:"interactive_tasks"`
		Window      float64      `json:"window"`
		SDI         *float64     `json:"sd_i"`
		Note        string       `json:"note,omitempty"`
		Points      []StealPoint `json:"points"`
	}{t.Trace, t.BatchTasks, t.OwnBatch, t.Interactive, t.Window, finiteOrNil(t.SDI), t.Note, t.Points})
}

// NoInteractive is StealTrace.Note for a trace whose transfers are all
// batch tasks.
const NoInteractive = "no interactive transfers (every task of the trace is a batch task): the interactive slowdown SD_I and the ratio SD_I/SD_I+B are undefined"

// StealResult is `sluice sim steal`.
type StealResult struct {
	Testbed string       `json:"testbed"`
	Seed    int64        `json:"seed"`
	Traces  []StealTrace `json:"traces"`
}

// MaxStealBatch bounds the batch tasks Steal adds to a trace: a trace
// spanning weeks would need tens of thousands of them, and as many
// simulated tasks waiting from t = 0 take hours to replay.
const MaxStealBatch = 10000

// BatchSize is the size of the SC'15 §6.4 batch tasks.
const BatchSize = 50e9

// Steal runs the §6.4 experiment: each trace's interactive tasks are
// replayed alone under SEAL (SD_I), then with 50 GB batch tasks that fill
// the source's capacity the trace leaves unused over its window, arriving
// at t = 0, under each scheme. The trace's own batch tasks, if any, stay
// batch work in the runs with batch tasks and are left out of the
// interactive-only one. The window is the trace's span, at least the
// paper's 15 minutes, and the number of batch tasks is
// trace.BatchCountForWindow's (the paper's own counts for its traces).
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
	var bases []*job // nil when the trace has no interactive task
	var heads []StealTrace
	for _, ts := range traces {
		tr, err := LoadTrace(tb, ts)
		if err != nil {
			return nil, err
		}
		window := 0.0
		for _, x := range tr.Transfers {
			window = math.Max(window, x.Arrival)
		}
		window = math.Max(window, trace.DefaultMinutes*60)
		o := opt
		o.Window = window
		interactive := &trace.Trace{Name: tr.Name}
		for _, x := range tr.Transfers {
			if !x.Batch {
				interactive.Transfers = append(interactive.Transfers, x)
			}
		}
		head := StealTrace{Trace: tr.Name, Interactive: len(interactive.Transfers),
			OwnBatch: len(tr.Transfers) - len(interactive.Transfers), Window: window, SDI: math.NaN()}
		var base *job
		if len(interactive.Transfers) > 0 {
			base = &job{tb: tb, tr: interactive, name: "seal", so: so, opt: o}
		} else {
			head.Note = NoInteractive
		}
		withB := tr.Clone()
		srcCap := Gbps(tb.Endpoint(tb.Source).CapacityGbps)
		load := float64(tr.Stats().Bytes) / (srcCap * window)
		head.BatchTasks = trace.BatchCountForWindow(load, srcCap, window)
		if head.BatchTasks > MaxStealBatch {
			return nil, fmt.Errorf("sim: trace %s spans %.1f days: filling the capacity it leaves unused takes %d batch tasks of 50 GB, "+
				"more than the %d a steal experiment replays; replay a part of it (at most about %.0f days)",
				tr.Name, window/86400, head.BatchTasks, MaxStealBatch, float64(MaxStealBatch)*BatchSize/srcCap/86400)
		}
		if err := trace.AddBatch(withB, head.BatchTasks, BatchSize, tb.Source, tb.Destinations(), 0, ts.Seed); err != nil {
			return nil, err
		}
		if len(withB.Transfers) == 0 {
			return nil, fmt.Errorf("sim: trace %s: no transfer to replay", tr.Name)
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
		if base != nil {
			all = append(all, base)
		}
		for _, p := range ps {
			all = append(all, p.j)
		}
		plans = append(plans, ps)
		bases = append(bases, base)
		heads = append(heads, head)
	}
	if err := runJobs(all); err != nil {
		return nil, err
	}
	for i := range plans {
		st := heads[i]
		if bases[i] != nil {
			st.SDI = bases[i].res.Interactive.AvgSlowdown
		}
		for _, p := range plans[i] {
			r := p.j.res
			pt := StealPoint{Scheme: p.scheme, SpareUsed: r.SpareUsed, NormSlowdown: math.NaN(), AvgSlowdownInt: math.NaN(), Preemptions: r.Preemptions}
			if r.Interactive.N > 0 && bases[i] != nil {
				pt.AvgSlowdownInt = r.Interactive.AvgSlowdown
				pt.NormSlowdown = st.SDI / r.Interactive.AvgSlowdown
			}
			st.Points = append(st.Points, pt)
		}
		out.Traces = append(out.Traces, st)
	}
	return out, nil
}
