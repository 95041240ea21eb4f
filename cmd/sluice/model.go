package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-dtn/sluice/model"
)

// The accuracy targets for predictions over parallelism
// (docs/results/model-eval.md).
const (
	targetMedianAPE        = 0.15
	targetOptimumWithinOne = 0.80
)

func newModelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Throughput models: check their predictions against measured data"}
	cmd.AddCommand(newModelEval())
	return cmd
}

// modelEvalJSON is what `sluice model eval --json` prints: the headline
// axis's result at the top level (curves, median_ape, optimum_within_one,
// ...; error figures are fractions, not percent), whether it meets the
// targets, and every evaluated axis in full.
type modelEvalJSON struct {
	Data string `json:"data"`
	Rows int    `json:"rows"`
	model.EvalResult
	Targets modelTargets       `json:"targets"`
	Axes    []model.EvalResult `json:"axes"`
}

type modelTargets struct {
	MedianAPE           float64 `json:"median_ape"`
	OptimumWithinOne    float64 `json:"optimum_within_one"`
	MedianAPEMet        bool    `json:"median_ape_met"`
	OptimumWithinOneMet bool    `json:"optimum_within_one_met"`
}

func newModelEval() *cobra.Command {
	var data, samples, axis, method string
	var threshold float64
	var growth int
	var jsonOut, detail bool
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Predict measured throughput curves from a few samples and report the error",
		Long: `Reads a tuning campaign in the SGData.csv layout, samples each curve as the
estimation service samples a path (--samples), predicts it with the throughput
models and reports the error against the measured curve. See
docs/calibration.md.`,
		Example: `  sluice model eval --data ../shared/data/xsede-gridftp-tuning/SGData.csv
  sluice model eval --data SGData.csv --axis p --json
  sluice model eval --data SGData.csv --samples 1,8,32 --method best`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("threshold") && !isAlg2(samples) {
				return fmt.Errorf("model eval: --threshold applies to --samples alg2 only")
			}
			if cmd.Flags().Changed("growth") && !isAlg2(samples) {
				return fmt.Errorf("model eval: --growth applies to --samples alg2 only")
			}
			if growth < 2 {
				return fmt.Errorf("model eval: --growth %d must be at least 2 (the factor from one sampled level to the next)", growth)
			}
			opt, err := modelEvalOptions(samples, threshold, method)
			if err != nil {
				return err
			}
			opt.Growth = growth
			if data == "" {
				return fmt.Errorf("model eval: --data FILE.csv is required")
			}
			opt.Detail = detail
			axes := []model.Axis{model.AxisParallelism, model.AxisConcurrency, model.AxisPipelining}
			if axis != "" && axis != "all" {
				a, err := model.ParseAxis(axis)
				if err != nil {
					return fmt.Errorf("model eval: %w", err)
				}
				axes = []model.Axis{a}
			}
			f, err := os.Open(data)
			if err != nil {
				return fmt.Errorf("model eval: %w", err)
			}
			rows, err := model.ReadTuningCSV(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("model eval: %s: %w", data, err)
			}
			out := modelEvalJSON{Data: data, Rows: len(rows)}
			for _, a := range axes {
				o := opt
				o.Axis = a
				r, err := model.EvalTuning(rows, o)
				if err != nil {
					return fmt.Errorf("model eval: %s: %w", data, err)
				}
				out.Axes = append(out.Axes, r)
			}
			out.EvalResult = out.Axes[0]
			out.Targets = modelTargets{
				MedianAPE: targetMedianAPE, OptimumWithinOne: targetOptimumWithinOne,
				MedianAPEMet:        out.Points > 0 && out.MedianAPE <= targetMedianAPE,
				OptimumWithinOneMet: out.Points > 0 && out.OptimumWithinOne >= targetOptimumWithinOne,
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), out)
			}
			printModelEval(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "tuning campaign CSV in the SGData.csv layout (required)")
	cmd.Flags().StringVar(&samples, "samples", "alg2", "alg2: Algorithm 2's adaptive sampling, as the estimation service samples a path; or the levels each curve is fitted on (at least 3, say 1,2,4); span: each curve's lowest, geometric-middle and highest level")
	cmd.Flags().Float64Var(&threshold, "threshold", model.DefaultSlopeThreshold, "alg2: stop when an added stream gains less than this fraction of the first sample's throughput")
	cmd.Flags().IntVar(&growth, "growth", model.DefaultGrowth, "alg2: factor from one sampled level to the next (the paper doubles)")
	cmd.Flags().StringVar(&axis, "axis", "all", "knob the curves run over: p, cc, pp or all (the first is the headline)")
	cmd.Flags().StringVar(&method, "method", "auto", "auto (second-order, then dynamic-order, then best sample), second, dynamic, or best (no model: the no-model baseline)")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	cmd.Flags().BoolVar(&detail, "detail", false, "JSON: include every curve's prediction and reason")
	return cmd
}

func isAlg2(samples string) bool {
	s := strings.TrimSpace(samples)
	return s == "alg2" || s == "algorithm2"
}

