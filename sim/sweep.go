package sim

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// SweepParams are what a sweep varies and how it summarises. Each list
// is the values of one axis; the grid is their product.
type SweepParams struct {
	// PerStream is the fraction of a path one connection reaches on its
	// own (1: one stream fills the path; the SGData fit gives 0.25).
	PerStream []float64
	// Decline is the over-subscription response: "none", "mild" (the
	// testbed's own knees) or "strong" (knees halved, decline doubled).
	Decline []string
	// Burstiness is the trace generator's per-minute rate variation (see
	// trace.GenSpec.Burstiness); the sweep reports the coefficient of
	// variation of 1-minute concurrency it produces under BaseCC1.
	Burstiness []float64
	// Admission is how the static baselines admit tasks: "arrival" (the
	// moment a task arrives, as the services they stand for do; the
	// default) or "cycle" (at the world's scheduling cycles, as SEAL
	// does: sched.Options.CycleAdmission). The other schedulers do not
	// depend on it, so their runs serve every value.
	Admission []string
	// Ablations are variants of SEAL, each run in the rows where SEAL
	// does not win (Losing), against the same baseline runs.
	Ablations []Ablation
	// Bootstrap sets the intervals (zero fields: DefaultBootstrap's).
	Bootstrap Bootstrap
	// Workers bounds the simulations run at once (0: GOMAXPROCS).
	Workers int
}

// Admission values of SweepParams.Admission.
const (
	AdmitOnArrival = "arrival"
	AdmitOnCycle   = "cycle"
)

// NoPreemption as an Ablation's PF turns SEAL's preemption off: no
// waiting task's xfactor reaches a billion times a running one's.
const NoPreemption = 1e9

// Ablation is SEAL with some of its settings changed. Run where SEAL does
// not win, it shows what the loss owes to each setting; the baselines it
// is compared with are the row's own runs, unchanged.
type Ablation struct {
	// Cycle, if positive, is SEAL's scheduling cycle in seconds.
	Cycle float64 `json:"cycle,omitempty"`
	// PF, if positive, is SEAL's preemption factor; NoPreemption or more
	// turns preemption off.
	PF float64 `json:"pf,omitempty"`
	// CCRule, if set, is how SEAL chooses a task's concurrency:
	// "endpoints" (by what one more connection adds to the aggregate at
	// the task's endpoints: chooseCC in sched/seal.go, SEAL's default) or
	// "literal" (Listing 2 as printed: by the task's own predicted
	// throughput, sched.Options.OwnThroughputCC).
	CCRule string `json:"cc_rule,omitempty"`
}

// Concurrency rules of Ablation.CCRule.
const (
	CCRuleEndpoints = "endpoints"
	CCRuleLiteral   = "literal"
)

// Name is how tables name the variant: seal[cycle=0.1 pf=off cc=literal].
func (a Ablation) Name() string {
	var parts []string
	if a.Cycle > 0 {
		parts = append(parts, "cycle="+strconv.FormatFloat(a.Cycle, 'g', -1, 64))
	}
	switch {
	case a.PF >= NoPreemption:
		parts = append(parts, "pf=off")
	case a.PF > 0:
		parts = append(parts, "pf="+strconv.FormatFloat(a.PF, 'g', -1, 64))
	}
	if a.CCRule != "" {
		parts = append(parts, "cc="+a.CCRule)
	}
	return "seal[" + strings.Join(parts, " ") + "]"
}

func (a Ablation) validate() error {
	switch {
	case a.Cycle == 0 && a.PF == 0 && a.CCRule == "":
		return fmt.Errorf("ablation: changes nothing")
	case a.Cycle != 0 && !(a.Cycle >= 0.001 && a.Cycle <= 3600):
		return fmt.Errorf("ablation: cycle %v: want seconds from 0.001 to 3600", a.Cycle)
	case a.PF != 0 && !(a.PF >= 1):
		return fmt.Errorf("ablation: pf %v: want a preemption factor of at least 1, or off", a.PF)
	case a.CCRule != "" && a.CCRule != CCRuleEndpoints && a.CCRule != CCRuleLiteral:
		return fmt.Errorf("ablation: cc rule %q: want %s or %s", a.CCRule, CCRuleEndpoints, CCRuleLiteral)
	}
	return nil
}

