package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// SizeLaw is the file-size distribution of the trace Generate builds for
// one load, as a law to draw from one file at a time. Generate fixes the
// number of files per class (Table 2) and scales the two largest classes
// so that the trace's volume is exactly right; a stream of millions of
// transfers (a facility day) cannot be built that way without holding it
// in memory, so SizeLaw draws each file independently with the same
// ingredients:
//
//   - its class with probability proportional to ClassCountsFor(load),
//   - its size log-uniform within the class,
//   - the part of a 100M-1G or 1-10G size above its class's lower bound
//     multiplied by one factor, clamped to the class, as drawSizes does,
//
// the factor chosen so that the mean size equals the generated trace's
// (load × PaperSourceCapacity × 15 minutes over the Table 2 file count).
// Only the expectation is matched, not each trace's total.
type SizeLaw struct {
	load  float64
	cum   [NumClasses]float64 // cumulative class probabilities
	prob  [NumClasses]float64
	scale float64
	mean  float64
}

// sizeQuad is the number of quadrature points per class used to compute
// a class's mean size: the log-uniform law is smooth, so this is far more
// than the 1e-6 relative accuracy needed.
const sizeQuad = 4096

// NewSizeLaw returns the size law of the SC'15 trace of the given load
// (0.45 is the 45% trace), 0 < load <= 2.
func NewSizeLaw(load float64) (*SizeLaw, error) {
	counts, err := ClassCountsFor(load)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return nil, fmt.Errorf("trace: load %v gives no files per 15 minutes", load)
	}
	l := &SizeLaw{load: load}
	sum := 0.0
	for c, n := range counts {
		l.prob[c] = float64(n) / float64(total)
		sum += l.prob[c]
		l.cum[c] = sum
	}
	l.cum[NumClasses-1] = 1
	target := load * PaperSourceCapacity * DefaultMinutes * 60 / float64(total)
	meanAt := func(s float64) float64 {
		m := 0.0
		for c := range counts {
			if l.prob[c] > 0 {
				m += l.prob[c] * classMean(c, s)
			}
		}
		return m
	}
	// The mean grows monotonically with the factor; bisect in log space
	// over the same range as drawSizes.
	lo, hi := math.Log(1e-12), math.Log(1e12)
	if meanAt(math.Exp(lo)) > target || meanAt(math.Exp(hi)) < target {
		return nil, fmt.Errorf("trace: load %v: a mean size of %.4g bytes is out of reach of the class bounds", load, target)
	}
	for range 200 {
		mid := (lo + hi) / 2
		if meanAt(math.Exp(mid)) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	l.scale = math.Exp((lo + hi) / 2)
	l.mean = meanAt(l.scale)
	return l, nil
}

// classMean is the mean size of class c when the excess of the scaled
// classes over their lower bound is multiplied by s (midpoint rule over
// the log-uniform law).
func classMean(c int, s float64) float64 {
	lnLo, lnHi := math.Log(float64(classLower[c])), math.Log(float64(classUpper[c]))
	sum := 0.0
	for i := range sizeQuad {
		x := math.Exp(lnLo + (float64(i)+0.5)/sizeQuad*(lnHi-lnLo))
		sum += sizeOf(c, x, s)
	}
	return sum / sizeQuad
}

// sizeOf is drawSizes' size for a draw x of class c at factor s.
func sizeOf(c int, x, s float64) float64 {
	lo, hi := float64(classLower[c]), float64(classUpper[c])
	v := x
	if c >= firstScaledClass {
		v = lo + s*(x-lo)
	}
	return math.Round(min(max(v, lo), hi))
}

// Draw returns one file size in bytes.
func (l *SizeLaw) Draw(r *rand.Rand) int64 {
	u := r.Float64()
	c := 0
	for c < NumClasses-1 && u >= l.cum[c] {
		c++
	}
	lnLo, lnHi := math.Log(float64(classLower[c])), math.Log(float64(classUpper[c]))
	return int64(sizeOf(c, math.Exp(lnLo+r.Float64()*(lnHi-lnLo)), l.scale))
}

// Mean is the law's mean size in bytes.
func (l *SizeLaw) Mean() float64 { return l.mean }

// Load is the load of the SC'15 trace the law comes from.
func (l *SizeLaw) Load() float64 { return l.load }

// ClassProbabilities is the chance of a file falling in each size class.
func (l *SizeLaw) ClassProbabilities() [NumClasses]float64 { return l.prob }

// Scale is the factor applied to the large classes' excess over their
// lower bound (below 1: the paper's volumes need smaller large files than
// log-uniform draws give).
func (l *SizeLaw) Scale() float64 { return l.scale }
