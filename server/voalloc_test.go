package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/store"
)

// TestFailedPolicyUpdateHoldsOneAllocation: when the operator's policy
// fails on updates (a Starlark update() with a bug) but grants new
// requests, the loop keeps one allocation per VO and pair, and an
// adaptive job one per pair. Before, each failed update forgot the
// allocation without releasing it and requested another: every renewal
// or growth attempt stranded one more allocation until its lease ran
// out, and the loop soon held the whole pair, so that no other client
// got a stream.
func TestFailedPolicyUpdateHoldsOneAllocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	star := filepath.Join(dir, "p.star")
	src := "def add(request):\n    return 16\n\ndef update(allocation, request):\n    fail(\"boom\")\n\ndef remove(allocation):\n    pass\n"
	if err := os.WriteFile(star, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := loadedWorld(t, Config{Store: st, ServerID: "s1", Policy: "starlark:" + star})
	now := time.Now()
	held := func(client string) (n, streams int) {
		svc, done := w.s.policyService()
		defer done()
		for _, a := range svc.List(now, policy.Filter{Client: client}) {
			n++
			streams += a.Streams
		}
		return n, streams
	}

	k := voKey{"a", "b", "cms"}
	a := w.voAlloc(k, now)
	if a == nil {
		t.Fatal("no allocation for the VO")
	}
	for range 10 {
		w.updateVOAlloc(k, w.vallocs[k], 0, now)
	}
	if n, streams := held("sluice-scheduler:cms"); n != 1 || streams != 16 {
		t.Errorf("after 10 failed updates the loop holds %d allocations (%d streams) for the VO on the pair, want 1 (16)", n, streams)
	}

	// An adaptive job adapting after every file (d = 1).
	tk := &task{Task: store.Task{JobID: 7, SrcEndpoint: "a", DstEndpoint: "c", Size: 1000},
		job: &jobState{Job: store.Job{ID: 7, VO: "cms", Adaptive: `{"ci":1,"cmax":2,"delta":1,"d":1,"p":4,"t":0.1}`}}}
	for range 10 {
		if w.adaptiveOf(tk, now) == nil {
			t.Fatal("the adaptive job got no allocation")
		}
		w.adaptiveDone(tk, now)
	}
	if n, _ := held(jobClient(7)); n > 1 {
		t.Errorf("after 10 failed updates the adaptive job holds %d allocations on the pair, want at most 1", n)
	}
}

// TestAdaptiveRenewalDoesNotAdapt: an adaptive job whose files take
// longer than a third of the lease has its allocation renewed on the
// loop's timer between adaptation points. The renewal keeps the lease
// and the concurrency (policy.Adaptive: a timer's update asks to keep
// the current streams, and is not an adaptation). Before, it was a full
// adaptation with a rate of 0 (no file had completed since the last
// one), so every renewal took Δ files off a job that ran at full speed.
func TestAdaptiveRenewalDoesNotAdapt(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := loadedWorld(t, Config{Store: st, ServerID: "s1"})
	lease := policy.DefaultParams().Lease
	// Greedy's defaults: 16 streams first, 4 more per update.
	tk := &task{Task: store.Task{ID: 1, JobID: 7, SrcEndpoint: "a", DstEndpoint: "b", Size: 100e9, State: store.StateRunning},
		job: &jobState{Job: store.Job{ID: 7, VO: "cms", Adaptive: `{"ci":4,"cmax":8,"delta":2,"d":1,"p":4,"t":0.1}`}}}
	w.tasks.add(tk)
	now := time.Now()
	ad := w.adaptiveOf(tk, now)
	if ad == nil || ad.cl.Concurrency() != 4 {
		t.Fatalf("adaptive client %+v, want one at concurrency 4 (16 streams / p 4)", ad)
	}
	// A 100 GB file completes after 100 s: the client adapts up (20
	// streams: 5 files).
	now = now.Add(100 * time.Second)
	w.adaptiveDone(tk, now)
	if c := ad.cl.Concurrency(); c != 5 {
		t.Fatalf("after the first file the concurrency is %d, want 5", c)
	}
	// The next files are as large: the lease needs renewing before one
	// completes.
	for i := range 3 {
		now = now.Add(lease/3 + time.Second)
		w.tendAdaptive(now)
		if w.adapts[adaptKeyOf(tk)] != ad {
			t.Fatalf("renewal %d: the adaptive client was dropped", i)
		}
		if c := ad.cl.Concurrency(); c != 5 {
			t.Errorf("renewal %d: concurrency %d, want 5: a renewal is not an adaptation", i, c)
		}
		svc, done := w.s.policyService()
		a, err := svc.Get(now, ad.allocID)
		done()
		if err != nil || !a.Expires.After(now.Add(lease/2)) {
			t.Errorf("renewal %d: allocation %+v (%v), want its lease renewed", i, a, err)
		}
	}
}

