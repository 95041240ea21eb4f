package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// SweepParams are the simulator settings a sweep varies. Each list is the
// values of one axis; the grid is their product.
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
}

// Cell is one point of the grid.
type Cell struct {
	PerStream  float64 `json:"per_stream"`
	Decline    string  `json:"decline"`
	Burstiness float64 `json:"burstiness"`
}

func (c Cell) String() string {
	return fmt.Sprintf("per-stream=%g decline=%s burstiness=%g", c.PerStream, c.Decline, c.Burstiness)
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
}

// Sweep is `sluice sim sweep`.
type Sweep struct {
	Testbed    string     `json:"testbed"`
	Seeds      []int64    `json:"seeds"`
	Schedulers []string   `json:"schedulers"`
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

// RunSweep runs every scheduler on every (cell, load, seed).
func RunSweep(tb *Testbed, loads []string, seeds []int64, schedulers []string, p SweepParams, so sched.Options, opt Options) (*Sweep, error) {
	if len(loads) == 0 || len(seeds) == 0 || len(schedulers) == 0 {
		return nil, fmt.Errorf("sweep: need loads, seeds and schedulers")
	}
	if !slices.Contains(schedulers, "basecc1") {
		schedulers = append([]string{"basecc1"}, schedulers...) // for the concurrency CV
	}
	ps, dec, bur := p.PerStream, p.Decline, p.Burstiness
	if len(ps) == 0 {
		ps = []float64{0}
	}
	if len(dec) == 0 {
		dec = []string{"mild"}
	}
	if len(bur) == 0 {
		bur = []float64{0}
	}
	type key struct {
		cell Cell
		load string
	}
	var keys []key
	var jobs []*job
	for _, a := range ps {
		for _, d := range dec {
			for _, b := range bur {
				c := Cell{PerStream: a, Decline: d, Burstiness: b}
				ctb, err := cellTestbed(tb, c)
				if err != nil {
					return nil, err
				}
				for _, l := range loads {
					keys = append(keys, key{c, l})
					for _, seed := range seeds {
						tr, err := sweepTrace(ctb, l, seed, b)
						if err != nil {
							return nil, err
						}
						for _, s := range schedulers {
							jobs = append(jobs, &job{tb: ctb, tr: tr, name: s, so: so, opt: opt})
						}
					}
				}
			}
		}
	}
	if err := runJobs(jobs); err != nil {
		return nil, err
	}
	out := &Sweep{Testbed: tb.Name, Seeds: seeds, Schedulers: schedulers}
	per := len(seeds) * len(schedulers)
	for i, k := range keys {
		row := SweepRow{Cell: k.cell, Trace: k.load, Schedulers: map[string]SweepStats{}, Change: map[string]Change{}}
		vals := map[string]*[5][]float64{}
		var cvs []float64
		for _, j := range jobs[i*per : (i+1)*per] {
			v := vals[j.name]
			if v == nil {
				v = &[5][]float64{}
				vals[j.name] = v
			}
			r := j.res
			v[0] = append(v[0], r.Interactive.AvgSlowdown)
			v[1] = append(v[1], r.Interactive.AvgTurnaround)
			v[2] = append(v[2], r.Interactive.MaxSlowdown)
			v[3] = append(v[3], r.Interactive.MaxTurnaround)
			v[4] = append(v[4], float64(r.Preemptions))
			if j.name == "basecc1" {
				cvs = append(cvs, concurrencyCV(r, r.Window))
			}
		}
		row.ConcurrencyCV = median(cvs)
		for name, v := range vals {
			row.Schedulers[name] = SweepStats{median(v[0]), median(v[1]), median(v[2]), median(v[3]), median(v[4])}
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
		out.Rows = append(out.Rows, row)
	}
	return out, nil
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
