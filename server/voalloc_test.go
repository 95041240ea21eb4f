package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

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
