package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/api"
)

func newEstimateCmd() *cobra.Command {
	var size, sample string
	var useHistory, asJSON bool
	var maxStreams int
	cmd := &cobra.Command{
		Use:   "estimate SRC DST --size SIZE",
		Short: "Ask the server how many streams a transfer needs, and how fast and long it will be",
		Long: `estimate asks the server's estimation service (seed paper 003) about a
transfer from SRC to DST (sluice://ENDPOINT/path URLs). Unless --use-history
finds a fresh answer for the endpoint pair, the server samples the path: it
copies the first --sample bytes of SRC beside DST (under a hidden temporary
name, removed afterwards) with 1, 2, 4, ... streams until throughput stops
rising, fits the parallel-stream model Th(n) = n/sqrt(a n² + b n + c), and
answers with the optimal streams, the predicted throughput and the time
--size bytes would take, the samples and what sampling cost.`,
		Example: `  sluice estimate sluice://dtn1/data/run7.h5 sluice://dtn2/archive/run7.h5 --size 5G
  sluice estimate sluice://dtn1/data/run7.h5 sluice://dtn2/archive/ --size 5G --use-history --json`,
		Args: cobra.ExactArgs(2),
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in := api.EstimateIn{Source: args[0], Destination: args[1], UseHistory: useHistory, MaxStreams: maxStreams}
		var err error
		if in.Size, err = parseSize("--size", size); err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
		if sample != "" {
			if in.SampleSize, err = parseSize("--sample", sample); err != nil {
				return fmt.Errorf("estimate: %w", err)
			}
		}
		cl, err := cc.client()
		if err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
		out, err := cl.Estimate(cmd.Context(), in)
		if err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
		if asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		printEstimate(cmd.OutOrStdout(), out)
		return nil
	}
	f := cmd.Flags()
	f.StringVar(&size, "size", "", "bytes of the transfer to predict (e.g. 5G, 700MB; required)")
	f.StringVar(&sample, "sample", "", "bytes per sample transfer (default 20MB)")
	f.BoolVar(&useHistory, "use-history", false, "answer from the pair's stored optimisation when fresh, without sampling")
	f.IntVar(&maxStreams, "max-streams", 0, "largest stream count to consider (default: the endpoints' limits, at most 32)")
	f.BoolVar(&asJSON, "json", false, "print the answer as JSON")
	cmd.MarkFlagRequired("size")
	return cmd
}

// parseSize reads a byte count such as 5G, 20MB, 128K or 1048576. Bare
// unit letters are decimal, as in humanize (5G = 5e9); GiB/MiB are binary.
func parseSize(flag, s string) (int64, error) {
	n, err := humanize.ParseBytes(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a size such as 5G, 20MB or 1048576", flag, s)
	}
	if n == 0 || n > 1<<62 {
		return 0, fmt.Errorf("%s %q: must be positive", flag, s)
	}
	return int64(n), nil
}

func printEstimate(w io.Writer, e api.EstimateOut) {
	src := "sampled"
	if e.FromHistory {
		src = "from history, measured " + e.At.Local().Format(time.DateTime)
	}
	fmt.Fprintf(w, "%s -> %s (%s)\n", e.Source, e.Destination, src)
	fmt.Fprintf(w, "  optimal streams  %d\n", e.Streams)
	fmt.Fprintf(w, "  throughput       %s/s\n", humanize.Bytes(uint64(e.Throughput)))
	fmt.Fprintf(w, "  time for %-7s %s\n", humanize.Bytes(uint64(e.Size)), (time.Duration(e.Seconds * float64(time.Second))).Round(100*time.Millisecond))
	fmt.Fprintf(w, "  model            %s\n", e.Model)
	if len(e.Samples) > 0 {
		fmt.Fprintf(w, "  samples of %s:", humanize.Bytes(uint64(e.SampleSize)))
		for _, s := range e.Samples {
			fmt.Fprintf(w, " %d→%s/s", s.Streams, humanize.Bytes(uint64(s.Throughput)))
		}
		fmt.Fprintln(w)
	}
	if !e.FromHistory {
		fmt.Fprintf(w, "  sampling cost    %.1f s, %s\n", e.Cost, humanize.Bytes(uint64(e.CostBytes)))
	}
}
