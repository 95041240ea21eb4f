package dispatch

import (
	"github.com/sluice-dtn/sluice/sched"
)

// Runner carries out the decisions the rules admitted, in one world: the
// transfer engine and the agents in the service, the fluid model in the
// simulator. T is the world's task.
type Runner[T any] interface {
	// Lookup finds d's task and says whether d applies to it now (a
	// start to a waiting task, a preemption or a change to a running
	// one). ok false skips d; an error stops the cycle's apply (a world
	// that treats a decision it cannot carry out as a bug says so).
	Lookup(d sched.Decision) (t T, ok bool, err error)
	// CC is t's concurrency now (the base of a SetCC).
	CC(t T) int
	// Start starts t with cc connections.
	Start(t T, cc int) error
	// Preempt stops t for d.For (SC'15 §4.5: at its next checkpoint).
	Preempt(t T, d sched.Decision) error
	// SetCC changes running t's concurrency to cc.
	SetCC(t T, cc int) error
}

// Rule is one admission rule of a world: a start or a concurrency change
// passes every rule of the chain in order before the runner carries it
// out, each seeing what the rules before it left.
type Rule[T any] interface {
	// Name names the rule in the refusals the scheduler is told of.
	Name() string
	// Admit returns the concurrency the rule lets d have, given cc (what
	// the rules before it left) and, for a SetCC, cur (t's concurrency
	// now; 0 for a start): cc to let it through, another value to change
	// it (fewer streams, or the fixed streams of the task's job), 0 to
	// refuse a start, cur to refuse a change. why says why it changed
	// anything, for the refusals.
	Admit(t T, d sched.Decision, cc, cur int) (granted int, why string)
}

// Apply carries out ds through the rules and r, in the scheduler's
// order, and returns the decisions a rule refused or changed. It stops at
// the first error of r, returning it with the refusals so far.
func Apply[T any](ds []sched.Decision, r Runner[T], rules ...Rule[T]) ([]sched.Refusal, error) {
	var refused []sched.Refusal
	for _, d := range ds {
		t, ok, err := r.Lookup(d)
		if err != nil {
			return refused, err
		}
		if !ok {
			continue
		}
		switch d.Kind {
		case sched.Preempt:
			if err := r.Preempt(t, d); err != nil {
				return refused, err
			}
		case sched.Start, sched.SetCC:
			cur := 0
			if d.Kind == sched.SetCC {
				cur = r.CC(t)
			}
			cc, admitted := d.CC, true
			for _, rule := range rules {
				got, why := rule.Admit(t, d, cc, cur)
				if got == cc {
					continue
				}
				refused = append(refused, sched.Refusal{Decision: d, Rule: rule.Name(), CC: got, Why: why})
				cc = got
				if cc <= 0 || (d.Kind == sched.SetCC && cc == cur) {
					admitted = false
					break
				}
			}
			switch {
			case !admitted:
			case d.Kind == sched.Start:
				err = r.Start(t, cc)
			default:
				// Carried out even where it asks for what t has: the
				// world decides what a change to the same value is.
				err = r.SetCC(t, cc)
			}
			if err != nil {
				return refused, err
			}
		}
	}
	return refused, nil
}

// Cycle is a world's scheduling cycle: its snapshot builder, and the
// refusals of its last apply, which its next snapshot carries to the
// scheduler.
type Cycle struct {
	Builder
	refused []sched.Refusal
}

// Snapshot finishes the snapshot being built (Builder.Snapshot) with the
// last apply's refusals.
func (c *Cycle) Snapshot() *sched.Snapshot {
	snap := c.Builder.Snapshot()
	snap.Refused = c.refused
	return snap
}

// Refused records an apply's refusals for the next snapshot.
func (c *Cycle) Refused(r []sched.Refusal) { c.refused = r }
