package sched

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// SEAL is the load-aware scheduler of SC'15 §4 (Listings 1-2); with
// typeAware set it is STEAL (§5, Listings 3-4), which also separates batch
// from interactive tasks.
//
// Where the published listings and the text disagree, SEAL follows the
// text, and says so:
//   - FindThrCC returns the last concurrency whose predicted throughput rose
//     by more than Beta, and that concurrency's throughput (the listing's
//     loop returns one past it).
//   - FindTasksToPreempt adds a running task to the candidates when the
//     waiting task's xfactor is at least PF times the running task's ("if
//     its xfactor is lower than that of the waiting task by pf or more");
//     the listing's comparison is reversed.
//   - A waiting task whose endpoints are saturated is started only if
//     preemption freed every saturated endpoint it uses.
//   - Saturation test (b), "concurrency up by F gives throughput up by
//     0.25×F or less", is read as an elasticity of the endpoint's
//     aggregate: see probeSaturated.
type SEAL struct {
	opt       Options
	typeAware bool
}

// Name implements Scheduler.
func (s *SEAL) Name() string {
	if s.typeAware {
		return "steal"
	}
	return "seal"
}

// Schedule implements Scheduler: one cycle of Listing 1 (SEAL) or of
// Listing 1 with the changes of Listing 3 (STEAL).
func (s *SEAL) Schedule(snap *Snapshot) []Decision {
	c := newCycle(s, snap)
	c.run()
	return c.out
}

// entry is a task plus what this cycle computed for it.
type entry struct {
	t       *Task
	cc      int // concurrency now: the task's, or what this cycle gave it
	xf      float64
	batch   bool // batch for STEAL's purposes (after promotion)
	stopped bool // preempted in this cycle
	started bool // started or resized in this cycle
}

type memoKey struct {
	src, dst         string
	size             int64
	srcLoad, dstLoad int
	maxCC            int
}

type thrCC struct {
	cc  int
	thr float64
}

// cycle holds the state of one scheduling cycle. Everything in it is
// derived from the snapshot, so Schedule stays pure.
type cycle struct {
	s    *SEAL
	o    Options
	snap *Snapshot
	lim  *limits
	// obs is each endpoint's observed throughput, adjusted by the starts
	// and preemptions decided so far in this cycle.
	obs     map[string]float64
	running []*entry
	byEP    map[string][]*entry // running entries per endpoint, ascending xf
	waiting []*entry
	memo    map[memoKey]thrCC
	chosen  map[chooseKey]thrCC
	version int // bumped by every start, preemption and resize
	sizeKey func(int64) int64
	out     []Decision
}

// SizeKeyer may be implemented by an Estimator whose predictions depend on
// size only through a coarse key (such as a size class). Schedulers then
// share one prediction among tasks with the same key, which keeps a cycle
// over a hundred thousand waiting tasks fast.
type SizeKeyer interface {
	SizeKey(size int64) int64
}

func newCycle(s *SEAL, snap *Snapshot) *cycle {
	c := &cycle{
		s: s, o: s.opt, snap: snap,
		lim:    newLimits(snap),
		obs:    make(map[string]float64, len(snap.Endpoints)),
		byEP:   map[string][]*entry{},
		memo:   map[memoKey]thrCC{},
		chosen: map[chooseKey]thrCC{},
	}
	c.sizeKey = func(n int64) int64 { return n }
	if k, ok := snap.Estimator.(SizeKeyer); ok {
		c.sizeKey = k.SizeKey
	}
	for name, ep := range snap.Endpoints {
		c.obs[name] = ep.Observed
	}
	for _, t := range snap.Running {
		e := &entry{t: t, cc: t.CC, batch: c.isBatch(t)}
		if t.Rate == 0 && t.Pending {
			// Still starting: its throughput is not observed yet, but it
			// will take its share; count the model's prediction so one
			// cycle's starts are not repeated by the next.
			thr := c.est(t, t.CC, c.lim.cc[t.Src]-t.CC, c.lim.cc[t.Dst]-t.CC)
			c.obs[t.Src] += thr
			c.obs[t.Dst] += thr
		}
		e.xf = c.xfactor(e, nil)
		c.running = append(c.running, e)
		c.byEP[t.Src] = append(c.byEP[t.Src], e)
		if t.Dst != t.Src {
			c.byEP[t.Dst] = append(c.byEP[t.Dst], e)
		}
	}
	for _, es := range c.byEP {
		sortAsc(es)
	}
	for _, t := range snap.Waiting {
		if t.Pending {
			continue
		}
		e := &entry{t: t, batch: c.isBatch(t)}
		e.xf = c.xfactor(e, nil)
		c.waiting = append(c.waiting, e)
	}
	// W: descending xfactor, ties by ID for determinism.
	sort.Slice(c.waiting, func(i, j int) bool {
		a, b := c.waiting[i], c.waiting[j]
		if a.xf != b.xf {
			return a.xf > b.xf
		}
		return a.t.ID < b.t.ID
	})
	return c
}