// TestAdaptiveClientsOnAFullPair: adaptive jobs that share a full pair
// and each hold fewer streams than their p do not wait for each other
// for ever. Here five jobs (p 4) each got 2 of the pair's 10 streams:
// none could run a file, none could grow, and each renewed its useless
// allocation for good (Chervenak et al.'s client, Fig. 3, runs
// min(c_i, streams/p) = 0 files). A client that cannot run a file and
// cannot grow now gives its streams back for a while, so that the others
// can; it asks again later.
func TestAdaptiveClientsOnAFullPair(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := loadedWorld(t, Config{Store: st, ServerID: "s1", Clock: clk})
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	cfg := w.s.Policy(ctx, admin)
	cfg.Defaults = PolicyParams{Initial: 2, Update: 4, PairMax: 10, ClientMax: 32, LeaseSeconds: 300}
	if _, err := w.s.SetPolicy(ctx, admin, cfg); err != nil {
		t.Fatal(err)
	}
	var tasks []*task
	for i := range 5 {
		tk := &task{Task: store.Task{ID: int64(i + 1), JobID: int64(10 + i), SrcEndpoint: "a", DstEndpoint: "b", Size: 1e9, State: store.StateQueued},
			job: &jobState{Job: store.Job{ID: int64(10 + i), VO: "cms", Adaptive: `{"ci":1,"cmax":2,"delta":1,"d":1,"p":4,"t":0.1}`}}}
		w.tasks.add(tk)
		tasks = append(tasks, tk)
		if ad := w.adaptiveOf(tk, clk.Now()); ad == nil || ad.streams != 2 || ad.cl.Concurrency() != 0 {
			t.Fatalf("job %d: adaptive client %+v, want 2 streams and concurrency 0", tk.JobID, ad)
		}
	}
	held := func() int {
		svc, done := w.s.policyService()
		defer done()
		n := 0
		for _, a := range svc.List(clk.Now(), policy.Filter{}) {
			n += a.Streams + a.Draining
		}
		return n
	}
	running := 0
	for range 30 {
		clk.Advance(time.Second)
		w.tendAdaptive(clk.Now())
		if n := held(); n > 10 {
			t.Fatalf("%d streams held on a pair of 10", n)
		}
		running = 0
		for _, tk := range tasks {
			if ad := w.adapts[adaptKeyOf(tk)]; ad != nil && ad.cl.Concurrency() > 0 {
				running++
			}
		}
		if running > 0 {
			break
		}
	}
	if running == 0 {
		for _, tk := range tasks {
			t.Logf("job %d: %+v", tk.JobID, w.adapts[adaptKeyOf(tk)])
		}
		t.Fatal("after 30 s no adaptive job may run a file: they hold the pair's streams between them, fewer than p each")
	}
	// A client that gave its streams back says why its files wait, and
	// asks again once its pause is over.
	var yielded *adaptState
	for _, tk := range tasks {
		ad := w.adapts[adaptKeyOf(tk)]
		if ad == nil || ad.cl.Concurrency() > 0 {
			continue
		}
		if why := ad.waiting(adaptKeyOf(tk)); !strings.Contains(why, "a->b") || !strings.Contains(why, "gave back") {
			t.Errorf("job %d waits saying %q", tk.JobID, why)
		}
		yielded = ad
	}
	if yielded == nil {
		t.Fatal("no client gave its streams back")
	}
	clk.Advance(adaptiveYieldFor)
	w.tendAdaptive(clk.Now())
	if yielded.allocID == "" {
		t.Errorf("a client that gave its streams back did not ask again after %s", adaptiveYieldFor)
	}
	if n := held(); n > 10 {
		t.Fatalf("%d streams held on a pair of 10", n)
	}
}
