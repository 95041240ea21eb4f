package model_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/model"
)

// runSampler drives a Sampler with throughputs from th (by level) and
// returns the levels it sampled and why it stopped.
func runSampler(t *testing.T, s *model.Sampler, th map[int]float64) ([]float64, string) {
	t.Helper()
	for i := 0; i < 64; i++ {
		n, ok := s.Next()
		if !ok {
			ns, _ := s.Samples()
			return ns, s.Stopped()
		}
		if err := s.Add(n, th[n]); err != nil {
			ns, _ := s.Samples()
			return ns, s.Stopped()
		}
	}
	t.Fatal("sampler did not stop")
	return nil, ""
}

func TestSampler(t *testing.T) {
	linear := map[int]float64{1: 1000, 2: 2000, 4: 4000, 6: 6000, 8: 8000, 16: 16000, 32: 32000, 64: 64000}
	cases := []struct {
		name   string
		s      model.Sampler
		th     map[int]float64
		want   []float64
		reason string
	}{
		// The paper's Algorithm 2 doubles (Growth 2).
		{"perfect scaling runs to Max", model.Sampler{Growth: 2}, linear, []float64{1, 2, 4, 8, 16, 32}, "next level 64 exceeds the maximum 32"},
		{"Max 8", model.Sampler{Growth: 2, Max: 8}, linear, []float64{1, 2, 4, 8}, "exceeds the maximum 8"},
		{"Max below three samples", model.Sampler{Growth: 2, Max: 2}, linear, []float64{1, 2}, "exceeds the maximum 2"},
		// Slope 4→8: (2700-2500)/4 = 50 per stream = 0.05 of the first
		// sample, below the default 0.1.
		{"levelling off", model.Sampler{Growth: 2}, map[int]float64{1: 1000, 2: 1900, 4: 2500, 8: 2700, 16: 2800}, []float64{1, 2, 4, 8}, "relative slope 0.050 from n=4 to n=8 is below 0.1"},
		// The same curve with a higher threshold stops a level earlier:
		// 2→4 gains 300 per stream = 0.3 < 0.5.
		{"threshold 0.5", model.Sampler{Growth: 2, Threshold: 0.5}, map[int]float64{1: 1000, 2: 1900, 4: 2500, 8: 2700}, []float64{1, 2, 4}, "below 0.5"},
		{"throughput falls", model.Sampler{Growth: 2}, map[int]float64{1: 1000, 2: 1800, 4: 1700, 8: 5000}, []float64{1, 2, 4}, "throughput fell from n=2 to n=4"},
		// Falling or flat from 1 to 2 does not stop before the third
		// sample: the models need three levels.
		{"flat start still samples three", model.Sampler{Growth: 2}, map[int]float64{1: 1000, 2: 1000, 4: 1000, 8: 5000}, []float64{1, 2, 4}, "relative slope 0.000"},
		{"dip at 2 then rising", model.Sampler{Growth: 2}, map[int]float64{1: 1000, 2: 900, 4: 1500, 8: 2500, 16: 2600}, []float64{1, 2, 4, 8, 16}, "below 0.1"},
		{"failed sample", model.Sampler{Growth: 2}, map[int]float64{1: 1000, 2: 1800, 4: -1}, []float64{1, 2}, "sample at n=4 failed"},
		// Quadrupling reaches the range's top in fewer samples; a level
		// past Max is replaced by Max itself, so the top is sampled.
		{"growth 4 runs to Max", model.Sampler{Growth: 4}, linear, []float64{1, 4, 16, 32}, "next level 128 exceeds the maximum 32"},
		// Slope 4→16: (3500-3000)/12 = 42 per stream = 0.042 of the first.
		{"growth 4 levelling off", model.Sampler{Growth: 4}, map[int]float64{1: 1000, 4: 3000, 16: 3500, 32: 3600}, []float64{1, 4, 16}, "relative slope 0.042 from n=4 to n=16"},
		{"growth 4, Max 8", model.Sampler{Growth: 4, Max: 8}, linear, []float64{1, 4, 8}, "exceeds the maximum 8"},
		// A range too small for three levels four times apart still
		// gets three: the geometric middle comes second.
		{"growth 4, Max 4", model.Sampler{Growth: 4, Max: 4}, linear, []float64{1, 2, 4}, "next level 16 exceeds the maximum 4"},
		{"growth 4, Max 3", model.Sampler{Growth: 4, Max: 3}, map[int]float64{1: 1000, 2: 2000, 3: 3000}, []float64{1, 2, 3}, "exceeds the maximum 3"},
		{"growth 4, Max 2", model.Sampler{Growth: 4, Max: 2}, linear, []float64{1, 2}, "exceeds the maximum 2"},
		{"growth 8, Max 32", model.Sampler{Growth: 8, Max: 32}, linear, []float64{1, 8, 32}, "exceeds the maximum 32"},
		{"growth 16, Max 16", model.Sampler{Growth: 16, Max: 16}, linear, []float64{1, 4, 16}, "exceeds the maximum 16"},
		{"Max not a power of two", model.Sampler{Growth: 2, Max: 6}, linear, []float64{1, 2, 4, 6}, "next level 12 exceeds the maximum 6"},
		// The default quadruples (DefaultGrowth: samples spread over the
		// range, so the fit interpolates).
		{"default growth", model.Sampler{}, linear, []float64{1, 4, 16, 32}, "next level 128 exceeds the maximum 32"},
		{"growth 1 means the default", model.Sampler{Growth: 1, Max: 8}, linear, []float64{1, 4, 8}, "exceeds the maximum 8"},
	}
	for _, c := range cases {
		s := c.s
		got, why := runSampler(t, &s, c.th)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: sampled %v, want %v (%s)", c.name, got, c.want, why)
		}
		if !strings.Contains(why, c.reason) {
			t.Errorf("%s: stopped because %q, want %q", c.name, why, c.reason)
		}
		if n, ok := s.Next(); ok {
			t.Errorf("%s: Next after stopping gave %d", c.name, n)
		}
	}
}

func TestSamplerMisuse(t *testing.T) {
	var s model.Sampler
	if n, ok := s.Next(); !ok || n != 1 {
		t.Fatalf("first level %d, %v; want 1", n, ok)
	}
	if err := s.Add(1, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(1, 1100); err == nil {
		t.Error("a level not above the last was accepted")
	}
	if err := s.Add(8, 5000); err == nil {
		t.Error("a sample after sampling stopped was accepted")
	}
	ns, th := s.Samples()
	if !reflect.DeepEqual(ns, []float64{1}) || !reflect.DeepEqual(th, []float64{1000}) {
		t.Errorf("samples %v %v, want the one good sample", ns, th)
	}
	ns[0] = 99 // a copy: the sampler is not changed
	if again, _ := s.Samples(); again[0] != 1 {
		t.Error("Samples returned the sampler's own slice")
	}
}
