package policy

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var (
	t0   = time.Date(2013, 7, 9, 18, 41, 0, 0, time.UTC) // Table VII's first run
	pair = Pair{Src: "gsiftp://dtn.nersc.gov", Dst: "gsiftp://red.unl.edu"}
)

// paper returns Table III's limits with the given s_i and s_u.
func paper(initial, update int) Params {
	return Params{Initial: initial, Update: update, PairMax: 128, ClientMax: 32, Lease: 5 * time.Minute}
}

// newTestService returns a service on pair with params, deterministic
// IDs (a1, a2, ...) and an invariant check after every operation that
// fails the test.
func newTestService(t testing.TB, params Params, pol Policy) *Service {
	t.Helper()
	n := 0
	s, err := New(Config{
		Pairs:  map[Pair]Params{pair: params},
		Policy: pol,
		NewID:  func() string { n++; return fmt.Sprintf("a%d", n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	s.afterOp = func() {
		if err := s.invariantsLocked(); err != nil {
			t.Errorf("invariant broken: %v", err)
		}
	}
	return s
}

func mustRequest(t testing.TB, s *Service, now time.Time, client, vo string, want int) Allocation {
	t.Helper()
	a, err := s.Request(now, Request{Pair: pair, Client: client, VO: vo, Want: want})
	if err != nil {
		t.Fatalf("request by %s: %v", client, err)
	}
	return a
}

func mustUpdate(t testing.TB, s *Service, now time.Time, a Allocation, want int) Allocation {
	t.Helper()
	u, err := s.Update(now, a.ID, a.Owner(), want)
	if err != nil {
		t.Fatalf("update %s: %v", a.ID, err)
	}
	return u
}

func used(t testing.TB, s *Service, now time.Time) int {
	t.Helper()
	for _, u := range s.Usage(now) {
		if u.Pair == pair {
			return u.Used
		}
	}
	t.Fatalf("pair %s not in usage", pair)
	return 0
}

// streams maps client to streams on pair.
func streams(s *Service, now time.Time) map[string]int {
	m := map[string]int{}
	for _, a := range s.List(now, Filter{Pair: pair}) {
		m[a.Client] = a.Streams
	}
	return m
}

// unchanged fails if the service's state differs from before.
func unchanged(t testing.TB, s *Service, before []Allocation) {
	t.Helper()
	if after := s.State(); !reflect.DeepEqual(before, after) {
		t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}
