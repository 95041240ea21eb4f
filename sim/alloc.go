package sim

import "math"

// flow is one transferring task as the rate allocator sees it.
type flow struct {
	res    [3]int // resource indexes; -1 = unused
	weight float64
	cap    float64 // the most the flow can use alone (its own concurrency limit)
	rate   float64 // output
}

// allocator shares resource capacities among flows by weighted max-min
// fairness (progressive filling): every flow's rate grows in proportion to
// its weight until the flow reaches its own cap or one of its resources is
// full; then those flows are frozen and filling goes on with the rest.
// Weights are the flows' connection counts, as TCP shares a bottleneck
// roughly per connection.
type allocator struct {
	residual []float64
	sumW     []float64
	active   []int
	used     []int
}

func (a *allocator) run(flows []*flow, capacity []float64) {
	n := len(capacity)
	if cap(a.residual) < n {
		a.residual = make([]float64, n)
		a.sumW = make([]float64, n)
	}
	a.residual = a.residual[:n]
	a.sumW = a.sumW[:n]
	copy(a.residual, capacity)
	clear(a.sumW)
	a.active = a.active[:0]
	for i, f := range flows {
		f.rate = 0
		if f.weight <= 0 || f.cap <= 0 {
			continue
		}
		a.active = append(a.active, i)
		for _, r := range f.res {
			if r >= 0 {
				a.sumW[r] += f.weight
			}
		}
	}
	// Only the resources some flow uses take part.
	a.used = a.used[:0]
	for r := range a.sumW {
		if a.sumW[r] > 0 {
			a.used = append(a.used, r)
		}
	}
	// level is the common rate per unit of weight reached so far.
	level := 0.0
	for len(a.active) > 0 {
		// The next event: a resource filling up, or a flow hitting its cap.
		next := math.Inf(1)
		for _, r := range a.used {
			if a.sumW[r] > 1e-12 {
				if l := level + a.residual[r]/a.sumW[r]; l < next {
					next = l
				}
			}
		}
		for _, i := range a.active {
			if l := flows[i].cap / flows[i].weight; l < next {
				next = l
			}
		}
		if math.IsInf(next, 1) {
			break
		}
		d := next - level
		kept := a.used[:0]
		for _, r := range a.used {
			a.residual[r] -= d * a.sumW[r]
			if a.sumW[r] > 1e-12 {
				kept = append(kept, r)
			}
		}
		a.used = kept
		level = next
		// Freeze flows at their cap or on a full resource.
		keep := a.active[:0]
		for _, i := range a.active {
			f := flows[i]
			full := f.cap/f.weight <= level*(1+1e-12)
			for _, r := range f.res {
				if r >= 0 && a.residual[r] <= 1e-9*math.Max(1, capacity[r]) {
					full = true
				}
			}
			if full {
				f.rate = math.Min(f.weight*level, f.cap)
				for _, r := range f.res {
					if r >= 0 {
						a.sumW[r] -= f.weight
					}
				}
				continue
			}
			keep = append(keep, i)
		}
		a.active = keep
	}
}
