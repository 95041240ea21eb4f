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

// TestPerEndpointConnRate: an endpoint's own per-connection rate caps the
// paths to it (the smaller of the two ends), the testbed's rate the rest;
// a task gains with connections only up to the path's capacity.
func TestPerEndpointConnRate(t *testing.T) {
	tb := &Testbed{Name: "conn", Source: "s", ConnGbps: 0.1, Endpoints: []EndpointSpec{
		{Name: "s", CapacityGbps: 1},
		{Name: "near", CapacityGbps: 0.5, ConnGbps: 0.4},
		{Name: "far", CapacityGbps: 0.5, ConnGbps: 0.05},
		{Name: "plain", CapacityGbps: 0.5},
	}}
	if err := tb.init(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dst  string
		cc   int
		gbps float64
	}{
		{"near", 1, 0.4}, {"near", 2, 0.5}, // the NIC, not 2 × 0.4
		{"far", 1, 0.05}, {"far", 4, 0.2},
		{"plain", 1, 0.1}, {"plain", 8, 0.5},
	} {
		if got := tb.demand("s", c.dst, c.cc, 1e9) / Gbps(1); math.Abs(got-c.gbps) > 1e-9 {
			t.Errorf("s -> %s with %d connections: %g Gbit/s, want %g", c.dst, c.cc, got, c.gbps)
		}
	}
	bad := *tb
	bad.Endpoints = append([]EndpointSpec(nil), tb.Endpoints...)
	bad.Endpoints[1].ConnGbps = -1
	if err := bad.init(); err == nil {
		t.Error("a negative per-endpoint conn_gbps was accepted")
	}
}
