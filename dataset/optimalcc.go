package dataset

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults for Params. The paper gives no values; these are chosen so that
// sampling costs a few percent of a multi-gigabyte dataset while each
// sample still measures a full pipe.
const (
	// DefaultMinChunk is the smallest minimum chunk size: 4 MiB, a few
	// round trips' worth of data at a gigabit and tens of milliseconds.
	// DefaultParams raises it to the BDP, so that every channel of a
	// sample carries at least a full window.
	DefaultMinChunk = 4 << 20
	// DefaultSampleShare caps sampling at a fifth of each phase's bytes:
	// the rest, at least four fifths, moves with the chosen settings.
	DefaultSampleShare = 0.2
	// DefaultMaxPP bounds pipelining at 32 requests in flight per
	// channel, the paper's guard against overwhelming a server with
	// back-to-back requests. It keeps a 5 MB BDP full with 160 KB files.
	DefaultMaxPP = 32
	// DefaultMaxP bounds parallelism at 16 streams per file, where
	// parallel-stream throughput has long flattened out on most paths.
	DefaultMaxP = 16
	// DefaultMaxCC bounds concurrency at 16 channels, the highest level
	// of the paper's experiments (1, 2, 4, 8, 16 over five chunks).
	DefaultMaxCC = 16
	// MinBDP is the smallest BDP AutoParams assumes: 64 KiB, one TCP
	// window without scaling. Even a LAN path with a negligible RTT has
	// that much in flight, and a BDP of 0 would make every file "large".
	MinBDP = 64 << 10
)

// Params tunes OptimalCC. A zero MinChunk is kept (no minimum); other zero
// fields take their defaults.
type Params struct {
	// BDP is the path's bandwidth-delay product in bytes (see BDP). It
	// sets each chunk's pipelining, and files larger than it are sent
	// with parallelism. It must be positive.
	BDP int64
	// MinChunk is Algorithm 2's min_chunk_size: a chunk is divided only
	// while it is more than twice this. It is also how much each
	// channel (each stream, for large files) moves in a sample: the
	// paper's "new chunk created with a pre-calculated minimum chunk
	// size".
	MinChunk int64
	// SampleShare is the largest fraction of each phase's bytes that
	// sampling may use, in (0, 1] (default DefaultSampleShare).
	SampleShare float64
	// MaxPP, MaxP and MaxCC bound pipelining, parallelism and
	// concurrency (defaults DefaultMaxPP, DefaultMaxP, DefaultMaxCC).
	MaxPP, MaxP, MaxCC int
}

// DefaultParams is the defaults for a path with the given BDP.
func DefaultParams(bdp int64) Params {
	return Params{
		BDP:         bdp,
		MinChunk:    max(DefaultMinChunk, bdp),
		SampleShare: DefaultSampleShare,
		MaxPP:       DefaultMaxPP,
		MaxP:        DefaultMaxP,
		MaxCC:       DefaultMaxCC,
	}
}

// AutoParams is DefaultParams for a path with a measured round-trip time
// and bandwidth (bytes per second), its BDP at least MinBDP so that an
// unmeasured (zero) RTT or bandwidth still gives usable settings.
func AutoParams(rtt time.Duration, bandwidth float64) Params {
	return DefaultParams(max(BDP(rtt, bandwidth), MinBDP))
}

// Auto is the planner `--auto` uses: OptimalCC over files with
// AutoParams(rtt, bandwidth).
func Auto(files []File, rtt time.Duration, bandwidth float64) (*OptimalCC, error) {
	return NewOptimalCC(files, AutoParams(rtt, bandwidth))
}

