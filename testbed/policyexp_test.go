package testbed

import (
	"context"
	"sort"
	"strings"
	"testing"
)

// TestPolicyExps: every experiment of the paper has its parameters, and
// an unknown one is refused by name.
func TestPolicyExps(t *testing.T) {
	for _, n := range PolicyExpNames {
		vs, err := PolicyExps(n)
		if err != nil || len(vs) == 0 {
			t.Fatalf("%s: %v", n, err)
		}
		for _, e := range vs {
			if err := e.Client.Validate(); err != nil {
				t.Errorf("%s: client parameters: %v", e.Label(), err)
			}
		}
	}
	if _, err := PolicyExps("medium-client"); err == nil || !strings.Contains(err.Error(), "slow-client") {
		t.Errorf("unknown experiment: %v", err)
	}
}

// TestRunPolicyExp runs the fast-ps experiment on a small dataset: every
// file arrives verified, no client ever runs more streams than it was
// allocated, and the clients together never hold more than the pair's
// 128 streams (the service's s_pmax), though they want 256.
func TestRunPolicyExp(t *testing.T) {
	if testing.Short() {
		t.Skip("moves real bytes through an emulated testbed")
	}
	tb, err := Load("policy-mini")
	if err != nil {
		t.Fatal(err)
	}
	vs, err := PolicyExps("fast-ps")
	if err != nil {
		t.Fatal(err)
	}
	r, err := RunPolicyExp(context.Background(), tb, vs[0], PolicyExpOptions{Files: 48, MinSize: 256 << 10, MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Clients) != 8 || r.Files != 48 || r.Seconds <= 0 || len(r.Throughput) == 0 {
		t.Fatalf("run %+v", r)
	}
	type ev struct {
		at    float64
		delta int
	}
	var evs []ev
	for _, c := range r.Clients {
		prev := 0
		for _, p := range c.Timeline {
			if p.Streams > p.Allocated {
				t.Errorf("%s at %.2f s: %d streams with %d allocated", c.Name, p.At, p.Streams, p.Allocated)
			}
			evs = append(evs, ev{p.At, p.Allocated - prev})
			prev = p.Allocated
		}
		if n := len(c.Timeline); n == 0 || c.Timeline[n-1].Concurrency != 0 || c.Timeline[n-1].Allocated != 0 {
			t.Errorf("%s: timeline %+v does not end idle and released", c.Name, c.Timeline)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	held, peak := 0, 0
	for _, e := range evs {
		held += e.delta
		peak = max(peak, held)
	}
	if peak > 128 {
		t.Errorf("clients held %d streams at once; the pair allows 128", peak)
	}
	if r.PeakStreams > 128 || r.PeakStreams < 16 {
		t.Errorf("peak streams in use %d, want 16..128", r.PeakStreams)
	}
}