// apply returns SEAL's scheduler and world options with the ablation's
// changes.
func (a Ablation) apply(so sched.Options, opt Options) (sched.Options, Options) {
	if a.Cycle > 0 {
		opt.Cycle = a.Cycle
	}
	if a.PF > 0 {
		so.PF = a.PF
	}
	switch a.CCRule {
	case CCRuleEndpoints:
		so.OwnThroughputCC = false
	case CCRuleLiteral:
		so.OwnThroughputCC = true
	}
	return so, opt
}

// ParseAblation reads an ablation written as settings joined by "+":
// "cycle=0.1", "pf=off", "pf=3", "cc=literal", "cycle=0.1+pf=off".
func ParseAblation(s string) (Ablation, error) {
	var a Ablation
	var parts []string
	for _, p := range strings.Split(s, "+") {
		// "1e+3" splits after the "e": a piece without "=" belongs to
		// the setting before it.
		if !strings.Contains(p, "=") && len(parts) > 0 {
			parts[len(parts)-1] += "+" + p
			continue
		}
		parts = append(parts, p)
	}
	seen := map[string]bool{}
	for _, p := range parts {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return a, fmt.Errorf("ablation %q: %q is not name=value (cycle=S, pf=F|off, cc=endpoints|literal)", s, p)
		}
		if k == "cc-rule" {
			k = "cc"
		}
		if seen[k] {
			return a, fmt.Errorf("ablation %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case "cycle":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0.001 && f <= 3600) {
				return a, fmt.Errorf("ablation %q: cycle %q: want seconds from 0.001 to 3600", s, v)
			}
			a.Cycle = f
		case "pf":
			if v == "off" {
				a.PF = NoPreemption
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 1 && f <= NoPreemption) {
				return a, fmt.Errorf("ablation %q: pf %q: want a preemption factor of at least 1, or off", s, v)
			}
			a.PF = f
		case "cc":
			if v != CCRuleEndpoints && v != CCRuleLiteral {
				return a, fmt.Errorf("ablation %q: cc %q: want %s (judge a connection by what it adds at the endpoints, SEAL's rule) or %s (Listing 2 read literally)", s, v, CCRuleEndpoints, CCRuleLiteral)
			}
			a.CCRule = v
		default:
			return a, fmt.Errorf("ablation %q: unknown setting %q (cycle, pf, cc)", s, k)
		}
	}
	return a, a.validate()
}

// Cell is one point of the grid.
type Cell struct {
	PerStream  float64 `json:"per_stream"`
	Decline    string  `json:"decline"`
	Burstiness float64 `json:"burstiness"`
	Admission  string  `json:"admission,omitempty"`
}

func (c Cell) String() string {
	s := fmt.Sprintf("per-stream=%g decline=%s burstiness=%g", c.PerStream, c.Decline, c.Burstiness)
	if c.Admission != "" {
		s += " admission=" + c.Admission
	}
	return s
}

// SweepStats are medians over seeds.
type SweepStats struct {
	AvgSlowdown   float64 `json:"avg_slowdown"`
	AvgTurnaround float64 `json:"avg_turnaround"`
	MaxSlowdown   float64 `json:"max_slowdown"`
	MaxTurnaround float64 `json:"max_turnaround"`
	Preemptions   float64 `json:"preemptions"`
}

// SweepRow is one cell and load of a sweep.
type SweepRow struct {
	Cell  Cell   `json:"cell"`
	Trace string `json:"trace"`
	// ConcurrencyCV is the median over seeds of the coefficient of
	// variation of 1-minute average concurrency under BaseCC1.
	ConcurrencyCV float64               `json:"concurrency_cv"`
	Schedulers    map[string]SweepStats `json:"schedulers"`
	// BestSlowdown and BestTurnaround are the best baselines by median
	// average slowdown and turnaround; Change is each other scheduler's
	// percentage change against them (negative is better).
	BestSlowdown   string            `json:"best_slowdown"`
	BestTurnaround string            `json:"best_turnaround"`
	Change         map[string]Change `json:"change"`
	// Paired is the row by means over seeds, with intervals (nil with
	// fewer than two seeds).
	Paired *PairedRow `json:"paired,omitempty"`
}

// Means are a scheduler's means over seeds.
type Means struct {
	AvgSlowdown   float64 `json:"avg_slowdown"`
	AvgTurnaround float64 `json:"avg_turnaround"`
}

// PairedDelta is a scheduler's change against the best baseline of its
// row, in percent of the best baseline's mean over seeds (negative is
// better), with bootstrap intervals paired by seed.
type PairedDelta struct {
	Slowdown   Interval `json:"slowdown"`
	Turnaround Interval `json:"turnaround"`
}

