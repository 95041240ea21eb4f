package sched

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortKeys: the radix sort of the wait queue orders exactly as the
// plain comparison (descending xfactor, then ascending ID), including
// ties, small queues and xfactors that differ only in low bits.
func TestSortKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{0, 1, 5, 255, 256, 1000, 20000} {
		for trial := 0; trial < 5; trial++ {
			keys := make([]wkey, n)
			for i := range keys {
				var xf float64
				switch r.IntN(4) {
				case 0:
					xf = float64(r.IntN(5)) // many exact ties
				case 1:
					xf = 1 + r.Float64()*1e-12 // differ only in low bits
				default:
					xf = r.ExpFloat64() * 10
				}
				keys[i] = wkey{descKey(xf), TaskID(r.Int64N(1e9)), int32(i)}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, cmpKey)
			sortKeys(keys, nil)
			if !slices.Equal(keys, want) {
				t.Fatalf("n=%d: radix order differs from the comparison order", n)
			}
		}
	}
	if descKey(2) >= descKey(1) || descKey(0) <= descKey(1e-300) {
		t.Error("descKey does not reverse the order of xfactors")
	}
}

// TestSortRecs: the radix sort that groups waiting tasks by pair orders
// them exactly as a stable comparison sort on the pair does, for few and
// many endpoints (one to several digits).
func TestSortRecs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, n := range []uint64{1, 2, 45, 1000, 5000, 70000} {
		for _, size := range []int{0, 1, 300, 20000} {
			recs := make([]pairRec, size)
			for i := range recs {
				recs[i] = pairRec{src: int32(r.Uint64N(n)), dst: int32(r.Uint64N(n)), size: r.Int64N(1e9), i: int32(i)}
			}
			key := func(p pairRec) uint64 { return uint64(p.src)*n + uint64(p.dst) }
			want := slices.Clone(recs)
			slices.SortStableFunc(want, func(a, b pairRec) int { return cmp.Compare(key(a), key(b)) })
			sortRecs(recs, nil, n)
			if !slices.Equal(recs, want) {
				t.Fatalf("n=%d, %d records: radix order differs from the stable comparison order", n, size)
			}
		}
	}
}
