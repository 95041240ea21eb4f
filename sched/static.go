package sched

import "sort"

// Static is the family of baselines that start every task on arrival with a
// concurrency fixed by its size (BaseCC1, BaseCC2, BaseCC4, BaseCC8,
// BaseVary), and the Globus default (at most two files at once per
// source-destination pair). They queue only when a hard concurrency limit
// is reached, and then serve the queue first come, first served.
type Static struct {
	name    string
	ccFor   func(size int64) int
	perPair int // running tasks allowed per (src, dst); zero = no limit
	// onCycle admits at the world's periodic cycles only (Options.CycleAdmission).
	onCycle bool
}

// Name implements Scheduler.
func (s *Static) Name() string { return s.name }

// AdmitsOnArrival implements ArrivalAdmitter: the baselines start a task
// when it is submitted, as the services they stand for do, unless
// Options.CycleAdmission puts them on the scheduling cycle SEAL waits for.
func (s *Static) AdmitsOnArrival() bool { return !s.onCycle }

// Schedule implements Scheduler.
func (s *Static) Schedule(snap *Snapshot) []Decision {
	lim := newLimits(snap)
	pairs := map[[2]string]int{}
	if s.perPair > 0 {
		for _, t := range snap.Running {
			pairs[[2]string{t.Src, t.Dst}]++
		}
	}
	waiting := append([]*Task(nil), snap.Waiting...)
	sort.Slice(waiting, func(i, j int) bool {
		if waiting[i].Arrival != waiting[j].Arrival {
			return waiting[i].Arrival < waiting[j].Arrival
		}
		return waiting[i].ID < waiting[j].ID
	})
	var out []Decision
	for _, t := range waiting {
		if t.Pending {
			continue
		}
		if lim.full() {
			break
		}
		p := [2]string{t.Src, t.Dst}
		if s.perPair > 0 && pairs[p] >= s.perPair {
			continue
		}
		// A concurrency above an endpoint's limit could never be granted:
		// the task gets the limit instead of waiting for ever.
		cc := min(s.ccFor(t.Size), lim.ceiling(t.Src, t.Dst))
		if lim.room(t.Src, t.Dst) < cc {
			continue
		}
		lim.add(t.Src, t.Dst, cc)
		pairs[p]++
		out = append(out, Decision{Kind: Start, Task: t.ID, CC: cc})
	}
	return out
}

// limits tracks the hard concurrency limits during one cycle.
type limits struct {
	eps        map[string]*Endpoint
	cc         map[string]int
	total, max int
}

func newLimits(s *Snapshot) *limits {
	l := &limits{eps: s.Endpoints, cc: map[string]int{}, max: s.TotalMaxCC}
	for _, t := range s.Running {
		l.cc[t.Src] += t.CC
		l.cc[t.Dst] += t.CC
		l.total += t.CC
	}
	return l
}

const unlimited = 1 << 30

// room is the largest concurrency a new task between src and dst may get.
func (l *limits) room(src, dst string) int {
	r := unlimited
	if l.max > 0 {
		r = l.max - l.total
	}
	for _, e := range [2]string{src, dst} {
		if ep := l.eps[e]; ep != nil && ep.MaxCC > 0 {
			r = min(r, ep.MaxCC-l.cc[e])
		}
	}
	return max(r, 0)
}

// ceiling is the largest concurrency a task between src and dst could
// ever get, with nothing else running: the endpoints' and the total
// limits (at least 1).
func (l *limits) ceiling(src, dst string) int {
	c := unlimited
	if l.max > 0 {
		c = l.max
	}
	for _, e := range [2]string{src, dst} {
		if ep := l.eps[e]; ep != nil && ep.MaxCC > 0 {
			c = min(c, ep.MaxCC)
		}
	}
	return max(c, 1)
}

func (l *limits) full() bool { return l.max > 0 && l.total >= l.max }

func (l *limits) add(src, dst string, cc int) {
	l.cc[src] += cc
	l.cc[dst] += cc
	l.total += cc
}
