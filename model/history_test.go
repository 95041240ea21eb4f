package model_test

import (
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

const big = int64(5e9) // size class 4

func obs(cc, sl, dl int, size int64, thr float64) model.Obs {
	return model.Obs{Src: "S", Dst: "D", CC: cc, SrcLoad: sl, DstLoad: dl, Size: size, Thr: thr}
}

// TestHistoryAverage: with no recent observations a prediction is the mean
// of the history at the query's signature (cc, bucketed loads, size class).
func TestHistoryAverage(t *testing.T) {
	h := model.NewHistory()
	h.AddHistory(obs(4, 2, 3, big, 100))
	h.AddHistory(obs(4, 2, 3, big, 300))
	h.AddHistory(obs(4, 10, 0, big, 50)) // loads 10 and 11 share bucket 10
	h.AddHistory(obs(4, 11, 0, big, 150))
	h.AddHistory(obs(4, 2, 3, 5e8, 7))   // another size class
	h.AddHistory(obs(4, 2, 3, big, 0))   // ignored: no throughput
	h.AddHistory(obs(0, 2, 3, big, 999)) // ignored: no concurrency
	cases := []struct {
		name   string
		cc     int
		sl, dl int
		size   int64
		want   float64
	}{
		{"mean of two", 4, 2, 3, big, 200},
		{"same size class", 4, 2, 3, 2e9, 200},
		{"loads in one bucket", 4, 11, 0, big, 100},
		{"loads in one bucket (query 10)", 4, 10, 0, big, 100},
		{"other size class", 4, 2, 3, 1e9, 7},
	}
	for _, c := range cases {
		if got := h.Throughput("S", "D", c.cc, c.sl, c.dl, c.size); got != c.want {
			t.Errorf("%s: Throughput(cc %d, loads %d/%d, %d B) = %g, want %g", c.name, c.cc, c.sl, c.dl, c.size, got, c.want)
		}
	}
	// Pairs are directed and separate.
	if got := h.Throughput("D", "S", 4, 2, 3, big); got != 0 {
		t.Errorf("reverse pair: %g, want 0 (no history, no fallback)", got)
	}
}

// TestHistoryFallback: the fallback answers for pairs and signatures
// without history; only when it has no answer (0) does the nearest
// signature on the pair stand in.
func TestHistoryFallback(t *testing.T) {
	h := model.NewHistory()
	var asked []int
	h.Fallback = func(src, dst string, cc, sl, dl int, size int64) float64 {
		asked = append(asked, cc)
		if cc >= 6 {
			return 0 // no prior for these
		}
		return 1000 * float64(cc)
	}
	h.AddHistory(obs(2, 0, 0, big, 100))
	h.AddHistory(obs(8, 0, 0, big, 400))
	cases := []struct {
		name     string
		src, dst string
		cc       int
		size     int64
		want     float64
	}{
		{"cell wins over fallback", "S", "D", 2, big, 100},
		{"unknown pair", "X", "Y", 3, big, 3000},
		{"known pair, no cell", "S", "D", 3, big, 3000},
		// cc 7: the fallback has nothing; the nearest cc on a log scale
		// is 8 (|ln 8/7| < |ln 2/7|).
		{"nearest signature when the fallback has nothing", "S", "D", 7, big, 400},
		// cc 6 of a 1 GB file (class 3): no cell of that class at all.
		{"no cell of the size class", "S", "D", 6, 1e9, 0},
	}
	for _, c := range cases {
		if got := h.Throughput(c.src, c.dst, c.cc, 0, 0, c.size); got != c.want {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
	}
	h2 := model.NewHistory()
	h2.AddHistory(obs(2, 0, 0, big, 100))
	h2.AddHistory(obs(8, 0, 0, big, 400))
	// Without a fallback: cc 3 is nearer 2 (|ln 2/3| = 0.41) than 8
	// (|ln 8/3| = 0.98).
	if got := h2.Throughput("S", "D", 3, 0, 0, big); got != 100 {
		t.Errorf("nearest signature to cc 3: %g, want 100", got)
	}
}

// TestHistoryRecentCorrection: recent observations on a pair scale every
// prediction on it by the mean ratio of observed to historical throughput
// at their own signatures, clamped to [0.2, 2], for RecentWindow seconds.
//
// History: 100 B/s at cc 2 (the query), 400 B/s at cc 8 with loads 0..k
// (one cell per load, so each observation is compared with an untouched
// cell of 400).
func TestHistoryRecentCorrection(t *testing.T) {
	setup := func() *model.History {
		h := model.NewHistory()
		h.AddHistory(obs(2, 0, 0, big, 100))
		for l := 0; l < 8; l++ {
			h.AddHistory(obs(8, l, 0, big, 400))
		}
		return h
	}
	observe := func(h *model.History, at float64, thrs ...float64) {
		for i, thr := range thrs {
			o := obs(8, i, 0, big, thr)
			o.Time = at
			h.Observe(o)
		}
	}
	cases := []struct {
		name string
		thrs []float64
		want float64
	}{
		{"none", nil, 100},
		{"twice as fast", []float64{800}, 200},
		{"mean of ratios 2 and 1", []float64{800, 400}, 150},
		{"half", []float64{200, 200, 200}, 50},
		{"clamped at 2", []float64{4000}, 200},
		{"clamped at 0.2", []float64{4}, 20},
	}
	for _, c := range cases {
		h := setup()
		h.SetNow(10)
		observe(h, 10, c.thrs...)
		if got := h.Throughput("S", "D", 2, 0, 0, big); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
		// Another pair is not corrected.
		h.AddHistory(model.Obs{Src: "S", Dst: "E", CC: 2, Size: big, Thr: 100})
		if got := h.Throughput("S", "E", 2, 0, 0, big); got != 100 {
			t.Errorf("%s: other pair %g, want 100", c.name, got)
		}
	}

	// Expiry: observed at t=10 with the default 1800 s window.
	h := setup()
	h.SetNow(10)
	observe(h, 10, 800)
	for _, c := range []struct {
		now  float64
		want float64
	}{{10, 200}, {1000, 200}, {1809, 200}, {1811, 100}, {5000, 100}} {
		h.SetNow(c.now)
		if got := h.Throughput("S", "D", 2, 0, 0, big); got != c.want {
			t.Errorf("observed at 10, now %g: %g, want %g", c.now, got, c.want)
		}
	}
	// A shorter window expires sooner.
	h = setup()
	h.RecentWindow = 60
	h.SetNow(10)
	observe(h, 10, 800)
	h.SetNow(69)
	if got := h.Throughput("S", "D", 2, 0, 0, big); got != 200 {
		t.Errorf("window 60, 59 s later: %g, want 200", got)
	}
	h.SetNow(71)
	if got := h.Throughput("S", "D", 2, 0, 0, big); got != 100 {
		t.Errorf("window 60, 61 s later: %g, want 100", got)
	}
	// Only the RecentMax latest observations count: ratios 2, 2, 0.5 with
	// RecentMax 2 leave 2 and 0.5, mean 1.25.
	h = setup()
	h.RecentMax = 2
	h.SetNow(10)
	observe(h, 10, 800, 800, 200)
	if got := h.Throughput("S", "D", 2, 0, 0, big); got != 125 {
		t.Errorf("RecentMax 2: %g, want 125", got)
	}
}

// TestHistoryObserveFeedsHistory: an observation also joins the history at
// its signature.
func TestHistoryObserveFeedsHistory(t *testing.T) {
	h := model.NewHistory()
	h.Fallback = func(string, string, int, int, int, int64) float64 { return 100 }
	o := obs(4, 0, 0, big, 100)
	h.Observe(o) // ratio 1 against the fallback; the cell becomes 100
	o.Thr = 300
	h.Observe(o) // ratio 3 against the cell's 100; the cell becomes 200
	// Prediction at the cell: 200 × mean(1, 3) = 400.
	if got := h.Throughput("S", "D", 4, 0, 0, big); got != 400 {
		t.Errorf("%g, want 400", got)
	}
}

// TestHistoryWideSignatures: signatures of any concurrency and load are
// kept apart and found again, whether they fit the packed rows the
// history keeps most cells in or not (cc above 256, loads beyond 2^28),
// and the nearest-signature search sees both kinds.
func TestHistoryWideSignatures(t *testing.T) {
	h := model.NewHistory()
	sigs := []struct {
		cc, sl, dl int
		thr        float64
	}{
		{1, 0, 0, 10}, {9, 0, 0, 90}, {16, 3, 5, 160}, {256, 0, 0, 2560}, {257, 0, 0, 2570},
		{1000, 7, 7, 10000}, {2, 1 << 29, 0, 20}, {2, 0, 1 << 40, 30}, {3, 64, 64, 33},
	}
	for _, s := range sigs {
		h.AddHistory(obs(s.cc, s.sl, s.dl, big, s.thr))
		h.AddHistory(obs(s.cc, s.sl, s.dl, 5e8, s.thr/10)) // another size class
	}
	for _, s := range sigs {
		if got := h.Throughput("S", "D", s.cc, s.sl, s.dl, big); got != s.thr {
			t.Errorf("cc %d, loads %d/%d: %g, want %g", s.cc, s.sl, s.dl, got, s.thr)
		}
		if got := h.Throughput("S", "D", s.cc, s.sl, s.dl, 5e8); got != s.thr/10 {
			t.Errorf("cc %d, loads %d/%d, class 3: %g, want %g", s.cc, s.sl, s.dl, got, s.thr/10)
		}
	}
	// No fallback: the nearest signature answers. cc 900 at no load is
	// nearest to cc 1000 at loads 7/7 (a packed row cannot hold either).
	if got := h.Throughput("S", "D", 900, 0, 0, big); got != 10000 {
		t.Errorf("nearest to cc 900: %g, want 10000", got)
	}
	// cc 8 at no load is nearest to cc 9 at no load (a row's cell).
	if got := h.Throughput("S", "D", 8, 0, 0, big); got != 90 {
		t.Errorf("nearest to cc 8: %g, want 90", got)
	}
}

// TestHistoryPriorOrderFree: a fallback answer is the signature's, asked
// at its bucket's loads and its class's size, so a prediction does not
// depend on which loads or sizes of one signature were asked about first
// (a scheduler that asks fewer questions must get the same answers).
func TestHistoryPriorOrderFree(t *testing.T) {
	fallback := func(src, dst string, cc, sl, dl int, size int64) float64 {
		return float64(cc*1_000_000+sl*1000+dl) + float64(size)/1e12
	}
	type q struct {
		sl, dl int
		size   int64
	}
	// 13 and 12 share a bucket (12-13), as do 40 and 47 (40-47); 2 MB
	// and 9 MB share a class (1-10M).
	qs := []q{{13, 40, 2e6}, {12, 47, 9e6}, {12, 40, 5e6}}
	answers := func(order []int) []float64 {
		h := model.NewHistory()
		h.Fallback = fallback
		out := make([]float64, len(qs))
		for _, i := range order {
			out[i] = h.Throughput("S", "D", 3, qs[i].sl, qs[i].dl, qs[i].size)
		}
		return out
	}
	a, b := answers([]int{0, 1, 2}), answers([]int{2, 1, 0})
	want := fallback("S", "D", 3, model.LoadBucket(13), model.LoadBucket(40), model.ClassSize(model.SizeClass(2e6)))
	for i := range qs {
		if a[i] != b[i] || a[i] != want {
			t.Errorf("query %v: %g asked first, %g asked last; want %g (the bucket's) both times", qs[i], a[i], b[i], want)
		}
	}
	for c := range 5 {
		if got := model.SizeClass(model.ClassSize(c)); got != c {
			t.Errorf("SizeClass(ClassSize(%d)) = %d", c, got)
		}
	}
}

// TestHistoryMaxRows: remembered fallback answers are dropped past
// MaxRows (and asked for again), observations never are.
func TestHistoryMaxRows(t *testing.T) {
	h := model.NewHistory()
	h.MaxRows = 100
	h.Fallback = func(src, dst string, cc, sl, dl int, size int64) float64 {
		return float64(cc*1000 + sl + dl)
	}
	observed := []struct{ cc, sl, dl int }{{1, 0, 0}, {4, 2, 3}, {8, 40, 1}}
	for _, o := range observed {
		h.AddHistory(obs(o.cc, o.sl, o.dl, big, 7))
	}
	most := 0
	for i := range 20_000 {
		src := []string{"S", "A", "B"}[i%3]
		cc, sl, dl := 1+i%16, i%97, (i/16)%89
		got := h.Throughput(src, "D", cc, sl, dl, big)
		if src == "S" && cc == 1 && sl == 0 && dl == 0 && got != 7 {
			t.Fatalf("query %d: observed signature answered %g, want 7", i, got)
		}
		if got <= 0 {
			t.Fatalf("query %d: %g", i, got)
		}
		most = max(most, h.Rows())
	}
	if most > 101 {
		t.Fatalf("history grew to %d rows, bound 100", most)
	}
	for _, o := range observed {
		if got := h.Throughput("S", "D", o.cc, o.sl, o.dl, big); got != 7 {
			t.Errorf("observed cc %d loads %d/%d: %g after drops, want 7", o.cc, o.sl, o.dl, got)
		}
	}
	// Without a bound the same queries keep every row.
	u := model.NewHistory()
	u.MaxRows = 0
	u.Fallback = h.Fallback
	for i := range 20_000 {
		u.Throughput([]string{"S", "A", "B"}[i%3], "D", 1+i%16, i%97, (i/16)%89, big)
	}
	if u.Rows() <= 1000 {
		t.Fatalf("unbounded history holds %d rows: the test does not exercise the bound", u.Rows())
	}
}

func TestHistoryIdeal(t *testing.T) {
	h := model.NewHistory()
	for cc, thr := range map[int]float64{1: 100, 2: 180, 3: 250, 4: 240} {
		h.AddHistory(obs(cc, 0, 0, big, thr))
	}
	h.AddHistory(obs(3, 5, 5, big, 999)) // loaded: not ideal
	cc, thr := h.Ideal("S", "D", big, 4)
	if cc != 3 || thr != 250 {
		t.Errorf("Ideal = (%d, %g), want (3, 250)", cc, thr)
	}
	cc, thr = h.Ideal("S", "D", big, 2)
	if cc != 2 || thr != 180 {
		t.Errorf("Ideal up to cc 2 = (%d, %g), want (2, 180)", cc, thr)
	}
}

func TestLoadBucket(t *testing.T) {
	for n := -3; n <= 8; n++ {
		if got, want := model.LoadBucket(n), max(n, 0); got != want {
			t.Errorf("LoadBucket(%d) = %d, want %d (exact up to 8)", n, got, want)
		}
	}
	for n, want := range map[int]int{9: 8, 10: 10, 15: 14, 16: 16, 17: 16, 19: 16, 20: 20, 31: 28, 32: 32, 33: 32, 39: 32, 40: 40, 63: 56, 64: 64, 65: 64, 79: 64, 80: 80, 100: 96} {
		if got := model.LoadBucket(n); got != want {
			t.Errorf("LoadBucket(%d) = %d, want %d", n, got, want)
		}
	}
	prev := 0
	for n := 0; n <= 10000; n++ {
		b := model.LoadBucket(n)
		if b < prev || b > n {
			t.Fatalf("LoadBucket(%d) = %d: not monotone (previous %d) or above n", n, b, prev)
		}
		prev = b
	}
}

func TestSizeClass(t *testing.T) {
	cases := []struct {
		size int64
		want int
	}{
		{0, 0}, {1, 0}, {1e6, 0}, {1e6 + 1, 1}, {10e6, 1}, {10e6 + 1, 2}, {100e6, 2}, {100e6 + 1, 3},
		{1e9, 3}, {1e9 + 1, 4}, {10e9, 4}, {50e9, 4},
	}
	h := model.NewHistory()
	for _, c := range cases {
		if got := model.SizeClass(c.size); got != c.want {
			t.Errorf("SizeClass(%d) = %d, want %d", c.size, got, c.want)
		}
		if got := h.SizeKey(c.size); got != int64(c.want) {
			t.Errorf("SizeKey(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}

// TestHistoryCurve: ThroughputCurve gives exactly what Throughput gives at
// each concurrency (the scheduler's decisions must not depend on which it
// asks): with history, recent corrections, a fallback that has no answer
// for some levels, loads past the packed rows, and on pairs without data;
// asked again (the fallback's answers remembered), through the pair's
// handle, and with a row bound low enough that remembered answers are
// dropped in the middle of a curve.
func TestHistoryCurve(t *testing.T) {
	for _, maxRows := range []int{model.DefaultMaxRows, 2} {
		historyCurve(t, maxRows)
	}
}

func historyCurve(t *testing.T, maxRows int) {
	h := model.NewHistory()
	h.MaxRows = maxRows
	h.Fallback = func(src, dst string, cc, sl, dl int, size int64) float64 {
		if cc%5 == 0 || src == "X" {
			return 0
		}
		return float64(cc*1000 + sl*10 + dl)
	}
	h.SetNow(100)
	for cc := 1; cc <= 12; cc += 3 {
		h.Observe(model.Obs{Time: 90, Src: "S", Dst: "D", CC: cc, SrcLoad: 2, DstLoad: 300, Size: big, Thr: float64(700 * cc)})
		h.AddHistory(model.Obs{Src: "X", Dst: "D", CC: cc, Size: big, Thr: float64(50 * cc)})
	}
	for _, q := range []struct {
		src, dst string
		sl, dl   int
		size     int64
	}{{"S", "D", 2, 300, big}, {"S", "D", 0, 0, 3e6}, {"S", "D", 40, 5, big}, {"X", "D", 0, 0, big}, {"N", "M", 1, 1, big}} {
		for from := 1; from <= 9; from += 4 {
			for ask := range 3 {
				curve := make([]float64, 8)
				if ask == 2 {
					h.Pair(q.src, q.dst).ThroughputCurve(from, q.sl, q.dl, q.size, curve)
				} else {
					h.ThroughputCurve(q.src, q.dst, from, q.sl, q.dl, q.size, curve)
				}
				for i, got := range curve {
					want := h.Throughput(q.src, q.dst, from+i, q.sl, q.dl, q.size)
					if ask == 1 {
						want = h.Pair(q.src, q.dst).Throughput(from+i, q.sl, q.dl, q.size)
					}
					if got != want {
						t.Errorf("rows %d, ask %d: %s->%s loads %d/%d: curve from %d at cc %d = %g, Throughput %g", maxRows, ask, q.src, q.dst, q.sl, q.dl, from, from+i, got, want)
					}
				}
			}
		}
	}
}

// TestHistoryIgnoresNonFinite: an observation whose throughput is NaN or
// infinite (a transfer timed at zero seconds, a corrupt stored
// observation) is ignored like a zero one. Before, it passed the "> 0"
// test, its signature's average became NaN or +Inf for good, and so did
// every prediction there and the pair's prediction error.
func TestHistoryIgnoresNonFinite(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, how := range []string{"AddHistory", "Observe"} {
			h := model.NewHistory()
			h.AddHistory(obs(4, 0, 0, big, 100))
			h.SetNow(10)
			o := obs(4, 0, 0, big, bad)
			o.Time = 10
			if how == "AddHistory" {
				h.AddHistory(o)
			} else {
				h.Observe(o)
			}
			if got := h.Throughput("S", "D", 4, 0, 0, big); got != 100 {
				t.Errorf("%s(thr %g): Throughput %g, want 100", how, bad, got)
			}
			if e, m := h.PredictionError("S", "D"), h.MeanError(); e != 0 || m != 0 {
				t.Errorf("%s(thr %g): prediction error %g, mean error %g, want 0", how, bad, e, m)
			}
		}
	}
}
