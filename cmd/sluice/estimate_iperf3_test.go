package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEstimateIperf3Flags: --iperf3 and the service's estimate do not mix,
// and bad input is refused before anything runs, with an error that names
// the problem.
func TestEstimateIperf3Flags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--iperf3", "dtn2", "sluice://a/x", "sluice://b/y"}, "it takes no SRC DST"},
		{[]string{"--iperf3", "dtn2", "--use-history"}, "--use-history is for the service's estimate"},
		{[]string{"--iperf3", "dtn2", "--sample", "20MB"}, "--sample is for the service's estimate"},
		{[]string{"--iperf3", "dtn2", "--server", "http://127.0.0.1:1"}, "--server is for the service's estimate"},
		{[]string{"sluice://a/x", "sluice://b/y", "--size", "5G", "--seconds", "2"}, "--seconds applies to --iperf3 sampling only"},
		{[]string{"sluice://a/x", "sluice://b/y", "--size", "5G", "--omit", "0"}, "--omit applies to --iperf3 sampling only"},
		{[]string{"sluice://a/x", "sluice://b/y"}, `required flag "size" not set`},
		{nil, "want SRC DST (sluice:// URLs), or --iperf3 HOST[:PORT]"},
		{[]string{"--iperf3", ""}, "no iperf3 server: want HOST or HOST:PORT"},
		{[]string{"--iperf3", "dtn2:"}, `port "" is not a number in 1-65535`},
		{[]string{"--iperf3", "dtn2:99999"}, `port "99999" is not a number in 1-65535`},
		{[]string{"--iperf3", "-R"}, "starts with '-'"},
		{[]string{"--iperf3", "dtn2", "--seconds", "0.5"}, "want whole seconds from 1 to 600"},
		{[]string{"--iperf3", "dtn2", "--seconds", "-1"}, "want whole seconds from 1 to 600"},
		{[]string{"--iperf3", "dtn2", "--omit", "-1"}, "--omit -1: must be 0 or more"},
		{[]string{"--iperf3", "dtn2", "--max-streams", "-2"}, "--max-streams -2: must be 1 or more"},
		{[]string{"--iperf3", "dtn2", "--max-streams", "129"}, "max streams 129 is outside 1-128"},
		{[]string{"--iperf3", "dtn2", "--size", "-5G"}, "--size"},
		{[]string{"--iperf3", "dtn2", "--size", "0"}, "must be positive"},
		{[]string{"--iperf3", "dtn2", "--growth", "1"}, "--growth 1: want 2 to 16"},
		{[]string{"sluice://a/x", "sluice://b/y", "--size", "5G", "--growth", "17"}, "--growth 17: want 2 to 16"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := run(t, append([]string{"estimate"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q\n%s", err, tc.want, out)
			}
		})
	}
}

// TestEstimateIperf3 samples a real iperf3 server on loopback through the
// CLI (1 s tests, 1 and 2 streams) and checks the JSON answer's shape.
func TestEstimateIperf3(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 for a few seconds")
	}
	port := startIperf3Server(t)
	out, err := run(t, "estimate", "--iperf3", "127.0.0.1:"+strconv.Itoa(port), "--seconds", "1", "--omit", "0", "--max-streams", "2", "--size", "5G", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var e struct {
		Server     string  `json:"server"`
		Streams    int     `json:"streams"`
		Throughput float64 `json:"throughput"`
		Seconds    float64 `json:"seconds"`
		Size       int64   `json:"size"`
		Samples    []struct {
			Streams    int     `json:"streams"`
			Throughput float64 `json:"throughput"`
			Seconds    float64 `json:"seconds"`
		} `json:"samples"`
		Model     string  `json:"model"`
		Cost      float64 `json:"cost_seconds"`
		CostBytes int64   `json:"cost_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("not the documented JSON: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if len(e.Samples) != 2 || e.Samples[0].Streams != 1 || e.Samples[1].Streams != 2 {
		t.Errorf("samples %+v, want 1 and 2 streams", e.Samples)
	}
	if e.Streams < 1 || e.Streams > 2 || !(e.Throughput > 0) || e.Size != 5e9 || e.Seconds <= 0 || e.Cost < 2 || e.CostBytes <= 0 || e.Model == "" {
		t.Errorf("answer %+v: want 1-2 streams, a positive throughput and time, at least 2 s of cost", e)
	}
}

// startIperf3Server starts `iperf3 -s` on a free loopback port and returns
// the port once it listens (its "Server listening" line: a probe
// connection would count as a client), or skips the test without iperf3.
func startIperf3Server(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("iperf3")
	if err != nil {
		t.Skip("iperf3 is not installed (Debian/Ubuntu: apt-get install iperf3)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-s", "-p", strconv.Itoa(port), "-B", "127.0.0.1", "--forceflush")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server listening on") {
				ready <- true
				break
			}
		}
		io.Copy(io.Discard, stdout) // keep the server from blocking on a full pipe
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("iperf3 -s -p %d exited before listening", port)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("iperf3 -s -p %d did not listen within 10 s", port)
	}
	return port
}
