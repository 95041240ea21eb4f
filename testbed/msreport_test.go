package testbed

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/copyjob"
)

// synthetic makes a result of n groups: each policy's time in a group is
// base·(1 + spread·z_g) + jitter, z_g the group's draw (the stretch of the
// links all its runs met), so policies share the groups' variation in
// proportion to their spread.
func synthetic(links []MultiLink, n int, pol map[string][2]float64) *MultiResult {
	rng := rand.New(rand.NewPCG(5, 5))
	r := &MultiResult{Config: "syn", Links: links}
	for p := range pol {
		r.Policies = append(r.Policies, p)
	}
	slices.Sort(r.Policies) // the same draws every time
	for g := range n {
		z := rng.NormFloat64()
		for _, p := range r.Policies {
			b := pol[p]
			r.Runs = append(r.Runs, MultiRun{Group: g, Policy: p, Seconds: b[0]*(1+b[1]*z) + 0.001*rng.NormFloat64()})
		}
	}
	return r
}

// TestComputeIntervals: the criteria are judged on the intervals as the
// acceptance states them: met, not met, not applicable where no fast link
// is highly variable, not run where a policy is missing.
func TestComputeIntervals(t *testing.T) {
	fig3, fig6 := MultiConfigs["fig3"].Links, MultiConfigs["fig6"].Links
	for _, c := range []struct {
		name  string
		links []MultiLink
		pol   map[string][2]float64 // policy: mean, relative spread with the groups
		want  map[string]string     // criterion: MET, NOT MET, n/a, not run
	}{
		{name: "TCS as the paper says", links: fig3,
			pol: map[string][2]float64{"bos": {1.5, 0.4}, "eas": {5, 0.1}, "ms": {1.02, 0.2}, "ntss": {1.01, 0.2}, "tcs": {1, 0.1}},
			want: map[string]string{"TCS SD below BOS's": "MET", "TCS SD not above NTSS's": "MET", "TCS SD not above MS's": "MET",
				"TCS mean below BOS's": "MET", "TCS mean below EAS's": "MET", "TCS mean within 5% of MS's": "MET", "TCS mean within 5% of NTSS's": "MET"}},
		{name: "TCS steadier than nothing, slower than MS", links: fig3,
			pol: map[string][2]float64{"bos": {0.9, 0.1}, "eas": {5, 0.1}, "ms": {0.9, 0.1}, "ntss": {1, 0.1}, "tcs": {1, 0.4}},
			want: map[string]string{"TCS SD below BOS's": "NOT MET", "TCS SD not above NTSS's": "NOT MET", "TCS SD not above MS's": "NOT MET",
				"TCS mean below BOS's": "NOT MET", "TCS mean below EAS's": "MET", "TCS mean within 5% of MS's": "NOT MET", "TCS mean within 5% of NTSS's": "MET"}},
		{name: "no fast variable link", links: fig6,
			pol:  map[string][2]float64{"bos": {1.5, 0.4}, "eas": {5, 0.1}, "ms": {1, 0.1}, "ntss": {1, 0.1}, "tcs": {1, 0.1}},
			want: map[string]string{"TCS SD below BOS's": "n/a", "TCS mean below BOS's": "MET"}},
		{name: "EAS and TCS only", links: fig6,
			pol:  map[string][2]float64{"eas": {5, 0.02}, "tcs": {4, 0.01}},
			want: map[string]string{"TCS mean below EAS's": "MET", "TCS SD not above MS's": "not run", "TCS mean within 5% of NTSS's": "not run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := synthetic(c.links, 30, c.pol)
			if err := r.ComputeIntervals(2000, 0.9, 1); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, cr := range r.Intervals.Criteria {
				v := "MET"
				switch {
				case cr.Why == "not run":
					v = "not run"
				case !cr.Applies:
					v = "n/a"
				case !cr.Met:
					v = "NOT MET"
				}
				got[cr.Name] = v
			}
			for k, w := range c.want {
				if got[k] != w {
					t.Errorf("%s: %s, want %s (intervals %+v)", k, got[k], w, r.Intervals)
				}
			}
			if r.Intervals.Groups != 30 {
				t.Errorf("%d groups used", r.Intervals.Groups)
			}
			for _, p := range r.Policies {
				m, sd := r.Intervals.Mean[p], r.Intervals.SD[p]
				if !(m.Lo <= m.Est && m.Est <= m.Hi && sd.Lo <= sd.Est && sd.Est <= sd.Hi+1e-12) {
					t.Errorf("%s: mean %+v SD %+v", p, m, sd)
				}
			}
		})
	}
}

// TestComputeIntervalsGroups: a group without a run of every policy is
// left out (its pair is missing), and too few groups is an error, not an
// interval.
func TestComputeIntervalsGroups(t *testing.T) {
	r := synthetic(MultiConfigs["fig4"].Links, 10, map[string][2]float64{"eas": {5, 0.02}, "tcs": {1, 0.1}})
	r.Runs = append(r.Runs, MultiRun{Group: 10, Policy: "tcs", Seconds: 100})
	if err := r.ComputeIntervals(500, 0.9, 1); err != nil {
		t.Fatal(err)
	}
	if r.Intervals.Groups != 10 || r.Intervals.Mean["tcs"].Hi > 2 {
		t.Errorf("incomplete group used: %d groups, tcs mean %+v", r.Intervals.Groups, r.Intervals.Mean["tcs"])
	}
	one := synthetic(MultiConfigs["fig4"].Links, 1, map[string][2]float64{"eas": {5, 0.02}, "tcs": {1, 0.1}})
	if err := one.ComputeIntervals(500, 0.9, 1); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("one group: %v", err)
	}
}

// TestSamePlan: only runs of one group that moved the very same split are
// compared (tcs-dynamic's plan is not what it moved), and the spread of
// their times is summarised.
func TestSamePlan(t *testing.T) {
	plan := func(bytes ...int64) []copyjob.LinkPlan {
		var ls []copyjob.LinkPlan
		for _, b := range bytes {
			ls = append(ls, copyjob.LinkPlan{Planned: b})
		}
		return ls
	}
	runs := []MultiRun{
		{Group: 0, Policy: "ntss", Seconds: 1.0, Links: plan(1, 9)},
		{Group: 0, Policy: "tcs", Seconds: 1.5, Links: plan(1, 9)},       // same split: 50% apart
		{Group: 0, Policy: "ms", Seconds: 3, Links: plan(2, 8)},          // another split
		{Group: 0, Policy: "tcs-dynamic", Seconds: 9, Links: plan(1, 9)}, // steals: not compared
		{Group: 1, Policy: "ntss", Seconds: 2.0, Links: plan(1, 9)},
		{Group: 1, Policy: "tcs", Seconds: 2.02, Links: plan(1, 9)},       // 1% apart
		{Group: 1, Policy: "tcs-minus", Seconds: 1.98, Links: plan(1, 9)}, // 1% and 2% apart
		{Group: 2, Policy: "ms", Seconds: 5, Links: plan(1, 9)},           // alone in its group
	}
	got := samePlan(runs)
	if got.Pairs != 4 || got.Over10 != 1 || math.Abs(got.MaxDev-0.5) > 1e-9 || math.Abs(got.MedianDev-(0.0101+0.0202)/2) > 1e-3 {
		t.Errorf("same-plan pairs %+v", got)
	}
	if none := samePlan(runs[2:4]); none.Pairs != 0 || none.MaxDev != 0 {
		t.Errorf("no identical pairs: %+v", none)
	}
}
