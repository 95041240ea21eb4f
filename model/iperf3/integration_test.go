package iperf3

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// startServer starts `iperf3 -s` on a free loopback port for the test and
// returns the port; it skips the test when iperf3 is not installed.
//
// Readiness is the server's "Server listening" line, not a probe
// connection: iperf3 takes any connection for a client, and while it
// discards a probe the next real client can be reset.
func startServer(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("iperf3")
	if err != nil {
		t.Skip("iperf3 is not installed (Debian/Ubuntu: apt-get install iperf3); the recorded-output tests still run")
	}
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		out := &watch{want: []byte("Server listening on"), seen: make(chan struct{})}
		cmd := exec.Command(bin, "-s", "-p", strconv.Itoa(port), "-B", "127.0.0.1", "--forceflush")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-out.seen:
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("iperf3 server output:\n%s", out.String())
				}
			})
			return port
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		t.Logf("iperf3 -s on port %d did not start: %s", port, out.String())
	}
	t.Fatal("could not start an iperf3 server")
	return 0
}

// watch keeps a process's output and closes seen once want appears in it.
type watch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want []byte
	seen chan struct{}
	done bool
}

func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && bytes.Contains(w.buf.Bytes(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestLoopback samples a real iperf3 server on loopback: 1 s tests up to
// 4 streams, so levels 1, 2 and 4 (three levels are always sampled; the
// next, 8, is past the maximum).
func TestLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 for a few seconds")
	}
	port := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := Estimate(ctx, Options{Host: "127.0.0.1", Port: port, Seconds: 1, MaxStreams: 4, Size: 5e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d streams, %.2f GB/s, %.1f s for 5 GB; cost %.1f s, %d B; %s", e.Server, e.Streams, e.Throughput/1e9, e.Seconds, e.Cost, e.CostBytes, e.Model)
	for i, s := range e.Samples {
		t.Logf("  %d streams: %.2f GB/s over %.2f s, %d B sent, %d retransmits", s.Streams, s.Throughput/1e9, s.Seconds, s.BytesSent, s.Retransmits)
		if i >= 3 || s.Streams != 1<<i || !(s.Throughput > 0) || s.BytesSent <= 0 {
			t.Errorf("sample %d is %+v, want %d streams and a positive throughput", i, s, 1<<i)
		}
	}
	if len(e.Samples) != 3 || !(e.Throughput > 0) || e.Streams < 1 || e.Streams > 4 || e.Cost < 3 || e.Version == "" {
		t.Errorf("result %+v: want 3 samples, a positive throughput at 1-4 streams, at least 3 s of cost", e)
	}
}

// TestLoopbackBusy: while another client holds the server, a test fails
// at once without retries and succeeds with them once the server is free.
func TestLoopbackBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs iperf3 for a few seconds")
	}
	port := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := exec.CommandContext(ctx, "iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "1", "-J")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	time.Sleep(300 * time.Millisecond) // connecting on loopback takes milliseconds
	o := Options{Host: "127.0.0.1", Port: port, Seconds: 1, MaxStreams: 1, Retries: -1}
	if _, err := Estimate(ctx, o); !errors.Is(err, ErrBusy) {
		t.Fatalf("while another client tests: %v, want ErrBusy", err)
	}
	o.Retries, o.Backoff = 5, 300*time.Millisecond
	e, err := Estimate(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Samples) != 1 || e.Samples[0].Attempts < 2 {
		t.Errorf("samples %+v: want one that needed retries", e.Samples)
	}
	t.Logf("free after %d attempts; cost %.1f s", e.Samples[0].Attempts, e.Cost)
}
