package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/report"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/trace"
)

// simFlags are the flags shared by the sim subcommands.
type simFlags struct {
	testbed string
	format  string
	seed    int64
	jsonOut bool
	pf      float64
	beta    float64
	maxCC   int
	cycle   float64
	startup float64
	ownCC   bool
	live    bool
}

func (f *simFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.testbed, "testbed", "sc15", "built-in testbed ("+strings.Join(sim.TestbedNames(), ", ")+") or a JSON file")
	cmd.Flags().StringVar(&f.format, "format", "", "trace file format: csv, jsonl or gridftp (default: guess)")
	cmd.Flags().Int64Var(&f.seed, "seed", 1, "seed for generated traces and endpoint mapping")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print JSON")
	cmd.Flags().Float64Var(&f.pf, "pf", 1.5, "SEAL preemption factor")
	cmd.Flags().Float64Var(&f.beta, "beta", 0.10, "FindThrCC threshold (fractional gain needed to add concurrency)")
	cmd.Flags().IntVar(&f.maxCC, "max-cc", 16, "largest concurrency of one task")
	cmd.Flags().Float64Var(&f.cycle, "cycle", 0.5, "scheduling cycle in seconds")
	cmd.Flags().Float64Var(&f.startup, "startup", 0.5, "start-up cost of a (re)start in seconds")
	cmd.Flags().BoolVar(&f.live, "live", false, "show the scheduler the world as the live service does (rates from the engine's meter read at ticks, tasks pending until their first sub-write, victims paused at once, the model fed by completions), told --startup as its start-up cost; default: the paper's idealised view")
	cmd.Flags().BoolVar(&f.ownCC, "own-throughput-cc", false, "SEAL/STEAL: choose concurrency on the task's own predicted throughput (Listing 2 read literally) instead of on its endpoints' aggregate")
	moreFlags(cmd, "docs/simulator.md", "pf", "beta", "max-cc", "cycle", "startup", "live", "own-throughput-cc")
}

// options turns the flags into the scheduler's and the world's options.
// The libraries read zero as "the default"; a user who types a value means
// it, so values the simulator cannot honour are refused here by name
// rather than replaced (or, for NaN, left to stall a run).
func (f *simFlags) options(cmd *cobra.Command) (sched.Options, sim.Options, error) {
	set := func(name string) bool { return cmd.Flags().Changed(name) }
	for _, c := range []struct {
		name   string
		v      float64
		lo, hi float64
		why    string
	}{
		{"cycle", f.cycle, 0.001, 3600, "seconds between scheduling cycles, from 0.001 to 3600"},
		{"startup", f.startup, 0, 3600, "seconds of start-up cost, from 0 to 3600"},
		{"pf", f.pf, 1, 1e6, "a preemption factor of at least 1 (a waiting task must matter pf times more than the tasks it preempts)"},
		{"beta", f.beta, 1e-9, 100, "a positive fractional gain"},
	} {
		if set(c.name) && !(c.v >= c.lo && c.v <= c.hi) {
			return sched.Options{}, sim.Options{}, fmt.Errorf("--%s %v: want %s", c.name, c.v, c.why)
		}
	}
	if set("max-cc") && f.maxCC < 1 {
		return sched.Options{}, sim.Options{}, fmt.Errorf("--max-cc %d: want at least 1", f.maxCC)
	}
	o := sim.Options{Cycle: f.cycle, Startup: f.startup, NoStartup: f.startup == 0}
	if f.live {
		o.Live = sim.LiveDefaults()
		if f.startup > 0 {
			o.Live.StartupCost = f.startup
		}
	}
	return sched.Options{PF: f.pf, Beta: f.beta, MaxCC: f.maxCC, OwnThroughputCC: f.ownCC}, o, nil
}

// traces reads the --trace values: each names one trace file that
// exists (taken whole, so a path may contain commas) or is a
// comma-separated list of traces. For trace files, what the loader read
// and left out goes to notes, one line per file.
func (f *simFlags) traces(values []string, notes io.Writer) ([]sim.TraceSpec, error) {
	var out []sim.TraceSpec
	add := func(n string) {
		name := n
		report := func(rep *trace.LoadReport) { fmt.Fprintf(notes, "trace %s: %s\n", name, rep) }
		out = append(out, sim.TraceSpec{Name: n, Format: f.format, Seed: f.seed, Report: report})
	}
	for _, v := range values {
		if _, err := os.Stat(v); err == nil {
			add(v)
			continue
		}
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				add(n)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--trace %q: no trace named", strings.Join(values, ","))
	}
	return out, nil
}

