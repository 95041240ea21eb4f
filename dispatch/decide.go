package dispatch

import "github.com/sluice-dtn/sluice/sched"

// Planner is a Runner that lets a cycle plan again around what its rules
// refused (Decide). The service's runner is one; the simulator's, whose
// chain is empty and refuses nothing, is not.
type Planner interface {
	// Plan is told a round's decisions just before they are applied.
	Plan(ds []sched.Decision)
	// Applied returns the decisions of the round carried out, with the
	// concurrency granted (Replan's applied).
	Applied() []sched.Decision
	// Hold is told the round's refusals and says whether another round
	// is worth planning: the starts refused outright are held back from
	// it, with whatever else their rule would refuse now.
	Hold(refused []sched.Refusal) bool
	// Keep says whether a waiting task is offered to the next round.
	Keep(t *sched.Task) bool
}

// Outcome is what a cycle did: every round's plan, in order, and every
// refusal.
type Outcome struct {
	// Decisions are the scheduler's decisions, round after round, as it
	// gave them (before the rules).
	Decisions []sched.Decision
	// Refused is what the rules refused or changed, in every round.
	Refused []sched.Refusal
	// Rounds is how many times the scheduler planned (at least 1).
	Rounds int
}

// Decide runs one scheduling cycle of a world on snap: the scheduler
// plans, Apply carries the plan out through the rules and r, and, when r
// is a Planner and the rules refused starts, the scheduler plans again
// around them (Replan), up to maxReplans more rounds. The cycle's
// refusals go to c for the next snapshot. It stops at r's first error,
// returning it with the outcome so far.
//
// This is the whole cycle the simulator and the service share; what is
// theirs is the snapshot's contents (Builder), the rules, and what r does.
func Decide[T any](c *Cycle, s sched.Scheduler, snap *sched.Snapshot, r Runner[T], maxReplans int, rules ...Rule[T]) (Outcome, error) {
	var out Outcome
	p, _ := r.(Planner)
	for {
		ds := s.Schedule(snap)
		out.Rounds++
		out.Decisions = append(out.Decisions, ds...)
		if p != nil {
			p.Plan(ds)
		}
		refused, err := Apply(ds, r, rules...)
		out.Refused = append(out.Refused, refused...)
		if err != nil {
			c.Refused(out.Refused)
			return out, err
		}
		if p == nil || out.Rounds > maxReplans || !p.Hold(refused) {
			break
		}
		Replan(snap, p.Applied(), p.Keep, refused)
	}
	c.Refused(out.Refused)
	return out, nil
}
