package sim

import (
	"math"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
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