// traceFlag registers a repeatable --trace flag.
func traceFlag(cmd *cobra.Command, p *[]string, def, what string) {
	cmd.Flags().StringArrayVar(p, "trace", []string{def}, what+
		"; repeatable, and a value that names an existing file is taken whole, so a path may contain commas (a file wins over a trace name)")
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sim", Short: "Replay traces through the schedulers in the deterministic simulator"}
	cmd.AddCommand(newSimRun(), newSimCompare(), newSimSteal(), newSimFig2(), newSimSweep(), newSimFacility())
	return cmd
}

func newSimRun() *cobra.Command {
	var f simFlags
	var tr []string
	var scheduler string
	var lambda float64
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Replay one trace under one scheduler",
		Example: `  sluice sim run --trace 45 --scheduler seal
  sluice sim run --trace my-gridftp.log --format gridftp --scheduler steal --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := sim.LoadTestbed(f.testbed)
			if err != nil {
				return err
			}
			specs, err := f.traces(tr, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if len(specs) != 1 {
				return fmt.Errorf("--trace takes one trace (use `sluice sim compare` for several)")
			}
			// As `sim steal --lambda`: the scheduler would replace 0 and
			// negative values by 1, and NaN or values above 1 would turn
			// off its saturation test; other schedulers ignore λ.
			if cmd.Flags().Changed("lambda") {
				if !(lambda > 0 && lambda <= 1) {
					return fmt.Errorf("--lambda %v: want a fraction in (0, 1]", lambda)
				}
				if scheduler != "steal" {
					return fmt.Errorf("--lambda only applies to --scheduler steal, not %s", scheduler)
				}
			}
			t, err := sim.LoadTrace(tb, specs[0])
			if err != nil {
				return err
			}
			so, opt, err := f.options(cmd)
			if err != nil {
				return err
			}
			so.Lambda = lambda
			s, err := sched.New(scheduler, so)
			if err != nil {
				return err
			}
			if opt.Observer == nil {
				opt.Observer = replayProgress(cmd.ErrOrStderr(), t, progressEvery)
			}
			res, err := sim.Run(tb, t, s, opt)
			if err != nil {
				return err
			}
			if f.jsonOut {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "testbed %s, trace %s (%d tasks), scheduler %s\n", res.Testbed, res.Trace, len(res.Tasks), res.Scheduler)
			fmt.Fprintln(w, "class\ttasks\tavg slowdown\tavg turnaround s\tmax slowdown\tmax turnaround s\t")
			row := func(name string, s sim.Stats) {
				fmt.Fprintf(w, "%s\t%d\t%.3f\t%.2f\t%.2f\t%.1f\t\n", name, s.N, s.AvgSlowdown, s.AvgTurnaround, s.MaxSlowdown, s.MaxTurnaround)
			}
			for _, c := range sim.ClassNames {
				if s, ok := res.ByClass[c]; ok {
					row(c, s)
				}
			}
			if res.Interactive.N > 0 {
				row("all", res.Interactive)
			}
			if res.Batch.N > 0 {
				row("batch", res.Batch)
			}
			w.Flush()
			if res.Interactive.N == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "all %d tasks are batch tasks: there is no interactive transfer to report slowdown for\n", res.Batch.N)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "starts %d, preemptions %d, cc changes %d, makespan %.1f s, moved %.1f GB (%.2f GB re-sent), model error %.0f%%\n",
				res.Starts, res.Preemptions, res.Resizes, res.Makespan, res.BytesMoved/1e9, res.BytesLost/1e9, 100*res.ModelError)
			if res.Batch.N > 0 && res.Window > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "spare bandwidth used by batch tasks: %.1f%%\n", 100*res.SpareUsed)
			}
			return nil
		},
	}
	f.register(cmd)
	traceFlag(cmd, &tr, "45", "SC'15 trace (25, 45, 60, 45-4x, 60-hv), a load (0.3), or a trace file")
	cmd.Flags().StringVar(&scheduler, "scheduler", "seal", "scheduler: "+strings.Join(sched.Names(), ", "))
	cmd.Flags().Float64Var(&lambda, "lambda", 1, "STEAL: fraction of spare bandwidth batch tasks may use")
	return cmd
}

func newSimCompare() *cobra.Command {
	var f simFlags
	var traces []string
	var schedulers, plotDir string
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Compare schedulers on traces (the layout of SC'15 Figure 3)",
		Long: `Runs every scheduler on every trace and prints, per trace, each scheduler's
figures and the % change per size class against basecc1; --plot draws SC'15's
Figure 3 of them. See docs/simulator.md.`,
		Example: `  sluice sim compare --trace 25,45,60,45-4x --schedulers basecc1,basecc2,basecc4,basevary,seal
  sluice sim compare --trace 45 --schedulers basecc1,basecc2,seal --plot charts/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := sim.LoadTestbed(f.testbed)
			if err != nil {
				return err
			}
			so, opt, err := f.options(cmd)
			if err != nil {
				return err
			}
			names := splitList(schedulers)
			for _, n := range names {
				if _, err := sched.New(n, so); err != nil {
					return err
				}
			}
			if err := checkPlot(plotDir, names); err != nil {
				return err
			}
			if len(names) == 0 {
				return fmt.Errorf("--schedulers %q: no scheduler named", schedulers)
			}
			specs, err := f.traces(traces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res, err := sim.Compare(tb, specs, names, so, opt)
			if err != nil {
				return err
			}
			if f.jsonOut {
				if err := printJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				printComparison(cmd.OutOrStdout(), res, names)
			}
			if plotDir != "" {
				return plotComparisonPoints(cmd.ErrOrStderr(), plotDir, res, names)
			}
			return nil
		},
	}
	f.register(cmd)
	traceFlag(cmd, &traces, "25,45,60,45-4x", "comma-separated traces")
	cmd.Flags().StringVar(&schedulers, "schedulers", "basecc1,basecc2,basecc4,basevary,seal", "comma-separated schedulers")
	cmd.Flags().StringVar(&plotDir, "plot", "", plotFlagHelp+": compare-TRACE, Figure 3 per trace")
	return cmd
}

