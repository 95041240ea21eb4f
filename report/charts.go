package report

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-dtn/sluice/sim"
)

// AllClass names the group of all interactive tasks, after the size
// classes (the "all" column of `sluice sim compare`).
const AllClass = "all"

// ClassChange is one bar pair of Figure 3: a scheduler's percent change
// of average turnaround and average slowdown in one size class relative
// to a baseline scheduler on the same trace (negative is better).
type ClassChange struct {
	Trace     string `json:"trace,omitempty"` // shown in the title when set
	Scheduler string `json:"scheduler"`
	Baseline  string `json:"baseline"`
	// Class is one of sim.ClassNames or AllClass.
	Class      string  `json:"class"`
	Turnaround float64 `json:"turnaround_pct"`
	Slowdown   float64 `json:"slowdown_pct"`
}

// classStats is what Figure 3 needs of one scheduler's run.
type classStats struct {
	name    string
	all     sim.Stats
	byClass map[string]sim.Stats
}

// pct is the change of x relative to base in percent, 0 when base is 0
// (as the tables of `sluice sim compare` print it).
func pct(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return 100 * (x - base) / base
}

func changes(trace string, runs []classStats, baseline string) []ClassChange {
	var base *classStats
	for i := range runs {
		if runs[i].name == baseline {
			base = &runs[i]
			break
		}
	}
	if base == nil {
		return nil
	}
	var out []ClassChange
	for _, r := range runs {
		if r.name == baseline {
			continue
		}
		for _, c := range sim.ClassNames {
			s, ok1 := r.byClass[c]
			b, ok2 := base.byClass[c]
			if ok1 && ok2 {
				out = append(out, ClassChange{trace, r.name, baseline, c, pct(s.AvgTurnaround, b.AvgTurnaround), pct(s.AvgSlowdown, b.AvgSlowdown)})
			}
		}
		out = append(out, ClassChange{trace, r.name, baseline, AllClass, pct(r.all.AvgTurnaround, base.all.AvgTurnaround), pct(r.all.AvgSlowdown, base.all.AvgSlowdown)})
	}
	return out
}

// ChangesFrom computes Figure 3's rows from the results of several
// schedulers on one trace: for every result whose Scheduler is not
// baseline, in the order given, the change of its interactive average
// turnaround and slowdown relative to the baseline's, per size class
// that both have (in sim.ClassNames order) and then over all
// interactive tasks (AllClass). The results must come from the same
// trace (one chart per trace); nothing checks it. It returns nil when no
// result is the baseline's.
func ChangesFrom(results []*sim.Result, baseline string) []ClassChange {
	runs := make([]classStats, 0, len(results))
	trace := ""
	for _, r := range results {
		if r == nil {
			continue
		}
		runs = append(runs, classStats{r.Scheduler, r.Interactive, r.ByClass})
		if r.Scheduler == baseline {
			trace = r.Trace
		}
	}
	return changes(trace, runs, baseline)
}

// ChangesFromComparison is ChangesFrom for one trace's block of
// sim.Compare, the schedulers in the given order (those the block lacks
// are skipped). Its figures match the block's VsBaseCC1 when the
// baseline is basecc1.
func ChangesFromComparison(tc sim.TraceComparison, order []string, baseline string) []ClassChange {
	var runs []classStats
	for _, n := range order {
		s, ok := tc.Schedulers[n]
		if !ok {
			continue
		}
		all := sim.Stats{AvgSlowdown: s.AvgSlowdown, AvgTurnaround: s.AvgTurnaround, MaxSlowdown: s.MaxSlowdown, MaxTurnaround: s.MaxTurnaround}
		runs = append(runs, classStats{n, all, s.ByClass})
	}
	return changes(tc.Trace, runs, baseline)
}