// withDefaults fills zero fields and checks the rest.
func (p Params) withDefaults() (Params, error) {
	if p.SampleShare == 0 {
		p.SampleShare = DefaultSampleShare
	}
	for _, f := range []struct {
		v   *int
		def int
	}{{&p.MaxPP, DefaultMaxPP}, {&p.MaxP, DefaultMaxP}, {&p.MaxCC, DefaultMaxCC}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case p.BDP <= 0:
		return p, fmt.Errorf("%w: BDP %d is not positive", ErrInvalid, p.BDP)
	case p.MinChunk < 0:
		return p, fmt.Errorf("%w: negative minimum chunk size %d", ErrInvalid, p.MinChunk)
	case !(p.SampleShare > 0 && p.SampleShare <= 1):
		return p, fmt.Errorf("%w: sample share %v is not in (0, 1]", ErrInvalid, p.SampleShare)
	case p.MaxPP < 1 || p.MaxP < 1 || p.MaxCC < 1:
		return p, fmt.Errorf("%w: max pp %d, p %d and cc %d must be at least 1", ErrInvalid, p.MaxPP, p.MaxP, p.MaxCC)
	}
	return p, nil
}

// OptimalCC is the paper's Algorithm 3 (Optimal_CC) with its extension to
// files larger than the BDP, as a Planner. It sorts the files and gives
// them pipelining levels with OptimalPP, then works in two phases, files
// up to the BDP first:
//
//   - Files up to the BDP: samples with concurrency 1, 2, 4, ... (up to
//     MaxCC) while each sample's throughput is higher than the one
//     before; when it is not, the level before is the optimum. The rest
//     of the files, their chunks combined where their pp is equal, go
//     with their own pp, p = 1 (parallelism does not help small files)
//     and the optimal cc.
//   - Files larger than the BDP: pp = LargePP; samples with parallelism
//     1, 2, 4, ... (up to MaxP) at cc = 1 until throughput stops rising,
//     then with concurrency 2, 4, ... (up to MaxCC) at the optimal p, the
//     best p's sample standing for cc = 1; the rest goes with pp, the
//     optimal p and the optimal cc. This is "parallelism first, then
//     concurrency" from the last paragraph of the paper's section 4.2.
//
// Before the rest is sent, a chunk with fewer files than cc * pp is merged
// into the next (see the paper's minimum chunk size), and chunks with
// equal settings are combined, so that the rest is a few large transfers:
// each step is one perform_transfer, with its start-up and the idle
// channels at its end.
//
// How samples are cut differs from a literal reading of Algorithm 3, which
// halves the largest chunk until there are min_no_of_chunks chunks and
// sends whole chunks as samples: in the paper's experiment (5,000 files,
// five chunks) that sends the first fifth of the dataset at cc = 1 and
// the next at cc = 2, far slower than a good fixed setting. Here each sample is a new chunk
// cut from the largest chunk (the paper's "new chunk created with a
// pre-calculated minimum chunk size"), of at least MinChunk bytes per
// channel and stream and at least pp files per channel, so that every
// level does the same work per channel and the comparison between levels
// is fair, and the sample's files are spread evenly over the chunk's sizes
// so that its mean file size is the chunk's. Samples are real transfers:
// every file is sent exactly once.
//
// Sampling uses at most SampleShare of a phase's bytes. When the next
// sample would exceed that, or the chunk samples are cut from is used up,
// throughput has risen at every level so far: the rest goes at the next
// level, as Algorithm 3 would have sent its next chunk with it. If not
// even the first sample fits, p is 1 and each chunk goes with enough
// concurrency to have all its files in flight at once (at most MaxCC).
//
// Throughput comparisons are strict: a level that is not faster than the
// one before counts as a drop, so a plateau keeps the smaller level.
type OptimalCC struct {
	prm     Params
	phases  []*phase
	cur     int
	pending *Step
}

// NewOptimalCC plans files with prm. No files give a planner with nothing
// to do; negative sizes and bad parameters are errors wrapping ErrInvalid.
func NewOptimalCC(files []File, prm Params) (*OptimalCC, error) {
	prm, err := prm.withDefaults()
	if err != nil {
		return nil, err
	}
	chunks, err := OptimalPP(files, prm.BDP, prm.MinChunk, prm.MaxPP)
	if err != nil {
		return nil, err
	}
	o := &OptimalCC{prm: prm}
	var small, large []Chunk
	for _, c := range chunks {
		if c.Files[0].Size > prm.BDP {
			large = append(large, c)
		} else {
			small = append(small, c)
		}
	}
	if len(small) > 0 {
		o.phases = append(o.phases, newPhase(small, false, prm))
	}
	if len(large) > 0 {
		o.phases = append(o.phases, newPhase(large, true, prm))
	}
	return o, nil
}

