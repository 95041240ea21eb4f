package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// lightTrace draws a small trace on tb: 2-60 transfers from the source to
// its destinations, sizes log-uniform in 1 KB-5 GB, arrivals in [0, 60) s,
// about one in five batch. The load is kept light so that every task must
// finish within minutes: if a destination (or the source) would get more
// than half of what it can move in the 60 s window, that destination's
// (every) size is scaled down to fit, never below 1 KB. About one in ten
// transfers is empty (0 B), as real logs have them: empty files are
// copied too, and pay the start-up like any other.
func lightTrace(t *rapid.T, tb *Testbed) *trace.Trace {
	dests := tb.Destinations()
	n := rapid.IntRange(2, 60).Draw(t, "n")
	tr := &trace.Trace{Name: "prop"}
	perDst := map[string]float64{}
	total := 0.0
	for i := 0; i < n; i++ {
		size := max(int64(math.Exp(rapid.Float64Range(math.Log(1e3), math.Log(5e9)).Draw(t, "logsize"))), 1000)
		if rapid.IntRange(0, 9).Draw(t, "empty") == 0 {
			size = 0
		}
		x := trace.Transfer{
			ID:      int64(i),
			Arrival: rapid.Float64Range(0, 60).Draw(t, "arrival"),
			Src:     tb.Source,
			Dst:     rapid.SampledFrom(dests).Draw(t, "dst").Name,
			Size:    size,
			Batch:   rapid.IntRange(0, 4).Draw(t, "batch") == 0,
		}
		tr.Transfers = append(tr.Transfers, x)
		perDst[x.Dst] += float64(x.Size)
		total += float64(x.Size)
	}
	const window, share = 60.0, 0.5
	srcScale := math.Min(1, share*window*Gbps(tb.Endpoint(tb.Source).CapacityGbps)/total)
	for i := range tr.Transfers {
		x := &tr.Transfers[i]
		f := math.Min(srcScale, share*window*Gbps(tb.Endpoint(x.Dst).CapacityGbps)/perDst[x.Dst])
		if f < 1 && x.Size > 0 {
			x.Size = max(int64(float64(x.Size)*f), 1000)
		}
	}
	return tr
}

// checkRun runs tr on tb under the scheduler and checks what must hold of
// every run: hard concurrency limits after every cycle; every task
// finished, after it arrived; bytes conserved; no task faster than its
// ideal (slowdown >= 1); turnaround = wait + run; no task starved.
func checkRun(t *rapid.T, tb *Testbed, tr *trace.Trace, name string, so sched.Options) {
	checkRunWith(t, tb, tr, name, so, Options{})
}