// unnoted splits a result's traces into those without a note (those
// with interactive transfers, which a chart can show) and the names of
// the others.
func unnoted[T any](ts []T, of func(T) (name, note string)) (keep []T, left []string) {
	for _, t := range ts {
		if name, note := of(t); note != "" {
			left = append(left, name)
		} else {
			keep = append(keep, t)
		}
	}
	return keep, left
}

// plotComparisonPoints draws Figure 3 for the traces that have
// interactive transfers; the others have no change to draw, which it
// says.
func plotComparisonPoints(log io.Writer, dir string, res *sim.Comparison, names []string) error {
	keep := *res
	var left []string
	keep.Traces, left = unnoted(res.Traces, func(tc sim.TraceComparison) (string, string) { return tc.Trace, tc.Note })
	if len(keep.Traces) == 0 {
		return fmt.Errorf("--plot: no Figure 3 chart to draw: trace %s has no interactive transfers (all its tasks are batch tasks)", strings.Join(left, ", "))
	}
	if len(left) > 0 {
		fmt.Fprintf(log, "--plot: no chart for trace %s: no interactive transfers (all its tasks are batch tasks)\n", strings.Join(left, ", "))
	}
	return plotComparison(log, dir, &keep, names)
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func printComparison(out io.Writer, res *sim.Comparison, names []string) {
	for _, tc := range res.Traces {
		fmt.Fprintf(out, "\ntrace %s (%d tasks) on %s, seed %d\n", tc.Trace, tc.Tasks, res.Testbed, res.Seed)
		if tc.Note != "" {
			fmt.Fprintf(out, "%s\n", tc.Note)
			continue
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "scheduler\tavg slowdown\tavg turnaround s\tmax slowdown\tmax turnaround s\tpreemptions\t")
		for _, n := range names {
			s := tc.Schedulers[n]
			fmt.Fprintf(w, "%s\t%.3f\t%.2f\t%.2f\t%.1f\t%d\t\n", n, s.AvgSlowdown, s.AvgTurnaround, s.MaxSlowdown, s.MaxTurnaround, s.Preemptions)
		}
		w.Flush()
		if tc.VsBaseCC1 != nil {
			fmt.Fprintln(out, "% change vs basecc1, turnaround / slowdown (negative is better):")
			w = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprint(w, "scheduler\t")
			classes := append(append([]string{}, sim.ClassNames[:]...), "all")
			for _, c := range classes {
				fmt.Fprintf(w, "%s\t", c)
			}
			fmt.Fprintln(w)
			for _, n := range names {
				m, ok := tc.VsBaseCC1[n]
				if !ok {
					continue
				}
				fmt.Fprintf(w, "%s\t", n)
				for _, c := range classes {
					if ch, ok := m[c]; ok {
						fmt.Fprintf(w, "%+.0f / %+.0f\t", ch.Turnaround, ch.Slowdown)
					} else {
						fmt.Fprint(w, "-\t")
					}
				}
				fmt.Fprintln(w)
			}
			w.Flush()
		}
		if tc.AvgVsBest != nil {
			fmt.Fprintf(out, "%s vs best baseline (%s): average turnaround %+.1f%%, slowdown %+.1f%%; worst turnaround %+.1f%%, slowdown %+.1f%%\n",
				tc.Subject, tc.Best, tc.AvgVsBest.Turnaround, tc.AvgVsBest.Slowdown, tc.WorstVsBest.Turnaround, tc.WorstVsBest.Slowdown)
		}
	}
}

func newSimSteal() *cobra.Command {
	var f simFlags
	var traces []string
	var lambdas, plotDir, seeds, outPath string
	var markdown bool
	cmd := &cobra.Command{
		Use:   "steal",
		Short: "Batch and interactive tasks: the SC'15 Figure 6 points for STEAL, SEAL1, SEAL2 and BaseVary",
		Long: `Replays each trace with 50 GB batch tasks under STEAL (per λ), SEAL1, SEAL2 and
BaseVary, and prints the points of SC'15's Figure 6. With --seeds it runs every
seed and prints, per trace, STEAL's change in average interactive slowdown against
SEAL1 and BaseVary with bootstrap intervals paired by seed (one λ).`,
		Example: `  sluice sim steal --trace 25,45,60,60-hv --lambda 1,0.9,0.8
  sluice sim steal --trace 25,45,60,60-hv --lambda 1 --seeds 1..10 --markdown`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if seeds != "" {
				return stealSeeds(cmd, &f, traces, lambdas, seeds, plotDir, outPath, markdown)
			}
			if markdown || outPath != "" {
				return fmt.Errorf("--markdown and --out are for the intervals over seeds: give --seeds")
			}
			tb, err := sim.LoadTestbed(f.testbed)
			if err != nil {
				return err
			}
			var ls []float64
			for _, s := range splitList(lambdas) {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil || !(v > 0 && v <= 1) {
					return fmt.Errorf("--lambda: %q is not a fraction in (0, 1]", s)
				}
				ls = append(ls, v)
			}
			if len(ls) == 0 {
				return fmt.Errorf("--lambda %q: no value given", lambdas)
			}
			if err := checkPlot(plotDir, nil); err != nil {
				return err
			}
			so, opt, err := f.options(cmd)
			if err != nil {
				return err
			}
			specs, err := f.traces(traces, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			res, err := sim.Steal(tb, specs, ls, so, opt)
			if err != nil {
				return err
			}
			if f.jsonOut {
				if err := printJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				printSteal(cmd.OutOrStdout(), res)
			}
			if plotDir != "" {
				return plotStealPoints(cmd.ErrOrStderr(), plotDir, res)
			}
			return nil
		},
	}
	f.register(cmd)
	traceFlag(cmd, &traces, "25,45,60,60-hv", "comma-separated traces")
	cmd.Flags().StringVar(&lambdas, "lambda", "1,0.9,0.8", "comma-separated STEAL λ values")
	cmd.Flags().StringVar(&plotDir, "plot", "", plotFlagHelp+": steal, Figure 6 with a point per scheme and trace")
	cmd.Flags().StringVar(&seeds, "seeds", "", "run these seeds (a range 1..10, a list, or both) and print STEAL's change against SEAL1 and BaseVary with bootstrap intervals (one --lambda, default 1)")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "with --seeds: print the intervals as Markdown, with the STEAL criterion")
	cmd.Flags().StringVar(&outPath, "out", "", "with --seeds: also write the intervals as JSON to this file")
	return cmd
}

