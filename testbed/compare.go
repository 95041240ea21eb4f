package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sluice-dtn/sluice/sim"
)

// ComparedRun is one run of one scheduler in a comparison (`sluice
// testbed compare`): its measured figures, and with --predict the
// simulator's.
type ComparedRun struct {
	Scheduler string      `json:"scheduler"`
	Rep       int         `json:"rep"`
	Seed      int64       `json:"seed"` // the trace's seed: --seed + rep
	Measured  *sim.Result `json:"measured"`
	Verified  int         `json:"verified"`
	Files     int         `json:"files"`
	Seconds   float64     `json:"seconds"`
	// StartupCost is the start-up cost the server told its scheduler.
	StartupCost float64     `json:"startup_cost_seconds"`
	Predicted   *sim.Result `json:"predicted,omitempty"`
	// Endpoints is each endpoint's observed throughput over the run.
	Endpoints []EndpointSeries `json:"endpoint_series,omitempty"`
	// Network is what the emulated WAN carried (runs with --net).
	Network *NetUse `json:"network,omitempty"`
}

// Repredict runs the simulator again for every run of c with tb's model:
// each run's trace is generated again from c's trace name and the run's
// seed, and must have as many transfers as the run replayed (a model
// whose source capacity differs generates another trace, and is refused).
func Repredict(tb *sim.Testbed, c *Comparison, names []string) error {
	for _, r := range c.Runs {
		tr, err := Trace(tb, c.Trace, r.Seed)
		if err != nil {
			return err
		}
		if len(tr.Transfers) != r.Files {
			return fmt.Errorf("trace %s seed %d has %d transfers under %s, the run replayed %d: not the same trace (does the model change the source's capacity?)", c.Trace, r.Seed, len(tr.Transfers), tb.Name, r.Files)
		}
		if r.Predicted, err = Predict(tb, tr, r.Scheduler); err != nil {
			return err
		}
	}
	c.Median, c.Subject, c.Best, c.SameRanking = nil, "", "", nil
	c.TurnaroundPct, c.SlowdownPct = 0, 0
	c.Summarise(names)
	return nil
}

// RelErr is the simulator's error relative to the measurement, in percent.
func RelErr(predicted, measured float64) float64 {
	if measured == 0 {
		return 0
	}
	return 100 * (predicted - measured) / measured
}

// LoadComparisons reads saved comparisons of one profile and trace (their
// runs together, as repetitions) and returns them with the schedulers in
// the order they first appear.
func LoadComparisons(files []string) (*Comparison, []string, error) {
	var all *Comparison
	var names []string
	seen := map[string]bool{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		var c Comparison
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case all == nil:
			all = &c
		case c.Profile != all.Profile || c.Trace != all.Trace:
			return nil, nil, fmt.Errorf("%s: %s on trace %s, the others are %s on %s: one comparison at a time", name, c.Profile, c.Trace, all.Profile, all.Trace)
		default:
			all.Runs = append(all.Runs, c.Runs...)
		}
		for _, r := range c.Runs {
			if r.Measured == nil {
				return nil, nil, fmt.Errorf("%s: a run of %s has no measured result", name, r.Scheduler)
			}
			if !seen[r.Scheduler] {
				seen[r.Scheduler] = true
				names = append(names, r.Scheduler)
			}
		}
	}
	if all == nil || len(all.Runs) == 0 {
		return nil, nil, errors.New("no runs in the saved comparisons")
	}
	reps := map[string]int{}
	for _, r := range all.Runs {
		reps[r.Scheduler]++
	}
	all.Reps = 0
	for _, n := range reps {
		all.Reps = max(all.Reps, n)
	}
	// The saved summaries are of each file alone: summarise them together.
	all.Median, all.Subject, all.Best, all.SameRanking = nil, "", "", nil
	all.TurnaroundPct, all.SlowdownPct = 0, 0
	all.Summarise(names)
	return all, names, nil
}

// Comparison is a comparison on real bytes: every run, and per
// scheduler the medians over repetitions.
type Comparison struct {
	Profile string            `json:"profile"`
	Trace   string            `json:"trace"`
	Reps    int               `json:"reps"`
	Date    string            `json:"date"`
	Runs    []*ComparedRun    `json:"runs"`
	Median  []SchedulerMedian `json:"median"`
	// SubjectVsBest compares the first non-baseline scheduler with the
	// best baseline (lowest median average turnaround): % change,
	// negative is better.
	Subject       string  `json:"subject,omitempty"`
	Best          string  `json:"best_baseline,omitempty"`
	TurnaroundPct float64 `json:"turnaround_vs_best_pct,omitempty"`
	SlowdownPct   float64 `json:"slowdown_vs_best_pct,omitempty"`
	// SameRanking says whether the simulator ranks the schedulers (by
	// median average turnaround) as the measurements do.
	SameRanking *bool `json:"same_ranking,omitempty"`
}

