package testbed

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/sim"
)

// TestLiveDefaultsMatchEngine: the live view Predict uses states the
// engine's constants (the server's 0.5 s start-up cost is a literal in
// server/world.go's snapshot, which a test here cannot read).
func TestLiveDefaultsMatchEngine(t *testing.T) {
	l := sim.LiveDefaults()
	if l.SubWrite != engine.DefaultSubWrite {
		t.Errorf("sim.LiveDefaults().SubWrite = %d, engine.DefaultSubWrite = %d", l.SubWrite, engine.DefaultSubWrite)
	}
	if l.Checkpoint != engine.DefaultCheckpointEvery.Seconds() {
		t.Errorf("sim.LiveDefaults().Checkpoint = %v, engine.DefaultCheckpointEvery = %v", l.Checkpoint, engine.DefaultCheckpointEvery)
	}
}

// measuredFile is the part of a `sluice testbed compare --json` file this
// test reads.
type measuredFile struct {
	Profile string `json:"profile"`
	Trace   string `json:"trace"`
	Runs    []struct {
		Scheduler string      `json:"scheduler"`
		Rep       int         `json:"rep"`
		Seed      *int64      `json:"seed"` // runs recorded before it was written used 1 + Rep
		Measured  *sim.Result `json:"measured"`
		// StartupCost is what the server told its scheduler; runs
		// recorded before it was written told it the server default.
		StartupCost *float64 `json:"startup_cost_seconds"`
	} `json:"runs"`
}

// acceptance is the testbed's bound on the simulator's relative error in
// average slowdown and turnaround.
const acceptance = 0.20

// knownGaps are the runs (file:scheduler:seed) where the simulator is
// known to miss the bound, and why (docs/results/testbed/README.md).
var knownGaps = map[string]string{
	"compare-60.json:basecc4:1":                 "a static baseline, so not the scheduler's view but the physical model (contention with many connections)",
	"compare-60-startup.json:seal+:1":           "seal+ measured better than simulated at 60% (slowdown +23%, turnaround +7%); probably the physical model: the simulator charges every start the start-up that the emulation charges only per new connection, and seal+ starts and preempts most",
	"compare-45-startup-seeds23.json:basecc2:2": "a static baseline measured slower than simulated (slowdown -22%, turnaround -17%): the physical model, as basecc4 at 60%",
	"compare-60-startup-seeds23.json:seal:2":    "seed 2 at 60% is the most loaded of the runs (basecc2's slowdown 18.9): SEAL's slowdown simulated 20.4% above the measured",
	// The three-repetition runs of every baseline (second session,
	// 2026-11-22): 27 of 30 within the bound, and the same two
	// patterns as above.
	"compare-45-3reps.json:basecc2:2":       "the same run as compare-45-startup-seeds23.json's basecc2 seed 2, measured again: slowdown -24%, turnaround -19%",
	"compare-60-3reps.json:basecc4:2":       "seed 2 at 60%, the most loaded run (averages 8-29): a static baseline measured faster than simulated (+27% / +21%), the physical model's contention, as compare-60.json's basecc4",
	"compare-60-3reps.json:seal:2":          "seed 2 at 60%, the most loaded run: SEAL's slowdown simulated 25% above the measured (turnaround +12%), as compare-60-startup-seeds23.json's",
	"steal-45-startup-seeds23.json:steal:2": "STEAL with batch tasks, seed 2: interactive slowdown measured 3.94 against 2.66 and 2.22 for seeds 1 and 3 (simulated -38% / -31%); SEAL1 on the same seed is within 10%",
}

// TestPredictionsAgainstMeasured recomputes Predict for every committed run
// on real bytes (docs/results/testbed/*.json, seed 1 + repetition, as
// `sluice testbed compare` drew them) and holds the simulator to that
// bound. With -v it prints the table of docs/results/testbed/README.md. A
// failure means the simulator, a scheduler or the measurements changed:
// re-validate, and update the README.
func TestPredictionsAgainstMeasured(t *testing.T) {
	files, err := filepath.Glob("../docs/results/testbed/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no committed measurements: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m measuredFile
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		tb, err := Load(m.Profile)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: profile %s, trace %s", filepath.Base(f), m.Profile, m.Trace)
		t.Logf("  %-8s %9s %9s %6s %9s %9s %6s %9s", "", "slowdown", "simulated", "err", "turnaround", "simulated", "err", "preempts")
		type row struct {
			name         string
			msd, mtt     float64
			psd, ptt     float64
			mpre, ppre   int
			batch, pbtch float64
		}
		var rows []row
		for _, r := range m.Runs {
			seed := 1 + int64(r.Rep)
			if r.Seed != nil {
				seed = *r.Seed
			}
			tr, err := Trace(tb, m.Trace, seed)
			if err != nil {
				t.Fatal(err)
			}
			told := server.DefaultStartupCost
			if r.StartupCost != nil {
				told = time.Duration(*r.StartupCost * float64(time.Second))
			}
			p, err := PredictTold(tb, tr, r.Scheduler, told)
			if err != nil {
				t.Fatal(err)
			}
			mi, pi := r.Measured.Interactive, p.Interactive
			rows = append(rows, row{r.Scheduler, mi.AvgSlowdown, mi.AvgTurnaround, pi.AvgSlowdown, pi.AvgTurnaround, r.Measured.Preemptions, p.Preemptions, r.Measured.Batch.AvgTurnaround, p.Batch.AvgTurnaround})
			esd, ett := pi.AvgSlowdown/mi.AvgSlowdown-1, pi.AvgTurnaround/mi.AvgTurnaround-1
			line := fmt.Sprintf("  %-8s %9.3f %9.3f %+5.0f%% %9.3f %9.3f %+5.0f%% %4d/%-4d", r.Scheduler, mi.AvgSlowdown, pi.AvgSlowdown, 100*esd, mi.AvgTurnaround, pi.AvgTurnaround, 100*ett, r.Measured.Preemptions, p.Preemptions)
			if r.Measured.Batch.N > 0 {
				line += fmt.Sprintf("  batch turnaround %.1f, simulated %.1f", r.Measured.Batch.AvgTurnaround, p.Batch.AvgTurnaround)
			}
			t.Log(line)
			key := fmt.Sprintf("%s:%s:%d", filepath.Base(f), r.Scheduler, seed)
			off := math.Abs(esd) > acceptance || math.Abs(ett) > acceptance
			switch why, known := knownGaps[key]; {
			case off && known:
				t.Logf("    known gap: %s", why)
			case off:
				t.Errorf("%s, trace %s, %s: simulated slowdown %+.0f%%, turnaround %+.0f%% off the measured (bound %.0f%%)", filepath.Base(f), m.Trace, r.Scheduler, 100*esd, 100*ett, 100*acceptance)
			case known:
				t.Logf("    the known gap (%s) closed: remove it from knownGaps", key)
			}
		}
		for _, by := range []struct {
			name      string
			meas, sim func(row) float64
		}{{"turnaround", func(r row) float64 { return r.mtt }, func(r row) float64 { return r.ptt }},
			{"slowdown", func(r row) float64 { return r.msd }, func(r row) float64 { return r.psd }}} {
			order := func(v func(row) float64) string {
				rs := append([]row(nil), rows...)
				sort.SliceStable(rs, func(i, j int) bool { return v(rs[i]) < v(rs[j]) })
				var names []string
				for _, r := range rs {
					names = append(names, r.name)
				}
				return strings.Join(names, " < ")
			}
			t.Logf("  by %s: measured %s; simulated %s", by.name, order(by.meas), order(by.sim))
		}
	}
}
