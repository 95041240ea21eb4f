package engine

import (
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRangesAdd(t *testing.T) {
	cases := []struct {
		name string
		add  []span
		want ranges
	}{
		{"empty span ignored", []span{{5, 5}}, nil},
		{"disjoint sorted", []span{{10, 20}, {0, 5}, {30, 40}}, ranges{{0, 5}, {10, 20}, {30, 40}}},
		{"adjacent merge", []span{{0, 5}, {5, 10}}, ranges{{0, 10}}},
		{"bridge", []span{{0, 5}, {10, 15}, {5, 10}}, ranges{{0, 15}}},
		{"overlap many", []span{{0, 2}, {4, 6}, {8, 10}, {1, 9}}, ranges{{0, 10}}},
		{"contained", []span{{0, 10}, {3, 4}}, ranges{{0, 10}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r ranges
			for _, s := range c.add {
				r = r.add(s.Off, s.End)
			}
			if !reflect.DeepEqual(r, c.want) {
				t.Errorf("got %v, want %v", r, c.want)
			}
		})
	}
}

// TestRangesAgainstBitmap checks add, total, missing and check against a
// byte-per-position model on random inputs.
func TestRangesAgainstBitmap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const size = 200
	for range 300 {
		var r ranges
		var bits [size]bool
		for range rng.IntN(12) {
			a := rng.Int64N(size)
			b := a + rng.Int64N(size-a+1)
			r = r.add(a, b)
			for i := a; i < b; i++ {
				bits[i] = true
			}
		}
		if err := r.check(size); err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		var n int64
		for _, b := range bits {
			if b {
				n++
			}
		}
		if r.total() != n {
			t.Fatalf("%v: total %d, want %d", r, r.total(), n)
		}
		var miss [size]bool
		for _, m := range r.missing(size) {
			for i := m.Off; i < m.End; i++ {
				miss[i] = true
			}
		}
		for i := range bits {
			if bits[i] == miss[i] {
				t.Fatalf("%v: byte %d done=%v missing=%v", r, i, bits[i], miss[i])
			}
		}
	}
}

func TestRangesCheck(t *testing.T) {
	bad := []ranges{{{-1, 2}}, {{2, 2}}, {{0, 11}}, {{0, 5}, {5, 6}}, {{4, 6}, {0, 5}}}
	for _, r := range bad {
		if r.check(10) == nil {
			t.Errorf("%v accepted", r)
		}
	}
	if err := (ranges{{0, 3}, {4, 10}}).check(10); err != nil {
		t.Error(err)
	}
}

