package trace

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSizeLawMatchesGenerate: the streaming size law has the generated
// trace's mean (the volume target over the Table 2 count), its class mix,
// and about its median, for the three paper loads; bad loads are errors.
func TestSizeLawMatchesGenerate(t *testing.T) {
	for _, load := range []float64{0.25, 0.45, 0.60} {
		l, err := NewSizeLaw(load)
		if err != nil {
			t.Fatalf("load %v: %v", load, err)
		}
		counts, _ := ClassCountsFor(load)
		total := 0
		for _, n := range counts {
			total += n
		}
		want := load * PaperSourceCapacity * 900 / float64(total)
		if math.Abs(l.Mean()-want) > 1e-6*want {
			t.Errorf("load %v: law mean %.6g, want %.6g", load, l.Mean(), want)
		}
		// Many generated traces against many draws.
		var gen, drawn []float64
		for seed := int64(1); seed <= 40; seed++ {
			tr, err := Generate(GenSpec{Load: load, Seed: seed, Source: "s", Destinations: []Dest{{Name: "d", Weight: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range tr.Transfers {
				gen = append(gen, float64(x.Size))
			}
		}
		r := rand.New(rand.NewPCG(7, 7))
		var sum float64
		var cls [NumClasses]int
		for range 400000 {
			s := l.Draw(r)
			sum += float64(s)
			cls[SizeClass(s)]++
			drawn = append(drawn, float64(s))
		}
		if m := sum / 400000; math.Abs(m-want) > 0.03*want {
			t.Errorf("load %v: sample mean %.4g, law mean %.4g", load, m, want)
		}
		for c := range cls {
			p := float64(counts[c]) / float64(total)
			if got := float64(cls[c]) / 400000; math.Abs(got-p) > 0.005 {
				t.Errorf("load %v class %s: share %.4f, Table 2 %.4f", load, ClassNames[c], got, p)
			}
		}
		slices.Sort(gen)
		slices.Sort(drawn)
		mg, md := gen[len(gen)/2], drawn[len(drawn)/2]
		if math.Abs(math.Log(mg/md)) > math.Log(1.3) {
			t.Errorf("load %v: median %.4g drawn, %.4g generated", load, md, mg)
		}
	}
	for _, bad := range []float64{0, -1, 3, math.NaN()} {
		if _, err := NewSizeLaw(bad); err == nil {
			t.Errorf("load %v: no error", bad)
		}
	}
}
