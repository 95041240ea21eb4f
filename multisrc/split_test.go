package multisrc

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSplitExact(t *testing.T) {
	tests := []struct {
		name  string
		p     Policy
		links []Link
		size  int64
		align int64
		want  []int64
	}{
		{
			// T = 1000/(100+300) = 2.5; D = 100*2.5, 300*2.5.
			name:  "MS no latency",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  1000, align: 1,
			want: []int64{250, 750},
		},
		{
			// Latency shifts bytes away from the slow starter:
			// T = (1000 + 100*0 + 100*1)/200 = 5.5; D = 100*5.5, 100*4.5.
			name:  "latency",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 100, Latency: 1}},
			size:  1000, align: 1,
			want: []int64{550, 450},
		},
		{
			// T = (1000 + 100*20)/200 = 15 < 20: link 1 would get
			// 100*(15-20) < 0, is dropped; then T = 1000/100 = 10.
			name:  "negative D dropped",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 100, Latency: 20}},
			size:  1000, align: 1,
			want: []int64{1000, 0},
		},
		{
			// T = (600 + 100*7 + 100*9)/300 = 7.33 < 9: drop link 2;
			// T = (600 + 700)/200 = 6.5 < 7: drop link 1; T = 6.
			name:  "drops cascade",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 100, Latency: 7}, {Mean: 100, Latency: 9}},
			size:  600, align: 1,
			want: []int64{600, 0, 0},
		},
		{
			// T = (1000 + 100*5)/200 = 7.5 > 5: both kept;
			// D = 100*7.5, 100*(7.5-5).
			name:  "latency below T kept",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 100, Latency: 5}},
			size:  1000, align: 1,
			want: []int64{750, 250},
		},
		{
			// EffectiveBW 10+4 = 14 and 10+30 = 40: T = 540/54 = 10.
			name:  "NTSS",
			p:     NTSS,
			links: []Link{{Mean: 10, SD: 4}, {Mean: 10, SD: 30}},
			size:  540, align: 1,
			want: []int64{140, 400},
		},
		{
			// EffectiveBW 13.2 and 15 (see TestEffectiveBW):
			// T = 2820/28.2 = 100; D = 1320, 1500.
			name:  "TCS",
			p:     TCS,
			links: []Link{{Mean: 10, SD: 4}, {Mean: 10, SD: 30}},
			size:  2820, align: 1,
			want: []int64{1320, 1500},
		},
		{
			// T = 1180/28.2 = 41.844; D = 552.34, 627.66 → 552 + 627,
			// 1 byte left: link 0 would finish at 553/13.2 = 41.894,
			// link 1 at 628/15 = 41.867: link 1 takes it.
			name:  "TCS remainder to the earliest finish",
			p:     TCS,
			links: []Link{{Mean: 10, SD: 4}, {Mean: 10, SD: 30}},
			size:  1180, align: 1,
			want: []int64{552, 628},
		},
		{
			// EffectiveBW 6.8 and 5: T = 1180/11.8 = 100; D = 680, 500.
			// The noisier link gets less, unlike TCS above.
			name:  "TCSMinus",
			p:     TCSMinus,
			links: []Link{{Mean: 10, SD: 4}, {Mean: 10, SD: 30}},
			size:  1180, align: 1,
			want: []int64{680, 500},
		},
		{
			// D = 250, 750 → blocks of 100: 200 + 700, 100 left; as a
			// whole block link 0 would finish at 300/100 = 3, link 1 at
			// 800/300 = 2.67: link 1 takes it.
			name:  "alignment",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  1000, align: 100,
			want: []int64{200, 800},
		},
		{
			// D = 250, 750 → blocks of 64: 192 + 704, 104 left. Whole
			// block: link 0 → 256/100 = 2.56, link 1 → 768/300 = 2.56,
			// a tie (both quotients round the same real): the first.
			// Partial 40: link 0 → 296/100 = 2.96, link 1 → 744/300 =
			// 2.48: link 1.
			name:  "alignment tie goes to the first",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  1000, align: 64,
			want: []int64{256, 744},
		},
		{
			// T = 1030/400 = 2.575; D = 257.5, 772.5 → 200 + 700, 130 left.
			// Whole block: link 0 → 3, link 1 → 800/300 = 2.67: link 1.
			// Partial 30: link 0 → 230/100 = 2.3, link 1 → 830/300 =
			// 2.77: link 0. Only link 0 is not a multiple of 100.
			name:  "size not a multiple of align",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  1030, align: 100,
			want: []int64{230, 800},
		},
		{
			// size < align: everything is the partial block; link 0 →
			// 50/100 = 0.5, link 1 → 50/300 = 0.17.
			name:  "size below align",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  50, align: 4096,
			want: []int64{0, 50},
		},
		{
			name:  "align <= 0 means 1",
			p:     MS,
			links: []Link{{Mean: 100}, {Mean: 300}},
			size:  1000, align: -7,
			want: []int64{250, 750},
		},
		{
			name:  "unusable links get nothing",
			p:     MS,
			links: []Link{{Mean: math.NaN()}, {Mean: 100}, {Mean: -3}, {Mean: 300}, {Mean: 1e6, Latency: math.Inf(1)}},
			size:  1000, align: 1,
			want: []int64{0, 250, 0, 750, 0},
		},
		{
			// NaN and negative latency are read as 0.
			name:  "bad latency is 0",
			p:     MS,
			links: []Link{{Mean: 100, Latency: math.NaN()}, {Mean: 300, Latency: -2}},
			size:  1000, align: 1,
			want: []int64{250, 750},
		},
		{
			name:  "size 0",
			p:     TCS,
			links: []Link{{Mean: 100, Latency: 0.1}, {Mean: 300, Latency: 0.1}},
			size:  0, align: 4096,
			want: []int64{0, 0},
		},
		{
			// Highest Mean wins whatever SD and latency; ties: first.
			name:  "BOS",
			p:     BOS,
			links: []Link{{Mean: 5}, {Mean: 9, SD: 100, Latency: 3}, {Mean: 9}, {Mean: math.NaN()}},
			size:  1234, align: 4096,
			want: []int64{0, 1234, 0, 0},
		},
		{
			// 1000/3 = 333 each, 1 byte left (a whole block at align 1):
			// 334/10, 334/20, 334/30: the fastest takes it.
			name:  "EAS",
			p:     EAS,
			links: []Link{{Mean: 10}, {Mean: 20}, {Mean: 30}},
			size:  1000, align: 1,
			want: []int64{333, 333, 334},
		},
		{
			// Shares of 1050/3/100 = 3 blocks = 300; 150 left. Whole
			// block (at most one per link): 400/30 = 13.3 is the
			// earliest. Partial 50: 350/10 = 35, 350/20 = 17.5,
			// 450/30 = 15: link 2 again.
			name:  "EAS aligned",
			p:     EAS,
			links: []Link{{Mean: 10}, {Mean: 20}, {Mean: 30}},
			size:  1050, align: 100,
			want: []int64{300, 300, 450},
		},
		{
			// Shares of 299/3/100 = 0 blocks; 2 whole blocks left, at
			// most one per link (EAS keeps shares equal): 100/1000 =
			// 0.1 for link 2, then 100/20 = 5 for link 1 (not link 2
			// again). Partial 99: 9.9, 199/20 = 9.95, 199/1000 = 0.2:
			// link 2.
			name:  "EAS one block per link",
			p:     EAS,
			links: []Link{{Mean: 10}, {Mean: 20}, {Mean: 1000}},
			size:  299, align: 100,
			want: []int64{0, 100, 199},
		},
		{
			name:  "EAS skips unusable links",
			p:     EAS,
			links: []Link{{Mean: 10}, {Mean: 0}, {Mean: 30}},
			size:  1000, align: 1,
			want: []int64{500, 0, 500},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Split(tt.p, tt.links, tt.size, tt.align)
			if err != nil {
				t.Fatalf("Split: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Split(%s, size %d, align %d) = %v, want %v", tt.p, tt.size, tt.align, got, tt.want)
			}
		})
	}
}