// stealSeeds is `sim steal --seeds`.
func stealSeeds(cmd *cobra.Command, f *simFlags, traces []string, lambdas, seeds, plotDir, outPath string, markdown bool) error {
	if plotDir != "" {
		return fmt.Errorf("--plot draws one seed's Figure 6: leave out --seeds (or --plot)")
	}
	if outPath != "" {
		if err := checkOutFile(outPath); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	if markdown && f.jsonOut {
		return fmt.Errorf("--markdown and --json: choose one")
	}
	if cmd.Flags().Changed("seed") {
		return fmt.Errorf("--seed and --seeds: give one")
	}
	if !cmd.Flags().Changed("lambda") {
		lambdas = "1" // the paper's headline comparison
	}
	ls := splitList(lambdas)
	if len(ls) != 1 {
		return fmt.Errorf("--lambda %q: with --seeds, give one λ", lambdas)
	}
	l, err := strconv.ParseFloat(ls[0], 64)
	if err != nil || !(l > 0 && l <= 1) {
		return fmt.Errorf("--lambda: %q is not a fraction in (0, 1]", ls[0])
	}
	ss, err := sim.ParseSeeds(seeds)
	if err != nil {
		return err
	}
	if len(ss) < 2 {
		return fmt.Errorf("--seeds %q: intervals need at least 2 seeds", seeds)
	}
	tb, err := sim.LoadTestbed(f.testbed)
	if err != nil {
		return err
	}
	so, opt, err := f.options(cmd)
	if err != nil {
		return err
	}
	var names []string
	for _, v := range traces {
		names = append(names, splitList(v)...)
	}
	if len(names) == 0 {
		return fmt.Errorf("--trace: no trace named")
	}
	res, err := sim.RunStealSeeds(tb, names, ss, l, so, opt, sim.Bootstrap{})
	if err != nil {
		return err
	}
	if outPath != "" {
		if err := writeJSONFile(outPath, res); err != nil {
			return err
		}
	}
	switch {
	case f.jsonOut:
		return printJSON(cmd.OutOrStdout(), res)
	case markdown:
		return report.StealMarkdown(cmd.OutOrStdout(), res)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "testbed %s, seeds %v, λ = %g; average interactive slowdown, means over seeds; STEAL's change, %.0f%% bootstrap intervals paired by seed\n",
		res.Testbed, res.Seeds, res.Lambda, 100*res.Bootstrap.Level)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "trace\tSTEAL\tSEAL1\tBaseVary\tSTEAL vs SEAL1\tSTEAL vs BaseVary\t")
	for _, t := range res.Traces {
		fmt.Fprintf(w, "%s\t%.3f\t%.3f\t%.2f\t%s\t%s\t\n", t.Trace, t.Slowdown["steal"], t.Slowdown["seal1"], t.Slowdown["basevary"], t.VsSEAL1, t.VsBaseVary)
	}
	w.Flush()
	c := sim.AssessSTEAL(res)
	fmt.Fprintf(out, "%s: %s\n", c.Verdict, c.Detail)
	return nil
}

