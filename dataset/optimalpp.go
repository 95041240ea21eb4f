package dataset

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"time"
)

// BDP is the bandwidth-delay product of a path, in bytes: how much data
// must be in flight to keep it full. A negative, NaN or zero product is 0;
// one too large for int64 is math.MaxInt64.
func BDP(rtt time.Duration, bandwidth float64) int64 {
	v := rtt.Seconds() * bandwidth
	switch {
	case !(v > 0): // also NaN
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}

// LargePP is the pipelining of files larger than the BDP: the paper finds
// "a static value of pp = 2 is enough" for them, since one file already
// fills the pipe and the second only hides the gap between files.
const LargePP = 2

// OptimalPP is the paper's Algorithm 2 (Optimal_PP). It sorts a copy of
// files by size and returns them as chunks in ascending order of size,
// each with the pipelining level that suits its mean file size,
//
//	opt_pp = BDP / mean_file_size + 1   (integer division; Eq. 1)
//
// found by dividing the list recursively at the index of its mean file
// size. A range is divided only if all of the paper's conditions hold:
//
//   - its opt_pp is not 1 (its files are not larger than the BDP),
//   - its opt_pp differs from its parent's (dividing changes something),
//   - its opt_pp is at most maxPP,
//   - it has more than one file,
//   - the mean index is strictly inside it: at least two files are at or
//     below the mean and at least one is above it (the mean index is the
//     last file whose size is at most the mean, so the halves are "files
//     up to the mean" and "files above it"),
//   - its size is more than twice minChunk.
//
// Otherwise it becomes a chunk whose pp is its own opt_pp, clamped to
// [1, maxPP].
//
// Reading the pseudocode. The second recursive call is printed as
// "(mean_index + 1 -> start_index)"; it can only mean mean_index+1 to
// end_index, the rest of the range. The else branch "opt_pp = parent_pp"
// is read as "the chunk keeps the pp computed at its level", which this
// level passes down as its children's parent_pp: that is the only reading
// under which the paper's own experiment works, where 5,000 files of 1 MB
// with a 5 MB BDP are not divided at all (every file is at the mean) and
// get pp = 6 = 5/1 + 1; the root has no parent whose pp it could take. The
// size rule is applied as printed (more than twice minChunk), so a half
// may still be smaller than minChunk.
//
// Files larger than the BDP are set apart before the division, in one last
// chunk with pp = LargePP (clamped to maxPP), as the paper treats them
// separately ("for datasets with file sizes greater than BDP, a similar
// algorithm is applied to add parallelism"). Dividing a mixed list whole
// would instead give them pp = 1, and worse, a dataset whose mean is just
// above the BDP (1 B to 10 MB files on a 5 MB BDP) would stop at once with
// pp = 1 for every file. Every chunk has p and cc 1; OptimalCC sets them.
//
// No files give no chunks. bdp must be positive, minChunk not negative,
// maxPP at least 1, and no size negative; otherwise the error wraps
// ErrInvalid.
func OptimalPP(files []File, bdp, minChunk int64, maxPP int) ([]Chunk, error) {
	if bdp <= 0 {
		return nil, fmt.Errorf("%w: BDP %d is not positive", ErrInvalid, bdp)
	}
	if minChunk < 0 {
		return nil, fmt.Errorf("%w: negative minimum chunk size %d", ErrInvalid, minChunk)
	}
	if maxPP < 1 {
		return nil, fmt.Errorf("%w: maximum pp %d is below 1", ErrInvalid, maxPP)
	}
	if err := checkFiles(files); err != nil {
		return nil, err
	}
	sorted := slices.Clone(files)
	SortBySize(sorted)
	cut := sort.Search(len(sorted), func(i int) bool { return sorted[i].Size > bdp })
	d := newDivider(sorted[:cut], bdp, minChunk, maxPP)
	d.divide(0, cut-1, 0)
	out := d.out
	if cut < len(sorted) {
		out = append(out, Chunk{Files: sorted[cut:], PP: min(LargePP, maxPP), P: 1, CC: 1})
	}
	return out, nil
}

// divider holds the state of one run of Algorithm 2 over sorted files.
type divider struct {
	files    []File
	prefix   []int64 // prefix[i] is the size of files[:i]
	bdp      int64
	minChunk int64
	maxPP    uint64
	out      []Chunk
	// stops records why each chunk was not divided further, for tests.
	stops []string
}

// Why a range was not divided, in the order Algorithm 2 tests them.
const (
	stopPPIsOne      = "opt_pp is 1"
	stopSameAsParent = "opt_pp equals parent_pp"
	stopAboveMax     = "opt_pp above max_pp"
	stopOneFile      = "start_index not below end_index"
	stopMeanAtStart  = "mean index not above start_index"
	stopMeanAtEnd    = "mean index not below end_index"
	stopTooSmall     = "chunk not larger than twice min_chunk_size"
)

func newDivider(files []File, bdp, minChunk int64, maxPP int) *divider {
	prefix := make([]int64, len(files)+1)
	for i, f := range files {
		prefix[i+1] = prefix[i] + f.Size
	}
	return &divider{files: files, prefix: prefix, bdp: bdp, minChunk: minChunk, maxPP: uint64(maxPP)}
}

// divide applies Algorithm 2 to files[start..end] (inclusive, as in the
// paper). parentPP is 0 for the whole list, which has no parent.
func (d *divider) divide(start, end int, parentPP uint64) {
	if start > end {
		return
	}
	n := end - start + 1
	total := d.prefix[end+1] - d.prefix[start]
	pp := optPP(d.bdp, total, n)
	// Last index whose size is at most the mean. Sizes are integers, so
	// size <= total/n exactly when size <= floor(total/n).
	mean := total / int64(n)
	meanIdx := start + sort.Search(n, func(i int) bool { return d.files[start+i].Size > mean }) - 1
	why := ""
	switch {
	case pp == 1:
		why = stopPPIsOne
	case pp == parentPP:
		why = stopSameAsParent
	case pp > d.maxPP:
		why = stopAboveMax
	case start >= end:
		why = stopOneFile
	case meanIdx <= start:
		why = stopMeanAtStart
	case meanIdx >= end:
		why = stopMeanAtEnd
	case total-d.minChunk <= d.minChunk: // total <= 2*minChunk without overflow
		why = stopTooSmall
	}
	if why == "" {
		d.divide(start, meanIdx, pp)
		d.divide(meanIdx+1, end, pp)
		return
	}
	d.stops = append(d.stops, why)
	d.out = append(d.out, Chunk{
		Files: d.files[start : end+1 : end+1], // capped: an append cannot reach the next chunk
		PP:    int(min(pp, d.maxPP)),
		P:     1, CC: 1,
	})
}

// optPP is Eq. 1, BDP/mean + 1 with mean = total/n, computed exactly as
// floor(BDP*n/total) + 1 in 128 bits. It saturates at math.MaxUint64,
// which is also the value for a mean of 0: nothing bounds the pipelining
// of empty files but maxPP.
func optPP(bdp, total int64, n int) uint64 {
	if total <= 0 {
		return math.MaxUint64
	}
	hi, lo := bits.Mul64(uint64(bdp), uint64(n))
	if hi >= uint64(total) {
		return math.MaxUint64 // the quotient does not fit in 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(total))
	if q == math.MaxUint64 {
		return q
	}
	return q + 1
}
