package sched

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
)

// SEAL is the load-aware scheduler of SC'15 §4 (Listings 1-2); with
// typeAware set it is STEAL (§5, Listings 3-4), which also separates batch
// from interactive tasks.
//
// Where the published listings and the text disagree, or leave a choice
// open, SEAL follows the text, and says so:
//   - FindThrCC returns the last concurrency whose predicted throughput rose
//     by more than Beta, and that concurrency's throughput (the listing's
//     loop returns one past it).
//   - When SEAL starts or resizes a task, "rose" is judged on the whole
//     endpoint, not on the task alone: see chooseCC.
//   - FindTasksToPreempt adds a running task to the candidates when the
//     waiting task's xfactor is at least PF times the running task's ("if
//     its xfactor is lower than that of the waiting task by pf or more");
//     the listing's comparison is reversed.
//   - A waiting task whose endpoints are saturated is started only if
//     preemption frees every saturated endpoint it uses, and victims are
//     preempted only if the task then has room to start.
//   - Saturation test (b), "concurrency up by F gives throughput up by
//     0.25×F or less", is read as an elasticity of the endpoint's
//     aggregate over its (up to three) busiest links: see probeSaturated.
type SEAL struct {
	opt       Options
	typeAware bool
	plus      bool   // seal+: see sealplus.go
	label     string // the name it was made with, if not the usual one
	// eager (tests only) tests saturation for every waiting task, also
	// where the answer does not count, to show that skipping those tests
	// changes no decision.
	eager bool
	// cycles recycles the working memory of finished cycles (a cycle over
	// a hundred thousand tasks needs megabytes); no decision depends on it.
	cycles sync.Pool
}

// Name implements Scheduler.
func (s *SEAL) Name() string {
	switch {
	case s.label != "":
		return s.label
	case s.typeAware:
		return "steal"
	case s.plus:
		return "seal+"
	}
	return "seal"
}

// Schedule implements Scheduler: one cycle of Listing 1 (SEAL) or of
// Listing 1 with the changes of Listing 3 (STEAL).
func (s *SEAL) Schedule(snap *Snapshot) []Decision {
	c := newCycle(s, snap)
	// The decisions are handed over, so each cycle needs a new slice.
	// Sized like the last cycle's (never more than one decision per
	// task): appended from nothing, twenty thousand decisions were
	// copied through a dozen larger slices, megabytes a cycle.
	if n := min(c.lastOut+c.lastOut/4, len(snap.Waiting)+len(snap.Running)); n > 0 {
		c.out = make([]Decision, 0, n)
	}
	c.run()
	out := c.out
	c.lastOut = len(out)
	c.out, c.snap, c.byXF = nil, nil, nil
	s.cycles.Put(c)
	return out
}

// entry is a task plus what this cycle computed for it.
type entry struct {
	t        *Task
	id       TaskID
	size     int64
	src, dst int32 // endpoint indexes
	cc       int   // concurrency now: the task's, or what this cycle gave it
	xf       float64
	// A running task's xfactor is computed when first needed (most
	// endpoints of a large facility have no waiting task, so nothing
	// there is ever compared), at the loads of the cycle's start:
	// load0 holds them, xfOK says xf is set.
	load0   [2]int
	xfOK    bool
	running bool  // the task's Running (copied: the hot paths read no Task)
	wres    int32 // a waiting entry's index in the cycle's wres, +1 (0: none)
	batch   bool  // batch for STEAL's purposes (after promotion)
	stopped bool  // preempted in this cycle
	started bool  // started or resized in this cycle
	// pm is the estimator's handle of the task's pair: index+1 in the
	// cycle's pms (0: none, the estimator is asked by name).
	pm int32
}

// link is the tasks of one source-destination pair at an endpoint, taken
// together.
type link struct {
	src, dst int32
	cc       int
	size     int64
	pm       int32 // the pair's handle, as entry.pm
}

// epState is one endpoint during a cycle. Endpoints are indexed so that
// the hot paths of a cycle over a hundred thousand tasks hash no strings.
type epState struct {
	name   string
	prefix uint64    // namePrefix(name), to compare names quickly
	ep     *Endpoint // nil if the snapshot does not describe it
	// maxCC is ep.MaxCC (0 without ep: no limit), copied so that the
	// room test every waiting task makes reads no Endpoint.
	maxCC int
	cc    int     // known load: concurrency the scheduler runs there
	cc0   int     // cc at the cycle's start, before any decision
	obs   float64 // observed throughput, adjusted by this cycle's decisions
	// ver changes whenever a decision touches the endpoint; the caches
	// below are valid for the version they were computed at.
	ver     int
	satVer  [2]int  // +1, so that zero means "not computed"
	sat     [2]bool // test (a)
	probe   bool    // test (b) on the links in use, valid while probed
	probed  bool
	pb      int32  // index+1 in the cycle's probes of this endpoint's probeBase; 0: none yet
	linkVer int    // 0: links not built; 1: built, unsorted; 2: sorted
	links   []link // busiest first
	// run is the running entries here: the n0 running at the cycle's
	// start, in ascending xfactor once sorted is set (see runAt), then
	// those this cycle started.
	run    []*entry
	n0     int
	sorted bool
	// noVictimXF: a waiting task with this xfactor or lower finds no
	// task to preempt here.
	noVictimXF float64
	// probeTaken: this cycle's probe (Endpoint.Probe) has been given here.
	probeTaken bool
}

// tableKey keys a cycle's memos (see keyTable): for findThrCC's, a pair
// and size key; for a saturation probe with a candidate link, the
// endpoint, its version and the link.
type tableKey struct {
	ep, src, dst int32
	size         int64
	ver          int
}

// keyTable maps tableKeys to int32 values. It is an open-addressing hash
// table of plain values: a cycle over a hundred thousand tasks on as many
// pairs asks its memos hundreds of thousands of times, and Go maps keyed
// by the structs (a generic hash of the key, a probe, and an insert on
// every miss) were a third of the cycle. Slots of an earlier cycle are
// told apart by gen, so a cycle starts without clearing the table.
type keyTable struct {
	slots []keySlot
	n     int    // slots claimed in this generation
	gen   uint32 // the current generation; slots of others are empty
}

type keySlot struct {
	k   tableKey
	val int32
	gen uint32
}

// reset empties the table for a new cycle, keeping its memory.
func (t *keyTable) reset() {
	t.n = 0
	t.gen++
	if t.gen == 0 { // wrapped: old stamps could look current
		clear(t.slots)
		t.gen = 1
	}
}

// slot returns k's slot, claimed with val 0 if k is new. The pointer is
// valid until the next call.
func (t *keyTable) slot(k tableKey) *keySlot {
	if t.gen == 0 {
		t.gen = 1
	}
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := k.hash() & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = keySlot{k: k, gen: t.gen}
			t.n++
			return s
		}
		if s.k == k {
			return s
		}
	}
}

