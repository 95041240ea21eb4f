package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sim"
)

// regimeSweep is a small regime map: two shares, one decline, both
// admissions, two loads; SEAL loses at share 0.25 and 45% load on
// arrival, where one ablation ran.
func regimeSweep() *sim.Sweep {
	iv := func(est, w float64) sim.Interval { return sim.Interval{Est: est, Lo: est - w, Hi: est + w} }
	yes, no := true, false
	s := &sim.Sweep{Testbed: "sc15", Seeds: []int64{1, 2, 3}, Schedulers: []string{"basecc1", "basecc2", "basecc4", "basecc8", "seal", "seal+"},
		Ablations: []string{"seal[pf=off]"}, Bootstrap: &sim.Bootstrap{Resamples: 1000, Level: 0.9, Seed: 1}}
	for _, share := range []float64{0.025, 0.25} {
		for _, adm := range []string{sim.AdmitOnArrival, sim.AdmitOnCycle} {
			for _, load := range []string{"25", "45"} {
				seal := sim.PairedDelta{Slowdown: iv(-20, 5), Turnaround: iv(-15, 4)}
				p := &sim.PairedRow{
					Mean:         map[string]sim.Means{"basecc2": {AvgSlowdown: 1.5, AvgTurnaround: 3}},
					RankSlowdown: []string{"basecc2", "basecc4", "basecc1", "basecc8"}, RankTurnaround: []string{"basecc4", "basecc2", "basecc1", "basecc8"},
					AsInPaper: &no, AsInPaperBySlowdown: &yes, RankNote: "basecc4 best in turnaround (paper: basecc2)",
				}
				if share == 0.25 && adm == sim.AdmitOnArrival && load == "45" {
					seal = sim.PairedDelta{Slowdown: iv(+9, 2), Turnaround: iv(+4, 3)}
					p.Losing = true
					p.Ablations = map[string]sim.PairedDelta{"seal[pf=off]": {Slowdown: iv(-6, 2), Turnaround: iv(-5, 2)}}
				}
				if load == "25" {
					p.AsInPaper, p.AsInPaperBySlowdown, p.RankNote = &yes, &yes, ""
				}
				p.Vs = map[string]sim.PairedDelta{"seal": seal, "seal+": {Slowdown: iv(-25, 3), Turnaround: iv(-20, 3)}}
				s.Rows = append(s.Rows, sim.SweepRow{Cell: sim.Cell{PerStream: share, Decline: "none", Admission: adm}, Trace: load, Paired: p})
			}
		}
	}
	return s
}

func TestRegimeMap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	if err := RegimeMap(dir, "regime-map", regimeSweep()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "regime-map.svg"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range svgTexts(t, data) {
		have[s] = true
	}
	for _, want := range []string{
		"per-connection share (log)", "% vs best baseline",
		"slowdown: no decline, arrival admission", "turnaround: no decline, cycle admission",
		"seal, load 25%", "seal+, load 45%", "0.025", "0.25",
	} {
		if !have[want] {
			t.Errorf("SVG has no text %q", want)
		}
	}
	checkPNG(t, filepath.Join(dir, "regime-map.png"), pixels(RegimeSize.X), pixels(RegimeSize.Y))

	empty := &sim.Sweep{Rows: []sim.SweepRow{{Trace: "45"}}}
	if err := RegimeMap(dir, "x", empty); !errors.Is(err, ErrEmpty) {
		t.Errorf("a sweep without intervals: %v, want ErrEmpty", err)
	}
	own := regimeSweep()
	own.Rows[0].Cell.PerStream = 0
	if err := RegimeMap(dir, "x", own); err == nil || !strings.Contains(err.Error(), "share axis") {
		t.Errorf("a row on the testbed's own curve: %v", err)
	}
}

func TestRegimeMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := RegimeMarkdown(&b, regimeSweep()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| share | decline | admission | load | baselines by avg slowdown (best first) | as in the paper | seal slowdown | seal turnaround | seal+ slowdown | seal+ turnaround |",
		// A row: the ranking, its turnaround leader, the verdict on the ranking, intervals in bold when they exclude zero.
		"| 0.25 | none | arrival | 45% | cc2 < cc4 < cc1 < cc8 (turnaround: cc4 best) | by slowdown only: basecc4 best in turnaround (paper: basecc2) | **+9.0 [+7.0, +11.0]** | **+4.0 [+1.0, +7.0]** |",
		"| 0.025 | none | cycle | 25% | cc2 < cc4 < cc1 < cc8 (turnaround: cc4 best) | yes |",
		"### Ablations where SEAL does not win (1 rows)",
		"| 0.25 | none | arrival | 45% | **+9.0 [+7.0, +11.0]** | **-6.0 [-8.0, -4.0]** |",
		"| 0.25 | none | arrival | 45% | `seal[pf=off]` | `seal[pf=off]` (-14.0) |",
		"| 45% | 4 | 3 | 1 | 0 |",
		"- **Not judged**: SEAL better than the best baseline at 45% and 60% where the baselines rank as in the paper",
		"Sensitivity (not criteria)",
		"- **Met**: SEAL better than the best baseline at 45% and 60% where the baselines rank as in the paper by average slowdown alone",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q\n%s", want, md)
		}
	}
	if err := RegimeMarkdown(&b, &sim.Sweep{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("an empty sweep: %v, want ErrEmpty", err)
	}
}

func TestStealMarkdown(t *testing.T) {
	iv := func(est, w float64) sim.Interval { return sim.Interval{Est: est, Lo: est - w, Hi: est + w} }
	s := &sim.StealSeeds{Testbed: "sc15", Seeds: []int64{1, 2, 3}, Lambda: 1, Bootstrap: sim.DefaultBootstrap, Traces: []sim.StealInterval{
		{Trace: "25", Slowdown: map[string]float64{"steal": 1.8, "seal1": 4.6, "basevary": 145}, SpareUsed: map[string]float64{"steal": 0.93, "seal1": 0.99, "basevary": 0.8},
			VsSEAL1: iv(-60, 1), VsBaseVary: iv(-98, 1)},
		{Trace: "60-hv", Slowdown: map[string]float64{"steal": 11.4, "seal1": 12.7, "basevary": 100}, SpareUsed: map[string]float64{},
			VsSEAL1: iv(-2, 5), VsBaseVary: iv(-88, 3)},
	}}
	var b bytes.Buffer
	if err := StealMarkdown(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 25 | 1.80 | 4.60 | 145.0 | **-60.0 [-61.0, -59.0]** | **-98.0 [-99.0, -97.0]** | 93.0% / 99.0% / 80.0% |",
		"| 60-hv | 11.40 | 12.70 | 100.0 | -2.0 [-7.0, +3.0] |",
		"- **Not met**: STEAL's interactive slowdown lower",
		"not below zero on trace 60-hv",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Markdown lacks %q\n%s", want, b.String())
		}
	}
}
