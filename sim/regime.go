package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/sluice-dtn/sluice/sched"
)

// Verdicts of a Criterion.
const (
	Met       = "met"
	NotMet    = "not met"
	NotJudged = "not judged"
)

// Criterion is one acceptance criterion judged on results: its verdict
// (Met, NotMet or NotJudged when the results hold nothing it applies to)
// and, in words, what decided it.
type Criterion struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

// rowName names a row in a criterion's words.
func rowName(r SweepRow) string {
	return fmt.Sprintf("%s load %s", r.Cell, r.Trace)
}

// inPaperHighLoad reports whether a row is one of SC'15's 45 or 60% traces
// and its baselines rank there as in the paper (bySlowdown: judged on
// average slowdown alone).
func inPaperHighLoad(r SweepRow, bySlowdown bool) bool {
	if r.Paired == nil || PaperBest(r.Trace) != "basecc2" {
		return false
	}
	as := r.Paired.AsInPaper
	if bySlowdown {
		as = r.Paired.AsInPaperBySlowdown
	}
	return as != nil && *as
}

// Wins reports whether a change is an improvement in both average
// slowdown and average turnaround with both intervals below zero.
func (d PairedDelta) Wins() bool { return d.Slowdown.Below(0) && d.Turnaround.Below(0) }

// worse is the larger (worse) of the two changes' point estimates.
func (d PairedDelta) worse() float64 { return math.Max(d.Slowdown.Est, d.Turnaround.Est) }

// Explanation is, for a row where SEAL does not win, the ablations under
// which it does (both intervals below zero), and the ablation that
// improves its worse metric most.
func Explanation(r SweepRow) (wins []string, most string, by float64) {
	if r.Paired == nil {
		return nil, "", 0
	}
	seal, ok := r.Paired.Vs["seal"]
	if !ok {
		return nil, "", 0
	}
	for _, name := range slices.Sorted(maps.Keys(r.Paired.Ablations)) {
		d := r.Paired.Ablations[name]
		if d.Wins() {
			wins = append(wins, name)
		}
		if gain := seal.worse() - d.worse(); most == "" || gain > by {
			most, by = name, gain
		}
	}
	return wins, most, by
}

// AssessSC15 judges a regime map (a sweep with seal, seal+ and the
// baselines BaseCC1, BaseCC2, BaseCC4 and BaseCC8) by the criteria for
// SC'15 in the simulator:
//
//   - SEAL: in every row at 45% and 60% load whose baselines rank as in
//     the paper, SEAL improves on the best baseline in average slowdown
//     and average turnaround with 90% intervals below zero; a row where it
//     does not is explained by an ablation under which it does.
//   - seal+ is never worse than the best baseline by more than 2%, in any
//     row: both intervals' upper ends at most +2%.
//   - seal+ is better by at least 10% at 45% and 60% in the rows ranking
//     as in the paper: both intervals' upper ends at most -10%.
//
// A claim about a margin is judged on the interval, not the estimate;
// the details also give how many rows the estimates alone would pass.
func AssessSC15(s *Sweep) []Criterion {
	hi := highLoadRows(s, false)
	return []Criterion{
		assessSEAL(s, hi, "SEAL better than the best baseline at 45% and 60% where the baselines rank as in the paper (90% intervals below zero), losing rows explained by an ablation"),
		assessPlusNoWorse(s),
		assessPlusBetter(s, hi, "seal+ at least 10% better than the best baseline at 45% and 60% where the baselines rank as in the paper (upper ends of the 90% intervals at most -10%)"),
	}
}

// SensitivitySC15 judges the two criteria that depend on the paper's
// ranking again, on the rows whose baselines rank as in the paper by
// average slowdown alone (the metric SEAL minimises): not a criterion,
// but what the verdicts owe to the ranking's strictness.
func SensitivitySC15(s *Sweep) []Criterion {
	hi := highLoadRows(s, true)
	return []Criterion{
		assessSEAL(s, hi, "SEAL better than the best baseline at 45% and 60% where the baselines rank as in the paper by average slowdown alone (90% intervals below zero), losing rows explained by an ablation"),
		assessPlusBetter(s, hi, "seal+ at least 10% better than the best baseline at 45% and 60% where the baselines rank as in the paper by average slowdown alone (upper ends of the 90% intervals at most -10%)"),
	}
}

func highLoadRows(s *Sweep, bySlowdown bool) []SweepRow {
	var hi []SweepRow
	for _, r := range s.Rows {
		if inPaperHighLoad(r, bySlowdown) {
			hi = append(hi, r)
		}
	}
	return hi
}

