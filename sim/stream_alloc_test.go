package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestHeapAllocatorMatches: on random instances -- flows over two
// endpoints and a path, caps, weights and capacities spread over orders of
// magnitude, shared and private resources -- the heap allocator gives the
// rates allocator gives, to 1e-9 relative.
func TestHeapAllocatorMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var a allocator
	var h heapAllocator
	for it := 0; it < 400; it++ {
		nr := 2 + r.IntN(60)
		nf := 1 + r.IntN(300)
		caps := make([]float64, nr)
		for i := range caps {
			caps[i] = math.Exp(r.Float64()*8) * 1e6
		}
		mk := func() []*flow {
			r2 := rand.New(rand.NewPCG(uint64(it), 1))
			fs := make([]*flow, nf)
			for i := range fs {
				f := &flow{res: [3]int{r2.IntN(nr), r2.IntN(nr), -1}, weight: float64(1 + r2.IntN(16)), cap: math.Exp(r2.Float64()*9) * 1e5}
				if f.res[0] == f.res[1] {
					f.res[1] = -1
				}
				if r2.IntN(2) == 0 {
					f.res[2] = r2.IntN(nr)
					if f.res[2] == f.res[0] || f.res[2] == f.res[1] {
						f.res[2] = -1
					}
				}
				if r2.IntN(20) == 0 {
					f.res[0] = -1 // a flow limited only by itself
				}
				fs[i] = f
			}
			return fs
		}
		f1, f2 := mk(), mk()
		a.run(f1, caps)
		h.run(f2, caps)
		for i := range f1 {
			x, y := f1[i].rate, f2[i].rate
			if math.Abs(x-y) > 1e-9*math.Max(math.Abs(x), 1) {
				t.Fatalf("instance %d (%d flows, %d resources): flow %d rate %.17g by allocator, %.17g by heapAllocator", it, nf, nr, i, x, y)
			}
		}
	}
}
