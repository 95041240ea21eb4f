package policy

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLeaseExpiry(t *testing.T) {
	p := paper(32, 0)
	s := newTestService(t, p, nil)
	crashed := mustRequest(t, s, t0, "crashed", "vo", 0)
	alive := mustRequest(t, s, t0, "alive", "vo", 0)
	for i := range 2 {
		mustRequest(t, s, t0, fmt.Sprint("other", i), "vo", 0)
	}

	// The live client renews; the crashed one does not.
	now := t0.Add(4 * time.Minute)
	alive = mustUpdate(t, s, now, alive, 0)
	if want := now.Add(p.Lease); !alive.Expires.Equal(want) {
		t.Errorf("renewed lease expires %v, want %v", alive.Expires, want)
	}
	if late := mustRequest(t, s, now, "late", "vo", 0); late.Streams != 0 {
		t.Fatalf("full pair granted %d streams", late.Streams)
	}

	// A nanosecond early, the crashed client still holds its streams;
	// at its Expires instant they return.
	if gone := s.Expire(crashed.Expires.Add(-1)); len(gone) != 0 {
		t.Errorf("expired early: %v", gone)
	}
	gone := s.Expire(crashed.Expires)
	if len(gone) != 3 || gone[0].ID != crashed.ID {
		t.Fatalf("expired %+v, want the crashed client and the two others first", gone)
	}
	if got := used(t, s, crashed.Expires); got != 32 {
		t.Errorf("after expiry the pair uses %d, want 32 (the live client)", got)
	}
	if _, err := s.Update(crashed.Expires, crashed.ID, crashed.Owner(), 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of an expired allocation: %v, want ErrNotFound", err)
	}
}

// TestLazyExpiry: a crashed client's streams come back at the next
// operation after its lease, without anyone calling Expire.
func TestLazyExpiry(t *testing.T) {
	s := newTestService(t, Params{Initial: 128, Update: 0, PairMax: 128, ClientMax: 128, Lease: time.Minute}, nil)
	mustRequest(t, s, t0, "crashed", "vo", 0)
	if a := mustRequest(t, s, t0.Add(59*time.Second), "next", "vo", 0); a.Streams != 0 {
		t.Fatalf("granted %d streams while the lease runs", a.Streams)
	}
	if a := mustRequest(t, s, t0.Add(time.Minute), "after", "vo", 0); a.Streams != 128 {
		t.Errorf("granted %d streams after the lease ran out, want 128", a.Streams)
	}
}

// TestOnExpire: every allocation whose lease runs out reaches
// Config.OnExpire, whichever operation ended it, reads included, so that
// a caller mirroring allocations in a store can forget it.
func TestOnExpire(t *testing.T) {
	for _, tt := range []struct {
		name string
		op   func(s *Service, now time.Time, id string)
	}{
		{"expire", func(s *Service, now time.Time, id string) { s.Expire(now) }},
		{"get", func(s *Service, now time.Time, id string) { s.Get(now, id) }},
		{"list", func(s *Service, now time.Time, id string) { s.List(now, Filter{}) }},
		{"usage", func(s *Service, now time.Time, id string) { s.Usage(now) }},
		{"request", func(s *Service, now time.Time, id string) { s.Request(now, Request{Pair: pair, Client: "next"}) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var gone []string
			s, err := New(Config{Pairs: map[Pair]Params{pair: paper(16, 4)}, OnExpire: func(a Allocation) { gone = append(gone, a.ID) }})
			if err != nil {
				t.Fatal(err)
			}
			a := mustRequest(t, s, t0, "crashed", "vo", 0)
			tt.op(s, a.Expires.Add(-1), a.ID)
			if len(gone) != 0 {
				t.Fatalf("OnExpire told of %v before the lease ran out", gone)
			}
			tt.op(s, a.Expires, a.ID)
			if len(gone) != 1 || gone[0] != a.ID {
				t.Errorf("OnExpire told of %v, want [%s]", gone, a.ID)
			}
		})
	}
}

