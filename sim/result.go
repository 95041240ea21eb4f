package sim

import (
	"math"

	"github.com/sluice-dtn/sluice/model"
)

// Bound is the interactive threshold of the bounded slowdown (SC'15 eq. 2).
const Bound = 1.0

// ClassNames names the SC'15 size classes (Table 2).
var ClassNames = [5]string{"0-1M", "1-10M", "10-100M", "100M-1G", "1-10G"}

// TaskResult is how one task fared.
type TaskResult struct {
	ID         int64   `json:"id"`
	Size       int64   `json:"size"`
	Batch      bool    `json:"batch,omitempty"`
	Arrival    float64 `json:"arrival"`
	Finish     float64 `json:"finish"`
	Wait       float64 `json:"wait"`
	Run        float64 `json:"run"`
	IdealTT    float64 `json:"ideal_tt"`
	Slowdown   float64 `json:"slowdown"`
	Turnaround float64 `json:"turnaround"`
	Preempted  int     `json:"preempted,omitempty"`
}

// Stats summarises slowdown and turnaround over a set of tasks.
type Stats struct {
	N             int     `json:"n"`
	AvgSlowdown   float64 `json:"avg_slowdown"`
	AvgTurnaround float64 `json:"avg_turnaround"`
	MaxSlowdown   float64 `json:"max_slowdown"`
	MaxTurnaround float64 `json:"max_turnaround"`
}

func (s *Stats) add(r *TaskResult) {
	s.N++
	s.AvgSlowdown += r.Slowdown
	s.AvgTurnaround += r.Turnaround
	s.MaxSlowdown = math.Max(s.MaxSlowdown, r.Slowdown)
	s.MaxTurnaround = math.Max(s.MaxTurnaround, r.Turnaround)
}

func (s *Stats) close() {
	if s.N > 0 {
		s.AvgSlowdown /= float64(s.N)
		s.AvgTurnaround /= float64(s.N)
	}
}

// Result is the outcome of one simulation.
type Result struct {
	Testbed   string `json:"testbed"`
	Trace     string `json:"trace"`
	Scheduler string `json:"scheduler"`
	// Interactive are the statistics over interactive tasks (all tasks
	// when the trace has no batch tasks), ByClass the same per size class.
	Interactive Stats            `json:"interactive"`
	ByClass     map[string]Stats `json:"by_class"`
	Batch       Stats            `json:"batch"`
	// SpareUsed is B_B / (B_T - B_I) over the accounting window (§3.2.2).
	SpareUsed   float64 `json:"spare_used,omitempty"`
	Window      float64 `json:"window"`
	Makespan    float64 `json:"makespan"`
	Starts      int     `json:"starts"`
	Preemptions int     `json:"preemptions"`
	Resizes     int     `json:"resizes"`
	BytesMoved  float64 `json:"bytes_moved"`
	BytesLost   float64 `json:"bytes_lost"`
	// ModelError is the estimator's mean relative prediction error over
	// the run's observations.
	ModelError float64      `json:"model_error"`
	Tasks      []TaskResult `json:"-"`
	// PreemptLog lists every preemption in order.
	PreemptLog []PreemptEvent `json:"-"`
}

// PreemptEvent records one preemption decision.
type PreemptEvent struct {
	Time   float64
	Victim int64
	For    int64
}

func (w *World) result(traceName string) *Result {
	r := &Result{Testbed: w.tb.Name, Trace: traceName, Scheduler: w.sch.Name(), ByClass: map[string]Stats{},
		Window: w.opt.Window, Starts: w.starts, Preemptions: w.preemptions, Resizes: w.resizes, BytesMoved: w.moved, BytesLost: w.lost, PreemptLog: w.preemptLog, ModelError: w.est.MeanError()}
	var cls [5]Stats
	var bI, bB float64
	for _, t := range w.tasks {
		wait := t.wait
		if t.st.Batch {
			wait -= w.opt.BatchShift
		}
		tr := TaskResult{ID: int64(t.st.ID), Size: t.st.Size, Batch: t.st.Batch, Arrival: t.st.Arrival, Finish: t.finish,
			Wait: wait, Run: t.trans, IdealTT: t.ideal, Turnaround: t.finish - t.st.Arrival, Preempted: t.preempted}
		tr.Slowdown = (tr.Wait + math.Max(tr.Run, Bound)) / math.Max(tr.IdealTT, Bound)
		r.Tasks = append(r.Tasks, tr)
		r.Makespan = math.Max(r.Makespan, t.finish)
		if t.st.Batch {
			r.Batch.add(&tr)
			bB += t.windowBytes
			continue
		}
		bI += t.windowBytes
		r.Interactive.add(&tr)
		cls[model.SizeClass(t.st.Size)].add(&tr)
	}
	r.Interactive.close()
	r.Batch.close()
	for i := range cls {
		if cls[i].N > 0 {
			cls[i].close()
			r.ByClass[ClassNames[i]] = cls[i]
		}
	}
	if r.Batch.N > 0 && r.Window > 0 {
		bT := Gbps(w.tb.Endpoint(w.tb.Source).CapacityGbps) * r.Window
		if bT > bI {
			r.SpareUsed = bB / (bT - bI)
		}
	}
	return r
}

// Summarize computes the statistics of a Result from its tasks'
// outcomes (Slowdown and Turnaround set), reporting each task in the size
// class of Size/classScale (1: its own size). The testbed's runs on real
// bytes and their simulated predictions go through it, so their figures
// compare; a trace scaled down for replay is reported in the classes of
// the trace it was scaled from.
func Summarize(testbed, traceName, scheduler string, tasks []TaskResult, classScale float64) *Result {
	if classScale <= 0 {
		classScale = 1
	}
	r := &Result{Testbed: testbed, Trace: traceName, Scheduler: scheduler, ByClass: map[string]Stats{}, Tasks: tasks}
	var cls [5]Stats
	for i := range tasks {
		t := &tasks[i]
		r.Makespan = math.Max(r.Makespan, t.Finish)
		r.Preemptions += t.Preempted
		if t.Batch {
			r.Batch.add(t)
			continue
		}
		r.Interactive.add(t)
		cls[model.SizeClass(int64(float64(t.Size)/classScale))].add(t)
	}
	r.Interactive.close()
	r.Batch.close()
	for i := range cls {
		if cls[i].N > 0 {
			cls[i].close()
			r.ByClass[ClassNames[i]] = cls[i]
		}
	}
	return r
}

// BoundedSlowdown is SC'15 eq. 2: (wait + max(run, bound)) / max(ideal,
// bound), with bound the interactive threshold (Bound; a replay compressed
// in time compresses it too).
func BoundedSlowdown(wait, run, ideal, bound float64) float64 {
	return (wait + math.Max(run, bound)) / math.Max(ideal, bound)
}
