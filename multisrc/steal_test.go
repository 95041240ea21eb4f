package multisrc

import (
	"math"
	"testing"
)

func TestSteal(t *testing.T) {
	tests := []struct {
		name       string
		thief      int
		remaining  [][]Span
		rates      []float64
		min, align int64
		victim     int
		take       Span
		ok         bool
	}{
		{
			// Link 1: 1000 B at 100 B/s = 10 s; link 2: 600 B at 50 B/s =
			// 12 s, the latest: the victim. x = 600*150/(150+50) = 450:
			// thief 450/150 = 3 s, victim (600-450)/50 = 3 s.
			name:      "latest finish, both finish together",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{2000, 2600}}},
			rates:     []float64{150, 100, 50},
			victim:    2, take: Span{2150, 2600}, ok: true,
		},
		{
			// Same, align 100: 450 rounds down to 400.
			name:      "aligned",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{2000, 2600}}},
			rates:     []float64{150, 100, 50},
			align:     100,
			victim:    2, take: Span{2200, 2600}, ok: true,
		},
		{
			// x = 450 but the victim's last span has 300 B: the whole
			// span, never its earlier one.
			name:      "whole last span",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{1000, 1300}, {2000, 2300}}},
			rates:     []float64{150, 100, 50},
			victim:    2, take: Span{2000, 2300}, ok: true,
		},
		{
			// Empty spans after the last real one are skipped.
			name:      "trailing empty span",
			thief:     1,
			remaining: [][]Span{{{0, 100}, {500, 500}}, nil},
			rates:     []float64{10, 10},
			victim:    0, take: Span{50, 100}, ok: true,
		},
		{
			name:      "below min",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{2000, 2600}}},
			rates:     []float64{150, 100, 50},
			min:       451,
			victim:    -1,
		},
		{
			name:      "exactly min",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{2000, 2600}}},
			rates:     []float64{150, 100, 50},
			min:       450,
			victim:    2, take: Span{2150, 2600}, ok: true,
		},
		{
			// All unknown: equal rates, so the most bytes is the latest;
			// x = 800/2 = 400.
			name:      "no rate known",
			thief:     2,
			remaining: [][]Span{{{0, 500}}, {{500, 1300}}, nil},
			rates:     []float64{0, 0, 0},
			victim:    1, take: Span{900, 1300}, ok: true,
		},
		{
			// nil rates are all unknown too.
			name:      "nil rates",
			thief:     0,
			remaining: [][]Span{nil, {{0, 10}}},
			victim:    1, take: Span{5, 10}, ok: true,
		},
		{
			// Thief unknown: mean(100, 300) = 200. Link 1: 1000/100 = 10
			// s, link 2: 1500/300 = 5 s: victim 1; x = 1000*200/300 =
			// 666.67 → 666.
			name:      "unknown thief rate",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1000}}, {{1000, 2500}}},
			rates:     []float64{0, 100, 300},
			victim:    1, take: Span{334, 1000}, ok: true,
		},
		{
			// NaN, negative and +Inf are unknown as well, and a rates
			// slice shorter than remaining leaves the rest unknown: none
			// is known, so all are equal; the most bytes (link 2, 300 B)
			// is the victim and x = 300/2 = 150.
			name:      "bad rates",
			thief:     0,
			remaining: [][]Span{nil, {{0, 100}}, {{100, 400}}, {{400, 500}}},
			rates:     []float64{math.NaN(), -1, math.Inf(1)}, // link 3 missing
			victim:    2, take: Span{250, 400}, ok: true,
		},
		{
			// Ties on finish time: the lowest index.
			name:      "tie",
			thief:     2,
			remaining: [][]Span{{{0, 100}}, {{100, 200}}, nil},
			rates:     []float64{10, 10, 10},
			victim:    0, take: Span{50, 100}, ok: true,
		},
		{
			// Thief backlog 100 B at 100 B/s (1 s), victim 300 B at 100
			// B/s (3 s): x = (100*300 - 100*100)/200 = 100: both 2 s.
			name:      "thief backlog",
			thief:     0,
			remaining: [][]Span{{{0, 100}}, {{100, 400}}},
			rates:     []float64{100, 100},
			victim:    1, take: Span{300, 400}, ok: true,
		},
		{
			// Backlog 500 B (5 s) beyond the victim's 300 B (3 s): x < 0.
			name:      "thief slower than victim alone",
			thief:     0,
			remaining: [][]Span{{{0, 500}}, {{500, 800}}},
			rates:     []float64{100, 100},
			victim:    -1,
		},
		{
			// 1 B left: x = 0.5 rounds to 0.
			name:      "nothing worth taking",
			thief:     0,
			remaining: [][]Span{nil, {{0, 1}}},
			rates:     []float64{100, 100},
			victim:    -1,
		},
		{
			// x = 50 < one 4096 B block.
			name:      "less than a block",
			thief:     0,
			remaining: [][]Span{nil, {{0, 100}}},
			rates:     []float64{100, 100},
			align:     4096,
			victim:    -1,
		},
		{name: "no victim", thief: 0, remaining: [][]Span{nil, nil, {{5, 5}}}, victim: -1},
		{name: "thief out of range", thief: 3, remaining: [][]Span{nil, {{0, 10}}}, victim: -1},
		{name: "negative thief", thief: -1, remaining: [][]Span{nil, {{0, 10}}}, victim: -1},
		{name: "empty", thief: 0, victim: -1},
	}
	for _, tt := range tests {
		victim, take, ok := Steal(tt.thief, tt.remaining, tt.rates, tt.min, tt.align)
		if victim != tt.victim || take != tt.take || ok != tt.ok {
			t.Errorf("%s: Steal = %d, %v, %v; want %d, %v, %v", tt.name, victim, take, ok, tt.victim, tt.take, tt.ok)
		}
	}
}

// TestStealBalances checks the split point on many rate pairs: after the
// steal, the thief and the victim finish within one byte's time (align 1)
// of each other, and the thief sooner than the victim would alone.
func TestStealBalances(t *testing.T) {
	for rt := 1.0; rt <= 1000; rt *= 3.7 {
		for rv := 1.0; rv <= 1000; rv *= 2.9 {
			const rem = 1 << 30
			rates := []float64{rt, rv}
			victim, take, ok := Steal(0, [][]Span{nil, {{0, rem}}}, rates, 0, 1)
			if !ok || victim != 1 || take.End != rem {
				t.Fatalf("rt %v rv %v: Steal = %d, %v, %v", rt, rv, victim, take, ok)
			}
			thiefDone := float64(take.Len()) / rt
			victimDone := float64(rem-take.Len()) / rv
			if math.Abs(thiefDone-victimDone) > 1/rt+1/rv {
				t.Errorf("rt %v rv %v: thief %v s, victim %v s", rt, rv, thiefDone, victimDone)
			}
			if thiefDone >= rem/rv {
				t.Errorf("rt %v rv %v: thief %v s not sooner than victim alone %v s", rt, rv, thiefDone, rem/rv)
			}
		}
	}
}
