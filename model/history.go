// Package model owns throughput prediction: the history-based estimator of
// SC'15 §4.2 (historical averages per transfer signature, corrected by how
// recent transfers on the same pair compare with their own signatures'
// averages), and the parallel-stream curve fits used to calibrate and to
// answer "how many streams, what throughput".
//
// Estimators are fed observations by whoever runs transfers (the simulator
// or the live engine) and are read by the pure schedulers of package sched.
//
// The curve fits follow Yin, Yildirim et al., "A Data Throughput Prediction
// and Optimization Service for Widely Distributed Many-Task Computing": the
// second-order model Th(n) = n/sqrt(a n² + b n + c) (SecondOrder) and the
// dynamic-order model n²/Th² = a n^c + b (DynamicOrder, c by Newton's
// iteration), both over any knob that behaves like parallelism (streams,
// concurrency, pipelining). Predict is the entry point: it fits, checks
// the fit, falls back, and says why in words users can read; Sampler is
// the paper's Algorithm 2 for choosing the sampled levels; EvalTuning
// measures all of it against a measured tuning campaign (ReadTuningCSV).
// Everything here is pure: no I/O, no clocks, no global state.
package model

import (
	"math"
	"sort"

	"github.com/sluice-dtn/sluice/sched"
)

// Obs is one observation of a transfer: its signature and the throughput it
// achieved (bytes per second of data movement, start-up excluded).
type Obs struct {
	Time             float64
	Src, Dst         string
	CC               int
	SrcLoad, DstLoad int // known concurrency at the endpoints, the task's own excluded
	Size             int64
	Thr              float64
}

// sig is a transfer signature, bucketed so that history generalises.
type sig struct {
	cc, src, dst, size int
}

// Cells are stored in rows: one row per (source load, destination load,
// size class), indexed by concurrency. A scheduler asks about one pair
// at concurrency 1, 2, 3, ... in a row (FindThrCC), so one row lookup,
// by a packed integer key, serves several predictions from adjacent
// memory; a prediction was a quarter of a SEAL cycle when every
// signature was a separate map entry reached by a pointer. Signatures
// outside the rows' range (never met in practice) go to a plain map.
const (
	rowMaxCC   = 256     // concurrency 1..rowMaxCC lives in rows
	rowMaxLoad = 1 << 28 // load buckets below this pack into a row key
	rowMaxSize = 1 << 4  // size classes below this pack into a row key
)

type row struct {
	cells []cell // cells[cc-1]; a zero cell stands for no cell
}

// rowKey packs s without its concurrency; ok is false if s is outside
// the rows' range.
func rowKey(s sig) (key uint64, ok bool) {
	if s.cc < 1 || s.cc > rowMaxCC || s.src < 0 || s.src >= rowMaxLoad || s.dst < 0 || s.dst >= rowMaxLoad || s.size < 0 || s.size >= rowMaxSize {
		return 0, false
	}
	return uint64(s.src)<<32 | uint64(s.dst)<<4 | uint64(s.size), true
}

// unpackRowKey is rowKey's inverse, with concurrency cc.
func unpackRowKey(key uint64, cc int) sig {
	return sig{cc: cc, src: int(key >> 32), dst: int(key>>4) & (rowMaxLoad - 1), size: int(key & (rowMaxSize - 1))}
}

// cell is what the history knows at one signature: the observations'
// count and sum, and the prior (the fallback's answer), kept together so
// that a prediction costs one lookup.
type cell struct {
	n, sum   float64
	prior    float64
	hasPrior bool
}

type recentObs struct {
	t     float64
	ratio float64 // observed / historical average at its own signature
}

type pairHist struct {
	src, dst string // the pair's endpoints, for the fallback
	// errEWMA is the recent relative error of predictions on the pair.
	errEWMA float64
	errSeen bool
	// The pair's rows: the first fewRows in a list searched in order
	// (most pairs have a row or two, and a short list is a cache line
	// where a map is several), the rest in a map.
	few  []rowRef
	many map[uint64]*row
	far  map[sig]*cell // signatures rowKey cannot pack
	// The row asked about last: predictions for one signature at rising
	// concurrency come in a row.
	lastRow    *row
	lastRowKey uint64
	recent     []recentObs // oldest first
	h          *History    // the owner, which counts the rows
	corr       float64
	corrAt     float64 // the time corr was computed for
	dirty      bool    // observations added since
}

