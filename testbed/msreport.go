package testbed

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluice-dtn/sluice/multisrc"
	"github.com/sluice-dtn/sluice/sim"
)

// MultiIntervals are bootstrap intervals of an evaluation's figures over
// its run groups, and the acceptance criteria judged on them. Groups are
// resampled whole, so figures of two policies stay paired by the stretch
// of the links their runs met (with SameLinks the same stretch).
type MultiIntervals struct {
	Level     float64                 `json:"level"`
	Resamples int                     `json:"resamples"`
	Groups    int                     `json:"groups"` // groups with a run of every policy, the ones used
	Mean      map[string]sim.Interval `json:"mean_s"`
	SD        map[string]sim.Interval `json:"sd_s"`
	// SDDiff[p] is TCS's SD minus p's (s); MeanRel[p] is TCS's mean over
	// p's, minus 1.
	SDDiff   map[string]sim.Interval `json:"sd_diff_tcs_minus"`
	MeanRel  map[string]sim.Interval `json:"mean_rel_tcs_over"`
	Criteria []Criterion             `json:"criteria"`
	// SamePlan measures how well a group's runs met the same conditions:
	// over every pair of runs in a group that moved the very same split
	// (static policies that planned alike), how far their times differ.
	SamePlan SamePlan `json:"same_plan"`
}

// SamePlan is the spread of times between runs of a group with identical
// plans: what the emulation and the machine add to a policy's time on
// the same stretch of the links, the floor under any difference between
// policies.
type SamePlan struct {
	Pairs int `json:"pairs"`
	// MedianDev and MaxDev are the median and largest of the slower
	// run's time over the faster's, minus 1;
	// Over10 counts pairs more than 10% apart.
	MedianDev float64 `json:"median_dev"`
	MaxDev    float64 `json:"max_dev"`
	Over10    int     `json:"over_10pct"`
}

// staticPolicies move exactly the split they planned (tcs-dynamic steals
// work, so its plan is not what it moved).
var staticPolicies = []string{"bos", "eas", "ms", "ntss", "tcs", "tcs-minus"}

// samePlan computes SamePlan over the groups' runs.
func samePlan(runs []MultiRun) SamePlan {
	byGroup := map[int][]MultiRun{}
	for _, x := range runs {
		if slices.Contains(staticPolicies, x.Policy) && x.Seconds > 0 {
			byGroup[x.Group] = append(byGroup[x.Group], x)
		}
	}
	same := func(a, b MultiRun) bool {
		if len(a.Links) != len(b.Links) {
			return false
		}
		for i := range a.Links {
			if a.Links[i].Planned != b.Links[i].Planned {
				return false
			}
		}
		return true
	}
	var devs []float64
	for _, rs := range byGroup {
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				if same(rs[i], rs[j]) {
					devs = append(devs, math.Max(rs[i].Seconds, rs[j].Seconds)/math.Min(rs[i].Seconds, rs[j].Seconds)-1)
				}
			}
		}
	}
	r := SamePlan{Pairs: len(devs)}
	if len(devs) == 0 {
		return r
	}
	slices.Sort(devs)
	r.MedianDev, r.MaxDev = devs[len(devs)/2], devs[len(devs)-1]
	if len(devs)%2 == 0 {
		r.MedianDev = (devs[len(devs)/2-1] + devs[len(devs)/2]) / 2
	}
	for _, d := range devs {
		if d > 0.1 {
			r.Over10++
		}
	}
	return r
}

// Criterion is one acceptance criterion on one configuration.
type Criterion struct {
	Name     string       `json:"name"`
	Rule     string       `json:"rule"` // what the interval must do
	Applies  bool         `json:"applies"`
	Met      bool         `json:"met"`
	Interval sim.Interval `json:"interval"`
	Why      string       `json:"why,omitempty"` // why it does not apply
}

// WithinMeanRel is how much slower than MS and NTSS TCS may be.
const WithinMeanRel = 0.05

// fastVariable reports whether cfg has a fast link (10 Mb/s or more) whose
// Table 1 SD is at least 0.3 of its mean: where the paper's argument says
// TCS's spread should beat BOS's.
func fastVariable(links []MultiLink) bool {
	for _, l := range links {
		if l.MeanMbps >= 10 && l.SDMbps >= 0.3*l.MeanMbps {
			return true
		}
	}
	return false
}

