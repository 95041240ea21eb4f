package iperf3

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded reads a testdata file: real iperf3 3.12 -J output captured on
// loopback (see testdata/README.md).
func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// synthetic is an iperf3 -J report of a successful test with n streams
// that received bps bits/s for one second, with the fields Estimate reads
// laid out as iperf3 3.12 lays them out.
func synthetic(n int, bps float64) []byte {
	b := int64(bps / 8)
	return fmt.Appendf(nil, `{"start": {"version": "iperf 3.12", "test_start": {"protocol": "TCP", "num_streams": %d, "omit": 0, "duration": 1}},
"intervals": [{"streams": [], "sum": {"start": 0, "end": 1, "seconds": 1, "bytes": %d, "bits_per_second": %g, "omitted": false, "sender": true}}],
"end": {"sum_sent": {"start": 0, "end": 1, "seconds": 1, "bytes": %d, "bits_per_second": %g, "retransmits": 0, "sender": true},
"sum_received": {"start": 0, "end": 1, "seconds": 1, "bytes": %d, "bits_per_second": %g, "sender": true}}}`, n, b, bps, b, bps, b, bps)
}

// reply is one canned answer of a fake iperf3 run.
type reply struct {
	out []byte
	err error
}

// fake is a Runner that answers a test with n streams (its -P) with the
// next of script[n] (the last one again once they run out) and records
// the command lines it was given.
type fake struct {
	mu     sync.Mutex
	script map[int][]reply
	calls  [][]string
}

func (f *fake) run(_ context.Context, args []string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, args)
	n := -1
	for i, a := range args {
		if a == "-P" && i+1 < len(args) {
			n, _ = strconv.Atoi(args[i+1])
		}
	}
	rs := f.script[n]
	if len(rs) == 0 {
		return nil, fmt.Errorf("fake iperf3: no reply scripted for -P %d", n)
	}
	r := rs[0]
	if len(rs) > 1 {
		f.script[n] = rs[1:]
	}
	return r.out, r.err
}

func (f *fake) levels() []int {
	var ns []int
	for _, c := range f.calls {
		for i, a := range c {
			if a == "-P" {
				n, _ := strconv.Atoi(c[i+1])
				ns = append(ns, n)
			}
		}
	}
	return ns
}

func ok(b []byte) []reply { return []reply{{out: b}} }

