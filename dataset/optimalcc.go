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
	// DefaultSampleShare caps sampling at a fifth of each phase's bytes
	// (or the SampleFloor, if more): the rest, at least four fifths
	// (half), moves with the chosen settings.
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
	// DefaultMargin is how much faster a level must measure than the one
	// below it to be chosen over it: 5%. Two samples are different files
	// at different moments, and on a real path they differ by a few
	// percent at the same setting; a level that is not clearly faster
	// only adds connections, streams and a longer tail at the end of
	// each transfer. Declining a level that is truly better by less than
	// the margin loses less than the margin.
	DefaultMargin = 0.05
	// DefaultSampleFloor is the least sampling budget of a phase, in
	// MinChunks: 10, enough for the first three concurrency levels (1, 2
	// and 4 channels: 7 MinChunks) with a file's rounding per sample to
	// spare (a file up to the BDP is at most a MinChunk with the
	// defaults). Levels cost 1, 2, 4, ... MinChunks, so a fifth of a
	// phase of 30 MinChunks (files up to the BDP are often a small part
	// of a dataset's bytes) buys two levels, and the rest of the phase
	// then goes at the third, however far from the path's best that is.
	DefaultSampleFloor = 10
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
	// sampling may use, in (0, 1] (default DefaultSampleShare), unless
	// SampleFloor allows more.
	SampleShare float64
	// MaxPP, MaxP and MaxCC bound pipelining, parallelism and
	// concurrency (defaults DefaultMaxPP, DefaultMaxP, DefaultMaxCC).
	MaxPP, MaxP, MaxCC int
	// Margin is the fraction by which a higher level's throughput must
	// exceed a lower one's for the higher to be chosen (default
	// DefaultMargin, at most 1); negative means none: any gain moves the
	// search up, as in the paper.
	Margin float64
	// SampleFloor is the least sampling budget of a phase, in MinChunks,
	// whatever SampleShare gives, but never more than half the phase
	// (default DefaultSampleFloor); negative means no floor, as in the
	// paper.
	SampleFloor int
	// NoCarry starts every phase's concurrency search at 1, as the paper
	// does. By default the files above the BDP start at the concurrency
	// chosen for the files up to it (see OptimalCC).
	NoCarry bool
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
		Margin:      DefaultMargin,
		SampleFloor: DefaultSampleFloor,
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
	if p.Margin == 0 {
		p.Margin = DefaultMargin
	}
	if p.SampleFloor == 0 {
		p.SampleFloor = DefaultSampleFloor
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
	case math.IsNaN(p.Margin) || p.Margin > 1:
		return p, fmt.Errorf("%w: margin %v is not a number up to 1", ErrInvalid, p.Margin)
	}
	return p, nil
}

// margin is Margin with "none" as 0.
func (p Params) margin() float64 { return max(p.Margin, 0) }

// budget is the sampling budget of a phase of the given size: SampleShare
// of it, but at least SampleFloor MinChunks (when that is at most half the
// phase, half otherwise), so that even a small phase measures a few levels
// and still sends at least half its bytes with what they found.
func (p Params) budget(phaseBytes int64) int64 {
	b := int64(p.SampleShare * float64(phaseBytes))
	if p.SampleFloor > 0 {
		floor := min(mulSat(int64(p.SampleFloor), p.MinChunk), phaseBytes/2)
		b = max(b, floor)
	}
	return b
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
//     1, 2, 4, ... (up to MaxP) at one concurrency level until throughput
//     stops rising, then with concurrency doubling from that level (up to
//     MaxCC) at the optimal p, the best p's sample standing for the level
//     it was sent at; the rest goes with pp, the optimal p and the optimal
//     cc. This is "parallelism first, then concurrency" from the last
//     paragraph of the paper's section 4.2.
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
// Sampling uses at most SampleShare of a phase's bytes, or SampleFloor
// MinChunks if that is more (but at most half the phase). When the next
// sample would exceed that, or the chunk samples are cut from is used up,
// throughput has risen at every level so far: the rest goes at the next
// level, as Algorithm 3 would have sent its next chunk with it (when they
// run out while the search looks below a carried level, see below, the
// rest goes at the best level measured). If not even the first sample
// fits, each chunk goes with enough concurrency to have all its files in
// flight at once (at most MaxCC), and large files with enough parallelism
// to have all of each file in flight in parts of MinChunk (at most MaxP).
//
// Three departures from the paper make the search cheaper and steadier
// on real paths, where a sample at a low level is slow and two samples at
// the same setting differ by a few percent (each can be turned off in
// Params, which gives the paper's algorithm):
//
//   - Margin: a higher level is chosen over a lower one only if it
//     measures more than Margin faster. The paper moves up on any gain, so
//     noise alone (p 8 -> 16 for 55 -> 57 MB/s) adds streams or channels
//     that buy nothing. A plateau keeps the smaller level.
//   - Sampling floor: a phase may always spend SampleFloor MinChunks on
//     samples. Levels cost 1, 2, 4, ... MinChunks, so a fifth of a phase
//     of a few dozen MinChunks measures only levels 1 and 2 and sends the
//     whole rest at 4, whatever the path's best.
//   - Carried concurrency: the files above the BDP start their search at
//     the best concurrency measured for the files up to it (not the level
//     above it that a search cut short by its budget sends the rest
//     with, which is a guess), rather than at 1: the parallelism samples
//     are sent with it, and the concurrency search doubles on from it. The paper starts each phase from cc = 1, so a
//     path that needs many connections pays for samples at a fraction of
//     its capacity twice, the second time while parallelism is searched
//     for with one channel (p samples at cc 1 on a path where a channel is
//     a tenth of the capacity). Because a carried level is a guess for
//     other files, the search also looks below it: when no level above
//     the starting one is clearly faster, it halves the level while the
//     lower one is within Margin of the best throughput measured, and
//     keeps the lowest such. A phase too small for a sample at the carried
//     level starts at half of it, and so on down to 1.
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
		ph := o.phases[o.cur]
		if st, ok := ph.next(o.prm); ok {
			o.pending = &st
			return st, true
		}
		o.cur++
		if o.cur < len(o.phases) && !o.prm.NoCarry && ph.cc.best > 0 {
			// The best level measured, not the next one a search
			// cut short goes on to: that one is a guess, and on
			// a path that suffers beyond the measured level the
			// next phase's samples would all pay for it.
			o.phases[o.cur].startAt(ph.cc.best)
		}
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
	ccP    int // the concurrency of p samples, where the cc search starts
	bulk   []Chunk
}

