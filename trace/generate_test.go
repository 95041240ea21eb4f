package trace

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func paperSpec(load float64, variant string, seed int64) GenSpec {
	return GenSpec{Load: load, Variant: variant, Seed: seed, Source: PaperSource, Destinations: PaperDestinations()}
}

func mustGenerate(t *testing.T, spec GenSpec) *Trace {
	t.Helper()
	tr, err := Generate(spec)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", spec, err)
	}
	return tr
}

func TestGenerateTable2(t *testing.T) {
	tests := []struct {
		load    float64
		variant string
		name    string
		counts  [NumClasses]int
		total   int
	}{
		{0.25, "", "25", [NumClasses]int{247, 40, 72, 46, 117}, 522},
		{0.45, "", "45", [NumClasses]int{907, 168, 334, 209, 232}, 1850},
		{0.60, "", "60", [NumClasses]int{728, 11, 34, 318, 290}, 1381},
		{0.60, "hv", "60-hv", [NumClasses]int{728, 11, 34, 318, 290}, 1381},
		{0.452, "", "45.2", [NumClasses]int{907, 168, 334, 209, 232}, 1850}, // within 0.005 of a row
	}
	for _, tc := range tests {
		for _, seed := range []int64{1, 2, 3} {
			tr := mustGenerate(t, paperSpec(tc.load, tc.variant, seed))
			st := tr.Stats()
			if st.ClassCount != tc.counts || st.Count != tc.total {
				t.Errorf("load %v %q seed %d: class counts %v (total %d), want %v (%d)",
					tc.load, tc.variant, seed, st.ClassCount, st.Count, tc.counts, tc.total)
			}
			if tr.Name != tc.name {
				t.Errorf("load %v %q: name %q, want %q", tc.load, tc.variant, tr.Name, tc.name)
			}
			target := tc.load * PaperSourceCapacity * 900
			if rel := math.Abs(float64(st.Bytes)-target) / target; rel > 0.005 {
				t.Errorf("load %v %q seed %d: volume %d, target %.0f (off by %.3f%%)",
					tc.load, tc.variant, seed, st.Bytes, target, 100*rel)
			}
		}
	}
}

func TestGenerateInvariants(t *testing.T) {
	specs := []GenSpec{
		paperSpec(0.25, "", 7),
		paperSpec(0.45, "4x", 7),
		paperSpec(0.60, "hv", 7),
		{Load: 0.1, Minutes: 2.5, Seed: 7, Source: "a", Destinations: []Dest{{"b", 1}}, SourceCapacity: 1e9},
	}
	for _, spec := range specs {
		tr := mustGenerate(t, spec)
		if err := tr.Validate(); err != nil {
			t.Errorf("%s: %v", tr.Name, err)
		}
		minutes := spec.Minutes
		if minutes == 0 {
			minutes = 15
		}
		dests := map[string]bool{}
		for _, d := range spec.Destinations {
			dests[d.Name] = true
		}
		for i, x := range tr.Transfers {
			if x.ID != int64(i) {
				t.Fatalf("%s: transfer %d has id %d", tr.Name, i, x.ID)
			}
			if x.Arrival < 0 || x.Arrival >= minutes*60 {
				t.Errorf("%s: arrival %v outside [0, %v)", tr.Name, x.Arrival, minutes*60)
			}
			if x.Arrival != math.Round(x.Arrival*1e6)/1e6 {
				t.Errorf("%s: arrival %v not rounded to microseconds", tr.Name, x.Arrival)
			}
			if x.Src != spec.Source || !dests[x.Dst] || x.Batch {
				t.Errorf("%s: transfer %+v has wrong endpoints or batch flag", tr.Name, x)
			}
			if want := fmt.Sprintf("/data/f%06d", i); x.Path != want {
				t.Errorf("%s: path %q, want %q", tr.Name, x.Path, want)
			}
			if x.Size < 1000 {
				t.Errorf("%s: size %d below 1 KB", tr.Name, x.Size)
			}
		}
	}
}