func sortAsc(es []*entry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].xf != es[j].xf {
			return es[i].xf < es[j].xf
		}
		return es[i].t.ID < es[j].t.ID
	})
}

func (c *cycle) isBatch(t *Task) bool {
	if !c.s.typeAware || !t.Batch {
		return false
	}
	if c.o.PromoteAfter > 0 && c.snap.Now-t.Arrival >= c.o.PromoteAfter {
		return false
	}
	return true
}

func (c *cycle) est(t *Task, cc, srcLoad, dstLoad int) float64 {
	return c.snap.Estimator.Throughput(t.Src, t.Dst, cc, max(srcLoad, 0), max(dstLoad, 0), t.Size)
}

// findThrCC is FindThrCC of Listing 2: starting at concurrency 1, raise it
// while the predicted throughput rises by more than Beta, up to maxCC.
func (c *cycle) findThrCC(t *Task, srcLoad, dstLoad, maxCC int) (int, float64) {
	if t.Size <= c.o.SplitMin {
		maxCC = 1
	}
	maxCC = max(min(maxCC, c.o.MaxCC), 1)
	k := memoKey{t.Src, t.Dst, c.sizeKey(t.Size), max(srcLoad, 0), max(dstLoad, 0), maxCC}
	if r, ok := c.memo[k]; ok {
		return r.cc, r.thr
	}
	bestCC, best := 1, c.est(t, 1, srcLoad, dstLoad)
	for cc := 2; cc <= maxCC; cc++ {
		thr := c.est(t, cc, srcLoad, dstLoad)
		if thr <= best*(1+c.o.Beta) {
			break
		}
		bestCC, best = cc, thr
	}
	c.memo[k] = thrCC{bestCC, best}
	return bestCC, best
}

// FindThrCC is Listing 2's FindThrCC for tests and tools: the concurrency
// SEAL would choose for t at the given known loads, and its throughput.
func FindThrCC(est Estimator, o Options, t *Task, srcLoad, dstLoad int) (int, float64) {
	c := &cycle{s: &SEAL{opt: o.withDefaults()}, o: o.withDefaults(), snap: &Snapshot{Estimator: est}, memo: map[memoKey]thrCC{}}
	c.sizeKey = func(n int64) int64 { return n }
	return c.findThrCC(t, srcLoad, dstLoad, c.o.MaxCC)
}

// idealTT is TT_ideal: the transfer time under zero load at the best
// concurrency, plus the start-up cost.
func (c *cycle) idealTT(t *Task) float64 {
	if t.IdealTT > 0 {
		return t.IdealTT
	}
	_, thr := c.findThrCC(t, 0, 0, c.o.MaxCC)
	return IdealTT(t.Size, thr, c.snap.StartupCost)
}

// IdealTT is TT_ideal for size bytes at the ideal throughput thr.
func IdealTT(size int64, thr, startup float64) float64 {
	if thr <= 0 {
		return math.Inf(1)
	}
	return startup + float64(size)/thr
}

// loads returns the known loads at t's endpoints, leaving out t itself and
// the tasks in without.
func (c *cycle) loads(t *Task, without []*entry) (int, int) {
	src, dst := c.lim.cc[t.Src], c.lim.cc[t.Dst]
	if t.Running {
		src -= t.CC
		dst -= t.CC
	}
	for _, w := range without {
		if w.t.Src == t.Src || w.t.Dst == t.Src {
			src -= w.t.CC
		}
		if w.t.Dst == t.Dst || w.t.Src == t.Dst {
			dst -= w.t.CC
		}
	}
	return src, dst
}

