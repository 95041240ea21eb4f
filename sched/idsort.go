package sched

// IDSorter puts snapshot tasks in ID order, the order a world hands them
// to a scheduler (decisions must not depend on how the world stores its
// tasks), reusing its memory from one call to the next.
//
// It is a least-significant-digit radix sort on 11-bit digits of the ID,
// over as many digits as the largest ID has: linear, stable, and reading
// each task once, where a comparison sort of a million pointers chases
// every pointer twenty times. Input already in order costs one pass.
//
// It sorts the pointers with their IDs rather than going through the
// cycle's sortKeys (keys with an index, then a permutation): that was
// 10-20% slower on a million-task snapshot, measured alternately.
type IDSorter struct {
	buf []idRef
}

type idRef struct {
	id uint64
	t  *Task
}

// Sort orders ts by ID (IDs are not negative).
func (s *IDSorter) Sort(ts []*Task) {
	n := len(ts)
	if n < 2 {
		return
	}
	if cap(s.buf) < 2*n {
		s.buf = make([]idRef, 2*n)
	}
	a, b := s.buf[:n], s.buf[n:2*n]
	defer clear(s.buf[:2*n]) // keep no tasks alive between calls
	var top uint64
	ordered := true
	for i, t := range ts {
		id := uint64(t.ID)
		a[i] = idRef{id, t}
		top |= id
		if i > 0 && id < a[i-1].id {
			ordered = false
		}
	}
	if ordered {
		return
	}
	const bits = 11
	var count [1 << bits]int
	for shift := uint(0); shift < 64 && top>>shift != 0; shift += bits {
		clear(count[:])
		for i := range a {
			count[a[i].id>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d := range count {
			count[d], sum = sum, sum+count[d]
		}
		for i := range a {
			d := a[i].id >> shift & (1<<bits - 1)
			b[count[d]] = a[i]
			count[d]++
		}
		a, b = b, a
	}
	for i := range a {
		ts[i] = a[i].t
	}
}
