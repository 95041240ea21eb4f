package sched

import (
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