func printSteal(out io.Writer, res *sim.StealResult) {
	for _, st := range res.Traces {
		own := ""
		if st.OwnBatch > 0 {
			own = fmt.Sprintf(" (and its own %d)", st.OwnBatch)
		}
		if st.Note != "" {
			fmt.Fprintf(out, "\ntrace %s + %d batch tasks of 50 GB%s; %s\n", st.Trace, st.BatchTasks, own, st.Note)
		} else {
			fmt.Fprintf(out, "\ntrace %s + %d batch tasks of 50 GB%s; interactive-only SEAL slowdown SD_I = %.3f\n", st.Trace, st.BatchTasks, own, st.SDI)
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "scheme\tspare used\tSD_I/SD_I+B\tinteractive slowdown\tpreemptions\t")
		for _, p := range st.Points {
			fmt.Fprintf(w, "%s\t%.1f%%\t%s\t%s\t%d\t\n", p.Scheme, 100*p.SpareUsed, ratio(p.NormSlowdown), ratio(p.AvgSlowdownInt), p.Preemptions)
		}
		w.Flush()
	}
}

// ratio formats a ratio, "-" when it is undefined (NaN).
func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// plotStealPoints draws Figure 6 from the traces that have interactive
// transfers; the others have no point (their ratio is undefined), which
// it says.
func plotStealPoints(log io.Writer, dir string, res *sim.StealResult) error {
	keep := *res
	var left []string
	keep.Traces, left = unnoted(res.Traces, func(st sim.StealTrace) (string, string) { return st.Trace, st.Note })
	if len(keep.Traces) == 0 {
		return fmt.Errorf("--plot: no Figure 6 point to draw: trace %s has no interactive transfers, so SD_I/SD_I+B is undefined", strings.Join(left, ", "))
	}
	if len(left) > 0 {
		fmt.Fprintf(log, "--plot: trace %s left out of the chart: no interactive transfers, so SD_I/SD_I+B is undefined\n", strings.Join(left, ", "))
	}
	return plotSteal(log, dir, &keep)
}

