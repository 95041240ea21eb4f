package sched

import "math"

// seal+ is SEAL with the changes below, each of which PlusOptions can
// switch off for ablation (the scheduler name "seal+:a+b" keeps only a and
// b; "seal+:-a" is seal+ without a). They address weak spots the simulator
// showed in SEAL as published (docs/results/README.md);
// docs/results/seal-plus.md measures each.
//
//   - Admission on arrival ("arrival"). A task whose endpoints pass the
//     admission test starts the moment it arrives instead of at the next
//     0.5 s cycle; most transfers are small, and a quarter second is most
//     of their slowdown. Periodic cycles still do preemption and re-tuning.
//   - Preemption by cost ("cost"). A running task gives way only when the
//     waiting task's expected wait, in its own slowdown units, exceeds the
//     delay the preemption causes the victim (the waiting task's transfer
//     time, a restart, and the data since the last checkpoint) in the
//     victim's slowdown units. This replaces the fixed ratio pf, under
//     which two large tasks can swap places and mostly move delay around.
//   - Re-tuning while tasks wait ("retune"). SEAL raises running tasks only
//     when the wait queue is empty (Listing 1 line 7); in a busy period a
//     large task started with one connection then keeps it. seal+ raises
//     running tasks, furthest behind first, with whatever room the queue
//     left at the end of every cycle.
//   - Concurrency that follows load ("idle-beta"). Beta is scaled by how
//     busy the task's endpoints are (see beta), so idle capacity is used.
//   - Short tasks first ("short-first"). At a saturated endpoint a task
//     under 1 GB takes connections on its own merit (see shortFirst).
//   - A guard against a wrong model ("guard"). Where the estimator reports
//     that its predictions on a pair have been far off (ErrorReporter), a
//     running task's time to finish comes from its observed rate instead.
//   - Probing above a learned maximum ("probe"). Where the world says an
//     endpoint's maximum is only the most observed and asks for a probe
//     (Endpoint.Probe, see Peaks), one running task there gets half as
//     many connections again although the endpoint looks saturated: the
//     only way to learn that a path has grown is to use more of it.
//   - Start-up in the concurrency choice ("startup"; off by default, it did
//     not pay on the simulator's grid). One more connection must save more
//     than Beta of the task's predicted time, start-up included, and
//     raising a running task must save more than the start-up its new
//     connections pay.

type plusSwitch int

const (
	noArrival plusSwitch = iota
	noCostPreempt
	noStartupCC
	noRetune
	noErrorGuard
	noIdleBeta
	noShortFirst
	noProbe
)

// plusOn reports whether the seal+ change sw is in force in this cycle.
func (c *cycle) plusOn(sw plusSwitch) bool {
	if !c.s.plus {
		return false
	}
	p := c.o.Plus
	switch sw {
	case noArrival:
		return !p.NoArrival
	case noCostPreempt:
		return !p.NoCostPreempt
	case noStartupCC:
		return !p.NoStartupCC
	case noRetune:
		return !p.NoRetune
	case noErrorGuard:
		return !p.NoErrorGuard
	case noIdleBeta:
		return !p.NoIdleBeta
	case noShortFirst:
		return !p.NoShortFirst
	case noProbe:
		return !p.NoProbe
	}
	return false
}

// AdmitsOnArrival implements ArrivalAdmitter.
func (s *SEAL) AdmitsOnArrival() bool { return s.plus && !s.opt.Plus.NoArrival }

// ErrorReporter may be implemented by an Estimator that tracks how far its
// predictions have been from what was then observed on each pair.
type ErrorReporter interface {
	// PredictionError is the recent mean relative error of predictions
	// between src and dst (0.3 means 30% off), or 0 if unknown.
	PredictionError(src, dst string) float64
}

// modelWrong reports whether the estimator says it has been more than 30%
// off on e's pair.
func (c *cycle) modelWrong(e *entry) bool {
	r, ok := c.snap.Estimator.(ErrorReporter)
	return ok && r.PredictionError(c.eps[e.src].name, c.eps[e.dst].name) > 0.3
}

// admitOnly is the cycle run at an arrival: waiting tasks that pass the
// admission test start; nothing is preempted or resized.
func (c *cycle) admitOnly() {
	for _, e := range c.waiting {
		if c.full() {
			return
		}
		room := c.room(e.src, e.dst)
		if room == 0 {
			continue
		}
		if e.size < c.o.SmallSize || (!c.saturated(e.src, false, e) && !c.saturated(e.dst, false, e)) {
			c.start(e, room)
		}
	}
}

// rateOf is a running task's expected throughput from now on: what it is
// observed to do, or the model's prediction at its concurrency before it
// has been observed.
func (c *cycle) rateOf(r *entry) float64 {
	if r.t.Rate > 0 {
		return r.t.Rate
	}
	src, dst := c.loads(r, nil)
	return c.est(c.pmOf(r), r.src, r.dst, r.size, max(r.cc, 1), src, dst)
}

