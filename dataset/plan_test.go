package dataset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fake is a performer whose throughput is a known function of the
// settings, and which records every file it is given.
type fake struct {
	thr   func(pp, p, cc int) float64
	moved map[File]int
	steps []StepReport
}

func newFake(thr func(pp, p, cc int) float64) *fake {
	return &fake{thr: thr, moved: map[File]int{}}
}

func (f *fake) Perform(ctx context.Context, files []File, pp, p, cc int) (float64, error) {
	var size int64
	for _, x := range files {
		f.moved[x]++
		size += x.Size
	}
	v := f.thr(pp, p, cc)
	f.steps = append(f.steps, StepReport{Files: len(files), Bytes: size, PP: pp, P: p, CC: cc, Throughput: v})
	return v, nil
}

// exactlyOnce fails unless the performer moved every file of files once
// and nothing else.
func (f *fake) exactlyOnce(t testing.TB, files []File) {
	t.Helper()
	want := map[File]int{}
	for _, x := range files {
		want[x]++
	}
	for x, n := range f.moved {
		if want[x] != n {
			t.Fatalf("%v moved %d times, want %d", x, n, want[x])
		}
	}
	for x, n := range want {
		if f.moved[x] != n {
			t.Fatalf("%v moved %d times, want %d", x, f.moved[x], n)
		}
	}
}

// peak rises linearly to its top at level top, then falls.
func peak(level, top int) float64 {
	if level <= top {
		return float64(level)
	}
	return float64(top) - float64(level-top)/4
}

// setting is the phase and settings of one step, for comparisons.
type setting struct {
	phase     Phase
	files     int
	pp, p, cc int
}

func settings(r Report) []setting {
	var out []setting
	for _, s := range r.Steps {
		out = append(out, setting{s.Phase, s.Files, s.PP, s.P, s.CC})
	}
	return out
}

func params(maxCC int) Params {
	return Params{BDP: 5 * mib, MinChunk: 4 * mib, SampleShare: 0.2, MaxPP: 32, MaxP: 16, MaxCC: maxCC}
}

// The paper's first dataset, 5,000 files of 1 MiB with a 5 MiB BDP (pp 6),
// on a path where throughput rises with concurrency up to 8 and falls
// beyond. Each sample moves at least pp = 6 files (and 4 MiB) per channel:
// 6, 12, 24, 48 and 96 files at cc 1 to 16; cc 16 is slower than cc 8, so
// the other 5000 - 186 = 4814 files go at cc 8.
func TestOptimalCCFindsPeak(t *testing.T) {
	files := same("f", 5000, mib)
	for _, tc := range []struct {
		name  string
		maxCC int
		thr   func(pp, p, cc int) float64
		want  []setting
	}{{
		name: "peak at 8", maxCC: 16,
		thr: func(pp, p, cc int) float64 { return 1e7 * peak(cc, 8) },
		want: []setting{
			{PhaseSampleCC, 6, 6, 1, 1}, {PhaseSampleCC, 12, 6, 1, 2}, {PhaseSampleCC, 24, 6, 1, 4},
			{PhaseSampleCC, 48, 6, 1, 8}, {PhaseSampleCC, 96, 6, 1, 16}, {PhaseBulk, 4814, 6, 1, 8},
		},
	}, {
		// Max cc 8: the search stops there without trying 16.
		name: "peak at max cc", maxCC: 8,
		thr: func(pp, p, cc int) float64 { return 1e7 * peak(cc, 8) },
		want: []setting{
			{PhaseSampleCC, 6, 6, 1, 1}, {PhaseSampleCC, 12, 6, 1, 2}, {PhaseSampleCC, 24, 6, 1, 4},
			{PhaseSampleCC, 48, 6, 1, 8}, {PhaseBulk, 4910, 6, 1, 8},
		},
	}, {
		// A flat path: cc 2 is not faster than cc 1, so cc 1 it is.
		name: "flat", maxCC: 16,
		thr:  func(pp, p, cc int) float64 { return 1e7 },
		want: []setting{{PhaseSampleCC, 6, 6, 1, 1}, {PhaseSampleCC, 12, 6, 1, 2}, {PhaseBulk, 4982, 6, 1, 1}},
	}, {
		// Max cc not a power of two: 1, 2, 4, 8, 12.
		name: "max cc 12", maxCC: 12,
		thr: func(pp, p, cc int) float64 { return 1e7 * float64(cc) },
		want: []setting{
			{PhaseSampleCC, 6, 6, 1, 1}, {PhaseSampleCC, 12, 6, 1, 2}, {PhaseSampleCC, 24, 6, 1, 4},
			{PhaseSampleCC, 48, 6, 1, 8}, {PhaseSampleCC, 72, 6, 1, 12}, {PhaseBulk, 4838, 6, 1, 12},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := NewOptimalCC(files, params(tc.maxCC))
			if err != nil {
				t.Fatal(err)
			}
			perf := newFake(tc.thr)
			rep, err := Run(context.Background(), pl, perf)
			if err != nil {
				t.Fatal(err)
			}
			if got := settings(rep); !slices.Equal(got, tc.want) {
				t.Errorf("steps\n%v\nwant\n%v", got, tc.want)
			}
			perf.exactlyOnce(t, files)
			if rep.Files() != 5000 || rep.Bytes() != 5000*mib {
				t.Errorf("report: %d files, %d bytes", rep.Files(), rep.Bytes())
			}
		})
	}
}

