package model

import (
	"errors"
	"math"
	"testing"
)

// TestSolveOrderNewton: the order c of the dynamic-order model is found by
// Newton's iteration to near machine precision for orders from strongly
// negative to far above 2, for several spacings of the three levels, and
// in few steps (bisection alone would need about 45 to reach 1e-12 from
// the initial bracket): Newton does the work, bisection only guards it.
func TestSolveOrderNewton(t *testing.T) {
	designs := [][3]float64{{1, 2, 4}, {1, 3, 9}, {2, 5, 11}, {1, 4, 32}, {1, 16, 32}}
	orders := []float64{-6, -1, -0.3, 1e-3, 0.25, 1, 2, 2.7, 3.5, 8, 20}
	worst := 0
	for _, d := range designs {
		u, v := math.Log(d[1]/d[0]), math.Log(d[2]/d[0])
		for _, c := range orders {
			// The ratio (n3^c - n1^c)/(n2^c - n1^c), computed directly.
			r := (math.Pow(d[2], c) - math.Pow(d[0], c)) / (math.Pow(d[1], c) - math.Pow(d[0], c))
			got, iters, err := solveOrder(u, v, math.Log(r))
			if err != nil {
				t.Errorf("levels %v, c=%g: %v", d, c, err)
				continue
			}
			// The ratio itself carries rounding error, which the root
			// inherits, most for orders far from 0 on wide spacings.
			if tol := 1e-9 * math.Max(1, math.Abs(c)); math.Abs(got-c) > tol {
				t.Errorf("levels %v: c=%g recovered as %.15g", d, c, got)
			}
			worst = max(worst, iters)
		}
	}
	if worst > 15 {
		t.Errorf("Newton took up to %d iterations; expected quadratic convergence in a handful", worst)
	}
}

func TestSolveOrderNoRoot(t *testing.T) {
	u, v := math.Log(2), math.Log(4)
	for _, target := range []float64{0, -1, math.NaN(), math.Inf(1), 1000} {
		if _, _, err := solveOrder(u, v, target); !errors.Is(err, ErrDegenerate) {
			t.Errorf("target %g: error %v, want ErrDegenerate", target, err)
		}
	}
	if _, _, err := solveOrder(v, u, 1); !errors.Is(err, ErrDegenerate) {
		t.Errorf("levels out of order: error %v, want ErrDegenerate", err)
	}
}
