package policy

import (
	"fmt"
	"math"
)

// AdaptiveParams are the client parameters of the paper's Table II.
type AdaptiveParams struct {
	// Ci is c_i, the initial concurrency (files in flight).
	Ci int
	// Cmax is c_max, the most concurrency adaptation may reach.
	Cmax int
	// Delta is Δ, the concurrency step up or down; 0 never adapts.
	Delta int
	// D is d, the adaptation delay: files completed between updates.
	D int
	// P is p, the parallel streams of each file transfer.
	P int
	// T is the threshold on the rate change that triggers adaptation
	// (Fig. 3 line 24): in the unit of the rates given to Adapt (the
	// paper's r_delta is a difference of rates, so bytes per second if
	// the rates are), or, when Relative, a fraction of the last rate
	// (0.1: a change of more than 10%).
	T        float64
	Relative bool
	// Follow makes the client non-adaptive, as in the paper's Tables VI
	// and VII: it runs at min(c_alloc, c_max) and ignores rates, Ci,
	// Delta and T.
	Follow bool
}

// Validate reports whether p is usable.
func (p AdaptiveParams) Validate() error {
	switch {
	case p.P < 1 || p.P > MaxStreams:
		return fmt.Errorf("adaptive: parallelism %d: %w: want 1..%d", p.P, ErrInvalid, MaxStreams)
	case p.Cmax < 1 || p.Cmax > MaxStreams:
		return fmt.Errorf("adaptive: max concurrency %d: %w: want 1..%d", p.Cmax, ErrInvalid, MaxStreams)
	case !p.Follow && (p.Ci < 1 || p.Ci > p.Cmax):
		return fmt.Errorf("adaptive: initial concurrency %d: %w: want 1..%d (max concurrency)", p.Ci, ErrInvalid, p.Cmax)
	case p.Delta < 0 || p.Delta > MaxStreams:
		return fmt.Errorf("adaptive: delta %d: %w: want 0..%d", p.Delta, ErrInvalid, MaxStreams)
	case p.D < 1:
		return fmt.Errorf("adaptive: delay %d files: %w: want >= 1", p.D, ErrInvalid)
	case math.IsNaN(p.T) || math.IsInf(p.T, 0) || p.T < 0:
		return fmt.Errorf("adaptive: threshold %v: %w: want a finite value >= 0", p.T, ErrInvalid)
	}
	return nil
}

// Adaptive is the paper's Adaptive Transfer Client (Fig. 3,
// AdaptTransferClient and Adapt) as a state machine. The caller owns the
// transfers and the allocation:
//
//	a, _ := NewAdaptive(params)
//	req.Want = a.Want()
//	alloc, _ := svc.Request(now, req)                      // line 2
//	c := a.Start(alloc.Streams)                            // lines 3–5
//	for files remain {
//	    if a.Due() {                                       // line 7
//	        alloc, _ = svc.Update(now, alloc.ID, caller, a.Want()) // line 9
//	        c = a.Adapt(alloc.Streams, rate)               // lines 10–11
//	    }
//	    keep c files in flight; a.Completed(1) as each ends // lines 13–15
//	}
//	svc.Release(now, alloc.ID, caller)
//
// The paper's client asks for no particular number; asking for Want,
// c_max × p, keeps the service from granting streams the client cannot
// use.
//
// The paper moves files in batches of c and subtracts c from its counter
// after each batch; Completed takes any number, so a caller that keeps c
// files in flight and counts them as they end gets the same adaptation
// points in the batch case and sensible ones otherwise.
//
// Readings of Fig. 3:
//   - r_last starts at 0, so the first Adapt sees a rise of the whole
//     rate and, if above T, steps up; the clients of Fig. 6 climb from
//     their initial concurrency that way. r_last is the previous
//     measurement ("the last measured rate"), recorded at every Adapt,
//     not only when concurrency moved.
//   - Line 26 floors a decrease at 0; a client at 0 moves no files, so
//     its counter never runs down and it never adapts again. Adaptive
//     floors a decrease at 1: a running client keeps one transfer to
//     measure with. It runs at 0 only when the allocation is below p
//     streams; then Due stays true, so the caller keeps asking (at a pace
//     of its choosing), and when streams arrive it restarts at
//     min(c_i, c_alloc), as line 4 does.
//   - Line 28 bounds only increases by c_alloc, since the paper's service
//     never shrinks an allocation. This one can, so Adapt always bounds c
//     by c_alloc: a client never runs more than it was granted.
//
// An update should also be sent on a timer, with Want equal to the
// current streams, when files are slow enough that d of them take longer
// than a third of the lease, and its answer given to Renew, not Adapt;
// Adaptive does not read clocks.
type Adaptive struct {
	p    AdaptiveParams
	c, k int
	last float64
}

