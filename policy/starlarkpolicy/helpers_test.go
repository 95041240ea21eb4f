package starlarkpolicy

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/policy"
)

var (
	t0   = time.Date(2013, 7, 9, 18, 41, 0, 0, time.UTC) // Table VII's first run
	pair = policy.Pair{Src: "gsiftp://dtn.nersc.gov", Dst: "gsiftp://red.unl.edu"}
)

// paper returns Table III's limits with the given s_i and s_u.
func paper(initial, update int) policy.Params {
	return policy.Params{Initial: initial, Update: update, PairMax: 128, ClientMax: 32, Lease: 5 * time.Minute}
}

// newTestService returns a service on pair with params, pol and
// deterministic IDs (a1, a2, ...).
func newTestService(t testing.TB, params policy.Params, pol policy.Policy) *policy.Service {
	t.Helper()
	n := 0
	s, err := policy.New(policy.Config{
		Pairs:  map[policy.Pair]policy.Params{pair: params},
		Policy: pol,
		NewID:  func() string { n++; return fmt.Sprintf("a%d", n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRequest(t testing.TB, s *policy.Service, now time.Time, client, vo string, want int) policy.Allocation {
	t.Helper()
	a, err := s.Request(now, policy.Request{Pair: pair, Client: client, VO: vo, Want: want})
	if err != nil {
		t.Fatalf("request by %s: %v", client, err)
	}
	return a
}

func mustUpdate(t testing.TB, s *policy.Service, now time.Time, a policy.Allocation, want int) policy.Allocation {
	t.Helper()
	u, err := s.Update(now, a.ID, a.Owner(), want)
	if err != nil {
		t.Fatalf("update %s: %v", a.ID, err)
	}
	return u
}

func used(t testing.TB, s *policy.Service, now time.Time) int {
	t.Helper()
	for _, u := range s.Usage(now) {
		if u.Pair == pair {
			return u.Used
		}
	}
	t.Fatalf("pair %s not in usage", pair)
	return 0
}

// unchanged fails if the service's state differs from before.
func unchanged(t testing.TB, s *policy.Service, before []policy.Allocation) {
	t.Helper()
	if after := s.State(); !reflect.DeepEqual(before, after) {
		t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
}