// Files larger than the BDP: parallelism first, then concurrency. 200
// files of 100 MiB; throughput peaks at p = 4 and, at p = 4, at cc = 4.
// p samples are one file each at cc 1; cc samples cc files each; p 4's
// sample stands for cc 1. The rest, 200 - 4 - 2 - 4 - 8 = 182 files, goes
// with pp 2, p 4, cc 4.
func TestOptimalCCLargeFiles(t *testing.T) {
	files := same("big", 200, 100*mib)
	pl, err := NewOptimalCC(files, params(16))
	if err != nil {
		t.Fatal(err)
	}
	perf := newFake(func(pp, p, cc int) float64 { return 1e7 * peak(p, 4) * peak(cc, 4) })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	want := []setting{
		{PhaseSampleP, 1, 2, 1, 1}, {PhaseSampleP, 1, 2, 2, 1}, {PhaseSampleP, 1, 2, 4, 1}, {PhaseSampleP, 1, 2, 8, 1},
		{PhaseSampleCC, 2, 2, 4, 2}, {PhaseSampleCC, 4, 2, 4, 4}, {PhaseSampleCC, 8, 2, 4, 8},
		{PhaseBulk, 182, 2, 4, 4},
	}
	if got := settings(rep); !slices.Equal(got, want) {
		t.Errorf("steps\n%v\nwant\n%v", got, want)
	}
	perf.exactlyOnce(t, files)
}

// Max p 1: one p sample (which is cc 1), then concurrency.
func TestOptimalCCLargeFilesNoParallelism(t *testing.T) {
	files := same("big", 200, 100*mib)
	prm := params(16)
	prm.MaxP = 1
	pl, _ := NewOptimalCC(files, prm)
	perf := newFake(func(pp, p, cc int) float64 { return 1e7 * peak(cc, 2) })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	want := []setting{
		{PhaseSampleP, 1, 2, 1, 1}, {PhaseSampleCC, 2, 2, 1, 2}, {PhaseSampleCC, 4, 2, 1, 4}, {PhaseBulk, 193, 2, 1, 2},
	}
	if got := settings(rep); !slices.Equal(got, want) {
		t.Errorf("steps\n%v\nwant\n%v", got, want)
	}
	perf.exactlyOnce(t, files)
}

