package sim

// heapAllocator computes the same weighted max-min fair rates as
// allocator (progressive filling with per-flow caps), in O(E log E) for E
// flow-resource incidences instead of allocator's O((F+R)²): it keeps the
// level at which each resource would fill, and each flow's cap level, in
// heaps, and freezes flows one event at a time. allocator rescans every
// resource and flow at each of up to F+R filling steps, which is nothing
// for the SC'15 testbed's few dozen flows and most of the time of a
// facility whose congested components hold hundreds. The streaming engine
// uses it above smallAlloc flows; TestHeapAllocatorMatches checks that
// both give the same rates.
type heapAllocator struct {
	used   []float64 // bytes/s taken by frozen flows, per resource
	w      []float64 // active weight, per resource
	active []int32   // active flows, per resource
	ver    []uint32  // per resource: heap entries of other versions are stale
	first  []int32   // CSR: flows of resource r are idx[first[r]:first[r+1]]
	idx    []int32
	fill   []int32
	done   []bool
	rh     levelHeap // resources by fill level
	fh     levelHeap // flows by cap level
}

// smallAlloc is the component size up to which the streaming engine uses
// allocator itself, so that small worlds (the SC'15 testbed) get exactly
// Run's rates.
const smallAlloc = 64

type levelItem struct {
	level float64
	i     int32
	ver   uint32
}

type levelHeap []levelItem

func (h levelHeap) less(a, b int) bool {
	return h[a].level < h[b].level || (h[a].level == h[b].level && h[a].i < h[b].i)
}

func (h *levelHeap) push(x levelItem) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *levelHeap) pop() levelItem {
	s := *h
	x := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s.less(l, m) {
			m = l
		}
		if r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return x
}

func growTo[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// run sets every flow's rate: as allocator.run, for flows whose res index
// capacity (-1: unused).
func (a *heapAllocator) run(flows []*flow, capacity []float64) {
	nr := len(capacity)
	a.used = growTo(a.used, nr)
	a.w = growTo(a.w, nr)
	a.active = growTo(a.active, nr)
	a.ver = growTo(a.ver, nr)
	a.first = growTo(a.first, nr+1)
	a.done = growTo(a.done, len(flows))
	a.rh, a.fh = a.rh[:0], a.fh[:0]
	n := 0
	for i, f := range flows {
		f.rate = 0
		if f.weight <= 0 || f.cap <= 0 {
			a.done[i] = true
			continue
		}
		for _, r := range f.res {
			if r >= 0 {
				a.first[r+1]++
				a.w[r] += f.weight
				a.active[r]++
				n++
			}
		}
		a.fh.push(levelItem{level: f.cap / f.weight, i: int32(i)})
	}
	for r := 0; r < nr; r++ {
		a.first[r+1] += a.first[r]
	}
	a.idx = growTo(a.idx, n)
	a.fill = append(a.fill[:0], a.first[:nr]...)
	fill := a.fill
	for i, f := range flows {
		if a.done[i] {
			continue
		}
		for _, r := range f.res {
			if r >= 0 {
				a.idx[fill[r]] = int32(i)
				fill[r]++
			}
		}
	}
	for r := 0; r < nr; r++ {
		if a.active[r] > 0 {
			a.rh.push(levelItem{level: a.fillLevel(r, capacity), i: int32(r)})
		}
	}
	// freeze fixes flow i at rate x and moves its resources' fill levels.
	freeze := func(i int, x float64) {
		a.done[i] = true
		f := flows[i]
		f.rate = x
		for _, r := range f.res {
			if r < 0 {
				continue
			}
			a.used[r] += x
			a.w[r] -= f.weight
			a.active[r]--
			a.ver[r]++
			if a.active[r] > 0 {
				a.rh.push(levelItem{level: a.fillLevel(r, capacity), i: int32(r), ver: a.ver[r]})
			}
		}
	}
	for {
		for len(a.rh) > 0 && a.rh[0].ver != a.ver[a.rh[0].i] {
			a.rh.pop()
		}
		for len(a.fh) > 0 && a.done[a.fh[0].i] {
			a.fh.pop()
		}
		if len(a.fh) == 0 {
			break // every flow frozen
		}
		if len(a.rh) == 0 || a.fh[0].level <= a.rh[0].level {
			// A flow reaches its own cap first.
			it := a.fh.pop()
			freeze(int(it.i), flows[it.i].cap)
			continue
		}
		// A resource fills: its active flows stop at this level.
		it := a.rh.pop()
		r := int(it.i)
		level := it.level
		for _, i := range a.idx[a.first[r]:a.first[r+1]] {
			if !a.done[i] {
				f := flows[i]
				freeze(int(i), min(f.weight*max(level, 0), f.cap))
			}
		}
	}
}

// fillLevel is the level (rate per unit of weight) at which resource r
// fills with its active flows.
func (a *heapAllocator) fillLevel(r int, capacity []float64) float64 {
	return (capacity[r] - a.used[r]) / a.w[r]
}
