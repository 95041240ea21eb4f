package copyjob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/policy"
)

// svcAlloc is an Allocator over an in-process Policy Service.
type svcAlloc struct {
	svc      *policy.Service
	pair     policy.Pair
	name     string
	id       string
	released atomic.Bool
}

func (a *svcAlloc) Request(_ context.Context, want int) (int, time.Time, error) {
	al, err := a.svc.Request(time.Now(), policy.Request{Pair: a.pair, Client: a.name, Want: want})
	a.id = al.ID
	return al.Streams, al.Expires, err
}

func (a *svcAlloc) Update(_ context.Context, want int) (int, time.Time, error) {
	al, err := a.svc.Update(time.Now(), a.id, policy.Caller{Client: a.name}, want)
	return al.Streams, al.Expires, err
}

func (a *svcAlloc) Release(context.Context) error {
	a.released.Store(true)
	return a.svc.Release(time.Now(), a.id, policy.Caller{Client: a.name})
}

// rangeGauge counts the range reads a source serves at once: the streams
// a copy really runs.
type rangeGauge struct {
	mu       sync.Mutex
	now, max int
}

func (g *rangeGauge) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("Range") == "" {
			h.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		g.now++
		g.max = max(g.max, g.now)
		g.mu.Unlock()
		defer func() { g.mu.Lock(); g.now--; g.mu.Unlock() }()
		h.ServeHTTP(w, r)
	})
}