// TestShrinkReportedAtNextUpdate: a shrink keeps the streams counted
// until the client hears of it at its next update.
func TestShrinkReportedAtNextUpdate(t *testing.T) {
	s := newTestService(t, paper(32, 4), nil)
	var as []Allocation
	for i := range 4 {
		as = append(as, mustRequest(t, s, t0, fmt.Sprint("client", i), "atlas", 0))
	}
	a, err := s.Shrink(t0, as[0].ID, 8, "higher-priority VO cms arrived")
	if err != nil {
		t.Fatal(err)
	}
	if a.Streams != 8 || a.Draining != 24 || a.Reason == "" || a.Shrunk != 0 {
		t.Errorf("after Shrink: %+v, want 8 streams, 24 draining, a reason", a)
	}
	// The client still runs 32 streams: nothing is free yet.
	if b := mustRequest(t, s, t0, "cms", "cms", 0); b.Streams != 0 {
		t.Errorf("a newcomer got %d streams before the shrunk client heard", b.Streams)
	}
	// The client updates asking to keep what it had: it hears.
	u := mustUpdate(t, s, t0.Add(time.Second), as[0], 32)
	if u.Streams != 12 || u.Draining != 0 || u.Shrunk != 20 || u.Reason != "higher-priority VO cms arrived" {
		t.Errorf("update after shrink: %+v, want 12 streams (8 + s_u), shrunk 20, the reason", u)
	}
	if got := used(t, s, t0.Add(time.Second)); got != 96+12 {
		t.Errorf("pair uses %d, want 108", got)
	}
	// Told once.
	if u := mustUpdate(t, s, t0.Add(2*time.Second), u, 12); u.Shrunk != 0 || u.Reason != "" {
		t.Errorf("second update still reports a shrink: %+v", u)
	}
	// A shrink to more than held changes nothing.
	if a, err := s.Shrink(t0, as[1].ID, 40, "no-op"); err != nil || a.Streams != 32 || a.Draining != 0 {
		t.Errorf("Shrink above holdings: %+v, %v", a, err)
	}
}

// TestEnforceLimits: limits an administrator lowers bind on the
// allocations already granted: above the per-client maximum an
// allocation comes down to it, above the pair maximum the pair is leveled
// from the top; the clients hear at their next update (Shrunk, Reason)
// and greedy does not give the streams back while the limits stand.
func TestEnforceLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lower      func(p Params) Params
		want       map[string]int
		reasonWord string
	}{
		{"client max", func(p Params) Params { p.ClientMax = 8; return p }, map[string]int{"alice": 8, "bob": 8}, "per-client"},
		{"pair max", func(p Params) Params { p.PairMax = 24; return p }, map[string]int{"alice": 12, "bob": 12}, "limit of"},
		{"higher limits", func(p Params) Params { p.PairMax = 200; return p }, map[string]int{"alice": 20, "bob": 21}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestService(t, paper(32, 0), nil)
			a := mustRequest(t, s, t0, "alice", "vo", 20)
			b := mustRequest(t, s, t0, "bob", "vo", 21)
			p, err := s.PairParams(pair)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPairParams(pair, tc.lower(p)); err != nil {
				t.Fatal(err)
			}
			changed := s.EnforceLimits(t0)
			if got := streams(s, t0); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("after lowering the limits: %v, want %v", got, tc.want)
			}
			if tc.reasonWord == "" {
				if len(changed) != 0 {
					t.Errorf("higher limits changed %+v", changed)
				}
				return
			}
			if len(changed) != 2 {
				t.Errorf("changed %d allocations, want 2", len(changed))
			}
			for _, x := range []Allocation{a, b} {
				u := mustUpdate(t, s, t0, x, 0)
				if u.Streams != tc.want[x.Client] || u.Shrunk != x.Streams-tc.want[x.Client] || !strings.Contains(u.Reason, tc.reasonWord) {
					t.Errorf("%s's update: %d streams, shrunk %d, reason %q; want %d, shrunk %d, a reason naming the %s", x.Client, u.Streams, u.Shrunk, u.Reason, tc.want[x.Client], x.Streams-tc.want[x.Client], tc.reasonWord)
				}
			}
		})
	}
}