// When the sampling budget runs out while throughput still rises, the rest
// goes at the next level; when not even one sample fits, each chunk goes
// with all its files in flight, and large files with all their parts.
func TestOptimalCCSmallDatasets(t *testing.T) {
	rising := func(pp, p, cc int) float64 { return 1e6 * float64(p*cc) }
	prm := params(16)
	prm.MinChunk = mib
	for _, tc := range []struct {
		name  string
		files []File
		want  []setting
	}{{
		// 100 MiB: a budget of 20 MiB. cc 1 takes 6 files, cc 2 12;
		// cc 4 would take 24 more: the rest, 82, go at cc 4.
		name: "budget runs out", files: same("f", 100, mib),
		want: []setting{{PhaseSampleCC, 6, 6, 1, 1}, {PhaseSampleCC, 12, 6, 1, 2}, {PhaseBulk, 82, 6, 1, 4}},
	}, {
		// 10 MiB: a budget of 2 MiB, less than one sample. 10 files
		// at pp 6 need cc 2 to be all in flight.
		name: "too small to sample", files: same("f", 10, mib),
		want: []setting{{PhaseBulk, 10, 6, 1, 2}},
	}, {
		// Empty files: nothing to measure; pp is max pp, one channel.
		name: "empty files", files: same("z", 5, 0),
		want: []setting{{PhaseBulk, 5, 32, 1, 1}},
	}, {
		// Three large files, each more than the budget (60 MiB): no
		// samples; every file in flight (pp 2: two channels), each in
		// parts of a MinChunk, at most max p (16).
		name: "few large files", files: same("L", 3, 100*mib),
		want: []setting{{PhaseBulk, 3, 2, 16, 2}},
	}, {
		// A tree with one large file: it cannot be sampled, and goes
		// in parts of a MinChunk (7), not as one stream.
		name: "one large file among small ones", files: append(same("f", 10, mib), File{Src: "L", Dst: "L", Size: 6*mib + 1}),
		want: []setting{{PhaseBulk, 10, 6, 1, 2}, {PhaseBulk, 1, 2, 7, 1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := NewOptimalCC(tc.files, prm)
			if err != nil {
				t.Fatal(err)
			}
			perf := newFake(rising)
			rep, err := Run(context.Background(), pl, perf)
			if err != nil {
				t.Fatal(err)
			}
			if got := settings(rep); !slices.Equal(got, tc.want) {
				t.Errorf("steps\n%v\nwant\n%v", got, tc.want)
			}
			perf.exactlyOnce(t, tc.files)
		})
	}
	// No files: nothing to do.
	pl, err := NewOptimalCC(nil, prm)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := pl.Next(); ok {
		t.Errorf("no files: step %v", st)
	}
}

// The paper's second dataset: 1,000 files of 1 B to 10 MB. Those up to the
// BDP are sampled for cc and sent with their own pp; those above it with
// pp 2 after the p and cc searches. Throughput peaks at cc 8 and p 2.
func TestOptimalCCMixedDataset(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	files := make([]File, 1000)
	for i := range files {
		files[i] = File{Src: fmt.Sprintf("/s/%d", i), Dst: fmt.Sprint(i), Size: 1 + rng.Int64N(10e6)}
	}
	const bdp = 5e6
	// A share of 0.4 lets both searches see their drop (at the default
	// 0.2 the small files' budget runs out after cc 8).
	pl, err := NewOptimalCC(files, Params{BDP: bdp, MinChunk: 4 * mib, SampleShare: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	perf := newFake(func(pp, p, cc int) float64 { return 1e6 * peak(cc, 8) * peak(p, 2) })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	perf.exactlyOnce(t, files)
	// Steps of small files come first, then those of large files.
	var large bool
	var bulkSmall, bulkLarge []StepReport
	for i, s := range rep.Steps {
		if s.PP == LargePP && s.Phase == PhaseSampleP {
			large = true
		}
		if s.Phase == PhaseBulk && large {
			bulkLarge = append(bulkLarge, s)
		} else if s.Phase == PhaseBulk {
			bulkSmall = append(bulkSmall, s)
		}
		if !large && s.P != 1 {
			t.Errorf("step %d: small files with p %d", i, s.P)
		}
	}
	if !large || len(bulkSmall) == 0 || len(bulkLarge) != 1 {
		t.Fatalf("steps %v", settings(rep))
	}
	for i, s := range bulkSmall {
		if s.CC != 8 || s.P != 1 || s.PP < 2 {
			t.Errorf("small bulk %+v, want cc 8, p 1, pp >= 2", s)
		}
		// Chunks too small to fill cc * pp pipelines were merged.
		if i < len(bulkSmall)-1 && s.Files < s.CC*s.PP {
			t.Errorf("small bulk %+v has fewer than cc * pp files", s)
		}
	}
	if b := bulkLarge[0]; b.PP != 2 || b.P != 2 || b.CC != 8 {
		t.Errorf("large bulk %+v, want pp 2, p 2, cc 8", b)
	}
	// Small-file chunks with equal pp were combined: one bulk step per pp.
	pps := map[int]bool{}
	for _, s := range bulkSmall {
		if pps[s.PP] {
			t.Errorf("two bulk steps with pp %d", s.PP)
		}
		pps[s.PP] = true
	}
	// Sampling stays within its share of the bytes.
	var sampled int64
	for _, s := range rep.Steps {
		if s.Phase != PhaseBulk {
			sampled += s.Bytes
		}
	}
	if float64(sampled) > 0.4*float64(rep.Bytes()) {
		t.Errorf("sampled %d of %d bytes", sampled, rep.Bytes())
	}
}

// 10 files of 100 KiB and 200 of 5 MiB, max pp 64. OptimalPP: the root
// (1,049,600,000 bytes, 210 files) has pp floor(1101004800/1049600000) +
// 1 = 2 and mean index 9; [0..9] has pp 52 and all files at the mean,
// [10..209] pp 1 + 1 = 2 = its parent's. Samples come from the 5 MiB
// chunk, 2 files per channel (pp 2): 2, 4, 8, 16 files at cc 1, 2, 4, 8,
// where throughput drops. The 10 small files cannot fill 4 channels of 52
// requests, so they join the rest of the 5 MiB files: one bulk of 180.
func TestOptimalCCMergesSmallChunks(t *testing.T) {
	files := cat(same("a", 10, 100*kib), same("b", 200, 5*mib))
	prm := params(16)
	prm.MaxPP = 64
	chunks, err := OptimalPP(files, prm.BDP, prm.MinChunk, prm.MaxPP)
	if err != nil {
		t.Fatal(err)
	}
	checkChunks(t, chunks, []want{{10, 100 * kib, 52}, {200, 5 * mib, 2}})
	pl, _ := NewOptimalCC(files, prm)
	perf := newFake(func(pp, p, cc int) float64 { return 1e7 * peak(cc, 4) })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	want := []setting{
		{PhaseSampleCC, 2, 2, 1, 1}, {PhaseSampleCC, 4, 2, 1, 2}, {PhaseSampleCC, 8, 2, 1, 4},
		{PhaseSampleCC, 16, 2, 1, 8}, {PhaseBulk, 180, 2, 1, 4},
	}
	if got := settings(rep); !slices.Equal(got, want) {
		t.Errorf("steps\n%v\nwant\n%v", got, want)
	}
	perf.exactlyOnce(t, files)
}

// Auto on the paper's path (RTT 100 ms, 50 MB/s: BDP 5 MB) with the
// defaults: pp for 1 MiB files is floor(5e6/1048576) + 1 = 5.
func TestAuto(t *testing.T) {
	files := same("f", 5000, mib)
	pl, err := Auto(files, 100*time.Millisecond, 50e6)
	if err != nil {
		t.Fatal(err)
	}
	perf := newFake(func(pp, p, cc int) float64 { return 1e6 * peak(cc, 8) })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	perf.exactlyOnce(t, files)
	last := rep.Steps[len(rep.Steps)-1]
	if last.Phase != PhaseBulk || last.PP != 5 || last.CC != 8 {
		t.Errorf("bulk %+v", last)
	}
	// An unmeasured path still plans, with the smallest BDP.
	if p := AutoParams(0, 0); p.BDP != MinBDP || p.MinChunk != DefaultMinChunk {
		t.Errorf("AutoParams(0, 0) = %+v", p)
	}
}

func TestOptimalCCBadInput(t *testing.T) {
	files := same("f", 3, mib)
	for _, prm := range []Params{
		{},
		{BDP: -1},
		{BDP: mib, MinChunk: -1},
		{BDP: mib, SampleShare: 1.5},
		{BDP: mib, SampleShare: math.NaN()},
		{BDP: mib, MaxCC: -1},
		{BDP: mib, MaxP: -2},
		{BDP: mib, MaxPP: -3},
	} {
		if _, err := NewOptimalCC(files, prm); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", prm, err)
		}
	}
	if _, err := NewOptimalCC([]File{{Src: "x", Size: -1}}, Params{BDP: mib}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative size: %v", err)
	}
}

// Next without Observe repeats the step; Observe with none outstanding is
// ignored; NaN and negative throughputs count as 0.
func TestPlannerProtocol(t *testing.T) {
	pl, _ := NewOptimalCC(same("f", 5000, mib), params(16))
	pl.Observe(1e9) // nothing outstanding
	a, _ := pl.Next()
	b, _ := pl.Next()
	if !slices.Equal(a.Chunk.Files, b.Chunk.Files) || a.Chunk.CC != 1 {
		t.Fatalf("Next twice: %v then %v", a.Chunk, b.Chunk)
	}
	pl.Observe(math.NaN()) // counts as 0: cc 2 is an improvement on anything positive
	c, _ := pl.Next()
	pl.Observe(-5) // 0 again: not above 0, so the search stops at cc 1
	d, _ := pl.Next()
	if c.Chunk.CC != 2 || d.Phase != PhaseBulk || d.Chunk.CC != 1 {
		t.Errorf("after NaN and -5: %v then %v %v", c.Chunk, d.Phase, d.Chunk)
	}
}

// Any files, parameters and throughputs: every file is moved exactly once,
// every step is non-empty with settings within bounds, and the planner
// ends after a bounded number of steps.
func TestOptimalCCProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		files := drawFiles(t, 400)
		prm := Params{
			BDP:         rapid.Int64Range(1, 1<<30).Draw(t, "bdp"),
			MinChunk:    rapid.Int64Range(0, 1<<28).Draw(t, "minChunk"),
			SampleShare: rapid.Float64Range(0.01, 1).Draw(t, "share"),
			MaxPP:       rapid.IntRange(1, 64).Draw(t, "maxPP"),
			MaxP:        rapid.IntRange(1, 32).Draw(t, "maxP"),
			MaxCC:       rapid.IntRange(1, 64).Draw(t, "maxCC"),
		}
		pl, err := NewOptimalCC(files, prm)
		if err != nil {
			t.Fatal(err)
		}
		moved := map[File]int{}
		for steps := 0; ; steps++ {
			if steps > 1000 {
				t.Fatalf("no end after %d steps", steps)
			}
			st, ok := pl.Next()
			if !ok {
				break
			}
			c := st.Chunk
			if c.Len() == 0 || c.PP < 1 || c.PP > prm.MaxPP || c.P < 1 || c.P > prm.MaxP || c.CC < 1 || c.CC > prm.MaxCC {
				t.Fatalf("step %d: %s %v", steps, st.Phase, c)
			}
			for _, f := range c.Files {
				moved[f]++
			}
			pl.Observe(rapid.Float64Range(0, 1e9).Draw(t, "thr"))
		}
		for _, f := range files {
			if moved[f] != 1 {
				t.Fatalf("%v moved %d times", f, moved[f])
			}
			moved[f] = 0
		}
		for f, n := range moved {
			if n != 0 {
				t.Fatalf("moved %v which was not in the dataset", f)
			}
		}
	})
}