// Next implements Planner.
func (o *OptimalCC) Next() (Step, bool) {
	if o.pending != nil {
		return *o.pending, true
	}
	for o.cur < len(o.phases) {
		if st, ok := o.phases[o.cur].next(o.prm); ok {
			o.pending = &st
			return st, true
		}
		o.cur++
	}
	return Step{}, false
}

// Observe implements Planner. Throughput of bulk steps is not used: the
// settings are chosen once, as in the paper.
func (o *OptimalCC) Observe(bytesPerSec float64) {
	if o.pending == nil {
		return
	}
	st := *o.pending
	o.pending = nil
	ph := o.phases[o.cur]
	switch st.Phase {
	case PhaseSampleP:
		ph.p.observe(throughput(bytesPerSec))
	case PhaseSampleCC:
		ph.cc.observe(throughput(bytesPerSec))
	}
}

type stage int

const (
	stageP stage = iota
	stageCC
	stageBulk
	stageDone
)

// phase is the files on one side of the BDP and the search over them.
type phase struct {
	large  bool
	chunks []Chunk // files not yet proposed, in size order, with their pp
	src    int     // the chunk samples are cut from: the largest
	bytes  int64   // the phase's size when it started
	budget int64   // bytes sampling may still use
	stage  stage
	p, cc  search
	pUse   int // the parallelism of cc samples and bulk
	bulk   []Chunk
}

func newPhase(chunks []Chunk, large bool, prm Params) *phase {
	ph := &phase{large: large, chunks: chunks, stage: stageCC, pUse: 1,
		p: newSearch(prm.MaxP), cc: newSearch(prm.MaxCC)}
	if large {
		ph.stage = stageP
	}
	var big int64 = -1
	for i, c := range chunks {
		s := c.Size()
		ph.bytes += s
		if s > big {
			ph.src, big = i, s
		}
	}
	ph.budget = int64(prm.SampleShare * float64(ph.bytes))
	return ph
}

// next moves the phase on to its next step; false when it is done.
func (ph *phase) next(prm Params) (Step, bool) {
	for {
		switch ph.stage {
		case stageP:
			if ph.p.done {
				ph.startCC()
				continue
			}
			if c, ok := ph.cut(ph.p.level, 1, prm); ok {
				return Step{Chunk: c, Phase: PhaseSampleP}, true
			}
			ph.p.starve()
		case stageCC:
			if ph.cc.done {
				ph.startBulk(prm)
				continue
			}
			if c, ok := ph.cut(ph.pUse, ph.cc.level, prm); ok {
				return Step{Chunk: c, Phase: PhaseSampleCC}, true
			}
			ph.cc.starve()
		case stageBulk:
			if len(ph.bulk) == 0 {
				ph.stage = stageDone
				continue
			}
			c := ph.bulk[0]
			ph.bulk = ph.bulk[1:]
			return Step{Chunk: c, Phase: PhaseBulk}, true
		default:
			return Step{}, false
		}
	}
}

// startCC ends the parallelism search of large files.
func (ph *phase) startCC() {
	ph.stage = stageCC
	p, ok := ph.p.chosen()
	if !ok {
		p = 1
	}
	ph.pUse = p
	// The best p's sample was sent with cc = 1: it is the concurrency
	// search's first level. Not so if p is a level never measured.
	if ph.p.best == p {
		ph.cc.seed(1, ph.p.bestThr)
	}
}