func TestShrinkPairLevels(t *testing.T) {
	s := newTestService(t, paper(32, 0), nil)
	for i, want := range []int{32, 32, 16, 8} {
		mustRequest(t, s, t0, fmt.Sprint("client", i), "vo", want)
	}
	changed, err := s.ShrinkPair(t0, pair, 64, "pair throughput fell")
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 2 {
		t.Errorf("changed %d allocations, want 2: %+v", len(changed), changed)
	}
	got := streams(s, t0)
	want := map[string]int{"client0": 20, "client1": 20, "client2": 16, "client3": 8}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after ShrinkPair to 64: %v, want %v", got, want)
	}
	// Draining still counts until the clients update.
	if u := used(t, s, t0); u != 88 {
		t.Errorf("pair uses %d, want 88 until the clients hear", u)
	}
	for _, a := range s.List(t0, Filter{}) {
		mustUpdate(t, s, t0, a, a.Streams)
	}
	if u := used(t, s, t0); u != 64 {
		t.Errorf("pair uses %d after the updates, want 64", u)
	}
}

func TestLevel(t *testing.T) {
	for _, c := range []struct {
		in    []int
		total int
		want  []int
	}{
		{[]int{32, 32, 16, 8}, 64, []int{20, 20, 16, 8}},
		{[]int{5, 5, 5}, 10, []int{4, 3, 3}},
		{[]int{5, 5, 5}, 20, []int{5, 5, 5}},
		{[]int{5, 1}, 0, []int{0, 0}},
		{[]int{9, 1, 9}, 5, []int{2, 1, 2}},
		{nil, 3, []int{}},
	} {
		got := Level(c.in, c.total)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Level(%v, %d) = %v, want %v", c.in, c.total, got, c.want)
		}
	}
}

// TestWant: a positive Want caps the grant, and a smaller one gives
// streams back without counting as a shrink.
func TestWant(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	a := mustRequest(t, s, t0, "c", "vo", 8)
	if a.Streams != 8 {
		t.Errorf("want 8: got %d", a.Streams)
	}
	a = mustUpdate(t, s, t0, a, 4)
	if a.Streams != 4 || a.Shrunk != 0 {
		t.Errorf("want 4: %+v", a)
	}
	a = mustUpdate(t, s, t0, a, 0)
	if a.Streams != 8 {
		t.Errorf("want 0 after 4: %d streams, want 8 (+s_u)", a.Streams)
	}
	if got := used(t, s, t0); got != 8 {
		t.Errorf("pair uses %d, want 8", got)
	}
}