func TestGenerateDeterminism(t *testing.T) {
	csvOf := func(spec GenSpec) []byte {
		var buf bytes.Buffer
		if err := WriteCSV(&buf, mustGenerate(t, spec)); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, v := range []string{"", "4x", "hv"} {
		a, b := csvOf(paperSpec(0.45, v, 11)), csvOf(paperSpec(0.45, v, 11))
		if !bytes.Equal(a, b) {
			t.Errorf("variant %q: same spec gave different traces", v)
		}
		if c := csvOf(paperSpec(0.45, v, 12)); bytes.Equal(a, c) {
			t.Errorf("variant %q: seeds 11 and 12 gave identical traces", v)
		}
	}
}

func TestGenerate4x(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		base := mustGenerate(t, paperSpec(0.45, "", seed))
		x4 := mustGenerate(t, paperSpec(0.45, "4x", seed))
		if x4.Name != "45-4x" {
			t.Errorf("name %q, want 45-4x", x4.Name)
		}
		if len(x4.Transfers) != len(base.Transfers) {
			t.Fatalf("4x has %d transfers, base %d", len(x4.Transfers), len(base.Transfers))
		}
		changed := 0
		for i, x := range x4.Transfers {
			b := base.Transfers[i]
			switch x.Size {
			case b.Size:
			case 4 * b.Size:
				changed++
			default:
				t.Fatalf("transfer %d: size %d is neither base %d nor 4x", i, x.Size, b.Size)
			}
			x.Size = b.Size
			if x != b {
				t.Fatalf("transfer %d differs from base beyond size: %+v vs %+v", i, x, b)
			}
		}
		if want := int(math.Round(0.25 * float64(len(base.Transfers)))); changed != want {
			t.Errorf("seed %d: %d files made 4x larger, want %d", seed, changed, want)
		}
		if x4.Stats().Bytes <= base.Stats().Bytes {
			t.Errorf("seed %d: 4x volume %d not above base %d", seed, x4.Stats().Bytes, base.Stats().Bytes)
		}
	}
}

