package multisrc

import (
	"fmt"
	"math"
)

// Split says how many bytes of a file of size bytes each link should send
// under policy p; the result has one entry per link, in link order, and sums
// to exactly size.
//
// MS, NTSS, TCS and TCSMinus time-balance (eqs. 1-2) with latency: every
// link used finishes at the same predicted time
//
//	T = (size + Σ B_i L_i) / Σ B_i,   D_i = B_i (T - L_i)
//
// where B_i = EffectiveBW(p, links[i]) and L_i its latency. A link whose B_i
// is <= 0, NaN or infinite (or whose latency is infinite) gets 0, and so does
// a link whose latency alone exceeds T (D_i < 0: it would still be
// connecting when the others are done); T is then solved again without it,
// which lowers T, until no D_i is negative.
//
// EAS gives every usable link (Mean > 0, finite latency) the same share;
// BOS gives everything to the usable link with the highest Mean (ties: the
// first). Neither looks at SD or, beyond usability, latency: they are the
// paper's baselines.
//
// Allocations are multiples of align (align <= 0 means 1), so ranges start
// on block boundaries where the storage or the checksums want them. The
// bytes left over by rounding down are handed out greedily: whole align
// blocks first (under EAS at most one per link, so shares stay equal), then
// the final partial block, each to the link whose predicted finish time
// after taking it is the smallest (ties: the first), which keeps the
// largest finish time, the transfer's, as low as the rounding allows. Only
// links that time balancing kept (D_i >= 0) take them, so rounding never
// revives a link dropped for its latency. Every used link's predicted
// finish stays within align/min(B_i) seconds of T, min over the kept links.
// At most one entry, the one that took the partial block, is off the align
// grid.
//
// The error wraps ErrUnknownPolicy, ErrBadInput (size < 0, no links) or
// ErrNoUsableLink.
func Split(p Policy, links []Link, size, align int64) ([]int64, error) {
	if !p.valid() {
		return nil, fmt.Errorf("multisrc: split under policy %q: %w", p, ErrUnknownPolicy)
	}
	if size < 0 {
		return nil, fmt.Errorf("multisrc: split %d bytes under %s: size is negative: %w", size, p, ErrBadInput)
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("multisrc: split %d bytes under %s: no links: %w", size, p, ErrBadInput)
	}
	if align <= 0 {
		align = 1
	}
	n := len(links)
	bw := make([]float64, n)
	lat := make([]float64, n)
	var active []int
	for i, l := range links {
		bw[i] = EffectiveBW(p, l)
		lat[i] = latency(l)
		if usable(bw[i], lat[i]) {
			active = append(active, i)
		}
	}
	if len(active) == 0 {
		return nil, fmt.Errorf("multisrc: split %d bytes under %s across %d links: %w", size, p, n, ErrNoUsableLink)
	}
	alloc := make([]int64, n)
	switch p {
	case BOS:
		best := active[0]
		for _, i := range active[1:] {
			if links[i].Mean > links[best].Mean {
				best = i
			}
		}
		alloc[best] = size
		return alloc, nil
	case EAS:
		k := int64(len(active))
		share := size / k / align * align
		for _, i := range active {
			alloc[i] = share
		}
		distribute(alloc, active, bw, lat, size-share*k, align, true)
		return alloc, nil
	}
	active = balance(active, bw, lat, size)
	t := solveT(active, bw, lat, size)
	// Round each share down to whole blocks. In exact arithmetic the
	// shares sum to size, so what rounding leaves is under one block per
	// link; a share is also capped at what is left, so floating-point
	// overshoot (or an infinite T from absurd latencies) can neither make
	// the sum exceed size nor overflow it.
	var sum int64
	for _, i := range active {
		d := bw[i] * (t - lat[i])
		alloc[i] = wholeBlocks(d/float64(align), (size-sum)/align) * align
		sum += alloc[i]
	}
	distribute(alloc, active, bw, lat, size-sum, align, false)
	return alloc, nil
}

// balance returns the links of active that time balancing keeps: it solves
// T and drops every link whose latency exceeds it, until none does. Each
// drop lowers T (a dropped L_j > T pulls the weighted mean up), so the loop
// ends after at most len(active) rounds and keeps the lowest-latency link.
func balance(active []int, bw, lat []float64, size int64) []int {
	for {
		t := solveT(active, bw, lat, size)
		keep := make([]int, 0, len(active))
		for _, i := range active {
			if lat[i] <= t {
				keep = append(keep, i)
			}
		}
		if len(keep) == 0 {
			// Only rounding can get here (T is at least the smallest
			// latency when size >= 0): keep the lowest-latency links.
			lo := math.Inf(1)
			for _, i := range active {
				lo = math.Min(lo, lat[i])
			}
			for _, i := range active {
				if lat[i] == lo {
					keep = append(keep, i)
				}
			}
			return keep
		}
		if len(keep) == len(active) {
			return keep
		}
		active = keep
	}
}

