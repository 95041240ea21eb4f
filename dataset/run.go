package dataset

import (
	"context"
	"fmt"
	"math"
)

// Performer is the paper's perform_transfer: it moves files with
// pipelining pp, parallelism p and concurrency cc, and returns the
// throughput it measured in bytes per second. It must move every file or
// return an error; it is where the clock is read. Planners compare the
// throughputs of successive calls, so a performer should measure them
// alike, and keeping its connections open from one call to the next
// spares every sample a start-up.
type Performer interface {
	Perform(ctx context.Context, files []File, pp, p, cc int) (bytesPerSec float64, err error)
}

// PerformerFunc adapts a function to a Performer.
type PerformerFunc func(ctx context.Context, files []File, pp, p, cc int) (float64, error)

// Perform calls f.
func (f PerformerFunc) Perform(ctx context.Context, files []File, pp, p, cc int) (float64, error) {
	return f(ctx, files, pp, p, cc)
}

// StepReport is one transfer Run made.
type StepReport struct {
	Phase Phase `json:"phase"`
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	PP    int   `json:"pp"`
	P     int   `json:"p"`
	CC    int   `json:"cc"`
	// Throughput is what the performer measured, in bytes per second.
	Throughput float64 `json:"bytes_per_s"`
}

// Report is what Run did, step by step.
type Report struct {
	Steps []StepReport `json:"steps"`
}

// Bytes is the size of the files transferred.
func (r Report) Bytes() int64 {
	var n int64
	for _, s := range r.Steps {
		n += s.Bytes
	}
	return n
}

// Files is the number of files transferred.
func (r Report) Files() int {
	n := 0
	for _, s := range r.Steps {
		n += s.Files
	}
	return n
}

// Seconds is the transfer time implied by the steps' throughputs, the sum
// of bytes/throughput (Run keeps no clock). Steps with no bytes, or whose
// throughput is not positive and finite, add nothing.
func (r Report) Seconds() float64 {
	var t float64
	for _, s := range r.Steps {
		if s.Bytes > 0 && s.Throughput > 0 && !math.IsInf(s.Throughput, 1) {
			t += float64(s.Bytes) / s.Throughput
		}
	}
	return t
}

// Throughput is Bytes over Seconds, the dataset's throughput with the
// samples included (0 if Seconds is 0).
func (r Report) Throughput() float64 {
	t := r.Seconds()
	if t == 0 {
		return 0
	}
	return float64(r.Bytes()) / t
}

// Run executes a planner to the end with perf, reporting every step. It
// stops at the first error (the planner is left with that step pending,
// so calling Run again with the same planner retries it) or when ctx is
// done, returning what was done so far with the error.
func Run(ctx context.Context, pl Planner, perf Performer) (Report, error) {
	var rep Report
	for {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("dataset: run: %w", err)
		}
		st, ok := pl.Next()
		if !ok {
			return rep, nil
		}
		c := st.Chunk
		thr, err := perf.Perform(ctx, c.Files, c.PP, c.P, c.CC)
		if err != nil {
			return rep, fmt.Errorf("dataset: %s step %d (%v): %w", st.Phase, len(rep.Steps)+1, c, err)
		}
		pl.Observe(thr)
		rep.Steps = append(rep.Steps, StepReport{
			Phase: st.Phase, Files: len(c.Files), Bytes: c.Size(),
			PP: c.PP, P: c.P, CC: c.CC, Throughput: thr,
		})
	}
}
