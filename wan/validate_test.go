package wan

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// validation is the three-host profile the validation test brings up:
// a-b a clean long path (50 ms) with a short queue (under half the 1.25 MB
// bandwidth-delay product) whose receiver b has a small window, a-c a
// lossy one, b-c a short one whose rate the test replays from a series.
const validation = `{"name": "validation", "hosts": [
  {"name": "a", "mtu": 9000, "cc": "cubic", "rmem_max": 4194304, "wmem_max": 4194304},
  {"name": "b", "mtu": 9000, "cc": "cubic", "rmem_max": 262144, "wmem_max": 4194304},
  {"name": "c", "mtu": 9000, "cc": "cubic", "rmem_max": 4194304, "wmem_max": 4194304}],
 "links": [
  {"hosts": ["a", "b"], "rate_mbps": 200, "delay_ms": 25, "queue_bytes": 500000},
  {"hosts": ["a", "c"], "rate_mbps": 100, "delay_ms": 20, "loss": 0.01},
  {"hosts": ["b", "c"], "rate_mbps": 250, "delay_ms": 5}]}`

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (scripts/ci-deps.sh installs it)", tool)
		}
	}
}

// TestValidation brings up a three-host network and checks that the
// kernel's TCP over it sees what the profile says: round-trip times, a
// window-limited stream at window/RTT, parallel streams at the link rate,
// queue overflow as retransmissions, a rate series followed second by
// second, the configured loss rate; then that it all goes away.
func TestValidation(t *testing.T) {
	needRoot(t)
	needTools(t, "ping", "iperf3", "nstat", "ss")
	ctx := context.Background()
	p, err := ParseProfile([]byte(validation), ".")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Up(ctx, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			n.Close()
		}
	}()

	t.Run("ping", func(t *testing.T) {
		for _, c := range []struct {
			from, to string
			rttMs    float64
		}{{"a", "b", 50}, {"a", "c", 40}, {"c", "b", 10}} {
			// The median of ten: one reply late because a loaded machine
			// ran ping itself late says nothing about the path.
			out, err := n.Exec(ctx, c.from, "ping", "-c", "10", "-i", "0.2", c.to)
			if err != nil && c.from+c.to != "ac" { // a-c loses 1%: a lost reply is no failure
				t.Fatal(err)
			}
			var rtts []float64
			for _, m := range regexp.MustCompile(`time=([0-9.]+) ms`).FindAllSubmatch(out, -1) {
				v, _ := strconv.ParseFloat(string(m[1]), 64)
				rtts = append(rtts, v)
			}
			if len(rtts) < 5 {
				t.Fatalf("ping %s>%s: %d replies: %s", c.from, c.to, len(rtts), out)
			}
			sort.Float64s(rtts)
			med := rtts[len(rtts)/2]
			t.Logf("ping %s>%s: median %.2f ms, profile %.0f ms", c.from, c.to, med, c.rttMs)
			if math.Abs(med-c.rttMs) > 1 {
				t.Errorf("ping %s>%s: median RTT %.2f ms, want %.0f ± 1 ms", c.from, c.to, med, c.rttMs)
			}
		}
	})

	t.Run("window-limited stream", func(t *testing.T) {
		// One stream into b, whose 256 KB receive buffer keeps its window
		// far below the 1.25 MB bandwidth-delay product: it must move
		// window/RTT, the window being what b advertises (the sender's
		// snd_wnd, read while the stream runs).
		srv := iperfServer(t, n, "b", 5301)
		cl, err := n.Command(ctx, "a", "iperf3", "-c", "b", "-p", "5301", "-t", "4", "-O", "1", "-J")
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		cl.Stdout = &out
		if err := cl.Start(); err != nil {
			t.Fatal(err)
		}
		// The window grows as b's buffer autotunes: average what the
		// sender saw over the measured seconds.
		time.Sleep(1200 * time.Millisecond)
		var wnds []int
		for range 8 {
			ss, err := n.Exec(ctx, "a", "ss", "-tinH", "dst", "198.18.0.2", "dport", "= :5301")
			if err != nil {
				t.Fatal(err)
			}
			w := 0
			for _, m := range regexp.MustCompile(`snd_wnd:(\d+)`).FindAllSubmatch(ss, -1) {
				w = max(w, atoi(string(m[1])))
			}
			if w > 0 {
				wnds = append(wnds, w)
			}
			time.Sleep(300 * time.Millisecond)
		}
		if err := cl.Wait(); err != nil {
			t.Fatalf("iperf3: %v: %s", err, out.String())
		}
		srv.Wait()
		if len(wnds) == 0 {
			t.Fatal("no snd_wnd in ss output")
		}
		wnd := 0
		for _, w := range wnds {
			wnd += w
		}
		wnd /= len(wnds)
		got := iperfReceived(t, out.String())
		bound := float64(wnd) * 8 / 0.050 / 1e6
		t.Logf("one stream into a 256 KB buffer: %.1f Mbit/s, window %d B (mean of %v) / 50 ms = %.1f Mbit/s", got, wnd, wnds, bound)
		if math.Abs(got-bound) > 0.15*bound {
			t.Errorf("one window-limited stream: %.1f Mbit/s, want window/RTT %.1f ± 15%%", got, bound)
		}
	})

	t.Run("16 streams fill the link and overflow its queue", func(t *testing.T) {
		before := retransmits(t, n, "a")
		st0 := linkStatus(t, n, "a>b")
		srv := iperfServer(t, n, "b", 5302)
		out, err := n.Exec(ctx, "a", "iperf3", "-c", "b", "-p", "5302", "-P", "16", "-t", "5", "-O", "2", "-J")
		if err != nil {
			t.Fatal(err)
		}
		srv.Wait()
		got := iperfReceived(t, string(out))
		st1 := linkStatus(t, n, "a>b")
		retr := retransmits(t, n, "a") - before
		drops := st1.QueueDrops - st0.QueueDrops
		// Goodput: the link's 200 Mbit/s carry 8948 bytes of payload in
		// every 9000 (IP and TCP headers with timestamps).
		want := 200 * 8948.0 / 9000
		t.Logf("16 streams: %.1f Mbit/s (link %.1f of goodput), %d queue drops, %d retransmissions", got, want, drops, retr)
		if math.Abs(got-want) > 0.10*want {
			t.Errorf("16 streams: %.1f Mbit/s, want the link's %.1f ± 10%%", got, want)
		}
		if drops == 0 || retr == 0 {
			t.Errorf("16 streams over a one-BDP queue: %d queue drops, %d TCP retransmissions; want both > 0", drops, retr)
		}
	})

	t.Run("rate series", func(t *testing.T) {
		series := []Step{{0, 100}, {2, 240}, {4, 50}, {6, 160}}
		srv := iperfServer(t, n, "c", 5303)
		cl, err := n.Command(ctx, "b", "iperf3", "-c", "c", "-p", "5303", "-P", "8", "-t", "9")
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cl.Wait(); srv.Wait() }()
		time.Sleep(500 * time.Millisecond)
		if err := n.Set(ctx, "b>c", Update{Series: series}); err != nil {
			t.Fatal(err)
		}
		type sample struct{ at, bytes float64 }
		var samples []sample
		for {
			ls := linkStatus(t, n, "b>c")
			samples = append(samples, sample{ls.SeriesSeconds, float64(ls.Bytes)})
			if ls.SeriesSeconds > 8 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		at := func(x float64) float64 { // bytes at series time x
			for i := 1; i < len(samples); i++ {
				if s0, s1 := samples[i-1], samples[i]; s1.at >= x {
					return s0.bytes + (s1.bytes-s0.bytes)*(x-s0.at)/(s1.at-s0.at)
				}
			}
			t.Fatalf("no sample at %.1f s", x)
			return 0
		}
		// Each second that lies inside one step (TCP is given 0.5 s to
		// find a new rate): its forwarded rate within 10% of the step's.
		for i, s := range series {
			for from := s.At + 0.5; from+1 <= s.At+2+1e-9; from += 0.5 {
				got := (at(from+1) - at(from)) * 8 / 1e6
				t.Logf("series step %d (%.0f Mbit/s): %.1f-%.1f s: %.1f Mbit/s", i, s.Mbps, from, from+1, got)
				if math.Abs(got-s.Mbps) > 0.10*s.Mbps {
					t.Errorf("seconds %.1f-%.1f of the series: %.1f Mbit/s, want %.0f ± 10%%", from, from+1, got, s.Mbps)
				}
			}
		}
		if err := n.Set(ctx, "b-c", Update{RateMbps: ptr(250.0)}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("loss rate", func(t *testing.T) {
		// UDP: every datagram is one segment, nothing adapts.
		st0 := linkStatus(t, n, "a>c")
		srv := iperfServer(t, n, "c", 5304)
		out, err := n.Exec(ctx, "a", "iperf3", "-c", "c", "-p", "5304", "-u", "-b", "60M", "-l", "1400", "-t", "2", "-J")
		if err != nil {
			t.Fatal(err)
		}
		srv.Wait()
		st1 := linkStatus(t, n, "a>c")
		lost := float64(st1.RandomDrops - st0.RandomDrops)
		drawn := lost + float64(st1.Packets-st0.Packets+st1.QueueDrops-st0.QueueDrops)
		rate := lost / drawn
		sigma := math.Sqrt(0.01 * 0.99 / drawn)
		var r struct {
			End struct {
				Sum struct {
					LostPercent float64 `json:"lost_percent"`
				} `json:"sum"`
			} `json:"end"`
		}
		_ = json.Unmarshal(out, &r)
		t.Logf("loss: %.0f of %.0f segments (%.4f, σ %.4f); iperf3 saw %.2f%%", lost, drawn, rate, sigma, r.End.Sum.LostPercent)
		if drawn < 5000 || math.Abs(rate-0.01) > 4*sigma {
			t.Errorf("loss rate %.4f over %.0f segments, want 0.01 ± 4σ (%.4f)", rate, drawn, 4*sigma)
		}

		// TCP over the same path: super-packets are cut into pieces (where
		// loss hits them, and because at 100 Mbit/s their segments spread
		// out) with fresh headers, which c's kernel must accept.
		csum0 := counter(t, n, "c", "TcpInCsumErrors")
		srv = iperfServer(t, n, "c", 5305)
		out, err = n.Exec(ctx, "a", "iperf3", "-c", "c", "-p", "5305", "-t", "2", "-J")
		if err != nil {
			t.Fatal(err)
		}
		srv.Wait()
		st2 := linkStatus(t, n, "a>c")
		got := iperfReceived(t, string(out))
		t.Logf("TCP over 1%% loss: %.1f Mbit/s, %d super-packets segmented", got, st2.Segmented-st1.Segmented)
		if st2.Segmented == st1.Segmented || got < 1 || counter(t, n, "c", "TcpInCsumErrors") != csum0 || st2.WriteErrors != 0 {
			t.Errorf("TCP over a lossy path: %.1f Mbit/s, %d segmented, checksum errors %d→%d, write errors %d",
				got, st2.Segmented-st1.Segmented, csum0, counter(t, n, "c", "TcpInCsumErrors"), st2.WriteErrors)
		}
	})

	st, err := n.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range st.Hosts {
		if h.TUNTxDropped != 0 {
			t.Errorf("host %s: the kernel dropped %d packets the forwarder did not read in time", h.Name, h.TUNTxDropped)
		}
	}
	t.Logf("forwarder: %.1f s CPU in %.1f s", st.CPUSeconds, st.UptimeSeconds)

	start := time.Now()
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("teardown took %v, want under 2 minutes", d)
	}
	if left, _ := stale(testPrefix); len(left) > 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
}

func ptr[T any](v T) *T { return &v }

func atoi(s string) int { v, _ := strconv.Atoi(s); return v }

// iperfServer starts a one-shot iperf3 server in host on port and waits
// until it listens.
func iperfServer(t *testing.T, n *Net, host string, port int) *exec.Cmd {
	t.Helper()
	ctx := context.Background()
	cmd, err := n.Command(ctx, host, "iperf3", "-s", "-1", "-p", strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for range 100 {
		out, _ := n.Exec(ctx, host, "ss", "-ltnH", fmt.Sprintf("sport = :%d", port))
		if len(strings.TrimSpace(string(out))) > 0 {
			return cmd
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("iperf3 server in %s did not listen on %d", host, port)
	return nil
}

// iperfReceived is the receiver's rate in an iperf3 -J report, Mbit/s.
func iperfReceived(t *testing.T, out string) float64 {
	t.Helper()
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("iperf3 report: %v: %s", err, out)
	}
	return r.End.SumReceived.BitsPerSecond / 1e6
}

// counter is a kernel SNMP counter in host's namespace.
func counter(t *testing.T, n *Net, host, name string) uint64 {
	t.Helper()
	out, err := n.Exec(context.Background(), host, "nstat", "-asz", name)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(name + `\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in nstat output: %s", name, out)
	}
	v, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return v
}

func retransmits(t *testing.T, n *Net, host string) uint64 {
	return counter(t, n, host, "TcpRetransSegs")
}

func linkStatus(t *testing.T, n *Net, name string) LinkStatus {
	t.Helper()
	st, err := n.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Links {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no link %s", name)
	return LinkStatus{}
}