// grow doubles the table (at least 1024 slots) and re-inserts the
// current generation's slots.
func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]keySlot, max(2*len(old), 1024))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.gen != t.gen {
			continue
		}
		i := s.k.hash() & mask
		for t.slots[i].gen == t.gen {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// hash mixes a tableKey (splitmix64's finalizer over its fields).
func (k tableKey) hash() uint64 {
	h := (uint64(uint32(k.src))<<32 | uint64(uint32(k.dst))) ^ uint64(k.size)*0x9e3779b97f4a7c15
	h ^= (uint64(uint32(k.ep))<<32 | uint64(uint32(k.ver))) * 0xc2b2ae3d27d4eb4f
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

type loadMemo struct {
	srcLoad, dstLoad, maxCC int
	thrCC
}

type memoNode struct {
	loadMemo
	next int32
}

// wkey is a waiting entry's sort key: k is descKey(xfactor).
type wkey struct {
	k  uint64
	id TaskID
	i  int32
}

type thrCC struct {
	cc  int
	thr float64
}

// cycle holds the state of one scheduling cycle. Everything in it is
// derived from the snapshot, so Schedule stays pure.
type cycle struct {
	s       *SEAL
	o       Options
	snap    *Snapshot
	idx     map[string]int32
	eps     []epState
	total   int // total concurrency
	running []*entry
	byXF    []*entry // running entries, ascending xfactor (lazily, for the total limit)
	waiting []*entry
	// memo is findThrCC's: for each pair and size key, the head of a
	// list (index+1 into memoNodes; 0 ends it) of the load levels asked
	// about. The lists live in one array kept from cycle to cycle, so a
	// cycle over a hundred thousand pairs allocates no list per pair.
	memo      keyTable
	memoNodes []memoNode
	candSat   keyTable    // saturated's answers with a candidate link: 1 false, 2 true
	probes    []probeBase // see probeParts
	admit     []admitMemo // see admission
	// gen numbers the cycles this working memory has served; an
	// admission memo entry is valid only in the cycle of its gen, which
	// spares clearing the memo for each of a day's million small cycles.
	gen     uint64
	sizeKey func(int64) int64
	curve   CurveEstimator // the estimator, if it is one; else nil
	// pe is the estimator, if it is a PairEstimator (else nil), and pms
	// the handles of the pairs it was asked for. A handle travels with
	// the entries and links of its pair (their pm): looking pairs up
	// again, in a table of a hundred thousand, cost a cache miss each,
	// more than the estimator's own answer.
	pe  PairEstimator
	pms []PairModel
	// curveBuf is findThrCC's scratch for a CurveEstimator's answers.
	curveBuf  [2 * curveChunk]float64
	curveWant int // the first chunk's length: see searchThrCC
	out       []Decision
	lastOut   int // the number of decisions of the last cycle this memory served
	// Buffers kept from one cycle to the next.
	// recent remembers the last endpoints looked up by name.
	recent     [2]recentEP
	recentNext int
	wbuf       []entry
	rbuf       []entry
	wsorted    []entry
	keys       []wkey
	keyTmp     []wkey
	recs       []pairRec
	recTmp     []pairRec
	wres       []waitRes
}

// CurveEstimator may be implemented by an Estimator that predicts a run of
// concurrencies on one pair at once more cheaply than one call each (a
// pair's history looked up once, not once per level). thr[i] must be
// exactly Throughput(src, dst, fromCC+i, srcLoad, dstLoad, size): a
// cycle's decisions are the same with it or without.
type CurveEstimator interface {
	ThroughputCurve(src, dst string, fromCC, srcLoad, dstLoad int, size int64, thr []float64)
}

// PairEstimator may be implemented by an Estimator that can look a pair
// up once and then answer questions about it without finding it by name
// again. A cycle asks about one pair many times (FindThrCC at each
// concurrency, at the cycle's loads and at none; every link at an
// endpoint while a start chooses its concurrency), and on a queue whose
// tasks are each on their own pair, finding the pair by its two names
// was a third of a History estimator's cost.
type PairEstimator interface {
	Estimator
	Pair(src, dst string) PairModel
}

// PairModel answers an Estimator's questions about one pair: Throughput
// and ThroughputCurve must be exactly the Estimator's (and
// CurveEstimator's) answers for that pair, so that a cycle decides the
// same with handles or without. A handle stays valid while the
// estimator does not change (a cycle).
type PairModel interface {
	Throughput(cc, srcLoad, dstLoad int, size int64) float64
	ThroughputCurve(fromCC, srcLoad, dstLoad int, size int64, thr []float64)
}

// curveChunk is how many concurrencies findThrCC asks a CurveEstimator
// for at once: most searches stop within the first eight.
const curveChunk = 8

// SizeKeyer may be implemented by an Estimator whose predictions depend on
// size only through a coarse key (such as a size class). Schedulers then
// share one prediction among tasks with the same key, which keeps a cycle
// over a hundred thousand waiting tasks fast.
type SizeKeyer interface {
	SizeKey(size int64) int64
}

func newCycle(s *SEAL, snap *Snapshot) *cycle {
	c, _ := s.cycles.Get().(*cycle)
	if c == nil {
		c = &cycle{idx: map[string]int32{}}
	}
	c.s, c.o, c.snap, c.total = s, s.opt, snap, 0
	clear(c.idx)
	c.recent = [2]recentEP{}
	c.memo.reset()
	c.memoNodes = c.memoNodes[:0]
	c.candSat.reset()
	c.probes = c.probes[:0]
	c.gen++
	c.curveWant = 0
	c.eps = c.eps[:0]
	c.running = c.running[:0]
	c.sizeKey = func(n int64) int64 { return n }
	if k, ok := snap.Estimator.(SizeKeyer); ok {
		c.sizeKey = k.SizeKey
	}
	c.curve, _ = snap.Estimator.(CurveEstimator)
	c.pe, _ = snap.Estimator.(PairEstimator)
	clear(c.pms) // an old cycle's handles are not kept alive
	c.pms = c.pms[:0]
	// Endpoints are indexed as tasks name them. Indexes only key caches;
	// every order that reaches a decision is by name or task ID, so they
	// never leak into the result.
	// The running entries live in one array (not one allocation each),
	// sized up front so that pointers to them stay valid.
	if cap(c.rbuf) < len(snap.Running) {
		c.rbuf = make([]entry, 0, len(snap.Running))
	}
	c.rbuf = c.rbuf[:0]
	for _, t := range snap.Running {
		c.rbuf = append(c.rbuf, entry{t: t, id: t.ID, size: t.Size, src: c.endpoint(t.Src), dst: c.endpoint(t.Dst), cc: t.CC, running: t.Running, batch: c.isBatch(t)})
		e := &c.rbuf[len(c.rbuf)-1]
		c.eps[e.src].cc += t.CC
		c.eps[e.dst].cc += t.CC
		c.total += t.CC
		c.running = append(c.running, e)
	}
	for _, e := range c.running {
		if e.t.Rate == 0 && e.t.Pending {
			// Still starting: its throughput is not observed yet, but it
			// will take its share; count the model's prediction so one
			// cycle's starts are not repeated by the next.
			thr := c.est(c.pmOf(e), e.src, e.dst, e.t.Size, e.cc, c.eps[e.src].cc-e.cc, c.eps[e.dst].cc-e.cc)
			c.eps[e.src].obs += thr
			c.eps[e.dst].obs += thr
		}
		s, d := c.loads(e, nil)
		e.load0 = [2]int{s, d}
		c.eps[e.src].run = append(c.eps[e.src].run, e)
		if e.dst != e.src {
			c.eps[e.dst].run = append(c.eps[e.dst].run, e)
		}
	}
	for i := range c.eps {
		c.eps[i].n0 = len(c.eps[i].run)
		c.eps[i].cc0 = c.eps[i].cc
	}
	// W is kept as values in one array and sorted in place: a cycle over
	// a hundred thousand waiting tasks is dominated by memory access.
	// The buffers are sized up front: a first cycle (an empty pool) would
	// otherwise copy each of them through a dozen doublings.
	n := len(snap.Waiting)
	w := slices.Grow(c.wbuf[:0], n)
	keys := slices.Grow(c.keys[:0], n)
	recs := slices.Grow(c.recs[:0], n)
	for _, t := range snap.Waiting {
		if t.Pending {
			continue
		}
		e := entry{t: t, id: t.ID, size: t.Size, src: c.endpoint(t.Src), dst: c.endpoint(t.Dst), running: t.Running, batch: c.isBatch(t)}
		if !e.running {
			recs = append(recs, pairRec{e.src, e.dst, e.size, int32(len(w)), t.IdealTT <= 0})
		}
		w = append(w, e)
	}
	c.recs = recs
	c.waitingXFs(w, recs)
	for i := range w {
		keys = append(keys, wkey{descKey(w[i].xf), w[i].id, int32(i)})
	}
	// W: descending xfactor, ties by ID for determinism.
	c.wbuf, c.keys = w, keys
	c.keyTmp = sortKeys(keys, c.keyTmp)
	// Lay the entries out in queue order, so the scheduling loop walks
	// memory in sequence; the copy's scattered reads are independent and
	// overlap, the loop's would each wait for memory.
	sorted := slices.Grow(c.wsorted[:0], len(w))
	for _, k := range keys {
		sorted = append(sorted, w[k.i])
	}
	c.wsorted = sorted
	c.waiting = slices.Grow(c.waiting[:0], len(sorted))
	for i := range sorted {
		c.waiting = append(c.waiting, &sorted[i])
	}
	return c
}

// descKey maps an xfactor to an integer that sorts ascending as the
// xfactor descends (non-negative floats order like their bit patterns).
func descKey(xf float64) uint64 {
	if math.IsNaN(xf) || xf < 0 {
		xf = 0
	}
	return ^math.Float64bits(xf)
}

// sortKeys sorts keys by (k, id) with a least-significant-digit radix sort
// on the high 33 bits of k and a comparison sort within runs of equal
// high bits. A comparison sort of a hundred thousand waiting tasks was a
// quarter of a cycle; this is a few linear passes. tmp is scratch space,
// returned for reuse.
//
// Digits are 11 bits: the histograms are made in one read of the keys and
// fit in 24 KB of stack (16-bit digits needed 512 KB per pass, which went
// to the heap, and a 64 Ki-entry prefix sum per pass, more work than the
// keys themselves). The high 33 bits of an xfactor are its exponent and
// 21 bits of mantissa, which tell nearly all xfactors of a queue apart:
// the low digits cost three more passes over every key to order the few
// that agree there, which the comparison sort does for those alone.
func sortKeys(keys, tmp []wkey) []wkey {
	if len(keys) < 256 {
		slices.SortFunc(keys, cmpKey)
		return tmp
	}
	if cap(tmp) < len(keys) {
		tmp = make([]wkey, len(keys))
	}
	tmp = tmp[:len(keys)]
	const (
		bits   = 11
		digits = 3
		low    = 64 - digits*bits // bits left to the comparison sort
		mask   = 1<<bits - 1
	)
	var count [digits][1 << bits]uint32
	for _, k := range keys {
		for d := range digits {
			count[d][(k.k>>(low+d*bits))&mask]++
		}
	}
	src, dst := keys, tmp
	for d := range digits {
		shift := uint(low + d*bits)
		c := &count[d]
		if c[(src[0].k>>shift)&mask] == uint32(len(src)) {
			continue // every key has the same digit here
		}
		pos := uint32(0)
		for i := range c {
			c[i], pos = pos, pos+c[i]
		}
		for _, k := range src {
			i := (k.k >> shift) & mask
			dst[c[i]] = k
			c[i]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	// Within runs of equal high bits, by the rest of k, then (equal
	// xfactors: tasks alike in every way) by ID.
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].k>>low == keys[i].k>>low {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], cmpKey)
		}
		i = j
	}
	return tmp
}

