package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluice-dtn/sluice/store"
)

// loop records what a coordinator hands it. Partitions with running
// work refuse to be released.
type loop struct {
	parts   map[string]int64
	busy    map[string]bool
	givenUp map[string]int64
	own     map[string]Load
	ext     map[string]Load
	events  []string
}

func newLoop() *loop {
	return &loop{parts: map[string]int64{}, busy: map[string]bool{}, own: map[string]Load{}}
}

func (l *loop) Gained(_ context.Context, p string, term int64) bool {
	l.parts[p] = term
	l.events = append(l.events, "gained "+p)
	return true
}

func (l *loop) Lost(_ context.Context, p string) bool {
	delete(l.parts, p)
	l.events = append(l.events, "lost "+p)
	return true
}

func (l *loop) Release(_ context.Context, p string) bool {
	if l.busy[p] {
		return false
	}
	delete(l.parts, p)
	l.events = append(l.events, "released "+p)
	return true
}

func (l *loop) Claimed(context.Context, []store.Task) bool                { return true }
func (l *loop) Canceled(context.Context, []int64) bool                    { return true }
func (l *loop) Endpoints(context.Context, []store.Endpoint) bool          { return true }
func (l *loop) ExternalLoads(_ context.Context, ext map[string]Load) bool { l.ext = ext; return true }
func (l *loop) OwnLoads() map[string]Load                                 { return maps.Clone(l.own) }

func (l *loop) GivenUp() map[string]int64 {
	g := l.givenUp
	l.givenUp = nil
	return g
}

func (l *loop) held() []string { return slices.Sorted(maps.Keys(l.parts)) }

// TestCoordinators: servers on one store share the partitions fairly; a
// server that holds more than its share once another joins hands over
// only partitions with nothing running; a partition the loop gave up is
// released and taken again under a newer term; each server sees the
// other's published loads and not its own.
func TestCoordinators(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 4 {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: fmt.Sprintf("e%d", i), URL: fmt.Sprintf("http://127.0.0.1:%d", 9000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	la, lb := newLoop(), newLoop()
	a := New(Config{ServerID: "a", Log: quiet}, st, la)
	a.Start(ctx)
	if got := la.held(); !slices.Equal(got, []string{"e0", "e1", "e2", "e3"}) {
		t.Fatalf("a alone holds %v, want every partition", got)
	}
	if !maps.Equal(a.Held(), la.parts) {
		t.Fatalf("a holds %v, its loop %v", a.Held(), la.parts)
	}
	// b joins; a has work running on e0, e1 and e2.
	la.busy = map[string]bool{"e0": true, "e1": true, "e2": true}
	b := New(Config{ServerID: "b", Log: quiet}, st, lb)
	b.Start(ctx) // b's beat makes two live servers; nothing is free yet
	if got := lb.held(); len(got) != 0 {
		t.Fatalf("b took %v while a held everything", got)
	}
	a.leaseRound(ctx) // a's share is 2: only e3 is idle
	if got := la.held(); !slices.Equal(got, []string{"e0", "e1", "e2"}) {
		t.Fatalf("a holds %v, want e0-e2 (e3 idle, handed over)", got)
	}
	b.leaseRound(ctx)
	if got := lb.held(); !slices.Equal(got, []string{"e3"}) {
		t.Fatalf("b holds %v, want e3", got)
	}
	la.busy = nil
	a.leaseRound(ctx)
	b.leaseRound(ctx)
	if ga, gb := la.held(), lb.held(); len(ga) != 2 || len(gb) != 2 {
		t.Fatalf("a holds %v, b %v: want two each", ga, gb)
	}
	// a's loop gives up a partition after a refused write: a releases it
	// and, still owed its share, takes it again under a newer term.
	p := la.held()[0]
	old := la.parts[p]
	la.givenUp = map[string]int64{p: old}
	a.leaseRound(ctx)
	if term, ok := la.parts[p]; !ok || term <= old {
		t.Errorf("after giving up %s (term %d) a holds it with term %d (held %v), want a newer term", p, old, term, ok)
	}
	// Loads: each sees the other's, not its own.
	la.own = map[string]Load{"e0": {CC: 3, Throughput: 1e6}}
	lb.own = map[string]Load{"e0": {CC: 2}, "e1": {CC: 1}}
	a.sync(ctx)
	b.sync(ctx)
	a.sync(ctx)
	if want := map[string]Load{"e0": {CC: 2}, "e1": {CC: 1}}; !maps.Equal(la.ext, want) {
		t.Errorf("a sees external loads %v, want %v", la.ext, want)
	}
	if want := map[string]Load{"e0": {CC: 3, Throughput: 1e6}}; !maps.Equal(lb.ext, want) {
		t.Errorf("b sees external loads %v, want %v", lb.ext, want)
	}
}
