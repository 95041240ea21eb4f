package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/testbed"
)

func newTestbedPolicyExp() *cobra.Command {
	var (
		exps             []string
		profile, dir     string
		netProfile       string
		csvDir           string
		files            int
		minSize, maxSize int64
		seed             uint64
		jsonOut, verbose bool
	)
	cmd := &cobra.Command{
		Use:   "policy-exp",
		Short: "Run the Policy Service experiments of Chervenak et al. on the emulated testbed",
		Long: `policy-exp reproduces the Policy Service experiments of Chervenak et al. (§III)
on real bytes, each client the adaptive client of ` + "`sluice cp --policy-server`" + `
(docs/testbed.md):

  slow-client   Table IV: 8 clients, 32 streams each from the service, c_i 1, d 4
  fast-client   Table V:  the same with c_i 4, d 2
  slow-ps       Table VI: the service grants 4 streams, +4 every 4 files; clients follow
  fast-ps       Table VII: 16 streams, +4 every 2 files; clients follow
  constrained   Table VIII: one adaptive client with the service (c_i 20, Δ 4, d 2,
                p 8, up to 128 files) against 128 files × 8 streams without it
`,
		Example: `  sluice testbed policy-exp --exp constrained --csv docs/results/policy
  sluice testbed policy-exp --exp all --files 96`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(exps) == 1 && exps[0] == "all" {
				exps = testbed.PolicyExpNames
			}
			if len(exps) == 0 {
				return fmt.Errorf("--exp: no experiment named (want %s, or all)", strings.Join(testbed.PolicyExpNames, ", "))
			}
			// Zero means the default to the library; typed, it is a mistake.
			for _, c := range []struct {
				name string
				v    int64
			}{{"files", int64(files)}, {"min-size", minSize}, {"max-size", maxSize}} {
				if cmd.Flags().Changed(c.name) && c.v <= 0 {
					return fmt.Errorf("--%s %d: want a positive number", c.name, c.v)
				}
			}
			var all [][]testbed.PolicyExp
			for _, n := range exps {
				vs, err := testbed.PolicyExps(n)
				if err != nil {
					return err
				}
				all = append(all, vs)
			}
			tb, err := testbed.Load(profile)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			n, down, err := upNet(ctx, netProfile, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer down()
			o := testbed.PolicyExpOptions{Files: files, MinSize: minSize, MaxSize: maxSize, Seed: seed, Dir: dir, Net: n}
			if verbose {
				o.Log = cmd.ErrOrStderr()
			}
			if csvDir != "" {
				if err := os.MkdirAll(csvDir, 0o755); err != nil {
					return err
				}
			}
			var runs []*testbed.PolicyRun
			for _, vs := range all {
				var these []*testbed.PolicyRun
				for _, e := range vs {
					if dir != "" {
						o.Dir = filepath.Join(dir, e.Name, e.Variant)
					}
					r, err := testbed.RunPolicyExp(ctx, tb, e, o)
					if err != nil {
						return fmt.Errorf("%s: %w", e.Label(), err)
					}
					these = append(these, r)
				}
				if csvDir != "" {
					if err := writePolicyCSV(csvDir, these); err != nil {
						return err
					}
				}
				runs = append(runs, these...)
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), runs)
			}
			printPolicyRuns(cmd.OutOrStdout(), runs)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&exps, "exp", []string{"constrained"}, "experiments: "+strings.Join(testbed.PolicyExpNames, ", ")+", or all")
	fl.StringVar(&profile, "profile", "policy-mini", "testbed profile: its source and one other endpoint are the pair")
	fl.StringVar(&dir, "dir", "", "work directory (default: temporary, removed afterwards)")
	fl.StringVar(&csvDir, "csv", "", "write <exp>-streams.csv, <exp>-throughput.csv and <exp>.json here")
	fl.IntVar(&files, "files", 488, "files in the dataset (the paper's 488)")
	fl.Int64Var(&minSize, "min-size", 2<<20, "smallest file, bytes")
	fl.Int64Var(&maxSize, "max-size", 8<<20, "largest file, bytes (sizes are drawn log-uniformly)")
	fl.Uint64Var(&seed, "seed", 1, "seed of the file sizes")
	fl.BoolVar(&jsonOut, "json", false, "print JSON")
	fl.StringVar(&netProfile, "net", "", "carry the data over an emulated WAN of this network profile (sluice net; intercontinental matches policy-wan), its hosts named as the profile's endpoints, instead of loopback with the profile's emulation (needs root; one such command at a time)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "print progress")
	moreFlags(cmd, "docs/testbed.md", "dir", "min-size", "max-size", "seed", "net")
	return cmd
}

func printPolicyRuns(w io.Writer, runs []*testbed.PolicyRun) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "experiment\tvariant\tfiles\tGB\tseconds\tMB/s\tpeak streams\tclients done at (s)")
	base := map[string]float64{}
	for _, r := range runs {
		var done []string
		for _, c := range r.Clients {
			done = append(done, strconv.FormatFloat(c.Seconds, 'f', 1, 64))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.1f\t%.1f\t%d\t%s\n", r.Experiment, r.Variant, r.Files, float64(r.Bytes)/1e9,
			r.Seconds, float64(r.Bytes)/1e6/r.Seconds, r.PeakStreams, strings.Join(done, " "))
		if r.Variant == "non-adaptive" {
			base[r.Experiment] = r.Seconds
		}
	}
	tw.Flush()
	for _, r := range runs {
		if b, ok := base[r.Experiment]; ok && r.Variant == "adaptive" && b > 0 {
			fmt.Fprintf(w, "%s: the adaptive client with the Policy Service finished %.1f%% sooner than the non-adaptive one (%.1f s vs %.1f s)\n",
				r.Experiment, 100*(b-r.Seconds)/b, r.Seconds, b)
		}
	}
}

// writePolicyCSV writes one experiment's runs (its variants): the streams
// each client used over time, the aggregate throughput, and the JSON.
func writePolicyCSV(dir string, runs []*testbed.PolicyRun) error {
	name := runs[0].Experiment
	f := func(file string, header []string, rows func(w *csv.Writer)) error {
		out, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		w := csv.NewWriter(out)
		w.Write(header)
		rows(w)
		w.Flush()
		if err := w.Error(); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	if err := f(name+"-streams.csv", []string{"variant", "client", "t_s", "concurrency", "streams", "allocated", "rate_mbps"}, func(w *csv.Writer) {
		for _, r := range runs {
			for _, c := range r.Clients {
				for _, p := range c.Timeline {
					w.Write([]string{r.Variant, c.Name, g(p.At), strconv.Itoa(p.Concurrency), strconv.Itoa(p.Streams), strconv.Itoa(p.Allocated), g(p.Rate / 1e6)})
				}
			}
		}
	}); err != nil {
		return err
	}
	if err := f(name+"-throughput.csv", []string{"variant", "t_s", "mbps"}, func(w *csv.Writer) {
		for _, r := range runs {
			for _, p := range r.Throughput {
				w.Write([]string{r.Variant, g(p.At), g(p.Bps / 1e6)})
			}
		}
	}); err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(dir, name+".json"))
	if err != nil {
		return err
	}
	if err := printJSON(out, runs); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