func cmpKey(a, b wkey) int {
	switch {
	case a.k < b.k:
		return -1
	case a.k > b.k:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// endpoint returns the index of endpoint name, adding it if new.
func (c *cycle) endpoint(name string) int32 {
	// Tasks come in jobs: the same endpoints many times in a row.
	for _, h := range c.recent {
		if h.ok && h.name == name {
			return h.i
		}
	}
	i, ok := c.idx[name]
	if !ok {
		i = c.addEndpoint(name)
		c.idx[name] = i
	}
	c.recent[c.recentNext] = recentEP{name, i, true}
	c.recentNext = (c.recentNext + 1) % len(c.recent)
	return i
}

type recentEP struct {
	name string
	i    int32
	ok   bool
}

func (c *cycle) addEndpoint(name string) int32 {
	i := int32(len(c.eps))
	ep := c.snap.Endpoints[name]
	st := epState{name: name, prefix: namePrefix(name), ep: ep}
	if ep != nil {
		st.obs, st.maxCC = ep.Observed, ep.MaxCC
	}
	if len(c.eps) < cap(c.eps) {
		// Keep the slices an earlier cycle grew here.
		old := c.eps[:i+1][i]
		st.run, st.links = old.run[:0], old.links[:0]
	}
	c.eps = append(c.eps, st)
	return i
}

func sortAsc(es []*entry) {
	slices.SortFunc(es, func(a, b *entry) int {
		if a.xf != b.xf {
			if a.xf < b.xf {
				return -1
			}
			return 1
		}
		return cmpID(a, b)
	})
}

func cmpID(a, b *entry) int {
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
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

// est asks the estimator about the pair src-dst, through its handle pm
// if there is one (index+1 in pms).
func (c *cycle) est(pm, src, dst int32, size int64, cc, srcLoad, dstLoad int) float64 {
	if pm > 0 {
		return c.pms[pm-1].Throughput(cc, max(srcLoad, 0), max(dstLoad, 0), size)
	}
	return c.snap.Estimator.Throughput(c.eps[src].name, c.eps[dst].name, cc, max(srcLoad, 0), max(dstLoad, 0), size)
}

// pmOf returns e's pm, asking the estimator for the handle on first use:
// the running tasks' pairs are asked for only if the cycle asks about
// them (most endpoints of a large facility have no waiting task, so
// nothing there is predicted).
func (c *cycle) pmOf(e *entry) int32 {
	if e.pm == 0 && c.pe != nil {
		e.pm = c.newPair(e.src, e.dst)
	}
	return e.pm
}

// newPair asks a PairEstimator for the handle of the pair src-dst and
// returns its pm (0 if the estimator gives none).
func (c *cycle) newPair(src, dst int32) int32 {
	if c.pe == nil {
		return 0
	}
	c.pms = append(c.pms, c.pe.Pair(c.eps[src].name, c.eps[dst].name))
	return int32(len(c.pms))
}

// room is the largest concurrency a new task between src and dst may get
// under the hard limits.
func (c *cycle) room(src, dst int32) int {
	r := unlimited
	if c.snap.TotalMaxCC > 0 {
		r = c.snap.TotalMaxCC - c.total
	}
	for _, e := range [2]int32{src, dst} {
		if st := &c.eps[e]; st.maxCC > 0 {
			r = min(r, st.maxCC-st.cc)
		}
	}
	return max(r, 0)
}

func (c *cycle) full() bool { return c.snap.TotalMaxCC > 0 && c.total >= c.snap.TotalMaxCC }

// add changes the known load of a pair by n connections.
func (c *cycle) add(src, dst int32, n int) {
	c.eps[src].cc += n
	c.eps[dst].cc += n
	c.total += n
	c.eps[src].ver++
	c.eps[dst].ver++
}

// findThrCC is FindThrCC of Listing 2: starting at concurrency 1, raise it
// while the predicted throughput rises by more than Beta, up to maxCC.
func (c *cycle) findThrCC(e *entry, srcLoad, dstLoad, maxCC int) (int, float64) {
	if e.size <= c.o.SplitMin {
		maxCC = 1
	}
	maxCC = max(min(maxCC, c.o.MaxCC), 1)
	srcLoad, dstLoad = max(srcLoad, 0), max(dstLoad, 0)
	if e.wres > 0 {
		// A waiting task: waitingXFs has answered the two questions
		// most often asked again.
		if g := &c.wres[e.wres-1]; maxCC == int(g.maxCC) {
			if srcLoad == max(c.eps[e.src].cc0, 0) && dstLoad == max(c.eps[e.dst].cc0, 0) {
				return int(g.atCC), g.at
			}
			if srcLoad == 0 && dstLoad == 0 && g.idealCC > 0 {
				return int(g.idealCC), g.ideal
			}
		}
	}
	// One table lookup per pair and size key; the few load levels a
	// cycle asks about for one pair are then found by a short scan.
	slot := c.memo.slot(tableKey{src: e.src, dst: e.dst, size: c.sizeKey(e.size)})
	head := slot.val
	for i := head; i != 0; i = c.memoNodes[i-1].next {
		if m := &c.memoNodes[i-1]; m.srcLoad == srcLoad && m.dstLoad == dstLoad && m.maxCC == maxCC {
			return m.cc, m.thr
		}
	}
	bestCC, best := c.searchThrCC(c.pmOf(e), e.src, e.dst, e.size, srcLoad, dstLoad, maxCC)
	c.memoNodes = append(c.memoNodes, memoNode{loadMemo{srcLoad, dstLoad, maxCC, thrCC{bestCC, best}}, head})
	slot.val = int32(len(c.memoNodes)) // the estimator cannot have moved slot: only slot claims slots
	return bestCC, best
}

// searchThrCC is findThrCC's search, unremembered, with maxCC and the
// loads already brought into range.
func (c *cycle) searchThrCC(pm, src, dst int32, size int64, srcLoad, dstLoad, maxCC int) (int, float64) {
	// The predictions at rising concurrency, from a CurveEstimator a
	// few at a time (one lookup of the pair each, not one per level),
	// into the cycle's buffer: a local one passed to the interface would
	// be allocated on every call.
	//
	// The first chunk is as long as the last search that could go past
	// curveChunk needed (up to twice that): searches on one cycle tend
	// to stop at the same depth, and one that stops just past the chunk
	// would otherwise cost a second call, and a second chunk mostly
	// unused, every time. Which levels are asked for changes no answer.
	if c.curve == nil && pm == 0 {
		bestCC, best := 1, c.est(0, src, dst, size, 1, srcLoad, dstLoad)
		for cc := 2; cc <= maxCC; cc++ {
			thr := c.est(0, src, dst, size, cc, srcLoad, dstLoad)
			if thr <= best*(1+c.o.Beta) {
				break
			}
			bestCC, best = cc, thr
		}
		return bestCC, best
	}
	buf := &c.curveBuf
	curve := func(from int, thr []float64) {
		if pm > 0 {
			c.pms[pm-1].ThroughputCurve(from, srcLoad, dstLoad, size, thr)
			return
		}
		c.curve.ThroughputCurve(c.eps[src].name, c.eps[dst].name, from, srcLoad, dstLoad, size, thr)
	}
	from, have := 1, min(max(curveChunk, c.curveWant), maxCC) // buf[:have] holds concurrencies from..from+have-1
	curve(from, buf[:have])
	bestCC, best := 1, buf[0]
	cc := 2
	for ; cc <= maxCC; cc++ {
		if cc >= from+have {
			from, have = cc, min(curveChunk, maxCC-cc+1)
			curve(from, buf[:have])
		}
		thr := buf[cc-from]
		if thr <= best*(1+c.o.Beta) {
			break
		}
		bestCC, best = cc, thr
	}
	if maxCC > curveChunk {
		c.curveWant = min(cc, maxCC, len(buf)) // the deepest concurrency read
	}
	return bestCC, best
}

// FindThrCC is Listing 2's FindThrCC for tests and tools: the concurrency
// SEAL would choose for t at the given known loads, judged on t's own
// predicted throughput, and that throughput.
func FindThrCC(est Estimator, o Options, t *Task, srcLoad, dstLoad int) (int, float64) {
	o = o.withDefaults()
	c := &cycle{s: &SEAL{opt: o}, o: o, snap: &Snapshot{Estimator: est}, idx: map[string]int32{}}
	c.sizeKey = func(n int64) int64 { return n }
	e := &entry{t: t, id: t.ID, size: t.Size, src: c.endpoint(t.Src), dst: c.endpoint(t.Dst), running: t.Running}
	return c.findThrCC(e, srcLoad, dstLoad, o.MaxCC)
}

// idealTT is TT_ideal: the transfer time under zero load at the best
// concurrency, plus the start-up cost.
func (c *cycle) idealTT(e *entry) float64 {
	if e.t.IdealTT > 0 {
		return e.t.IdealTT
	}
	_, thr := c.findThrCC(e, 0, 0, c.o.MaxCC)
	return IdealTT(e.t.Size, thr, c.snap.StartupCost)
}

// IdealTT is TT_ideal for size bytes at the ideal throughput thr.
func IdealTT(size int64, thr, startup float64) float64 {
	if thr <= 0 {
		return math.Inf(1)
	}
	return startup + float64(size)/thr
}

// loads returns the known loads at e's endpoints, leaving out e itself and
// the tasks in without.
func (c *cycle) loads(e *entry, without []*entry) (int, int) {
	src, dst := c.eps[e.src].cc, c.eps[e.dst].cc
	if e.running && !e.stopped {
		src -= e.cc
		dst -= e.cc
	}
	for _, w := range without {
		if w.src == e.src || w.dst == e.src {
			src -= w.cc
		}
		if w.dst == e.dst || w.src == e.dst {
			dst -= w.cc
		}
	}
	return src, dst
}

// xfactor is UpdateXfactor (eq. 3, with Listing 3's batch weighting):
// (WT + TT_load) / TT_ideal, where the running tasks in without are taken
// away from the load.
func (c *cycle) xfactor(e *entry, without []*entry) float64 {
	src, dst := c.loads(e, without)
	return c.xfactorLoads(e, src, dst, len(without) == 0)
}

// xfactorLoads is xfactor at the given loads; alone says no task is
// taken away.
func (c *cycle) xfactorLoads(e *entry, src, dst int, alone bool) float64 {
	t := e.t
	_, thr := c.findThrCC(e, src, dst, c.o.MaxCC)
	if t.Running && t.Rate > 0 && alone && c.plusOn(noErrorGuard) && c.modelWrong(e) {
		thr = t.Rate
	}
	return c.xfactorAt(e, thr, c.idealTT(e))
}

// runningXF sets the xfactor of e, running at the cycle's start, as the
// cycle's start saw it.
func (c *cycle) runningXF(e *entry) {
	if !e.xfOK {
		e.xf = c.xfactorLoads(e, e.load0[0], e.load0[1], true)
		e.xfOK = true
	}
}

// runAt returns endpoint i's running entries: those running at the
// cycle's start in ascending xfactor, then those this cycle started.
// The xfactors are computed and sorted on the first call.
func (c *cycle) runAt(i int32) []*entry {
	st := &c.eps[i]
	if !st.sorted {
		for _, e := range st.run[:st.n0] {
			c.runningXF(e)
		}
		sortAsc(st.run[:st.n0])
		st.sorted = true
	}
	return st.run
}

// allRunningXF sets the xfactor of every task running at the cycle's
// start.
func (c *cycle) allRunningXF() {
	for _, e := range c.running {
		c.runningXF(e)
	}
}

// waitMemo holds, for the waiting tasks of one pair met in a row, the
// throughputs their xfactors need: at the pair's current loads and at
// zero load, per size key and SplitMin side. Before the first decision
// of a cycle these depend on nothing else.
type waitMemo struct {
	src, dst int32
	pm       int32 // the pair's handle
	n        int
	k        [8]waitMemoKey
	v        [8]waitRes
}

type waitMemoKey struct {
	sizeKey int64
	split   bool // at or below SplitMin, which caps FindThrCC at 1
}

// waitRes is what a waiting task's xfactor takes from the estimator, the
// same for all the tasks of one pair, size key and SplitMin side:
// FindThrCC (capped at maxCC) at the loads of the cycle's start and at
// zero load (if the task needs TT_ideal). The cycle asks FindThrCC these
// questions again for the same task (TT_ideal when looking for victims,
// for one), and findThrCC answers them from here (see entry.wres).
type waitRes struct {
	at, ideal            float64
	atCC, idealCC, maxCC int32 // idealCC 0: no ideal asked for
	pm                   int32 // the pair's handle
}

// pairRec is a waiting task as waitingXFs groups it: its pair, its size,
// its index in W, and whether it needs TT_ideal from the estimator.
type pairRec struct {
	src, dst int32
	size     int64
	i        int32
	ideal    bool
}

// waitingXFs sets the xfactor of each waiting entry in w, as xfactor(e,
// nil) would before any decision of the cycle, with the same arithmetic.
//
// The estimator's part depends only on the pair, the size key and the
// loads at the cycle's start, so it is worked out once per pair and size
// key: the tasks are grouped by pair (a stable radix sort, linear) and
// each group asks the estimator directly. Jobs put a pair's tasks next
// to each other, but nothing guarantees it, and a queue whose tasks are
// each on their own pair made a memo lookup per task (in a table of a
// hundred thousand pairs, a cache miss each) most of the cycle's start.
//
// recs are the waiting entries not running, in W's order.
func (c *cycle) waitingXFs(w []entry, recs []pairRec) {
	c.recTmp = sortRecs(recs, c.recTmp, uint64(len(c.eps)))
	// The answers go to an array in W's order, so that the pass over W
	// below reads them in sequence.
	res := slices.Grow(c.wres[:0], len(w))[:len(w)]
	c.wres = res
	var m waitMemo
	for _, r := range recs {
		res[r.i] = *c.waitThrs(&m, r.src, r.dst, r.size, r.ideal)
	}
	for i := range w {
		e := &w[i]
		if e.running {
			e.xf = c.xfactor(e, nil) // not a waiting task after all
			continue
		}
		r := &res[i]
		e.wres = int32(i) + 1
		e.pm = r.pm
		ideal := e.t.IdealTT
		if ideal <= 0 {
			ideal = IdealTT(e.t.Size, r.ideal, c.snap.StartupCost) // as idealTT
		}
		e.xf = c.xfactorAt(e, r.at, ideal)
	}
}

// waitThrs returns the answers for a waiting task of size between src
// and dst (with the zero-load one if ideal), from m if it has them.
func (c *cycle) waitThrs(m *waitMemo, src, dst int32, size int64, ideal bool) *waitRes {
	if m.n == 0 || m.src != src || m.dst != dst {
		// A new pair (m.n is 0 only before the first): its answers
		// and its handle (0 for an estimator without handles).
		m.n, m.pm = 0, c.newPair(src, dst)
	}
	m.src, m.dst = src, dst
	k := waitMemoKey{c.sizeKey(size), size <= c.o.SplitMin}
	maxCC := c.o.MaxCC
	if k.split {
		maxCC = 1
	}
	maxCC = max(min(maxCC, c.o.MaxCC), 1)
	j := 0
	for j < m.n && m.k[j] != k {
		j++
	}
	if j == m.n {
		if j == len(m.k) {
			j = len(m.k) - 1 // many size keys on one pair: reuse the last slot
		} else {
			m.n++
		}
		cc, thr := c.searchThrCC(m.pm, src, dst, size, max(c.eps[src].cc0, 0), max(c.eps[dst].cc0, 0), maxCC)
		m.k[j], m.v[j] = k, waitRes{at: thr, atCC: int32(cc), maxCC: int32(maxCC), pm: m.pm}
	}
	g := &m.v[j]
	if ideal && g.idealCC == 0 {
		cc, thr := c.searchThrCC(m.pm, src, dst, size, 0, 0, maxCC)
		g.ideal, g.idealCC = thr, int32(cc)
	}
	return g
}

// sortRecs sorts recs by pair (source index × n + destination index,
// n the number of endpoints), stably, with a least-significant-digit
// radix sort; tmp is scratch space, returned for reuse.
func sortRecs(recs, tmp []pairRec, n uint64) []pairRec {
	if cap(tmp) < len(recs) {
		tmp = make([]pairRec, len(recs))
	}
	tmp = tmp[:len(recs)]
	const (
		digit = 11
		mask  = 1<<digit - 1
	)
	const maxDigits = 6 // 64 bits
	digits := (bits.Len64(max(n*n, 1)-1) + digit - 1) / digit
	// All the digits' histograms in one read of the records.
	var count [maxDigits][1 << digit]uint32
	for _, r := range recs {
		key := uint64(r.src)*n + uint64(r.dst)
		for d := range digits {
			count[d][key>>(d*digit)&mask]++
		}
	}
	src, dst := recs, tmp
	for d := range digits {
		c := &count[d]
		pos := uint32(0)
		for i := range c {
			c[i], pos = pos, pos+c[i]
		}
		shift := d * digit
		for _, r := range src {
			k := (uint64(r.src)*n + uint64(r.dst)) >> shift & mask
			dst[c[k]] = r
			c[k]++
		}
		src, dst = dst, src
	}
	if len(recs) > 0 && &src[0] != &recs[0] {
		copy(recs, src)
	}
	return tmp
}

// xfactorAt is eq. 3 for e given its predicted throughput under load and
// its TT_ideal.
func (c *cycle) xfactorAt(e *entry, thr, idealTT float64) float64 {
	t := e.t
	ttLoad := t.Trans
	if thr > 0 {
		ttLoad += float64(t.Left) / thr
	} else {
		ttLoad = math.Inf(1)
	}
	if !t.Running {
		ttLoad += c.snap.StartupCost
	}
	xf := (t.Wait + ttLoad) / idealTT
	if e.batch {
		xf *= 0.00001
	}
	return xf
}

// saturated is the saturation test of §4.3 for endpoint i; batch selects
// STEAL's saturated', whose threshold is scaled by Lambda. w, if not nil,
// is the waiting task the answer is for: see probeSaturated.
func (c *cycle) saturated(i int32, batch bool, w *entry) bool {
	st := &c.eps[i]
	if st.ep == nil {
		return false
	}
	b := 0
	if batch {
		b = 1
	}
	if st.satVer[b] != st.ver+1 {
		frac := c.o.SatFraction
		if batch {
			frac *= c.o.Lambda
		}
		st.sat[b] = st.ep.MaxThroughput > 0 && st.obs >= frac*st.ep.MaxThroughput
		st.satVer[b] = st.ver + 1
		st.probed = false
	}
	if st.sat[b] || c.o.NoConcurrencyProbe {
		return st.sat[b]
	}
	// Test (b). The links in use give one answer per version; a waiting
	// task on a pair not in use here gets its own (cached per pair).
	cand, ok := c.candidate(i, w)
	if !ok {
		if !st.probed {
			st.probe, st.probed = c.probeSaturated(i, nil), true
		}
		return st.probe
	}
	// What a probe with a candidate link depends on: the endpoint's
	// state (its version) and the link, whose size counts through the
	// estimator's size key. Without the size, tasks of one pair in other
	// size classes would share the answer of whichever asked first.
	slot := c.candSat.slot(tableKey{i, cand.src, cand.dst, c.sizeKey(cand.size), st.ver})
	if slot.val != 0 {
		return slot.val == 2
	}
	v := c.probeSaturated(i, &cand)
	slot.val = 1
	if v {
		slot.val = 2
	}
	return v
}

// candidate is the link w would open at endpoint i; false if w is nil or
// its pair is already in use there. (A value, not a pointer: it is asked
// for twice per waiting task and must not allocate.)
func (c *cycle) candidate(i int32, w *entry) (link, bool) {
	if w == nil {
		return link{}, false
	}
	for _, l := range c.linksOf(i) {
		if l.src == w.src && l.dst == w.dst {
			return link{}, false
		}
	}
	return link{src: w.src, dst: w.dst, size: w.size, pm: c.pmOf(w)}, true
}

// linksOf returns endpoint i's links (tasks running there grouped by
// source-destination pair), busiest first. They are built on first use
// and then kept up to date by linkAdd.
func (c *cycle) linksOf(i int32) []link {
	st := &c.eps[i]
	if st.linkVer == 0 {
		for _, e := range st.run {
			if !e.stopped {
				c.pmOf(e)
				addLink(&st.links, e, e.cc)
			}
		}
		st.linkVer = 1
	}
	if st.linkVer == 1 {
		slices.SortFunc(st.links, c.cmpLink)
		st.linkVer = 2
	}
	return st.links
}

// cmpLink orders links busiest first, then by source and destination
// name. No two links at an endpoint have the same pair, so the order is
// total: however a list is brought into it, the result is the same.
func (c *cycle) cmpLink(a, b link) int {
	if a.cc != b.cc {
		return b.cc - a.cc
	}
	if a.src != b.src {
		return c.cmpName(a.src, b.src)
	}
	return c.cmpName(a.dst, b.dst)
}

// cmpName compares the names of endpoints i and j, by their first eight
// bytes where those differ.
func (c *cycle) cmpName(i, j int32) int {
	a, b := &c.eps[i], &c.eps[j]
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// namePrefix is the first eight bytes of name, big-endian, zero-padded:
// where two names' prefixes differ, they order as the names do (a
// shorter name padded with zeros is below any longer one it starts).
func namePrefix(name string) uint64 {
	var p uint64
	for k := range 8 {
		p <<= 8
		if k < len(name) {
			p |= uint64(name[k])
		}
	}
	return p
}

// linkAdd records n more connections of e's pair at e's endpoints. Call it
// after the change is visible in e (cc, stopped) and the run lists: links
// not built yet will be built from those.
func (c *cycle) linkAdd(e *entry, n int) {
	c.pmOf(e)
	for _, i := range [2]int32{e.src, e.dst} {
		st := &c.eps[i]
		switch {
		case st.linkVer == 0:
		case n < 0:
			// A link's size is its largest task's: with a task gone it
			// may shrink, which only the run list (which leaves stopped
			// tasks out) tells. The pair's link is rebuilt from it; a
			// rebuild of all the endpoint's links (quadratic in them)
			// on every preemption was a tenth of a busy cycle.
			c.relink(st, e.src, e.dst)
		default:
			j := addLink(&st.links, e, n)
			if st.linkVer == 2 && j >= 0 {
				// Sorted before: only link j changed. A full sort on
				// every start at a busy endpoint was a tenth of a cycle
				// that started twenty thousand tasks.
				c.reposition(st.links, j)
			}
		}
		if e.dst == e.src {
			break
		}
	}
}

// reposition moves links[j] to its place in links, sorted but for it
// (found by binary search: a new link passes dozens of others, and
// comparing names is what costs).
func (c *cycle) reposition(links []link, j int) {
	l := links[j]
	rest := links[:len(links)-1]
	copy(rest[j:], links[j+1:])
	k, hi := 0, len(rest) // the first of rest not before l
	for k < hi {
		if m := int(uint(k+hi) >> 1); c.cmpLink(rest[m], l) < 0 {
			k = m + 1
		} else {
			hi = m
		}
	}
	copy(links[k+1:], rest[k:])
	links[k] = l
}

// relink rebuilds the link of pair src-dst at st from st's run list, as
// a rebuild of all its links would (see linksOf and addLink), after one
// of the pair's tasks stopped, and moves it to its place.
func (c *cycle) relink(st *epState, src, dst int32) {
	j := slices.IndexFunc(st.links, func(l link) bool { return l.src == src && l.dst == dst })
	if j < 0 {
		return
	}
	var l link
	have := false
	for _, r := range st.run {
		if r.stopped || r.src != src || r.dst != dst {
			continue
		}
		if have {
			l.cc += r.cc
			l.size = max(l.size, r.size)
			have = l.cc > 0
		} else if r.cc > 0 {
			l, have = link{src, dst, r.cc, r.size, c.pmOf(r)}, true
		}
	}
	if !have {
		st.links = slices.Delete(st.links, j, j+1)
		return
	}
	st.links[j] = l
	if st.linkVer == 2 {
		c.reposition(st.links, j)
	}
}

// addLink adds n connections of e's pair to links and returns the index
// of its link (-1 if there is none). A new link takes e's pm, which the
// caller has set (pmOf).
func addLink(links *[]link, e *entry, n int) int {
	for j := range *links {
		l := &(*links)[j]
		if l.src == e.src && l.dst == e.dst {
			l.cc += n
			l.size = max(l.size, e.size)
			if l.cc <= 0 {
				*links = slices.Delete(*links, j, j+1)
				return -1
			}
			return j
		}
	}
	if n > 0 {
		*links = append(*links, link{e.src, e.dst, n, e.size, e.pm})
		return len(*links) - 1
	}
	return -1
}

// probeSaturated is saturation test (b). Like the paper it looks at up to
// three links in use at the endpoint (the busiest): if doubling the
// concurrency of any one of them (F = 2) would raise the links' predicted
// aggregate throughput by more than a quarter of the proportional gain in
// their concurrency, the endpoint is not saturated; if none would, it is.
//
// The aggregate matters, not the link's own prediction: with per-connection
// sharing, a link that opens more connections always takes a larger share
// from the others, so its own throughput rises even when the endpoint as a
// whole gains nothing or loses (over-subscription).
//
// cand, if not nil, is the link a waiting task would open (not in use
// yet); it is tested too, with one connection. A single busy path levels
// off on its own (the SGData curve is concave from the first connection),
// so "the links in use gain little" says the path is full, not the
// endpoint; the paper tests up to three links for this reason. When a
// waiting task would go elsewhere, whether its link would add throughput
// is the evidence that settles it.
//
// A cycle asks this for many candidates at one endpoint state: in a
// backlog on random pairs, nearly every waiting task brings a link of its
// own. The links in use answer the same for all of them, so that part
// (probeParts) is worked out once per state of the endpoints involved, and
// a candidate costs one prediction of its own link plus, at most once per
// way it can meet each link in use, one of that link.
func (c *cycle) probeSaturated(i int32, cand *link) bool {
	pb := c.probeParts(i)
	if pb.n == 0 || pb.base <= 0 || pb.gains {
		return false
	}
	if cand == nil {
		return true
	}
	// The links' aggregate with the candidate's one connection: each
	// link in use at the loads that connection adds at its endpoints,
	// then the candidate's own link. The sum runs in the order of the
	// links, the candidate last, as aggregate's does.
	sum := 0.0
	for j := range pb.n {
		l := &pb.links[j]
		if l.cc <= 0 {
			continue
		}
		meet := 0
		if l.src == cand.src || l.src == cand.dst {
			meet |= 1
		}
		if l.dst == cand.src || l.dst == cand.dst {
			meet |= 2
		}
		if pb.have[j]&(1<<meet) == 0 {
			srcLoad, dstLoad := c.eps[l.src].cc-l.cc, c.eps[l.dst].cc-l.cc
			if meet&1 != 0 {
				srcLoad++
			}
			if meet&2 != 0 {
				dstLoad++
			}
			pb.withCand[j][meet] = c.est(l.pm, l.src, l.dst, l.size, l.cc, srcLoad, dstLoad)
			pb.have[j] |= 1 << meet
		}
		sum += pb.withCand[j][meet]
	}
	sum += c.est(cand.pm, cand.src, cand.dst, cand.size, 1, c.eps[cand.src].cc, c.eps[cand.dst].cc)
	gain := sum/pb.base - 1
	return !(gain > 0.25/float64(max(pb.total, 1))) // saturated unless it gains (NaN gains nothing)
}

// probeBase is the part of saturation test (b) at one endpoint that no
// candidate link changes: its (up to three) busiest links in use, their
// aggregate, and whether doubling one of them gains enough. It depends
// on the loads at the links' endpoints, so it is valid while none of
// their versions has changed.
type probeBase struct {
	valid bool
	ver   int       // the endpoint's version (its links follow it)
	vers  [3][2]int // the versions of each link's source and destination
	links [3]link
	n     int
	total int // the links' concurrency
	base  float64
	gains bool
	// withCand[j][m] is link j's prediction with a candidate's one
	// connection added at its source (m&1) and/or destination (m&2);
	// have[j] has bit m set once it is computed.
	withCand [3][4]float64
	have     [3]uint8
}

// probeParts returns endpoint i's probeBase, computed afresh if any load
// it depends on has changed since.
func (c *cycle) probeParts(i int32) *probeBase {
	st := &c.eps[i]
	if st.pb == 0 {
		// Kept apart from epState: few endpoints probe, and a facility
		// has thousands of endpoints to set up every cycle.
		c.probes = append(c.probes, probeBase{})
		st.pb = int32(len(c.probes))
	}
	pb := &c.probes[st.pb-1]
	if pb.valid && pb.ver == st.ver {
		fresh := true
		for j := range pb.n {
			l := &pb.links[j]
			if pb.vers[j] != [2]int{c.eps[l.src].ver, c.eps[l.dst].ver} {
				fresh = false
				break
			}
		}
		if fresh {
			return pb
		}
	}
	active := c.linksOf(i)
	*pb = probeBase{valid: true, ver: st.ver, n: min(len(active), 3)}
	links := pb.links[:pb.n]
	copy(links, active)
	for j, l := range links {
		pb.vers[j] = [2]int{c.eps[l.src].ver, c.eps[l.dst].ver}
		pb.total += l.cc
	}
	// aggregate predicts the links' throughput with extra connections on
	// link k (k < 0: none).
	aggregate := func(k, extra int) float64 {
		sum := 0.0
		for j, l := range links {
			cc := l.cc
			srcLoad, dstLoad := c.eps[l.src].cc-l.cc, c.eps[l.dst].cc-l.cc
			if k >= 0 {
				kl := links[k]
				if j == k {
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
			if cc > 0 {
				sum += c.est(l.pm, l.src, l.dst, l.size, cc, srcLoad, dstLoad)
			}
		}
		return sum
	}
	if pb.n == 0 {
		return pb
	}
	pb.base = aggregate(-1, 0)
	if pb.base <= 0 {
		return pb
	}
	for k := range links {
		extra := max(links[k].cc, 1) // F = 2
		gain := aggregate(k, extra)/pb.base - 1
		if gain > 0.25*float64(extra)/float64(max(pb.total, 1)) {
			pb.gains = true
			break
		}
	}
	return pb
}

func (c *cycle) run() {
	if c.plusOn(noArrival) && c.snap.Trigger == Arrival {
		c.admitOnly()
		return
	}
	defer func() {
		if c.plusOn(noRetune) && len(c.waiting) > 0 {
			c.increaseCC(false)
		}
	}()
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
		if c.full() && len(c.running) == 0 {
			break
		}
		if e.batch {
			// Listing 3 lines 10.1-10.5: batch tasks only use spare
			// bandwidth, and never preempt.
			if !c.saturated(e.src, true, e) && !c.saturated(e.dst, true, e) {
				if room := c.room(e.src, e.dst); room > 0 {
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
	small := e.size < c.o.SmallSize
	if small && !c.s.eager {
		// Small tasks bypass the saturation test: when there is room,
		// start without it (its probes of the endpoints are most of a
		// busy cycle's predictions, and their answer would not count).
		if room := c.room(e.src, e.dst); room > 0 {
			c.start(e, room)
			return
		}
	}
	room, satSrc, satDst := c.admission(e)
	if room > 0 && (small || (!satSrc && !satDst)) {
		c.start(e, room)
		return
	}
	// Blocked: by saturation, or by a hard concurrency limit. Look for
	// running tasks whose xfactor is low enough to give way.
	bl := c.blockers(e, satSrc, satDst, room)
	blockers := bl.list()
	if len(blockers) == 0 {
		return
	}
	for _, host := range blockers {
		if host >= 0 && e.xf <= c.eps[host].noVictimXF && !c.plusOn(noCostPreempt) {
			return // a task with a higher xfactor found no victim here
		}
	}
	var cl []*entry
	for _, host := range blockers {
		if slices.ContainsFunc(cl, func(r *entry) bool { return host < 0 || r.src == host || r.dst == host }) {
			continue // a victim chosen for another endpoint frees this one too
		}
		found := c.findTasksToPreempt(host, e, cl)
		if len(found) == 0 {
			if host >= 0 && len(cl) == 0 {
				// W is served in descending xfactor and preemptions only
				// remove victims, so no later task finds one here either.
				c.eps[host].noVictimXF = max(c.eps[host].noVictimXF, e.xf)
			}
			return // this endpoint stays blocked: keep waiting
		}
		cl = append(cl, found...)
	}
	if c.roomWithout(e, cl) == 0 {
		return // the victims would not make room for it after all
	}
	c.preempt(cl, e.t.ID)
	c.start(e, c.room(e.src, e.dst))
}

// admitMemo is what admission found for one pair, valid while neither
// endpoint's version nor the total concurrency has changed.
type admitMemo struct {
	src, dst       int32
	size           int64 // the estimator's size key (see saturated)
	verSrc, verDst int
	total          int
	room           int
	satSrc, satDst bool
	gen            uint64 // the cycle's gen; 0 never is one
}

// admitSlots is the size of the admission memo, a direct-mapped cache of
// pairs: collisions only cost a recomputation.
const admitSlots = 1 << 10

// admission returns the room between e's endpoints and whether each is
// saturated for e, as scheduleSEAL tests them. In a backlog most waiting
// tasks are blocked, and tasks of one pair come again and again at the
// same endpoint versions; their answer is remembered per pair and size
// key.
//
// The memo returns exactly what the calls would: room depends only on
// the endpoints' loads and the total (a load change bumps the version),
// and saturated's own caches answer a pair at an endpoint version the
// same way every time, so a skipped call would have made no prediction.
// STEAL is left out: its batch test at an endpoint resets the shared
// probe there, so a later interactive test at the same version may
// probe afresh.
func (c *cycle) admission(e *entry) (room int, satSrc, satDst bool) {
	if c.s.typeAware {
		room = c.room(e.src, e.dst)
		return room, c.saturated(e.src, false, e), c.saturated(e.dst, false, e)
	}
	if c.admit == nil {
		c.admit = make([]admitMemo, admitSlots)
	}
	m := &c.admit[(uint32(e.src)*2654435761^uint32(e.dst))&(admitSlots-1)]
	vs, vd := c.eps[e.src].ver, c.eps[e.dst].ver
	total := 0 // the total matters only under a total limit
	if c.snap.TotalMaxCC > 0 {
		total = c.total
	}
	size := c.sizeKey(e.size)
	if m.gen == c.gen && m.src == e.src && m.dst == e.dst && m.size == size && m.verSrc == vs && m.verDst == vd && m.total == total {
		return m.room, m.satSrc, m.satDst
	}
	room = c.room(e.src, e.dst)
	satSrc, satDst = c.saturated(e.src, false, e), c.saturated(e.dst, false, e)
	*m = admitMemo{e.src, e.dst, size, vs, vd, total, room, satSrc, satDst, c.gen}
	return room, satSrc, satDst
}

// roomWithout is the room e would have at its endpoints if the tasks in cl
// stopped. Preemptions are decided only when it is positive, so a victim
// never stops for a task that does not start.
func (c *cycle) roomWithout(e *entry, cl []*entry) int {
	for _, r := range cl {
		if !r.stopped {
			c.eps[r.src].cc -= r.cc
			c.eps[r.dst].cc -= r.cc
			c.total -= r.cc
		}
	}
	room := c.room(e.src, e.dst)
	for _, r := range cl {
		if !r.stopped {
			c.eps[r.src].cc += r.cc
			c.eps[r.dst].cc += r.cc
			c.total += r.cc
		}
	}
	return room
}

// hostList is a short list of endpoints (at most a task's two and the
// total limit), kept by value: one is built for every blocked waiting
// task, and a slice would cost an allocation each time.
type hostList struct {
	h [3]int32
	n int
}

func (b *hostList) add(h int32) {
	if !slices.Contains(b.h[:b.n], h) {
		b.h[b.n] = h
		b.n++
	}
}

func (b *hostList) list() []int32 { return b.h[:b.n] }

// blockers lists the endpoints that keep e from starting now; -1 stands
// for the total concurrency limit.
func (c *cycle) blockers(e *entry, satSrc, satDst bool, room int) hostList {
	var b hostList
	if satSrc {
		b.add(e.src)
	}
	if satDst {
		b.add(e.dst)
	}
	if room == 0 {
		for _, h := range [2]int32{e.src, e.dst} {
			if st := &c.eps[h]; st.maxCC > 0 && st.cc >= st.maxCC {
				b.add(h)
			}
		}
		if c.full() {
			b.add(-1)
		}
	}
	return b
}

// findTasksToPreempt is FindTasksToPreempt of Listing 2 for endpoint host
// (-1 means any endpoint), with the tasks in already counted as gone.
func (c *cycle) findTasksToPreempt(host int32, w *entry, already []*entry) []*entry {
	if c.plusOn(noCostPreempt) {
		return c.findByCost(host, w, already)
	}
	var cands []*entry
	if host < 0 {
		if c.byXF == nil {
			c.allRunningXF()
			c.byXF = append([]*entry(nil), c.running...)
			sortAsc(c.byXF)
		}
		cands = c.byXF
	} else {
		cands = c.runAt(host)
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
		if xf <= maxXF(cands, gone) {
			break
		}
	}
	return cl
}

// maxXF is the largest xfactor among the running entries of es that are
// not in gone.
func maxXF(es []*entry, gone []*entry) float64 {
	for i := len(es) - 1; i >= 0; i-- {
		if !es[i].stopped && !es[i].started && !slices.Contains(gone, es[i]) {
			return es[i].xf
		}
	}
	return 0
}

// preemptBatchFor is Listing 3 lines 10.7-10.11: an interactive task
// preempts running batch tasks at its endpoints if that raises its
// predicted throughput. It reports whether the task was started.
func (c *cycle) preemptBatchFor(e *entry) bool {
	var b []*entry
	for _, h := range [2]int32{e.src, e.dst} {
		for _, r := range c.runAt(h) {
			if r.batch && !r.stopped && !r.started && !r.t.Pending && !slices.Contains(b, r) {
				b = append(b, r)
			}
		}
	}
	if len(b) == 0 {
		return false
	}
	cl := c.findBatchTasksToPreempt(e, b)
	if len(cl) == 0 || c.roomWithout(e, cl) == 0 {
		return false
	}
	c.preempt(cl, e.t.ID)
	c.start(e, c.room(e.src, e.dst))
	return true
}

// findBatchTasksToPreempt is Listing 4. A batch task joins the candidates
// only if taking it away raises the interactive task's predicted
// effective throughput (its size over start-up plus transfer time) by more
// than Beta. The listing says "more than", on throughput alone; counting
// the start-up cost keeps a kilobyte file, whose transfer time is all
// start-up, from evicting a 50 GB task for nothing.
func (c *cycle) findBatchTasksToPreempt(w *entry, b []*entry) []*entry {
	eff := func(without []*entry) float64 {
		src, dst := c.loads(w, without)
		_, thr := c.findThrCC(w, src, dst, c.o.MaxCC)
		if thr <= 0 {
			return 0
		}
		return float64(w.size) / (c.snap.StartupCost + float64(w.size)/thr)
	}
	goal := eff(b)
	thr := eff(nil)
	var cl []*entry
	for _, bt := range b {
		if thr >= goal {
			break
		}
		if thr2 := eff(append(slices.Clip(cl), bt)); thr2 > thr*(1+c.o.Beta) {
			thr = thr2
			cl = append(cl, bt)
		}
	}
	return cl
}

// start decides to start e with the concurrency chooseCC picks, at most
// room.
func (c *cycle) start(e *entry, room int) {
	src, dst := c.loads(e, nil)
	cc, thr := c.chooseCC(e, nil, src, dst, min(room, c.o.MaxCC))
	e.started = true
	e.cc = cc
	c.add(e.src, e.dst, cc)
	c.eps[e.src].obs += thr
	c.eps[e.src].run = append(c.eps[e.src].run, e)
	if e.dst != e.src {
		c.eps[e.dst].obs += thr
		c.eps[e.dst].run = append(c.eps[e.dst].run, e)
	}
	c.linkAdd(e, cc)
	c.out = append(c.out, Decision{Kind: Start, Task: e.id, CC: cc})
}

// chooseCC is FindThrCC as SEAL uses it to start or resize a task:
// concurrency starts at 1 and grows while one more partial transfer raises
// the predicted throughput by more than Beta of the task's own. "Raises"
// counts the endpoint: at each of the task's endpoints, the predicted
// aggregate of its link and the (up to three) busiest other links there,
// with the task at cc+1 against cc.
//
// Why not the task's own prediction alone: endpoints share their capacity
// per connection, so under load one more connection always raises a
// task's own share, taken from the others; judged on its own, FindThrCC
// would give tasks the most concurrency exactly when load is highest, the
// opposite of what §4.3 says SEAL does ("increases transfer concurrency
// during low-load situations") and of its "sufficient, but not excessive"
// concurrency. On idle endpoints the two readings agree. FindThrCC (the
// per-task form) stays the priority estimate inside xfactor.
//
// self, if not nil, is the running task being resized: its current
// connections are taken out first.
func (c *cycle) chooseCC(e *entry, self *entry, srcLoad, dstLoad, maxCC int) (int, float64) {
	if c.o.OwnThroughputCC || c.shortFirst(e) {
		return c.findThrCC(e, srcLoad, dstLoad, maxCC)
	}
	if e.size <= c.o.SplitMin {
		maxCC = 1
	}
	maxCC = max(min(maxCC, c.o.MaxCC), 1)
	// (No memo here: a start changes the loads at both its endpoints, so
	// no later start could ask the same question.)
	q := estQ{c.pmOf(e), e.src, e.dst, e.size, 1, max(srcLoad, 0), max(dstLoad, 0)}
	bestCC, best := 1, c.estQ(q)
	if maxCC > 1 {
		// The links do not change while cc is chosen: read them once.
		views := [2]aggView{c.aggViewOf(e.src, e), c.aggViewOf(e.dst, e)}
		prev := c.aggregatesWith(&views, e, self, 1, q, best)
		for cc := 2; cc <= maxCC; cc++ {
			q.cc = cc
			thr := c.estQ(q)
			if thr <= best {
				break
			}
			agg := c.aggregatesWith(&views, e, self, cc, q, thr)
			if math.Min(agg[0]-prev[0], agg[1]-prev[1]) <= best*c.beta(e) {
				break
			}
			if c.plusOn(noStartupCC) && !c.worthAnotherConnection(e, best, thr) {
				break
			}
			bestCC, best, prev = cc, thr, agg
		}
	}
	return bestCC, best
}

// estQ is one question to the estimator, loads brought into range.
type estQ struct {
	pm, src, dst     int32
	size             int64
	cc               int
	srcLoad, dstLoad int
}

func (c *cycle) estQ(q estQ) float64 {
	return c.est(q.pm, q.src, q.dst, q.size, q.cc, q.srcLoad, q.dstLoad)
}

// aggregatesWith predicts the total throughput at e's source and at its
// destination of e's link and the (up to three) busiest other links
// there, if e ran with concurrency cc (and self, if not nil, were gone).
// Both end with a prediction of e's own link, which is the same question
// at both ends, and, where the link is not in use yet, the question
// chooseCC has just asked (asked, answered thr): each is asked once.
func (c *cycle) aggregatesWith(views *[2]aggView, e *entry, self *entry, cc int, asked estQ, thr float64) [2]float64 {
	var out [2]float64
	var prevQ estQ
	var prev float64
	for k := range views {
		sum, q := c.othersWith(&views[k], e, self, cc)
		var own float64
		switch {
		case k == 1 && q == prevQ:
			own = prev
		case q == asked:
			own = thr
		default:
			own = c.estQ(q)
		}
		out[k], prevQ, prev = sum+own, q, own
	}
	return out
}

// aggView is what aggregatesWith reads of an endpoint's links for a task:
// the (up to three) busiest links other than the task's, and the task's
// own link if it is in use.
type aggView struct {
	others [3]link
	n      int
	own    link
	inUse  bool
}

func (c *cycle) aggViewOf(i int32, e *entry) aggView {
	var v aggView
	for _, l := range c.linksOf(i) {
		switch {
		case l.src == e.src && l.dst == e.dst:
			v.own, v.inUse = l, true
		case v.n < len(v.others):
			v.others[v.n] = l
			v.n++
		}
	}
	return v
}

// othersWith predicts the total throughput at an endpoint (seen as v) of
// the (up to three) busiest links there other than e's, if e ran with
// concurrency cc (and self, if not nil, were gone), and returns the
// question that predicts e's own link under the same assumptions: the
// endpoint's aggregate is the sum plus the answer.
func (c *cycle) othersWith(v *aggView, e *entry, self *entry, cc int) (float64, estQ) {
	load := func(x int32) int {
		n := c.eps[x].cc
		if self != nil && (self.src == x || self.dst == x) {
			n -= self.cc
		}
		if e.src == x || e.dst == x {
			n += cc
		}
		return n
	}
	own := link{e.src, e.dst, cc, e.size, c.pmOf(e)}
	if v.inUse {
		own.cc += v.own.cc
		if self != nil {
			own.cc -= self.cc
		}
		own.size = max(own.size, v.own.size)
	}
	sum := 0.0
	for _, l := range v.others[:v.n] {
		sum += c.est(l.pm, l.src, l.dst, l.size, l.cc, load(l.src)-l.cc, load(l.dst)-l.cc)
	}
	return sum, estQ{own.pm, own.src, own.dst, own.size, own.cc, max(load(own.src)-own.cc, 0), max(load(own.dst)-own.cc, 0)}
}

// preempt decides to preempt the tasks in cl in favour of task id.
func (c *cycle) preempt(cl []*entry, id TaskID) {
	for _, r := range cl {
		if r.stopped {
			continue
		}
		r.stopped = true
		c.add(r.src, r.dst, -r.cc)
		c.linkAdd(r, -r.cc)
		c.eps[r.src].obs -= r.t.Rate
		if r.dst != r.src {
			c.eps[r.dst].obs -= r.t.Rate
		}
		c.out = append(c.out, Decision{Kind: Preempt, Task: r.t.ID, For: id})
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
	byXF := c.plusOn(noRetune)
	if byXF {
		c.allRunningXF()
	}
	sort.Slice(rs, func(i, j int) bool {
		if byXF && rs[i].xf != rs[j].xf {
			// seal+ gives room to the tasks furthest behind first.
			return rs[i].xf > rs[j].xf
		}
		if rs[i].t.Left != rs[j].t.Left {
			return rs[i].t.Left > rs[j].t.Left
		}
		return rs[i].t.ID < rs[j].t.ID
	})
	for _, e := range rs {
		t := e.t
		if t.Size <= c.o.SplitMin || e.cc >= c.o.MaxCC {
			continue
		}
		if c.saturated(e.src, batch, nil) || c.saturated(e.dst, batch, nil) {
			c.probeRaise(e, batch)
			continue
		}
		room := c.room(e.src, e.dst)
		if room == 0 {
			continue
		}
		src, dst := c.loads(e, nil)
		cc, thr := c.chooseCC(e, e, src, dst, min(e.cc+room, c.o.MaxCC))
		if cc <= e.cc {
			continue
		}
		if c.plusOn(noStartupCC) && !c.worthRaise(e, thr) {
			continue
		}
		c.add(e.src, e.dst, cc-e.cc)
		c.linkAdd(e, cc-e.cc)
		e.cc = cc
		gain := max(thr-t.Rate, 0)
		c.eps[e.src].obs += gain
		if e.dst != e.src {
			c.eps[e.dst].obs += gain
		}
		e.started = true
		c.out = append(c.out, Decision{Kind: SetCC, Task: t.ID, CC: cc})
	}
}

// probeRaise is seal+'s upward probe (see Peaks): where each saturated
// endpoint of running task e asks for a probe that no other task has taken
// in this cycle, e gets half as many connections again (at least one
// more), within the hard limits. The model is not asked: above the most
// the endpoint has been seen to carry it knows nothing the probe would
// not tell better. A task not yet observed (no rate) is left alone: its
// connections are not counted in the maximum yet.
func (c *cycle) probeRaise(e *entry, batch bool) {
	if !c.plusOn(noProbe) || e.t.Rate <= 0 {
		return
	}
	for _, i := range [2]int32{e.src, e.dst} {
		st := &c.eps[i]
		if c.saturated(i, batch, nil) && (st.ep == nil || !st.ep.Probe || st.probeTaken) {
			return
		}
	}
	room := c.room(e.src, e.dst)
	cc := min(e.cc+max(1, e.cc/2), e.cc+room, c.o.MaxCC)
	if cc <= e.cc {
		return
	}
	c.eps[e.src].probeTaken, c.eps[e.dst].probeTaken = true, true
	c.add(e.src, e.dst, cc-e.cc)
	c.linkAdd(e, cc-e.cc)
	e.cc = cc
	e.started = true
	c.out = append(c.out, Decision{Kind: SetCC, Task: e.t.ID, CC: cc})
}