// History is the SC'15 §4.2 estimator. It is not safe for concurrent use:
// the world that owns it feeds it between scheduling cycles.
type History struct {
	// pairs holds the pairs by source, indexed by the endpoints'
	// numbers in eps: a scheduling cycle over a hundred thousand pairs
	// looks each up, grouped by source. A map keyed by both names cost
	// two string hashes and compares that read the names from memory;
	// one map of every pair, a few cache misses per lookup in a map of
	// hundreds of thousands; a source's own map stays in cache while its
	// pairs are asked about.
	pairs []map[uint32]*pairHist // pairs[source][destination]
	eps   map[string]uint32
	// errSum/errN: relative prediction error over all observations.
	errSum, errN float64
	now          float64
	// The pair asked about last: schedulers ask about one pair many times
	// in a row.
	last             *pairHist
	lastSrc, lastDst string
	lastSrcID        uint32
	// RecentWindow is how far back "recent" transfers reach (seconds;
	// default 1800, the 30 minutes over which the paper finds load stable).
	RecentWindow float64
	// RecentMax is how many recent observations per pair are kept
	// (default 32).
	RecentMax int
	// Fallback answers for signatures with no history at all (may be nil,
	// then such queries predict 0). It is asked once per signature, at
	// the signature's own values (loads LoadBucket gives, the size
	// ClassSize gives), so that a prediction depends on the signature
	// alone and not on which of its loads or sizes was asked about first:
	// a scheduler that asks fewer or other questions, or in another order,
	// gets the same answers.
	Fallback func(src, dst string, cc, srcLoad, dstLoad int, size int64) float64
	// MaxRows bounds the memory of remembered fallback answers: past it,
	// rows that hold no observation (only priors, cheap to ask the
	// fallback for again) are dropped. A facility's thousands of pairs,
	// each asked about at every load it passes through, otherwise grow
	// the history without end (4.4 GB of a 1.5-hour facility replay). 0:
	// no bound. NewHistory sets DefaultMaxRows.
	MaxRows int
	rows    int // rows (and far cells) made
	dropAt  int // the row count at which priors are next dropped
}

// DefaultMaxRows is NewHistory's MaxRows: a quarter of a million rows,
// about 150 MB at sixteen concurrency levels a row.
const DefaultMaxRows = 1 << 18

// NewHistory returns an empty estimator.
func NewHistory() *History {
	return &History{eps: map[string]uint32{}, RecentWindow: 1800, RecentMax: 32, MaxRows: DefaultMaxRows}
}

// LoadBucket maps a known load (concurrency) to its history bucket: exact up
// to 8, then coarser as loads grow, because throughput changes less per
// added connection at high load.
func LoadBucket(n int) int {
	switch {
	case n <= 8:
		return max(n, 0)
	case n <= 16:
		return n &^ 1
	case n <= 32:
		return n &^ 3
	case n <= 64:
		return n &^ 7
	default:
		return n &^ 15
	}
}

// SizeClass is the SC'15 size class of a transfer: 0-1M, 1-10M, 10-100M,
// 100M-1G, 1-10G (and larger).
func SizeClass(size int64) int {
	switch {
	case size <= 1e6:
		return 0
	case size <= 10e6:
		return 1
	case size <= 100e6:
		return 2
	case size <= 1e9:
		return 3
	default:
		return 4
	}
}

// SizeKey implements sched.SizeKeyer: predictions depend on size only
// through its class.
func (h *History) SizeKey(size int64) int64 { return int64(SizeClass(size)) }

// ClassSize is the representative size of size class c (as SizeClass
// numbers them): the geometric middle of the class (300 kB for 0-1M),
// so SizeClass(ClassSize(c)) == c.
func ClassSize(c int) int64 {
	return classSize[min(max(c, 0), len(classSize)-1)]
}

var classSize = [5]int64{300e3, 3.2e6, 32e6, 320e6, 3.2e9}

func sigOf(cc, srcLoad, dstLoad int, size int64) sig {
	return sig{cc: cc, src: LoadBucket(srcLoad), dst: LoadBucket(dstLoad), size: SizeClass(size)}
}