func newSimFig2() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "fig2",
		Short: "Replay the idealised example of SC'15 Figure 2 under SEAL and the start-on-arrival baseline",
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := sim.Fig2()
			if err != nil {
				return err
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "SEAL:     turnarounds %.2f %.2f %.2f s", res.SEAL.Turnaround[0], res.SEAL.Turnaround[1], res.SEAL.Turnaround[2])
			if res.SEAL.PreemptedAt != nil {
				fmt.Fprintf(out, ", T1 preempted at t=%.1f s", *res.SEAL.PreemptedAt)
			}
			fmt.Fprintf(out, "\nbaseline: turnarounds %.2f %.2f %.2f s\n", res.Baseline.Turnaround[0], res.Baseline.Turnaround[1], res.Baseline.Turnaround[2])
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newSimSweep() *cobra.Command {
	var f simFlags
	var traces, seeds, schedulers, plotDir, outPath string
	var params, ablate []string
	var markdown bool
	var workers, resamples int
	var level float64
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run schedulers over a grid of simulator settings, loads and seeds (medians and means with intervals)",
		Long: `Runs every scheduler on every combination of the --param values (per-stream, decline,
burstiness, admission=arrival|cycle), trace and seed; prints per row the medians over
seeds and, with 2 seeds or more, each scheduler's change against the best baseline with
a bootstrap interval paired by seed. --ablate runs SEAL with cycle=S, pf=F|off or
cc=endpoints|literal (joined by +) where it does not win. See docs/simulator.md.`,
		Example: `  sluice sim sweep --trace 25,45,60 --seeds 1..10 --param per-stream=0.025,0.25 --param admission=arrival,cycle \
      --ablate cycle=0.1 --ablate pf=off --ablate cc=literal --markdown --plot charts/`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tb, err := sim.LoadTestbed(f.testbed)
			if err != nil {
				return err
			}
			ss, err := sim.ParseSeeds(seeds)
			if err != nil {
				return err
			}
			p, err := sweepParams(params, ablate)
			if err != nil {
				return err
			}
			if workers < 0 {
				return fmt.Errorf("--workers %d: want 0 (as many as GOMAXPROCS) or more", workers)
			}
			if !(level > 0 && level < 1) {
				return fmt.Errorf("--level %v: want a fraction between 0 and 1 (0.9 for 90%% intervals)", level)
			}
			if resamples < 100 || resamples > 10000000 {
				return fmt.Errorf("--resamples %d: want 100 to 10,000,000", resamples)
			}
			p.Workers = workers
			p.Bootstrap = sim.Bootstrap{Resamples: resamples, Level: level, Seed: sim.DefaultBootstrap.Seed}
			if markdown && f.jsonOut {
				return fmt.Errorf("--markdown and --json: choose one")
			}
			if (markdown || plotDir != "") && len(ss) < 2 {
				return fmt.Errorf("--markdown and --plot show intervals over seeds: give at least 2 seeds")
			}
			if plotDir != "" && len(p.PerStream) == 0 {
				return fmt.Errorf("--plot draws the change against the per-stream share: give --param per-stream=F,...")
			}
			if err := checkPlot(plotDir, nil); err != nil {
				return err
			}
			if outPath != "" {
				if err := checkOutFile(outPath); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			}
			so, opt, err := f.options(cmd)
			if err != nil {
				return err
			}
			names := splitList(schedulers)
			if len(names) == 0 {
				return fmt.Errorf("--schedulers %q: no scheduler named", schedulers)
			}
			for _, n := range names {
				if _, err := sched.New(n, so); err != nil {
					return err
				}
			}
			if len(splitList(traces)) == 0 {
				return fmt.Errorf("--trace %q: no trace named", traces)
			}
			res, err := sim.RunSweep(tb, splitList(traces), ss, names, p, so, opt)
			if err != nil {
				return err
			}
			if outPath != "" {
				if err := writeJSONFile(outPath, res); err != nil {
					return err
				}
			}
			switch {
			case f.jsonOut:
				err = printJSON(cmd.OutOrStdout(), res)
			case markdown:
				err = report.RegimeMarkdown(cmd.OutOrStdout(), res)
			default:
				printSweep(cmd.OutOrStdout(), res)
			}
			if err != nil {
				return err
			}
			if plotDir != "" {
				if err := report.RegimeMap(plotDir, "regime-map", res); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", filepath.Join(plotDir, "regime-map.svg"))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&traces, "trace", "25,45,60", "comma-separated traces (loads)")
	cmd.Flags().StringVar(&seeds, "seeds", "1..10", "seeds: a range 1..10, a list, or both")
	cmd.Flags().StringVar(&schedulers, "schedulers", "basecc1,basecc2,basecc4,basevary,seal,seal+", "comma-separated schedulers")
	cmd.Flags().StringArrayVar(&params, "param", nil, "a grid axis, name=v1,v2 (repeatable): per-stream, decline, burstiness, admission")
	cmd.Flags().StringArrayVar(&ablate, "ablate", nil, "a variant of SEAL run where SEAL does not win, settings joined by + (repeatable): cycle=S, pf=F|off, cc=endpoints|literal")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the regime map as Markdown: every row with intervals, the ablations, the SC'15 criteria")
	cmd.Flags().StringVar(&plotDir, "plot", "", plotFlagHelp+": regime-map, the change against the best baseline over the per-stream share")
	cmd.Flags().StringVar(&outPath, "out", "", "also write the sweep as JSON to this file")
	cmd.Flags().IntVar(&workers, "workers", 0, "simulations run at once (0: GOMAXPROCS)")
	cmd.Flags().IntVar(&resamples, "resamples", sim.DefaultBootstrap.Resamples, "bootstrap resamples of the seeds per interval")
	cmd.Flags().Float64Var(&level, "level", sim.DefaultBootstrap.Level, "the intervals' confidence level")
	moreFlags(cmd, "docs/simulator.md", "workers", "resamples", "level", "out")
	return cmd
}

// sweepParams reads the --param and --ablate values of `sim sweep`.
func sweepParams(params, ablate []string) (sim.SweepParams, error) {
	var p sim.SweepParams
	for _, kv := range params {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("--param %q: want name=v1,v2", kv)
		}
		vals := splitList(v)
		if len(vals) == 0 {
			return p, fmt.Errorf("--param %s: no value given", k)
		}
		for _, x := range vals {
			switch k {
			case "per-stream":
				f, err := strconv.ParseFloat(x, 64)
				if err != nil || !(f > 0 && f <= 1) {
					return p, fmt.Errorf("--param per-stream: %q is not a fraction in (0, 1]", x)
				}
				p.PerStream = append(p.PerStream, f)
			case "decline":
				if x != "none" && x != "mild" && x != "strong" {
					return p, fmt.Errorf("--param decline: %q: want none, mild or strong", x)
				}
				p.Decline = append(p.Decline, x)
			case "burstiness":
				f, err := strconv.ParseFloat(x, 64)
				if err != nil || !(f >= 0) || math.IsInf(f, 0) {
					return p, fmt.Errorf("--param burstiness: %q is not a non-negative number", x)
				}
				p.Burstiness = append(p.Burstiness, f)
			case "admission":
				if x != sim.AdmitOnArrival && x != sim.AdmitOnCycle {
					return p, fmt.Errorf("--param admission: %q: want arrival (the baselines start a task when it arrives) or cycle (at the scheduling cycle, as SEAL does)", x)
				}
				p.Admission = append(p.Admission, x)
			default:
				return p, fmt.Errorf("--param %q: unknown parameter (per-stream, decline, burstiness, admission)", k)
			}
		}
	}
	seen := map[string]bool{}
	for _, a := range ablate {
		ab, err := sim.ParseAblation(a)
		if err != nil {
			return p, fmt.Errorf("--ablate: %w", err)
		}
		if seen[ab.Name()] {
			return p, fmt.Errorf("--ablate %q: given twice", a)
		}
		seen[ab.Name()] = true
		p.Ablations = append(p.Ablations, ab)
	}
	return p, nil
}