// wholeBlocks is floor(x) as an int64 in [0, limit]: 0 for NaN or x <= 0,
// limit when x reaches it. Converting only values below float64(limit)
// keeps the conversion exact-or-truncating, never overflowing.
func wholeBlocks(x float64, limit int64) int64 {
	switch {
	case !(x > 0) || limit <= 0:
		return 0
	case x >= float64(limit):
		return limit
	default:
		return min(int64(x), limit)
	}
}

// solveT is the common finish time of eqs. 1-2 over the links in active:
// T = (size + Σ B_i L_i) / Σ B_i.
func solveT(active []int, bw, lat []float64, size int64) float64 {
	var sumB, sumBL float64
	for _, i := range active {
		sumB += bw[i]
		sumBL += bw[i] * lat[i]
	}
	return (float64(size) + sumBL) / sumB
}

// finishAt is the predicted finish time of a link sending d bytes at b
// bytes/s after latency lat (eq. 2).
func finishAt(d int64, b, lat float64) float64 {
	return lat + float64(d)/b
}

// distribute hands rem bytes to the links in cand: whole align blocks, then
// the partial rest, each to the link whose finish after taking it is the
// smallest (ties: the first in cand). With onePerLink a link takes at most
// one whole block (EAS: shares stay equal up to a block).
func distribute(alloc []int64, cand []int, bw, lat []float64, rem, align int64, onePerLink bool) {
	if rem <= 0 || len(cand) == 0 {
		return
	}
	// Rounding down leaves fewer than len(cand) blocks. Far more can only
	// come from floating-point loss on extreme inputs; hand those out in
	// proportion to bandwidth first so the greedy loop stays short.
	k := int64(len(cand))
	for !onePerLink && rem/align > k {
		var sumB float64
		for _, i := range cand {
			sumB += bw[i]
		}
		gave := int64(0)
		for _, i := range cand {
			give := wholeBlocks(float64(rem)*(bw[i]/sumB)/float64(align), (rem-gave)/align) * align
			alloc[i] += give
			gave += give
		}
		if gave == 0 {
			break
		}
		rem -= gave
	}
	took := make([]bool, len(alloc))
	pick := func(chunk int64, skipTook bool) int {
		best := -1
		var bestF float64
		for _, i := range cand {
			if skipTook && took[i] {
				continue
			}
			f := finishAt(alloc[i]+chunk, bw[i], lat[i])
			if best < 0 || f < bestF {
				best, bestF = i, f
			}
		}
		return best
	}
	give := func(chunk int64, skipTook bool) {
		best := pick(chunk, skipTook)
		if best < 0 { // every link took a block already (not reached for EAS)
			best = pick(chunk, false)
		}
		alloc[best] += chunk
		took[best] = true
	}
	if !onePerLink && rem/align > k {
		// Bandwidths so large that their sum overflows: all but k blocks
		// in one step, so the loop below stays short whatever the input.
		bulk := (rem/align - k) * align
		give(bulk, false)
		rem -= bulk
	}
	for ; rem >= align; rem -= align {
		give(align, onePerLink)
	}
	if rem > 0 {
		give(rem, false)
	}
}

// Finish is each link's predicted finish time, in seconds from the start,
// for allocation alloc under policy p: L_i + D_i/EffectiveBW_i (eq. 2), 0
// for a link sending nothing, +Inf for a link sending bytes that p cannot
// plan with. The transfer's predicted time is the largest entry. The result
// has one entry per link; a missing alloc entry counts as 0 bytes and extra
// entries are ignored.
func Finish(p Policy, links []Link, alloc []int64) []float64 {
	out := make([]float64, len(links))
	for i, l := range links {
		if i >= len(alloc) || alloc[i] <= 0 {
			continue
		}
		b, lat := EffectiveBW(p, l), latency(l)
		if !usable(b, lat) {
			out[i] = math.Inf(1)
			continue
		}
		out[i] = finishAt(alloc[i], b, lat)
	}
	return out
}

// Span is a byte range [Off, End) of the file: what one request to one
// replica asks for.
type Span struct{ Off, End int64 }

// Len is the number of bytes in s; 0 for an empty or inverted span.
func (s Span) Len() int64 {
	if s.End <= s.Off {
		return 0
	}
	return s.End - s.Off
}

// Ranges lays an allocation out as byte ranges: one contiguous span per
// link with bytes, in link order, together covering [0, sum(alloc)) without
// gap or overlap. Contiguous spans keep each replica's reads sequential. A
// link with no bytes (or a negative entry) gets no span.
func Ranges(alloc []int64) [][]Span {
	out := make([][]Span, len(alloc))
	var off int64
	for i, a := range alloc {
		if a <= 0 {
			continue
		}
		out[i] = []Span{{Off: off, End: off + a}}
		off += a
	}
	return out
}
