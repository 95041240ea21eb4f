package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/trace"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Generate and inspect transfer traces"}
	var (
		load         float64
		minutes      float64
		variant, out string
		testbed      string
		format       string
		seed         int64
		batch        int
		asJSON       bool
	)
	gen := &cobra.Command{
		Use:   "gen",
		Short: "Generate a bursty synthetic trace like the SC'15 traces (Table 2)",
		Example: `  sluice trace gen --load 0.45 --out t45.csv
  sluice trace gen --load 0.45 --variant 4x --seed 7 --out t45-4x.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch < 0 {
				return fmt.Errorf("--batch %d: want 0 or more batch tasks", batch)
			}
			if cmd.Flags().Changed("minutes") && !(minutes > 0) {
				return fmt.Errorf("--minutes %v: want a positive window", minutes)
			}
			tb, err := sim.LoadTestbed(testbed)
			if err != nil {
				return err
			}
			tr, err := trace.Generate(trace.GenSpec{
				Load: load, Minutes: minutes, Variant: variant, Seed: seed,
				Source: tb.Source, Destinations: tb.Destinations(),
				SourceCapacity: sim.Gbps(tb.Endpoint(tb.Source).CapacityGbps),
			})
			if err != nil {
				return err
			}
			if batch > 0 {
				if err := trace.AddBatch(tr, batch, sim.BatchSize, tb.Source, tb.Destinations(), 0, seed); err != nil {
					return err
				}
			}
			return writeTrace(cmd.OutOrStdout(), tr, out, format)
		},
	}
	gen.Flags().Float64Var(&load, "load", 0.45, "volume as a fraction of what the source can move in the window")
	gen.Flags().Float64Var(&minutes, "minutes", 15, "trace window in minutes")
	gen.Flags().StringVar(&variant, "variant", "", `"" , "4x" (25% of files four times larger) or "hv" (higher load variation)`)
	gen.Flags().Int64Var(&seed, "seed", 1, "random seed (same seed, same trace)")
	gen.Flags().StringVar(&out, "out", "-", "output file (- for standard output); the extension picks the format")
	gen.Flags().StringVar(&format, "format", "", "csv or jsonl (default: from --out, else csv)")
	gen.Flags().StringVar(&testbed, "testbed", "sc15", "testbed whose source and destinations the trace uses")
	gen.Flags().IntVar(&batch, "batch", 0, "also add this many 50 GB batch tasks at t=0 (SC'15 §6.4)")

	stats := &cobra.Command{
		Use:   "stats FILE",
		Short: "Summarise a trace file (csv, jsonl or a globus-gridftp-server transfer log)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tr, rep, err := trace.ReadFile(args[0], format)
			if err != nil {
				return err
			}
			st := tr.Stats()
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, traceStats(args[0], st, rep))
			}
			fmt.Fprintf(w, "%s: %d transfers, %.3f GB, arrivals over %.1f s\n", args[0], st.Count, float64(st.Bytes)/1e9, st.Duration)
			for i, n := range st.ClassCount {
				fmt.Fprintf(w, "  %-8s %7d  %10.3f GB\n", sim.ClassNames[i], n, float64(st.ClassBytes[i])/1e9)
			}
			if rep != nil {
				fmt.Fprintf(w, "read: %s\n", rep)
				if rep.Renumbered {
					fmt.Fprintln(w, "  transfers numbered 0..n-1 in arrival order (the input had no unique ids)")
				}
				if !rep.Origin.IsZero() {
					fmt.Fprintf(w, "  arrival 0 is %s\n", rep.Origin.Format(time.RFC3339Nano))
				}
				for _, m := range rep.Warnings {
					fmt.Fprintf(w, "  skipped %s\n", m)
				}
				if n := rep.Malformed + rep.Duplicate + rep.Outlier; n > len(rep.Warnings) {
					fmt.Fprintf(w, "  (%d more skipped lines not shown)\n", n-len(rep.Warnings))
				}
			}
			return nil
		},
	}
	stats.Flags().StringVar(&format, "format", "", "csv, jsonl or gridftp (default: guess)")
	stats.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(gen, stats)
	return cmd
}

func writeTrace(stdout io.Writer, tr *trace.Trace, out, format string) error {
	if format == "" {
		switch strings.ToLower(filepath.Ext(out)) {
		case ".jsonl", ".json":
			format = "jsonl"
		default:
			format = "csv"
		}
	}
	write := trace.WriteCSV
	switch format {
	case "csv":
	case "jsonl":
		write = trace.WriteJSONL
	default:
		return fmt.Errorf("unknown trace format %q (csv or jsonl)", format)
	}
	if out == "-" || out == "" {
		return write(stdout, tr)
	}
	// Never a half-written trace under the requested name.
	if err := writeOutFile(out, 0o644, func(w io.Writer) error { return write(w, tr) }); err != nil {
		return fmt.Errorf("writing trace %s: %w", out, err)
	}
	return nil
}

// traceStatsOut is what `sluice trace stats --json` prints.
type traceStatsOut struct {
	File           string                   `json:"file"`
	Transfers      int                      `json:"transfers"`
	Bytes          int64                    `json:"bytes"`
	ArrivalSeconds float64                  `json:"arrival_seconds"`
	Classes        map[string]traceClassOut `json:"classes"`
	Read           *traceReadOut            `json:"read,omitempty"`
}

type traceClassOut struct {
	Transfers int   `json:"transfers"`
	Bytes     int64 `json:"bytes"`
}

// traceReadOut is what the loader did with the file (trace.LoadReport).
type traceReadOut struct {
	Format     string     `json:"format"`
	Lines      int        `json:"lines"`
	Transfers  int        `json:"transfers"`
	Skipped    int        `json:"skipped"`
	Renumbered bool       `json:"renumbered,omitempty"`
	Origin     *time.Time `json:"origin,omitempty"`
	Warnings   []string   `json:"warnings,omitempty"`
}

func traceStats(file string, st trace.Stats, rep *trace.LoadReport) traceStatsOut {
	out := traceStatsOut{File: file, Transfers: st.Count, Bytes: st.Bytes, ArrivalSeconds: st.Duration, Classes: map[string]traceClassOut{}}
	for i, n := range st.ClassCount {
		out.Classes[sim.ClassNames[i]] = traceClassOut{Transfers: n, Bytes: st.ClassBytes[i]}
	}
	if rep != nil {
		r := &traceReadOut{Format: rep.Format, Lines: rep.Lines, Transfers: rep.Parsed, Skipped: rep.Skipped(), Renumbered: rep.Renumbered, Warnings: rep.Warnings}
		if !rep.Origin.IsZero() {
			r.Origin = &rep.Origin
		}
		out.Read = r
	}
	return out
}
