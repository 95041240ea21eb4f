package sim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// smallTestbed is a source and two destinations of 1 Gb/s.
func smallTestbed(t *testing.T) *Testbed {
	t.Helper()
	tb := &Testbed{Name: "small", Source: "s", Endpoints: []EndpointSpec{
		{Name: "s", CapacityGbps: 1}, {Name: "a", CapacityGbps: 1}, {Name: "b", CapacityGbps: 1}}}
	if err := tb.init(); err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestMaxTimeUpFront: a trace whose bytes cannot move through some
// endpoint before the replay's limit (7 days after the last arrival) at
// that endpoint's full capacity is refused before simulating, saying why;
// one that reaches the limit anyway says what the limit is and how much
// was offered.
func TestMaxTimeUpFront(t *testing.T) {
	sc15, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	many := func(n int, size int64, over float64) *trace.Trace {
		tr := &trace.Trace{Name: "x"}
		for i := range n {
			tr.Transfers = append(tr.Transfers, trace.Transfer{ID: int64(i), Arrival: over * float64(i) / float64(n),
				Src: "stampede", Dst: []string{"gordon", "yellowstone", "mason"}[i%3], Size: size})
		}
		return tr
	}
	tests := []struct {
		name string
		tr   *trace.Trace
		opt  Options
		want []string
	}{
		{"100 x 10 TB in an hour (the audit's over_tb.log)", many(100, 1e13, 3600), Options{},
			[]string{"cannot finish on testbed sc15", "330 TB through mason", "2.5 Gb/s", "7 days after the last arrival (t=3564 s)"}},
		{"one 1 EB transfer (the largest a trace file may hold)", many(1, trace.MaxSize, 0), Options{},
			[]string{"cannot finish", "1 EB through gordon", "7 days after the last arrival"}},
		{"an explicit MaxTime", many(3, 1e12, 0), Options{MaxTime: 1000},
			[]string{"cannot finish", "1 TB through mason", "needs 3200 s", "it stops at t=1000 s (MaxTime)"}},
		{"feasible at full capacity, but not in practice", many(1, 1e11, 0), Options{MaxTime: 1e11 / Gbps(7) * 1.01},
			[]string{"1 tasks unfinished", "left to move", "scheduler seal did not finish", "needs at least 114 s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sched.New("seal", sched.Options{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = Run(sc15, tc.tr, s, tc.opt)
			if err == nil {
				t.Fatal("ran to the end")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to refuse", d)
			}
		})
	}
	// A trace the replay can finish is not refused.
	s, _ := sched.New("seal", sched.Options{})
	if _, err := Run(sc15, many(30, 1e10, 600), s, Options{}); err != nil {
		t.Errorf("a feasible trace: %v", err)
	}
	if MaxArrival != trace.MaxArrival {
		t.Errorf("sim.MaxArrival %v, trace.MaxArrival %v: the loaders accept what the simulator refuses", float64(MaxArrival), float64(trace.MaxArrival))
	}
}

// TestStealAllBatchAndOwnBatch: a trace of batch tasks only has no
// interactive slowdown, so its ratios are undefined: NaN in Go, null in
// JSON, with a note saying why, instead of 0/0 breaking --json. A trace
// with its own batch tasks keeps them out of the interactive-only
// baseline.
func TestStealAllBatchAndOwnBatch(t *testing.T) {
	tb := smallTestbed(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name        string
		body        string
		interactive int
		ownBatch    int
	}{
		{"all batch", "arrival,src,dst,size,batch\n0,s,a,1000000000,1\n5,s,b,1000000000,1\n", 0, 2},
		{"own batch tasks", "arrival,src,dst,size,batch\n0,s,a,1000000000,0\n1,s,a,20000000000,1\n2,s,b,1000000000,0\n", 2, 1},
		{"interactive only", "arrival,src,dst,size,batch\n0,s,a,1000000000,0\n2,s,b,1000000000,0\n", 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(strings.ReplaceAll(tc.name, " ", "-")+".csv", tc.body)
			res, err := Steal(tb, []TraceSpec{{Name: p, Seed: 1}}, []float64{1}, sched.Options{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			st := res.Traces[0]
			if st.Interactive != tc.interactive || st.OwnBatch != tc.ownBatch {
				t.Errorf("%d interactive, %d own batch; want %d, %d", st.Interactive, st.OwnBatch, tc.interactive, tc.ownBatch)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if tc.interactive == 0 {
				if st.Note == "" || !math.IsNaN(st.SDI) || !strings.Contains(string(b), `"sd_i":null`) || !strings.Contains(string(b), `"norm_slowdown":null`) {
					t.Errorf("SDI %v, note %q, JSON %s; want NaN/null and a note", st.SDI, st.Note, b)
				}
				for _, p := range st.Points {
					if !math.IsNaN(p.NormSlowdown) || !math.IsNaN(p.AvgSlowdownInt) {
						t.Errorf("%s: %+v, want undefined ratios", p.Scheme, p)
					}
				}
				return
			}
			if st.Note != "" || strings.Contains(string(b), "null") {
				t.Errorf("note %q, JSON %s", st.Note, b)
			}
			// SD_I is SEAL on the interactive tasks alone.
			tr, err := LoadTrace(tb, TraceSpec{Name: p, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			only := &trace.Trace{Name: tr.Name}
			for _, x := range tr.Transfers {
				if !x.Batch {
					only.Transfers = append(only.Transfers, x)
				}
			}
			s, _ := sched.New("seal", sched.Options{})
			r, err := Run(tb, only, s, Options{Window: st.Window})
			if err != nil {
				t.Fatal(err)
			}
			if st.SDI != r.Interactive.AvgSlowdown {
				t.Errorf("SD_I %v, want SEAL on the interactive tasks alone, %v", st.SDI, r.Interactive.AvgSlowdown)
			}
		})
	}
}

// TestStealWindow: the batch work Steal adds fills the capacity a trace
// leaves unused over the trace's own window, not over 15 minutes; for a
// 15-minute trace the count is the paper's.
func TestStealWindow(t *testing.T) {
	tb := smallTestbed(t)
	capB := Gbps(1)
	tests := []struct {
		name    string
		last    float64 // the last arrival
		size    int64
		window  float64
		batches int
	}{
		// (1 - 2e9/(1.25e8 x 900)) x 1.25e8 x 900 / 50e9 = 2.21
		{"15 minutes", 600, 1e9, 900, 2},
		// (1 - 2e9/(1.25e8 x 3600)) x 1.25e8 x 3600 / 50e9 = 8.96
		{"an hour", 3600, 1e9, 3600, 9},
		{"two hours", 7200, 1e9, 7200, 18},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.csv")
			body := "arrival,src,dst,size\n0,s,a,1000000000\n" + formatFloat(tc.last) + ",s,b,1000000000\n"
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			// The count alone: running the batch work of hours is slow.
			load := 2e9 / (capB * tc.window)
			if got := trace.BatchCountForWindow(load, capB, tc.window); got != tc.batches {
				t.Errorf("BatchCountForWindow(%v, %v, %v) = %d, want %d", load, capB, tc.window, got, tc.batches)
			}
			if tc.window > 3600 {
				return
			}
			res, err := Steal(tb, []TraceSpec{{Name: p, Seed: 1}}, []float64{1}, sched.Options{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st := res.Traces[0]; st.BatchTasks != tc.batches || st.Window != tc.window {
				t.Errorf("%d batch tasks over a %v s window, want %d over %v s", st.BatchTasks, st.Window, tc.batches, tc.window)
			}
		})
	}
}

func formatFloat(v float64) string { b, _ := json.Marshal(v); return string(b) }

// TestLoadTraceNames: a file that exists is read whatever its name looks
// like; names that are not files are paper traces or finite loads, and
// anything else (NaN, Inf, a directory, a missing file) is an error that
// says what was tried.
func TestLoadTraceNames(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	const body = "arrival,src,dst,size\n0,stampede,gordon,1000\n1,stampede,mason,1000\n2,stampede,gordon,1000\n"
	for _, n := range []string{"45", "0.3", "nan", "inf", "my,log.csv"} {
		if err := os.WriteFile(n, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir("adir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("60", 0o755); err != nil { // a directory is never a trace
		t.Fatal(err)
	}
	tests := []struct {
		name, format string
		file         bool   // want the 3 transfers of the file
		wantErr      string // or this error
	}{
		{"45", "", true, ""},
		{"45", "csv", true, ""},
		{"0.3", "", true, ""},
		{"nan", "", true, ""},
		{"inf", "", true, ""},
		{"my,log.csv", "", true, ""},
		{"25", "", false, ""},
		{"0.25", "", false, ""},
		{"60", "", false, ""},
		{"NaN%", "", false, `"NaN%": no such file, and not one of the SC'15 traces`},
		{"-Inf", "", false, "no such file, and not one of the SC'15 traces"},
		{"1e999", "", false, "no such file"},
		{"0x1p-2", "", false, "no such file"},
		{"25", "csv", false, "no such file or directory"},
		{"adir", "", false, "adir is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.format, func(t *testing.T) {
			tr, err := LoadTrace(tb, TraceSpec{Name: tc.name, Format: tc.format, Seed: 1})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tr.Transfers) == 3; got != tc.file {
				t.Errorf("%d transfers: read the file %v, want %v", len(tr.Transfers), got, tc.file)
			}
		})
	}
}

// TestLoadTestbedFileChecks: a testbed file whose settings the simulator
// cannot honour is refused at load, naming the field, instead of being
// replayed with the setting silently ignored (a misspelt or negative
// link_gbps, total_max_cc, chunk_overhead_bytes, chunk_min_bytes or
// weight), out of its meaning (single_task_fraction above 1), or with a
// curve that gives a task no throughput, which ran a week of simulated
// time and then blamed the scheduler for not finishing.
func TestLoadTestbedFileChecks(t *testing.T) {
	const eps = `"endpoints":[{"name":"s","capacity_gbps":1},{"name":"a","capacity_gbps":1}]`
	tests := []struct {
		name, body string
		wantErr    string // "" means it loads
	}{
		{"plain", `{"name":"t",` + eps + `}`, ""},
		{"a flat curve", `{"name":"t","curve":{"a":1},` + eps + `}`, ""},
		{"a fitted curve", `{"name":"t","curve":{"a":1,"b":5.16,"c":9.85},` + eps + `}`, ""},
		{"a misspelt field", `{"name":"t","link_gpbs":1,` + eps + `}`, `unknown field "link_gpbs"`},
		{"a misspelt endpoint field", `{"name":"t","endpoints":[{"name":"s","capacity_gbps":1,"maxcc":4},{"name":"a","capacity_gbps":1}]}`, `unknown field "maxcc"`},
		{"an empty curve", `{"name":"t","curve":{},` + eps + `}`, "curve"},
		{"a negative curve", `{"name":"t","curve":{"a":-1,"b":0,"c":0},` + eps + `}`, "curve"},
		{"a curve with no throughput at cc 2", `{"name":"t","curve":{"a":1,"b":-4,"c":3.5},` + eps + `}`, "curve"},
		{"single_task_fraction above 1", `{"name":"t","single_task_fraction":5,` + eps + `}`, "single_task_fraction"},
		{"single_task_fraction negative", `{"name":"t","single_task_fraction":-0.5,` + eps + `}`, "single_task_fraction"},
		{"link_gbps negative", `{"name":"t","link_gbps":-1,` + eps + `}`, "link_gbps"},
		{"total_max_cc negative", `{"name":"t","total_max_cc":-1,` + eps + `}`, "total_max_cc"},
		{"chunk_overhead_bytes negative", `{"name":"t","chunk_overhead_bytes":-1e7,` + eps + `}`, "chunk_overhead_bytes"},
		{"chunk_min_bytes negative", `{"name":"t","chunk_min_bytes":-1,` + eps + `}`, "chunk_min_bytes"},
		{"weight negative", `{"name":"t","endpoints":[{"name":"s","capacity_gbps":1},{"name":"a","capacity_gbps":1,"weight":-1}]}`, "weight"},
		{"capacity beyond float64 in bytes per second", `{"name":"t","endpoints":[{"name":"s","capacity_gbps":1e308},{"name":"a","capacity_gbps":1}]}`, "capacity_gbps"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadTestbed(path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, path, tc.wantErr)
			}
		})
	}
	for _, n := range TestbedNames() {
		if _, err := LoadTestbed(n); err != nil {
			t.Errorf("built-in testbed %s: %v", n, err)
		}
	}
}

// TestLoadTraceNoTransfers: a trace file that holds no transfer (a CSV
// header alone, blank JSONL lines) is refused by LoadTrace naming the
// file, not later by Run as "sim: empty trace", which named nothing.
func TestLoadTraceNoTransfers(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct{ file, body, want string }{
		{"header.csv", "arrival,src,dst,size\n", "csv: 1 lines, 0 transfers"},
		{"blank.jsonl", "\n\n", "jsonl: 2 lines, 0 transfers"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(dir, tc.file)
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadTrace(tb, TraceSpec{Name: p, Seed: 1})
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "no transfer") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s, saying it has no transfer, and %q", err, p, tc.want)
			}
		})
	}
}
