package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-dtn/sluice/internal/testout"
)

// run executes the CLI with args and returns what it printed and its error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestFig2JSONShape(t *testing.T) {
	out, err := run(t, "sim", "fig2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SEAL struct {
			Turnaround  []float64 `json:"turnaround"`
			PreemptedAt *float64  `json:"preempted_at"`
		} `json:"seal"`
		Baseline struct {
			Turnaround []float64 `json:"turnaround"`
		} `json:"baseline"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not the documented JSON: %v\n%s", err, out)
	}
	if len(got.SEAL.Turnaround) != 3 || len(got.Baseline.Turnaround) != 3 || got.SEAL.PreemptedAt == nil || *got.SEAL.PreemptedAt != 4.5 {
		t.Errorf("unexpected fig2 result: %s", out)
	}
}

func TestCompareJSONShape(t *testing.T) {
	out, err := run(t, "sim", "compare", "--trace", "25", "--schedulers", "basecc1,seal", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Traces []struct {
			Trace      string `json:"trace"`
			Schedulers map[string]struct {
				AvgSlowdown   float64                    `json:"avg_slowdown"`
				AvgTurnaround float64                    `json:"avg_turnaround"`
				MaxSlowdown   float64                    `json:"max_slowdown"`
				MaxTurnaround float64                    `json:"max_turnaround"`
				ByClass       map[string]json.RawMessage `json:"by_class"`
			} `json:"schedulers"`
		} `json:"traces"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not the documented JSON: %v", err)
	}
	if len(got.Traces) != 1 || got.Traces[0].Trace != "25" {
		t.Fatalf("want one trace named 25, got %+v", got.Traces)
	}
	for _, name := range []string{"basecc1", "seal"} {
		s, ok := got.Traces[0].Schedulers[name]
		if !ok {
			t.Fatalf("no %s in %v", name, got.Traces[0].Schedulers)
		}
		if s.AvgSlowdown < 1 || s.AvgTurnaround <= 0 || s.MaxSlowdown < s.AvgSlowdown || s.MaxTurnaround < s.AvgTurnaround || len(s.ByClass) != 5 {
			t.Errorf("%s: implausible figures %+v", name, s)
		}
	}
}

func TestTraceGenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{"csv", "jsonl"} {
		path := filepath.Join(dir, "t."+ext)
		if _, err := run(t, "trace", "gen", "--load", "0.25", "--seed", "3", "--out", path); err != nil {
			t.Fatal(err)
		}
		out, err := run(t, "trace", "stats", path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "522 transfers") {
			t.Errorf("%s: stats say %q, want the 25%% trace's 522 transfers", ext, out)
		}
		// The generator writes beside the target and renames: no
		// temporary file is left behind.
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("left %s behind", e.Name())
			}
		}
	}
}

