package trace

import (
	"math"
	"slices"
	"testing"
)

func TestBatchCountFor(t *testing.T) {
	tests := []struct {
		load, capacity float64
		want           int
	}{
		{0.25, PaperSourceCapacity, 17}, // §6.4, special-cased
		{0.45, PaperSourceCapacity, 13},
		{0.60, PaperSourceCapacity, 10},
		{0.6049, PaperSourceCapacity, 10},
		{0.30, PaperSourceCapacity, 14}, // round(0.7 x 1.035e12 / 50e9) = round(14.49)
		{0.50, PaperSourceCapacity, 10}, // round(10.35)
		{0.50, 2 * PaperSourceCapacity, 21},
		{1.00, PaperSourceCapacity, 0},
		{1.50, PaperSourceCapacity, 0}, // over-full: no room, never negative
		{0.50, 0, 0},
		{0.50, math.NaN(), 0},
	}
	for _, tc := range tests {
		if got := BatchCountFor(tc.load, tc.capacity); got != tc.want {
			t.Errorf("BatchCountFor(%v, %v) = %d, want %d", tc.load, tc.capacity, got, tc.want)
		}
	}
}

func TestApportion(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		dests []Dest
		want  []int
	}{
		// Quotas 5.79 5.06 2.89 1.81 1.45: floors 5 5 2 1 1, leftovers 3 to
		// the largest remainders (blacklight .89, mason .81, yellowstone .79).
		{"paper 17", 17, PaperDestinations(), []int{6, 5, 3, 2, 1}},
		{"paper 13", 13, PaperDestinations(), []int{5, 4, 2, 1, 1}},
		{"paper 10", 10, PaperDestinations(), []int{3, 3, 2, 1, 1}},
		{"equal weights tie to earlier", 2, []Dest{{"a", 1}, {"b", 1}, {"c", 1}}, []int{1, 1, 0}},
		{"zero", 0, []Dest{{"a", 1}}, []int{0}},
		{"exact", 6, []Dest{{"a", 1}, {"b", 2}}, []int{2, 4}},
		{"thirds", 10, []Dest{{"a", 1}, {"b", 1}, {"c", 1}}, []int{4, 3, 3}},
	}
	for _, tc := range tests {
		got, err := Apportion(tc.n, tc.dests)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Apportion(%d) = %v, want %v", tc.name, tc.n, got, tc.want)
		}
	}
	for _, bad := range []struct {
		n     int
		dests []Dest
	}{{-1, PaperDestinations()}, {3, nil}, {3, []Dest{{"a", 0}}}} {
		if _, err := Apportion(bad.n, bad.dests); err == nil {
			t.Errorf("Apportion(%d, %v): no error", bad.n, bad.dests)
		}
	}
}