func TestSplitErrors(t *testing.T) {
	ok := []Link{{Mean: 100}}
	tests := []struct {
		name  string
		p     Policy
		links []Link
		size  int64
		want  error
	}{
		{"negative size", MS, ok, -1, ErrBadInput},
		{"no links", MS, nil, 10, ErrBadInput},
		{"empty links", EAS, []Link{}, 0, ErrBadInput},
		{"unknown policy", Policy("fastest"), ok, 10, ErrUnknownPolicy},
		{"no usable link", TCS, []Link{{Mean: 0}, {Mean: math.NaN()}, {Mean: -1}}, 10, ErrNoUsableLink},
		{"BOS no usable link", BOS, []Link{{Mean: 0}}, 10, ErrNoUsableLink},
		{"EAS no usable link", EAS, []Link{{Mean: math.NaN()}}, 10, ErrNoUsableLink},
		{"infinite bandwidth", MS, []Link{{Mean: math.Inf(1)}}, 10, ErrNoUsableLink},
		{"infinite latency", MS, []Link{{Mean: 5, Latency: math.Inf(1)}}, 10, ErrNoUsableLink},
	}
	for _, tt := range tests {
		got, err := Split(tt.p, tt.links, tt.size, 1)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: Split = %v, %v; want error wrapping %v", tt.name, got, err, tt.want)
		}
	}
}