// PairedRow is a row by means over seeds: the baselines ranked, whether
// they rank as SC'15 found, and every other scheduler's (and ablation's)
// change against the best of them.
type PairedRow struct {
	Mean map[string]Means `json:"mean"`
	// RankSlowdown and RankTurnaround are the baselines, best (lowest
	// mean) first.
	RankSlowdown   []string `json:"rank_slowdown"`
	RankTurnaround []string `json:"rank_turnaround"`
	// AsInPaper says whether the baselines rank as in SC'15 §6.3
	// (paperRanking); nil where the paper says nothing (a load other
	// than 25, 45 or 60%) or the baselines to tell were not run.
	AsInPaper *bool `json:"as_in_paper,omitempty"`
	// AsInPaperBySlowdown is the same judged on average slowdown alone.
	AsInPaperBySlowdown *bool  `json:"as_in_paper_by_slowdown,omitempty"`
	RankNote            string `json:"rank_note,omitempty"`
	// Vs is each non-baseline scheduler's change against the best
	// baseline (re-picked in every resample).
	Vs map[string]PairedDelta `json:"vs_best"`
	// Losing: SEAL was run and does not win here, that is its interval
	// does not lie below zero in average slowdown and in average
	// turnaround. The ablations are run on these rows.
	Losing    bool                   `json:"seal_not_winning,omitempty"`
	Ablations map[string]PairedDelta `json:"ablations,omitempty"`
}

// Sweep is `sluice sim sweep`.
type Sweep struct {
	Testbed    string     `json:"testbed"`
	Seeds      []int64    `json:"seeds"`
	Schedulers []string   `json:"schedulers"`
	Ablations  []string   `json:"ablations,omitempty"`
	Bootstrap  *Bootstrap `json:"bootstrap,omitempty"`
	Rows       []SweepRow `json:"rows"`
}

// cellTestbed returns tb changed for a cell.
func cellTestbed(tb *Testbed, c Cell) (*Testbed, error) {
	out := *tb
	out.Endpoints = slices.Clone(tb.Endpoints)
	cv := *tb.Curve
	out.Curve = &cv
	if c.PerStream > 0 {
		out.Curve = curveWithFirst(DefaultCurve, c.PerStream)
	}
	switch c.Decline {
	case "", "mild":
	case "none":
		for i := range out.Endpoints {
			out.Endpoints[i].Knee, out.Endpoints[i].Decline = 0, 0
		}
	case "strong":
		for i := range out.Endpoints {
			e := &out.Endpoints[i]
			if e.Knee > 0 {
				e.Knee = max(e.Knee/2, 1)
				e.Decline *= 2
			}
		}
	default:
		return nil, fmt.Errorf("decline %q: want none, mild or strong", c.Decline)
	}
	if err := out.init(); err != nil {
		return nil, err
	}
	return &out, nil
}

// curveWithFirst rescales c's concurrency axis so that one connection
// reaches fraction f of the path; the shape (how it levels off) is kept.
// f >= 1 gives a flat curve: one connection fills the path.
func curveWithFirst(c Curve, f float64) *Curve {
	if f >= 1 {
		return &Curve{A: 1}
	}
	// Th(n) = n/sqrt(n² + B s n + C s² ) has Th(1) = f when
	// C s² + B s + (1 - 1/f²) = 0.
	a, b, k := c.C/c.A, c.B/c.A, 1-1/(f*f)
	s := (-b + math.Sqrt(b*b-4*a*k)) / (2 * a)
	return &Curve{A: 1, B: b * s, C: a * s * s}
}