// TestRunAdaptive: the adaptive client moves every file, verified, and
// never runs more streams than its allocation: first while another client
// holds the whole pool (it waits), then within what the greedy policy
// grants it as the other leaves; its allocation is released at the end.
func TestRunAdaptive(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{
		pair: {Initial: 4, Update: 2, PairMax: 8, ClientMax: 8, Lease: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Another client holds all 8 streams for the first 300 ms of the copy,
	// then 4 (it releases one allocation of two).
	hog1, err := svc.Request(time.Now(), policy.Request{Pair: pair, Client: "hog1"})
	if err != nil {
		t.Fatal(err)
	}
	hog2, err := svc.Request(time.Now(), policy.Request{Pair: pair, Client: "hog2"})
	if err != nil || hog1.Streams+hog2.Streams != 8 {
		t.Fatalf("hogs hold %d+%d (%v), want 8", hog1.Streams, hog2.Streams, err)
	}

	srcDir, dstDir := t.TempDir(), t.TempDir()
	var sizes []int
	for i := range 24 {
		sizes = append(sizes, 300_000+(i*7919)%100_000)
	}
	want := tree(t, srcDir, sizes...)
	var g rangeGauge
	// Slow streams, so that ranges in flight together overlap in time.
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{ConnBps: 8e6}, g.wrap)
	o := opts(t)
	o.PartMin = 64 << 10 // every file splits into p = 2 ranges
	d := prepare(t, src, localEP(t, dstDir+"/"), o)
	al := &svcAlloc{svc: svc, pair: pair, name: "me"}
	params := policy.AdaptiveParams{Ci: 1, Cmax: 4, Delta: 1, D: 2, P: 2, T: 0, Relative: true}
	// The 300 ms count from here, not from before the setup: on a loaded
	// machine making the files and the agent took longer than that.
	time.AfterFunc(300*time.Millisecond, func() { svc.Release(time.Now(), hog1.ID, hog1.Owner()) })
	sum, points, err := RunAdaptive(context.Background(), d, al, AdaptiveOptions{Params: params, Wait: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	if sum.Files != len(sizes) {
		t.Errorf("summary: %d files, want %d", sum.Files, len(sizes))
	}
	if len(points) < 3 || points[0].Concurrency != 0 || points[0].Allocated != 0 {
		t.Fatalf("timeline %+v: want a start at 0 streams while the pool is held", points)
	}
	maxAlloc := 0
	for _, pt := range points {
		t.Logf("%.2f s: allocated %d, concurrency %d (%d streams), rate %.1f MB/s", pt.At, pt.Allocated, pt.Concurrency, pt.Streams, pt.Rate/1e6)
		if pt.Streams > pt.Allocated || pt.Streams != pt.Concurrency*2 {
			t.Errorf("at %.2f s: %d streams in use with %d allocated", pt.At, pt.Streams, pt.Allocated)
		}
		maxAlloc = max(maxAlloc, pt.Allocated)
	}
	// hog2 keeps 4 of the 8: the client never gets more than 4.
	if maxAlloc != 4 {
		t.Errorf("largest allocation %d, want 4 (the pool less hog2's)", maxAlloc)
	}
	if g.max > maxAlloc || g.max < 2 {
		t.Errorf("source served %d ranges at once, want 2..%d (the allocation)", g.max, maxAlloc)
	}
	if last := points[len(points)-1]; last.Concurrency != 0 || last.Allocated != 0 {
		t.Errorf("last point %+v, want concurrency 0 and nothing allocated at the end", last)
	}
	if !al.released.Load() || len(svc.List(time.Now(), policy.Filter{Client: "me"})) != 0 {
		t.Error("the allocation was not released")
	}
}

// TestRunAdaptiveReleasesOnError: a copy that fails still gives its
// streams back, and a client the service refuses moves nothing.
func TestRunAdaptiveReleasesOnError(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{pair: policy.DefaultParams()}})
	if err != nil {
		t.Fatal(err)
	}
	srcDir, dstDir := t.TempDir(), t.TempDir()
	tree(t, srcDir, 1000, 2000, 3000)
	d := prepare(t, localEP(t, srcDir+"/tree"), localEP(t, dstDir+"/"), opts(t))
	params := policy.AdaptiveParams{Ci: 1, Cmax: 2, Delta: 1, D: 1, P: 1, T: 0.1, Relative: true}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	al := &svcAlloc{svc: svc, pair: pair, name: "me"}
	if _, _, err := RunAdaptive(ctx, d, al, AdaptiveOptions{Params: params}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled copy: %v, want context.Canceled", err)
	}
	if len(svc.List(time.Now(), policy.Filter{})) != 0 {
		t.Error("a cancelled copy kept its allocation")
	}

	other := &svcAlloc{svc: svc, pair: policy.Pair{Src: "src", Dst: "elsewhere"}, name: "me"}
	if _, _, err := RunAdaptive(context.Background(), d, other, AdaptiveOptions{Params: params}, nil); !errors.Is(err, policy.ErrUnknownPair) {
		t.Errorf("unknown pair: %v, want ErrUnknownPair", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(dstDir, "*")); len(ents) != 0 {
		t.Errorf("a refused copy wrote %v", ents)
	}
	if _, _, err := RunAdaptive(context.Background(), d, nil, AdaptiveOptions{Params: policy.AdaptiveParams{P: 0}}, nil); !errors.Is(err, policy.ErrInvalid) {
		t.Errorf("bad parameters: %v, want ErrInvalid", err)
	}
}

// flakyAlloc is a svcAlloc whose service can stop answering (the next
// fail updates and requests fail, as a restarting server's do) and that
// says the pair's per-client limit, as client.Allocator does.
type flakyAlloc struct {
	svcAlloc
	fail     int // calls to fail from now on; < 0: all
	requests int
	// timeout is how long a failing call takes to fail: a service that
	// does not answer is given up on after a while, not at once.
	timeout time.Duration
}

var errRefused = errors.New("connection refused")

func (a *flakyAlloc) down() bool {
	if a.fail == 0 {
		return false
	}
	a.fail--
	time.Sleep(a.timeout)
	return true
}

func (a *flakyAlloc) Request(ctx context.Context, want int) (int, time.Time, error) {
	a.requests++
	if a.requests > 1 && a.down() {
		return 0, time.Time{}, errRefused
	}
	return a.svcAlloc.Request(ctx, want)
}

func (a *flakyAlloc) Update(ctx context.Context, want int) (int, time.Time, error) {
	if a.down() {
		return 0, time.Time{}, errRefused
	}
	return a.svcAlloc.Update(ctx, want)
}

func (a *flakyAlloc) MaxStreams() int {
	p, _ := a.svc.PairParams(a.pair)
	return p.ClientMax
}

// TestRunAdaptiveOutages: the adaptive client rides out a Policy Service
// that stops answering for a while, asks for a new allocation when its
// own is gone, fails with a clear error when nothing answers long past
// its lease, and refuses at once a p that no allocation on the pair can
// carry (before, it waited at concurrency 0 for ever, holding streams).
func TestRunAdaptiveOutages(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	params := policy.AdaptiveParams{Ci: 1, Cmax: 2, Delta: 1, D: 1, P: 2, T: 0.1, Relative: true}
	for _, tc := range []struct {
		name      string
		lease     time.Duration
		clientMax int
		p         int
		fail      int
		forget    bool // the service ends the allocation after the first file
		timeout   time.Duration
		wantErr   string
		requests  int
	}{
		{name: "updates fail for a while", lease: time.Minute, fail: 3, requests: 1},
		{name: "allocation gone", lease: time.Minute, forget: true, requests: 2},
		// The failing update outlasts the lease (before, five small
		// files could copy inside the 1 ms lease on a fast machine, and
		// the client never saw it end).
		{name: "lease over, service back", lease: time.Millisecond, fail: 2, timeout: 5 * time.Millisecond, requests: 2},
		{name: "nothing answers", lease: time.Millisecond, fail: -1, wantErr: "no allocation from the policy service"},
		{name: "p above the client limit", lease: time.Minute, clientMax: 3, p: 4, wantErr: "holds at most 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp := policy.DefaultParams()
			pp.Lease = tc.lease
			if tc.clientMax > 0 {
				pp.ClientMax = tc.clientMax
			}
			svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{pair: pp}})
			if err != nil {
				t.Fatal(err)
			}
			srcDir, dstDir := t.TempDir(), t.TempDir()
			tree(t, srcDir, 1000, 2000, 3000, 4000, 5000)
			d := prepare(t, localEP(t, srcDir+"/tree"), localEP(t, dstDir+"/"), opts(t))
			prm := params
			if tc.p > 0 {
				prm.P = tc.p
			}
			al := &flakyAlloc{svcAlloc: svcAlloc{svc: svc, pair: pair, name: "me"}, fail: tc.fail, timeout: tc.timeout}
			o := AdaptiveOptions{Params: prm, Wait: 20 * time.Millisecond, MaxOutage: 300 * time.Millisecond}
			if tc.forget {
				var once sync.Once
				o.OnChange = func(AdaptPoint) {
					if d.Summary().Files >= 1 {
						once.Do(func() { svc.Release(time.Now(), al.id, policy.Caller{Client: "me"}) })
					}
				}
			}
			_, _, err = RunAdaptive(context.Background(), d, al, o, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				if len(svc.List(time.Now(), policy.Filter{})) != 0 {
					t.Error("the failed copy kept its allocation")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := d.Summary(); s.Files != 5 {
				t.Errorf("copied %d files of 5", s.Files)
			}
			if al.requests < tc.requests {
				t.Errorf("%d requests for an allocation, want at least %d", al.requests, tc.requests)
			}
		})
	}
}

// TestKeepAliveRequestsAgain: while a batch runs, the service ends the
// client's allocation (its lease ran out while the service was down, or
// an administrator released it). The renewal asks for the streams again
// at once, so that they count against the pair while the batch still
// runs them; before, they ran uncounted until the next adaptation, d
// files later, which for large files is hours.
func TestKeepAliveRequestsAgain(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	pp := policy.DefaultParams()
	pp.Lease = 300 * time.Millisecond
	svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{pair: pp}})
	if err != nil {
		t.Fatal(err)
	}
	al := &svcAlloc{svc: svc, pair: pair, name: "me"}
	l := &lockedAlloc{a: al}
	streams, exp, err := l.Request(context.Background(), 8)
	if err != nil || streams != 8 {
		t.Fatalf("request: %d streams, %v", streams, err)
	}
	l.setExpiry(exp)
	done := l.keepAlive(context.Background()) // a batch runs
	defer done()
	gone := al.id
	if err := svc.Release(time.Now(), gone, policy.Caller{Client: "me"}); err != nil {
		t.Fatal(err)
	}
	held := 0
	for deadline := time.Now().Add(2 * time.Second); held == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, a := range svc.List(time.Now(), policy.Filter{Client: "me"}) {
			held += a.Streams
		}
	}
	if held != 8 {
		t.Errorf("after the service ended its allocation mid-batch the client holds %d streams, want its 8 again", held)
	}
}

