package policy

import (
	"cmp"
	"slices"
)

// WeightedShares shares a pair among VOs by weight, as FTS3's VO shares
// do: when VOs compete, a VO of weight w gets w/Σw of PairMax, Σ over the
// VOs holding allocations on the pair; a share a VO does not use is lent
// to the others, and taken back when it wants it.
//
// Precisely, each allocation has a target: the weighted max-min fair
// division (water-filling) of PairMax among the pair's VOs, by weight and
// by demand, then of each VO's part among its allocations, equally by
// demand. An allocation's demand is its Want, or ClientMax when Want is 0,
// capped at ClientMax. A VO whose demand is below its weighted share gets
// its demand, and the rest is divided among the others by weight: that is
// the lending. The targets are computed afresh at every decision, so a VO
// that arrives, or raises its want, moves the targets at once.
//
// An allocation moves to its target only when its own client asks, as in
// the paper: on Add it gets min(target, s_i); on Update, if above its
// target, it drops to the target at once (a borrower hands the share
// back), if it holds nothing it gets min(target, s_i), otherwise it grows
// by at most s_u toward the target. The Service grants growth only from
// free streams, so a VO below its share waits for the borrowers' next
// updates. Once every client has updated a few times the VOs hold their
// targets: under contention, w/Σw of PairMax each, to within a stream of
// integer rounding.
type WeightedShares struct{}

// Name is "weighted-shares".
func (WeightedShares) Name() string { return "weighted-shares" }

// Add grants min(target, s_i).
func (WeightedShares) Add(v View, r Request) (int, error) {
	t := shareTargets(v, "", r)
	return min(t, v.Params.Initial), nil
}

// Update moves a toward its target: down at once, up by s_u (or s_i from
// nothing).
func (WeightedShares) Update(v View, a Allocation, r Request) (int, error) {
	t := shareTargets(v, a.ID, r)
	switch {
	case a.Streams >= t:
		return t, nil
	case a.Streams == 0:
		return min(t, v.Params.Initial), nil
	default:
		return min(t, a.Streams+v.Params.Update), nil
	}
}

// Remove does nothing; targets are recomputed from the allocations left.
func (WeightedShares) Remove(View, Allocation) error { return nil }

// shareTargets returns the target of the allocation id in v, or of the
// new request r when id is empty; r's Want is the demand of the
// allocation concerned.
func shareTargets(v View, id string, r Request) int {
	demand := func(want int) int {
		if want == 0 || want > v.Params.ClientMax {
			return v.Params.ClientMax
		}
		return want
	}
	type item struct {
		vo     string
		demand int
		self   bool
	}
	items := make([]item, 0, len(v.Allocations)+1)
	for _, a := range v.Allocations {
		if a.ID == id {
			items = append(items, item{a.VO, demand(r.Want), true})
		} else {
			items = append(items, item{a.VO, demand(a.Want), false})
		}
	}
	if id == "" {
		items = append(items, item{r.VO, demand(r.Want), true})
	}

	// VOs in order of first appearance, so that rounding favours the
	// older ones, deterministically.
	var vos []string
	voDemand := map[string]int{}
	for _, it := range items {
		if _, ok := voDemand[it.vo]; !ok {
			vos = append(vos, it.vo)
		}
		voDemand[it.vo] += it.demand
	}
	ws := make([]float64, len(vos))
	ds := make([]int, len(vos))
	for i, vo := range vos {
		ws[i] = cmp.Or(v.Weights[vo], 1)
		ds[i] = voDemand[vo]
	}
	voTarget := fill(v.Params.PairMax, ws, ds)

	vo := r.VO
	var mine []int
	self := -1
	for _, it := range items {
		if it.vo == vo {
			if it.self {
				self = len(mine)
			}
			mine = append(mine, it.demand)
		}
	}
	ones := make([]float64, len(mine))
	for i := range ones {
		ones[i] = 1
	}
	return fill(voTarget[slices.Index(vos, vo)], ones, mine)[self]
}

// fill divides total among claimants of weights w and demands d by
// weighted max-min fairness: no one gets more than its demand, and what
// someone does not need goes to the others in proportion to their
// weights. Results are integers summing to min(total, Σd); the streams
// that rounding leaves go to the largest fractional parts, lowest index
// first among equals.
func fill(total int, w []float64, d []int) []int {
	out := make([]int, len(d))
	active := make([]int, 0, len(d))
	for i, di := range d {
		if di > 0 {
			active = append(active, i)
		}
	}
	rest := max(total, 0)
	for len(active) > 0 && rest > 0 {
		sumW := 0.0
		for _, i := range active {
			sumW += w[i]
		}
		// Satisfy everyone whose demand fits in its share; each one
		// satisfied leaves the others a larger share, so doing them all
		// in one pass with this round's shares is safe.
		left := active[:0:0]
		r := rest
		for _, i := range active {
			if float64(d[i]) <= float64(r)*w[i]/sumW {
				out[i] = d[i]
				rest -= d[i]
			} else {
				left = append(left, i)
			}
		}
		if len(left) < len(active) {
			active = left
			continue
		}
		// Nobody fits: everyone gets its proportional share, below its
		// demand, so a rounding stream never exceeds a demand.
		type frac struct {
			i int
			f float64
		}
		fr := make([]frac, len(active))
		given := 0
		for k, i := range active {
			share := float64(rest) * w[i] / sumW
			out[i] = int(share)
			given += out[i]
			fr[k] = frac{i, share - float64(out[i])}
		}
		slices.SortStableFunc(fr, func(a, b frac) int { return cmp.Compare(b.f, a.f) })
		for k := 0; k < rest-given; k++ {
			out[fr[k%len(fr)].i]++
		}
		break
	}
	return out
}