// concurrencyCV is the coefficient of variation of 1-minute average
// concurrency (tasks running) over the trace window, from a run without
// preemption (each task ran in one piece ending at its finish).
func concurrencyCV(r *Result, window float64) float64 {
	minutes := int(math.Ceil(window / 60))
	if minutes < 2 {
		return 0
	}
	busy := make([]float64, minutes)
	for _, t := range r.Tasks {
		start, end := t.Finish-t.Run, t.Finish
		for m := max(int(start/60), 0); m < minutes && float64(m)*60 < end; m++ {
			lo, hi := math.Max(start, float64(m)*60), math.Min(end, float64(m+1)*60)
			if hi > lo {
				busy[m] += (hi - lo) / 60
			}
		}
	}
	var mean, sq float64
	for _, b := range busy {
		mean += b
	}
	mean /= float64(minutes)
	for _, b := range busy {
		sq += (b - mean) * (b - mean)
	}
	if mean == 0 {
		return 0
	}
	return math.Sqrt(sq/float64(minutes)) / mean
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runSummary is what a sweep keeps of one simulation (a Result holds
// every task; a sweep runs thousands).
type runSummary struct {
	avgSD, avgTA, maxSD, maxTA float64
	preemptions                int
	cv                         float64 // concurrency CV, when asked
}

// sweepJob is one simulation of a sweep.
type sweepJob struct {
	tb   *Testbed
	tr   *trace.Trace
	name string
	so   sched.Options
	opt  Options
	cv   bool
	out  runSummary
	err  error
}

// runSweepJobs runs the jobs on at most workers goroutines. Each run is a
// pure function of its job, so the results do not depend on the order.
func runSweepJobs(jobs []*sweepJob, workers int) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan *sweepJob)
	var wg sync.WaitGroup
	for range min(workers, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				s, err := sched.New(j.name, j.so)
				if err != nil {
					j.err = err
					continue
				}
				r, err := Run(j.tb, j.tr, s, j.opt)
				if err != nil {
					j.err = fmt.Errorf("%s on trace %s: %w", j.name, j.tr.Name, err)
					continue
				}
				j.out = runSummary{r.Interactive.AvgSlowdown, r.Interactive.AvgTurnaround,
					r.Interactive.MaxSlowdown, r.Interactive.MaxTurnaround, r.Preemptions, 0}
				if j.cv {
					j.out.cv = concurrencyCV(r, r.Window)
				}
			}
		}()
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return j.err
		}
	}
	return nil
}

