package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/store"
)

// TestExpiredAllocationsLeaveTheStore: an allocation whose lease runs out
// leaves the store with the next write, whichever operation saw it
// expire first: a read (GET, list, usage) or a restart's look-ups too,
// which expire it in memory without writing. Before, its row stayed for
// good.
func TestExpiredAllocationsLeaveTheStore(t *testing.T) {
	ctx := context.Background()
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	for _, tt := range []struct {
		name string
		read func(s *Server, id string) *Server // returns the server to go on with
	}{
		{"get", func(s *Server, id string) *Server { _, _ = s.Allocation(ctx, admin, id); return s }},
		{"list", func(s *Server, id string) *Server { s.Allocations(ctx, admin); return s }},
		{"usage", func(s *Server, id string) *Server { _, _ = s.PolicyUsage(ctx, admin); return s }},
		{"policy change", func(s *Server, id string) *Server {
			if _, err := s.SetPolicy(ctx, admin, s.Policy(ctx, admin)); err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"restart", func(s *Server, id string) *Server {
			s2 := newPolicyTestServerAt(t, s.st, s.cfg.Clock)
			s2.Allocations(ctx, admin)
			return s2
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := testStore(t, "a", "b")
			clk := clock.NewFake(time.Now())
			s := newPolicyTestServerAt(t, st, clk)
			cfg := s.Policy(ctx, admin)
			cfg.Defaults.LeaseSeconds = 1
			if _, err := s.SetPolicy(ctx, admin, cfg); err != nil {
				t.Fatal(err)
			}
			a, err := s.RequestAllocation(ctx, admin, AllocationRequest{Source: "a", Destination: "b"})
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(1100 * time.Millisecond) // the lease is over
			s = tt.read(s, a.ID)
			// Any write after it: another client's request.
			if _, err := s.RequestAllocation(ctx, admin, AllocationRequest{Source: "b", Destination: "a", Client: "other"}); err != nil {
				t.Fatal(err)
			}
			rows, err := st.Allocations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(rows, func(r store.Allocation) bool { return r.ID == a.ID }) {
				t.Errorf("the expired allocation %s is still in the store: %+v", a.ID, rows)
			}
		})
	}
}

func newPolicyTestServer(t *testing.T, st store.Store) *Server {
	t.Helper()
	return newPolicyTestServerAt(t, st, nil)
}

// newPolicyTestServerAt is newPolicyTestServer with a clock (nil: the
// system's).
func newPolicyTestServerAt(t *testing.T, st store.Store, clk clock.Clock) *Server {
	t.Helper()
	s, err := New(context.Background(), Config{Store: st, ServerID: "s1", Scheduler: "basecc1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAllocationClientNames: a client name with a control character (a
// NUL, which PostgreSQL cannot store and which failed the request with a
// server error there; a newline, which forges lines in logs and listings)
// or invalid UTF-8 is refused as invalid input, and nothing is granted;
// other names, spaces and non-ASCII letters included, are fine.
func TestAllocationClientNames(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, e := range []string{"a", "b"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: "http://" + e + ".invalid:7000", Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	s := newPolicyTestServer(t, st)
	alice := Caller{User: store.User{Name: "alice", VO: "cms"}}
	for _, tt := range []struct {
		client string
		ok     bool
	}{
		{"sluice-cp:dtn01.example.org:4711", true},
		{"run 7 / ünïcode", true},
		{"a\x00b", false},
		{"x\ny", false},
		{"tab\there", false},
		{"del\x7f", false},
		{"\xff\xfe", false},
	} {
		a, err := s.RequestAllocation(ctx, alice, AllocationRequest{Source: "a", Destination: "b", Client: tt.client})
		switch {
		case tt.ok && err != nil:
			t.Errorf("client %q: %v", tt.client, err)
		case tt.ok:
			if err := s.ReleaseAllocation(ctx, alice, a.ID, tt.client); err != nil {
				t.Errorf("client %q: release: %v", tt.client, err)
			}
		case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "client name"):
			t.Errorf("client %q: %+v, %v; want ErrInvalid about the client name", tt.client, a, err)
		}
	}
	if as := s.Allocations(ctx, alice); len(as) != 0 {
		t.Errorf("allocations left: %+v", as)
	}
}

// TestAllocationRaces: what the store keeps of allocations agrees with the
// service under concurrent calls: a user asking for many allocations at
// once gets at most MaxAllocationsPerUser (each request counted what the
// user held, and all counted the same), and an update racing a release
// never leaves the released allocation's row in the store, where the next
// start would bring it back.
func TestAllocationRaces(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, "a", "b")
	// Writes of allocations take a while, as on a busy database: an
	// update's write then lands after a racing release's delete unless
	// the two are kept in order.
	s := newPolicyTestServer(t, slowPuts{st})
	user := Caller{User: store.User{ID: 7, Name: "u", VO: "v"}}

	t.Run("cap", func(t *testing.T) {
		const n = 3 * MaxAllocationsPerUser
		var wg sync.WaitGroup
		var granted atomic.Int64
		for i := range n {
			wg.Go(func() {
				if _, err := s.RequestAllocation(ctx, user, AllocationRequest{Source: "a", Destination: "b", Client: fmt.Sprint(i)}); err == nil {
					granted.Add(1)
				}
			})
		}
		wg.Wait()
		if g := granted.Load(); g != MaxAllocationsPerUser {
			t.Errorf("%d of %d requests at once granted, want %d", g, n, MaxAllocationsPerUser)
		}
		for _, a := range s.Allocations(ctx, user) {
			if err := s.ReleaseAllocation(ctx, user, a.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("update and release", func(t *testing.T) {
		for range 20 {
			a, err := s.RequestAllocation(ctx, user, AllocationRequest{Source: "a", Destination: "b"})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() { _, _ = s.UpdateAllocation(ctx, user, a.ID, "", 0) })
			wg.Go(func() {
				time.Sleep(time.Millisecond) // the update's change first, its write still on the way
				if err := s.ReleaseAllocation(ctx, user, a.ID, ""); err != nil {
					t.Error(err)
				}
			})
			wg.Wait()
		}
		rows, err := st.Allocations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 0 {
			t.Errorf("%d released allocations are still in the store, e.g. %+v", len(rows), rows[0])
		}
	})
}

// slowPuts is a store whose writes of allocations (not their deletes)
// take 10 ms.
type slowPuts struct{ store.Store }

func (s slowPuts) SaveAllocations(ctx context.Context, put []store.Allocation, del []store.AllocationGone) error {
	if len(put) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return s.Store.SaveAllocations(ctx, put, del)
}
