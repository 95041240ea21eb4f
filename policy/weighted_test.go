package policy

import (
	"fmt"
	"testing"
	"time"
)

func TestFill(t *testing.T) {
	for _, c := range []struct {
		total int
		w     []float64
		d     []int
		want  []int
	}{
		{128, []float64{3, 1}, []int{128, 128}, []int{96, 32}},
		{128, []float64{3, 1}, []int{128, 4}, []int{124, 4}},
		{128, []float64{3, 1}, []int{20, 128}, []int{20, 108}},
		{128, []float64{1, 1}, []int{40, 40}, []int{40, 40}},
		{10, []float64{1, 1, 1}, []int{5, 5, 5}, []int{4, 3, 3}},
		{100, []float64{1, 2, 7}, []int{100, 100, 100}, []int{10, 20, 70}},
		{100, []float64{1, 2, 7}, []int{100, 0, 100}, []int{13, 0, 87}},
		{0, []float64{1}, []int{5}, []int{0}},
		{7, nil, nil, []int{}},
	} {
		if got := fill(c.total, c.w, c.d); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("fill(%d, %v, %v) = %v, want %v", c.total, c.w, c.d, got, c.want)
		}
	}
}

// voTotals sums streams per VO on pair.
func voTotals(s *Service, now time.Time) map[string]int {
	m := map[string]int{}
	for _, a := range s.List(now, Filter{Pair: pair}) {
		m[a.VO] += a.Streams
	}
	return m
}

// round has every allocation on pair update once, oldest first, each
// asking for want(a).
func round(t *testing.T, s *Service, now time.Time, want func(Allocation) int) {
	t.Helper()
	for _, a := range s.List(now, Filter{Pair: pair}) {
		mustUpdate(t, s, now, a, want(a))
	}
}

func policyDecides(Allocation) int { return 0 }

// converge runs update rounds until the VO totals are want, and fails if
// that takes more than limit rounds or does not hold afterwards.
func converge(t *testing.T, s *Service, now time.Time, limit int, want map[string]int, ask func(Allocation) int) {
	t.Helper()
	for r := 0; ; r++ {
		if got := voTotals(s, now); fmt.Sprint(got) == fmt.Sprint(want) {
			break
		} else if r == limit {
			t.Fatalf("after %d rounds VO totals are %v, want %v", r, got, want)
		}
		round(t, s, now, ask)
	}
	for range 3 {
		round(t, s, now, ask)
		if got := voTotals(s, now); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("converged to %v, then moved to %v", want, got)
		}
	}
}

// TestWeightedSharesConverge: under contention a VO of weight w gets
// w/Σw of the pair; an absent or idle VO's share is lent and reclaimed.
func TestWeightedSharesConverge(t *testing.T) {
	s := newTestService(t, paper(16, 4), WeightedShares{})
	if err := s.SetWeights(pair, map[string]float64{"atlas": 3, "cms": 1}); err != nil {
		t.Fatal(err)
	}
	now := t0
	for i := range 4 {
		mustRequest(t, s, now, fmt.Sprint("atlas", i), "atlas", 0)
	}
	// Alone, atlas borrows cms's share: the whole pair.
	converge(t, s, now, 5, map[string]int{"atlas": 128}, policyDecides)

	// cms arrives; the pair is full, so it waits for atlas to hand back
	// at its updates. 3:1 of 128 is 96:32.
	for i := range 4 {
		if a := mustRequest(t, s, now, fmt.Sprint("cms", i), "cms", 0); a.Streams != 0 {
			t.Errorf("cms%d got %d streams from a full pair", i, a.Streams)
		}
	}
	converge(t, s, now, 3, map[string]int{"atlas": 96, "cms": 32}, policyDecides)
	for client, n := range streams(s, now) {
		if want := map[string]int{"atlas": 24, "cms": 8}[client[:len(client)-1]]; n != want {
			t.Errorf("%s holds %d, want %d (equal split within the VO)", client, n, want)
		}
	}

	// cms needs only 2 streams per client: its idle share is lent to
	// atlas (30 per client, below the client max of 32).
	twoForCMS := func(a Allocation) int {
		if a.VO == "cms" {
			return 2
		}
		return 0
	}
	converge(t, s, now, 3, map[string]int{"atlas": 120, "cms": 8}, twoForCMS)

	// cms wants its share again: it gets it back.
	converge(t, s, now, 4, map[string]int{"atlas": 96, "cms": 32}, policyDecides)

	// The administrator changes the weights at run time.
	if err := s.SetWeights(pair, map[string]float64{"atlas": 1, "cms": 1}); err != nil {
		t.Fatal(err)
	}
	converge(t, s, now, 6, map[string]int{"atlas": 64, "cms": 64}, policyDecides)

	// cms leaves: atlas takes the pair back.
	for _, a := range s.List(now, Filter{VO: "cms"}) {
		if err := s.Release(now, a.ID, a.Owner()); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, s, now, 5, map[string]int{"atlas": 128}, policyDecides)
}

// TestWeightedSharesThreeVOs: contention among three VOs with uneven
// client counts.
func TestWeightedSharesThreeVOs(t *testing.T) {
	p := paper(16, 4)
	p.PairMax, p.ClientMax = 200, 64
	s := newTestService(t, p, WeightedShares{})
	if err := s.SetWeights(Pair{}, map[string]float64{"a": 1, "b": 2, "c": 7}); err != nil {
		t.Fatal(err)
	}
	for vo, n := range map[string]int{"a": 5, "b": 2, "c": 8} {
		for i := range n {
			mustRequest(t, s, t0, fmt.Sprint(vo, i), vo, 0)
		}
	}
	converge(t, s, t0, 20, map[string]int{"a": 20, "b": 40, "c": 140}, policyDecides)
}