// xfactor is UpdateXfactor (eq. 3, with Listing 3's batch weighting):
// (WT + TT_load) / TT_ideal, where the running tasks in without are taken
// away from the load.
func (c *cycle) xfactor(e *entry, without []*entry) float64 {
	t := e.t
	src, dst := c.loads(t, without)
	_, thr := c.findThrCC(t, src, dst, c.o.MaxCC)
	ttLoad := t.Trans
	if thr > 0 {
		ttLoad += float64(t.Left) / thr
	} else {
		ttLoad = math.Inf(1)
	}
	if !t.Running {
		ttLoad += c.snap.StartupCost
	}
	xf := (t.Wait + ttLoad) / c.idealTT(t)
	if e.batch {
		xf *= 0.00001
	}
	return xf
}

// threshold is the fraction of an endpoint's maximum throughput that
// counts as saturated: SatFraction, scaled by Lambda for batch tasks
// (STEAL's saturated').
func (c *cycle) threshold(batch bool) float64 {
	if batch {
		return c.o.SatFraction * c.o.Lambda
	}
	return c.o.SatFraction
}

// saturated is the saturation test of §4.3 for endpoint name.
func (c *cycle) saturated(name string, batch bool) bool {
	ep := c.snap.Endpoints[name]
	if ep == nil {
		return false
	}
	if ep.MaxThroughput > 0 && c.obs[name] >= c.threshold(batch)*ep.MaxThroughput {
		return true
	}
	if c.o.NoConcurrencyProbe {
		return false
	}
	return c.probeSaturated(name)
}

// probeSaturated is saturation test (b): on up to three links in use at
// the endpoint (those with the most concurrency), doubling the link's
// concurrency would raise the endpoint's predicted aggregate throughput by
// a quarter or less of the proportional gain (F = 2: concurrency at the
// endpoint up by c_link/C, throughput up by at most 0.25×c_link/C).
//
// The aggregate matters, not the link's own prediction: with per-connection
// sharing, a link that doubles its connections always takes a larger share
// from the others, so its own throughput rises even when the endpoint as a
// whole gains nothing or loses (over-subscription).
func (c *cycle) probeSaturated(name string) bool {
	type link struct {
		src, dst string
		cc       int
		size     int64
	}
	idx := map[[2]string]*link{}
	var links []*link
	for _, e := range c.byEP[name] {
		if e.stopped {
			continue
		}
		k := [2]string{e.t.Src, e.t.Dst}
		l := idx[k]
		if l == nil {
			l = &link{src: e.t.Src, dst: e.t.Dst}
			idx[k] = l
			links = append(links, l)
		}
		l.cc += e.cc
		l.size = max(l.size, e.t.Size)
	}
	total := c.lim.cc[name]
	if len(links) == 0 || total <= 0 {
		return false
	}
	slices.SortFunc(links, func(a, b *link) int {
		if a.cc != b.cc {
			return b.cc - a.cc
		}
		if a.src != b.src {
			return strings.Compare(a.src, b.src)
		}
		return strings.Compare(a.dst, b.dst)
	})
	// aggregate predicts the endpoint's throughput with extra connections
	// added on link k (k < 0: none).
	aggregate := func(k, extra int) float64 {
		sum := 0.0
		for i, l := range links {
			cc := l.cc
			srcLoad, dstLoad := c.lim.cc[l.src]-l.cc, c.lim.cc[l.dst]-l.cc
			if k >= 0 {
				kl := links[k]
				if i == k {
					cc += extra
				} else {
					if l.src == kl.src || l.src == kl.dst {
						srcLoad += extra
					}
					if l.dst == kl.src || l.dst == kl.dst {
						dstLoad += extra
					}
				}
			}
			sum += c.est(&Task{Src: l.src, Dst: l.dst, Size: l.size}, cc, srcLoad, dstLoad)
		}
		return sum
	}
	base := aggregate(-1, 0)
	if base <= 0 {
		return false
	}
	for k := range links[:min(len(links), 3)] {
		more := aggregate(k, links[k].cc)
		gain := more/base - 1
		if gain > 0.25*float64(links[k].cc)/float64(total) {
			return false
		}
	}
	return true
}

