package policy

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// tableV is the fast client side adaptation of Table V (c_i 4, c_max 8,
// Δ 1, d 2, p 4), with a threshold of 1 MB/s.
var tableV = AdaptiveParams{Ci: 4, Cmax: 8, Delta: 1, D: 2, P: 4, T: 1e6}

func mustAdaptive(t *testing.T, p AdaptiveParams) *Adaptive {
	t.Helper()
	a, err := NewAdaptive(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdaptiveStart(t *testing.T) {
	for _, c := range []struct {
		name    string
		p       AdaptiveParams
		streams int
		want    int
	}{
		{"table IV: c_i 1 in 32 streams", AdaptiveParams{Ci: 1, Cmax: 8, Delta: 1, D: 4, P: 4}, 32, 1},
		{"table V: c_i 4 in 32 streams", tableV, 32, 4},
		{"table VIII: c_i 20 in 160 streams", AdaptiveParams{Ci: 20, Cmax: 128, Delta: 4, D: 2, P: 8}, 160, 20},
		{"allocation limits: 8 streams, p 4", tableV, 8, 2},
		{"floor: 7 streams, p 4", tableV, 7, 1},
		{"no streams", tableV, 0, 0},
		{"follow, table VII: 16 streams", AdaptiveParams{Cmax: 8, D: 2, P: 4, Follow: true}, 16, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mustAdaptive(t, c.p).Start(c.streams); got != c.want {
				t.Errorf("Start(%d) = %d, want %d", c.streams, got, c.want)
			}
		})
	}
}

// TestAdaptiveScripted follows ADAPT on a scripted series of allocations
// and rates.
func TestAdaptiveScripted(t *testing.T) {
	a := mustAdaptive(t, tableV)
	if c := a.Start(32); c != 4 {
		t.Fatalf("Start = %d", c)
	}
	for i, step := range []struct {
		streams int
		rate    float64
		want    int
		why     string
	}{
		{32, 100e6, 5, "first rate is a rise from r_last = 0"},
		{32, 120e6, 6, "rise"},
		{32, 120.5e6, 6, "change within T"},
		{32, 110e6, 5, "fall"},
		{32, 130e6, 6, "rise"},
		{32, 140e6, 7, "rise"},
		{32, 150e6, 8, "rise to c_max"},
		{32, 160e6, 8, "c_max and c_alloc hold"},
		{16, 160e6, 4, "shrunk allocation bounds c"},
		{16, 170e6, 4, "rise bounded by c_alloc"},
		{16, 10e6, 3, "fall"},
		{16, 5e6, 2, "fall"},
		{16, 1e6, 1, "fall"},
		{16, 0, 1, "fall floored at 1"},
		{16, math.NaN(), 1, "NaN rate counts as 0"},
		{0, 0, 0, "allocation gone"},
		{32, 0, 4, "streams back: restart at c_i"},
	} {
		if got := a.Adapt(step.streams, step.rate); got != step.want {
			t.Errorf("step %d (%s): Adapt(%d, %g) = %d, want %d", i, step.why, step.streams, step.rate, got, step.want)
		}
		if a.Concurrency() != step.want {
			t.Errorf("step %d: Concurrency %d", i, a.Concurrency())
		}
	}
}

func TestAdaptiveDue(t *testing.T) {
	a := mustAdaptive(t, tableV)
	a.Start(32)
	if a.Due() {
		t.Error("due at start")
	}
	a.Completed(1)
	if a.Due() {
		t.Error("due after 1 of d=2 files")
	}
	a.Completed(1)
	if !a.Due() {
		t.Error("not due after d files")
	}
	a.Adapt(32, 1)
	if a.Due() {
		t.Error("due right after Adapt")
	}
	// The paper's batch: c = 4 files complete at once, k goes to -2.
	a.Completed(a.Concurrency())
	if !a.Due() {
		t.Error("not due after a batch of c > d files")
	}
	a.Completed(-5) // ignored
	if !a.Due() {
		t.Error("negative completions counted")
	}
	// At concurrency 0 the client always wants an update.
	z := mustAdaptive(t, tableV)
	if z.Start(0); !z.Due() {
		t.Error("a client without streams is not due")
	}
}

// TestAdaptiveRenew: a renewal between adaptation points keeps the
// concurrency within the streams it answers and moves nothing else: not
// the count to the next adaptation, nor the last rate.
func TestAdaptiveRenew(t *testing.T) {
	a := mustAdaptive(t, tableV)
	a.Start(32)
	a.Adapt(32, 2e6) // up by Δ: 5
	a.Completed(1)
	for _, step := range []struct{ streams, want int }{{32, 5}, {40, 5}, {12, 3}, {32, 3}, {3, 0}} {
		if got := a.Renew(step.streams); got != step.want {
			t.Errorf("Renew(%d) = %d, want %d", step.streams, got, step.want)
		}
	}
	if !a.Due() {
		t.Error("not due at concurrency 0")
	}
	b := mustAdaptive(t, tableV)
	b.Start(32)
	b.Adapt(32, 2e6)
	b.Completed(1)
	b.Renew(32)
	if b.Due() {
		t.Error("a renewal counted as completed files")
	}
	// The last rate is still 2 MB/s: 2.5 MB/s is within the threshold.
	if c := b.Adapt(32, 2.5e6); c != 5 {
		t.Errorf("after a renewal Adapt(32, 2.5e6) = %d, want 5 (the rate measured before the renewal stands)", c)
	}
}

func TestAdaptiveRelative(t *testing.T) {
	p := tableV
	p.T, p.Relative = 0.1, true
	a := mustAdaptive(t, p)
	a.Start(32)
	for _, step := range []struct {
		rate float64
		want int
	}{{100, 5}, {105, 5}, {80, 4}, {89, 5}} {
		if got := a.Adapt(32, step.rate); got != step.want {
			t.Errorf("Adapt(32, %g) = %d, want %d", step.rate, got, step.want)
		}
	}
}

// TestAdaptiveFollow is the non-adaptive client of Tables VI and VII: it
// runs at what the allocation allows, up to c_max.
func TestAdaptiveFollow(t *testing.T) {
	a := mustAdaptive(t, AdaptiveParams{Cmax: 8, D: 4, P: 4, Follow: true})
	if c := a.Start(4); c != 1 {
		t.Errorf("Start(4) = %d, want 1", c)
	}
	for _, step := range []struct{ streams, want int }{{8, 2}, {32, 8}, {40, 8}, {12, 3}, {0, 0}} {
		if got := a.Adapt(step.streams, 1e9); got != step.want {
			t.Errorf("Adapt(%d) = %d, want %d", step.streams, got, step.want)
		}
	}
}

func TestAdaptiveParamsValidate(t *testing.T) {
	for _, p := range []AdaptiveParams{
		{Ci: 1, Cmax: 8, Delta: 1, D: 4, P: 0},
		{Ci: 1, Cmax: 0, Delta: 1, D: 4, P: 4},
		{Ci: 0, Cmax: 8, Delta: 1, D: 4, P: 4},
		{Ci: 9, Cmax: 8, Delta: 1, D: 4, P: 4},
		{Ci: 1, Cmax: 8, Delta: -1, D: 4, P: 4},
		{Ci: 1, Cmax: 8, Delta: 1, D: 0, P: 4},
		{Ci: 1, Cmax: 8, Delta: 1, D: 4, P: 4, T: -1},
		{Ci: 1, Cmax: 8, Delta: 1, D: 4, P: 4, T: math.NaN()},
		{Ci: 1, Cmax: 1 << 20, Delta: 1, D: 4, P: 4},
	} {
		if _, err := NewAdaptive(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewAdaptive(%+v): %v, want ErrInvalid", p, err)
		}
	}
	if a := mustAdaptive(t, tableV); a.Want() != 32 || a.Params() != tableV {
		t.Errorf("Want %d, Params %+v", a.Want(), a.Params())
	}
}

// TestAdaptiveWithService runs Fig. 3 against the service with Table V's
// parameters: eight clients, 32 streams each for the first four, rates
// that rise; the first four climb to c_max = 8 and the others start
// when streams are released. No client ever runs more than its
// allocation.
func TestAdaptiveWithService(t *testing.T) {
	s := newTestService(t, paper(32, 0), nil)
	type client struct {
		alloc Allocation
		ad    *Adaptive
		left  int // files
		rate  float64
	}
	var cs []*client
	now := t0
	for i := range 8 {
		c := &client{ad: mustAdaptive(t, tableV), left: 40}
		c.alloc = mustRequest(t, s, now, fmt.Sprint("client", i), "vo", c.ad.Want())
		c.ad.Start(c.alloc.Streams)
		cs = append(cs, c)
	}
	maxC := make([]int, len(cs))
	started := make([]bool, len(cs))
	for step := 0; step < 1000; step++ {
		now = now.Add(time.Second)
		done := true
		for i, c := range cs {
			if c.left == 0 {
				continue
			}
			done = false
			if c.ad.Due() {
				c.alloc = mustUpdate(t, s, now, c.alloc, c.ad.Want())
				c.rate += 10e6 // the path keeps getting faster
				c.ad.Adapt(c.alloc.Streams, c.rate)
			}
			n := min(c.ad.Concurrency(), c.left)
			if n*tableV.P > c.alloc.Streams {
				t.Fatalf("client%d runs %d files × %d streams on %d", i, n, tableV.P, c.alloc.Streams)
			}
			started[i] = started[i] || n > 0
			maxC[i] = max(maxC[i], n)
			c.left -= n
			c.ad.Completed(n)
			if c.left == 0 {
				if err := s.Release(now, c.alloc.ID, c.alloc.Owner()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if done {
			break
		}
	}
	for i, c := range cs {
		if c.left != 0 || !started[i] {
			t.Errorf("client%d: %d files left", i, c.left)
		}
		if maxC[i] != 8 {
			t.Errorf("client%d peaked at concurrency %d, want 8", i, maxC[i])
		}
	}
	if got := used(t, s, now); got != 0 {
		t.Errorf("pair uses %d after all releases", got)
	}
}
