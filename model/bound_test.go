package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

// TestBound: the answer at the chosen level never lies above every sample
// by more than the fit's uncertainty, and when the curve says more, the
// answer is clamped and says why.
func TestBound(t *testing.T) {
	at := func(m model.SecondOrder, ns ...float64) []float64 {
		th := make([]float64, len(ns))
		for i, n := range ns {
			th[i] = m.At(n)
		}
		return th
	}
	tests := []struct {
		name    string
		n, th   []float64
		hi      int
		level   int     // the chosen level (Optimum)
		want    float64 // the answer
		clamped bool
		note    []string // parts of Note ("" none)
	}{
		{
			// Seen on loopback: an exact fit peaking at 2.9 GB/s at 2
			// streams, 60% above the best sample. The samples support
			// 1.8 GB/s and their noise 5% more.
			name: "loopback 1.6/1.8/1.3 GB/s at 1, 4, 16",
			n:    []float64{1, 4, 16}, th: []float64{1.6e9, 1.8e9, 1.3e9}, hi: 32,
			level: 2, want: 1.8e9 * 1.05, clamped: true,
			note: []string{"n=2", "60% more than the best sample (n=4)", "±5%", "fit the model exactly", "clamped"},
		},
		{
			// The same throughputs at 1, 2, 4: the fit peaks at a
			// sample; nothing to clamp.
			name: "peak at a sample",
			n:    []float64{1, 2, 4}, th: []float64{1.6e9, 1.8e9, 1.3e9}, hi: 32,
			level: 2, want: 1.8e9,
		},
		{
			// A curve that levels off at the top sampled level.
			name: "saturating, top sampled",
			n:    []float64{1, 4, 16, 32}, th: at(saturating, 1, 4, 16, 32), hi: 32,
			level: 32, want: saturating.At(32),
		},
		{
			// The price of the bound: a real peak (7071 at 8) more than
			// 5% above sparse samples (6325 at 16) is cut to the bound.
			name: "real peak between sparse samples",
			n:    []float64{1, 4, 16}, th: at(peaked, 1, 4, 16), hi: 32,
			level: 8, want: peaked.At(16) * 1.05, clamped: true,
			note: []string{"n=8", "12% more than the best sample (n=16)"},
		},
		{
			// A peak within the noise of the best sample is the curve's.
			name: "peak within the uncertainty",
			n:    []float64{1, 4, 16}, th: at(peaked, 1, 4, 16), hi: 32,
			level: 8, want: peaked.At(8), // ±15%: see the options below
		},
		{
			// Sampling stopped at 16 on a rising curve; the optimum at
			// 32 is extrapolated and 9% above the sample at 16.
			name: "chosen level beyond the samples",
			n:    []float64{1, 4, 16}, th: at(saturating, 1, 4, 16), hi: 32,
			level: 32, want: saturating.At(16) * 1.05, clamped: true,
			note: []string{"n=32 is outside the sampled levels 1-16", "extrapolated", "clamped"},
		},
		{
			// Extrapolated, but no higher than the samples allow: said,
			// not clamped.
			name: "beyond the samples, within the bound",
			n:    []float64{1, 4, 16}, th: at(saturating, 1, 4, 16), hi: 20,
			level: 20, want: saturating.At(20),
			note: []string{"n=20 is outside the sampled levels 1-16"},
		},
		{
			// No model: the samples themselves, never above the best.
			name: "best sample",
			n:    []float64{1, 2}, th: []float64{1e9, 2e9}, hi: 32,
			level: 2, want: 2e9,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt := model.PredictOptions{Hi: tc.hi}
			if tc.name == "peak within the uncertainty" {
				opt.Noise = 0.15
			}
			p, err := model.Predict(tc.n, tc.th, opt)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Optimum(); got != tc.level {
				t.Fatalf("Optimum %d, want %d (%s)", got, tc.level, p.Reason)
			}
			b := p.Bound(tc.level)
			if b.Level != tc.level || !near(b.Fitted, p.At(float64(tc.level)), 1e-12) {
				t.Errorf("Bound(%d): level %d, fitted %g, want the curve's %g", tc.level, b.Level, b.Fitted, p.At(float64(tc.level)))
			}
			if !near(b.Throughput, tc.want, 1e-9) || b.Clamped != tc.clamped {
				t.Errorf("Bound(%d) = %g (clamped %v), want %g (clamped %v); fitted %g; note %q",
					tc.level, b.Throughput, b.Clamped, tc.want, tc.clamped, b.Fitted, b.Note)
			}
			if best := maxOf(tc.th); b.Throughput > best*(1+b.Uncertainty)*(1+1e-12) {
				t.Errorf("answer %g is above the best sample %g by more than ±%g", b.Throughput, best, b.Uncertainty)
			}
			if len(tc.note) == 0 && b.Note != "" {
				t.Errorf("note %q, want none", b.Note)
			}
			for _, part := range tc.note {
				if !strings.Contains(b.Note, part) {
					t.Errorf("note %q lacks %q", b.Note, part)
				}
			}
		})
	}
}