func TestErrorsAreClear(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "run", "--scheduler", "nope"}, `unknown scheduler "nope"`},
		{[]string{"sim", "run", "--testbed", "nope"}, `unknown testbed "nope"`},
		{[]string{"sim", "run", "--trace", "/does/not/exist.csv"}, "no such file"},
		{[]string{"sim", "steal", "--lambda", "1.5"}, "not a fraction"},
		{[]string{"trace", "gen", "--load", "-1"}, "load"},
		// Values the libraries would read as "default", or that would
		// stall a replay, are refused by name rather than replaced.
		{[]string{"sim", "run", "--cycle", "0"}, "--cycle 0"},
		{[]string{"sim", "run", "--cycle", "1e-9"}, "--cycle"},
		{[]string{"sim", "run", "--startup", "NaN"}, "--startup NaN"},
		{[]string{"sim", "run", "--startup", "-1"}, "--startup -1"},
		{[]string{"sim", "run", "--pf", "0"}, "--pf 0"},
		{[]string{"sim", "run", "--beta", "-1"}, "--beta -1"},
		{[]string{"sim", "run", "--max-cc", "0"}, "--max-cc 0"},
		{[]string{"sim", "compare", "--schedulers", ""}, "no scheduler"},
		{[]string{"sim", "compare", "--trace", " , "}, "no trace"},
		{[]string{"sim", "steal", "--lambda", ""}, "no value"},
		{[]string{"sim", "steal", "--lambda", "NaN"}, "not a fraction"},
		{[]string{"sim", "sweep", "--schedulers", ""}, "no scheduler"},
		// The regime map's parameters: bad values are named, before any run.
		{[]string{"sim", "sweep", "--param", "admission=later"}, `--param admission: "later"`},
		{[]string{"sim", "sweep", "--param", "admission="}, "--param admission: no value"},
		{[]string{"sim", "sweep", "--param", "decline=huge"}, `--param decline: "huge"`},
		{[]string{"sim", "sweep", "--param", "per-stream=0"}, "--param per-stream"},
		{[]string{"sim", "sweep", "--param", "burstiness=inf"}, "--param burstiness"},
		{[]string{"sim", "sweep", "--param", "share=0.1"}, "unknown parameter"},
		{[]string{"sim", "sweep", "--ablate", "pf=0.5"}, "--ablate: ablation \"pf=0.5\": pf"},
		{[]string{"sim", "sweep", "--ablate", "cycle=0"}, "cycle"},
		{[]string{"sim", "sweep", "--ablate", "cc=own"}, "cc \"own\""},
		{[]string{"sim", "sweep", "--ablate", "beta=0.2"}, "unknown setting"},
		{[]string{"sim", "sweep", "--ablate", "pf=off", "--ablate", "pf=off"}, "given twice"},
		{[]string{"sim", "sweep", "--ablate", "pf=off", "--schedulers", "basecc1,basecc2"}, "add seal"},
		{[]string{"sim", "sweep", "--ablate", "pf=off", "--seeds", "1"}, "at least 2 seeds"},
		{[]string{"sim", "sweep", "--workers", "-1"}, "--workers -1"},
		{[]string{"sim", "sweep", "--level", "1"}, "--level 1"},
		{[]string{"sim", "sweep", "--level", "NaN"}, "--level NaN"},
		{[]string{"sim", "sweep", "--resamples", "10"}, "--resamples 10"},
		{[]string{"sim", "sweep", "--markdown", "--seeds", "3"}, "at least 2 seeds"},
		{[]string{"sim", "sweep", "--markdown", "--json"}, "choose one"},
		{[]string{"sim", "sweep", "--plot", "x"}, "give --param per-stream"},
		{[]string{"sim", "steal", "--seeds", "1..3", "--lambda", "1,0.9"}, "give one λ"},
		{[]string{"sim", "steal", "--seeds", "4"}, "at least 2 seeds"},
		{[]string{"sim", "steal", "--seeds", "1..2", "--seed", "3"}, "--seed and --seeds"},
		{[]string{"sim", "steal", "--seeds", "1..2", "--plot", "x"}, "leave out --seeds"},
		{[]string{"sim", "steal", "--markdown"}, "give --seeds"},
		{[]string{"sim", "steal", "--seeds", "1..2", "--out", "/does/not/exist/x.json"}, "--out: /does/not/exist/x.json: directory"},
		{[]string{"sim", "sweep", "--out", "/does/not/exist/x.json"}, "--out: /does/not/exist/x.json: directory"},
		{[]string{"sim", "facility", "--endpoints", "4", "--partners", "8"}, "--partners 8"},
		{[]string{"cp", "--bandwidth", "NaN", "/a", "/b"}, "--bandwidth NaN"},
		// A server never reached is an error at once, not two silent
		// minutes of waiting for a restart.
		{[]string{"watch", "4", "--server", "http://127.0.0.1:1", "--token", "x"}, "connection refused"},
		{[]string{"cp", "--policy-server", "http://x", "--follow-allocation", "--ci", "2", "/a", "/b"}, "--ci does not apply"},
		{[]string{"model", "eval", "--samples", ",,,"}, "no level"},
		{[]string{"model", "eval", "--samples", "1,2,4", "--threshold", "0.2"}, "alg2 only"},
		{[]string{"cp", "--bandwidth", "1e308", "/a", "/b"}, "--bandwidth"},
		{[]string{"trace", "gen", "--minutes", "1e17"}, "more than"},
		{[]string{"trace", "gen", "--minutes", "0"}, "--minutes"},
		{[]string{"trace", "gen", "--batch", "-3"}, "--batch"},
		{[]string{"trace", "gen", "--batch", "100000000"}, "batch tasks"},
		{[]string{"testbed", "compare", "--schedulers", ","}, "no scheduler"},
		{[]string{"testbed", "multisource", "--config", ""}, "no configuration"},
		{[]string{"testbed", "multisource", "--policies", ""}, "no policy"},
		{[]string{"testbed", "multisource", "--slow-drift", "0.1"}, "give --traces"},
		{[]string{"testbed", "multisource", "--traces", "x", "--slow-drift", "-1"}, "--slow-drift -1"},
		{[]string{"testbed", "multisource", "--traces", "x", "--drift-block", "0"}, "--drift-block 0"},
		{[]string{"testbed", "multisource", "--traces", "/nonexistent", "--runs", "2"}, "links.tsv"},
		{[]string{"testbed", "policy-exp", "--exp", ""}, "no experiment"},
		{[]string{"testbed", "policy-exp", "--files", "0"}, "--files 0"},
	}
	for _, c := range cases {
		_, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one mentioning %q", c.args, err, c.want)
		}
	}
}