func printSweep(out io.Writer, res *sim.Sweep) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "testbed %s, seeds %v; medians over seeds; change vs the best baseline (slowdown / turnaround)\n", res.Testbed, res.Seeds)
	var subjects []string
	for _, n := range res.Schedulers {
		if !strings.HasPrefix(n, "base") && n != "globus" {
			subjects = append(subjects, n)
		}
	}
	fmt.Fprint(w, "cell\ttrace\tconc. CV\tbest baseline\t")
	for _, n := range subjects {
		fmt.Fprintf(w, "%s\t", n)
	}
	fmt.Fprintln(w)
	for _, r := range res.Rows {
		fmt.Fprintf(w, "%s\t%s\t%.2f\t%s %.3f / %.2f s\t", r.Cell, r.Trace, r.ConcurrencyCV, r.BestSlowdown,
			r.Schedulers[r.BestSlowdown].AvgSlowdown, r.Schedulers[r.BestTurnaround].AvgTurnaround)
		for _, n := range subjects {
			c := r.Change[n]
			fmt.Fprintf(w, "%+.1f%% / %+.1f%%\t", c.Slowdown, c.Turnaround)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	for _, n := range subjects {
		worst, over := math.Inf(-1), 0
		for _, r := range res.Rows {
			c := r.Change[n]
			worst = math.Max(worst, math.Max(c.Slowdown, c.Turnaround))
			if c.Slowdown > 2 || c.Turnaround > 2 {
				over++
			}
		}
		fmt.Fprintf(out, "%s: worst change vs the best baseline %+.1f%%; %d of %d rows more than 2%% worse\n", n, worst, over, len(res.Rows))
	}
	if res.Bootstrap == nil {
		return
	}
	fmt.Fprintf(out, "\nmeans over seeds; change vs the best baseline, %.0f%% bootstrap intervals paired by seed (slowdown; turnaround)\n", 100*res.Bootstrap.Level)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "cell\ttrace\tbest baseline\tas in paper\t")
	for _, n := range subjects {
		fmt.Fprintf(w, "%s\t", n)
	}
	fmt.Fprintln(w)
	for _, r := range res.Rows {
		p := r.Paired
		if p == nil {
			continue
		}
		asIn := "-"
		if p.AsInPaper != nil {
			asIn = map[bool]string{true: "yes", false: "no"}[*p.AsInPaper]
		}
		fmt.Fprintf(w, "%s\t%s\t%s %.3f\t%s\t", r.Cell, r.Trace, p.RankSlowdown[0], p.Mean[p.RankSlowdown[0]].AvgSlowdown, asIn)
		for _, n := range subjects {
			d := p.Vs[n]
			fmt.Fprintf(w, "%s; %s\t", d.Slowdown, d.Turnaround)
		}
		fmt.Fprintln(w)
		for _, a := range res.Ablations {
			if d, ok := p.Ablations[a]; ok {
				fmt.Fprintf(w, "\t\t%s\t\t%s; %s\t\n", a, d.Slowdown, d.Turnaround)
			}
		}
	}
	w.Flush()
}

// progressEvery is how often a long replay says how far it is.
const progressEvery = 10 * time.Second

// replayProgress is a sim.Options.Observer that prints, every interval of
// wall time, how far the replay is: an overloaded replay may run for a
// long time, and one that says nothing cannot be told from one that hangs.
// (The simulator keeps no clock; its caller may.)
func replayProgress(w io.Writer, tr *trace.Trace, every time.Duration) func(*sim.World, []sched.Decision) {
	start := time.Now()
	next := start.Add(every)
	last := 0.0
	for _, x := range tr.Transfers {
		last = max(last, x.Arrival)
	}
	return func(sw *sim.World, _ []sched.Decision) {
		now := time.Now()
		if now.Before(next) {
			return
		}
		next = now.Add(every)
		done, total := sw.Progress()
		fmt.Fprintf(w, "sim: %s of wall time: simulated %s (the last transfer arrives at %s), %d of %d transfers done\n",
			time.Since(start).Round(time.Second), secs(sw.Now()), secs(last), done, total)
	}
}

// secs is simulated seconds as a duration, to the second.
func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)).Round(time.Second) }