func TestBadInput(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	a := mustRequest(t, s, t0, "alice", "atlas", 0)
	mustRequest(t, s, t0, "bob", "cms", 0)
	before := s.State()
	other := Pair{Src: "a", Dst: "b"}

	for _, c := range []struct {
		name string
		op   func() error
		is   []error
	}{
		{"unknown pair", func() error {
			_, err := s.Request(t0, Request{Pair: other, Client: "c", VO: "v"})
			return err
		}, []error{ErrUnknownPair, ErrInvalid}},
		{"empty pair", func() error {
			_, err := s.Request(t0, Request{Pair: Pair{Src: "a"}, Client: "c"})
			return err
		}, []error{ErrInvalid}},
		{"empty client", func() error {
			_, err := s.Request(t0, Request{Pair: pair, VO: "v"})
			return err
		}, []error{ErrInvalid}},
		{"negative want", func() error {
			_, err := s.Request(t0, Request{Pair: pair, Client: "c", Want: -1})
			return err
		}, []error{ErrInvalid}},
		{"absurd want", func() error {
			_, err := s.Request(t0, Request{Pair: pair, Client: "c", Want: 1 << 40})
			return err
		}, []error{ErrInvalid}},
		{"negative update want", func() error {
			_, err := s.Update(t0, a.ID, a.Owner(), -4)
			return err
		}, []error{ErrInvalid}},
		{"absurd update want", func() error {
			_, err := s.Update(t0, a.ID, a.Owner(), MaxStreams+1)
			return err
		}, []error{ErrInvalid}},
		{"unknown allocation", func() error {
			_, err := s.Update(t0, "nope", a.Owner(), 0)
			return err
		}, []error{ErrNotFound}},
		{"update of another VO's allocation", func() error {
			_, err := s.Update(t0, a.ID, Caller{Client: "alice", VO: "cms"}, 0)
			return err
		}, []error{ErrForbidden}},
		{"update by another client", func() error {
			_, err := s.Update(t0, a.ID, Caller{Client: "mallory", VO: "atlas"}, 0)
			return err
		}, []error{ErrForbidden}},
		{"release of another VO's allocation", func() error {
			return s.Release(t0, a.ID, Caller{Client: "bob", VO: "cms"})
		}, []error{ErrForbidden}},
		{"release of an unknown allocation", func() error {
			return s.Release(t0, "nope", a.Owner())
		}, []error{ErrNotFound}},
		{"get of an unknown allocation", func() error {
			_, err := s.Get(t0, "nope")
			return err
		}, []error{ErrNotFound}},
		{"negative shrink", func() error {
			_, err := s.Shrink(t0, a.ID, -1, "")
			return err
		}, []error{ErrInvalid}},
		{"shrink of an unknown pair", func() error {
			_, err := s.ShrinkPair(t0, other, 0, "")
			return err
		}, []error{ErrUnknownPair}},
		{"bad params", func() error {
			return s.SetPairParams(pair, Params{Initial: -1, PairMax: 10, ClientMax: 10, Lease: time.Minute})
		}, []error{ErrInvalid}},
		{"no lease", func() error {
			return s.SetPairParams(pair, Params{PairMax: 10, ClientMax: 10})
		}, []error{ErrInvalid}},
		{"bad weight", func() error {
			return s.SetWeights(pair, map[string]float64{"atlas": -1})
		}, []error{ErrInvalid}},
		{"restore with duplicate IDs", func() error {
			return s.Restore([]Allocation{before[0], before[0]})
		}, []error{ErrInvalid}},
		{"restore on an unknown pair", func() error {
			b := before[0]
			b.Pair = other
			return s.Restore([]Allocation{b})
		}, []error{ErrUnknownPair}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.op()
			if err == nil {
				t.Fatal("no error")
			}
			for _, target := range c.is {
				if !errors.Is(err, target) {
					t.Errorf("%v is not %v", err, target)
				}
			}
			if !strings.HasPrefix(err.Error(), "policy: ") && !strings.HasPrefix(err.Error(), "params: ") {
				t.Errorf("error %q lacks context", err)
			}
			unchanged(t, s, before)
		})
	}
	if p, err := s.PairParams(pair); err != nil || p != paper(16, 4) {
		t.Errorf("params changed: %+v, %v", p, err)
	}
}

// failing is a policy that misbehaves in the way it is told.
type failing struct {
	Greedy
	n     int
	err   error
	panic bool
}

func (f failing) Add(View, Request) (int, error) {
	if f.panic {
		panic("boom")
	}
	return f.n, f.err
}

func (f failing) Update(v View, a Allocation, r Request) (int, error) { return f.Add(v, r) }

func TestPolicyFailureChangesNothing(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	a := mustRequest(t, s, t0, "c", "vo", 0)
	before := s.State()
	for _, f := range []failing{{n: -1}, {err: errors.New("no")}, {panic: true}} {
		s.SetPolicy(f)
		later := t0.Add(time.Minute)
		if _, err := s.Request(later, Request{Pair: pair, Client: "d"}); !errors.Is(err, ErrPolicy) {
			t.Errorf("%+v: request: %v, want ErrPolicy", f, err)
		}
		if _, err := s.Update(later, a.ID, a.Owner(), 0); !errors.Is(err, ErrPolicy) {
			t.Errorf("%+v: update: %v, want ErrPolicy", f, err)
		}
		unchanged(t, s, before)
	}
}

