package sim

import (
	"fmt"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/trace"
)

// Fig2Outcome is one scheduler's run of the Figure 2 scenario.
type Fig2Outcome struct {
	Turnaround  []float64 `json:"turnaround"`
	PreemptedAt *float64  `json:"preempted_at,omitempty"`
}

// Fig2Result is `sluice sim fig2`: SEAL and the start-on-arrival baseline.
type Fig2Result struct {
	SEAL     Fig2Outcome `json:"seal"`
	Baseline Fig2Outcome `json:"baseline"`
}

// Fig2Trace is the scenario of SC'15 Figure 2: T1 (3 GB) at t=0, T2 (3 GB)
// at t=1, T3 (2 GB) at t=2, from src to dst.
func Fig2Trace() *trace.Trace {
	return &trace.Trace{Name: "fig2", Transfers: []trace.Transfer{
		{ID: 1, Arrival: 0, Src: "src", Dst: "dst", Size: 3e9},
		{ID: 2, Arrival: 1, Src: "src", Dst: "dst", Size: 3e9},
		{ID: 3, Arrival: 2, Src: "src", Dst: "dst", Size: 2e9},
	}}
}

// Fig2 runs the Figure 2 scenario under the idealised model the figure
// implies: 0.5 s cycles, no start-up cost, instantaneous observed rates,
// preemption losing nothing (the figure's T1 keeps all it moved), a task alone reaching 4 of the endpoints' 5 Gb/s, running tasks sharing
// equally, a waiting task's TT_load using the share it would get, pf = 2.
// The idealised model has no concurrency response, so saturation test (b)
// is off.
func Fig2() (*Fig2Result, error) {
	tb, err := LoadTestbed("fig2")
	if err != nil {
		return nil, err
	}
	opt := Options{NoStartup: true, ObsWindow: -1, Checkpoint: -1}
	var out Fig2Result
	for _, run := range []struct {
		name string
		dst  *Fig2Outcome
	}{{"seal", &out.SEAL}, {"basecc1", &out.Baseline}} {
		s, err := sched.New(run.name, sched.Options{PF: 2, NoConcurrencyProbe: true})
		if err != nil {
			return nil, err
		}
		res, err := Run(tb, Fig2Trace(), s, opt)
		if err != nil {
			return nil, fmt.Errorf("fig2 %s: %w", run.name, err)
		}
		for _, t := range res.Tasks {
			run.dst.Turnaround = append(run.dst.Turnaround, t.Turnaround)
		}
		if len(res.PreemptLog) > 0 {
			at := res.PreemptLog[0].Time
			run.dst.PreemptedAt = &at
		}
	}
	return &out, nil
}
