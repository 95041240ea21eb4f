package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/testbed"
)

// shortTrace writes a two-minute trace, fast to simulate.
func shortTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "short.csv")
	if _, err := run(t, "trace", "gen", "--load", "0.45", "--minutes", "2", "--seed", "3", "--out", path); err != nil {
		t.Fatal(err)
	}
	return path
}

func checkCharts(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		for _, ext := range []string{".svg", ".png"} {
			fi, err := os.Stat(filepath.Join(dir, n+ext))
			if err != nil {
				t.Error(err)
			} else if fi.Size() == 0 {
				t.Errorf("%s%s is empty", n, ext)
			}
		}
	}
}

func TestSimComparePlot(t *testing.T) {
	tr := shortTrace(t)
	args := []string{"sim", "compare", "--trace", tr, "--schedulers", "basecc1,basecc2,seal"}
	for _, jsonOut := range []bool{false, true} {
		a := args
		if jsonOut {
			a = append(a[:len(a):len(a)], "--json")
		}
		plain, err := run(t, a...)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "charts") // created by --plot
		out, err := run(t, append(a[:len(a):len(a)], "--plot", dir)...)
		if err != nil {
			t.Fatal(err)
		}
		// The output is the same, followed by what was written.
		if !strings.HasPrefix(out, plain) || !strings.Contains(out[len(plain):], "compare-short.svg") {
			t.Errorf("json %v: output with --plot is not the output without it plus the charts written:\n%s\n---\n%s", jsonOut, plain, out)
		}
		checkCharts(t, dir, "compare-short")
	}
	if _, err := run(t, "sim", "compare", "--trace", tr, "--schedulers", "seal", "--plot", t.TempDir()); err == nil {
		t.Error("--plot with one scheduler: no error")
	}
}

func TestSimStealPlot(t *testing.T) {
	dir := t.TempDir()
	if _, err := run(t, "sim", "steal", "--trace", shortTrace(t), "--lambda", "1,0.8", "--plot", dir); err != nil {
		t.Fatal(err)
	}
	checkCharts(t, dir, "steal")
}

// TestTestbedComparePlot draws the chart of `sluice testbed compare
// --plot` from runs made up here (a replay on real bytes is too slow for
// this test): two repetitions, medians against the best baseline.
func TestTestbedComparePlot(t *testing.T) {
	task := func(id int64, size int64, turnaround, slowdown float64) sim.TaskResult {
		return sim.TaskResult{ID: id, Size: size, Turnaround: turnaround, Slowdown: slowdown, Finish: turnaround}
	}
	c := &testbed.Comparison{Profile: "sc15-mini", Trace: "smoke", Reps: 2}
	for rep := 0; rep < 2; rep++ {
		for i, n := range []string{"basecc1", "basecc2", "seal"} {
			k := float64(3-i) + float64(rep)
			tasks := []sim.TaskResult{task(1, 5e5, k, k), task(2, 5e7, 2*k, k), task(3, 5e9, 10*k, 1+k)}
			eps := []testbed.EndpointSeries{
				{Name: "stampede", T: []float64{1, 2, 3}, Bps: []float64{3e7, 5e7, 4e7}, CC: []int{2, 4, 3}},
				{Name: "gordon", T: []float64{1, 2, 3}, Bps: []float64{1e7, 2e7, 1e7}, CC: []int{1, 2, 1}},
			}
			c.Runs = append(c.Runs, &testbed.ComparedRun{Scheduler: n, Rep: rep, Measured: sim.Summarize("sc15-mini", "smoke", n, tasks, 1), Files: 3, Verified: 3, Endpoints: eps})
		}
	}
	names := []string{"basecc1", "basecc2", "seal"}
	c.Summarise(names)
	if c.Best != "basecc2" {
		t.Fatalf("best baseline %q, want basecc2", c.Best)
	}
	dir := t.TempDir()
	if err := plotTestbedCompare(io.Discard, dir, c, names); err != nil {
		t.Fatal(err)
	}
	checkCharts(t, dir, "testbed-compare-smoke")
	svg, err := os.ReadFile(filepath.Join(dir, "testbed-compare-smoke.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"% change vs basecc2", "smoke (medians of 2 reps)", ">basecc1<", ">seal<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("chart has no %q", want)
		}
	}
	// The same comparison saved as JSON and drawn again with --from.
	saved := filepath.Join(t.TempDir(), "c.json")
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, b, 0o644); err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if out, err := run(t, "testbed", "compare", "--from", saved, "--plot", again); err != nil || !strings.Contains(out, "vs best baseline (basecc2)") {
		t.Fatalf("--from: %v\n%s", err, out)
	}
	checkCharts(t, again, "testbed-compare-smoke")
	// Throughput over time per endpoint, one chart per scheduler.
	for _, n := range names {
		checkCharts(t, dir, "testbed-throughput-smoke-"+n)
		svg, err := os.ReadFile(filepath.Join(dir, "testbed-throughput-smoke-"+n+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{">stampede<", ">gordon<", "MB/s"} {
			if !strings.Contains(string(svg), want) {
				t.Errorf("throughput chart of %s has no %q", n, want)
			}
		}
	}
}

func TestChartName(t *testing.T) {
	used := map[string]bool{}
	for _, c := range []struct{ trace, want string }{
		{"25", "compare-25"},
		{"/data/logs/my trace.csv", "compare-my-trace.csv"},
		{"25", "compare-25-2"},
		{"45-4x", "compare-45-4x"},
	} {
		if got := chartName("compare", c.trace, used); got != c.want {
			t.Errorf("chartName(%q) = %q, want %q", c.trace, got, c.want)
		}
	}
}
