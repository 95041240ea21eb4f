package trace

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
)

func TestZZTune(t *testing.T) {
	if os.Getenv("TUNE") == "" {
		t.Skip()
	}
	b, _ := strconv.ParseFloat(os.Getenv("B"), 64)
	a, _ := strconv.ParseFloat(os.Getenv("A"), 64)
	for _, load := range []float64{0.25, 0.45, 0.6} {
		for _, v := range []string{"", "hv"} {
			var cvs []float64
			for seed := int64(1); seed <= 41; seed++ {
				tr, err := Generate(GenSpec{Load: load, Variant: v, Seed: seed, Source: "s", Destinations: PaperDestinations(), Burstiness: b, GroupAlpha: a})
				if err != nil {
					t.Fatal(err)
				}
				cvs = append(cvs, MinuteArrivalCV(tr, 15))
			}
			sort.Float64s(cvs)
			fmt.Printf("load %.2f %-2s  p10 %.2f med %.2f p90 %.2f\n", load, v, cvs[4], cvs[20], cvs[36])
		}
	}
}
