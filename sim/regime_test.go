package sim

import (
	"strings"
	"testing"
)

// ivAt is an interval around est, width w each side.
func ivAt(est, w float64) Interval { return Interval{Est: est, Lo: est - w, Hi: est + w} }

func delta(sd, ta, w float64) PairedDelta {
	return PairedDelta{Slowdown: ivAt(sd, w), Turnaround: ivAt(ta, w)}
}

// row is a regime-map row at a load; asIn is the strict ranking, bySD the
// slowdown-only one.
func row(load string, asIn, bySD bool, seal, plus PairedDelta, abl map[string]PairedDelta) SweepRow {
	return SweepRow{Cell: Cell{PerStream: 0.1, Decline: "none"}, Trace: load, Paired: &PairedRow{
		AsInPaper: &asIn, AsInPaperBySlowdown: &bySD,
		Vs:     map[string]PairedDelta{"seal": seal, "seal+": plus},
		Losing: !seal.Wins(), Ablations: abl,
	}}
}

func TestAssessSC15(t *testing.T) {
	win := delta(-15, -12, 3)      // both intervals below zero
	lose := delta(+8, +5, 3)       // both above
	unsure := delta(-4, -3, 5)     // straddles zero
	plusGood := delta(-20, -15, 3) // at least 10% better by the intervals
	plusMeh := delta(-12, -11, 3)  // 10% by the estimates, not the intervals
	plusBad := delta(+1, +1, 2)    // more than 2% worse by the upper end
	schedulers := []string{"basecc1", "basecc2", "basecc4", "basecc8", "seal", "seal+"}
	cases := []struct {
		name string
		rows []SweepRow
		// verdicts of the three criteria, then of the two sensitivities
		want []string
		// details must mention
		detail []string
	}{
		{
			name: "SEAL and seal+ win everywhere the paper's ranking holds",
			rows: []SweepRow{row("45", true, true, win, plusGood, nil), row("60", true, true, win, plusGood, nil), row("25", true, true, lose, plusGood, nil)},
			want: []string{Met, Met, Met, Met, Met}, detail: []string{"SEAL wins in 2 of 2 rows", "3 of 3 rows by the intervals"},
		},
		{
			name: "a losing row explained by an ablation under which SEAL wins",
			rows: []SweepRow{row("45", true, true, lose, plusGood, map[string]PairedDelta{"seal[pf=off]": win, "seal[cc=literal]": lose})},
			want: []string{Met, Met, Met, Met, Met}, detail: []string{"1 turn into wins", "seal[pf=off]"},
		},
		{
			name: "an unsure row that no ablation turns into a win",
			rows: []SweepRow{row("60", true, true, unsure, plusGood, map[string]PairedDelta{"seal[pf=off]": delta(-6, -5, 5), "seal[cycle=0.1]": unsure})},
			want: []string{NotMet, Met, Met, NotMet, Met}, detail: []string{"largest mover seal[pf=off], 2.0 points"},
		},
		{
			name: "rows at 45% and 60% ranking otherwise are not judged; seal+ 2% still is",
			rows: []SweepRow{row("45", false, false, lose, plusBad, nil), row("25", true, true, win, plusGood, nil)},
			want: []string{NotJudged, NotMet, NotJudged, NotJudged, NotJudged}, detail: []string{"no row at 45% or 60%", "1 of 2 rows by the intervals, 2 of 2 by the estimates"},
		},
		{
			name: "ranking by slowdown alone admits a row the strict ranking does not",
			rows: []SweepRow{row("45", false, true, win, plusMeh, nil)},
			want: []string{NotJudged, Met, NotJudged, Met, NotMet}, detail: []string{"0 of 1 rows by the intervals, 1 of 1 by the estimates"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Sweep{Schedulers: schedulers, Rows: c.rows}
			got := append(AssessSC15(s), SensitivitySC15(s)...)
			var all []string
			for i, cr := range got {
				all = append(all, cr.Detail)
				if cr.Verdict != c.want[i] {
					t.Errorf("%s: %s (%s), want %s", cr.Name, cr.Verdict, cr.Detail, c.want[i])
				}
			}
			joined := strings.Join(all, " | ")
			for _, d := range c.detail {
				if !strings.Contains(joined, d) {
					t.Errorf("details %q do not mention %q", joined, d)
				}
			}
		})
	}
	// Without seal and seal+ there is nothing to judge.
	for _, cr := range AssessSC15(&Sweep{Schedulers: []string{"basecc2"}, Rows: []SweepRow{row("45", true, true, win, plusGood, nil)}}) {
		if cr.Verdict != NotJudged {
			t.Errorf("%s: %s without seal and seal+", cr.Name, cr.Verdict)
		}
	}
}

func TestAssessSTEAL(t *testing.T) {
	cases := []struct {
		name   string
		traces []StealInterval
		want   string
		detail string
	}{
		{"below zero on every trace", []StealInterval{{Trace: "25", VsSEAL1: ivAt(-50, 5), VsBaseVary: ivAt(-90, 2)}, {Trace: "60", VsSEAL1: ivAt(-10, 6), VsBaseVary: ivAt(-80, 5)}}, Met, "60: vs SEAL1 -10.0%"},
		{"one interval reaches zero", []StealInterval{{Trace: "25", VsSEAL1: ivAt(-50, 5), VsBaseVary: ivAt(-90, 2)}, {Trace: "60-hv", VsSEAL1: ivAt(-3, 5), VsBaseVary: ivAt(-80, 5)}}, NotMet, "not below zero on trace 60-hv"},
		{"nothing run", nil, NotJudged, "no trace"},
	}
	for _, c := range cases {
		got := AssessSTEAL(&StealSeeds{Traces: c.traces})
		if got.Verdict != c.want || !strings.Contains(got.Detail, c.detail) {
			t.Errorf("%s: %s (%s), want %s mentioning %q", c.name, got.Verdict, got.Detail, c.want, c.detail)
		}
	}
}