// ChangeByClass draws Figure 3 of SC'15: two panels, the percent change
// of average turnaround and of average slowdown per size class (x axis,
// in sim.ClassNames order, AllClass last; other class names after them
// in order of appearance), a bar per scheduler in each class group, one
// colour per scheduler, relative to the rows' common baseline. It writes
// dir/name.svg and dir/name.png.
func ChangeByClass(dir, name string, rows []ClassChange) error {
	if len(rows) == 0 {
		return fmt.Errorf("report: %s: no class changes: %w", name, ErrEmpty)
	}
	baseline, trace := rows[0].Baseline, rows[0].Trace
	for _, r := range rows {
		if r.Baseline != baseline {
			return fmt.Errorf("report: %s: rows relative to both %q and %q; one chart has one baseline", name, baseline, r.Baseline)
		}
		if r.Scheduler == "" || r.Class == "" {
			return fmt.Errorf("report: %s: a row without scheduler or class", name)
		}
		if !finite(r.Turnaround, r.Slowdown) {
			return fmt.Errorf("report: %s: %s %s: change is not a finite number", name, r.Scheduler, r.Class)
		}
		if r.Trace != trace {
			trace = ""
		}
	}
	if baseline == "" {
		baseline = "baseline"
	}
	present := map[string]bool{}
	for _, r := range rows {
		present[r.Class] = true
	}
	var classes []string
	for _, c := range append(append([]string(nil), sim.ClassNames[:]...), AllClass) {
		if present[c] {
			classes = append(classes, c)
			delete(present, c)
		}
	}
	for _, c := range orderOf(len(rows), func(i int) string { return rows[i].Class }) {
		if present[c] {
			classes = append(classes, c)
		}
	}
	scheds := orderOf(len(rows), func(i int) string { return rows[i].Scheduler })
	ci := map[string]int{}
	for i, c := range classes {
		ci[c] = i
	}

	title := "Change per size class vs " + baseline + " (negative is better)"
	if trace != "" {
		title = "Trace " + trace + ": change per size class vs " + baseline + " (negative is better)"
	}
	f := newFigure(title, ChangeSize)
	var bars []*plotter.BarChart // per panel, per scheduler
	yLabel := "% change vs " + baseline
	panels := []struct {
		title string
		get   func(ClassChange) float64
	}{
		{"Average turnaround", func(r ClassChange) float64 { return r.Turnaround }},
		{"Average slowdown", func(r ClassChange) float64 { return r.Slowdown }},
	}
	for k, pn := range panels {
		p := newPlot(pn.title, "size class (bytes)", yLabel)
		for i, s := range scheds {
			vals := make(plotter.Values, len(classes))
			for _, r := range rows {
				if r.Scheduler == s {
					vals[ci[r.Class]] = pn.get(r)
				}
			}
			b, err := plotter.NewBarChart(vals, 1) // sized below
			if err != nil {
				return fmt.Errorf("report: %s: %w", name, err)
			}
			b.Color = colour(i)
			b.LineStyle.Width = 0
			bars = append(bars, b)
			p.Add(b)
			if k == 0 {
				f.add(s, b)
			}
		}
		zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(classes)) - 0.5, Y: 0}})
		if err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		zero.Width = 0.75
		p.Add(zero)
		p.NominalX(classes...)
		p.X.Min, p.X.Max = -0.5, float64(len(classes))-0.5
		pad := 0.05 * (p.Y.Max - p.Y.Min)
		if pad == 0 {
			pad = 1
		}
		p.Y.Min, p.Y.Max = p.Y.Min-pad, p.Y.Max+pad
		f.panels = append(f.panels, p)
	}
	// Bars fill 80% of their group; the legend's width is known now.
	bw := f.panelWidth(len(f.panels)) / vg.Length(len(classes)) * 0.8 / vg.Length(len(scheds))
	bw = vg.Length(math.Max(2, math.Min(18, float64(bw))))
	for j, b := range bars {
		b.Width = bw
		b.Offset = vg.Length(float64(j%len(scheds))-float64(len(scheds)-1)/2) * bw
	}
	return f.save(dir, name)
}

// SparePoint is one point of Figure 6: a scheme (a scheduler, or STEAL
// with one λ) on one trace.
type SparePoint struct {
	// Series groups points under one colour, glyph and legend entry
	// (the scheme); Label is written beside the point (the trace), if set.
	Series string `json:"series"`
	Label  string `json:"label,omitempty"`
	// SpareUsed is the fraction of the spare bandwidth used by batch
	// tasks, B_B/(B_T-B_I) (sim.Result.SpareUsed); NormSlowdown is the
	// interactive slowdown without batch tasks over that with them,
	// SD_I/SD_I+B (sim.StealPoint.NormSlowdown; 1 is no harm).
	SpareUsed    float64 `json:"spare_used"`
	NormSlowdown float64 `json:"norm_slowdown"`
}