func (c *cycle) run() {
	interactiveWaiting := false
	for _, e := range c.waiting {
		if !e.batch {
			interactiveWaiting = true
			break
		}
	}
	// Listing 1 lines 7-9 (Listing 3 lines 7-9.3 for STEAL).
	if len(c.waiting) == 0 || (c.s.typeAware && !interactiveWaiting) {
		c.increaseCC(false)
	}
	if c.s.typeAware && len(c.waiting) == 0 {
		c.increaseCC(true)
	}
	// Listing 1 lines 10-23.
	for _, e := range c.waiting {
		if c.lim.full() && len(c.running) == 0 {
			break
		}
		if e.batch {
			// Listing 3 lines 10.1-10.5: batch tasks only use spare
			// bandwidth, and never preempt.
			if !c.saturated(e.t.Src, true) && !c.saturated(e.t.Dst, true) {
				if room := c.lim.room(e.t.Src, e.t.Dst); room > 0 {
					c.start(e, room)
				}
			}
			continue
		}
		if c.s.typeAware && c.preemptBatchFor(e) {
			continue
		}
		c.scheduleSEAL(e)
	}
}

// scheduleSEAL is Listing 1 lines 11-22 for one waiting task.
func (c *cycle) scheduleSEAL(e *entry) {
	t := e.t
	small := t.Size < c.o.SmallSize
	room := c.lim.room(t.Src, t.Dst)
	satSrc, satDst := c.saturated(t.Src, false), c.saturated(t.Dst, false)
	if room > 0 && (small || (!satSrc && !satDst)) {
		c.start(e, room)
		return
	}
	// Blocked: by saturation, or by a hard concurrency limit. Look for
	// running tasks whose xfactor is low enough to give way.
	blockers := c.blockers(t, satSrc, satDst, room)
	if len(blockers) == 0 {
		return
	}
	var cl []*entry
	for _, host := range blockers {
		if slices.ContainsFunc(cl, func(r *entry) bool { return host == "*" || r.t.Src == host || r.t.Dst == host }) {
			continue // a victim chosen for another endpoint frees this one too
		}
		found := c.findTasksToPreempt(host, e, cl)
		if len(found) == 0 {
			return // this endpoint stays blocked: keep waiting
		}
		cl = append(cl, found...)
	}
	if c.roomWithout(t, cl) == 0 {
		return // the victims would not make room for it after all
	}
	c.preempt(cl, t.ID)
	c.start(e, c.lim.room(t.Src, t.Dst))
}

// roomWithout is the room t would have at its endpoints if the tasks in cl
// stopped. Preemptions are decided only when it is positive, so a victim
// never stops for a task that does not start.
func (c *cycle) roomWithout(t *Task, cl []*entry) int {
	for _, r := range cl {
		if !r.stopped {
			c.lim.add(r.t.Src, r.t.Dst, -r.cc)
		}
	}
	room := c.lim.room(t.Src, t.Dst)
	for _, r := range cl {
		if !r.stopped {
			c.lim.add(r.t.Src, r.t.Dst, r.cc)
		}
	}
	return room
}

// blockers lists the endpoints that keep t from starting now: "*" stands
// for the total concurrency limit.
func (c *cycle) blockers(t *Task, satSrc, satDst bool, room int) []string {
	var b []string
	add := func(h string) {
		if !slices.Contains(b, h) {
			b = append(b, h)
		}
	}
	if satSrc {
		add(t.Src)
	}
	if satDst {
		add(t.Dst)
	}
	if room == 0 {
		for _, h := range [2]string{t.Src, t.Dst} {
			if ep := c.snap.Endpoints[h]; ep != nil && ep.MaxCC > 0 && c.lim.cc[h] >= ep.MaxCC {
				add(h)
			}
		}
		if c.lim.full() {
			add("*")
		}
	}
	return b
}

// findTasksToPreempt is FindTasksToPreempt of Listing 2 for endpoint host
// ("*" means any endpoint), with the tasks in already counted as gone.
func (c *cycle) findTasksToPreempt(host string, w *entry, already []*entry) []*entry {
	cands := c.byEP[host]
	if host == "*" {
		cands = c.running
		cands = append([]*entry(nil), cands...)
		sortAsc(cands)
	}
	var cl []*entry
	gone := append([]*entry(nil), already...)
	for _, r := range cands {
		if r.stopped || r.started || r.t.Pending || slices.Contains(gone, r) {
			continue
		}
		// Candidates come in ascending xfactor: once one is too high,
		// all the rest are too.
		if w.xf < c.o.PF*r.xf {
			break
		}
		cl = append(cl, r)
		gone = append(gone, r)
		xf := c.xfactor(w, gone)
		if xf <= c.maxXF(cands, gone) {
			break
		}
	}
	return cl
}