// checkRunWith is checkRun with the world's options opt (its Observer is
// replaced).
func checkRunWith(t *rapid.T, tb *Testbed, tr *trace.Trace, name string, so sched.Options, opt Options) {
	s, err := sched.New(name, so)
	if err != nil {
		t.Fatal(err)
	}
	cycles := 0
	opt.Observer = func(w *World, ds []sched.Decision) {
		cycles++
		per, total := w.Concurrency()
		if tb.TotalMaxCC > 0 && total > tb.TotalMaxCC {
			t.Fatalf("t=%.3f: total concurrency %d > %d after %v", w.Now(), total, tb.TotalMaxCC, ds)
		}
		for ep, cc := range per {
			if m := tb.Endpoint(ep).MaxCC; m > 0 && cc > m {
				t.Fatalf("t=%.3f: concurrency %d at %s > its max_cc %d after %v", w.Now(), cc, ep, m, ds)
			}
		}
	}
	res, err := Run(tb, tr, s, opt)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if cycles == 0 {
		t.Fatalf("%s: the observer never ran", name)
	}
	if len(res.Tasks) != len(tr.Transfers) {
		t.Fatalf("%s: %d task results for %d transfers", name, len(res.Tasks), len(tr.Transfers))
	}
	sum := 0.0
	for _, x := range tr.Transfers {
		sum += float64(x.Size)
	}
	// The world finishes a task once less than half a byte is left and
	// does not count that remainder as moved (World.loop/finish), so each
	// task may be up to 0.5 B short of its size in BytesMoved.
	if net := res.BytesMoved - res.BytesLost; math.Abs(net-sum) > 1e-6*sum+0.5*float64(len(tr.Transfers)) {
		t.Fatalf("%s: moved %.3f - lost %.3f = %.3f bytes, want the trace's %.0f", name, res.BytesMoved, res.BytesLost, net, sum)
	}
	if res.Preemptions != len(res.PreemptLog) {
		t.Fatalf("%s: %d preemptions but %d logged", name, res.Preemptions, len(res.PreemptLog))
	}
	if (strings.HasPrefix(name, "base") || name == "globus") && (res.Preemptions != 0 || res.Resizes != 0) {
		t.Fatalf("%s: a baseline preempted (%d) or resized (%d)", name, res.Preemptions, res.Resizes)
	}
	if res.Starts < len(tr.Transfers) {
		t.Fatalf("%s: %d starts for %d tasks", name, res.Starts, len(tr.Transfers))
	}
	for _, r := range res.Tasks {
		desc := fmt.Sprintf("%s: task %d (%d B, arrival %.3f, batch %v)", name, r.ID, r.Size, r.Arrival, r.Batch)
		switch {
		case !(r.Finish > 0) || r.Finish < r.Arrival:
			t.Fatalf("%s: finish %v", desc, r.Finish)
		case r.Wait < -1e-9 || r.Run <= 0:
			t.Fatalf("%s: wait %v, run %v", desc, r.Wait, r.Run)
		case r.Slowdown < 1-1e-9:
			t.Fatalf("%s: slowdown %v < 1 (wait %v, run %v, ideal %v)", desc, r.Slowdown, r.Wait, r.Run, r.IdealTT)
		case r.Turnaround < r.Run-1e-9:
			t.Fatalf("%s: turnaround %v < run %v", desc, r.Turnaround, r.Run)
		case math.Abs(r.Turnaround-(r.Wait+r.Run)) > 1e-6*math.Max(1, r.Turnaround):
			t.Fatalf("%s: turnaround %v != wait %v + run %v", desc, r.Turnaround, r.Wait, r.Run)
		case r.Wait >= 600:
			t.Fatalf("%s: waited %v s under a light load", desc, r.Wait)
		}
	}
}

// TestPropertySC15 runs random light traces on the SC'15 testbed (total
// concurrency 80, no per-endpoint limit) under every scheduler.
func TestPropertySC15(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb, err := LoadTestbed("sc15")
		if err != nil {
			t.Fatal(err)
		}
		tr := lightTrace(t, tb)
		name := rapid.SampledFrom(sched.Names()).Draw(t, "scheduler")
		checkRun(t, tb, tr, name, sched.Options{})
	})
}

// TestPropertyLimits does the same with random per-endpoint limits (0, or
// 4-64 connections) and a random total limit (16-80), and random SEAL
// options, so the hard limits bind.
func TestPropertyLimits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb, err := LoadTestbed("sc15")
		if err != nil {
			t.Fatal(err)
		}
		for i := range tb.Endpoints {
			if rapid.Bool().Draw(t, "limited") {
				tb.Endpoints[i].MaxCC = rapid.IntRange(4, 64).Draw(t, "max_cc")
			}
		}
		tb.TotalMaxCC = rapid.IntRange(16, 80).Draw(t, "total_max_cc")
		tr := lightTrace(t, tb)
		name := rapid.SampledFrom(sched.Names()).Draw(t, "scheduler")
		so := sched.Options{
			PF:           rapid.SampledFrom([]float64{0, 1.1, 2}).Draw(t, "pf"),
			Lambda:       rapid.SampledFrom([]float64{0, 0.5, 0.9}).Draw(t, "lambda"),
			PromoteAfter: rapid.SampledFrom([]float64{0, 30}).Draw(t, "promote"),
		}
		checkRun(t, tb, tr, name, so)
	})
}

// TestPropertyLive does the same in the live service's view (Options.Live):
// the scheduler sees lagging rates and pending tasks and victims pause at
// sub-write boundaries, and still every limit holds, every task finishes
// and no byte is lost or counted twice.
func TestPropertyLive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tb, err := LoadTestbed("sc15")
		if err != nil {
			t.Fatal(err)
		}
		tb.TotalMaxCC = rapid.IntRange(16, 80).Draw(t, "total_max_cc")
		tr := lightTrace(t, tb)
		name := rapid.SampledFrom(sched.Names()).Draw(t, "scheduler")
		live := LiveDefaults()
		live.SubWrite = rapid.SampledFrom([]int64{1 << 20, 4 << 20, 64 << 20}).Draw(t, "sub_write")
		checkRunWith(t, tb, tr, name, sched.Options{}, Options{Live: live})
	})
}
