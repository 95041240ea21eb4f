package multisrc

import "math"

// Steal is the dynamic mode's rebalancing rule (work stealing, beyond the
// paper): predictions are wrong often enough that a static Split leaves some
// links idle while one straggles, so an idle link takes over the end of the
// straggler's work.
//
// Link thief has finished its own spans. remaining[i] are link i's
// unfinished spans, rates[i] its observed rate in bytes/s. A rate that is
// not a finite positive number (0 included) is unknown and counts as the
// mean of the known rates, or as 1 for every link when none is known, so
// that links are then compared by remaining bytes alone. A rates slice
// shorter than remaining leaves the rest unknown.
//
// The victim is the other link with the latest predicted finish (remaining
// bytes / rate; ties: the lowest index). The thief takes a tail of the
// victim's last non-empty span, sized so that both finish together:
//
//	x = rem_v * r_t / (r_t + r_v)
//
// rounded down to a multiple of align (align <= 0 means 1). If x reaches the
// whole last span, the whole span is taken (no new cut, so no rounding);
// the victim's earlier spans are never split, so the victim keeps
// sequential reads. If the thief still has bytes of its own (rem_t > 0),
// they are counted as its backlog: x = (r_t rem_v - r_v rem_t)/(r_t + r_v),
// which is the rule above when rem_t = 0.
//
// ok is false, with victim -1 and an empty take, when there is no steal
// worth making: thief out of range, no other link with bytes left, a take
// of 0 bytes or fewer than min, or a thief that would not finish sooner
// than the victim alone. Pure function: the caller moves the bytes.
func Steal(thief int, remaining [][]Span, rates []float64, min, align int64) (victim int, take Span, ok bool) {
	n := len(remaining)
	if thief < 0 || thief >= n {
		return -1, Span{}, false
	}
	if align <= 0 {
		align = 1
	}
	r := effectiveRates(n, rates)
	rem := make([]int64, n)
	for i, spans := range remaining {
		for _, s := range spans {
			rem[i] += s.Len()
		}
	}
	victim = -1
	var late float64
	for i := range remaining {
		if i == thief || rem[i] <= 0 {
			continue
		}
		if f := float64(rem[i]) / r[i]; victim < 0 || f > late {
			victim, late = i, f
		}
	}
	if victim < 0 {
		return -1, Span{}, false
	}
	var last Span
	for _, s := range remaining[victim] {
		if s.Len() > 0 {
			last = s
		}
	}
	rt, rv := r[thief], r[victim]
	x := (rt*float64(rem[victim]) - rv*float64(rem[thief])) / (rt + rv)
	var t int64
	switch {
	case !(x > 0): // also NaN
		return -1, Span{}, false
	case x >= float64(last.Len()):
		t = last.Len()
	default:
		t = int64(math.Floor(x/float64(align))) * align
	}
	if t <= 0 || t < min {
		return -1, Span{}, false
	}
	if thiefDone := float64(rem[thief]+t) / rt; !(thiefDone < late) {
		return -1, Span{}, false
	}
	return victim, Span{Off: last.End - t, End: last.End}, true
}

// effectiveRates fills in unknown rates (not finite and positive) with the
// mean of the known ones, or 1 when none is known.
func effectiveRates(n int, rates []float64) []float64 {
	known := func(x float64) bool { return x > 0 && !math.IsInf(x, 1) }
	var sum float64
	var k int
	for i := 0; i < n && i < len(rates); i++ {
		if known(rates[i]) {
			sum += rates[i]
			k++
		}
	}
	fill := 1.0
	if k > 0 {
		fill = sum / float64(k)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = fill
		if i < len(rates) && known(rates[i]) {
			out[i] = rates[i]
		}
	}
	return out
}