func (h *History) pair(src, dst string) *pairHist {
	if h.last != nil && h.lastSrc == src && h.lastDst == dst {
		return h.last
	}
	// Pairs are asked about grouped by source, often: the last pair's
	// source number serves again without a lookup.
	var sid uint32
	if h.last != nil && h.lastSrc == src {
		sid = h.lastSrcID
	} else {
		sid = h.epID(src)
	}
	did := h.epID(dst)
	for int(sid) >= len(h.pairs) {
		h.pairs = append(h.pairs, nil)
	}
	m := h.pairs[sid]
	if m == nil {
		m = map[uint32]*pairHist{}
		h.pairs[sid] = m
	}
	p := m[did]
	if p == nil {
		p = &pairHist{src: src, dst: dst, corr: 1, h: h} // maps made on first write: most pairs are only asked about
		m[did] = p
	}
	h.last, h.lastSrc, h.lastDst, h.lastSrcID = p, src, dst, sid
	return p
}

// epID numbers endpoint name for the pairs' keys, numbering it if new.
func (h *History) epID(name string) uint32 {
	id, ok := h.eps[name]
	if !ok {
		id = uint32(len(h.eps))
		h.eps[name] = id
	}
	return id
}

// SetNow tells the estimator the current time, which decides which
// observations are recent. Call it before each scheduling cycle.
func (h *History) SetNow(t float64) { h.now = t }

// AddHistory records a historical observation (for example from a past
// log or a calibration campaign) without touching the recent set.
func (h *History) AddHistory(o Obs) {
	if !o.usable() {
		return
	}
	p := h.pair(o.Src, o.Dst)
	s := sigOf(o.CC, o.SrcLoad, o.DstLoad, o.Size)
	c := p.cell(s)
	c.n++
	c.sum += o.Thr
}

// usable reports whether o can join the history: a positive, finite
// throughput (NaN and +Inf, from a transfer timed at zero seconds or a
// corrupt stored observation, would make its signature's average, and
// every prediction there, NaN or +Inf for good) and a concurrency.
func (o Obs) usable() bool {
	return o.Thr > 0 && !math.IsInf(o.Thr, 1) && o.CC > 0
}

// Observe records a fresh observation: it becomes part of the recent set
// that corrects predictions on its pair, and of the history.
func (h *History) Observe(o Obs) {
	if !o.usable() {
		return
	}
	p := h.pair(o.Src, o.Dst)
	if base := h.base(p, o.Src, o.Dst, sigOf(o.CC, o.SrcLoad, o.DstLoad, o.Size)); base > 0 {
		// How far off the prediction for this observation was.
		e := math.Abs(o.Thr-base*h.correction(p)) / o.Thr
		if p.errSeen {
			p.errEWMA += 0.2 * (e - p.errEWMA)
		} else {
			p.errEWMA, p.errSeen = e, true
		}
		h.errSum += e
		h.errN++
		p.recent = append(p.recent, recentObs{t: o.Time, ratio: o.Thr / base})
		if len(p.recent) > h.RecentMax {
			p.recent = p.recent[len(p.recent)-h.RecentMax:]
		}
		p.dirty = true
	}
	h.AddHistory(o)
}

// base is the historical average at a signature; without data there, the
// fallback (a calibration prior); without one, the nearest signature with
// data on the pair (same size class, closest concurrency and loads).
func (h *History) base(p *pairHist, src, dst string, s sig) float64 {
	if h.overBound() {
		h.dropPriors()
	}
	c := p.find(s)
	if c != nil {
		if v, ok := h.known(c); ok {
			return v
		}
	}
	if h.Fallback != nil {
		if c == nil || !c.hasPrior {
			// Ask first: a cell pointer does not outlive a call that
			// may add cells.
			prior := h.Fallback(src, dst, s.cc, s.src, s.dst, ClassSize(s.size))
			c = p.cell(s)
			c.prior, c.hasPrior = prior, true
		}
		if c.prior > 0 {
			return c.prior
		}
	}
	best, bestD := 0.0, math.Inf(1)
	near := func(k sig, c *cell) {
		if k.size != s.size || c.n == 0 {
			return
		}
		d := math.Abs(math.Log(float64(k.cc)/float64(s.cc)))*4 +
			math.Abs(math.Log1p(float64(k.src))-math.Log1p(float64(s.src))) +
			math.Abs(math.Log1p(float64(k.dst))-math.Log1p(float64(s.dst)))
		// Ties broken by value so map order cannot change the answer.
		v := c.sum / c.n
		if d < bestD || (d == bestD && v < best) {
			best, bestD = v, d
		}
	}
	p.eachRow(func(key uint64, r *row) {
		for i := range r.cells {
			near(unpackRowKey(key, i+1), &r.cells[i])
		}
	})
	for k, c := range p.far {
		near(k, c)
	}
	return best
}