// TestRunAdaptiveShrinkHeardMidBatch: the service takes streams back
// while a batch runs and the lease renewal hears of it. The batch in
// flight keeps its streams (they cannot be taken from running
// transfers), but the next batches run within what is left, even when
// no adaptation is due for many files. Before, the shrink heard by the
// renewal was applied only at the next adaptation, d files later: every
// batch until then ran the streams the client had given up, which the
// service no longer counted, so the pair was oversubscribed.
func TestRunAdaptiveShrinkHeardMidBatch(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{
		pair: {Initial: 4, Update: 0, PairMax: 4, ClientMax: 4, Lease: 300 * time.Millisecond},
	}})
	if err != nil {
		t.Fatal(err)
	}
	counted := func() (n int) { // what the service counts for the client
		for _, a := range svc.List(time.Now(), policy.Filter{Client: "me"}) {
			n += a.Streams + a.Draining
		}
		return n
	}
	var (
		mu       sync.Mutex
		inFlight int
		ranges   int
		over     []string
		shrink   sync.Once
	)
	gauge := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.Header.Get("Range") == "" {
				h.ServeHTTP(w, r)
				return
			}
			shrink.Do(func() {
				// The first batch has started: take 2 of its 4
				// streams back and hold this range until the
				// client's lease renewal has heard of it.
				as := svc.List(time.Now(), policy.Filter{Client: "me"})
				if len(as) != 1 {
					t.Errorf("allocations %+v, want one", as)
					return
				}
				if _, err := svc.Shrink(time.Now(), as[0].ID, 2, "test"); err != nil {
					t.Error(err)
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if as := svc.List(time.Now(), policy.Filter{Client: "me"}); len(as) == 1 && as[0].Draining == 0 {
						return
					}
				}
				t.Error("the lease renewal never heard of the shrink")
			})
			mu.Lock()
			inFlight++
			ranges++
			// The first batch's 4 ranges started before the shrink.
			if c := counted(); ranges > 4 && inFlight > c {
				over = append(over, fmt.Sprintf("range %d: %d streams in flight, the service counts %d", ranges, inFlight, c))
			}
			mu.Unlock()
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
			h.ServeHTTP(w, r)
		})
	}

	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := tree(t, srcDir, 300_000, 310_000, 320_000, 330_000, 340_000, 350_000)
	// Slow streams, so that the ranges of a batch overlap in time.
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{ConnBps: 2e6}, gauge)
	o := opts(t)
	o.PartMin = 64 << 10 // every file splits into p = 2 ranges
	d := prepare(t, src, localEP(t, dstDir+"/"), o)
	al := &svcAlloc{svc: svc, pair: pair, name: "me"}
	// 2 files of 2 streams at a time; no adaptation during the copy.
	params := policy.AdaptiveParams{Ci: 2, Cmax: 2, Delta: 0, D: 100, P: 2, T: 0}
	_, points, err := RunAdaptive(context.Background(), d, al, AdaptiveOptions{Params: params, Wait: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	for _, o := range over {
		t.Error(o)
	}
	for _, pt := range points {
		t.Logf("%.2f s: allocated %d, concurrency %d (%d streams)", pt.At, pt.Allocated, pt.Concurrency, pt.Streams)
	}
	if !slices.ContainsFunc(points, func(pt AdaptPoint) bool { return pt.Allocated == 2 && pt.Concurrency == 1 }) {
		t.Errorf("timeline %+v: want a point at concurrency 1 within the 2 streams left", points)
	}
}

// TestRunAdaptiveClientsOnAFullPair: adaptive clients that share a full
// pair, each granted fewer streams than one file needs (3 each of the
// pair's 6, at p = 4), all finish: a client that can neither run a file
// nor grow gives its streams back for a while, and another takes them.
// The paper's client renews what it holds and runs no file, as does every
// other: without the give-back none of them ever moves a byte.
func TestRunAdaptiveClientsOnAFullPair(t *testing.T) {
	pair := policy.Pair{Src: "src", Dst: "dst"}
	svc, err := policy.New(policy.Config{Pairs: map[policy.Pair]policy.Params{
		pair: {Initial: 3, Update: 3, PairMax: 6, ClientMax: 6, Lease: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srcDir := t.TempDir()
	want := tree(t, srcDir, 40_000, 50_000, 60_000, 70_000)
	src := sourceAgent(t, srcDir, "/tree", nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Both clients hold their first 3 streams before either asks for
	// more.
	var requested sync.WaitGroup
	var als [2]*barrierAlloc
	for i := range als {
		requested.Add(1)
		als[i] = &barrierAlloc{svcAlloc: svcAlloc{svc: svc, pair: pair, name: fmt.Sprintf("client%d", i)}, requested: &requested}
	}
	params := policy.AdaptiveParams{Ci: 1, Cmax: 2, Delta: 1, D: 1, P: 4, T: 0, Relative: true}
	var wg sync.WaitGroup
	errs := make([]error, len(als))
	dsts := make([]string, len(als))
	for i, al := range als {
		dsts[i] = t.TempDir()
		o := opts(t)
		o.PartMin = 8 << 10
		d := prepare(t, src, localEP(t, dsts[i]+"/"), o)
		wg.Go(func() {
			_, _, errs[i] = RunAdaptive(ctx, d, al, AdaptiveOptions{Params: params, Wait: 10 * time.Millisecond, Yield: 50 * time.Millisecond}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v (the clients waited for each other)", i, err)
		}
		sameTree(t, filepath.Join(dsts[i], "tree"), want)
	}
	if left := svc.List(time.Now(), policy.Filter{}); len(left) != 0 {
		t.Errorf("allocations left: %+v", left)
	}
}

// barrierAlloc is an svcAlloc whose first update waits until every
// client of the test has made its first request.
type barrierAlloc struct {
	svcAlloc
	requested *sync.WaitGroup
	first     sync.Once
}

func (a *barrierAlloc) Request(ctx context.Context, want int) (int, time.Time, error) {
	streams, exp, err := a.svcAlloc.Request(ctx, want)
	a.first.Do(a.requested.Done)
	return streams, exp, err
}

func (a *barrierAlloc) Update(ctx context.Context, want int) (int, time.Time, error) {
	a.requested.Wait()
	return a.svcAlloc.Update(ctx, want)
}