func TestEstimate(t *testing.T) {
	busy := reply{out: recorded(t, "busy.json")}
	// A path that scales to 4 streams of 1 Gb/s and no further.
	capped := func(n int) []reply { return ok(synthetic(n, math.Min(float64(n), 4)*1e9)) }
	tests := []struct {
		name       string
		opt        Options
		script     map[int][]reply
		wantLevels []int    // the -P of every iperf3 run, in order
		wantStop   string   // in Result.Model
		wantStream [2]int   // the optimum's range
		wantErr    []string // all in the error
		wantBusy   bool     // errors.Is(err, ErrBusy)
		attempts   []int    // Result.Samples[i].Attempts
	}{
		{
			name: "recorded loopback run with -O 1",
			opt:  Options{Growth: 2, Host: "127.0.0.1", Omit: 1, Size: 5e9},
			script: map[int][]reply{
				1: ok(recorded(t, "omit1-P1.json")), 2: ok(recorded(t, "omit1-P2.json")),
				4: ok(recorded(t, "omit1-P4.json")), 8: ok(recorded(t, "omit1-P8.json")),
			},
			// 1.09, 0.84, 1.51, 1.05 GB/s: the fall from 1 to 2
			// streams is sampled past (three levels are needed), the
			// fall from 4 to 8 stops sampling.
			wantLevels: []int{1, 2, 4, 8},
			wantStop:   "throughput fell from n=4 to n=8",
			wantStream: [2]int{1, 32},
		},
		{
			name:       "levelled-off path",
			opt:        Options{Growth: 2, Host: "dtn.example.org", Size: 5e9},
			script:     map[int][]reply{1: capped(1), 2: capped(2), 4: capped(4), 8: capped(8)},
			wantLevels: []int{1, 2, 4, 8},
			wantStop:   "relative slope 0.000",
			wantStream: [2]int{4, 16},
		},
		{
			// The default quadruples: 1, 4, 16; flat from 4 to 16 stops.
			name:       "levelled-off path, default growth",
			opt:        Options{Host: "dtn.example.org", Size: 5e9},
			script:     map[int][]reply{1: capped(1), 4: capped(4), 16: capped(16)},
			wantLevels: []int{1, 4, 16},
			wantStop:   "relative slope 0.000 from n=4 to n=16",
			wantStream: [2]int{4, 16},
		},
		{
			name:       "max streams",
			opt:        Options{Growth: 2, Host: "dtn.example.org", MaxStreams: 4},
			script:     map[int][]reply{1: capped(1), 2: capped(2), 4: capped(4)},
			wantLevels: []int{1, 2, 4},
			wantStop:   "next level 8 exceeds the maximum 4",
			wantStream: [2]int{2, 4},
		},
		{
			name:       "busy, then free",
			opt:        Options{Growth: 2, Host: "dtn.example.org", MaxStreams: 4, Backoff: time.Millisecond},
			script:     map[int][]reply{1: {busy, busy, {out: synthetic(1, 1e9)}}, 2: {busy, {out: synthetic(2, 2e9)}}, 4: capped(4)},
			wantLevels: []int{1, 1, 1, 2, 2, 4},
			wantStream: [2]int{2, 4},
			attempts:   []int{3, 2, 1},
		},
		{
			name:       "busy throughout",
			opt:        Options{Growth: 2, Host: "dtn.example.org", Backoff: time.Millisecond},
			script:     map[int][]reply{1: {busy}},
			wantLevels: []int{1, 1, 1, 1},
			wantErr:    []string{"dtn.example.org:5201 with 1 streams", "busy", "4 attempts", "one test at a time"},
			wantBusy:   true,
		},
		{
			name:       "busy, retries off",
			opt:        Options{Growth: 2, Host: "dtn.example.org", Retries: -1},
			script:     map[int][]reply{1: {busy}},
			wantLevels: []int{1},
			wantErr:    []string{"1 attempts"},
			wantBusy:   true,
		},
		{
			name:       "connection refused is not retried",
			opt:        Options{Growth: 2, Host: "127.0.0.1", Port: 52099, Backoff: time.Millisecond},
			script:     map[int][]reply{1: ok(recorded(t, "refused.json"))},
			wantLevels: []int{1},
			wantErr:    []string{"-c 127.0.0.1 -p 52099 -P 1", "unable to connect to server: Connection refused"},
		},
		{
			// An iperf3 server closes its listener between two tests:
			// once it has been reached, a refusal is a moment of that.
			name:       "connection refused after a first test is retried",
			opt:        Options{Growth: 2, Host: "127.0.0.1", Port: 52099, MaxStreams: 2, Backoff: time.Millisecond},
			script:     map[int][]reply{1: capped(1), 2: append(ok(recorded(t, "refused.json")), capped(2)...)},
			wantLevels: []int{1, 2, 2},
			wantStop:   "next level 4 exceeds the maximum 2",
			wantStream: [2]int{2, 2},
			attempts:   []int{1, 2},
		},
		{
			name:       "error in a later level",
			opt:        Options{Growth: 2, Host: "dtn.example.org"},
			script:     map[int][]reply{1: capped(1), 2: ok(recorded(t, "interrupted.json"))},
			wantLevels: []int{1, 2},
			wantErr:    []string{"with 2 streams", "interrupt - the client has terminated"},
		},
		{
			name:       "exit status without a report",
			opt:        Options{Growth: 2, Host: "dtn.example.org"},
			script:     map[int][]reply{1: {{err: errors.New("exit status 1: iperf3: parameter error")}}},
			wantLevels: []int{1},
			wantErr:    []string{"running iperf3", "parameter error"},
		},
		{
			name:       "not JSON",
			opt:        Options{Growth: 2, Host: "dtn.example.org"},
			script:     map[int][]reply{1: ok([]byte("Connecting to host dtn.example.org, port 5201\n"))},
			wantLevels: []int{1},
			wantErr:    []string{"not an iperf3 -J report"},
		},
		{
			name:       "report of other streams",
			opt:        Options{Growth: 2, Host: "dtn.example.org"},
			script:     map[int][]reply{1: ok(recorded(t, "omit1-P2.json"))},
			wantLevels: []int{1},
			wantErr:    []string{"report is of 2 streams, want 1"},
		},
		{
			name:       "nothing received",
			opt:        Options{Growth: 2, Host: "dtn.example.org"},
			script:     map[int][]reply{1: ok(synthetic(1, 0))},
			wantLevels: []int{1},
			wantErr:    []string{"nothing measured"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{script: tc.script}
			tc.opt.Run = f.run
			e, err := Estimate(context.Background(), tc.opt)
			if got := f.levels(); !reflect.DeepEqual(got, tc.wantLevels) {
				t.Errorf("iperf3 ran with -P %v, want %v", got, tc.wantLevels)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; result %+v", e)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				if errors.Is(err, ErrBusy) != tc.wantBusy {
					t.Errorf("errors.Is(%q, ErrBusy) = %v, want %v", err, !tc.wantBusy, tc.wantBusy)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d streams, %.2f GB/s; %s", e.Streams, e.Throughput/1e9, e.Model)
			if e.Streams < tc.wantStream[0] || e.Streams > tc.wantStream[1] {
				t.Errorf("optimum %d streams, want %d-%d", e.Streams, tc.wantStream[0], tc.wantStream[1])
			}
			if !(e.Throughput > 0) {
				t.Errorf("predicted throughput %g", e.Throughput)
			}
			if !strings.Contains(e.Model, tc.wantStop) {
				t.Errorf("model %q does not say %q", e.Model, tc.wantStop)
			}
			// One sample per level run (a retried run is one sample).
			var levels []int
			for _, n := range tc.wantLevels {
				if len(levels) == 0 || levels[len(levels)-1] != n {
					levels = append(levels, n)
				}
			}
			if len(e.Samples) != len(levels) {
				t.Fatalf("samples %+v, want levels %v", e.Samples, levels)
			}
			var sent int64
			for i, s := range e.Samples {
				sent += s.BytesSent
				if s.Streams != levels[i] {
					t.Errorf("samples %+v, want levels %v", e.Samples, levels)
				}
				if tc.attempts != nil && s.Attempts != tc.attempts[i] {
					t.Errorf("sample %d took %d attempts, want %d", i, s.Attempts, tc.attempts[i])
				}
			}
			if e.CostBytes != sent || e.CostBytes <= 0 || e.Cost < 0 {
				t.Errorf("cost %g s, %d B; the samples sent %d B", e.Cost, e.CostBytes, sent)
			}
			if tc.opt.Size > 0 {
				if want := float64(tc.opt.Size) / e.Throughput; math.Abs(e.Seconds-want) > 1e-9*want {
					t.Errorf("time for %d B: %g s, want size/throughput = %g s", tc.opt.Size, e.Seconds, want)
				}
			} else if e.Seconds != 0 {
				t.Errorf("time %g s without a size", e.Seconds)
			}
			if e.Prediction.Optimum() != e.Streams {
				t.Errorf("Prediction's optimum %d, Streams %d", e.Prediction.Optimum(), e.Streams)
			}
		})
	}
}

// TestReport reads the recorded reports: the throughput is what the
// server received, the bytes sent include the omitted start (-O), and a
// report with an error field is recognised as failed, busy or not.
func TestReport(t *testing.T) {
	tests := []struct {
		file      string
		n         int
		wantGBps  float64 // end.sum_received.bits_per_second / 8e9
		wantSent  int64   // end.sum_sent.bytes + omitted intervals' bytes
		wantError string
		busy      bool
	}{
		{file: "omit0-P1.json", n: 1, wantGBps: 0.96184, wantSent: 966000640},
		{file: "omit1-P1.json", n: 1, wantGBps: 1.09300, wantSent: 1094451200 + 1213726720},
		{file: "omit1-P2.json", n: 2, wantGBps: 0.83637, wantSent: 836239360 + 927989760},
		{file: "omit1-P4.json", n: 4, wantGBps: 1.51133, wantSent: 1508638720 + 1010565120},
		{file: "omit1-P8.json", n: 8, wantGBps: 1.04653, wantSent: 1056440320 + 939786240},
		{file: "busy.json", wantError: "the server is busy running a test. try again later", busy: true},
		{file: "refused.json", wantError: "unable to connect to server: Connection refused"},
		{file: "interrupted.json", wantError: "interrupt - the client has terminated"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r, err := parseReport(recorded(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Error != tc.wantError || isBusy(r.Error) != tc.busy {
				t.Fatalf("error %q (busy %v), want %q (busy %v)", r.Error, isBusy(r.Error), tc.wantError, tc.busy)
			}
			if tc.wantError != "" {
				return
			}
			s, err := r.sample(tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(s.Throughput/1e9-tc.wantGBps) > 1e-5 || s.BytesSent != tc.wantSent || s.Streams != tc.n || s.Seconds < 0.99 || s.Seconds > 1.02 {
				t.Errorf("sample %+v, want %.5f GB/s, %d B sent, %d streams over ~1 s", s, tc.wantGBps, tc.wantSent, tc.n)
			}
			if r.Start.Version != "iperf 3.12" {
				t.Errorf("version %q", r.Start.Version)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	tests := []struct {
		opt  Options
		n    int
		want string
	}{
		{Options{Host: "dtn.example.org"}, 1, "-c dtn.example.org -p 5201 -P 1 -t 2 -J"},
		{Options{Host: "::1", Port: 5202, Seconds: 1, Omit: 1}, 8, "-c ::1 -p 5202 -P 8 -t 1 -J -O 1"},
	}
	for _, tc := range tests {
		o, err := tc.opt.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(o.args(tc.n), " "); got != tc.want {
			t.Errorf("%+v with %d streams: iperf3 %s, want iperf3 %s", tc.opt, tc.n, got, tc.want)
		}
	}
}

// TestBadOptions: bad input is refused before iperf3 runs, with an error
// that names the problem.
func TestBadOptions(t *testing.T) {
	tests := []struct {
		opt  Options
		want string
	}{
		{Options{}, "no host"},
		{Options{Host: "-R"}, "starts with '-'"},
		{Options{Host: "a b"}, "contains spaces"},
		{Options{Host: "h", Port: -1}, "port -1 is outside 1-65535"},
		{Options{Host: "h", Port: 70000}, "port 70000 is outside 1-65535"},
		{Options{Host: "h", Seconds: -2}, "test length -2 s is outside 1-600 s"},
		{Options{Host: "h", Seconds: 601}, "test length 601 s"},
		{Options{Host: "h", Omit: -1}, "omitted start -1 s"},
		{Options{Host: "h", MaxStreams: -4}, "max streams -4 is outside 1-128"},
		{Options{Host: "h", MaxStreams: 129}, "max streams 129"},
		{Options{Host: "h", Threshold: math.NaN()}, "threshold NaN"},
		{Options{Host: "h", Size: -1}, "size -1 is negative"},
		{Options{Host: "h", Growth: 1}, "growth 1 is not a factor of at least 2"},
		{Options{Host: "h", Growth: -2}, "growth -2"},
		{Options{Host: "h", Backoff: -time.Second}, "back-off -1s is negative"},
	}
	for _, tc := range tests {
		f := &fake{}
		tc.opt.Run = f.run
		_, err := Estimate(context.Background(), tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.opt, err, tc.want)
		}
		if len(f.calls) > 0 {
			t.Errorf("%+v: iperf3 ran %v", tc.opt, f.calls)
		}
	}
}

func TestParseServer(t *testing.T) {
	tests := []struct {
		in      string
		host    string
		port    int
		wantErr string
	}{
		{in: "dtn1.example.org", host: "dtn1.example.org"},
		{in: "dtn1.example.org:5202", host: "dtn1.example.org", port: 5202},
		{in: " 10.0.0.7:5201 ", host: "10.0.0.7", port: 5201},
		{in: "::1", host: "::1"},
		{in: "[::1]", host: "::1"},
		{in: "[2001:db8::7]:5210", host: "2001:db8::7", port: 5210},
		{in: "", wantErr: "no iperf3 server: want HOST or HOST:PORT"},
		{in: "dtn1:", wantErr: `port "" is not a number in 1-65535`},
		{in: "dtn1:http", wantErr: `port "http" is not a number`},
		{in: "dtn1:0", wantErr: `port "0" is not a number in 1-65535`},
		{in: "dtn1:65536", wantErr: `port "65536"`},
		{in: ":5201", wantErr: "no host"},
		{in: "[::1", wantErr: "want HOST or HOST:PORT"},
		{in: "-R", wantErr: "starts with '-'"},
	}
	for _, tc := range tests {
		host, port, err := ParseServer(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseServer(%q): error %v, want one saying %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || host != tc.host || port != tc.port):
			t.Errorf("ParseServer(%q) = %q, %d, %v; want %q, %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
}

// TestCancel: the caller's context ends a running test, and the wait
// between retries, at once.
func TestCancel(t *testing.T) {
	busy := recorded(t, "busy.json")
	tests := []struct {
		name string
		run  Runner
		opt  Options
	}{
		{"during a test", func(ctx context.Context, _ []string) ([]byte, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, Options{Host: "h"}},
		{"during the back-off", func(context.Context, []string) ([]byte, error) {
			return busy, nil
		}, Options{Host: "h", Backoff: time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			tc.opt.Run = tc.run
			start := time.Now()
			_, err := Estimate(ctx, tc.opt)
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
				t.Errorf("error %v after %v, want the context's deadline at once", err, time.Since(start))
			}
		})
	}
}

// TestHung: a test that runs far past its -t is stopped, with an error
// that says so (not the caller's context error).
func TestHung(t *testing.T) {
	defer func(s time.Duration) { runSlack = s }(runSlack)
	runSlack = -950 * time.Millisecond // a 1 s test may take 50 ms
	o := Options{Host: "h", Seconds: 1, Run: func(ctx context.Context, _ []string) ([]byte, error) {
		<-ctx.Done()
		return recorded(t, "interrupted.json"), errors.New("exit status 1")
	}}
	_, err := Estimate(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "did not finish within") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want one saying the test hung", err)
	}
}

func TestExecNotInstalled(t *testing.T) {
	_, err := Exec("sluice-test-no-such-iperf3")(context.Background(), []string{"-v"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install iperf3") {
		t.Errorf("error %v, want one saying how to install iperf3", err)
	}
}
