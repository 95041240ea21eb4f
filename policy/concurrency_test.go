package policy

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hammer runs clients goroutines at once against one pair, each
// requesting, updating a few times and releasing (or, when crash says
// so, vanishing), with the invariants and the peak use checked under the
// service's lock after every operation. It returns the peak.
func hammer(t *testing.T, s *Service, clients int, crash func(i int) bool, admin func(now time.Time)) int {
	t.Helper()
	var peak int // written under s.mu only
	check := s.afterOp
	s.afterOp = func() {
		check()
		if ps := s.byPair[pair]; ps != nil {
			peak = max(peak, ps.used)
		}
	}
	var clock atomic.Int64
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(1)) * time.Millisecond) }

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			<-start
			a, err := s.Request(now(), Request{Pair: pair, Client: fmt.Sprint("c", i), VO: fmt.Sprint("vo", i%3), Want: rng.IntN(2) * rng.IntN(40)})
			if err != nil {
				t.Error(err)
				return
			}
			for range 3 {
				if a, err = s.Update(now(), a.ID, a.Owner(), rng.IntN(2)*rng.IntN(40)); err != nil {
					if crash != nil {
						return // expired meanwhile: gone
					}
					t.Error(err)
					return
				}
			}
			if crash != nil && crash(i) {
				return
			}
			if err := s.Release(now(), a.ID, a.Owner()); err != nil && crash == nil {
				t.Error(err)
			}
		})
	}
	if admin != nil {
		wg.Go(func() {
			<-start
			for range 50 {
				admin(now())
			}
		})
	}
	close(start)
	wg.Wait()
	return peak
}

// TestConcurrentClients: 1,000 clients requesting, updating and
// releasing at once never hold more than s_pmax on the pair.
func TestConcurrentClients(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	peak := hammer(t, s, 1000, nil, nil)
	if peak > 128 {
		t.Errorf("peak use %d > pair max 128", peak)
	}
	if peak < 128 {
		t.Logf("peak use %d: the clients never filled the pair", peak)
	}
	if st := s.State(); len(st) != 0 {
		t.Errorf("%d allocations left after every release", len(st))
	}
}

// TestConcurrentChaos adds short leases with crashed clients, weighted
// shares and an administrator shrinking the pair meanwhile.
func TestConcurrentChaos(t *testing.T) {
	p := paper(16, 4)
	p.Lease = 200 * time.Millisecond // of the fake clock: 200 operations
	s := newTestService(t, p, WeightedShares{})
	if err := s.SetWeights(pair, map[string]float64{"vo0": 3, "vo1": 2}); err != nil {
		t.Fatal(err)
	}
	peak := hammer(t, s, 1000, func(i int) bool { return i%4 == 0 }, func(now time.Time) {
		if _, err := s.ShrinkPair(now, pair, 64, "throughput fell"); err != nil {
			t.Error(err)
		}
		s.Expire(now)
	})
	if peak > 128 {
		t.Errorf("peak use %d > pair max 128", peak)
	}
	s.Expire(t0.Add(time.Hour))
	if st := s.State(); len(st) != 0 {
		t.Errorf("%d allocations left after the leases ran out", len(st))
	}
}