// SparePoints turns sim.Steal's results into Figure 6's points: a series
// per scheme, each point labelled with its trace when there are several.
func SparePoints(res *sim.StealResult) []SparePoint {
	if res == nil {
		return nil
	}
	var out []SparePoint
	for _, st := range res.Traces {
		for _, p := range st.Points {
			q := SparePoint{Series: p.Scheme, SpareUsed: p.SpareUsed, NormSlowdown: p.NormSlowdown}
			if len(res.Traces) > 1 {
				q.Label = st.Trace
			}
			out = append(out, q)
		}
	}
	return out
}

// SpareVsSlowdown draws Figure 6 of SC'15: the fraction of spare
// bandwidth used by batch tasks (x) against the normalised interactive
// slowdown (y), a colour and glyph per series with a legend, each point
// labelled. It writes dir/name.svg and dir/name.png.
func SpareVsSlowdown(dir, name string, pts []SparePoint) error {
	if len(pts) == 0 {
		return fmt.Errorf("report: %s: no points: %w", name, ErrEmpty)
	}
	for _, p := range pts {
		if p.Series == "" {
			return fmt.Errorf("report: %s: a point without series", name)
		}
		if !finite(p.SpareUsed, p.NormSlowdown) {
			return fmt.Errorf("report: %s: %s %s: coordinates are not finite numbers", name, p.Series, p.Label)
		}
	}
	f := newFigure("Spare bandwidth used by batch tasks vs interactive slowdown", SpareSize)
	p := newPlot("", "spare bandwidth used by batch tasks, B_B / (B_T − B_I) (fraction)", "normalised interactive slowdown SD_I / SD_I+B (ratio)")
	var labels plotter.XYLabels
	for i, s := range orderOf(len(pts), func(i int) string { return pts[i].Series }) {
		var xys plotter.XYs
		for _, q := range pts {
			if q.Series == s {
				xys = append(xys, plotter.XY{X: q.SpareUsed, Y: q.NormSlowdown})
				if q.Label != "" {
					labels.XYs = append(labels.XYs, plotter.XY{X: q.SpareUsed, Y: q.NormSlowdown})
					labels.Labels = append(labels.Labels, q.Label)
				}
			}
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		sc.GlyphStyle.Color = colour(i)
		sc.GlyphStyle.Shape = glyph(i)
		sc.GlyphStyle.Radius = 4
		p.Add(sc)
		f.add(s, sc)
	}
	if len(labels.Labels) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i] = textStyle(8)
		}
		l.Offset = vg.Point{X: 6, Y: -3}
		p.Add(l)
	}
	// Both quantities are fractions of a whole: show 0-1 at least.
	p.X.Min, p.Y.Min = math.Min(p.X.Min, 0), math.Min(p.Y.Min, 0)
	p.X.Max, p.Y.Max = math.Max(p.X.Max*1.08, 1), math.Max(p.Y.Max*1.05, 1)
	f.panels = []*plot.Plot{p}
	return f.save(dir, name)
}

// Series is one endpoint's throughput over time: MBps[i] MB/s at T[i]
// seconds.
type Series struct {
	Name string    `json:"name"`
	T    []float64 `json:"t"`
	MBps []float64 `json:"mbps"`
}

