package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/estimate"
	"github.com/sluice-dtn/sluice/model/iperf3"
	"github.com/sluice-dtn/sluice/stork"
)

func newEstimateCmd() *cobra.Command {
	var size, sample, iperfServer string
	var useHistory, asJSON bool
	var maxStreams, omit, growth int
	seconds := wholeSeconds(iperf3.DefaultSeconds)
	cmd := &cobra.Command{
		Use:   "estimate SRC DST --size SIZE | --iperf3 HOST[:PORT]",
		Short: "Predict how many streams a transfer needs, and how fast and long it will be (the service, or iperf3)",
		Long: `estimate predicts, for a transfer from SRC to DST, the best number of streams,
the throughput and the time --size bytes take: the server samples the path with
1, 4, 16, ... streams and fits a model (Yin, Yildirim et al.). With --iperf3
HOST it samples from this host with iperf3 instead. See docs/user-guide.md.`,
		Example: `  sluice estimate sluice://dtn1/data/run7.h5 sluice://dtn2/archive/run7.h5 --size 5G
  sluice estimate sluice://dtn1/data/run7.h5 sluice://dtn2/archive/ --size 5G --use-history --json
  sluice estimate --iperf3 dtn2.example.org --size 5G`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("iperf3") {
				if len(args) > 0 {
					return fmt.Errorf("estimate: --iperf3 measures the path from this host to the iperf3 server: it takes no SRC DST (got %q)", args)
				}
				return nil
			}
			if len(args) != 2 {
				return fmt.Errorf("estimate: want SRC DST (sluice:// URLs), or --iperf3 HOST[:PORT]; got %d arguments", len(args))
			}
			return nil
		},
	}
	cc := clientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if growth != 0 && (growth < 2 || growth > estimate.MaxGrowth) {
			return fmt.Errorf("estimate: --growth %d: want 2 to %d (the factor from one sampled stream count to the next; 2 is the paper's doubling)", growth, estimate.MaxGrowth)
		}
		if cmd.Flags().Changed("iperf3") {
			return estimateIperf3(cmd, iperfServer, size, int(seconds), omit, maxStreams, growth, asJSON)
		}
		for _, f := range []string{"seconds", "omit"} {
			if cmd.Flags().Changed(f) {
				return fmt.Errorf("estimate: --%s applies to --iperf3 sampling only", f)
			}
		}
		if size == "" {
			return errors.New(`estimate: required flag "size" not set (the bytes of the transfer to predict, e.g. --size 5G)`)
		}
		in := api.EstimateIn{Source: args[0], Destination: args[1], UseHistory: useHistory, MaxStreams: maxStreams, Growth: growth}
		var err error
		if in.Size, err = stork.ParseSize("--size", size); err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
		if sample != "" {
			if in.SampleSize, err = stork.ParseSize("--sample", sample); err != nil {
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
	f.StringVar(&size, "size", "", "bytes of the transfer to predict (e.g. 5G, 700MB; required, except with --iperf3)")
	f.StringVar(&sample, "sample", "", "bytes per sample transfer to start with (default 20MiB; grown where a sample lasts under 20 request set-ups of the path)")
	f.BoolVar(&useHistory, "use-history", false, "answer from the pair's stored optimisation when fresh, without sampling")
	f.IntVar(&maxStreams, "max-streams", 0, "largest stream count to consider (default: the endpoints' limits, at most 32; with --iperf3: 32, at most 128)")
	f.IntVar(&growth, "growth", 0, "factor from one sampled stream count to the next (default 4: 1, 4, 16, ...; 2: the paper's 1, 2, 4, 8, ...)")
	f.BoolVar(&asJSON, "json", false, "print the answer as JSON")
	f.StringVar(&iperfServer, "iperf3", "", "sample with iperf3 against the iperf3 server HOST[:PORT] (default port 5201) instead of asking the service")
	f.Var(&seconds, "seconds", "with --iperf3: length of each iperf3 test (-t), in whole seconds")
	f.IntVar(&omit, "omit", 1, "with --iperf3: seconds at the start of each test left out of the measurement (-O; 0: none)")
	moreFlags(cmd, "docs/user-guide.md", "ca", "sample", "max-streams", "growth", "seconds", "omit")
	return cmd
}

// estimateIperf3 is `sluice estimate --iperf3`: Algorithm 2 sampling with
// iperf3 from this host, no server involved.
func estimateIperf3(cmd *cobra.Command, server, size string, seconds, omit, maxStreams, growth int, asJSON bool) error {
	for _, f := range []string{"sample", "use-history", "server", "token"} {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("estimate: --%s is for the service's estimate between endpoints; --iperf3 samples from this host with iperf3, without the service", f)
		}
	}
	host, port, err := iperf3.ParseServer(server)
	if err != nil {
		return fmt.Errorf("estimate: --iperf3: %w", err)
	}
	if omit < 0 {
		return fmt.Errorf("estimate: --omit %d: must be 0 or more seconds", omit)
	}
	if maxStreams < 0 {
		return fmt.Errorf("estimate: --max-streams %d: must be 1 or more", maxStreams)
	}
	o := iperf3.Options{Host: host, Port: port, Seconds: seconds, Omit: omit, MaxStreams: maxStreams, Growth: growth}
	if size != "" {
		if o.Size, err = stork.ParseSize("--size", size); err != nil {
			return fmt.Errorf("estimate: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := iperf3.Estimate(ctx, o)
	if err != nil {
		return fmt.Errorf("estimate: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	printIperf3Estimate(cmd.OutOrStdout(), e)
	return nil
}

// wholeSeconds is the --seconds flag: iperf3's -t takes whole seconds, and
// reads a fraction as 0, which means no time limit.
type wholeSeconds int

func (s *wholeSeconds) String() string { return strconv.Itoa(int(*s)) }
func (s *wholeSeconds) Type() string   { return "int" }
func (s *wholeSeconds) Set(v string) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > iperf3.MaxSeconds {
		return fmt.Errorf("want whole seconds from 1 to %d (iperf3 reads a fraction such as 0.5 as 0, which means no time limit)", iperf3.MaxSeconds)
	}
	*s = wholeSeconds(n)
	return nil
}

// predictedTime prints a predicted transfer time: as a duration, or in
// years beyond what a time.Duration holds (about 292 years), where the
// conversion would wrap to a negative duration.
func predictedTime(sec float64) string {
	const year = 365.25 * 24 * 3600
	if sec >= 100*year {
		return fmt.Sprintf("%.3g years", sec/year)
	}
	return time.Duration(sec * float64(time.Second)).Round(100 * time.Millisecond).String()
}

func printEstimate(w io.Writer, e api.EstimateOut) {
	src := "sampled"
	if e.FromHistory {
		src = "from history, measured " + e.At.Local().Format(time.DateTime)
	}
	fmt.Fprintf(w, "%s -> %s (%s)\n", e.Source, e.Destination, src)
	fmt.Fprintf(w, "  optimal streams  %d\n", e.Streams)
	printThroughput(w, e.Throughput, e.Fitted, e.Uncertainty, e.Clamped, e.Note)
	fmt.Fprintf(w, "  time for %-7s %s\n", humanize.Bytes(uint64(e.Size)), predictedTime(e.Seconds))
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

// printThroughput prints a predicted throughput with the fit's
// uncertainty and, when the answer is not simply the fitted curve's
// value, the curve's value and why. Answers stored before the
// uncertainty was recorded have none (0) and print without it.
func printThroughput(w io.Writer, th, fitted, unc float64, clamped bool, note string) {
	pm := ""
	if unc > 0 {
		pm = fmt.Sprintf(" ±%.0f%%", 100*unc)
	}
	fmt.Fprintf(w, "  throughput       %s/s (%.2f Gbit/s)%s\n", humanize.Bytes(uint64(th)), th*8/1e9, pm)
	if clamped {
		fmt.Fprintf(w, "  clamped          the fitted curve said %s/s, more than the samples support\n", humanize.Bytes(uint64(fitted)))
	}
	if note != "" {
		fmt.Fprintf(w, "  note             %s\n", note)
	}
}

func printIperf3Estimate(w io.Writer, e iperf3.Result) {
	how := fmt.Sprintf("%d s tests", e.TestSeconds)
	if e.OmitSeconds > 0 {
		how += fmt.Sprintf(", first %d s omitted", e.OmitSeconds)
	}
	fmt.Fprintf(w, "this host -> iperf3 %s (sampled with %s, %s)\n", e.Server, e.Version, how)
	fmt.Fprintf(w, "  optimal streams  %d\n", e.Streams)
	printThroughput(w, e.Throughput, e.Fitted, e.Uncertainty, e.Clamped, e.Note)
	if e.Size > 0 {
		fmt.Fprintf(w, "  time for %-7s %s\n", humanize.Bytes(uint64(e.Size)), predictedTime(e.Seconds))
	}
	fmt.Fprintf(w, "  model            %s\n", e.Model)
	fmt.Fprintf(w, "  samples         ")
	for _, s := range e.Samples {
		fmt.Fprintf(w, " %d→%s/s (%.1f s)", s.Streams, humanize.Bytes(uint64(s.Throughput)), s.Seconds)
	}
	fmt.Fprintln(w)
	retries := 0
	for _, s := range e.Samples {
		retries += s.Attempts - 1
	}
	busy := ""
	if retries > 0 {
		busy = fmt.Sprintf(" (%d retries while the server was busy)", retries)
	}
	fmt.Fprintf(w, "  sampling cost    %.1f s, %s sent%s\n", e.Cost, humanize.Bytes(uint64(e.CostBytes)), busy)
}
