package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-dtn/sluice/report"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/testbed"
)

const plotFlagHelp = "also write the report charts (SVG and PNG) into this directory"

// checkPlot fails early (before a long run) when --plot DIR cannot be
// used: it needs two schedulers to compare and a directory it can create.
func checkPlot(dir string, schedulers []string) error {
	if dir == "" {
		return nil
	}
	if schedulers != nil && len(schedulers) < 2 {
		return errors.New("--plot: the chart compares schedulers; give at least two")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// chartName is prefix-TRACE made safe as a file name (a trace may be a
// path), unique among the names used so far.
func chartName(prefix, trace string, used map[string]bool) string {
	safe := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '-'
	}, filepath.Base(trace))
	name := prefix + "-" + strings.Trim(safe, "-.")
	for i, n := 2, name; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", n, i)
	}
	used[name] = true
	return name
}

// compareBaseline is the baseline of a trace's Figure 3 chart: the one
// `sluice sim compare` prints its per-class table against (basecc1), or
// when basecc1 was not run the best baseline of its summary line, or
// else the first scheduler.
func compareBaseline(tc sim.TraceComparison, names []string) string {
	if _, ok := tc.Schedulers["basecc1"]; ok {
		return "basecc1"
	}
	if tc.Best != "" {
		return tc.Best
	}
	return names[0]
}

func plotComparison(log io.Writer, dir string, res *sim.Comparison, names []string) error {
	used := map[string]bool{}
	for _, tc := range res.Traces {
		name := chartName("compare", tc.Trace, used)
		if err := report.ChangeByClass(dir, name, report.ChangesFromComparison(tc, names, compareBaseline(tc, names))); err != nil {
			return err
		}
		wrote(log, dir, name)
	}
	return nil
}

func plotSteal(log io.Writer, dir string, res *sim.StealResult) error {
	if err := report.SpareVsSlowdown(dir, "steal", report.SparePoints(res)); err != nil {
		return err
	}
	wrote(log, dir, "steal")
	return nil
}

// plotTestbedCompare draws the measured medians over repetitions against
// the best baseline the summary line names (or the first scheduler).
func plotTestbedCompare(log io.Writer, dir string, c *testbed.Comparison, names []string) error {
	baseline := c.Best
	if baseline == "" {
		baseline = names[0]
	}
	trace := c.Trace
	if c.Reps > 1 {
		trace = fmt.Sprintf("%s (medians of %d reps)", c.Trace, c.Reps)
	}
	var meds []*sim.Result
	for _, n := range names {
		var rs []*sim.Result
		for _, r := range c.Runs {
			if r.Scheduler == n {
				rs = append(rs, r.Measured)
			}
		}
		if m := report.MedianOf(rs); m != nil {
			m.Scheduler, m.Trace = n, trace
			meds = append(meds, m)
		}
	}
	used := map[string]bool{}
	name := chartName("testbed-compare", c.Trace, used)
	if err := report.ChangeByClass(dir, name, report.ChangesFrom(meds, baseline)); err != nil {
		return err
	}
	wrote(log, dir, name)
	// Each scheduler's first repetition: throughput per endpoint over time.
	for _, n := range names {
		for _, r := range c.Runs {
			if r.Scheduler != n || len(r.Endpoints) == 0 {
				continue
			}
			var series []report.Series
			for _, e := range r.Endpoints {
				mb := make([]float64, len(e.Bps))
				for i, v := range e.Bps {
					mb[i] = v / 1e6
				}
				series = append(series, report.Series{Name: e.Name, T: e.T, MBps: mb})
			}
			tname := chartName("testbed-throughput", c.Trace+"-"+n, used)
			if err := report.ThroughputOverTime(dir, tname, series); err != nil {
				return err
			}
			wrote(log, dir, tname)
			break
		}
	}
	return nil
}

func wrote(log io.Writer, dir, name string) {
	p := filepath.Join(dir, name)
	fmt.Fprintf(log, "wrote %s.svg and %s.png\n", p, p)
}