// overBound reports whether the remembered fallback answers are due to
// be dropped (see MaxRows and dropPriors).
func (h *History) overBound() bool { return h.MaxRows > 0 && h.rows > max(h.MaxRows, h.dropAt) }

// known is what cell c answers on its own, as base reads it: the average
// of its observations, else a remembered fallback answer (if positive).
func (h *History) known(c *cell) (float64, bool) {
	if c.n > 0 {
		return c.sum / c.n, true
	}
	if h.Fallback != nil && c.hasPrior && c.prior > 0 {
		return c.prior, true
	}
	return 0, false
}

// dropPriors removes every row (and far cell) that holds no observation,
// only remembered fallback answers. It runs when the history passes
// MaxRows rows, and next when the rows left have doubled, so that a
// history whose observed rows alone pass the bound does not sweep at
// every query. Which rows go depends only on the calls made so far: the
// simulator stays deterministic.
func (h *History) dropPriors() {
	h.rows = 0
	for _, m := range h.pairs {
		for _, p := range m {
			p.dropPriors()
		}
	}
	h.dropAt = 2 * h.rows
}

// dropPriors drops the pair's rows and far cells that hold no
// observation (see History.dropPriors), counting the rest in the
// History's rows.
func (p *pairHist) dropPriors() {
	h := p.h
	few := p.few[:0]
	for _, f := range p.few {
		if f.r.observed() {
			few = append(few, f)
		}
	}
	clear(p.few[len(few):])
	p.few = few
	h.rows += len(few)
	for key, r := range p.many {
		if r.observed() {
			h.rows++
		} else {
			delete(p.many, key)
		}
	}
	for k, c := range p.far {
		if c.n > 0 {
			h.rows++
		} else {
			delete(p.far, k)
		}
	}
	p.lastRow = nil
}

// Rows is how many rows (signature groups) the history holds now; see
// MaxRows.
func (h *History) Rows() int { return h.rows }

// observed reports whether any cell of r holds an observation.
func (r *row) observed() bool {
	for i := range r.cells {
		if r.cells[i].n > 0 {
			return true
		}
	}
	return false
}

// fewRows is how many of a pair's rows are kept in its list.
const fewRows = 8

// rowRef is a row in a pair's list, with its key.
type rowRef struct {
	key uint64
	r   *row
}

// eachRow calls f for each of the pair's rows, in no set order.
func (p *pairHist) eachRow(f func(key uint64, r *row)) {
	for _, x := range p.few {
		f(x.key, x.r)
	}
	for key, r := range p.many {
		f(key, r)
	}
}

// row returns the pair's row for key, making it if create is set (else
// nil if there is none).
func (p *pairHist) row(key uint64, create bool) *row {
	if p.lastRow != nil && p.lastRowKey == key {
		return p.lastRow
	}
	var r *row
	for _, f := range p.few {
		if f.key == key {
			r = f.r
			break
		}
	}
	if r == nil && p.many != nil {
		r = p.many[key]
	}
	if r == nil {
		if !create {
			return nil
		}
		r = &row{}
		if len(p.few) < fewRows {
			p.few = append(p.few, rowRef{key, r})
		} else {
			if p.many == nil {
				p.many = map[uint64]*row{}
			}
			p.many[key] = r
		}
		p.h.rows++
	}
	p.lastRow, p.lastRowKey = r, key
	return r
}

// find returns the pair's cell at s, or nil if there is none. The
// pointer is valid until the next call to cell.
func (p *pairHist) find(s sig) *cell {
	key, ok := rowKey(s)
	if !ok {
		return p.far[s]
	}
	r := p.row(key, false)
	if r == nil || s.cc > len(r.cells) {
		return nil
	}
	return &r.cells[s.cc-1]
}

// cell returns the pair's cell at s, making it if needed. The pointer is
// valid until the next call to cell.
func (p *pairHist) cell(s sig) *cell {
	key, ok := rowKey(s)
	if !ok {
		c := p.far[s]
		if c == nil {
			if p.far == nil {
				p.far = map[sig]*cell{}
			}
			c = &cell{}
			p.far[s] = c
			p.h.rows++
		}
		return c
	}
	r := p.row(key, true)
	if s.cc > len(r.cells) {
		r.cells = append(r.cells, make([]cell, s.cc-len(r.cells))...)
	}
	return &r.cells[s.cc-1]
}