// The hv variant must differ from the plain trace only in its arrivals.
func TestGenerateHVSameFiles(t *testing.T) {
	base := mustGenerate(t, paperSpec(0.6, "", 5))
	hv := mustGenerate(t, paperSpec(0.6, "hv", 5))
	sizes := func(tr *Trace) []int64 {
		var s []int64
		for _, x := range tr.Transfers {
			s = append(s, x.Size)
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(sizes(base), sizes(hv)) {
		t.Error("hv variant has different file sizes from the plain trace")
	}
}

func TestClassCountsFor(t *testing.T) {
	tests := []struct {
		load float64
		want [NumClasses]int
		err  bool
	}{
		{0.25, [NumClasses]int{247, 40, 72, 46, 117}, false},
		{0.2549, [NumClasses]int{247, 40, 72, 46, 117}, false},
		{0.35, [NumClasses]int{577, 104, 203, 128, 175}, false}, // midpoint of 25% and 45%
		{0.525, [NumClasses]int{818, 90, 184, 264, 261}, false}, // midpoint of 45% and 60%
		{0.125, [NumClasses]int{124, 20, 36, 23, 59}, false},    // 25% row halved (123.5 rounds up)
		{1.2, [NumClasses]int{1456, 22, 68, 636, 580}, false},   // 60% row doubled
		{0, [NumClasses]int{}, true},
		{-0.1, [NumClasses]int{}, true},
		{2.01, [NumClasses]int{}, true},
		{math.NaN(), [NumClasses]int{}, true},
	}
	for _, tc := range tests {
		got, err := ClassCountsFor(tc.load)
		if (err != nil) != tc.err {
			t.Errorf("ClassCountsFor(%v) error %v, want error %v", tc.load, err, tc.err)
			continue
		}
		if got != tc.want {
			t.Errorf("ClassCountsFor(%v) = %v, want %v", tc.load, got, tc.want)
		}
	}
}

func TestGenerateOtherLoadsVolume(t *testing.T) {
	for _, load := range []float64{0.05, 0.3, 0.5, 0.8, 1.5, 2} {
		tr := mustGenerate(t, paperSpec(load, "", 3))
		target := load * PaperSourceCapacity * 900
		got := float64(tr.Stats().Bytes)
		if math.Abs(got-target) > 0.005*target {
			t.Errorf("load %v: volume %.4g, target %.4g", load, got, target)
		}
		want, _ := ClassCountsFor(load)
		if tr.Stats().ClassCount != want {
			t.Errorf("load %v: class counts %v, want %v", load, tr.Stats().ClassCount, want)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	ok := paperSpec(0.45, "", 1)
	tests := []struct {
		name   string
		mutate func(*GenSpec)
		want   string
	}{
		{"zero load", func(s *GenSpec) { s.Load = 0 }, "load"},
		{"negative load", func(s *GenSpec) { s.Load = -1 }, "load"},
		{"load above 2", func(s *GenSpec) { s.Load = 2.5 }, "load"},
		{"negative minutes", func(s *GenSpec) { s.Minutes = -1 }, "minutes"},
		{"no destinations", func(s *GenSpec) { s.Destinations = nil }, "no destinations"},
		{"zero weight", func(s *GenSpec) { s.Destinations = []Dest{{"a", 1}, {"b", 0}} }, "weight"},
		{"negative weight", func(s *GenSpec) { s.Destinations = []Dest{{"a", -1}} }, "weight"},
		{"NaN weight", func(s *GenSpec) { s.Destinations = []Dest{{"a", math.NaN()}} }, "weight"},
		{"duplicate dest", func(s *GenSpec) { s.Destinations = []Dest{{"a", 1}, {"a", 2}} }, "duplicate"},
		{"empty source", func(s *GenSpec) { s.Source = "" }, "source"},
		{"bad variant", func(s *GenSpec) { s.Variant = "8x" }, "variant"},
		{"negative capacity", func(s *GenSpec) { s.SourceCapacity = -1 }, "capacity"},
		{"negative burstiness", func(s *GenSpec) { s.Burstiness = -1 }, "burstiness"},
		{"window too long", func(s *GenSpec) { s.Minutes = 1e9 }, "more than"},
		// Counts that would overflow an int must not slip past the bound.
		{"window absurdly long", func(s *GenSpec) { s.Minutes = 1e17 }, "more than"},
		{"window overflowing float", func(s *GenSpec) { s.Minutes = 1e300 }, "more than"},
		{"window too short to hold a file", func(s *GenSpec) { s.Minutes = 1e-6 }, "no file"},
		// 232 files of at most 10 GB cannot hold 0.45 x 1e12 x 900 bytes.
		{"volume too large", func(s *GenSpec) { s.SourceCapacity = 1e12 }, "unreachable"},
		// 232 files above 1 GB cannot fit in 0.45 x 1e6 x 900 bytes.
		{"volume too small", func(s *GenSpec) { s.SourceCapacity = 1e6 }, "unreachable"},
	}
	for _, tc := range tests {
		spec := ok
		spec.Destinations = slices.Clone(ok.Destinations)
		tc.mutate(&spec)
		_, err := Generate(spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestGenerateDestinationWeights(t *testing.T) {
	// Six seeds of the 45% trace give 11100 draws, enough for the share of
	// each destination to be within 2 points of its weight share.
	dests := PaperDestinations()
	counts := map[string]int{}
	n := 0
	for seed := int64(1); seed <= 6; seed++ {
		for _, x := range mustGenerate(t, paperSpec(0.45, "", seed)).Transfers {
			counts[x.Dst]++
			n++
		}
	}
	total := 0.0
	for _, d := range dests {
		total += d.Weight
	}
	for _, d := range dests {
		got, want := float64(counts[d.Name])/float64(n), d.Weight/total
		if math.Abs(got-want) > 0.02 {
			t.Errorf("%s: share %.3f, want %.3f", d.Name, got, want)
		}
	}
}

func TestMinuteArrivalCV(t *testing.T) {
	at := func(arrivals ...float64) *Trace {
		tr := &Trace{}
		for _, a := range arrivals {
			tr.Transfers = append(tr.Transfers, Transfer{Arrival: a})
		}
		return tr
	}
	tests := []struct {
		name    string
		tr      *Trace
		minutes float64
		want    float64
	}{
		{"uniform", at(1, 61, 121), 3, 0},
		{"one busy minute of two", at(1, 2), 2, 1},          // counts 2,0: mean 1, sd 1
		{"counts 3,1", at(1, 2, 3, 70), 2, 0.5},             // mean 2, sd 1
		{"partial minute by rate", at(1, 61), 1.5, 1.0 / 3}, // rates 1, 2 per minute
		{"outside window ignored", at(1, 61, 500), 2, 0},    // 500 s is past 2 minutes
		{"empty", at(), 15, 0},
		{"batch ignored", &Trace{Transfers: []Transfer{{Arrival: 1}, {Arrival: 61}, {Arrival: 1, Batch: true}}}, 2, 0},
	}
	for _, tc := range tests {
		if got := MinuteArrivalCV(tc.tr, tc.minutes); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: CV %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBurstiness checks the arrival process against §2.1 and §6.4: the
// default trace's per-minute variation is moderate, and the hv variant's is
// clearly larger. Medians over seeds keep the test about the process, not
// one draw.
func TestBurstiness(t *testing.T) {
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, load := range []float64{0.25, 0.45, 0.60} {
		var def, hv []float64
		for seed := int64(1); seed <= 9; seed++ {
			def = append(def, MinuteArrivalCV(mustGenerate(t, paperSpec(load, "", seed)), 15))
			hv = append(hv, MinuteArrivalCV(mustGenerate(t, paperSpec(load, "hv", seed)), 15))
		}
		md, mh := median(def), median(hv)
		t.Logf("load %.2f: median CV default %.2f, hv %.2f", load, md, mh)
		if md < 0.5 || md > 1.5 {
			t.Errorf("load %v: default median CV %.2f outside [0.5, 1.5]", load, md)
		}
		if mh < 1.8*md {
			t.Errorf("load %v: hv median CV %.2f not clearly above default %.2f", load, mh, md)
		}
	}
	// Burstiness 0 (default) and an explicit tiny value must differ: the
	// knob is live.
	flat := paperSpec(0.45, "", 1)
	flat.Burstiness = 1e-9
	flat.MaxGroup = 1
	if cv := MinuteArrivalCV(mustGenerate(t, flat), 15); cv > 0.25 {
		t.Errorf("unmodulated singleton sessions: CV %.2f, want near Poisson noise (< 0.25)", cv)
	}
}

// Sessions: files of one session arrive within GroupSpread of each other,
// so with a large MaxGroup many arrivals fall close to their predecessor.
func TestGroupedArrivals(t *testing.T) {
	spec := paperSpec(0.45, "", 4)
	tr := mustGenerate(t, spec)
	close := 0
	for i := 1; i < len(tr.Transfers); i++ {
		if tr.Transfers[i].Arrival-tr.Transfers[i-1].Arrival < 1 {
			close++
		}
	}
	// Compare with singleton sessions under the same modulation: grouping
	// must add sub-second gaps.
	single := spec
	single.MaxGroup = 1
	trs := mustGenerate(t, single)
	closeSingle := 0
	for i := 1; i < len(trs.Transfers); i++ {
		if trs.Transfers[i].Arrival-trs.Transfers[i-1].Arrival < 1 {
			closeSingle++
		}
	}
	if close <= closeSingle {
		t.Errorf("grouped trace has %d sub-second gaps, singleton trace %d: grouping not visible", close, closeSingle)
	}
}

// Meeting the volume must not distort the size distribution into spikes of
// identical sizes at a class bound.
func TestGenerateNoSizeSpikes(t *testing.T) {
	for _, load := range []float64{0.25, 0.45, 0.60} {
		seen := map[int64]int{}
		worst := 0
		for _, x := range mustGenerate(t, paperSpec(load, "", 1)).Transfers {
			if SizeClass(x.Size) >= firstScaledClass {
				seen[x.Size]++
				worst = max(worst, seen[x.Size])
			}
		}
		if worst > 2 {
			t.Errorf("load %v: one large-file size occurs %d times", load, worst)
		}
	}
}