// TestSimRunOwnLog: an operator replays a transfer log that has what real
// logs have (an empty file, a failed transfer, a line from something
// else). The replay runs every transfer that happened, empty files
// included; stdout stays clean JSON; stderr says what was left out and why.
func TestSimRunOwnLog(t *testing.T) {
	ok := "DATE=20190731073044.992375 HOST=dtn PROG=globus-gridftp-server NL.EVNT=FTP_INFO START=20190731073030.000000 USER=u FILE=/d/f BUFFER=1 BLOCK=2 NBYTES=2000000000 VOLUME=/ STREAMS=1 STRIPES=1 DEST=[10.0.0.1] TYPE=STOR CODE=226"
	lines := []string{
		ok,
		strings.Replace(strings.Replace(ok, "NBYTES=2000000000", "NBYTES=0", 1), "START=20190731073030", "START=20190731073031", 1),
		strings.Replace(ok, "CODE=226", "CODE=426", 1),
		"Nov 22 10:00:01 dtn sshd[4]: session opened",
		strings.Replace(ok, "START=20190731073030", "START=20190731073032", 1),
	}
	p := filepath.Join(t.TempDir(), "dtn.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"sim", "run", "--trace", p, "--scheduler", "seal", "--json"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var res struct {
		Interactive struct {
			N int `json:"n"`
		} `json:"interactive"`
		ByClass map[string]struct {
			N int `json:"n"`
		} `json:"by_class"`
		BytesMoved float64 `json:"bytes_moved"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the result's JSON: %v\n%s", err, stdout.String())
	}
	if res.Interactive.N != 3 || res.ByClass["0-1M"].N != 1 || res.BytesMoved < 4e9-2 {
		t.Errorf("%d tasks (%d under 1 MB), %.0f bytes moved; want the 3 transfers that happened, 1 of them empty, and 4 GB",
			res.Interactive.N, res.ByClass["0-1M"].N, res.BytesMoved)
	}
	for _, w := range []string{"3 transfers", "1 of 0 bytes, kept", "3 name endpoints the testbed lacks (\"10.0.0.1\", \"dtn\")", "1 failed", "1 malformed", "line 4"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr %q does not say %q", stderr.String(), w)
		}
	}
}

// TestFlagUsageHasNoBackquotes: no flag's help holds backquoted words
// that pflag would take for the flag's value name: `sluice status --help`
// showed "--server sluice login   server URL (default $SLUICE_SERVER,
// then sluice login's)" and `sluice access show --help` "--json access
// set", a bool flag given a value.
func TestFlagUsageHasNoBackquotes(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			// A backquoted value name (`FILE`) is pflag's convention.
			name, _ := pflag.UnquoteUsage(f)
			if strings.Contains(f.Usage, "`") && (f.Value.Type() == "bool" || strings.Contains(name, " ")) {
				t.Errorf("%s --%s: shown as taking %q: backquotes in %q", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
}

// TestTestbedUpRemovesItsDirectory: `sluice testbed up` without --dir
// removes the temporary directory it made once it stops (Ctrl-C), as
// replay and compare do; a --dir is kept. Before, every run left a
// /tmp/sluice-testbed-* behind with the store and the agents' roots.
func TestTestbedUpRemovesItsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kept := filepath.Join(t.TempDir(), "kept")
	for _, args := range [][]string{{"testbed", "up"}, {"testbed", "up", "--dir", kept}} {
		ctx, cancel := context.WithCancel(context.Background())
		root := newRoot()
		var out testout.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()
		out.WaitFor(30*time.Second, "Ctrl-C stops it")
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		if !strings.Contains(out.String(), "Ctrl-C stops it") {
			t.Fatalf("%v: the testbed did not come up:\n%s", args, out.String())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "sluice-testbed-*")); len(left) > 0 {
		t.Errorf("testbed up left %v", left)
	}
	if _, err := os.Stat(filepath.Join(kept, "server")); err != nil {
		t.Errorf("testbed up --dir: %v", err)
	}
}

// TestTestbedUpFailsWhenServerStops: `testbed up` whose server stops on
// its own (here: its database file removed, which the server notices
// within a second) returns the server's error, so it exits non-zero.
// Before, it went on waiting for Ctrl-C with no server, then exited 0.
func TestTestbedUpFailsWhenServerStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testbed")
	}
	dir := t.TempDir()
	root := newRoot()
	var out testout.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"testbed", "up", "--dir", dir})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	out.WaitFor(30*time.Second, "Ctrl-C stops it")
	if err := os.Remove(filepath.Join(dir, "server", "sluice.db")); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "removed") {
			t.Errorf("testbed up: %v, want the server's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("testbed up goes on after its server stopped")
	}
}

// TestVersion: `sluice version` and `sluice --version` say which build
// this is, the same way.
func TestVersion(t *testing.T) {
	a, err := run(t, "version")
	if err != nil || !strings.HasPrefix(a, "sluice ") || !strings.Contains(a, "agent protocol") {
		t.Fatalf("version: %v %q", err, a)
	}
	if b, err := run(t, "--version"); err != nil || b != a {
		t.Errorf("--version: %v %q, want %q", err, b, a)
	}
}
