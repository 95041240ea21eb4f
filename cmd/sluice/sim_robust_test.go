package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/sim"
)

// runSplit executes the CLI with args and returns stdout, stderr and the
// error.
func runSplit(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

// TestSimTraceValues: --trace names a file whenever one exists, whatever
// its name looks like (a paper trace, a load, "nan"), with or without
// --format; it is repeatable, and a value naming an existing file is
// taken whole, so a path with commas works; NaN is never a load; a
// directory says so.
func TestSimTraceValues(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	const body = "arrival,src,dst,size\n0,stampede,gordon,1000000\n1,stampede,mason,1000000\n2,stampede,gordon,1000000\n"
	for _, n := range []string{"45", "0.3", "nan", "a,b.csv", "c.csv"} {
		if err := os.WriteFile(n, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir("adir", 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		traces  []string // the traces compared, with their task counts
		tasks   []int
		wantErr string
	}{
		{"a file named 45", []string{"--trace", "45"}, []string{"45"}, []int{3}, ""},
		{"a file named 45, --format", []string{"--trace", "45", "--format", "csv"}, []string{"45"}, []int{3}, ""},
		{"a file named 0.3", []string{"--trace", "0.3"}, []string{"0.3"}, []int{3}, ""},
		{"a file named nan", []string{"--trace", "nan"}, []string{"nan"}, []int{3}, ""},
		{"a path with a comma", []string{"--trace", "a,b.csv"}, []string{"a,b"}, []int{3}, ""},
		{"repeated --trace", []string{"--trace", "a,b.csv", "--trace", "c.csv,45"}, []string{"a,b", "c", "45"}, []int{3, 3, 3}, ""},
		{"inf is no load", []string{"--trace", "inf"}, nil, nil, `trace "inf": no such file, and not one of the SC'15 traces`},
		{"a directory", []string{"--trace", "adir"}, nil, nil, "adir is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"sim", "compare", "--schedulers", "basecc1", "--json"}, tc.args...)
			out, _, err := runSplit(t, args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Traces []struct {
					Trace string `json:"trace"`
					Tasks int    `json:"tasks"`
				} `json:"traces"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(got.Traces) != len(tc.traces) {
				t.Fatalf("traces %+v, want %v", got.Traces, tc.traces)
			}
			for i, tr := range got.Traces {
				if tr.Trace != tc.traces[i] || tr.Tasks != tc.tasks[i] {
					t.Errorf("trace %d: %s with %d tasks, want %s with %d (the file, not a generated trace)", i, tr.Trace, tr.Tasks, tc.traces[i], tc.tasks[i])
				}
			}
		})
	}
}

// TestSimAllBatchTrace: a trace whose every transfer is a batch task has
// no interactive slowdown; every command says so instead of printing 0/0:
// steal's --json holds nulls (not a NaN that fails to encode), its table
// "-", its --plot says why there is no point; run and compare say that all
// tasks were batch.
func TestSimAllBatchTrace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "allbatch.csv")
	if err := os.WriteFile(p, []byte("arrival,src,dst,size,batch\n0,stampede,gordon,1000000000,1\n5,stampede,mason,1000000000,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    []string // in stdout
		wantErr string
	}{
		{"steal --json", []string{"sim", "steal", "--trace", p, "--lambda", "1", "--json"},
			[]string{`"sd_i": null`, `"norm_slowdown": null`, `"avg_interactive_slowdown": null`, `"note": "no interactive transfers`, `"interactive_tasks": 0`, `"own_batch_tasks": 2`}, ""},
		{"steal table", []string{"sim", "steal", "--trace", p, "--lambda", "1"},
			[]string{"no interactive transfers", "(and its own 2)", "steal/λ=1", " -  "}, ""},
		{"steal --plot", []string{"sim", "steal", "--trace", p, "--lambda", "1", "--plot", filepath.Join(dir, "plots")},
			nil, "no Figure 6 point to draw: trace allbatch has no interactive transfers"},
		{"compare", []string{"sim", "compare", "--trace", p, "--schedulers", "basecc1,seal"},
			[]string{"all 2 tasks are batch tasks"}, ""},
		{"compare --json", []string{"sim", "compare", "--trace", p, "--schedulers", "basecc1,seal", "--json"},
			[]string{`"interactive_tasks": 0`, `"note": "all 2 tasks are batch tasks`}, ""},
		{"run", []string{"sim", "run", "--trace", p},
			[]string{"all 2 tasks are batch tasks"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runSplit(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "NaN") {
				t.Errorf("output shows NaN:\n%s", out)
			}
		})
	}
}

// TestTraceStatsSkipped: `sluice trace stats` counts every skipped line
// it does not show, duplicates and outliers included.
func TestTraceStatsSkipped(t *testing.T) {
	line := "DATE=20200301120010.000000 HOST=h PROG=globus-gridftp-server NL.EVNT=FTP_INFO START=20200301120000.000000 USER=u FILE=/f%d BUFFER=1 BLOCK=2 NBYTES=100 VOLUME=/ STREAMS=1 STRIPES=1 DEST=[1.2.3.4] TYPE=RETR CODE=226"
	var b strings.Builder
	for range 30 {
		b.WriteString(strings.Replace(line, "%d", "1", 1) + "\n")
	}
	p := filepath.Join(t.TempDir(), "dup.log")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runSplit(t, "trace", "stats", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"1 transfers", "29 exact duplicates", "(9 more skipped lines not shown)"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestSimRunLambda: `sim run --lambda` is refused by name when STEAL
// cannot honour it (as `sim steal --lambda` is) or when the scheduler is
// not STEAL, which would ignore it. Before, any value ran: 0 and negative
// ones were silently replaced by 1, NaN and values above 1 switched off
// STEAL's saturation test, and every other scheduler ignored the flag.
func TestSimRunLambda(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.csv")
	const body = "arrival,src,dst,size,batch\n0,stampede,gordon,100000000,0\n0,stampede,gordon,2000000000,1\n1,stampede,mason,5000000,0\n"
	if err := os.WriteFile(tr, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, scheduler, lambda string
		wantErr                 string // "" means the run succeeds
	}{
		{"steal, a fraction", "steal", "0.5", ""},
		{"steal, one", "steal", "1", ""},
		{"steal, zero", "steal", "0", "--lambda 0"},
		{"steal, negative", "steal", "-1", "--lambda -1"},
		{"steal, NaN", "steal", "NaN", "--lambda NaN"},
		{"steal, above one", "steal", "2", "--lambda 2"},
		{"steal, infinite", "steal", "Inf", "--lambda +Inf"},
		{"seal ignores it", "seal", "0.5", "only applies to --scheduler steal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runSplit(t, "sim", "run", "--trace", tr, "--scheduler", tc.scheduler, "--lambda", tc.lambda, "--json")
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestReplayProgress: a long replay says, every interval of wall time,
// how far it is (here every cycle), ending with every transfer done.
func TestReplayProgress(t *testing.T) {
	tb, err := sim.LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.LoadTrace(tb, sim.TraceSpec{Name: "25", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sched.New("seal", sched.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := sim.Run(tb, tr, s, sim.Options{Observer: replayProgress(&out, tr, 0)}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 10 {
		t.Fatalf("%d lines, want one a cycle:\n%s", len(lines), out.String())
	}
	prev := -1
	for _, l := range lines {
		var done, total int
		_, rest, _ := strings.Cut(l, "), ")
		if _, err := fmt.Sscanf(rest, "%d of %d transfers done", &done, &total); err != nil || total != len(tr.Transfers) || done < prev {
			t.Fatalf("line %q: %d of %d done after %d (%v)", l, done, total, prev, err)
		}
		prev = done
	}
	// The last cycle comes before the last transfer ends.
	if prev < len(tr.Transfers)-1 {
		t.Errorf("the last line says %d of %d done", prev, len(tr.Transfers))
	}
}