// Algorithm 1 on a scripted series of throughputs.
func TestAdaptiveCC(t *testing.T) {
	a := NewAdaptiveCC(8)
	// thr:       10  20  30  25  26  40  50  50  10
	// cc before:  1   2   4   8   4   8   8   8   8, then 4
	// 25 < 30 halves; 26 > 25 doubles; at 8 a rise keeps 8 (the max);
	// 50 is not below 50, so it "doubles" (stays 8); 10 < 50 halves.
	series := []float64{10, 20, 30, 25, 26, 40, 50, 50, 10}
	want := []int{1, 2, 4, 8, 4, 8, 8, 8, 8, 4}
	var got []int
	for _, thr := range series {
		got = append(got, a.Next())
		a.Observe(thr)
	}
	got = append(got, a.Next())
	if !slices.Equal(got, want) {
		t.Errorf("cc %v, want %v", got, want)
	}
	// At cc 1 a drop doubles too: the paper halves only from 2 up.
	a = NewAdaptiveCC(4)
	got = nil
	for _, thr := range []float64{10, 5, 3} {
		a.Observe(thr)
		got = append(got, a.Next())
	}
	if !slices.Equal(got, []int{2, 1, 2}) {
		t.Errorf("cc %v, want [2 1 2]", got)
	}
	if a := NewAdaptiveCC(0); a.Next() != 1 {
		t.Errorf("max 0: cc %d", a.Next())
	}
	a = NewAdaptiveCC(0)
	a.Observe(1)
	if a.Next() != 1 {
		t.Errorf("max 0 after a chunk: cc %d", a.Next())
	}
	// No maximum to speak of (math.MaxInt): the level rises to it and
	// stays there, never wrapping around to 0 or below.
	for _, m := range []int{math.MaxInt, math.MaxInt - 1, 1<<62 + 1} {
		a = NewAdaptiveCC(m)
		for i := range 70 {
			a.Observe(float64(i + 1))
			if cc := a.Next(); cc < 1 || cc > m {
				t.Fatalf("max %d, chunk %d: cc %d", m, i+1, cc)
			}
		}
		if a.Next() != m {
			t.Errorf("max %d: cc %d after 70 rises, want the max", m, a.Next())
		}
	}
}

// Algorithm 1 as a planner: fixed chunks, pp as given, cc adapting.
func TestAdaptivePlanner(t *testing.T) {
	files := same("f", 10, mib)
	pl, err := NewAdaptive(files, 3, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	series := []float64{10, 20, 15, 30}
	i := 0
	perf := newFake(func(pp, p, cc int) float64 { i++; return series[i-1] })
	rep, err := Run(context.Background(), pl, perf)
	if err != nil {
		t.Fatal(err)
	}
	want := []setting{{PhaseAdaptive, 3, 4, 1, 1}, {PhaseAdaptive, 3, 4, 1, 2}, {PhaseAdaptive, 3, 4, 1, 4}, {PhaseAdaptive, 1, 4, 1, 2}}
	if got := settings(rep); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	perf.exactlyOnce(t, files)
	for _, bad := range [][3]int{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}} {
		if _, err := NewAdaptive(files, bad[0], bad[1], bad[2]); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewAdaptive(%v): %v", bad, err)
		}
	}
}