// maxXF is the largest xfactor among es that are not in gone.
func (c *cycle) maxXF(es []*entry, gone []*entry) float64 {
	for i := len(es) - 1; i >= 0; i-- {
		if !es[i].stopped && !slices.Contains(gone, es[i]) {
			return es[i].xf
		}
	}
	return 0
}

// preemptBatchFor is Listing 3 lines 10.7-10.11: an interactive task
// preempts running batch tasks at its endpoints if that raises its
// predicted throughput. It reports whether the task was started.
func (c *cycle) preemptBatchFor(e *entry) bool {
	t := e.t
	var b []*entry
	for _, h := range [2]string{t.Src, t.Dst} {
		for _, r := range c.byEP[h] {
			if r.batch && !r.stopped && !r.started && !r.t.Pending && !slices.Contains(b, r) {
				b = append(b, r)
			}
		}
	}
	if len(b) == 0 {
		return false
	}
	cl := c.findBatchTasksToPreempt(e, b)
	if len(cl) == 0 || c.roomWithout(t, cl) == 0 {
		return false
	}
	c.preempt(cl, t.ID)
	c.start(e, c.lim.room(t.Src, t.Dst))
	return true
}

// findBatchTasksToPreempt is Listing 4. A batch task joins the candidates
// only if taking it away raises the interactive task's predicted
// throughput by more than Beta (the listing says "more than"; a
// threshold keeps a kilobyte file from evicting a 50 GB task for a
// negligible gain).
func (c *cycle) findBatchTasksToPreempt(w *entry, b []*entry) []*entry {
	t := w.t
	src, dst := c.loads(t, b)
	_, goal := c.findThrCC(t, src, dst, c.o.MaxCC)
	src, dst = c.loads(t, nil)
	_, thr := c.findThrCC(t, src, dst, c.o.MaxCC)
	var cl []*entry
	for _, bt := range b {
		if thr >= goal {
			break
		}
		src, dst := c.loads(t, append(slices.Clip(cl), bt))
		_, thr2 := c.findThrCC(t, src, dst, c.o.MaxCC)
		if thr2 > thr*(1+c.o.Beta) {
			thr = thr2
			cl = append(cl, bt)
		}
	}
	return cl
}

// start decides to start e with the concurrency chooseCC picks, at most
// room.
func (c *cycle) start(e *entry, room int) {
	t := e.t
	src, dst := c.loads(t, nil)
	cc, thr := c.chooseCC(t, nil, src, dst, min(room, c.o.MaxCC))
	c.lim.add(t.Src, t.Dst, cc)
	c.obs[t.Src] += thr
	if t.Dst != t.Src {
		c.obs[t.Dst] += thr
	}
	e.started = true
	e.cc = cc
	c.byEP[t.Src] = append(c.byEP[t.Src], e)
	if t.Dst != t.Src {
		c.byEP[t.Dst] = append(c.byEP[t.Dst], e)
	}
	c.version++
	c.out = append(c.out, Decision{Kind: Start, Task: t.ID, CC: cc})
}

// chooseCC is FindThrCC as SEAL uses it to start or resize a task:
// concurrency starts at 1 and grows while one more partial transfer raises
// the predicted throughput by more than Beta of the task's own. "Raises"
// counts the whole endpoint: at each of the task's endpoints, the
// predicted aggregate of all its links with the task at cc+1 against cc.
//
// Why not the task's own prediction alone: endpoints share their capacity
// per connection, so under load one more connection always raises a
// task's own share, taken from the others; judged on its own, FindThrCC
// would give tasks the most concurrency exactly when load is highest, the
// opposite of what §4.3 says SEAL does ("increases transfer concurrency
// during low-load situations") and of its "sufficient, but not excessive"
// concurrency. On idle endpoints the two readings agree. FindThrCC (the
// exported, per-task form) stays the priority estimate inside xfactor.
//
// self, if not nil, is the running task being resized: its current
// connections are taken out first.
func (c *cycle) chooseCC(t *Task, self *entry, srcLoad, dstLoad, maxCC int) (int, float64) {
	if t.Size <= c.o.SplitMin {
		maxCC = 1
	}
	maxCC = max(min(maxCC, c.o.MaxCC), 1)
	k := chooseKey{memoKey{t.Src, t.Dst, c.sizeKey(t.Size), max(srcLoad, 0), max(dstLoad, 0), maxCC}, c.version}
	if self == nil {
		if r, ok := c.chosen[k]; ok {
			return r.cc, r.thr
		}
	}
	bestCC, best := 1, c.est(t, 1, srcLoad, dstLoad)
	prev := [2]float64{c.aggregateWith(t.Src, t, self, 1), c.aggregateWith(t.Dst, t, self, 1)}
	for cc := 2; cc <= maxCC; cc++ {
		thr := c.est(t, cc, srcLoad, dstLoad)
		agg := [2]float64{c.aggregateWith(t.Src, t, self, cc), c.aggregateWith(t.Dst, t, self, cc)}
		gain := math.Min(agg[0]-prev[0], agg[1]-prev[1])
		if thr <= best || gain <= best*c.o.Beta {
			break
		}
		bestCC, best, prev = cc, thr, agg
	}
	if self == nil {
		c.chosen[k] = thrCC{bestCC, best}
	}
	return bestCC, best
}

