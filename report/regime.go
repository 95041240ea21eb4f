package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-dtn/sluice/sim"
)

// RegimeSize is the size of the regime map chart.
var RegimeSize = vg.Point{X: 16 * vg.Inch, Y: 8.5 * vg.Inch}

// The chart's panels are a quarter of its width: their titles and axis
// labels must stay shorter than that, or gonum/plot shrinks the data area
// to fit them.

// regimeSubjects are the schedulers the map shows against the baselines.
var regimeSubjects = []string{"seal", "seal+"}

// paired returns the rows that have intervals.
func paired(s *sim.Sweep) []sim.SweepRow {
	var out []sim.SweepRow
	for _, r := range s.Rows {
		if r.Paired != nil {
			out = append(out, r)
		}
	}
	return out
}

// RegimeMap draws the regime map of a sweep: a panel per decline and
// baseline admission for average slowdown (top row) and average
// turnaround (bottom row), each the change of SEAL (solid) and seal+ (dashed) against the
// best baseline with its interval (y) against the per-connection share
// (x, log scale), a colour per load. Rows that vary burstiness are drawn
// at the first burstiness only. It writes dir/name.svg and dir/name.png.
func RegimeMap(dir, name string, s *sim.Sweep) error {
	rows := paired(s)
	if len(rows) == 0 {
		return fmt.Errorf("report: %s: no row with intervals (a sweep of at least two seeds): %w", name, ErrEmpty)
	}
	var subjects []string
	for _, n := range regimeSubjects {
		if _, ok := rows[0].Paired.Vs[n]; ok {
			subjects = append(subjects, n)
		}
	}
	if len(subjects) == 0 {
		return fmt.Errorf("report: %s: neither seal nor seal+ was run: %w", name, ErrEmpty)
	}
	bur := rows[0].Cell.Burstiness
	for _, r := range rows {
		if r.Cell.PerStream <= 0 {
			return fmt.Errorf("report: %s: a row at the testbed's own curve (no per-stream share) has no place on the share axis", name)
		}
	}
	declines := orderOf(len(rows), func(i int) string { return rows[i].Cell.Decline })
	admissions := orderOf(len(rows), func(i int) string { return rows[i].Cell.Admission })
	loads := orderOf(len(rows), func(i int) string { return rows[i].Trace })
	shares := map[float64]bool{}
	for _, r := range rows {
		shares[r.Cell.PerStream] = true
	}
	ticks := slices.Sorted(maps.Keys(shares))

	f := newFigure(fmt.Sprintf("SEAL (solid), seal+ (dashed): %% change of the average vs the best baseline, mean of %d seeds, %.0f%% intervals (negative is better)",
		len(s.Seeds), 100*bootLevel(s)), RegimeSize)
	f.rows = 2
	metrics := []struct {
		title string
		get   func(sim.PairedDelta) sim.Interval
	}{
		{"slowdown", func(d sim.PairedDelta) sim.Interval { return d.Slowdown }},
		{"turnaround", func(d sim.PairedDelta) sim.Interval { return d.Turnaround }},
	}
	nSeries := len(subjects) * len(loads)
	for mi, m := range metrics {
		// One y range per metric, so that panels side by side compare.
		yLo, yHi := 0.0, 0.0
		for _, r := range rows {
			for _, sub := range subjects {
				if d, ok := r.Paired.Vs[sub]; ok {
					yLo, yHi = math.Min(yLo, m.get(d).Lo), math.Max(yHi, m.get(d).Hi)
				}
			}
		}
		pad := 0.05 * (yHi - yLo)
		for _, dec := range declines {
			for _, adm := range admissions {
				d := dec + " decline"
				if dec == "none" {
					d = "no decline"
				}
				title := m.title + ": " + d
				if adm != "" {
					title += ", " + adm + " admission"
				}
				p := newPlot(title, "per-connection share (log)", "% vs best baseline")
				p.X.Scale = plot.LogScale{}
				var tk []plot.Tick
				for _, v := range ticks {
					tk = append(tk, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
				}
				p.X.Tick.Marker = plot.ConstantTicks(tk)
				zero, err := plotter.NewLine(plotter.XYs{{X: ticks[0] / 1.3, Y: 0}, {X: ticks[len(ticks)-1] * 1.3, Y: 0}})
				if err != nil {
					return fmt.Errorf("report: %s: %w", name, err)
				}
				zero.Width = 0.75
				p.Add(zero)
				for si, sub := range subjects {
					for li, load := range loads {
						k := si*len(loads) + li
						// Spread the series a little along x so the
						// intervals do not hide one another.
						shift := math.Exp(0.06 * (float64(k) - float64(nSeries-1)/2))
						var pts struct {
							plotter.XYs
							plotter.YErrors
						}
						for _, r := range rows {
							if r.Cell.Decline != dec || r.Cell.Admission != adm || r.Trace != load || r.Cell.Burstiness != bur {
								continue
							}
							d, ok := r.Paired.Vs[sub]
							if !ok {
								continue
							}
							iv := m.get(d)
							if !finite(iv.Est, iv.Lo, iv.Hi) {
								return fmt.Errorf("report: %s: %s at %s load %s: interval is not finite", name, sub, r.Cell, load)
							}
							pts.XYs = append(pts.XYs, plotter.XY{X: r.Cell.PerStream * shift, Y: iv.Est})
							pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{iv.Est - iv.Lo, iv.Hi - iv.Est})
						}
						if len(pts.XYs) == 0 {
							continue
						}
						slices.SortFunc(pts.XYs, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
						line, sc, err := plotter.NewLinePoints(pts.XYs)
						if err != nil {
							return fmt.Errorf("report: %s: %w", name, err)
						}
						eb, err := plotter.NewYErrorBars(pts)
						if err != nil {
							return fmt.Errorf("report: %s: %w", name, err)
						}
						c := colour(li)
						line.Color, sc.Color, eb.Color = c, c, c
						line.Width, eb.Width = 1.2, 0.9
						eb.CapWidth = 4
						sc.Shape, sc.Radius = glyph(si), 2.5
						if si > 0 {
							line.Dashes = []vg.Length{5, 3}
						}
						p.Add(line, eb, sc)
						if mi == 0 && dec == declines[0] && adm == admissions[0] {
							f.add(fmt.Sprintf("%s, load %s%%", sub, strings.TrimSuffix(load, "%")), line, sc)
						}
					}
				}
				p.X.Min, p.X.Max = ticks[0]/1.3, ticks[len(ticks)-1]*1.3
				p.Y.Min, p.Y.Max = yLo-pad, yHi+pad
				f.panels = append(f.panels, p)
			}
		}
	}
	return f.save(dir, name)
}

func bootLevel(s *sim.Sweep) float64 {
	if s.Bootstrap != nil {
		return s.Bootstrap.Level
	}
	return sim.DefaultBootstrap.Level
}

// short names a baseline in a ranking.
func short(n string) string { return strings.TrimPrefix(n, "base") }

// iv writes an interval in percent; bold when it excludes zero.
func iv(i sim.Interval) string {
	s := fmt.Sprintf("%+.1f [%+.1f, %+.1f]", i.Est, i.Lo, i.Hi)
	if i.Excludes(0) {
		return "**" + s + "**"
	}
	return s
}

func shareOf(c sim.Cell) string {
	if c.PerStream <= 0 {
		return "testbed's"
	}
	return strconv.FormatFloat(c.PerStream, 'g', -1, 64)
}

func admissionOf(c sim.Cell) string {
	if c.Admission == "" {
		return sim.AdmitOnArrival
	}
	return c.Admission
}

// RegimeMarkdown writes a regime map sweep as Markdown: the table of
// every row (the baselines' ranking, whether it is the paper's, SEAL's
// and seal+'s changes against the best baseline with intervals), the
// ablations on the rows where SEAL does not win, a count of SEAL's wins
// and losses per load, and the criteria of sim.AssessSC15.
func RegimeMarkdown(w io.Writer, s *sim.Sweep) error {
	rows := paired(s)
	if len(rows) == 0 {
		return fmt.Errorf("report: regime map: no row with intervals (a sweep of at least two seeds): %w", ErrEmpty)
	}
	b := sim.DefaultBootstrap
	if s.Bootstrap != nil {
		b = *s.Bootstrap
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Testbed `%s`, seeds %s, schedulers %s. Each figure is a mean over the seeds; a change is against the row's best baseline (lowest mean), in percent (negative is better), with its %.0f%% percentile bootstrap interval (%d resamples of the seeds, paired by seed, the best baseline re-picked in each; generator seed %d). **Bold**: the interval excludes zero.\n\n",
		s.Testbed, seedRange(s.Seeds), strings.Join(s.Schedulers, ", "), 100*b.Level, b.Resamples, b.Seed)

	var subjects []string
	for _, n := range s.Schedulers {
		if _, ok := rows[0].Paired.Vs[n]; ok {
			subjects = append(subjects, n)
		}
	}
	out.WriteString("| share | decline | admission | load | baselines by avg slowdown (best first) | as in the paper |")
	for _, n := range subjects {
		fmt.Fprintf(&out, " %s slowdown | %s turnaround |", n, n)
	}
	out.WriteString("\n|---|---|---|---|---|---|")
	for range subjects {
		out.WriteString("---|---|")
	}
	out.WriteString("\n")
	for _, r := range rows {
		p := r.Paired
		var rk []string
		for _, n := range p.RankSlowdown {
			rk = append(rk, short(n))
		}
		rank := strings.Join(rk, " < ")
		if len(p.RankTurnaround) > 0 && len(p.RankSlowdown) > 0 && p.RankTurnaround[0] != p.RankSlowdown[0] {
			rank += " (turnaround: " + short(p.RankTurnaround[0]) + " best)"
		}
		asIn := "n/a"
		switch {
		case p.AsInPaper != nil && *p.AsInPaper:
			asIn = "yes"
		case p.AsInPaperBySlowdown != nil && *p.AsInPaperBySlowdown:
			asIn = "by slowdown only"
		case p.AsInPaper != nil:
			asIn = "no"
		}
		if p.RankNote != "" && (p.AsInPaper == nil || !*p.AsInPaper) {
			asIn += ": " + p.RankNote
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s%% | %s | %s |", shareOf(r.Cell), r.Cell.Decline, admissionOf(r.Cell), strings.TrimSuffix(r.Trace, "%"), rank, asIn)
		for _, n := range subjects {
			d := p.Vs[n]
			fmt.Fprintf(&out, " %s | %s |", iv(d.Slowdown), iv(d.Turnaround))
		}
		out.WriteString("\n")
	}

	if slices.Contains(subjects, "seal") {
		out.WriteString("\nSEAL per load: rows where it wins (both intervals below zero), loses (an interval above zero) or neither.\n\n| load | rows | wins | loses | neither |\n|---|---|---|---|---|\n")
		for _, load := range orderOf(len(rows), func(i int) string { return rows[i].Trace }) {
			var n, win, lose int
			for _, r := range rows {
				if r.Trace != load {
					continue
				}
				n++
				d := r.Paired.Vs["seal"]
				switch {
				case d.Wins():
					win++
				case d.Slowdown.Lo > 0 || d.Turnaround.Lo > 0:
					lose++
				}
			}
			fmt.Fprintf(&out, "| %s%% | %d | %d | %d | %d |\n", strings.TrimSuffix(load, "%"), n, win, lose, n-win-lose)
		}
	}

	if len(s.Ablations) > 0 {
		var losing []sim.SweepRow
		for _, r := range rows {
			if r.Paired.Ablations != nil {
				losing = append(losing, r)
			}
		}
		fmt.Fprintf(&out, "\n### Ablations where SEAL does not win (%d rows)\n\nSEAL with one setting changed (or two, joined), against the row's own baselines, unchanged; `cycle` is SEAL's scheduling cycle in seconds, `pf` its preemption factor (`off`: no preemption), `cc` its concurrency rule (`endpoints`: judge a connection by what it adds at the task's endpoints, `chooseCC` in `sched/seal.go`, SEAL's default; `literal`: Listing 2 as printed, by the task's own predicted throughput).\n", len(losing))
		if len(losing) == 0 {
			out.WriteString("\nSEAL wins in every row: no ablation was run.\n")
		}
		for _, m := range []struct {
			title string
			get   func(sim.PairedDelta) sim.Interval
		}{
			{"Average slowdown", func(d sim.PairedDelta) sim.Interval { return d.Slowdown }},
			{"Average turnaround", func(d sim.PairedDelta) sim.Interval { return d.Turnaround }},
		} {
			if len(losing) == 0 {
				break
			}
			fmt.Fprintf(&out, "\n%s, change against the best baseline:\n\n| share | decline | admission | load | seal |", m.title)
			for _, a := range s.Ablations {
				fmt.Fprintf(&out, " `%s` |", a)
			}
			out.WriteString("\n|---|---|---|---|---|")
			for range s.Ablations {
				out.WriteString("---|")
			}
			out.WriteString("\n")
			for _, r := range losing {
				fmt.Fprintf(&out, "| %s | %s | %s | %s%% | %s |", shareOf(r.Cell), r.Cell.Decline, admissionOf(r.Cell), strings.TrimSuffix(r.Trace, "%"), iv(m.get(r.Paired.Vs["seal"])))
				for _, a := range s.Ablations {
					if d, ok := r.Paired.Ablations[a]; ok {
						fmt.Fprintf(&out, " %s |", iv(m.get(d)))
					} else {
						out.WriteString(" - |")
					}
				}
				out.WriteString("\n")
			}
		}
		if len(losing) > 0 {
			out.WriteString("\nWhat turns each of these rows into a SEAL win (both intervals below zero), and the ablation that improves SEAL's worse metric most:\n\n| share | decline | admission | load | wins under | largest mover (points) |\n|---|---|---|---|---|---|\n")
			for _, r := range losing {
				wins, most, by := sim.Explanation(r)
				ws := "none"
				if len(wins) > 0 {
					ws = "`" + strings.Join(wins, "`, `") + "`"
				}
				fmt.Fprintf(&out, "| %s | %s | %s | %s%% | %s | `%s` (%+.1f) |\n", shareOf(r.Cell), r.Cell.Decline, admissionOf(r.Cell), strings.TrimSuffix(r.Trace, "%"), ws, most, -by)
			}
		}
	}

	out.WriteString("\n### Criteria\n\n")
	for _, c := range sim.AssessSC15(s) {
		writeCriterion(&out, c)
	}
	out.WriteString("\nSensitivity (not criteria): the same judged on the rows whose baselines rank as in the paper by average slowdown alone.\n\n")
	for _, c := range sim.SensitivitySC15(s) {
		writeCriterion(&out, c)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// StealMarkdown writes the STEAL experiment over seeds as Markdown: per
// trace the means over seeds and STEAL's change against SEAL1 and
// BaseVary with intervals, then the criterion.
func StealMarkdown(w io.Writer, s *sim.StealSeeds) error {
	if len(s.Traces) == 0 {
		return fmt.Errorf("report: steal: no trace: %w", ErrEmpty)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Testbed `%s`, seeds %s, STEAL with λ = %g; average interactive slowdown, mean over seeds; STEAL's change in percent with its %.0f%% percentile bootstrap interval (%d resamples, paired by seed; generator seed %d). **Bold**: the interval excludes zero.\n\n",
		s.Testbed, seedRange(s.Seeds), s.Lambda, 100*s.Bootstrap.Level, s.Bootstrap.Resamples, s.Bootstrap.Seed)
	out.WriteString("| trace | STEAL | SEAL1 | BaseVary | STEAL vs SEAL1 | STEAL vs BaseVary | spare used: STEAL / SEAL1 / BaseVary |\n|---|---|---|---|---|---|---|\n")
	for _, t := range s.Traces {
		fmt.Fprintf(&out, "| %s | %.2f | %.2f | %.1f | %s | %s | %.1f%% / %.1f%% / %.1f%% |\n", t.Trace,
			t.Slowdown["steal"], t.Slowdown["seal1"], t.Slowdown["basevary"], iv(t.VsSEAL1), iv(t.VsBaseVary),
			100*t.SpareUsed["steal"], 100*t.SpareUsed["seal1"], 100*t.SpareUsed["basevary"])
	}
	out.WriteString("\n")
	writeCriterion(&out, sim.AssessSTEAL(s))
	_, err := io.WriteString(w, out.String())
	return err
}

// writeCriterion writes a criterion as a list item, its verdict first.
func writeCriterion(out *strings.Builder, c sim.Criterion) {
	v := c.Verdict
	if v != "" {
		v = strings.ToUpper(v[:1]) + v[1:]
	}
	d := c.Detail
	if d != "" {
		d = strings.ToUpper(d[:1]) + d[1:]
	}
	fmt.Fprintf(out, "- **%s**: %s. %s.\n", v, c.Name, d)
}

// seedRange writes seeds as "1-10" when they run on, else as a list.
func seedRange(seeds []int64) string {
	run := len(seeds) > 1
	for i := 1; i < len(seeds); i++ {
		if seeds[i] != seeds[i-1]+1 {
			run = false
		}
	}
	if run {
		return fmt.Sprintf("%d-%d", seeds[0], seeds[len(seeds)-1])
	}
	var p []string
	for _, s := range seeds {
		p = append(p, strconv.FormatInt(s, 10))
	}
	return strings.Join(p, ", ")
}
