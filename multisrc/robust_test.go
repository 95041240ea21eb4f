package multisrc

import (
	"math"
	"math/rand/v2"
	"testing"
)

// junk draws a float that is often NaN, infinite, negative or zero.
func junk(rng *rand.Rand) float64 {
	switch rng.IntN(8) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return 0
	case 4:
		return -rng.Float64() * 1e9
	default:
		return rng.Float64() * 1e9
	}
}

// TestNoPanicOnJunk feeds every function NaN, infinities, negatives and
// empty inputs: nothing may panic, and what is returned must keep its
// promises (Split sums to size, a steal lies inside the victim's last span).
func TestNoPanicOnJunk(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 3000 {
		links := make([]Link, rng.IntN(4))
		for i := range links {
			links[i] = Link{Mean: junk(rng), SD: junk(rng), Latency: junk(rng)}
		}
		size := rng.Int64N(1<<20) - 10
		align := rng.Int64N(10000) - 10
		for _, p := range append(Policies(), "junk") {
			if tf := TuningFactor(junk(rng), junk(rng)); math.IsNaN(tf) || tf < 0 || tf > 1 {
				t.Errorf("TuningFactor = %v, want a value in [0, 1]", tf)
			}
			alloc, err := Split(p, links, size, align)
			if err == nil {
				var sum int64
				for _, d := range alloc {
					sum += d
				}
				if sum != size {
					t.Fatalf("Split(%s, %+v, %d, %d) = %v sums to %d", p, links, size, align, alloc, sum)
				}
			}
			Finish(p, links, alloc)
			Ranges(alloc)
		}

		n := rng.IntN(4)
		remaining := make([][]Span, n)
		rates := make([]float64, rng.IntN(5))
		for i := range remaining {
			for range rng.IntN(3) {
				off := rng.Int64N(1000) - 100
				remaining[i] = append(remaining[i], Span{off, off + rng.Int64N(1000) - 100})
			}
		}
		for i := range rates {
			rates[i] = junk(rng)
		}
		thief := rng.IntN(5) - 1
		victim, take, ok := Steal(thief, remaining, rates, rng.Int64N(100)-10, align)
		if ok {
			var last Span
			for _, s := range remaining[victim] {
				if s.Len() > 0 {
					last = s
				}
			}
			if victim == thief || take.Len() <= 0 || take.End != last.End || take.Off < last.Off {
				t.Fatalf("Steal(%d, %v, %v) = %d, %v outside the victim's last span", thief, remaining, rates, victim, take)
			}
		} else if victim != -1 || take != (Span{}) {
			t.Fatalf("Steal without ok returned %d, %v", victim, take)
		}

		xs := make([]float64, rng.IntN(4))
		ys := make([]float64, rng.IntN(4))
		for i := range xs {
			xs[i] = junk(rng)
		}
		for i := range ys {
			ys[i] = junk(rng)
		}
		MeanSD(xs)
		Compare([][]float64{xs, ys})
		if p, err := TTestPaired(xs, ys); err == nil && (math.IsNaN(p) || p < 0 || p > 1) {
			t.Fatalf("TTestPaired(%v, %v) = %v", xs, ys, p)
		}
		if p, err := TTestWelch(xs, ys); err == nil && (math.IsNaN(p) || p < 0 || p > 1) {
			t.Fatalf("TTestWelch(%v, %v) = %v", xs, ys, p)
		}
	}
}

// TestSplitExtremeValues covers inputs where floating point overflows or
// loses every digit: bandwidths whose sum is +Inf, latencies that make T
// infinite, sizes at the int64 limit. Split must still return at once (a
// remainder handed out block by block would take years) with a sum of
// exactly size.
func TestSplitExtremeValues(t *testing.T) {
	cases := [][]Link{
		{{Mean: 1e9, Latency: 1e15}, {Mean: 1e9, Latency: 1e15 + 1}, {Mean: 1e-3, Latency: 1e15}},
		{{Mean: 1e300}, {Mean: 1e-300}},
		{{Mean: math.MaxFloat64}, {Mean: math.MaxFloat64}},
		{{Mean: math.MaxFloat64, Latency: 2}, {Mean: math.MaxFloat64, Latency: 1}}, // T = Inf/Inf
		{{Mean: 1e9, Latency: 1e300}, {Mean: 1e9, Latency: 1e300}},
		{{Mean: 1e-300, Latency: 1e-300}, {Mean: 5e-324}},
	}
	for _, links := range cases {
		for _, size := range []int64{math.MaxInt64, 1 << 62, 12345, 0} {
			for _, align := range []int64{1, 4096} {
				for _, p := range Policies() {
					alloc, err := Split(p, links, size, align)
					if err != nil {
						t.Fatalf("Split(%s, %+v, %d, %d): %v", p, links, size, align, err)
					}
					var sum int64
					for _, d := range alloc {
						if d < 0 || sum > math.MaxInt64-d {
							t.Fatalf("Split(%s, %+v, %d) = %v", p, links, size, alloc)
						}
						sum += d
					}
					if sum != size {
						t.Fatalf("Split(%s, %+v, %d) = %v sums to %d", p, links, size, alloc, sum)
					}
				}
			}
		}
	}
}
