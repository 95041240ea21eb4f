package sched

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCmpName: comparing endpoint names by their eight-byte prefixes
// first orders them exactly as comparing the names does (links at an
// endpoint are ordered by name on ties, and that order reaches the
// decisions), including names that are prefixes of others, names with
// zero bytes, long common prefixes and bytes above 0x7f.
func TestCmpName(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 'a', 'b', 'z', '.', 0x7f, 0x80, 0xff}
	var names []string
	for range 300 {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("dtn-") // a common prefix, as real names have
		}
		for range r.IntN(12) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		names = append(names, b.String())
	}
	names = append(names, "", "a", "a\x00", "a\x00\x00\x00\x00\x00\x00\x00\x00", "abcdefgh", "abcdefghi", "abcdefgh\x00")
	c := &cycle{}
	for _, n := range names {
		c.eps = append(c.eps, epState{name: n, prefix: namePrefix(n)})
	}
	sign := func(x int) int { return min(max(x, -1), 1) }
	for i := range c.eps {
		for j := range c.eps {
			if got, want := sign(c.cmpName(int32(i), int32(j))), strings.Compare(names[i], names[j]); got != want {
				t.Fatalf("cmpName(%q, %q) = %d, want %d", names[i], names[j], got, want)
			}
		}
	}
}