// TestLimitsClampPolicy: a policy asking for more than the limits gets
// them, no more.
func TestLimitsClampPolicy(t *testing.T) {
	s := newTestService(t, paper(16, 4), failing{n: 1000})
	for i, want := range []int{32, 32, 32, 32, 0} {
		if a := mustRequest(t, s, t0, fmt.Sprint(i), "vo", 0); a.Streams != want {
			t.Errorf("request %d: %d streams, want %d", i, a.Streams, want)
		}
	}
}

// TestLoweredLimits: lowering PairMax takes nothing back by itself and
// grants nothing more; ShrinkPair brings the pair down.
func TestLoweredLimits(t *testing.T) {
	s, err := New(Config{Pairs: map[Pair]Params{pair: paper(32, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	var as []Allocation
	for i := range 3 {
		as = append(as, mustRequest(t, s, t0, fmt.Sprint(i), "vo", 0))
	}
	lower := paper(32, 4)
	lower.PairMax = 64
	if err := s.SetPairParams(pair, lower); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if u := mustUpdate(t, s, t0, a, 0); u.Streams != 32 {
			t.Errorf("update under a lowered limit: %d streams, want 32 kept", u.Streams)
		}
	}
	if a := mustRequest(t, s, t0, "new", "vo", 0); a.Streams != 0 {
		t.Errorf("a pair over its lowered limit granted %d", a.Streams)
	}
	if _, err := s.ShrinkPair(t0, pair, 64, "limit lowered"); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		mustUpdate(t, s, t0, a, 0)
	}
	if got := used(t, s, t0); got != 64 {
		t.Errorf("pair uses %d after ShrinkPair and updates, want 64", got)
	}
	if err := s.invariantsLocked(); err != nil {
		t.Error(err)
	}
}

func TestStateRestore(t *testing.T) {
	s := newTestService(t, paper(16, 4), nil)
	a := mustRequest(t, s, t0, "a", "atlas", 0)
	mustRequest(t, s, t0.Add(time.Second), "b", "cms", 8)
	if _, err := s.Shrink(t0, a.ID, 4, "test"); err != nil {
		t.Fatal(err)
	}
	state := s.State()

	// A restarted service.
	r := newTestService(t, paper(16, 4), nil)
	if err := r.Restore(state); err != nil {
		t.Fatal(err)
	}
	if got := r.State(); !reflect.DeepEqual(got, state) {
		t.Fatalf("restored %+v, want %+v", got, state)
	}
	if got := used(t, r, t0); got != 24 {
		t.Errorf("restored pair uses %d, want 24", got)
	}
	u := mustUpdate(t, r, t0.Add(time.Minute), a, 16)
	if u.Shrunk != 8 || u.Reason != "test" || u.Streams != 8 {
		t.Errorf("update after restore: %+v, want 8 streams (4 + s_u), the net shrink of 8 reported", u)
	}
	// Leases keep their times across the restart.
	if gone := r.Expire(t0.Add(time.Second + 5*time.Minute)); len(gone) != 1 || gone[0].Client != "b" {
		t.Errorf("expired after restore: %+v, want b", gone)
	}
}

func TestAnyPair(t *testing.T) {
	s, err := New(Config{AnyPair: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Request(t0, Request{Pair: Pair{Src: "x", Dst: "y"}, Client: "c"})
	if err != nil || a.Streams != DefaultParams().Initial {
		t.Errorf("request on an unconfigured pair: %+v, %v", a, err)
	}
	if _, err := s.Request(t0, Request{Pair: Pair{Src: "x"}, Client: "c"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty destination: %v", err)
	}
}

func TestDefaultParamsValid(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Error(err)
	}
}
