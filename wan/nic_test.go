package wan

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
)

// TestNICSharedByFlows: a host's NIC egress capacity is shared by its
// flows to every destination (the SC'15 source's case), and changing it
// while traffic flows takes effect.
func TestNICSharedByFlows(t *testing.T) {
	needRoot(t)
	needTools(t, "iperf3")
	ctx := context.Background()
	p, err := ParseProfile([]byte(`{"name": "nic", "hosts": [
	  {"name": "s", "mtu": 9000, "cc": "cubic", "nic": {"egress_mbps": 150}},
	  {"name": "d", "mtu": 9000, "cc": "cubic"}, {"name": "e", "mtu": 9000, "cc": "cubic"}],
	 "links": [{"hosts": ["s", "d"], "rate_mbps": 1000, "delay_ms": 5}, {"hosts": ["s", "e"], "rate_mbps": 1000, "delay_ms": 10}]}`), ".")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Up(ctx, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	both := func(port int) (float64, float64) {
		var wg sync.WaitGroup
		rates := make([]float64, 2)
		for i, dst := range []string{"d", "e"} {
			srv := iperfServer(t, n, dst, port+i)
			wg.Go(func() {
				defer srv.Wait()
				out, err := n.Exec(ctx, "s", "iperf3", "-c", dst, "-p", strconv.Itoa(port+i), "-P", "4", "-t", "3", "-O", "1", "-J")
				if err != nil {
					t.Error(err)
					return
				}
				rates[i] = iperfReceived(t, string(out))
			})
		}
		wg.Wait()
		return rates[0], rates[1]
	}
	goodput := 8948.0 / 9000
	for _, c := range []struct {
		nic  float64
		port int
	}{{150, 5311}, {80, 5313}} {
		if c.nic != 150 {
			if err := n.Set(ctx, "s", Update{EgressMbps: ptr(c.nic)}); err != nil {
				t.Fatal(err)
			}
		}
		d, e := both(c.port)
		want := c.nic * goodput
		t.Logf("NIC %.0f Mbit/s: s>d %.1f + s>e %.1f = %.1f Mbit/s", c.nic, d, e, d+e)
		if math.Abs(d+e-want) > 0.1*want {
			t.Errorf("NIC %.0f Mbit/s shared by two destinations: %.1f + %.1f Mbit/s, want %.1f ± 10%% in all", c.nic, d, e, want)
		}
		if d < 0.2*want || e < 0.2*want {
			t.Errorf("NIC %.0f Mbit/s: %.1f and %.1f Mbit/s: one destination starved", c.nic, d, e)
		}
	}
}

// TestNICIngressRate: a host whose NIC ingress is the bottleneck receives
// at that rate, one stream as well as several (the SC'15 destinations'
// case). Serving each packet when the delivering goroutine woke up
// rather than when it arrived once left the NIC idle for the timer's
// slack per packet: 75% of 448 Mbit/s.
func TestNICIngressRate(t *testing.T) {
	needRoot(t)
	needTools(t, "iperf3")
	ctx := context.Background()
	p, err := ParseProfile([]byte(`{"name": "ingress", "hosts": [
	  {"name": "s", "mtu": 9000, "cc": "cubic", "rmem_max": 16777216, "wmem_max": 16777216},
	  {"name": "d", "mtu": 9000, "cc": "cubic", "rmem_max": 16777216, "wmem_max": 16777216, "nic": {"ingress_mbps": 300}}],
	 "links": [{"hosts": ["s", "d"], "rate_mbps": 1000, "delay_ms": 10}]}`), ".")
	if err != nil {
		t.Fatal(err)
	}
	n, err := Up(ctx, p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	want := 300 * 8948.0 / 9000
	for i, streams := range []string{"1", "4"} {
		port := 5321 + i
		srv := iperfServer(t, n, "d", port)
		out, err := n.Exec(ctx, "s", "iperf3", "-c", "d", "-p", strconv.Itoa(port), "-P", streams, "-t", "3", "-O", "1", "-J")
		srv.Wait()
		if err != nil {
			t.Fatal(err)
		}
		got := iperfReceived(t, string(out))
		t.Logf("%s streams into a 300 Mbit/s NIC: %.1f Mbit/s", streams, got)
		if math.Abs(got-want) > 0.1*want {
			t.Errorf("%s streams into a 300 Mbit/s NIC ingress: %.1f Mbit/s, want %.1f ± 10%%", streams, got, want)
		}
	}
}