// NewAdaptive returns a client with parameters p, or p's problem.
func NewAdaptive(p AdaptiveParams) (*Adaptive, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Adaptive{p: p}, nil
}

// Params returns the client's parameters.
func (a *Adaptive) Params() AdaptiveParams { return a.p }

// Want is what the client can use, c_max × p streams: a Request's Want.
func (a *Adaptive) Want() int { return min(a.p.Cmax*a.p.P, MaxStreams) }

// Concurrency is the number of files to keep in flight.
func (a *Adaptive) Concurrency() int { return a.c }

// Start takes the first allocation, in streams, and returns the
// concurrency to start at (Fig. 3 lines 3–5): min(c_i, ⌊streams/p⌋).
func (a *Adaptive) Start(streams int) int {
	a.c = a.first(a.alloc(streams))
	a.k = a.p.D
	a.last = 0
	return a.c
}

func (a *Adaptive) first(calloc int) int {
	if a.p.Follow {
		return min(calloc, a.p.Cmax)
	}
	return min(a.p.Ci, calloc)
}

// alloc is c_alloc, lines 3 and 10: the concurrency streams allow.
func (a *Adaptive) alloc(streams int) int { return max(0, streams) / a.p.P }

// Completed counts n files done (line 15).
func (a *Adaptive) Completed(n int) {
	if n > 0 {
		a.k -= n
	}
}

// Due reports whether the client should ask for an updated allocation
// and Adapt (line 7): d files have completed since the last adaptation,
// or the client is at concurrency 0 and waits for streams.
func (a *Adaptive) Due() bool { return a.k <= 0 || a.c == 0 }

// Renew takes the allocation an update on a timer answered (a renewal
// between adaptation points, with Want equal to the current streams) and
// returns the concurrency: bounded by what the streams allow, and
// otherwise as it was. A renewal measures nothing, so neither the rate
// nor the count of files to the next adaptation moves; if the streams no
// longer carry one file, the client is at 0 and Due until they do.
func (a *Adaptive) Renew(streams int) int {
	a.c = min(a.c, a.alloc(streams))
	return a.c
}

// Adapt takes the updated allocation, in streams, and the transfer rate
// measured since the last adaptation, and returns the new concurrency
// (lines 8–11 and ADAPT, lines 20–31). A NaN or negative rate counts as
// 0.
func (a *Adaptive) Adapt(streams int, rate float64) int {
	a.k = a.p.D
	calloc := a.alloc(streams)
	if math.IsNaN(rate) || rate < 0 {
		rate = 0
	}
	prev := a.last
	delta := rate - prev
	a.last = rate

	switch {
	case a.p.Follow:
		a.c = min(calloc, a.p.Cmax)
		return a.c
	case a.c == 0:
		a.c = a.first(calloc)
		return a.c
	}
	threshold := a.p.T
	if a.p.Relative {
		threshold *= prev
	}
	if math.Abs(delta) > threshold {
		if delta < 0 {
			a.c = max(1, a.c-a.p.Delta)
		} else {
			a.c = min(a.c+a.p.Delta, calloc, a.p.Cmax)
		}
	}
	a.c = min(a.c, calloc)
	return a.c
}