// randomLinks draws 1..6 links with means 1 MB/s..1 GB/s, SD up to 3x the
// mean, latency up to 2 s, and now and then an unusable link.
func randomLinks(rng *rand.Rand) []Link {
	links := make([]Link, 1+rng.IntN(6))
	for i := range links {
		mean := 1e6 + rng.Float64()*1e9
		links[i] = Link{Mean: mean, SD: rng.Float64() * 3 * mean, Latency: rng.Float64() * 2}
		switch rng.IntN(12) {
		case 0:
			links[i].Mean = 0
		case 1:
			links[i].Mean = math.NaN()
		case 2:
			links[i].Latency = 0
		}
	}
	return links
}

// TestSplitProperties checks on many random inputs (fixed seed): the sum is
// exactly size, no entry is negative, at most one entry is off the align
// grid, and under time balancing every link used finishes within
// align/min(B) of the others' common T (so within 2*align/min(B) of each
// other).
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(20050101, 7))
	aligns := []int64{0, 1, 512, 4096, 1 << 20, 64 << 20}
	for iter := range 5000 {
		links := randomLinks(rng)
		size := rng.Int64N(1 << 40)
		if iter%10 == 0 {
			size = rng.Int64N(1 << 20) // small files too
		}
		align := aligns[rng.IntN(len(aligns))]
		for _, p := range Policies() {
			alloc, err := Split(p, links, size, align)
			if errors.Is(err, ErrNoUsableLink) {
				continue
			}
			if err != nil {
				t.Fatalf("Split(%s, %+v, %d, %d): %v", p, links, size, align, err)
			}
			var sum int64
			offGrid := 0
			a := max(align, 1)
			for i, d := range alloc {
				if d < 0 {
					t.Fatalf("Split(%s) gave link %d %d bytes", p, i, d)
				}
				if d > 0 && EffectiveBW(p, links[i]) <= 0 {
					t.Fatalf("Split(%s) gave unusable link %d %d bytes", p, i, d)
				}
				if d%a != 0 {
					offGrid++
				}
				sum += d
			}
			if sum != size {
				t.Fatalf("Split(%s, size %d, align %d) sums to %d: %v", p, size, align, sum, alloc)
			}
			if offGrid > 1 {
				t.Fatalf("Split(%s, align %d) = %v: %d entries off the grid", p, align, alloc, offGrid)
			}
			if p == BOS || p == EAS {
				continue
			}
			minB := math.Inf(1)
			for _, l := range links {
				if b := EffectiveBW(p, l); b > 0 {
					minB = math.Min(minB, b)
				}
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for i, f := range Finish(p, links, alloc) {
				if alloc[i] > 0 {
					lo, hi = math.Min(lo, f), math.Max(hi, f)
				}
			}
			if tol := 2*float64(a)/minB + 1e-9*hi; hi-lo > tol {
				t.Fatalf("Split(%s, size %d, align %d) finish times spread %v > %v: %v",
					p, size, align, hi-lo, tol, Finish(p, links, alloc))
			}
		}
	}
}