func TestAddBatch(t *testing.T) {
	tr := &Trace{Name: "x", Transfers: []Transfer{
		{ID: 0, Arrival: 0, Src: "s", Dst: "a", Size: 1},
		{ID: 1, Arrival: 5, Src: "s", Dst: "b", Size: 2},
		{ID: 2, Arrival: 9, Src: "s", Dst: "a", Size: 3},
	}}
	dests := []Dest{{"a", 3}, {"b", 1}}
	for _, n := range []int{-1, 1e8} {
		if err := AddBatch(tr, n, PaperBatchSize, "src", dests, 5, 1); err == nil || len(tr.Transfers) != 3 {
			t.Errorf("%d batch tasks: error %v, %d transfers; want an error and the trace as it was", n, err, len(tr.Transfers))
		}
	}
	if err := AddBatch(tr, 5, PaperBatchSize, "src", dests, 5, 1); err != nil {
		t.Fatal(err)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(tr.Transfers) != 8 {
		t.Fatalf("%d transfers, want 8", len(tr.Transfers))
	}
	perDst := map[string]int{}
	for i, x := range tr.Transfers {
		if x.ID != int64(i) {
			t.Errorf("transfer %d has id %d", i, x.ID)
		}
		if x.Batch {
			perDst[x.Dst]++
			if x.Size != PaperBatchSize || x.Arrival != 5 || x.Src != "src" {
				t.Errorf("batch transfer %+v", x)
			}
		}
	}
	// Quotas 3.75 and 1.25: floors 3 and 1, the leftover to a.
	if perDst["a"] != 4 || perDst["b"] != 1 {
		t.Errorf("batch split %v, want a:4 b:1", perDst)
	}
	// Existing transfers keep their order; the batch follows the transfer
	// that arrives at the same instant.
	if tr.Transfers[0].Size != 1 || tr.Transfers[1].Size != 2 || tr.Transfers[7].Size != 3 {
		t.Errorf("order not preserved: %+v", tr.Transfers)
	}

	// Same seed, same order; per-destination counts independent of seed.
	order := func(seed int64) []string {
		x := &Trace{}
		if err := AddBatch(x, 17, 1, "s", PaperDestinations(), 0, seed); err != nil {
			t.Fatal(err)
		}
		var o []string
		for _, y := range x.Transfers {
			o = append(o, y.Dst)
		}
		return o
	}
	a, b := order(1), order(1)
	if !slices.Equal(a, b) {
		t.Error("AddBatch not deterministic")
	}
	c := order(2)
	sa, sc := slices.Clone(a), slices.Clone(c)
	slices.Sort(sa)
	slices.Sort(sc)
	if !slices.Equal(sa, sc) {
		t.Errorf("seed changed the destination counts: %v vs %v", sa, sc)
	}

	for _, bad := range []struct {
		name string
		f    func() error
	}{
		{"nil trace", func() error { return AddBatch(nil, 1, 1, "s", dests, 0, 1) }},
		{"negative size", func() error { return AddBatch(&Trace{}, 1, -1, "s", dests, 0, 1) }},
		{"negative n", func() error { return AddBatch(&Trace{}, -1, 1, "s", dests, 0, 1) }},
		{"bad time", func() error { return AddBatch(&Trace{}, 1, 1, "s", dests, math.Inf(1), 1) }},
		{"no dests", func() error { return AddBatch(&Trace{}, 1, 1, "s", nil, 0, 1) }},
		{"no source", func() error { return AddBatch(&Trace{}, 1, 1, "", dests, 0, 1) }},
	} {
		if bad.f() == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

func TestAddBatchPaper(t *testing.T) {
	tr := mustGenerate(t, paperSpec(0.45, "", 1))
	n := BatchCountFor(0.45, PaperSourceCapacity)
	if err := AddBatch(tr, n, PaperBatchSize, PaperSource, PaperDestinations(), 0, 1); err != nil {
		t.Fatal(err)
	}
	st := tr.Stats()
	if st.BatchCount != 13 || st.BatchBytes != 13*PaperBatchSize || st.Count != 1850+13 {
		t.Errorf("stats after AddBatch: %+v", st)
	}
	for _, x := range tr.Transfers {
		if x.Batch {
			break
		}
		if x.Arrival != 0 {
			t.Fatalf("interactive transfer at %v precedes the batch tasks that arrive at 0", x.Arrival)
		}
	}
	if MinuteArrivalCV(tr, 15) != MinuteArrivalCV(mustGenerate(t, paperSpec(0.45, "", 1)), 15) {
		t.Error("MinuteArrivalCV counts batch transfers")
	}
}

func TestRemap(t *testing.T) {
	orig := &Trace{Name: "log", Transfers: []Transfer{
		{ID: 0, Arrival: 0, Src: "dtn", Dst: "1.2.3.4", Size: 1},
		{ID: 1, Arrival: 1, Src: "5.6.7.8", Dst: "dtn", Size: 2},
		{ID: 2, Arrival: 2, Src: "dtn", Dst: "gordon", Size: 3},
	}}
	before := orig.Clone()
	known := func(n string) bool { return n == "gordon" || n == "mason" }
	dests := []Dest{{"gordon", 1}, {"mason", 1}}
	got := Remap(orig, "stampede", dests, known, 1)
	if !slices.Equal(orig.Transfers, before.Transfers) {
		t.Error("Remap modified its input")
	}
	for i, x := range got.Transfers {
		if x.Src != "stampede" {
			t.Errorf("transfer %d: src %q, want stampede", i, x.Src)
		}
		if !known(x.Dst) {
			t.Errorf("transfer %d: dst %q not remapped", i, x.Dst)
		}
		if x.Size != orig.Transfers[i].Size || x.ID != orig.Transfers[i].ID {
			t.Errorf("transfer %d: other fields changed", i)
		}
	}
	if got.Transfers[2].Dst != "gordon" {
		t.Error("known destination was redrawn")
	}
	again := Remap(orig, "stampede", dests, known, 1)
	if !slices.Equal(got.Transfers, again.Transfers) {
		t.Error("Remap not deterministic")
	}
	// Weighted draw: over many transfers, shares follow the weights.
	big := &Trace{}
	for i := range 4000 {
		big.Transfers = append(big.Transfers, Transfer{ID: int64(i), Dst: "?"})
	}
	r := Remap(big, "s", []Dest{{"x", 3}, {"y", 1}}, nil, 9)
	nx := 0
	for _, x := range r.Transfers {
		if x.Dst == "x" {
			nx++
		}
	}
	if share := float64(nx) / 4000; math.Abs(share-0.75) > 0.03 {
		t.Errorf("share of x %.3f, want 0.75", share)
	}
	// Invalid dests: destinations left alone rather than invented.
	if r := Remap(orig, "", nil, nil, 1); r.Transfers[0].Dst != "1.2.3.4" || r.Transfers[0].Src != "dtn" {
		t.Errorf("Remap without dests or src changed endpoints: %+v", r.Transfers[0])
	}
	if Remap(nil, "s", dests, nil, 1) != nil {
		t.Error("Remap(nil) != nil")
	}
}

func TestSizeClassAndStats(t *testing.T) {
	tests := []struct {
		size int64
		want int
	}{
		{0, 0}, {1, 0}, {1e6, 0}, {1e6 + 1, 1}, {1e7, 1}, {1e7 + 1, 2}, {1e8, 2},
		{1e8 + 1, 3}, {1e9, 3}, {1e9 + 1, 4}, {1e10, 4}, {4e10, 4}, {-5, 0},
	}
	for _, tc := range tests {
		if got := SizeClass(tc.size); got != tc.want {
			t.Errorf("SizeClass(%d) = %d (%s), want %d (%s)", tc.size, got, ClassNames[got], tc.want, ClassNames[tc.want])
		}
	}
	tr := &Trace{Transfers: []Transfer{
		{Arrival: 2, Dst: "a", Size: 5e5},
		{Arrival: 3, Dst: "b", Size: 2e9},
		{Arrival: 7, Dst: "a", Size: 5e10, Batch: true},
	}}
	st := tr.Stats()
	want := Stats{
		Count: 3, Bytes: 5e5 + 2e9 + 5e10,
		ClassCount: [NumClasses]int{1, 0, 0, 0, 2}, ClassBytes: [NumClasses]int64{5e5, 0, 0, 0, 2e9 + 5e10},
		BatchCount: 1, BatchBytes: 5e10, FirstArrival: 2, LastArrival: 7, Duration: 5,
	}
	if st.Count != want.Count || st.Bytes != want.Bytes || st.ClassCount != want.ClassCount ||
		st.ClassBytes != want.ClassBytes || st.BatchCount != want.BatchCount || st.BatchBytes != want.BatchBytes ||
		st.FirstArrival != want.FirstArrival || st.LastArrival != want.LastArrival || st.Duration != want.Duration {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if st.PerDst["a"] != 2 || st.PerDstBytes["b"] != 2e9 {
		t.Errorf("per-destination stats %v %v", st.PerDst, st.PerDstBytes)
	}
	if (&Trace{}).Stats().Count != 0 {
		t.Error("empty trace stats")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ts   []Transfer
		ok   bool
	}{
		{"ok", []Transfer{{ID: 1, Arrival: 0}, {ID: 0, Arrival: 1}}, true},
		{"tie by id", []Transfer{{ID: 0, Arrival: 1}, {ID: 1, Arrival: 1}}, true},
		{"tie out of id order", []Transfer{{ID: 1, Arrival: 1}, {ID: 0, Arrival: 1}}, false},
		{"unsorted", []Transfer{{ID: 0, Arrival: 2}, {ID: 1, Arrival: 1}}, false},
		{"dup id", []Transfer{{ID: 0, Arrival: 1}, {ID: 0, Arrival: 2}}, false},
		{"negative size", []Transfer{{ID: 0, Size: -1}}, false},
		{"negative arrival", []Transfer{{ID: 0, Arrival: -1}}, false},
		{"NaN arrival", []Transfer{{ID: 0, Arrival: math.NaN()}}, false},
	}
	for _, tc := range tests {
		err := (&Trace{Transfers: tc.ts}).Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

// TestRemapNoSelfTransfer: Remap never turns a transfer between two
// different names into one from an endpoint to itself. Before, an unknown
// sender to the source became source -> source, and a known destination
// sending to an unknown peer was often given itself as the peer (with
// sc15's weights, gordon -> gordon for about a third of them).
func TestRemapNoSelfTransfer(t *testing.T) {
	known := func(n string) bool { return n == "stampede" || n == "gordon" || n == "mason" }
	two := []Dest{{"gordon", 7}, {"mason", 2.5}}
	many := func(src, dst string) []Transfer {
		ts := make([]Transfer, 200)
		for i := range ts {
			ts[i] = Transfer{ID: int64(i), Arrival: float64(i), Src: src, Dst: dst, Size: 1}
		}
		return ts
	}
	tests := []struct {
		name             string
		ts               []Transfer
		src              string
		dests            []Dest
		wantSrc, wantDst string // "" means any known endpoint but the other end
	}{
		{"an unknown sender to the source", many("x", "stampede"), "stampede", two, "", "stampede"},
		{"a destination sending to an unknown peer", many("gordon", "y"), "stampede", two, "gordon", ""},
		{"the only destination sending to an unknown peer", many("gordon", "y"), "stampede", two[:1], "gordon", "stampede"},
		{"both unknown, the source among the destinations", many("x", "y"), "stampede", append([]Dest{{"stampede", 9.2}}, two...), "stampede", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Remap(&Trace{Transfers: tc.ts}, tc.src, tc.dests, known, 1)
			for i, x := range got.Transfers {
				if x.Src == x.Dst || !known(x.Src) || !known(x.Dst) ||
					tc.wantSrc != "" && x.Src != tc.wantSrc || tc.wantDst != "" && x.Dst != tc.wantDst {
					t.Fatalf("transfer %d: %s -> %s, want %q -> %q, two different endpoints", i, x.Src, x.Dst, tc.wantSrc, tc.wantDst)
				}
			}
			if again := Remap(&Trace{Transfers: tc.ts}, tc.src, tc.dests, known, 1); !slices.Equal(got.Transfers, again.Transfers) {
				t.Error("Remap not deterministic")
			}
		})
	}
}