// correction is the mean ratio of recent observed throughput to the
// historical average at each observation's signature. The paper corrects
// by the difference; a ratio carries the correction across signatures of
// different scale (a cc=1 and a cc=8 transfer differ several-fold).
func (h *History) correction(p *pairHist) float64 {
	if !p.dirty && p.corrAt == h.now {
		return p.corr
	}
	p.dirty, p.corrAt = false, h.now
	cut := h.now - h.RecentWindow
	i := sort.Search(len(p.recent), func(i int) bool { return p.recent[i].t >= cut })
	p.recent = p.recent[i:]
	if len(p.recent) == 0 {
		p.corr = 1
		return 1
	}
	var s float64
	for _, r := range p.recent {
		s += r.ratio
	}
	p.corr = math.Min(math.Max(s/float64(len(p.recent)), 0.2), 2)
	return p.corr
}

// Throughput implements sched.Estimator.
func (h *History) Throughput(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
	return h.pair(src, dst).Throughput(cc, srcLoad, dstLoad, size)
}

// ThroughputCurve implements sched.CurveEstimator: thr[i] is
// Throughput(src, dst, fromCC+i, srcLoad, dstLoad, size), with the pair
// and its correction looked up once.
func (h *History) ThroughputCurve(src, dst string, fromCC, srcLoad, dstLoad int, size int64, thr []float64) {
	h.pair(src, dst).ThroughputCurve(fromCC, srcLoad, dstLoad, size, thr)
}

// Pair implements sched.PairEstimator: the pair's history, whose
// answers are the History's for the pair.
func (h *History) Pair(src, dst string) sched.PairModel { return h.pair(src, dst) }

// Throughput implements sched.PairModel.
func (p *pairHist) Throughput(cc, srcLoad, dstLoad int, size int64) float64 {
	return p.h.base(p, p.src, p.dst, sigOf(cc, srcLoad, dstLoad, size)) * p.h.correction(p)
}

// ThroughputCurve implements sched.PairModel. The levels of a curve
// share a row (loads and size class), which is looked up once; a cell
// that answers alone (observations, or a remembered fallback answer) is
// read from it as base would read it, and any other level goes through
// base.
func (p *pairHist) ThroughputCurve(fromCC, srcLoad, dstLoad int, size int64, thr []float64) {
	h := p.h
	corr := h.correction(p)
	s := sigOf(fromCC, srcLoad, dstLoad, size)
	key, inRows := rowKey(s)
	var r *row
	if inRows {
		r = p.row(key, false)
	}
	for i := range thr {
		s.cc = fromCC + i
		if r != nil && s.cc <= len(r.cells) && !h.overBound() {
			if v, ok := h.known(&r.cells[s.cc-1]); ok {
				thr[i] = v * corr
				continue
			}
		}
		thr[i] = h.base(p, p.src, p.dst, s) * corr
		// base may have made the row, grown it or dropped it.
		if r = nil; inRows && s.cc < rowMaxCC {
			r = p.row(key, false)
		}
	}
}

// PredictionError implements sched.ErrorReporter: the recent relative
// error (exponentially weighted) of this estimator's predictions on the
// pair, measured as observations arrive; 0 if none yet.
func (h *History) PredictionError(src, dst string) float64 {
	s, okS := h.eps[src]
	d, okD := h.eps[dst]
	if okS && okD && int(s) < len(h.pairs) {
		if p := h.pairs[s][d]; p != nil {
			return p.errEWMA
		}
	}
	return 0
}

// MeanError is the mean relative error of the predictions made for every
// observation so far (0 if none).
func (h *History) MeanError() float64 {
	if h.errN == 0 {
		return 0
	}
	return h.errSum / h.errN
}

// Ideal is the "ideal" query of §4.2: the best throughput over
// concurrency 1..maxCC at zero load, and the concurrency that gives it.
func (h *History) Ideal(src, dst string, size int64, maxCC int) (int, float64) {
	bestCC, best := 1, 0.0
	for cc := 1; cc <= maxCC; cc++ {
		if t := h.Throughput(src, dst, cc, 0, 0, size); t > best {
			bestCC, best = cc, t
		}
	}
	return bestCC, best
}
