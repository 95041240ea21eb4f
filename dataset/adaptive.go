package dataset

import (
	"fmt"
	"math"
)

// Planner decides how a dataset is transferred, one chunk at a time. Next
// returns the next chunk and its settings (ok false when the dataset is
// done); the caller transfers it and reports the throughput it measured,
// in bytes per second, with Observe, before calling Next again. Calling
// Next again without Observe returns the same step, so a failed transfer
// can be retried; Observe with no step outstanding is ignored.
//
// Planners are pure: they read no clock, do no I/O and start no
// goroutines, and they are not safe for concurrent use.
type Planner interface {
	Next() (step Step, ok bool)
	Observe(bytesPerSec float64)
}

// Phase says why a planner proposes a step.
type Phase string

const (
	// PhaseAdaptive is a chunk of Algorithm 1, sent with the
	// concurrency it has adapted to so far.
	PhaseAdaptive Phase = "adaptive"
	// PhaseSampleP is a sample measuring one parallelism level.
	PhaseSampleP Phase = "sample-p"
	// PhaseSampleCC is a sample measuring one concurrency level.
	PhaseSampleCC Phase = "sample-cc"
	// PhaseBulk is the rest of a dataset, sent with the chosen settings.
	PhaseBulk Phase = "bulk"
)

// Step is one transfer a planner asks for: a non-empty chunk with pp, p
// and cc all at least 1.
type Step struct {
	Chunk Chunk
	Phase Phase
}

// throughput sanitises a reported throughput: NaN and negative values
// (a performer that could not measure) count as 0, the worst possible.
func throughput(v float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return v
}

// AdaptiveCC is the concurrency rule of the paper's Algorithm 1
// (Adaptive_CC). It starts at 1; after each chunk, if the chunk's
// throughput fell below the previous chunk's and the level is at least 2
// it halves the level, otherwise it doubles it, never beyond its maximum.
// It keeps following the network: a later rise doubles again.
type AdaptiveCC struct {
	cc, max int
	prev    float64
}

// NewAdaptiveCC returns the rule with concurrency at most maxCC (below 1
// counts as 1).
func NewAdaptiveCC(maxCC int) *AdaptiveCC {
	return &AdaptiveCC{cc: 1, max: max(maxCC, 1)}
}

// Next is the concurrency for the next chunk.
func (a *AdaptiveCC) Next() int { return a.cc }

// Observe takes the throughput of the chunk just sent with Next's level.
// The first chunk compares with 0, as prev_thr starts there, so the level
// always doubles after it.
func (a *AdaptiveCC) Observe(bytesPerSec float64) {
	thr := throughput(bytesPerSec)
	switch {
	case thr < a.prev && a.cc >= 2:
		a.cc /= 2
	case a.cc > a.max/2: // 2*cc would pass max, or overflow
		a.cc = a.max
	default:
		a.cc *= 2
	}
	a.prev = thr
}

// Adaptive is the paper's Algorithm 1 as a Planner: the files, in the
// order given, in chunks of a fixed number of files, each sent with a
// fixed pp, p = 1 and the concurrency AdaptiveCC chooses.
type Adaptive struct {
	chunks  []Chunk
	cc      *AdaptiveCC
	pending bool
}

// NewAdaptive plans files in chunks of perChunk files with pipelining pp
// and concurrency up to maxCC. perChunk, pp and maxCC must be at least 1
// and no size negative.
func NewAdaptive(files []File, perChunk, pp, maxCC int) (*Adaptive, error) {
	if perChunk < 1 || pp < 1 || maxCC < 1 {
		return nil, fmt.Errorf("%w: files per chunk %d, pp %d and max cc %d must be at least 1", ErrInvalid, perChunk, pp, maxCC)
	}
	if err := checkFiles(files); err != nil {
		return nil, err
	}
	chunks := DivideBy(files, perChunk)
	for i := range chunks {
		chunks[i].PP = pp
	}
	return &Adaptive{chunks: chunks, cc: NewAdaptiveCC(maxCC)}, nil
}

// Next implements Planner.
func (a *Adaptive) Next() (Step, bool) {
	if len(a.chunks) == 0 {
		return Step{}, false
	}
	a.pending = true
	c := a.chunks[0]
	c.CC = a.cc.Next()
	return Step{Chunk: c, Phase: PhaseAdaptive}, true
}

// Observe implements Planner.
func (a *Adaptive) Observe(bytesPerSec float64) {
	if !a.pending {
		return
	}
	a.pending = false
	a.chunks = a.chunks[1:]
	a.cc.Observe(bytesPerSec)
}