// startBulk sets the rest of the phase's files to the chosen settings,
// combining chunks with equal settings. A chunk with too few files to fill
// its channels' pipelines once (fewer than cc * pp) is first merged into
// the next chunk, of larger files, and takes its pp: all its files would
// be in flight at once whatever its pp, so a transfer of its own would
// only add a start-up and idle channels at its end. This is the paper's
// "a chunk cannot be less than the minimum chunk size", applied once cc is
// known; Algorithm 2's size rule alone leaves chunks of a few files.
func (ph *phase) startBulk(prm Params) {
	ph.stage = stageBulk
	cc, measured := ph.cc.chosen()
	fill := cc
	if !measured {
		fill = prm.MaxCC // cc will be what the chunk fills, up to MaxCC
	}
	var rest []Chunk
	var carry []File
	for i, c := range ph.chunks {
		files := c.Files
		if len(carry) > 0 {
			files, carry = slices.Concat(carry, c.Files), nil
		}
		if len(files) == 0 {
			continue
		}
		if int64(len(files)) < mulSat(int64(fill), int64(c.PP)) && i < len(ph.chunks)-1 {
			carry = files
			continue
		}
		c.Files, c.P, c.CC = files, ph.pUse, cc
		if !measured {
			// Nothing measured: every file in flight at once.
			c.CC = int(max(min(ceilDiv(int64(len(files)), int64(c.PP)), int64(prm.MaxCC)), 1))
		}
		rest = append(rest, c)
	}
	ph.bulk = Combine(rest)
	ph.chunks = nil
}

// cut removes a sample for parallelism p and concurrency cc from the
// source chunk and returns it; false if the chunk is used up or the sample
// would exceed the sampling budget.
func (ph *phase) cut(p, cc int, prm Params) (Chunk, bool) {
	if ph.bytes == 0 {
		return Chunk{}, false // empty files: nothing to measure
	}
	src := &ph.chunks[ph.src]
	n := len(src.Files)
	if n == 0 {
		return Chunk{}, false
	}
	// At least one file per channel, and for small files a full
	// pipeline per channel; at least MinChunk per channel and stream.
	minFiles := int64(cc)
	if !ph.large {
		minFiles = mulSat(minFiles, int64(src.PP))
	}
	want := mulSat(mulSat(prm.MinChunk, int64(p)), int64(cc))
	m := minFiles
	if mean := src.MeanSize(); mean > 0 {
		m = max(m, ceilDiv(want, mean))
	}
	m = min(m, int64(n))
	// Evenly spaced picks, one from the middle of each of m equal runs
	// of the sorted chunk: their mean size is about the chunk's.
	pick := make([]bool, n)
	var size int64
	for i := range m {
		k := (2*i + 1) * int64(n) / (2 * m)
		pick[k] = true
		size += src.Files[k].Size
	}
	if size == 0 || size > ph.budget {
		return Chunk{}, false
	}
	ph.budget -= size
	sample := make([]File, 0, m)
	rest := make([]File, 0, int64(n)-m)
	for i, f := range src.Files {
		if pick[i] {
			sample = append(sample, f)
		} else {
			rest = append(rest, f)
		}
	}
	src.Files = rest
	return Chunk{Files: sample, PP: src.PP, P: p, CC: cc}, true
}

// search is the doubling search of Algorithms 1 and 3: levels 1, 2, 4, ...
// up to max while throughput rises.
type search struct {
	level, max    int
	best          int // the best level measured; 0 before any
	bestThr       float64
	done, starved bool
}

func newSearch(max int) search { return search{level: 1, max: max} }

// observe takes the throughput of the sample at the current level.
func (s *search) observe(thr float64) {
	if s.best != 0 && !(thr > s.bestThr) {
		s.done = true // it dropped: the level before is the optimum
		return
	}
	s.best, s.bestThr = s.level, thr
	if s.level >= s.max {
		s.done = true
		return
	}
	s.level = min(2*s.level, s.max)
}

// seed records a measurement of level made elsewhere.
func (s *search) seed(level int, thr float64) {
	s.level = level
	s.observe(thr)
}

// starve ends the search because no more samples can be cut.
func (s *search) starve() { s.done, s.starved = true, true }

// chosen is the level the search settled on; false if it measured nothing.
func (s *search) chosen() (int, bool) {
	switch {
	case !s.starved:
		return s.best, true
	case s.best == 0:
		return 0, false
	default:
		// Still rising when the samples ran out: the next level, as
		// Algorithm 3 would have sent its next chunk with it.
		return s.level, true
	}
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0, without overflow.
func ceilDiv(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return max(a, 0)
	}
	return (a-1)/b + 1
}

// mulSat multiplies non-negative numbers, saturating at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}
