package policy

import (
	"fmt"
	"testing"
)

// TestProvision checks Fig. 2 branch by branch on the paper's parameters.
func TestProvision(t *testing.T) {
	tableIV := paper(32, 0)  // slow client adaptation: s_u N/A
	tableVI := paper(4, 4)   // slow increases
	tableVII := paper(16, 4) // fast increases
	for _, c := range []struct {
		name          string
		p             Params
		used, streams int // s_a (streams[t] included), streams[t]
		want          int
	}{
		// Line 7: enough for an initial allocation.
		{"initial, table VI", tableVI, 0, 0, 4},
		{"initial, table VII, 5th client", tableVII, 64, 0, 16},
		// Line 7 is strict: exactly s_i available goes to the
		// remainder branch, which grants the same s_i.
		{"initial, exactly s_i, table IV", tableIV, 96, 0, 32},
		{"initial, exactly s_i via client max, table IV", tableIV, 0, 0, 32},
		// Line 11: enough for an update.
		{"update, table VI", tableVI, 4, 4, 8},
		{"update, table VII", tableVII, 80, 16, 20},
		{"update, exactly s_u, table VII", tableVII, 124, 20, 24},
		{"update, s_u N/A, table IV", tableIV, 64, 16, 16},
		// Lines 4-6: exhausted pool or client at its maximum.
		{"exhausted pool, initial, table IV", tableIV, 128, 0, 0},
		{"exhausted pool, update, table VII", tableVII, 128, 20, 20},
		{"client at max, table VI", tableVI, 100, 32, 32},
		// Lines 15-18: the remainder.
		{"remainder of pool, initial, table VII", tableVII, 118, 0, 10},
		{"remainder of pool, update, table VII", tableVII, 126, 16, 18},
		{"remainder of client max, update", Params{Initial: 16, Update: 4, PairMax: 128, ClientMax: 30, Lease: 1}, 60, 28, 30},
		// An allocation granted nothing (pool exhausted) updates as an
		// initial request: Fig. 5's waiting clients.
		{"waiting client after a release, table IV", tableIV, 96, 0, 32},
		// A lowered limit: s_v < 0 leaves the allocation alone.
		{"client max lowered", Params{Initial: 4, Update: 4, PairMax: 128, ClientMax: 24, Lease: 1}, 32, 32, 32},
		{"pair max lowered", Params{Initial: 4, Update: 4, PairMax: 64, ClientMax: 32, Lease: 1}, 96, 32, 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := provision(c.p, c.used, c.streams); got != c.want {
				t.Errorf("PROVISION(s_a=%d, streams[t]=%d) with %+v = %d, want %d", c.used, c.streams, c.p, got, c.want)
			}
		})
	}
}

// TestGreedyFig5 replays Table IV: the first four of eight clients get
// 32 streams, the others none until a release.
func TestGreedyFig5(t *testing.T) {
	s := newTestService(t, paper(32, 0), nil)
	var as []Allocation
	for i := range 8 {
		as = append(as, mustRequest(t, s, t0, fmt.Sprint("client", i), "vo", 0))
	}
	for i, a := range as {
		if want := map[bool]int{true: 32, false: 0}[i < 4]; a.Streams != want {
			t.Errorf("client%d got %d streams, want %d", i, a.Streams, want)
		}
	}
	// Updates change nothing: s_u is N/A and the pool is empty.
	for i, a := range as {
		if u := mustUpdate(t, s, t0, a, 0); u.Streams != as[i].Streams {
			t.Errorf("update of client%d: %d streams, want %d", i, u.Streams, as[i].Streams)
		}
	}
	if err := s.Release(t0, as[0].ID, as[0].Owner()); err != nil {
		t.Fatal(err)
	}
	if u := mustUpdate(t, s, t0, as[4], 0); u.Streams != 32 {
		t.Errorf("client4 after a release: %d streams, want 32", u.Streams)
	}
	if u := mustUpdate(t, s, t0, as[5], 0); u.Streams != 0 {
		t.Errorf("client5: %d streams, want 0", u.Streams)
	}
	if got := used(t, s, t0); got != 128 {
		t.Errorf("pair uses %d streams, want 128", got)
	}
}

// TestGreedyFig8 replays Table VII: five clients get 16 streams, their
// updates take the pair to 128 as 28, 32, 32, 20 and 16 (Fig. 8), and
// the three others wait.
func TestGreedyFig8(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	var as []Allocation
	for i := range 5 {
		as = append(as, mustRequest(t, s, t0, fmt.Sprint("client", i), "vo", 0))
	}
	if got := used(t, s, t0); got != 80 {
		t.Fatalf("five initial allocations use %d, want 80", got)
	}
	for i, n := range []int{3, 4, 4, 1, 0} {
		for range n {
			as[i] = mustUpdate(t, s, t0, as[i], 0)
		}
	}
	for i := 5; i < 8; i++ {
		if a := mustRequest(t, s, t0, fmt.Sprint("client", i), "vo", 0); a.Streams != 0 {
			t.Errorf("client%d got %d streams from a full pair", i, a.Streams)
		}
	}
	// Client 1 at its maximum, client 4 with an empty pool: unchanged.
	for _, i := range []int{1, 4} {
		as[i] = mustUpdate(t, s, t0, as[i], 0)
	}
	got := streams(s, t0)
	for i, want := range []int{28, 32, 32, 20, 16, 0, 0, 0} {
		if c := fmt.Sprint("client", i); got[c] != want {
			t.Errorf("%s holds %d streams, want %d", c, got[c], want)
		}
	}
}

// TestGreedySlowIncreases replays Table VI for one client: 4 streams,
// then 4 more per update up to the 32 of a client.
func TestGreedySlowIncreases(t *testing.T) {
	s := newTestService(t, paper(4, 4), nil)
	a := mustRequest(t, s, t0, "client0", "vo", 0)
	var got []int
	for range 9 {
		got = append(got, a.Streams)
		a = mustUpdate(t, s, t0, a, 0)
	}
	want := []int{4, 8, 12, 16, 20, 24, 28, 32, 32}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("streams %v, want %v", got, want)
	}
}
