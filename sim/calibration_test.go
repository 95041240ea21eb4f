package sim

import (
	"math"
	"os"
	"sort"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

// TestDefaultCurveFromSGData reproduces the calibration in
// docs/calibration.md: the median throughput of the real Stampede->Gordon
// runs (2.87 GB files, 2 streams, no pipelining; the rows of SGData.csv
// copied to testdata) at each concurrency, fitted with the second-order
// model, normalised to its asymptote, is DefaultCurve.
func TestDefaultCurveFromSGData(t *testing.T) {
	f, err := os.Open("testdata/sgdata-2.87GB-p2-pp1.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := model.ReadTuningCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	byCC := map[int][]float64{}
	for _, r := range rows {
		if r.Throughput*1e6 > r.Bandwidth { // above the link: a measurement error
			continue
		}
		byCC[r.Concurrency] = append(byCC[r.Concurrency], r.Throughput/1000)
	}
	var n, th []float64
	for _, cc := range []int{1, 2, 4, 8, 16, 32} {
		v := byCC[cc]
		if len(v) == 0 {
			t.Fatalf("no rows at concurrency %d", cc)
		}
		sort.Float64s(v)
		n = append(n, float64(cc))
		th = append(th, v[len(v)/2])
	}
	fit, err := model.FitSecondOrder(n, th)
	if err != nil {
		t.Fatal(err)
	}
	if lim := fit.Limit(); math.Abs(lim-4.82) > 0.01 {
		t.Errorf("asymptote %.3f Gb/s, documented 4.82", lim)
	}
	for _, cc := range []int{1, 2, 4, 8, 16, 32} {
		got := fit.At(float64(cc)) / fit.Limit()
		if want := DefaultCurve.At(cc); math.Abs(got-want) > 1e-3 {
			t.Errorf("cc %d: fitted fraction %.4f, DefaultCurve %.4f", cc, got, want)
		}
	}
}