// TestSplitEqualFinish checks the time-balancing policies on the paper's
// Table 1 (Fig. 3) links, 200 MB, 1 MiB blocks: finish times agree within
// one block at the slowest effective bandwidth.
func TestSplitEqualFinish(t *testing.T) {
	const mbit = 1e6 / 8 // bytes/s per Mb/s
	links := []Link{
		{Name: "cirque", Mean: 3.51 * mbit, SD: 1.44 * mbit},
		{Name: "nouba", Mean: 51.02 * mbit, SD: 23.79 * mbit},
		{Name: "dralion", Mean: 19.43 * mbit, SD: 12.76 * mbit},
	}
	const size, align = 200 << 20, 1 << 20
	for _, p := range []Policy{MS, NTSS, TCS, TCSMinus} {
		alloc, err := Split(p, links, size, align)
		if err != nil {
			t.Fatalf("Split(%s): %v", p, err)
		}
		fin := Finish(p, links, alloc)
		minB := math.Inf(1)
		for _, l := range links {
			minB = math.Min(minB, EffectiveBW(p, l))
		}
		lo, hi := slices.Min(fin), slices.Max(fin)
		if hi-lo > 2*align/minB {
			t.Errorf("%s: finish times %v spread more than %v s", p, fin, 2*align/minB)
		}
		// The fastest link gets the most, the slowest the least.
		if !(alloc[1] > alloc[2] && alloc[2] > alloc[0]) {
			t.Errorf("%s: allocation %v not ordered by bandwidth", p, alloc)
		}
	}
}

func TestFinish(t *testing.T) {
	links := []Link{{Mean: 100, Latency: 0.5}, {Mean: 300}, {Mean: 0}, {Mean: 50}}
	tests := []struct {
		name  string
		p     Policy
		alloc []int64
		want  []float64
	}{
		// 0.5 + 250/100 = 3; 750/300 = 2.5; the third sends nothing.
		{"MS", MS, []int64{250, 750, 0, 0}, []float64{3, 2.5, 0, 0}},
		// A link with bytes but no bandwidth never finishes.
		{"unusable with bytes", MS, []int64{0, 0, 10, 0}, []float64{0, 0, math.Inf(1), 0}},
		// Short alloc: missing entries are 0 bytes; extras ignored.
		{"short", MS, []int64{100}, []float64{1.5, 0, 0, 0}},
		{"long", MS, []int64{0, 0, 0, 100, 7}, []float64{0, 0, 0, 2}},
		// NTSS plans with Mean + SD: SD 0 here, so the same as MS.
		{"negative entry", NTSS, []int64{-5, 300, 0, 0}, []float64{0, 1, 0, 0}},
	}
	for _, tt := range tests {
		got := Finish(tt.p, links, tt.alloc)
		if len(got) != len(tt.want) {
			t.Fatalf("%s: Finish = %v, want %v", tt.name, got, tt.want)
		}
		for i := range got {
			if !near(got[i], tt.want[i], 1e-12) {
				t.Errorf("%s: Finish = %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}
}

func TestRanges(t *testing.T) {
	got := Ranges([]int64{3, 0, 5, -1, 2})
	want := [][]Span{{{0, 3}}, nil, {{3, 8}}, nil, {{8, 10}}}
	if len(got) != len(want) {
		t.Fatalf("Ranges = %v, want %v", got, want)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("Ranges = %v, want %v", got, want)
		}
	}
	if got := Ranges(nil); len(got) != 0 {
		t.Fatalf("Ranges(nil) = %v, want empty", got)
	}
}

// TestRangesCoverSplit lays random plans out and checks that the spans
// cover [0, size) in link order without gap or overlap, one per used link.
func TestRangesCoverSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		links := randomLinks(rng)
		size := rng.Int64N(1 << 36)
		alloc, err := Split(TCS, links, size, 4096)
		if err != nil {
			continue
		}
		var next int64
		for i, spans := range Ranges(alloc) {
			if alloc[i] == 0 {
				if len(spans) != 0 {
					t.Fatalf("link %d has no bytes but spans %v", i, spans)
				}
				continue
			}
			if len(spans) != 1 || spans[0].Off != next || spans[0].Len() != alloc[i] {
				t.Fatalf("link %d: spans %v, want one of %d bytes at %d", i, spans, alloc[i], next)
			}
			next = spans[0].End
		}
		if next != size {
			t.Fatalf("spans end at %d, want %d", next, size)
		}
	}
}

func TestSpanLen(t *testing.T) {
	for _, tt := range []struct {
		s    Span
		want int64
	}{{Span{0, 10}, 10}, {Span{5, 5}, 0}, {Span{9, 3}, 0}} {
		if got := tt.s.Len(); got != tt.want {
			t.Errorf("%v.Len() = %d, want %d", tt.s, got, tt.want)
		}
	}
}