type SchedulerMedian struct {
	Scheduler     string   `json:"scheduler"`
	AvgSlowdown   float64  `json:"avg_slowdown"`
	AvgTurnaround float64  `json:"avg_turnaround"`
	SimSlowdown   *float64 `json:"sim_avg_slowdown,omitempty"`
	SimTurnaround *float64 `json:"sim_avg_turnaround,omitempty"`
	AllVerified   bool     `json:"all_verified"`
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (c *Comparison) Summarise(names []string) {
	for _, n := range names {
		var sd, ta, psd, pta []float64
		m := SchedulerMedian{Scheduler: n, AllVerified: true}
		for _, r := range c.Runs {
			if r.Scheduler != n {
				continue
			}
			sd = append(sd, r.Measured.Interactive.AvgSlowdown)
			ta = append(ta, r.Measured.Interactive.AvgTurnaround)
			m.AllVerified = m.AllVerified && r.Verified == r.Files
			if r.Predicted != nil {
				psd = append(psd, r.Predicted.Interactive.AvgSlowdown)
				pta = append(pta, r.Predicted.Interactive.AvgTurnaround)
			}
		}
		m.AvgSlowdown, m.AvgTurnaround = median(sd), median(ta)
		if len(psd) > 0 {
			a, b := median(psd), median(pta)
			m.SimSlowdown, m.SimTurnaround = &a, &b
		}
		c.Median = append(c.Median, m)
	}
	best := -1
	for i, m := range c.Median {
		if strings.HasPrefix(m.Scheduler, "base") && (best < 0 || m.AvgTurnaround < c.Median[best].AvgTurnaround) {
			best = i
		}
	}
	for _, m := range c.Median {
		if !strings.HasPrefix(m.Scheduler, "base") && best >= 0 {
			b := c.Median[best]
			c.Subject, c.Best = m.Scheduler, b.Scheduler
			c.TurnaroundPct = 100 * (m.AvgTurnaround - b.AvgTurnaround) / b.AvgTurnaround
			c.SlowdownPct = 100 * (m.AvgSlowdown - b.AvgSlowdown) / b.AvgSlowdown
			break
		}
	}
	if len(c.Median) > 1 && c.Median[0].SimTurnaround != nil {
		measured := append([]SchedulerMedian(nil), c.Median...)
		simulated := append([]SchedulerMedian(nil), c.Median...)
		sort.SliceStable(measured, func(i, j int) bool { return measured[i].AvgTurnaround < measured[j].AvgTurnaround })
		sort.SliceStable(simulated, func(i, j int) bool { return *simulated[i].SimTurnaround < *simulated[j].SimTurnaround })
		same := true
		for i := range measured {
			same = same && measured[i].Scheduler == simulated[i].Scheduler
		}
		c.SameRanking = &same
	}
}

func (c *Comparison) Print(out io.Writer) {
	fmt.Fprintf(out, "testbed %s, trace %s, %d repetition(s): medians of interactive averages\n", c.Profile, c.Trace, c.Reps)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scheduler\tavg slowdown\tavg turnaround s\tsim slowdown\terr\tsim turnaround s\terr\tverified\t")
	for _, m := range c.Median {
		fmt.Fprintf(w, "%s\t%.3f\t%.2f\t", m.Scheduler, m.AvgSlowdown, m.AvgTurnaround)
		if m.SimSlowdown != nil {
			fmt.Fprintf(w, "%.3f\t%+.0f%%\t%.2f\t%+.0f%%\t", *m.SimSlowdown, RelErr(*m.SimSlowdown, m.AvgSlowdown), *m.SimTurnaround, RelErr(*m.SimTurnaround, m.AvgTurnaround))
		} else {
			fmt.Fprint(w, "-\t-\t-\t-\t")
		}
		fmt.Fprintf(w, "%v\t\n", m.AllVerified)
	}
	w.Flush()
	if c.Subject != "" {
		fmt.Fprintf(out, "%s vs best baseline (%s): average turnaround %+.1f%%, slowdown %+.1f%%\n", c.Subject, c.Best, c.TurnaroundPct, c.SlowdownPct)
	}
	if c.SameRanking != nil {
		fmt.Fprintf(out, "simulator ranks the schedulers as measured: %v\n", *c.SameRanking)
	}
}