// findByCost chooses victims at host (-1: anywhere) for waiting task w by
// comparing slowdowns. Without a preemption, w waits about until the first
// running task there finishes; with one, the victim is set back by w's
// transfer time, a restart and the data since its last checkpoint. The
// victim is the task that loses least in its own slowdown units, and the
// preemption happens only if w gains more in its own.
func (c *cycle) findByCost(host int32, w *entry, already []*entry) []*entry {
	var cands []*entry
	if host < 0 {
		cands = c.running
	} else {
		cands = c.runAt(host)
	}
	gone := append([]*entry(nil), already...)
	eligible := func(r *entry) bool {
		return !r.stopped && !r.started && !r.t.Pending && !containsEntry(gone, r)
	}
	// The wait avoided: the time until the first task here finishes.
	wait := math.Inf(1)
	for _, r := range cands {
		if r.stopped || r.started {
			continue
		}
		if rate := c.rateOf(r); rate > 0 {
			wait = math.Min(wait, float64(r.t.Left)/rate)
		}
	}
	if math.IsInf(wait, 1) {
		return nil
	}
	gain := wait / c.idealTT(w)
	var cl []*entry
	for {
		var best *entry
		bestCost := math.Inf(1)
		for _, r := range cands {
			if !eligible(r) {
				continue
			}
			src, dst := c.loads(w, append(gone, r))
			_, thr := c.findThrCC(w, src, dst, c.o.MaxCC)
			if thr <= 0 {
				continue
			}
			delay := c.snap.StartupCost + float64(w.t.Left)/thr + // w runs in r's place
				c.snap.StartupCost + c.snap.Checkpoint/2 // r restarts and re-sends
			cost := delay / c.idealTT(r)
			if cost < bestCost || (cost == bestCost && best != nil && r.id < best.id) {
				best, bestCost = r, cost
			}
		}
		if best == nil || bestCost >= gain {
			return cl
		}
		cl = append(cl, best)
		gone = append(gone, best)
		if c.roomWithout(w, gone) > 0 {
			return cl
		}
	}
}

func containsEntry(es []*entry, e *entry) bool {
	for _, x := range es {
		if x == e {
			return true
		}
	}
	return false
}

// worthAnotherConnection: at start, going from throughput thr to next must
// save more than Beta of the task's predicted time, start-up included.
func (c *cycle) worthAnotherConnection(e *entry, thr, next float64) bool {
	if thr <= 0 || next <= thr {
		return next > thr
	}
	left := float64(e.t.Left)
	now := c.snap.StartupCost + left/thr
	return left/thr-left/next > c.beta(e)*now
}

// worthRaise: raising a running task to throughput next must save more
// time than the start-up its new connections pay before they carry data.
func (c *cycle) worthRaise(e *entry, next float64) bool {
	now := c.rateOf(e)
	if now <= 0 || next <= now {
		return next > now
	}
	left := float64(e.t.Left)
	return left/now-left/next > c.snap.StartupCost
}

// beta is the gain one more connection must bring (a fraction of the
// task's throughput or time). SEAL's Beta buys "sufficient, but not
// excessive" concurrency when connections and bandwidth are scarce; when
// e's endpoints are mostly idle a connection costs nobody anything, so
// seal+ scales Beta by how busy they are (bandwidth observed against the
// saturation threshold, and connections against the limits), down to a
// fifth of it.
func (c *cycle) beta(e *entry) float64 {
	if !c.plusOn(noIdleBeta) {
		return c.o.Beta
	}
	busy := 0.0
	for _, i := range [2]int32{e.src, e.dst} {
		st := &c.eps[i]
		if st.ep == nil {
			continue
		}
		if st.ep.MaxThroughput > 0 {
			busy = math.Max(busy, st.obs/(c.o.SatFraction*st.ep.MaxThroughput))
		}
		if st.ep.MaxCC > 0 {
			busy = math.Max(busy, float64(st.cc)/float64(st.ep.MaxCC))
		}
	}
	if c.snap.TotalMaxCC > 0 {
		busy = math.Max(busy, float64(c.total)/float64(c.snap.TotalMaxCC))
	}
	return c.o.Beta * math.Min(math.Max(busy, 0.2), 1)
}

// shortFirst reports whether seal+ lets e take connections on its own
// merit (FindThrCC on its own throughput) rather than on what they add at
// its endpoints: a task under 1 GB (SEAL's "small") at a saturated
// endpoint. There, connections are shares of a fixed whole, and giving
// them to short tasks is shortest-remaining-time-first: a short task's
// slowdown falls by far more than a long one's rises.
func (c *cycle) shortFirst(e *entry) bool {
	if !c.plusOn(noShortFirst) || e.size >= c.o.SmallSize {
		return false
	}
	return c.saturated(e.src, false, nil) || c.saturated(e.dst, false, nil)
}
