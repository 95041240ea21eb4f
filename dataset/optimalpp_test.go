package dataset

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

// same returns n files of one size, named prefix0, prefix1, ...
func same(prefix string, n int, size int64) []File {
	out := make([]File, n)
	for i := range out {
		name := fmt.Sprintf("%s%04d", prefix, i)
		out[i] = File{Src: "/src/" + name, Dst: name, Size: size}
	}
	return out
}

// cat concatenates file lists.
func cat(lists ...[]File) []File { return slices.Concat(lists...) }

// want is an expected chunk: how many files, of what size, with what pp.
type want struct {
	n    int
	size int64 // size of every file in it; -1: sizes differ
	pp   int
}

func checkChunks(t *testing.T, got []Chunk, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d chunks %v, want %d", len(got), got, len(wants))
	}
	for i, w := range wants {
		c := got[i]
		if c.Len() != w.n || c.PP != w.pp || c.P != 1 || c.CC != 1 {
			t.Errorf("chunk %d: %v, want %d files pp=%d p=1 cc=1", i, c, w.n, w.pp)
		}
		for _, f := range c.Files {
			if w.size >= 0 && f.Size != w.size {
				t.Errorf("chunk %d holds a file of %d bytes, want all %d", i, f.Size, w.size)
				break
			}
		}
	}
}

// The expected chunks are worked out by hand in each case's comment, with
// opt_pp = floor(BDP*n/total) + 1 and the mean index the last file at or
// below the mean. BDP is 5 MiB = 5,242,880 throughout; 100 KiB = 102,400.
func TestOptimalPPDivision(t *testing.T) {
	const bdp = 5 * mib
	cases := []struct {
		name     string
		files    []File
		minChunk int64
		maxPP    int
		want     []want
		stops    []string // why each chunk stopped, in order
	}{{
		// The paper's first dataset: every file is at the mean, so the
		// mean index is the end and nothing divides. pp = 5+1 = 6,
		// the paper's "optimal pipelining value is selected as 6".
		name: "5000 x 1 MiB", files: same("f", 5000, mib), minChunk: mib, maxPP: 32,
		want:  []want{{5000, mib, 6}},
		stops: []string{stopMeanAtEnd},
	}, {
		// Root: total 10*102400 + 10*5242880 = 53,452,800, n 20:
		// pp = floor(104857600/53452800 = 1.96) + 1 = 2; mean
		// 2,672,640, mean index 9; divides into [0..9] and [10..19].
		// [0..9]: pp = floor(5242880*10/1024000 = 51.2) + 1 = 52 >
		// 32: stops with pp 32. [10..19]: pp = 1 + 1 = 2 = parent.
		name: "10 x 100 KiB + 10 x 5 MiB, max pp 32", minChunk: mib, maxPP: 32,
		files: cat(same("a", 10, 100*kib), same("b", 10, 5*mib)),
		want:  []want{{10, 100 * kib, 32}, {10, 5 * mib, 2}},
		stops: []string{stopAboveMax, stopSameAsParent},
	}, {
		// As above with max pp 64: [0..9] keeps pp 52 and stops as all
		// its files are at its mean.
		name: "10 x 100 KiB + 10 x 5 MiB, max pp 64", minChunk: mib, maxPP: 64,
		files: cat(same("a", 10, 100*kib), same("b", 10, 5*mib)),
		want:  []want{{10, 100 * kib, 52}, {10, 5 * mib, 2}},
		stops: []string{stopMeanAtEnd, stopSameAsParent},
	}, {
		// Min chunk of exactly half the total (26,726,400): the root is
		// not larger than twice it, so it is one chunk with its pp 2.
		name: "min chunk stops the root", minChunk: 26726400, maxPP: 64,
		files: cat(same("a", 10, 100*kib), same("b", 10, 5*mib)),
		want:  []want{{20, -1, 2}},
		stops: []string{stopTooSmall},
	}, {
		// One byte less and the root divides as in the case above.
		name: "min chunk one byte below half", minChunk: 26726399, maxPP: 64,
		files: cat(same("a", 10, 100*kib), same("b", 10, 5*mib)),
		want:  []want{{10, 100 * kib, 52}, {10, 5 * mib, 2}},
		stops: []string{stopMeanAtEnd, stopSameAsParent},
	}, {
		// Three levels. Root: 4*10240 + 4*102400 + 4*1048576 =
		// 4,644,864, n 12: pp = floor(62914560/4644864 = 13.5) + 1 =
		// 14, mean 387,072, index 7. [0..7]: total 450,560, pp =
		// floor(41943040/450560 = 93.1) + 1 = 94, mean 56,320, index 3.
		// [0..3]: pp = 512 + 1 = 513; [4..7]: 51 + 1 = 52; [8..11]: 5 +
		// 1 = 6; each stops with its files all at its mean.
		name: "three sizes, three levels", minChunk: 0, maxPP: 1000,
		files: cat(same("a", 4, 10*kib), same("b", 4, 100*kib), same("c", 4, mib)),
		want:  []want{{4, 10 * kib, 513}, {4, 100 * kib, 52}, {4, mib, 6}},
		stops: []string{stopMeanAtEnd, stopMeanAtEnd, stopMeanAtEnd},
	}, {
		// As above with min chunk 300,000: [0..7] (450,560 bytes) is not
		// larger than 600,000 and keeps its pp 94.
		name: "three sizes, min chunk stops the second level", minChunk: 300000, maxPP: 1000,
		files: cat(same("a", 4, 10*kib), same("b", 4, 100*kib), same("c", 4, mib)),
		want:  []want{{8, -1, 94}, {4, mib, 6}},
		stops: []string{stopTooSmall, stopMeanAtEnd},
	}, {
		// [100K, 5M, 5M]: total 10,588,160, mean 3,529,386; only the
		// first file is at or below it, so the mean index is the start.
		// pp = floor(15728640/10588160 = 1.49) + 1 = 2.
		name: "mean index at the start", minChunk: 0, maxPP: 32,
		files: cat(same("a", 1, 100*kib), same("b", 2, 5*mib)),
		want:  []want{{3, -1, 2}},
		stops: []string{stopMeanAtStart},
	}, {
		// [100K, 100K, 4M]: total 4,399,104, mean 1,466,368, index 1;
		// pp = floor(15728640/4399104 = 3.58) + 1 = 4. [0..1]: pp =
		// floor(10485760/204800) + 1 = 52, all at the mean. [2..2]: pp
		// = floor(5242880/4194304) + 1 = 2, one file.
		name: "a single file left", minChunk: 0, maxPP: 64,
		files: cat(same("a", 2, 100*kib), same("b", 1, 4*mib)),
		want:  []want{{2, 100 * kib, 52}, {1, 4 * mib, 2}},
		stops: []string{stopMeanAtEnd, stopOneFile},
	}, {
		// Empty files have mean 0: no bound on pp but max pp.
		name: "empty files", minChunk: 0, maxPP: 32,
		files: same("z", 3, 0),
		want:  []want{{3, 0, 32}},
		stops: []string{stopAboveMax},
	}, {
		// [0, 0, 1M]: total 1 MiB, n 3, pp = 15 + 1 = 16, mean 349,525,
		// index 1. [0..1] has mean 0 (pp above max); [2..2] pp 6.
		name: "empty and non-empty", minChunk: 0, maxPP: 32,
		files: cat(same("z", 2, 0), same("m", 1, mib)),
		want:  []want{{2, 0, 32}, {1, mib, 6}},
		stops: []string{stopAboveMax, stopOneFile},
	}, {
		// Max pp 1 bounds everything, the root included (pp 2 > 1).
		name: "max pp 1", minChunk: mib, maxPP: 1,
		files: cat(same("a", 10, 100*kib), same("b", 10, 5*mib)),
		want:  []want{{20, -1, 1}},
		stops: []string{stopAboveMax},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OptimalPP(tc.files, bdp, tc.minChunk, tc.maxPP)
			if err != nil {
				t.Fatal(err)
			}
			checkChunks(t, got, tc.want)
			// The stop reasons, from the divider itself.
			sorted := slices.Clone(tc.files)
			SortBySize(sorted)
			d := newDivider(sorted, bdp, tc.minChunk, tc.maxPP)
			d.divide(0, len(sorted)-1, 0)
			if !slices.Equal(d.stops, tc.stops) {
				t.Errorf("stopped because %q, want %q", d.stops, tc.stops)
			}
		})
	}
}