func TestChunkSize(t *testing.T) {
	cases := []struct {
		missing int64
		cc      int
		min     int64
		want    int64
	}{
		{0, 1, 8 << 20, 8 << 20},
		{1 << 30, 1, 8 << 20, 256 << 20},
		{1 << 30, 8, 8 << 20, 32 << 20},
		{1 << 30, 64, 8 << 20, 8 << 20},
		{10, 3, 1, 1}, // ceil(10/12)
	}
	for _, c := range cases {
		if got := chunkSize(c.missing, c.cc, c.min); got != c.want {
			t.Errorf("chunkSize(%d, %d, %d) = %d, want %d", c.missing, c.cc, c.min, got, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{Attempts: 8, Base: 200 * time.Millisecond, Max: 10 * time.Second, Seed: 3}
	for attempt := 1; attempt <= 12; attempt++ {
		full := min(p.Base<<(attempt-1), p.Max)
		for key := range uint64(20) {
			d := p.backoff(attempt, key)
			if d < full/2 || d > full {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, full/2, full)
			}
			if d != p.backoff(attempt, key) {
				t.Fatalf("not deterministic")
			}
		}
	}
	if p.backoff(1, 1) == p.backoff(1, 2) && p.backoff(1, 3) == p.backoff(1, 4) {
		t.Errorf("no jitter across keys")
	}
}

func TestMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var m meter
	m.reset(t0)
	// 10 MB/s for 10 s, sampled every 10 ms.
	for i := 1; i <= 1000; i++ {
		m.add(t0.Add(time.Duration(i)*10*time.Millisecond), 100_000)
	}
	now := t0.Add(10 * time.Second)
	if r := m.rate(now); r < 9.5e6 || r > 10.5e6 {
		t.Errorf("steady rate %g, want 1e7", r)
	}
	// Then nothing for 2.5 s: half the window is idle.
	if r := m.rate(now.Add(2500 * time.Millisecond)); r < 4.5e6 || r > 5.5e6 {
		t.Errorf("rate after 2.5 s idle %g, want 5e6", r)
	}
	if r := m.rate(now.Add(6 * time.Second)); r != 0 {
		t.Errorf("rate after 6 s idle %g, want 0", r)
	}
	// Early readings are not diluted by the unfilled window.
	m.reset(t0)
	m.add(t0.Add(time.Second), 1_000_000)
	if r := m.rate(t0.Add(time.Second)); r < 0.9e6 || r > 1.1e6 {
		t.Errorf("early rate %g, want 1e6", r)
	}
}

func TestJournalRoundTrip(t *testing.T) {
	name := filepath.Join(t.TempDir(), "sub", "j")
	if _, ok, err := readJournal(name); ok || err != nil {
		t.Fatalf("missing journal: ok %v, %v", ok, err)
	}
	mt := time.Date(2025, 1, 2, 3, 4, 5, 678901234, time.Local)
	want := newJournal("a/b", "c/d", 100, mt, ranges{{0, 10}, {20, 100}})
	if err := writeJournal(name, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readJournal(name)
	if err != nil || !ok || !got.ModTime.Equal(mt) || got.Src != "a/b" || !reflect.DeepEqual(got.ranges(), ranges{{0, 10}, {20, 100}}) {
		t.Fatalf("read back %+v, %v, %v", got, ok, err)
	}
	for _, garbage := range []string{"", "{", `{"version":2}`, `{"version":1,"size":10,"done":[[5,3]]}`, "\x00\x01"} {
		os.WriteFile(name, []byte(garbage), 0o644)
		if _, ok, err := readJournal(name); !ok || err == nil {
			t.Errorf("%q: ok %v, err %v; want a reported corrupt journal", garbage, ok, err)
		}
	}
	if err := removeJournal(name); err != nil || exists(name) {
		t.Errorf("remove: %v", err)
	}
	if err := removeJournal(name); err != nil {
		t.Errorf("removing a missing journal: %v", err)
	}
}

func TestTempName(t *testing.T) {
	for in, want := range map[string]string{"f": ".f.sluice-part", "a/b/f.dat": "a/b/.f.dat.sluice-part", "/x/y": "/x/.y.sluice-part"} {
		if got := TempName(in); got != want {
			t.Errorf("TempName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTempNameFor: tagged temporary names differ between writers of one
// destination, and never pass the 255 bytes a file name may have, however
// long the destination's name (up to its own 255), cutting between
// characters.
func TestTempNameFor(t *testing.T) {
	if a, b := TempNameFor("/d/f", "t1"), TempNameFor("/d/f", "t2"); a != "/d/.f.t1.sluice-part" || a == b {
		t.Errorf("tagged names %q and %q", a, b)
	}
	long := strings.Repeat("é", 127) // 254 bytes
	for _, tc := range []struct{ name, tag string }{
		{strings.Repeat("a", 255), "t123456789"},
		{strings.Repeat("a", 242), ""},
		{long, "t1"},
		{long + "x", "t1"},
	} {
		got := TempNameFor("dir/"+tc.name, tc.tag)
		base := path.Base(got)
		if len(base) > 255 || !utf8.ValidString(base) || !strings.HasPrefix(got, "dir/.") || !strings.HasSuffix(got, ".sluice-part") {
			t.Errorf("TempNameFor(%d-byte name, %q) = %q (%d bytes)", len(tc.name), tc.tag, base, len(base))
		}
		// Two long names that differ only past the cut still differ.
		if other := TempNameFor("dir/"+tc.name[:len(tc.name)-1]+"z", tc.tag); other == got && len(tc.name) > 200 {
			t.Errorf("names differing at the end share the temporary name %q", got)
		}
	}
}
