package server

import (
	"context"

	"github.com/sluice-dtn/sluice/engine"
)

// runner carries out the loop's transfers and the stats of their sources:
// in the service, the transfer engine against the agents (engineRunner);
// in a deterministic simulation of the loop, a model. Runs report through
// the loop's inbox (Server.post): started with the run's transfer, moving
// once it moves bytes, finished at its end.
type runner interface {
	// run carries out run number run of p (p.task.CC connections) until
	// it ends or ctx does, and reports.
	run(ctx context.Context, p plan, run int)
	// stat returns the sizes of the sources of ps (an error each where
	// one is not known).
	stat(ctx context.Context, ps []plan) ([]int64, []error)
}

// transfer is what the loop holds of a run in progress: its progress, a
// concurrency change, a pause at a sub-write boundary (SC'15 §4.5).
// *engine.Transfer is one.
type transfer interface {
	Progress() engine.Progress
	SetCC(cc int) error
	Pause(ctx context.Context) error
}

var _ transfer = (*engine.Transfer)(nil)

// engineRunner runs transfers with the engine between agents.
type engineRunner struct{ s *Server }

func (r engineRunner) run(ctx context.Context, p plan, run int) { r.s.runTransfer(ctx, p, run) }

func (r engineRunner) stat(ctx context.Context, ps []plan) ([]int64, []error) {
	if len(ps) == 1 {
		size, err := r.s.statSource(ctx, ps[0])
		return []int64{size}, []error{err}
	}
	return r.s.statSources(ctx, ps)
}

// loopInbox replaces the loop's inbox for a deterministic simulation, which
// runs the loop, and everything that talks to it, on one goroutine: do
// (a caller that may wait for the loop's answer) applies f at once, and
// post (a report of a run) queues it for a turn the simulation takes.
type loopInbox interface {
	do(f func(*world))
	post(f func(*world))
}

// async runs f as the loop's asynchronous work (Server.spawn).
func (s *Server) async(f func()) {
	if s.spawn == nil {
		go f() // a Server a test made by hand
		return
	}
	s.spawn(f)
}

// runner returns the loop's runner (Server.runs).
func (s *Server) runner() runner {
	if s.runs == nil {
		return engineRunner{s}
	}
	return s.runs
}