// The stopping rule "opt_pp != 1" cannot fire inside OptimalPP, which sets
// files larger than the BDP apart first (files up to the BDP have
// opt_pp >= 2); it is the rule that stops a list of large files.
func TestOptimalPPStopsAtOne(t *testing.T) {
	files := cat(same("a", 1, 6*mib), same("b", 1, 8*mib), same("c", 1, 20*mib))
	// 3 files, 34 MiB: pp = floor(15/34) + 1 = 1.
	d := newDivider(files, 5*mib, 0, 32)
	d.divide(0, 2, 0)
	if len(d.out) != 1 || d.out[0].PP != 1 || d.stops[0] != stopPPIsOne {
		t.Fatalf("got %v %v, want one chunk with pp 1", d.out, d.stops)
	}
	// Through OptimalPP, they are large files: pp 2.
	got, err := OptimalPP(files, 5*mib, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PP != LargePP || got[0].Len() != 3 {
		t.Fatalf("got %v, want the three files with pp %d", got, LargePP)
	}
}

// Large files form one last chunk with pp 2, after the division of the
// rest, and an input in any order comes out sorted.
func TestOptimalPPLargeFiles(t *testing.T) {
	files := cat(same("L", 2, 20*mib), same("b", 10, 5*mib), same("a", 10, 100*kib), same("x", 1, 5*mib+1))
	slices.Reverse(files)
	got, err := OptimalPP(files, 5*mib, mib, 32)
	if err != nil {
		t.Fatal(err)
	}
	// The first two chunks are those of "10 x 100 KiB + 10 x 5 MiB,
	// max pp 32"; 5 MiB is not larger than the BDP, 5 MiB + 1 is.
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	checkChunks(t, got[:2], []want{{10, 100 * kib, 32}, {10, 5 * mib, 2}})
	last := got[2]
	if last.PP != 2 || last.Len() != 3 || last.Files[0].Size != 5*mib+1 || last.Files[2].Size != 20*mib {
		t.Errorf("large chunk %v %v", last, last.Files)
	}
	// Max pp 1 caps the large files' pp too.
	got, _ = OptimalPP(files, 5*mib, mib, 1)
	for _, c := range got {
		if c.PP != 1 {
			t.Errorf("max pp 1: chunk %v", c)
		}
	}
	// Chunks do not share backing arrays: appending to one leaves the
	// next alone.
	got, _ = OptimalPP(files, 5*mib, mib, 32)
	first := got[1].Files[0]
	got[0].Files = append(got[0].Files, File{Src: "intruder"})
	if got[1].Files[0] != first {
		t.Errorf("append to chunk 0 overwrote chunk 1")
	}
}

func TestOptimalPPBadInput(t *testing.T) {
	ok := same("a", 3, mib)
	for _, tc := range []struct {
		name     string
		files    []File
		bdp, min int64
		maxPP    int
	}{
		{"zero BDP", ok, 0, 0, 8},
		{"negative BDP", ok, -1, 0, 8},
		{"negative min chunk", ok, mib, -1, 8},
		{"max pp 0", ok, mib, 0, 0},
		{"negative size", cat(ok, []File{{Src: "neg", Size: -5}}), mib, 0, 8},
		{"total overflows", []File{{Src: "a", Size: math.MaxInt64}, {Src: "b", Size: 1}}, mib, 0, 8},
	} {
		if _, err := OptimalPP(tc.files, tc.bdp, tc.min, tc.maxPP); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", tc.name, err)
		}
	}
	got, err := OptimalPP(nil, mib, 0, 8)
	if err != nil || got != nil {
		t.Errorf("no files: %v %v", got, err)
	}
	// Extreme values: no overflow, no panic.
	got, err = OptimalPP([]File{{Src: "a", Size: 1}, {Src: "b", Size: 2}}, math.MaxInt64, math.MaxInt64, math.MaxInt32)
	if err != nil || len(got) != 1 || got[0].PP != math.MaxInt32 {
		t.Errorf("extremes: %v %v", got, err)
	}
}