// RunSweep runs every scheduler on every (cell, load, seed), then the
// ablations on the rows where SEAL does not win.
func RunSweep(tb *Testbed, loads []string, seeds []int64, schedulers []string, p SweepParams, so sched.Options, opt Options) (*Sweep, error) {
	if len(loads) == 0 || len(seeds) == 0 || len(schedulers) == 0 {
		return nil, fmt.Errorf("sweep: need loads, seeds and schedulers")
	}
	boot := p.Bootstrap.withDefaults()
	if err := boot.validate(); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if len(p.Ablations) > 0 {
		if !slices.Contains(schedulers, "seal") {
			return nil, fmt.Errorf("sweep: ablations vary SEAL; add seal to the schedulers")
		}
		if len(seeds) < 2 {
			return nil, fmt.Errorf("sweep: ablations run where SEAL's interval does not exclude zero; intervals need at least 2 seeds")
		}
		for _, a := range p.Ablations {
			if err := a.validate(); err != nil {
				return nil, fmt.Errorf("sweep: %s: %w", a.Name(), err)
			}
		}
	}
	if !slices.Contains(schedulers, "basecc1") {
		schedulers = append([]string{"basecc1"}, schedulers...) // for the concurrency CV
	}
	ps, dec, bur, adm := p.PerStream, p.Decline, p.Burstiness, p.Admission
	if len(ps) == 0 {
		ps = []float64{0}
	}
	if len(dec) == 0 {
		dec = []string{"mild"}
	}
	if len(bur) == 0 {
		bur = []float64{0}
	}
	for _, a := range adm {
		if a != AdmitOnArrival && a != AdmitOnCycle {
			return nil, fmt.Errorf("admission %q: want %s (the baselines start a task when it arrives) or %s (at the scheduling cycle, as SEAL)", a, AdmitOnArrival, AdmitOnCycle)
		}
	}
	admLabel := func(a string) string { return a }
	if len(adm) == 0 {
		// One value, unnamed in the cell (as before the axis existed).
		adm, admLabel = []string{AdmitOnArrival}, func(string) string { return "" }
	}

	// The grid without the admission axis: its testbeds and traces.
	type base struct {
		cell   Cell
		tb     *Testbed
		traces [][]*trace.Trace // [load][seed]
	}
	var bases []base
	for _, a := range ps {
		for _, d := range dec {
			for _, b := range bur {
				c := Cell{PerStream: a, Decline: d, Burstiness: b}
				ctb, err := cellTestbed(tb, c)
				if err != nil {
					return nil, err
				}
				bs := base{cell: c, tb: ctb, traces: make([][]*trace.Trace, len(loads))}
				for li, l := range loads {
					for _, seed := range seeds {
						tr, err := sweepTrace(ctb, l, seed, b)
						if err != nil {
							return nil, err
						}
						bs.traces[li] = append(bs.traces[li], tr)
					}
				}
				bases = append(bases, bs)
			}
		}
	}
	// Jobs are shared where the admission cannot change a run: only the
	// baselines depend on it.
	jobs := map[string]*sweepJob{}
	var order []*sweepJob
	// label names the run (a scheduler, or an ablation of SEAL), name
	// the scheduler it runs.
	job := func(bi, li, si int, label, name, admission string, so sched.Options, opt Options) *sweepJob {
		key := fmt.Sprintf("%d/%d/%d/%s/%s", bi, li, si, label, admission)
		if j := jobs[key]; j != nil {
			return j
		}
		j := &sweepJob{tb: bases[bi].tb, tr: bases[bi].traces[li][si], name: name, so: so, opt: opt, cv: name == "basecc1"}
		jobs[key] = j
		order = append(order, j)
		return j
	}
	type rowRef struct {
		bi, li int
		runs   map[string][]*sweepJob // per scheduler, per seed
	}
	var refs []rowRef
	out := &Sweep{Testbed: tb.Name, Seeds: seeds, Schedulers: schedulers}
	for bi, b := range bases {
		for _, a := range adm {
			for li, l := range loads {
				ref := rowRef{bi: bi, li: li, runs: map[string][]*sweepJob{}}
				for si := range seeds {
					for _, name := range schedulers {
						jso, key := so, ""
						if isBaseline(name) {
							jso.CycleAdmission, key = a == AdmitOnCycle, a
						}
						ref.runs[name] = append(ref.runs[name], job(bi, li, si, name, name, key, jso, opt))
					}
				}
				refs = append(refs, ref)
				c := b.cell
				c.Admission = admLabel(a)
				out.Rows = append(out.Rows, SweepRow{Cell: c, Trace: l})
			}
		}
	}
	if err := runSweepJobs(order, p.Workers); err != nil {
		return nil, err
	}
	for i := range out.Rows {
		if err := fillRow(&out.Rows[i], refs[i].runs, schedulers, len(seeds), boot); err != nil {
			return nil, fmt.Errorf("sweep: %s, trace %s: %w", out.Rows[i].Cell, out.Rows[i].Trace, err)
		}
	}
	if len(seeds) >= 2 {
		out.Bootstrap = &boot
	}
	if len(p.Ablations) == 0 {
		return out, nil
	}

	// The ablations, on the rows where SEAL does not win.
	order = order[:0]
	abl := make([]map[string][]*sweepJob, len(out.Rows))
	for i, r := range out.Rows {
		if r.Paired == nil || !r.Paired.Losing {
			continue
		}
		abl[i] = map[string][]*sweepJob{}
		for _, a := range p.Ablations {
			aso, aopt := a.apply(so, opt)
			for si := range seeds {
				abl[i][a.Name()] = append(abl[i][a.Name()], job(refs[i].bi, refs[i].li, si, a.Name(), "seal", "", aso, aopt))
			}
		}
	}
	for _, a := range p.Ablations {
		out.Ablations = append(out.Ablations, a.Name())
	}
	if err := runSweepJobs(order, p.Workers); err != nil {
		return nil, err
	}
	for i := range out.Rows {
		if abl[i] == nil {
			continue
		}
		pr := out.Rows[i].Paired
		pr.Ablations = map[string]PairedDelta{}
		for name, runs := range abl[i] {
			d, err := pairedDelta(runs, refs[i].runs, schedulers, boot)
			if err != nil {
				return nil, fmt.Errorf("sweep: %s, trace %s, %s: %w", out.Rows[i].Cell, out.Rows[i].Trace, name, err)
			}
			pr.Ablations[name] = d
		}
	}
	return out, nil
}

// series reads one figure of every seed's run.
func series(runs []*sweepJob, f func(runSummary) float64) []float64 {
	out := make([]float64, len(runs))
	for i, j := range runs {
		out[i] = f(j.out)
	}
	return out
}

func avgSD(s runSummary) float64 { return s.avgSD }
func avgTA(s runSummary) float64 { return s.avgTA }

