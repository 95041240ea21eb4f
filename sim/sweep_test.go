package sim

import (
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

func TestCurveWithFirst(t *testing.T) {
	for _, f := range []float64{0.1, 0.25, 0.5, 0.9} {
		c := curveWithFirst(DefaultCurve, f)
		if got := c.At(1); math.Abs(got-f) > 1e-9 {
			t.Errorf("f=%g: one connection reaches %g", f, got)
		}
		for n := 1; n < 64; n++ {
			if c.At(n+1) < c.At(n) {
				t.Errorf("f=%g: the curve falls from %d to %d connections", f, n, n+1)
			}
		}
	}
	if c := curveWithFirst(DefaultCurve, 1); c.At(1) != 1 || c.At(16) != 1 {
		t.Errorf("f=1: want a flat curve at 1, got %g at 1 and %g at 16", c.At(1), c.At(16))
	}
	// The SGData fit itself has one connection at about a quarter.
	if c := curveWithFirst(DefaultCurve, DefaultCurve.At(1)); math.Abs(c.At(8)-DefaultCurve.At(8)) > 1e-9 {
		t.Errorf("rescaling to the curve's own first point changed it: %g vs %g", c.At(8), DefaultCurve.At(8))
	}
}

func TestSweepShape(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunSweep(tb, []string{"25"}, []int64{1, 2}, []string{"basecc2", "seal+"},
		SweepParams{PerStream: []float64{1, 0.1}, Decline: []string{"none"}}, sched.Options{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows, want one per cell and load (2)", len(res.Rows))
	}
	for _, r := range res.Rows {
		if _, ok := r.Schedulers["basecc1"]; !ok {
			t.Errorf("%v: basecc1 missing (the sweep adds it for the concurrency CV)", r.Cell)
		}
		if r.BestSlowdown == "" || r.ConcurrencyCV <= 0 || r.ConcurrencyCV > 5 {
			t.Errorf("%v: best %q, concurrency CV %g", r.Cell, r.BestSlowdown, r.ConcurrencyCV)
		}
		if _, ok := r.Change["seal+"]; !ok {
			t.Errorf("%v: no change computed for seal+", r.Cell)
		}
	}
	// A path one stream fills is faster for everyone than one where a
	// stream gets a tenth.
	if a, b := res.Rows[0].Schedulers["basecc2"].AvgTurnaround, res.Rows[1].Schedulers["basecc2"].AvgTurnaround; a >= b {
		t.Errorf("per-stream 1 turnaround %g not below per-stream 0.1's %g", a, b)
	}
	if _, err := RunSweep(tb, []string{"25"}, []int64{1}, []string{"seal"}, SweepParams{Decline: []string{"huge"}}, sched.Options{}, Options{}); err == nil {
		t.Error("an unknown decline setting was accepted")
	}
}

func TestParseSeeds(t *testing.T) {
	cases := []struct {
		in   string
		want []int64
		bad  bool
	}{
		{"1..3", []int64{1, 2, 3}, false},
		{"1..3,7", []int64{1, 2, 3, 7}, false},
		{"5", []int64{5}, false},
		{"3..1", nil, true},
		{"x", nil, true},
		{"", nil, true},
	}
	for _, c := range cases {
		got, err := ParseSeeds(c.in)
		if (err != nil) != c.bad {
			t.Errorf("%q: error %v", c.in, err)
			continue
		}
		if !c.bad && len(got) != len(c.want) {
			t.Errorf("%q: %v, want %v", c.in, got, c.want)
		}
	}
}

// TestCycleAdmission: a task that arrives between cycles while the world
// is busy starts at once under a baseline that admits on arrival, and at
// the next cycle under one that admits on the cycle, as SEAL does; the
// cycle length sets the wait.
func TestCycleAdmission(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	// Task 1 keeps the world busy, so the cycles tick at 0, 0.5, 1, ...
	// (an idle world runs its first cycle when a task arrives).
	tr := &trace.Trace{Name: "two", Transfers: []trace.Transfer{
		{ID: 1, Arrival: 0, Src: "stampede", Dst: "gordon", Size: 5e9},
		{ID: 2, Arrival: 0.1, Src: "stampede", Dst: "yellowstone", Size: 1e6},
	}}
	cases := []struct {
		sched string
		cycle bool
		every float64
		wait  float64 // task 2's wait
	}{
		{"basecc2", false, 0.5, 0},
		{"basecc2", true, 0.5, 0.4},
		{"basecc2", true, 0.25, 0.15},
		{"basevary", true, 0.5, 0.4},
		{"basecc1", false, 0.5, 0},
		// SEAL waits for its cycle whatever the baselines do.
		{"seal", false, 0.5, 0.4},
	}
	for _, c := range cases {
		s, err := sched.New(c.sched, sched.Options{CycleAdmission: c.cycle})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(tb, tr, s, Options{Cycle: c.every})
		if err != nil {
			t.Fatal(err)
		}
		var got float64 = -1
		for _, x := range r.Tasks {
			if x.ID == 2 {
				got = x.Wait
			}
		}
		if math.Abs(got-c.wait) > 1e-6 {
			t.Errorf("%s, cycle admission %v, cycle %g s: task 2 waited %g s, want %g", c.sched, c.cycle, c.every, got, c.wait)
		}
	}
}

// TestSweepAdmissionAndAblations: the admission axis changes only the
// baselines' runs (SEAL's are shared, so identical across it), the rows
// carry intervals that hold their estimates, and the ablations run
// exactly on the rows where SEAL does not win.
func TestSweepAdmissionAndAblations(t *testing.T) {
	tb, err := LoadTestbed("sc15")
	if err != nil {
		t.Fatal(err)
	}
	pfOff, _ := ParseAblation("pf=off")
	res, err := RunSweep(tb, []string{"25"}, []int64{1, 2, 3}, []string{"basecc2", "basecc4", "seal"},
		SweepParams{PerStream: []float64{0.25}, Decline: []string{"none"}, Admission: []string{AdmitOnArrival, AdmitOnCycle},
			Ablations: []Ablation{pfOff}, Bootstrap: Bootstrap{Resamples: 500}}, sched.Options{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || res.Rows[0].Cell.Admission != AdmitOnArrival || res.Rows[1].Cell.Admission != AdmitOnCycle {
		t.Fatalf("rows %+v, want one per admission, arrival first", res.Rows)
	}
	a, c := res.Rows[0].Paired, res.Rows[1].Paired
	if a == nil || c == nil {
		t.Fatal("rows without intervals from three seeds")
	}
	if a.Mean["seal"] != c.Mean["seal"] {
		t.Errorf("SEAL's means differ across the baselines' admission: %+v vs %+v", a.Mean["seal"], c.Mean["seal"])
	}
	for _, b := range []string{"basecc2", "basecc4"} {
		// Waiting for the cycle only ever delays a baseline's tasks.
		if c.Mean[b].AvgTurnaround <= a.Mean[b].AvgTurnaround {
			t.Errorf("%s: turnaround on the cycle %g not above on arrival %g", b, c.Mean[b].AvgTurnaround, a.Mean[b].AvgTurnaround)
		}
	}
	ablated := 0
	for _, r := range res.Rows {
		d := r.Paired.Vs["seal"]
		if r.Paired.Losing {
			ablated++
		}
		for _, iv := range []Interval{d.Slowdown, d.Turnaround} {
			if !(iv.Lo <= iv.Est && iv.Est <= iv.Hi) {
				t.Errorf("%v: interval %v does not hold its estimate", r.Cell, iv)
			}
		}
		best := r.Paired.RankSlowdown[0]
		if want := pct(r.Paired.Mean["seal"].AvgSlowdown, r.Paired.Mean[best].AvgSlowdown); math.Abs(d.Slowdown.Est-want) > 1e-9 {
			t.Errorf("%v: SEAL's slowdown change %g, want %g against %s", r.Cell, d.Slowdown.Est, want, best)
		}
		if r.Paired.Losing != !d.Wins() {
			t.Errorf("%v: losing %v but SEAL's change is %+v", r.Cell, r.Paired.Losing, d)
		}
		_, ran := r.Paired.Ablations[pfOff.Name()]
		if ran != r.Paired.Losing {
			t.Errorf("%v: ablation run %v, SEAL not winning %v", r.Cell, ran, r.Paired.Losing)
		}
	}
	// SEAL loses at 25% on this path when the baselines start on
	// arrival (docs/results/regime-map.md): the ablation must have run.
	if ablated == 0 || !res.Rows[0].Paired.Losing {
		t.Errorf("SEAL wins in every row at 25%% load and share 0.25; the ablations were never run")
	}
	if _, err := RunSweep(tb, []string{"25"}, []int64{1, 2}, []string{"basecc2"}, SweepParams{Ablations: []Ablation{pfOff}}, sched.Options{}, Options{}); err == nil || !strings.Contains(err.Error(), "add seal") {
		t.Errorf("ablations without seal: error %v", err)
	}
	if _, err := RunSweep(tb, []string{"25"}, []int64{1}, []string{"seal"}, SweepParams{Ablations: []Ablation{pfOff}}, sched.Options{}, Options{}); err == nil || !strings.Contains(err.Error(), "2 seeds") {
		t.Errorf("ablations on one seed: error %v", err)
	}
	if _, err := RunSweep(tb, []string{"25"}, []int64{1}, []string{"seal"}, SweepParams{Admission: []string{"later"}}, sched.Options{}, Options{}); err == nil || !strings.Contains(err.Error(), `admission "later"`) {
		t.Errorf("an unknown admission: error %v", err)
	}
}

func TestParseAblation(t *testing.T) {
	cases := []struct {
		in   string
		want Ablation
		name string
		err  string
	}{
		{"cycle=0.1", Ablation{Cycle: 0.1}, "seal[cycle=0.1]", ""},
		{"pf=off", Ablation{PF: NoPreemption}, "seal[pf=off]", ""},
		{"pf=3", Ablation{PF: 3}, "seal[pf=3]", ""},
		{"cc=literal", Ablation{CCRule: CCRuleLiteral}, "seal[cc=literal]", ""},
		{"cc-rule=endpoints", Ablation{CCRule: CCRuleEndpoints}, "seal[cc=endpoints]", ""},
		{"cycle=0.1+pf=off", Ablation{Cycle: 0.1, PF: NoPreemption}, "seal[cycle=0.1 pf=off]", ""},
		{"pf=1e+3", Ablation{PF: 1000}, "seal[pf=1000]", ""},
		{"cycle=0", Ablation{}, "", "cycle"},
		{"cycle=nan", Ablation{}, "", "cycle"},
		{"pf=0.5", Ablation{}, "", "pf"},
		{"cc=own", Ablation{}, "", "cc"},
		{"beta=0.2", Ablation{}, "", "unknown setting"},
		{"cycle=0.1+cycle=0.2", Ablation{}, "", "twice"},
		{"", Ablation{}, "", "not name=value"},
		{"cycle", Ablation{}, "", "not name=value"},
	}
	for _, c := range cases {
		got, err := ParseAblation(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || got.Name() != c.name {
			t.Errorf("%q: %+v (%s), %v; want %+v (%s)", c.in, got, got.Name(), err, c.want, c.name)
		}
	}
	// The ablation changes SEAL's options and nothing else.
	so, opt := Ablation{Cycle: 0.2, PF: 4, CCRule: CCRuleLiteral}.apply(sched.Options{Beta: 0.1}, Options{Startup: 1})
	if so.PF != 4 || !so.OwnThroughputCC || so.Beta != 0.1 || opt.Cycle != 0.2 || opt.Startup != 1 {
		t.Errorf("apply: %+v, %+v", so, opt)
	}
}

// TestPaperRanking: the baselines rank as in SC'15 §6.3 when the paper's
// best of BaseCC1/2/4 is best in both metrics and BaseCC8 is worse than
// BaseCC2 and BaseCC4 in both; by slowdown alone, in average slowdown.
func TestPaperRanking(t *testing.T) {
	m := func(sd, ta float64) Means { return Means{AvgSlowdown: sd, AvgTurnaround: ta} }
	paper45 := map[string]Means{"basecc1": m(3, 9), "basecc2": m(1.5, 5), "basecc4": m(2, 6), "basecc8": m(4, 8), "basevary": m(1, 1)}
	with := func(base map[string]Means, name string, v Means) map[string]Means {
		out := maps.Clone(base)
		out[name] = v
		return out
	}
	cases := []struct {
		name       string
		load       string
		mean       map[string]Means
		both, bySD *bool
		note       string
	}{
		{"45%: basecc2 best, basevary ignored", "45", paper45, ptr(true), ptr(true), ""},
		{"60%: same", "60", paper45, ptr(true), ptr(true), ""},
		{"25%: basecc4 should be best", "25", paper45, ptr(false), ptr(false), "basecc2 best in slowdown (paper: basecc4)"},
		{"45%: basecc4 best in turnaround only", "45", with(paper45, "basecc4", m(2, 4)), ptr(false), ptr(true), "basecc4 best in turnaround"},
		{"45%: basecc8 beats basecc4 in turnaround", "45", with(paper45, "basecc8", m(4, 5.5)), ptr(false), ptr(true), "basecc8 not worse than basecc4 in turnaround"},
		{"45%: basecc1 best in slowdown", "45", with(paper45, "basecc1", m(1.2, 9)), ptr(false), ptr(false), "basecc1 best in slowdown"},
		{"no basecc8: judged without it", "45", func() map[string]Means { x := maps.Clone(paper45); delete(x, "basecc8"); return x }(), ptr(true), ptr(true), "basecc8 not run"},
		{"a load the paper does not rank", "30", paper45, nil, nil, "only on its 25, 45 and 60%"},
		{"the 45-4x trace", "45-4x", paper45, nil, nil, "only on its"},
		{"basecc1 missing", "45", func() map[string]Means { x := maps.Clone(paper45); delete(x, "basecc1"); return x }(), nil, nil, "needs basecc1"},
	}
	for _, c := range cases {
		both, bySD, note := paperRanking(c.load, c.mean)
		if !sameBool(both, c.both) || !sameBool(bySD, c.bySD) || !strings.Contains(note, c.note) {
			t.Errorf("%s: %s, %s, %q; want %s, %s, a note containing %q", c.name, fmtBool(both), fmtBool(bySD), note, fmtBool(c.both), fmtBool(c.bySD), c.note)
		}
	}
}

func ptr(b bool) *bool { return &b }

func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func fmtBool(b *bool) string {
	if b == nil {
		return "nil"
	}
	return strconv.FormatBool(*b)
}