func newPhase(chunks []Chunk, large bool, prm Params) *phase {
	ph := &phase{large: large, chunks: chunks, stage: stageCC, pUse: 1, ccP: 1,
		p: newSearch(1, prm.MaxP, prm.margin()), cc: newSearch(1, prm.MaxCC, prm.margin())}
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
	ph.budget = prm.budget(ph.bytes)
	return ph
}

// startAt makes the phase's concurrency search start at cc, a level
// chosen by the phase before; it must be called before the phase's first
// step.
func (ph *phase) startAt(cc int) {
	cc = max(min(cc, ph.cc.max), 1)
	ph.ccP = cc
	ph.cc = newSearch(cc, ph.cc.max, ph.cc.margin)
}

// next moves the phase on to its next step; false when it is done.
func (ph *phase) next(prm Params) (Step, bool) {
	for {
		switch ph.stage {
		case stageP:
			if ph.p.done {
				ph.startCC(prm)
				continue
			}
			if c, ok := ph.cut(ph.p.level, ph.ccP, prm); ok {
				return Step{Chunk: c, Phase: PhaseSampleP}, true
			}
			if ph.p.best == 0 && ph.ccP > 1 {
				// Too few files or bytes for a sample at the
				// carried concurrency: start lower.
				ph.ccP /= 2
				ph.cc = newSearch(ph.ccP, ph.cc.max, ph.cc.margin)
				continue
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
			if ph.cc.best == 0 && ph.cc.level > 1 {
				// As for p samples: a carried start too high for
				// this phase's files.
				ph.cc = newSearch(ph.cc.level/2, ph.cc.max, ph.cc.margin)
				continue
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
func (ph *phase) startCC(prm Params) {
	ph.stage = stageCC
	p, ok := ph.p.chosen()
	if !ok {
		// Nothing measured (a few files, each more than the sampling
		// budget: a tree with one big file): every MinChunk of a
		// file in flight at once, up to MaxP, as unmeasured
		// concurrency has every file in flight. One stream would
		// move the largest files of the dataset at a single
		// connection's rate.
		files := 0
		for _, c := range ph.chunks {
			files += len(c.Files)
		}
		p = 1
		if files > 0 {
			p = int(max(min(ceilDiv(ph.bytes/int64(files), prm.MinChunk), int64(ph.p.max)), 1))
		}
	}
	ph.pUse = p
	// The best p's sample was sent with concurrency ccP, where the cc
	// search starts: it is that search's first level. Not so if p is a
	// level never measured.
	if ph.p.best == p {
		ph.cc.seed(ph.ccP, ph.p.bestThr)
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

// search is the doubling search of Algorithms 1 and 3: levels start, 2 *
// start, 4 * start, ... up to max while throughput rises by more than
// margin. A search that starts above 1 (at a level carried from another
// phase) and finds nothing clearly faster above its start also looks
// below it: start / 2, start / 4, ... while the lower level is within
// margin of the best throughput measured, the lowest such being chosen.
type search struct {
	level, max int
	start      int
	margin     float64
	best       int // the level chosen so far; 0 before any measurement
	bestThr    float64
	top        float64 // the highest throughput measured at any level
	down       bool    // looking below start
	done       bool
	starved    bool
}

func newSearch(start, max int, margin float64) search {
	return search{level: start, start: start, max: max, margin: margin}
}

// observe takes the throughput of the sample at the current level.
func (s *search) observe(thr float64) {
	s.top = max(s.top, thr)
	switch {
	case s.down:
		// Fewer channels for about the same throughput: take them.
		// Compared with the best measured, not with the level
		// above, so that steps each just within the margin cannot
		// add up to a large loss.
		if !(thr*(1+s.margin) >= s.top) {
			s.done = true // the level above is the optimum
			return
		}
		s.best, s.bestThr = s.level, thr
		if s.level <= 1 {
			s.done = true
			return
		}
		s.level /= 2
		return
	case s.best == 0 || thr > s.bestThr*(1+s.margin):
		s.best, s.bestThr = s.level, thr
		if s.level < s.max {
			s.level = min(2*s.level, s.max)
			return
		}
	}
	// Nothing above best is clearly faster, or there is nothing above.
	if s.best == s.start && s.start > 1 {
		s.down = true
		s.level = s.start / 2
		return
	}
	s.done = true
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
	case s.best == 0:
		return 0, false
	case s.starved && !s.down && s.level > s.best:
		// Still rising when the samples ran out: the next level, as
		// Algorithm 3 would have sent its next chunk with it.
		return s.level, true
	default:
		return s.best, true
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