// pairedDelta is the change of subject's runs against the best of the
// baselines among runs, per seed.
func pairedDelta(subject []*sweepJob, runs map[string][]*sweepJob, schedulers []string, boot Bootstrap) (PairedDelta, error) {
	var d PairedDelta
	for _, m := range []struct {
		f   func(runSummary) float64
		out *Interval
	}{{avgSD, &d.Slowdown}, {avgTA, &d.Turnaround}} {
		var bases [][]float64
		for _, n := range schedulers {
			if isBaseline(n) {
				bases = append(bases, series(runs[n], m.f))
			}
		}
		iv, _, err := PairedChange(series(subject, m.f), bases, boot)
		if err != nil {
			return d, err
		}
		*m.out = iv
	}
	return d, nil
}

// fillRow computes a row's figures from its runs.
func fillRow(row *SweepRow, runs map[string][]*sweepJob, schedulers []string, nSeeds int, boot Bootstrap) error {
	row.Schedulers, row.Change = map[string]SweepStats{}, map[string]Change{}
	var cvs []float64
	for _, j := range runs["basecc1"] {
		cvs = append(cvs, j.out.cv)
	}
	row.ConcurrencyCV = median(cvs)
	for name, js := range runs {
		row.Schedulers[name] = SweepStats{
			median(series(js, avgSD)), median(series(js, avgTA)),
			median(series(js, func(s runSummary) float64 { return s.maxSD })),
			median(series(js, func(s runSummary) float64 { return s.maxTA })),
			median(series(js, func(s runSummary) float64 { return float64(s.preemptions) })),
		}
	}
	for _, name := range schedulers {
		if !isBaseline(name) {
			continue
		}
		s := row.Schedulers[name]
		if row.BestSlowdown == "" || s.AvgSlowdown < row.Schedulers[row.BestSlowdown].AvgSlowdown {
			row.BestSlowdown = name
		}
		if row.BestTurnaround == "" || s.AvgTurnaround < row.Schedulers[row.BestTurnaround].AvgTurnaround {
			row.BestTurnaround = name
		}
	}
	if row.BestSlowdown != "" {
		for _, name := range schedulers {
			if isBaseline(name) {
				continue
			}
			s := row.Schedulers[name]
			row.Change[name] = Change{
				Slowdown:   pct(s.AvgSlowdown, row.Schedulers[row.BestSlowdown].AvgSlowdown),
				Turnaround: pct(s.AvgTurnaround, row.Schedulers[row.BestTurnaround].AvgTurnaround),
			}
		}
	}
	if nSeeds < 2 || row.BestSlowdown == "" {
		return nil
	}
	pr := &PairedRow{Mean: map[string]Means{}, Vs: map[string]PairedDelta{}}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	for name, js := range runs {
		pr.Mean[name] = Means{mean(series(js, avgSD)), mean(series(js, avgTA))}
	}
	for _, name := range schedulers {
		if isBaseline(name) {
			pr.RankSlowdown = append(pr.RankSlowdown, name)
		}
	}
	pr.RankTurnaround = slices.Clone(pr.RankSlowdown)
	// Stable, so that ties keep the schedulers' order.
	slices.SortStableFunc(pr.RankSlowdown, func(a, b string) int { return cmp.Compare(pr.Mean[a].AvgSlowdown, pr.Mean[b].AvgSlowdown) })
	slices.SortStableFunc(pr.RankTurnaround, func(a, b string) int { return cmp.Compare(pr.Mean[a].AvgTurnaround, pr.Mean[b].AvgTurnaround) })
	pr.AsInPaper, pr.AsInPaperBySlowdown, pr.RankNote = paperRanking(row.Trace, pr.Mean)
	for _, name := range schedulers {
		if isBaseline(name) {
			continue
		}
		d, err := pairedDelta(runs[name], runs, schedulers, boot)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pr.Vs[name] = d
	}
	if d, ok := pr.Vs["seal"]; ok {
		pr.Losing = !(d.Slowdown.Below(0) && d.Turnaround.Below(0))
	}
	row.Paired = pr
	return nil
}

// PaperBest is the baseline SC'15 §6.3 found best on one of its traces:
// BaseCC4 on the 25% trace, BaseCC2 on the 45% and 60% traces; "" for
// other loads, about which the paper says nothing.
func PaperBest(load string) string {
	l, variant, ok := generatedTrace(load)
	if !ok || variant != "" {
		return ""
	}
	switch math.Round(l * 100) {
	case 25:
		return "basecc4"
	case 45, 60:
		return "basecc2"
	}
	return ""
}