func assessSEAL(s *Sweep, hi []SweepRow, name string) Criterion {
	c := Criterion{Name: name}
	switch {
	case !has(s, "seal"):
		c.Verdict, c.Detail = NotJudged, "seal was not run"
		return c
	case len(hi) == 0:
		c.Verdict, c.Detail = NotJudged, "no row at 45% or 60% load ranks the baselines as in the paper"
		return c
	}
	var won int
	var explained, unexplained []string
	for _, r := range hi {
		if r.Paired.Vs["seal"].Wins() {
			won++
			continue
		}
		wins, most, by := Explanation(r)
		switch {
		case len(wins) > 0:
			explained = append(explained, fmt.Sprintf("%s (%s)", rowName(r), strings.Join(wins, ", ")))
		case most != "":
			unexplained = append(unexplained, fmt.Sprintf("%s (largest mover %s, %.1f points)", rowName(r), most, by))
		default:
			unexplained = append(unexplained, rowName(r)+" (no ablation run)")
		}
	}
	c.Verdict = Met
	if len(unexplained) > 0 {
		c.Verdict = NotMet
	}
	c.Detail = fmt.Sprintf("SEAL wins in %d of %d rows; of the %d others, %d turn into wins under an ablation and %d do not",
		won, len(hi), len(hi)-won, len(explained), len(unexplained))
	if len(explained) > 0 {
		c.Detail += ". Explained: " + strings.Join(explained, "; ")
	}
	if len(unexplained) > 0 {
		c.Detail += ". Not explained by any ablation run: " + strings.Join(unexplained, "; ")
	}
	return c
}

func assessPlusNoWorse(s *Sweep) Criterion {
	c := Criterion{Name: "seal+ never more than 2% worse than the best baseline, in any row (upper ends of the 90% intervals at most +2%)"}
	if !has(s, "seal+") {
		c.Verdict, c.Detail = NotJudged, "seal+ was not run"
		return c
	}
	n, byIv, byEst := 0, 0, 0
	var worst SweepRow
	worstEst := math.Inf(-1)
	for _, r := range s.Rows {
		if r.Paired == nil {
			continue
		}
		d := r.Paired.Vs["seal+"]
		n++
		if d.Slowdown.Hi <= 2 && d.Turnaround.Hi <= 2 {
			byIv++
		}
		if d.worse() <= 2 {
			byEst++
		}
		if d.worse() > worstEst {
			worst, worstEst = r, d.worse()
		}
	}
	if n == 0 {
		c.Verdict, c.Detail = NotJudged, "no row has intervals (one seed)"
		return c
	}
	c.Verdict = Met
	if byIv < n {
		c.Verdict = NotMet
	}
	d := worst.Paired.Vs["seal+"]
	c.Detail = fmt.Sprintf("%d of %d rows by the intervals, %d of %d by the estimates; worst row %s: slowdown %s, turnaround %s",
		byIv, n, byEst, n, rowName(worst), d.Slowdown, d.Turnaround)
	return c
}

func assessPlusBetter(s *Sweep, hi []SweepRow, name string) Criterion {
	c := Criterion{Name: name}
	switch {
	case !has(s, "seal+"):
		c.Verdict, c.Detail = NotJudged, "seal+ was not run"
		return c
	case len(hi) == 0:
		c.Verdict, c.Detail = NotJudged, "no row at 45% or 60% load ranks the baselines as in the paper"
		return c
	}
	byIv, byEst := 0, 0
	var least SweepRow
	leastEst := math.Inf(-1)
	for _, r := range hi {
		d := r.Paired.Vs["seal+"]
		if d.Slowdown.Hi <= -10 && d.Turnaround.Hi <= -10 {
			byIv++
		}
		if d.worse() <= -10 {
			byEst++
		}
		if d.worse() > leastEst {
			least, leastEst = r, d.worse()
		}
	}
	c.Verdict = Met
	if byIv < len(hi) {
		c.Verdict = NotMet
	}
	d := least.Paired.Vs["seal+"]
	c.Detail = fmt.Sprintf("%d of %d rows by the intervals, %d of %d by the estimates; least gain in %s: slowdown %s, turnaround %s",
		byIv, len(hi), byEst, len(hi), rowName(least), d.Slowdown, d.Turnaround)
	return c
}

func has(s *Sweep, name string) bool { return slices.Contains(s.Schedulers, name) }