// ThroughputOverTime draws each series' throughput (MB/s) over time (s)
// as a line, one colour per series with a legend. It writes
// dir/name.svg and dir/name.png.
func ThroughputOverTime(dir, name string, series []Series) error {
	if len(series) == 0 {
		return fmt.Errorf("report: %s: no series: %w", name, ErrEmpty)
	}
	f := newFigure("Throughput per endpoint over time", ThroughputSize)
	p := newPlot("", "time (s)", "throughput (MB/s)")
	for i, s := range series {
		if s.Name == "" {
			return fmt.Errorf("report: %s: series %d has no name", name, i)
		}
		if len(s.T) == 0 || len(s.T) != len(s.MBps) {
			return fmt.Errorf("report: %s: series %s: %d times and %d values: %w", name, s.Name, len(s.T), len(s.MBps), ErrEmpty)
		}
		xys := make(plotter.XYs, len(s.T))
		for j := range s.T {
			if !finite(s.T[j], s.MBps[j]) {
				return fmt.Errorf("report: %s: series %s: point %d is not finite", name, s.Name, j)
			}
			xys[j] = plotter.XY{X: s.T[j], Y: s.MBps[j]}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		l.Color = colour(i)
		l.Width = 1.5
		if i >= len(palette) {
			l.Dashes = []vg.Length{6, 3}
		}
		p.Add(l)
		f.add(s.Name, l)
	}
	p.Y.Min = math.Min(p.Y.Min, 0)
	p.Y.Max *= 1.05
	f.panels = []*plot.Plot{p}
	return f.save(dir, name)
}

// ThroughputVsStreams draws each series' throughput (MB/s) against the
// number of streams it ran with (Series.T holds the stream counts), one
// line and colour per tool, on a log2 axis of streams; a series of one
// point is a marker (a tool with no setting to sweep). It writes
// dir/name.svg and dir/name.png.
func ThroughputVsStreams(dir, name, title string, series []Series) error {
	if len(series) == 0 {
		return fmt.Errorf("report: %s: no series: %w", name, ErrEmpty)
	}
	f := newFigure(title, ThroughputSize)
	p := newPlot("", "streams (files or partial transfers at once; log scale)", "throughput (MB/s)")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	for i, s := range series {
		if s.Name == "" {
			return fmt.Errorf("report: %s: series %d has no name", name, i)
		}
		if len(s.T) == 0 || len(s.T) != len(s.MBps) {
			return fmt.Errorf("report: %s: series %s: %d stream counts and %d values: %w", name, s.Name, len(s.T), len(s.MBps), ErrEmpty)
		}
		xys := make(plotter.XYs, len(s.T))
		for j := range s.T {
			if !finite(s.T[j], s.MBps[j]) || s.T[j] <= 0 {
				return fmt.Errorf("report: %s: series %s: point %d is not a positive stream count with a finite throughput", name, s.Name, j)
			}
			xys[j] = plotter.XY{X: s.T[j], Y: s.MBps[j]}
		}
		lp, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("report: %s: %w", name, err)
		}
		lp.Color, pts.Color = colour(i), colour(i)
		lp.Width = 1.5
		pts.Shape = glyph(i)
		pts.Radius = vg.Points(3.5)
		if len(xys) == 1 {
			p.Add(pts)
			f.add(s.Name, pts)
			continue
		}
		p.Add(lp, pts)
		f.add(s.Name, lp, pts)
	}
	p.Y.Min = 0
	p.Y.Max *= 1.08
	f.panels = []*plot.Plot{p}
	return f.save(dir, name)
}

// MedianOf summarises repetitions of one scheduler on one workload (the
// testbed's --reps, each with its own trace seed) for ChangesFrom: the
// median over the results of the interactive average turnaround and
// slowdown, overall and per size class (over the results that have the
// class); task counts and maxima are left zero. The first result gives
// the names; nil when there is none.
func MedianOf(results []*sim.Result) *sim.Result {
	var rs []*sim.Result
	for _, r := range results {
		if r != nil {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	med := func(get func(*sim.Result) (sim.Stats, bool)) (sim.Stats, bool) {
		var ta, sd []float64
		for _, r := range rs {
			if s, ok := get(r); ok {
				ta, sd = append(ta, s.AvgTurnaround), append(sd, s.AvgSlowdown)
			}
		}
		if len(ta) == 0 {
			return sim.Stats{}, false
		}
		return sim.Stats{AvgTurnaround: median(ta), AvgSlowdown: median(sd)}, true
	}
	out := &sim.Result{Testbed: rs[0].Testbed, Trace: rs[0].Trace, Scheduler: rs[0].Scheduler, ByClass: map[string]sim.Stats{}}
	out.Interactive, _ = med(func(r *sim.Result) (sim.Stats, bool) { return r.Interactive, true })
	var classes []string
	for _, r := range rs {
		for c := range r.ByClass {
			classes = append(classes, c)
		}
	}
	for _, c := range classes {
		if _, done := out.ByClass[c]; done {
			continue
		}
		if s, ok := med(func(r *sim.Result) (sim.Stats, bool) { s, ok := r.ByClass[c]; return s, ok }); ok {
			out.ByClass[c] = s
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