// paperRanking says whether the baselines rank as in SC'15 §6.3: the
// paper's best (PaperBest) has the lowest mean average slowdown and the
// lowest mean average turnaround of BaseCC1, BaseCC2 and BaseCC4, and a
// static concurrency above 4 (BaseCC8) is worse than both BaseCC2 and
// BaseCC4 in both. bySlowdown is the same judged on average slowdown
// alone (the metric SEAL minimises). BaseVary, which the paper ranks only
// against SEAL, is not part of it. The note says what differs, or what
// was not run.
func paperRanking(load string, mean map[string]Means) (both, bySlowdown *bool, note string) {
	want := PaperBest(load)
	if want == "" {
		return nil, nil, "the paper ranks the baselines only on its 25, 45 and 60% traces"
	}
	for _, n := range []string{"basecc1", "basecc2", "basecc4"} {
		if _, ok := mean[n]; !ok {
			return nil, nil, "needs basecc1, basecc2 and basecc4"
		}
	}
	var notes []string
	okBoth, okSD := true, true
	metrics := []struct {
		name string
		f    func(Means) float64
	}{{"slowdown", func(m Means) float64 { return m.AvgSlowdown }}, {"turnaround", func(m Means) float64 { return m.AvgTurnaround }}}
	for k, m := range metrics {
		differs := func(why string) {
			notes = append(notes, why)
			okBoth = false
			if k == 0 {
				okSD = false
			}
		}
		best := want
		for _, n := range []string{"basecc1", "basecc2", "basecc4"} {
			if m.f(mean[n]) < m.f(mean[best]) {
				best = n
			}
		}
		if best != want {
			differs(fmt.Sprintf("%s best in %s (paper: %s)", best, m.name, want))
		}
		if cc8, ok := mean["basecc8"]; ok {
			for _, n := range []string{"basecc2", "basecc4"} {
				if m.f(cc8) <= m.f(mean[n]) {
					differs(fmt.Sprintf("basecc8 not worse than %s in %s", n, m.name))
				}
			}
		}
	}
	if _, ok := mean["basecc8"]; !ok {
		notes = append(notes, "basecc8 not run: concurrency above 4 not checked")
	}
	return &okBoth, &okSD, strings.Join(notes, "; ")
}

// sweepTrace generates the named load ("25", "45", "60", "45-4x", "60-hv"
// or a number) with a burstiness override (0: the generator's default).
func sweepTrace(tb *Testbed, name string, seed int64, burstiness float64) (*trace.Trace, error) {
	load, variant := 0.0, ""
	if p, ok := paperTraces[strings.ToLower(name)]; ok {
		load, variant = p.load, p.variant
	} else if v, err := strconv.ParseFloat(strings.TrimSuffix(name, "%"), 64); err == nil {
		load = v
		if load > 2 {
			load /= 100
		}
	} else {
		return nil, fmt.Errorf("sweep: trace %q: want 25, 45, 60, 45-4x, 60-hv or a load", name)
	}
	return trace.Generate(trace.GenSpec{
		Load: load, Minutes: 15, Variant: variant, Seed: seed, Burstiness: burstiness,
		Source: tb.Source, Destinations: tb.Destinations(),
		SourceCapacity: Gbps(tb.Endpoint(tb.Source).CapacityGbps),
	})
}

// maxSeeds bounds a sweep's seeds (each is a full set of simulations).
const maxSeeds = 10000

// ParseSeeds reads "1..10" or "1,2,5" or a mix ("1..3,7").
func ParseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if lo, hi, ok := strings.Cut(part, ".."); ok {
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			switch {
			case err1 != nil || err2 != nil || b < a:
				return nil, fmt.Errorf("seeds %q: want a range like 1..10", part)
			case b-a >= maxSeeds || b-a < 0:
				return nil, fmt.Errorf("seeds %q: %.4g seeds; a sweep takes at most %d", part, float64(b)-float64(a)+1, maxSeeds)
			}
			for i := a; i <= b; i++ {
				out = append(out, i)
			}
			continue
		}
		v, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds %q: %w", part, err)
		}
		out = append(out, v)
		if len(out) > maxSeeds {
			return nil, fmt.Errorf("seeds %q: more than %d seeds", s, maxSeeds)
		}
	}
	if len(out) > maxSeeds {
		return nil, fmt.Errorf("seeds %q: more than %d seeds", s, maxSeeds)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no seeds in %q", s)
	}
	return out, nil
}