// StealInterval is one trace of StealSeeds: means over seeds, and STEAL's
// change in average interactive slowdown against SEAL1 and BaseVary.
type StealInterval struct {
	Trace string `json:"trace"`
	// Slowdown and SpareUsed are means over seeds of the average
	// interactive slowdown and of the fraction of spare bandwidth batch
	// tasks used, per scheme (steal, seal1, basevary).
	Slowdown   map[string]float64 `json:"slowdown"`
	SpareUsed  map[string]float64 `json:"spare_used"`
	VsSEAL1    Interval           `json:"vs_seal1"`
	VsBaseVary Interval           `json:"vs_basevary"`
}

// StealSeeds is the STEAL experiment of SC'15 §6.4 (Steal) on several seeds.
type StealSeeds struct {
	Testbed   string          `json:"testbed"`
	Seeds     []int64         `json:"seeds"`
	Lambda    float64         `json:"lambda"`
	Bootstrap Bootstrap       `json:"bootstrap"`
	Traces    []StealInterval `json:"traces"`
}

// RunStealSeeds runs Steal with one λ on every seed of every trace and
// bootstraps STEAL's change in average interactive slowdown against SEAL1
// and against BaseVary, paired by seed.
func RunStealSeeds(tb *Testbed, traces []string, seeds []int64, lambda float64, so sched.Options, opt Options, boot Bootstrap) (*StealSeeds, error) {
	if len(seeds) < 2 {
		return nil, fmt.Errorf("steal: intervals need at least 2 seeds")
	}
	boot = boot.withDefaults()
	if err := boot.validate(); err != nil {
		return nil, fmt.Errorf("steal: %w", err)
	}
	steal := fmt.Sprintf("steal/λ=%g", lambda)
	out := &StealSeeds{Testbed: tb.Name, Seeds: seeds, Lambda: lambda, Bootstrap: boot}
	for _, name := range traces {
		per := map[string][]float64{}
		spare := map[string]float64{}
		for _, seed := range seeds {
			res, err := Steal(tb, []TraceSpec{{Name: name, Seed: seed}}, []float64{lambda}, so, opt)
			if err != nil {
				return nil, err
			}
			st := res.Traces[0]
			if st.Note != "" {
				return nil, fmt.Errorf("steal: trace %s, seed %d: %s", name, seed, st.Note)
			}
			for _, p := range st.Points {
				k := p.Scheme
				if k == steal {
					k = "steal"
				}
				per[k] = append(per[k], p.AvgSlowdownInt)
				spare[k] += p.SpareUsed / float64(len(seeds))
			}
		}
		si := StealInterval{Trace: name, Slowdown: map[string]float64{}, SpareUsed: map[string]float64{}}
		for _, k := range []string{"steal", "seal1", "basevary"} {
			si.Slowdown[k] = meanFloat(per[k])
			si.SpareUsed[k] = spare[k]
		}
		var err error
		if si.VsSEAL1, _, err = PairedChange(per["steal"], [][]float64{per["seal1"]}, boot); err != nil {
			return nil, fmt.Errorf("steal: trace %s: %w", name, err)
		}
		if si.VsBaseVary, _, err = PairedChange(per["steal"], [][]float64{per["basevary"]}, boot); err != nil {
			return nil, fmt.Errorf("steal: trace %s: %w", name, err)
		}
		out.Traces = append(out.Traces, si)
	}
	return out, nil
}

func meanFloat(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// AssessSTEAL judges the STEAL criterion: STEAL's average interactive
// slowdown is lower than SEAL1's and BaseVary's on every trace, with 90%
// intervals below zero.
func AssessSTEAL(s *StealSeeds) Criterion {
	c := Criterion{Name: "STEAL's interactive slowdown lower than SEAL1's and BaseVary's on every trace (90% intervals below zero)"}
	if len(s.Traces) == 0 {
		c.Verdict, c.Detail = NotJudged, "no trace run"
		return c
	}
	var fails, parts []string
	for _, t := range s.Traces {
		parts = append(parts, fmt.Sprintf("%s: vs SEAL1 %s, vs BaseVary %s", t.Trace, t.VsSEAL1, t.VsBaseVary))
		if !t.VsSEAL1.Below(0) || !t.VsBaseVary.Below(0) {
			fails = append(fails, t.Trace)
		}
	}
	c.Verdict = Met
	if len(fails) > 0 {
		c.Verdict = NotMet
		parts = append(parts, "not below zero on trace "+strings.Join(fails, ", "))
	}
	c.Detail = strings.Join(parts, "; ")
	return c
}
