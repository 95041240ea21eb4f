package dispatch

import (
	"fmt"

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
//
// A preemption made for a start of the same cycle (Decision.For) is
// carried out with that start, just before it, and not at all if the
// start is refused: a victim paused for a replacement that never runs
// would give its connections to nobody, and the scheduler would pause
// another the next cycle for the same refused start.
func Apply[T any](ds []sched.Decision, r Runner[T], rules ...Rule[T]) ([]sched.Refusal, error) {
	var refused []sched.Refusal
	// The starts of the cycle, and the preemptions waiting for each.
	type startState struct {
		done, refused bool
		victims       []sched.Decision
	}
	var starts map[sched.TaskID]*startState
	for _, d := range ds {
		if d.Kind == sched.Start {
			if starts == nil {
				starts = map[sched.TaskID]*startState{}
			}
			starts[d.Task] = &startState{}
		}
	}
	preempt := func(d sched.Decision) error {
		t, ok, err := r.Lookup(d)
		if err != nil || !ok {
			return err
		}
		return r.Preempt(t, d)
	}
	drop := func(v sched.Decision) {
		refused = append(refused, sched.Refusal{Decision: v, Rule: "replacement", Why: fmt.Sprintf("task %d, its replacement, does not start", v.For)})
	}
	for _, d := range ds {
		if d.Kind == sched.Preempt {
			s := starts[d.For]
			switch {
			case s == nil || d.For == 0 || (s.done && !s.refused):
				if err := preempt(d); err != nil {
					return refused, err
				}
			case s.refused:
				drop(d)
			default:
				s.victims = append(s.victims, d)
			}
			continue
		}
		t, ok, err := r.Lookup(d)
		if err != nil {
			return refused, err
		}
		s := starts[d.Task]
		if !ok {
			if d.Kind == sched.Start {
				s.done, s.refused = true, true
				for _, v := range s.victims {
					drop(v)
				}
			}
			continue
		}
		switch d.Kind {
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
				if d.Kind == sched.Start {
					s.done, s.refused = true, true
					for _, v := range s.victims {
						drop(v)
					}
				}
			case d.Kind == sched.Start:
				s.done = true
				for _, v := range s.victims {
					if err := preempt(v); err != nil {
						return refused, err
					}
				}
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

// Replan makes snap the snapshot of another round of the same cycle,
// after an apply whose rules refused some starts: the scheduler then fills
// what the refusals left, as Nomad's scheduler plans again around what its
// plan applier rejected. Without it, a scheduler that ranks the same
// refused tasks first every cycle starts nothing else, and the refusing
// rule's waiting tasks hold the capacity of every other task for good.
//
// applied are the decisions the world carried out, with the concurrency
// it granted: a start becomes a running task, a concurrency change
// changes one, and both, like a preempted task (which keeps its
// connections until it stops), become pending, so that the next round
// leaves them alone; connections are counted at the tasks' source and
// destination. The waiting tasks keep rejects go (those refused, and
// those the world knows its rules would refuse now); refused becomes the
// snapshot's Refused. snap's slices are replaced, not changed in place.
func Replan(snap *sched.Snapshot, applied []sched.Decision, keep func(*sched.Task) bool, refused []sched.Refusal) {
	byID := make(map[sched.TaskID]sched.Decision, len(applied))
	for _, d := range applied {
		byID[d.Task] = d
	}
	count := func(t *sched.Task, n int) {
		for _, name := range [2]string{t.Src, t.Dst} {
			if e := snap.Endpoints[name]; e != nil {
				e.CC += n
			}
		}
	}
	waiting := make([]*sched.Task, 0, len(snap.Waiting))
	running := make([]*sched.Task, 0, len(snap.Running)+len(applied))
	for _, t := range snap.Running {
		if d, ok := byID[t.ID]; ok {
			if d.Kind == sched.SetCC {
				count(t, d.CC-t.CC)
				t.CC = d.CC
			}
			t.Pending = true
		}
		running = append(running, t)
	}
	for _, t := range snap.Waiting {
		if d, ok := byID[t.ID]; ok && d.Kind == sched.Start {
			t.Running, t.CC, t.Pending, t.Rate = true, d.CC, true, 0
			count(t, d.CC)
			running = append(running, t)
			continue
		}
		if keep(t) {
			waiting = append(waiting, t)
		}
	}
	var ids sched.IDSorter
	ids.Sort(running)
	snap.Waiting, snap.Running, snap.Refused = waiting, running, refused
}