// ComputeIntervals fills r.Intervals: per policy the mean and SD of the
// transfer time, and against TCS the difference of SDs and the ratio of
// means, each with a percentile bootstrap interval at level over
// resamples resamples of the complete groups, then the criteria.
func (r *MultiResult) ComputeIntervals(resamples int, level float64, seed uint64) error {
	byGroup := map[int]map[string]float64{}
	for _, x := range r.Runs {
		if byGroup[x.Group] == nil {
			byGroup[x.Group] = map[string]float64{}
		}
		byGroup[x.Group][x.Policy] = x.Seconds
	}
	groups := make([]int, 0, len(byGroup))
	for g, ts := range byGroup {
		if len(ts) == len(r.Policies) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	times := map[string][]float64{}
	for _, p := range r.Policies {
		for _, g := range groups {
			times[p] = append(times[p], byGroup[g][p])
		}
	}
	iv := &MultiIntervals{Level: level, Resamples: resamples, Groups: len(groups),
		Mean: map[string]sim.Interval{}, SD: map[string]sim.Interval{},
		SDDiff: map[string]sim.Interval{}, MeanRel: map[string]sim.Interval{}}
	meanOf := func(p string) func([]int) float64 {
		return func(idx []int) float64 { m, _ := multisrc.MeanSD(pick(times[p], idx)); return m }
	}
	sdOf := func(p string) func([]int) float64 {
		return func(idx []int) float64 { _, s := multisrc.MeanSD(pick(times[p], idx)); return s }
	}
	// The simulator's percentile bootstrap, the same seed for every
	// statistic: the same resamples of the groups.
	b := sim.Bootstrap{Resamples: resamples, Level: level, Seed: seed}
	boot := func(f func([]int) float64) (sim.Interval, error) {
		return sim.PercentileInterval(len(groups), f, b)
	}
	for _, p := range r.Policies {
		var err error
		if iv.Mean[p], err = boot(meanOf(p)); err != nil {
			return fmt.Errorf("%s %s mean: %w", r.Config, p, err)
		}
		if iv.SD[p], err = boot(sdOf(p)); err != nil {
			return fmt.Errorf("%s %s SD: %w", r.Config, p, err)
		}
		if p == "tcs" || times["tcs"] == nil {
			continue
		}
		if iv.SDDiff[p], err = boot(func(idx []int) float64 { return sdOf("tcs")(idx) - sdOf(p)(idx) }); err != nil {
			return fmt.Errorf("%s SD of tcs - %s: %w", r.Config, p, err)
		}
		if iv.MeanRel[p], err = boot(func(idx []int) float64 { return meanOf("tcs")(idx)/meanOf(p)(idx) - 1 }); err != nil {
			return fmt.Errorf("%s mean of tcs / %s: %w", r.Config, p, err)
		}
	}
	iv.Criteria = judge(iv, r.Links)
	iv.SamePlan = samePlan(r.Runs)
	r.Intervals = iv
	return nil
}

// pick returns xs at the indices idx (a resample of xs).
func pick(xs []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for i, j := range idx {
		out[i] = xs[j]
	}
	return out
}

// above reports whether the whole interval lies above x.
func above(iv sim.Interval, x float64) bool { return iv.Lo > x }

// judge states the criteria on the intervals: TCS's SD significantly below
// BOS's where a fast link is highly variable, and not significantly above
// NTSS's or MS's; TCS's mean significantly below BOS's and EAS's, and at
// most WithinMeanRel above MS's and NTSS's (the whole interval). A
// criterion whose policies were not run does not apply.
func judge(iv *MultiIntervals, links []MultiLink) []Criterion {
	var out []Criterion
	add := func(name, rule, against string, m map[string]sim.Interval, met func(sim.Interval) bool, why string) {
		c := Criterion{Name: name, Rule: rule, Why: why}
		x, ok := m[against]
		switch {
		case !ok:
			c.Why = "not run"
		case why == "":
			c.Applies, c.Interval, c.Met = true, x, met(x)
		default:
			c.Interval = x
		}
		out = append(out, c)
	}
	fv := ""
	if !fastVariable(links) {
		fv = "no fast link (>= 10 Mb/s) with SD >= 0.3 of its mean in Table 1"
	}
	below := func(x sim.Interval) bool { return x.Below(0) }
	notAbove := func(x sim.Interval) bool { return !above(x, 0) }
	within := func(x sim.Interval) bool { return x.Hi <= WithinMeanRel }
	add("TCS SD below BOS's", "SD(tcs) - SD(bos): interval below 0", "bos", iv.SDDiff, below, fv)
	add("TCS SD not above NTSS's", "SD(tcs) - SD(ntss): interval not above 0", "ntss", iv.SDDiff, notAbove, "")
	add("TCS SD not above MS's", "SD(tcs) - SD(ms): interval not above 0", "ms", iv.SDDiff, notAbove, "")
	add("TCS mean below BOS's", "mean(tcs)/mean(bos) - 1: interval below 0", "bos", iv.MeanRel, below, "")
	add("TCS mean below EAS's", "mean(tcs)/mean(eas) - 1: interval below 0", "eas", iv.MeanRel, below, "")
	add("TCS mean within 5% of MS's", "mean(tcs)/mean(ms) - 1: interval at most +5%", "ms", iv.MeanRel, within, "")
	add("TCS mean within 5% of NTSS's", "mean(tcs)/mean(ntss) - 1: interval at most +5%", "ntss", iv.MeanRel, within, "")
	return out
}