// Whatever the input, the chunks are the sorted files in order, none
// empty, pp within bounds, files larger than the BDP only in the last.
func TestOptimalPPProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		files := drawFiles(t, 300)
		bdp := rapid.Int64Range(1, 1<<34).Draw(t, "bdp")
		minChunk := rapid.Int64Range(0, 1<<32).Draw(t, "minChunk")
		maxPP := rapid.IntRange(1, 100).Draw(t, "maxPP")
		chunks, err := OptimalPP(files, bdp, minChunk, maxPP)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(files)
		SortBySize(sorted)
		var flat []File
		for i, c := range chunks {
			if c.Len() == 0 || c.PP < 1 || c.PP > maxPP || c.P != 1 || c.CC != 1 {
				t.Fatalf("chunk %d: %v", i, c)
			}
			if c.Files[c.Len()-1].Size > bdp && i != len(chunks)-1 {
				t.Fatalf("chunk %d of %d holds a file larger than the BDP", i, len(chunks))
			}
			flat = append(flat, c.Files...)
		}
		if !slices.Equal(flat, sorted) {
			t.Fatalf("chunks are not the sorted files")
		}
	})
}

// drawFiles draws up to max files with log-uniform sizes from 0 to 1 GB.
func drawFiles(t *rapid.T, max int) []File {
	n := rapid.IntRange(0, max).Draw(t, "n")
	files := make([]File, n)
	for i := range files {
		size := int64(0)
		if rapid.IntRange(0, 9).Draw(t, "empty") > 0 {
			size = int64(math.Exp(rapid.Float64Range(0, math.Log(1e9)).Draw(t, "logsize")))
		}
		files[i] = File{Src: fmt.Sprintf("/s/%d", i), Dst: fmt.Sprintf("%d", i), Size: size}
	}
	return files
}

func TestBDP(t *testing.T) {
	for _, tc := range []struct {
		rtt  time.Duration
		bw   float64
		want int64
	}{
		{100 * time.Millisecond, 50e6, 5e6}, // the paper's path
		{0, 1e9, 0},
		{time.Millisecond, -1, 0},
		{time.Millisecond, math.NaN(), 0},
		{time.Hour, math.Inf(1), math.MaxInt64},
	} {
		if got := BDP(tc.rtt, tc.bw); got != tc.want {
			t.Errorf("BDP(%v, %v) = %d, want %d", tc.rtt, tc.bw, got, tc.want)
		}
	}
}