// TestBoundUncertainty: with more samples than parameters the uncertainty
// is twice the relative residual standard error, unless that is below the
// sample noise; with three it is the sample noise.
func TestBoundUncertainty(t *testing.T) {
	ns := []float64{1, 2, 4, 8, 16, 32}
	wobble := func(frac float64) []float64 {
		th := make([]float64, len(ns))
		for i, n := range ns {
			th[i] = saturating.At(n) * (1 + frac*float64(1-2*(i%2)))
		}
		return th
	}
	tests := []struct {
		name  string
		n, th []float64
		noise float64
		dof   int
		want  func(p model.Prediction) float64
	}{
		{"exact fit of three", []float64{1, 4, 16}, []float64{1.6e9, 1.8e9, 1.3e9}, 0, 0,
			func(model.Prediction) float64 { return model.DefaultNoise }},
		{"exact fit, other noise", []float64{1, 4, 16}, []float64{1.6e9, 1.8e9, 1.3e9}, 0.1, 0,
			func(model.Prediction) float64 { return 0.1 }},
		{"six samples, ±8% wobble", ns, wobble(0.08), 0, 3,
			func(p model.Prediction) float64 { return 2 * residualSE(p, ns, wobble(0.08)) }},
		{"six samples, ±1% wobble: the noise floor", ns, wobble(0.01), 0, 3,
			func(model.Prediction) float64 { return model.DefaultNoise }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := model.Predict(tc.n, tc.th, model.PredictOptions{Hi: 32, Noise: tc.noise})
			if err != nil {
				t.Fatal(err)
			}
			if p.DoF != tc.dof {
				t.Errorf("DoF %d, want %d", p.DoF, tc.dof)
			}
			want := tc.want(p)
			if got := p.Uncertainty(); !near(got, want, 1e-9) {
				t.Errorf("Uncertainty %g, want %g (spread %g)", got, want, p.Spread)
			}
			if got := p.Bound(p.Optimum()).Uncertainty; !near(got, want, 1e-9) {
				t.Errorf("Bound's Uncertainty %g, want %g", got, want)
			}
		})
	}
	for _, bad := range []float64{-0.1, math.NaN(), math.Inf(1)} {
		if _, err := model.Predict([]float64{1, 4, 16}, []float64{1, 2, 3}, model.PredictOptions{Noise: bad}); err == nil {
			t.Errorf("Noise %g accepted", bad)
		}
	}
}

// residualSE is the relative residual standard error of p's curve at the
// samples, over their number less three parameters.
func residualSE(p model.Prediction, n, th []float64) float64 {
	ss := 0.0
	for i := range n {
		r := (th[i] - p.At(n[i])) / p.At(n[i])
		ss += r * r
	}
	return math.Sqrt(ss / float64(len(n)-3))
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}
