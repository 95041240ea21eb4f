package engine

import (
	"fmt"
	"sort"
)

// span is the byte interval [Off, End).
type span struct{ Off, End int64 }

func (s span) len() int64 { return s.End - s.Off }

// ranges is a set of bytes kept as sorted, disjoint, non-adjacent spans:
// the done part of a file. Adjacent and overlapping spans are merged on
// insertion, so its length stays about the number of chunks in flight.
type ranges []span

// add inserts [off, end).
func (r ranges) add(off, end int64) ranges {
	if off >= end {
		return r
	}
	// i: first span that ends at or after off (it may touch or overlap);
	// j: first span that starts after end (it cannot be merged).
	i := sort.Search(len(r), func(k int) bool { return r[k].End >= off })
	j := sort.Search(len(r), func(k int) bool { return r[k].Off > end })
	if i == j {
		r = append(r, span{})
		copy(r[i+1:], r[i:])
		r[i] = span{off, end}
		return r
	}
	m := span{min(off, r[i].Off), max(end, r[j-1].End)}
	r[i] = m
	return append(r[:i+1], r[j:]...)
}

// total is the number of bytes in the set.
func (r ranges) total() int64 {
	var n int64
	for _, s := range r {
		n += s.len()
	}
	return n
}

// missing is the complement of r within [0, size).
func (r ranges) missing(size int64) []span {
	var out []span
	var at int64
	for _, s := range r {
		if s.Off > at {
			out = append(out, span{at, s.Off})
		}
		at = s.End
	}
	if at < size {
		out = append(out, span{at, size})
	}
	return out
}

// check reports whether r is a well-formed set within [0, size): what a
// journal read from disk must satisfy before it is trusted.
func (r ranges) check(size int64) error {
	var at int64 = -1
	for _, s := range r {
		if s.Off < 0 || s.Off >= s.End || s.End > size {
			return fmt.Errorf("range [%d,%d) outside [0,%d)", s.Off, s.End, size)
		}
		if s.Off <= at {
			return fmt.Errorf("range [%d,%d) overlaps or touches the one before", s.Off, s.End)
		}
		at = s.End
	}
	return nil
}

func (r ranges) clone() ranges { return append(ranges(nil), r...) }

// remove takes [off, end) out of the set.
func (r ranges) remove(off, end int64) ranges {
	if off >= end {
		return r
	}
	var out ranges
	for _, s := range r {
		if s.End <= off || s.Off >= end {
			out = append(out, s)
			continue
		}
		if s.Off < off {
			out = append(out, span{s.Off, off})
		}
		if s.End > end {
			out = append(out, span{end, s.End})
		}
	}
	return out
}

// sortSpans orders spans by offset.
func sortSpans(s []span) {
	sort.Slice(s, func(i, j int) bool { return s[i].Off < s[j].Off })
}
