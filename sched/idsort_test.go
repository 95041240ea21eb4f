package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestIDSorter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		ids  []int64
	}{
		{"empty", nil},
		{"one", []int64{7}},
		{"in order", []int64{1, 2, 3, 10, 11}},
		{"reversed", []int64{9, 7, 5, 3, 1}},
		{"one digit", []int64{1000, 3, 2047, 1, 5}},
		{"IDs past 2^33", []int64{1 << 40, 3, 1<<33 + 1, 1 << 33, 2047, 2048, 1<<62 + 5}},
	}
	var many []int64
	for _, i := range rng.Perm(100_000) {
		many = append(many, int64(i)*7919+1)
	}
	tests = append(tests, struct {
		name string
		ids  []int64
	}{"a shuffled 100,000", many})
	var s IDSorter // reused, as a world does
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := make([]*Task, len(tc.ids))
			for i, id := range tc.ids {
				ts[i] = &Task{ID: TaskID(id), Size: id} // Size: the record follows its ID
			}
			s.Sort(ts)
			want := slices.Sorted(slices.Values(tc.ids))
			for i, st := range ts {
				if int64(st.ID) != want[i] || st.Size != want[i] {
					t.Fatalf("position %d: ID %d (record of %d), want %d", i, st.ID, st.Size, want[i])
				}
			}
		})
	}
}