func modelEvalOptions(samples string, threshold float64, method string) (model.EvalOptions, error) {
	var opt model.EvalOptions
	switch s := strings.TrimSpace(samples); s {
	case "span":
		opt.Span = true
	case "alg2", "algorithm2":
		if !(threshold > 0) || math.IsInf(threshold, 0) {
			return opt, fmt.Errorf("model eval: --threshold %g must be positive", threshold)
		}
		opt.Adaptive, opt.Threshold = true, threshold
	default:
		for _, x := range splitList(s) {
			n, err := strconv.Atoi(x)
			if err != nil || n < 1 {
				return opt, fmt.Errorf("model eval: --samples %q: %q is not a level >= 1", samples, x)
			}
			opt.Samples = append(opt.Samples, n)
		}
		if len(opt.Samples) == 0 {
			return opt, fmt.Errorf("model eval: --samples %q: no level (want, say, 1,2,4; alg2; or span)", samples)
		}
	}
	switch method {
	case "auto":
	case "second":
		opt.Methods = []model.Method{model.MethodSecondOrder}
	case "dynamic":
		opt.Methods = []model.Method{model.MethodDynamicOrder}
	case "best":
		opt.Methods = []model.Method{model.MethodBestSample}
	default:
		return opt, fmt.Errorf("model eval: --method %q: want auto, second, dynamic or best", method)
	}
	return opt, nil
}

func printModelEval(w io.Writer, out modelEvalJSON) {
	h := out.Axes[0]
	fmt.Fprintf(w, "%s: %d rows (%d dropped: above the link bandwidth or not positive); samples %s; methods %s\n\n",
		out.Data, out.Rows, h.DroppedRows, h.Sampling, h.Methods)
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	ape := func(points int, x float64) string {
		if points == 0 {
			return "-"
		}
		return pct(x)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "axis\tcurves\tskipped\tsamples/curve\tpredicted points\tmedian APE\tp90 APE\toptimum within 1 level\toptimum exact\tthroughput at predicted optimum\tsecond-order\tdynamic-order\tbest-sample\t")
	for _, r := range out.Axes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t\n", r.Axis, r.Curves, r.Skipped, r.MeanSamples, r.Points,
			ape(r.Points, r.MedianAPE), ape(r.Points, r.P90APE), ape(r.Points, r.OptimumWithinOne), ape(r.Points, r.OptimumExact), ape(r.Points, r.OptimumEfficiency),
			r.Used[model.MethodSecondOrder], r.Used[model.MethodDynamicOrder], r.Used[model.MethodBestSample])
	}
	tw.Flush()
	if h.SplitHalf != nil {
		fmt.Fprintln(w, "\nrepeatability of the data itself (one half of the repeated runs predicting the other):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "axis\tcurves\tmedian APE\toptimum within 1 level\t")
		for _, r := range out.Axes {
			if s := r.SplitHalf; s != nil {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", r.Axis, s.Curves, pct(s.MedianAPE), pct(s.OptimumWithinOne))
			}
		}
		tw.Flush()
	}
	// Rows of several paths (or buffer sizes, ...) are evaluated apart;
	// the datasets then say which path they are.
	paths := map[string]bool{}
	for _, d := range h.ByDataset {
		paths[d.Path] = true
	}
	fmt.Fprintln(w, "\nby dataset (file size x count):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "axis\tdataset\tcurves\tpredicted points\tmedian APE\toptimum within 1 level\tthroughput at predicted optimum\t")
	for _, r := range out.Axes {
		for _, d := range r.ByDataset {
			label := fmt.Sprintf("%s x %d", sizeLabel(d.FileSize), d.FileCount)
			if len(paths) > 1 {
				label += " (" + d.Path + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", r.Axis, label, d.Curves, d.Points,
				ape(d.Points, d.MedianAPE), ape(d.Points, d.OptimumWithinOne), ape(d.Points, d.OptimumEfficiency))
		}
	}
	tw.Flush()
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	if h.Points == 0 {
		fmt.Fprintf(w, "\ntargets (axis %s): not evaluated: every measured level was a sample level, so nothing was predicted\n", h.Axis)
		return
	}
	fmt.Fprintf(w, "\ntargets (axis %s): median APE %s <= %s: %s; optimum within one level %s >= %s: %s\n",
		h.Axis, ape(h.Points, h.MedianAPE), pct(targetMedianAPE), met(out.Targets.MedianAPEMet),
		pct(h.OptimumWithinOne), pct(targetOptimumWithinOne), met(out.Targets.OptimumWithinOneMet))
	if len(paths) > 1 {
		fmt.Fprintf(w, "(%d paths or settings in the data, evaluated apart: %d curves in all)\n", len(paths), h.Curves)
	}
}

// sizeLabel prints a file size with three significant digits (decimal
// units, as the data set's README does).
func sizeLabel(b int64) string {
	v, unit := float64(b), "B"
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		if v < 1000 {
			break
		}
		v, unit = v/1000, u
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " " + unit
}
