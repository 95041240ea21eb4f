package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/testbed"
)

func newTestbedMultiSource() *cobra.Command {
	var (
		configs  []string
		runs     int
		policies []string
		seed     uint64
		out      string
		jsonOut  bool
		verbose  bool
		show     []string
		same     bool
		traces   string
		drift    float64
		block    float64
	)
	cmd := &cobra.Command{
		Use:   "multisource",
		Short: "Evaluate the multi-source split policies (Yang, Schopf and Foster) on emulated replicas",
		Long: `multisource reproduces the evaluation of Yang, Schopf and Foster's multi-source
transfers (§5) on real bytes: three emulated replicas whose bandwidth varies as
the paper's Table 1 says, each transfer ` + "`sluice cp --sources`" + `'s, the policies
alternated run by run; it prints the paper's Tables 2-5. See docs/testbed.md.`,
		Example: `  sluice testbed multisource --config fig3 --runs 30
  sluice testbed multisource --config all --runs 30 --out docs/results/multisource`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(show) > 0 {
				// Print the tables of saved runs instead of running.
				for _, name := range show {
					b, err := os.ReadFile(name)
					if err != nil {
						return err
					}
					var r testbed.MultiResult
					if err := json.Unmarshal(b, &r); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					// Recomputed, so that saved runs are judged by
					// the current criteria (and runs saved before
					// intervals existed get them).
					r.Intervals = nil
					if err := r.ComputeIntervals(testbed.IntervalResamples, testbed.IntervalLevel, seed); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: no intervals: %v\n", name, err)
					}
					printMulti(cmd.OutOrStdout(), &r)
				}
				return nil
			}
			if len(configs) == 0 {
				return fmt.Errorf("--config: no configuration named (want %s or all)", strings.Join(testbed.MultiConfigNames, ", "))
			}
			if cmd.Flags().Changed("policies") && len(policies) == 0 {
				return fmt.Errorf("--policies: no policy named (want %s)", strings.Join(copyjob.SplitNames(), ", "))
			}
			if len(configs) == 1 && configs[0] == "all" {
				configs = testbed.MultiConfigNames
			}
			for _, c := range configs {
				if _, ok := testbed.MultiConfigs[c]; !ok {
					return fmt.Errorf("--config %q: want %s or all", c, strings.Join(testbed.MultiConfigNames, ", "))
				}
			}
			for _, p := range policies {
				if !contains(copyjob.SplitNames(), p) {
					return fmt.Errorf("--policies: %q: want %s", p, strings.Join(copyjob.SplitNames(), ", "))
				}
			}
			if runs < 2 {
				return fmt.Errorf("--runs %d: the t tests need at least 2", runs)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if drift < 0 || drift > 1 {
				return fmt.Errorf("--slow-drift %v: want a relative SD in [0, 1]", drift)
			}
			if drift > 0 && traces == "" {
				return fmt.Errorf("--slow-drift applies to measured series: give --traces")
			}
			if !(block > 0) {
				return fmt.Errorf("--drift-block %v: want seconds > 0", block)
			}
			o := testbed.MultiOptions{Runs: runs, Policies: policies, Seed: seed, SameLinks: same, Traces: traces,
				Drift: testbed.Drift{SD: drift, Block: block, Seed: seed}}
			if verbose {
				o.Log = cmd.ErrOrStderr()
			}
			var results []*testbed.MultiResult
			for _, c := range configs {
				r, err := testbed.RunMultiSource(ctx, testbed.MultiConfigs[c], o)
				if err != nil {
					return err
				}
				results = append(results, r)
				if out != "" {
					if err := os.MkdirAll(out, 0o755); err != nil {
						return err
					}
					f, err := os.Create(filepath.Join(out, c+".json"))
					if err != nil {
						return err
					}
					if err := printJSON(f, r); err != nil {
						f.Close()
						return err
					}
					f.Close()
					tf, err := os.Create(filepath.Join(out, c+".txt"))
					if err != nil {
						return err
					}
					printMulti(tf, r)
					tf.Close()
				}
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), results)
			}
			for _, r := range results {
				printMulti(cmd.OutOrStdout(), r)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&configs, "config", []string{"fig3"}, "configurations of the paper's Table 1: "+strings.Join(testbed.MultiConfigNames, ", ")+", or all")
	fl.IntVar(&runs, "runs", 30, "run groups (one transfer per policy each)")
	fl.StringSliceVar(&policies, "policies", nil, "policies to alternate (default all: "+strings.Join(copyjob.SplitNames(), ", ")+")")
	fl.Uint64Var(&seed, "seed", 1, "seed of the emulated bandwidth")
	fl.StringVar(&out, "out", "", "write <config>.json and <config>.txt here")
	fl.BoolVar(&same, "same-links", false, "run every policy of a group against the same stretch of the links, planned from the same history")
	fl.StringVar(&traces, "traces", "", "drive the links with the measured series in this directory (its "+testbed.ManifestName+"; docs/results/multisource/traces) instead of AR(1)")
	fl.Float64Var(&drift, "slow-drift", 0, "with --traces: the slow links' level (below 5 Mb/s) changes by this relative SD every --drift-block seconds")
	fl.Float64Var(&block, "drift-block", 10, "seconds of a link's clock a drifted level lasts")
	fl.BoolVar(&jsonOut, "json", false, "print JSON")
	fl.BoolVarP(&verbose, "verbose", "v", false, "print every run")
	fl.StringSliceVar(&show, "show", nil, "print the tables of saved runs (<config>.json files of --out) instead of running")
	return cmd
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// printMulti prints the paper's Tables 2-5 for one configuration.
func printMulti(w io.Writer, r *testbed.MultiResult) {
	fmt.Fprintf(w, "%s: %d run groups, %.1f MB from %d replicas", r.Config, len(r.Runs)/max(1, len(r.Policies)), float64(r.Bytes)/1e6, len(r.Links))
	if r.SameLinks {
		fmt.Fprint(w, "; every policy of a group on the same stretch of the links")
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(r.Measured))
	for n := range r.Measured {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, l := range r.Links {
		m := r.Measured[l.Name]
		s := r.Samples[l.Name]
		fmt.Fprintf(w, "  link %-20s paper %6.2f ± %5.2f Mb/s, monitored %6.2f ± %5.2f (%d probes, %d passive samples)\n", l.Name, l.MeanMbps, l.SDMbps, m[0], m[1], s[0], s[1])
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tmean s\tSD s\tbest\tgood\tavg\tpoor\tworst\tTCS paired p\tTCS unpaired p")
	for _, p := range r.Policies {
		c := r.Compare[p]
		cs := "\t\t\t\t"
		if len(c) == 5 {
			cs = fmt.Sprintf("%d\t%d\t%d\t%d\t%d", c[0], c[1], c[2], c[3], c[4])
		}
		pp, up := "", ""
		if v, ok := r.Paired[p]; ok {
			pp = fmt.Sprintf("%.2f%%", 100*v)
		}
		if v, ok := r.Unpaired[p]; ok {
			up = fmt.Sprintf("%.2f%%", 100*v)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t%s\t%s\n", p, r.Mean[p], r.SD[p], cs, pp, up)
	}
	tw.Flush()
	// The acceptance questions, answered from the table.
	best := func(ps []string) string {
		b := ""
		for _, p := range ps {
			if _, ok := r.Mean[p]; ok && (b == "" || r.Mean[p] < r.Mean[b]) {
				b = p
			}
		}
		return b
	}
	five := []string{"bos", "eas", "ms", "ntss", "tcs"}
	if tcs, ok := r.Mean["tcs"]; ok {
		b5, ball := best(five), best(r.Policies)
		fmt.Fprintf(w, "lowest mean of the paper's five: %s (tcs %+.1f%%); of all: %s (tcs %+.1f%%)",
			b5, 100*(tcs/r.Mean[b5]-1), ball, 100*(tcs/r.Mean[ball]-1))
		if m, ok := r.Mean["tcs-minus"]; ok {
			fmt.Fprintf(w, "; tcs-minus %+.1f%% vs tcs", 100*(m/tcs-1))
		}
		if m, ok := r.Mean["tcs-dynamic"]; ok {
			fmt.Fprintf(w, "; tcs-dynamic %+.1f%% vs tcs", 100*(m/tcs-1))
		}
		fmt.Fprintln(w)
	}
	printIntervals(w, r)
	fmt.Fprintln(w)
}

// printIntervals prints the bootstrap intervals and the criteria judged on
// them, if the result has them.
func printIntervals(w io.Writer, r *testbed.MultiResult) {
	iv := r.Intervals
	if iv == nil {
		return
	}
	if len(r.Traces) > 0 {
		fmt.Fprint(w, "links driven by measured series")
		if r.Drift != nil {
			fmt.Fprintf(w, ", slow links drifting by %.1f%% every %.0f s", 100*r.Drift.SD, r.Drift.Block)
		}
		fmt.Fprintln(w)
		for i, t := range r.Traces {
			fmt.Fprintf(w, "  link %-20s %d series (CV", t.Link, len(t.Series))
			for _, cv := range t.CV {
				fmt.Fprintf(w, " %.3f", cv)
			}
			fmt.Fprintf(w, "), %.0f s before it repeats\n", r.SeriesSeconds[i])
		}
	}
	pct := 100 * iv.Level
	fmt.Fprintf(w, "%.0f%% bootstrap intervals over %d groups (%d resamples):\n", pct, iv.Groups, iv.Resamples)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tmean s\tSD s\tSD(tcs) - SD s\tmean(tcs)/mean - 1")
	f := func(x sim.Interval, scale float64, unit string) string {
		return fmt.Sprintf("%.3f%s [%.3f, %.3f]", scale*x.Est, unit, scale*x.Lo, scale*x.Hi)
	}
	for _, p := range r.Policies {
		d, rel := "", ""
		if x, ok := iv.SDDiff[p]; ok {
			d = fmt.Sprintf("%+.3f [%+.3f, %+.3f]", x.Est, x.Lo, x.Hi)
		}
		if x, ok := iv.MeanRel[p]; ok {
			rel = fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%]", 100*x.Est, 100*x.Lo, 100*x.Hi)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p, f(iv.Mean[p], 1, ""), f(iv.SD[p], 1, ""), d, rel)
	}
	tw.Flush()
	if sp := iv.SamePlan; sp.Pairs > 0 {
		fmt.Fprintf(w, "runs of a group with the very same split (%d pairs): slower over faster %+.1f%% median, %+.1f%% at most, %d pairs over 10%%\n",
			sp.Pairs, 100*sp.MedianDev, 100*sp.MaxDev, sp.Over10)
	}
	for _, c := range iv.Criteria {
		if c.Why == "not run" {
			fmt.Fprintf(w, "  %-30s not run\n", c.Name)
			continue
		}
		verdict := "MET"
		switch {
		case !c.Applies:
			verdict = "does not apply (" + c.Why + ")"
		case !c.Met:
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "  %-30s %s: %+.3f [%+.3f, %+.3f] (%s)\n", c.Name, verdict, c.Interval.Est, c.Interval.Lo, c.Interval.Hi, c.Rule)
	}
}