type chooseKey struct {
	memoKey
	version int
}

// aggregateWith predicts the total throughput of endpoint name's links if
// task t ran with concurrency cc (and self, if not nil, were gone).
func (c *cycle) aggregateWith(name string, t *Task, self *entry, cc int) float64 {
	type link struct {
		src, dst string
		cc       int
		size     int64
	}
	var links []link
	add := func(src, dst string, n int, size int64) {
		for i := range links {
			if links[i].src == src && links[i].dst == dst {
				links[i].cc += n
				links[i].size = max(links[i].size, size)
				return
			}
		}
		links = append(links, link{src, dst, n, size})
	}
	for _, e := range c.byEP[name] {
		if e.stopped || e == self {
			continue
		}
		add(e.t.Src, e.t.Dst, e.cc, e.t.Size)
	}
	add(t.Src, t.Dst, cc, t.Size)
	load := func(x string) int {
		n := c.lim.cc[x]
		if self != nil && (self.t.Src == x || self.t.Dst == x) {
			n -= self.cc
		}
		if t.Src == x || t.Dst == x {
			n += cc
		}
		return n
	}
	sum := 0.0
	for _, l := range links {
		sum += c.est(&Task{Src: l.src, Dst: l.dst, Size: l.size}, l.cc, load(l.src)-l.cc, load(l.dst)-l.cc)
	}
	return sum
}

// preempt decides to preempt the tasks in cl in favour of task id.
func (c *cycle) preempt(cl []*entry, id TaskID) {
	for _, r := range cl {
		if r.stopped {
			continue
		}
		r.stopped = true
		c.version++
		t := r.t
		c.lim.add(t.Src, t.Dst, -r.cc)
		c.obs[t.Src] -= t.Rate
		if t.Dst != t.Src {
			c.obs[t.Dst] -= t.Rate
		}
		c.out = append(c.out, Decision{Kind: Preempt, Task: t.ID, For: id})
	}
}

// increaseCC is Listing 1 lines 7-9: when nothing waits, give running
// tasks (largest remaining bytes first) more concurrency while their
// endpoints are not saturated. batch selects STEAL's batch or interactive
// tasks; SEAL passes false and sees no batch tasks.
func (c *cycle) increaseCC(batch bool) {
	rs := make([]*entry, 0, len(c.running))
	for _, e := range c.running {
		if e.batch == batch && !e.stopped && !e.t.Pending {
			rs = append(rs, e)
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].t.Left != rs[j].t.Left {
			return rs[i].t.Left > rs[j].t.Left
		}
		return rs[i].t.ID < rs[j].t.ID
	})
	for _, e := range rs {
		t := e.t
		if t.Size <= c.o.SplitMin || t.CC >= c.o.MaxCC {
			continue
		}
		if c.saturated(t.Src, batch) || c.saturated(t.Dst, batch) {
			continue
		}
		room := c.lim.room(t.Src, t.Dst)
		if room == 0 {
			continue
		}
		src, dst := c.loads(t, nil)
		cc, thr := c.chooseCC(t, e, src, dst, min(t.CC+room, c.o.MaxCC))
		if cc <= t.CC {
			continue
		}
		c.lim.add(t.Src, t.Dst, cc-t.CC)
		e.cc = cc
		c.version++
		gain := max(thr-t.Rate, 0)
		c.obs[t.Src] += gain
		if t.Dst != t.Src {
			c.obs[t.Dst] += gain
		}
		e.started = true
		c.out = append(c.out, Decision{Kind: SetCC, Task: t.ID, CC: cc})
	}
}
