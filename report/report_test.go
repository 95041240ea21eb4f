package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/sluice-dtn/sluice/sim"
)

func result(sched string, all sim.Stats, byClass map[string]sim.Stats) *sim.Result {
	return &sim.Result{Trace: "45", Scheduler: sched, Interactive: all, ByClass: byClass}
}

func st(turnaround, slowdown float64) sim.Stats {
	return sim.Stats{N: 10, AvgTurnaround: turnaround, AvgSlowdown: slowdown}
}

// sampleResults are three schedulers on one trace; seal has no 1-10G
// tasks, so that class is left out of its bars.
func sampleResults() []*sim.Result {
	return []*sim.Result{
		result("basecc1", st(20, 4), map[string]sim.Stats{"0-1M": st(2, 5), "1-10M": st(4, 4), "10-100M": st(10, 3), "100M-1G": st(40, 2), "1-10G": st(200, 1.5)}),
		result("basecc2", st(16, 3), map[string]sim.Stats{"0-1M": st(3, 6), "1-10M": st(3, 3), "10-100M": st(8, 2), "100M-1G": st(30, 1.6), "1-10G": st(150, 1.2)}),
		result("seal", st(12, 2), map[string]sim.Stats{"0-1M": st(1, 1.5), "1-10M": st(2, 1.5), "10-100M": st(6, 1.4), "100M-1G": st(36, 1.8)}),
	}
}

func TestChangesFrom(t *testing.T) {
	got := ChangesFrom(sampleResults(), "basecc1")
	want := []ClassChange{
		{"45", "basecc2", "basecc1", "0-1M", 50, 20},
		{"45", "basecc2", "basecc1", "1-10M", -25, -25},
		{"45", "basecc2", "basecc1", "10-100M", -20, -100.0 / 3},
		{"45", "basecc2", "basecc1", "100M-1G", -25, -20},
		{"45", "basecc2", "basecc1", "1-10G", -25, -20},
		{"45", "basecc2", "basecc1", "all", -20, -25},
		{"45", "seal", "basecc1", "0-1M", -50, -70},
		{"45", "seal", "basecc1", "1-10M", -50, -62.5},
		{"45", "seal", "basecc1", "10-100M", -40, -100.0 * 1.6 / 3},
		{"45", "seal", "basecc1", "100M-1G", -10, -10},
		{"45", "seal", "basecc1", "all", -40, -50},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Trace != w.Trace || g.Scheduler != w.Scheduler || g.Baseline != w.Baseline || g.Class != w.Class ||
			math.Abs(g.Turnaround-w.Turnaround) > 1e-9 || math.Abs(g.Slowdown-w.Slowdown) > 1e-9 {
			t.Errorf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	if rows := ChangesFrom(sampleResults(), "globus"); rows != nil {
		t.Errorf("no baseline among the results: got %+v, want nil", rows)
	}

	// The same figures from sim.Compare's block, whose VsBaseCC1 they match.
	tc := sim.TraceComparison{Trace: "45", Schedulers: map[string]sim.SchedStats{}, VsBaseCC1: map[string]map[string]sim.Change{}}
	for _, r := range sampleResults() {
		tc.Schedulers[r.Scheduler] = sim.SchedStats{AvgSlowdown: r.Interactive.AvgSlowdown, AvgTurnaround: r.Interactive.AvgTurnaround, ByClass: r.ByClass}
	}
	fromTC := ChangesFromComparison(tc, []string{"basecc1", "basecc2", "seal", "absent"}, "basecc1")
	if len(fromTC) != len(got) {
		t.Fatalf("ChangesFromComparison: %d rows, ChangesFrom %d", len(fromTC), len(got))
	}
	for i := range got {
		if fromTC[i] != got[i] {
			t.Errorf("row %d: ChangesFromComparison %+v, ChangesFrom %+v", i, fromTC[i], got[i])
		}
	}
}

// svgTexts parses the SVG as XML and returns the character data of its
// <text> elements.
func svgTexts(t *testing.T, data []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	var texts []string
	depth, root := 0, ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			if tok.Name.Local == "text" {
				depth++
				texts = append(texts, "")
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				depth--
			}
		case xml.CharData:
			if depth > 0 {
				texts[len(texts)-1] += string(tok)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return texts
}

// checkPNG decodes a PNG and checks its size (when w > 0) and that it
// has more than one colour.
func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b := img.Bounds()
	if w > 0 && (b.Dx() != w || b.Dy() != h) {
		t.Errorf("%s: %dx%d pixels, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
	if n := colours(img, 3); n < 2 {
		t.Errorf("%s: %d distinct colour(s): blank", path, n)
	}
}

func colours(img image.Image, enough int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= enough {
				return len(seen)
			}
		}
	}
	return len(seen)
}

func pixels(l vg.Length) int { return int(math.Round(l.Dots(DPI))) }

func TestCharts(t *testing.T) {
	rows := ChangesFrom(sampleResults(), "basecc1")
	spare := []SparePoint{
		{Series: "steal/λ=1", Label: "25", SpareUsed: 0.92, NormSlowdown: 0.81},
		{Series: "steal/λ=0.8", Label: "25", SpareUsed: 0.74, NormSlowdown: 0.93},
		{Series: "seal1", Label: "25", SpareUsed: 0.97, NormSlowdown: 0.42},
		{Series: "steal/λ=1", Label: "45", SpareUsed: 0.85, NormSlowdown: 0.77},
		{Series: "basevary", SpareUsed: 0.99, NormSlowdown: 0.2},
	}
	var series []Series
	for i, n := range []string{"dtn1", "dtn2 <in>", "dtn3 & co"} {
		s := Series{Name: n}
		for x := 0.0; x <= 60; x += 2 {
			s.T = append(s.T, x)
			s.MBps = append(s.MBps, 100*float64(i+1)*(1+math.Sin(x/10+float64(i))))
		}
		series = append(series, s)
	}
	rsvg, rsvgErr := exec.LookPath("rsvg-convert")

	cases := []struct {
		name  string
		write func(dir, name string) error
		size  vg.Point
		texts []string // axis labels with units, legend entries, class names, titles
	}{
		{"change", func(dir, name string) error { return ChangeByClass(dir, name, rows) }, ChangeSize,
			[]string{"% change vs basecc1", "size class (bytes)", "Average turnaround", "Average slowdown", "Trace 45: change per size class vs basecc1 (negative is better)",
				"basecc2", "seal", "0-1M", "1-10M", "10-100M", "100M-1G", "1-10G", "all"}},
		{"spare", func(dir, name string) error { return SpareVsSlowdown(dir, name, spare) }, SpareSize,
			[]string{"spare bandwidth used by batch tasks, B_B / (B_T − B_I) (fraction)", "normalised interactive slowdown SD_I / SD_I+B (ratio)",
				"steal/λ=1", "steal/λ=0.8", "seal1", "basevary", "25", "45"}},
		{"throughput", func(dir, name string) error { return ThroughputOverTime(dir, name, series) }, ThroughputSize,
			[]string{"time (s)", "throughput (MB/s)", "Throughput per endpoint over time", "dtn1", "dtn2 <in>", "dtn3 & co"}},
		{"streams", func(dir, name string) error {
			return ThroughputVsStreams(dir, name, "big file on wan-untuned", []Series{
				{Name: "sluice fixed", T: []float64{4, 8, 16, 32}, MBps: []float64{80, 95, 102, 101}},
				{Name: "sluice (auto)", T: []float64{12}, MBps: []float64{99}},
			})
		}, ThroughputSize,
			[]string{"streams (files or partial transfers at once; log scale)", "throughput (MB/s)", "big file on wan-untuned", "sluice fixed", "sluice (auto)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "new", "dir") // created by the call
			if err := c.write(dir, c.name); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 2 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("want exactly %s.svg and %s.png, got %v", c.name, c.name, names)
			}
			svgPath, pngPath := filepath.Join(dir, c.name+".svg"), filepath.Join(dir, c.name+".png")
			data, err := os.ReadFile(svgPath)
			if err != nil {
				t.Fatal(err)
			}
			texts := svgTexts(t, data)
			have := map[string]bool{}
			for _, s := range texts {
				have[s] = true
			}
			for _, want := range c.texts {
				if !have[want] {
					t.Errorf("SVG has no text %q; texts: %q", want, texts)
				}
			}
			checkPNG(t, pngPath, pixels(c.size.X), pixels(c.size.Y))

			if rsvgErr != nil {
				t.Log("rsvg-convert not installed: SVG rendering not checked")
				return
			}
			out := filepath.Join(t.TempDir(), "rsvg.png")
			if msg, err := exec.Command(rsvg, "-o", out, svgPath).CombinedOutput(); err != nil {
				t.Fatalf("rsvg-convert: %v\n%s", err, msg)
			}
			checkPNG(t, out, 0, 0)
		})
	}
}

func TestChartErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := ChangesFrom(sampleResults(), "basecc1")
	pts := []SparePoint{{Series: "seal1", SpareUsed: 0.5, NormSlowdown: 0.5}}
	series := []Series{{Name: "dtn1", T: []float64{0, 1}, MBps: []float64{1, 2}}}
	mixed := append(append([]ClassChange(nil), rows...), ClassChange{Scheduler: "seal", Baseline: "basecc2", Class: "all"})

	cases := []struct {
		name  string
		err   error
		empty bool // errors.Is(err, ErrEmpty)
	}{
		{"change: empty", ChangeByClass(tmp, "c", nil), true},
		{"spare: empty", SpareVsSlowdown(tmp, "s", nil), true},
		{"throughput: empty", ThroughputOverTime(tmp, "t", nil), true},
		{"throughput: series without points", ThroughputOverTime(tmp, "t", []Series{{Name: "dtn1"}}), true},
		{"throughput: lengths differ", ThroughputOverTime(tmp, "t", []Series{{Name: "dtn1", T: []float64{1, 2}, MBps: []float64{1}}}), true},
		{"change: two baselines", ChangeByClass(tmp, "c", mixed), false},
		{"spare: NaN", SpareVsSlowdown(tmp, "s", []SparePoint{{Series: "x", SpareUsed: math.NaN()}}), false},
		{"change: dir is a file", ChangeByClass(file, "c", rows), false},
		{"spare: dir under a file", SpareVsSlowdown(filepath.Join(file, "sub"), "s", pts), false},
		{"throughput: dir under a file", ThroughputOverTime(filepath.Join(file, "sub"), "t", series), false},
		{"change: no dir", ChangeByClass("", "c", rows), false},
		{"change: name with a slash", ChangeByClass(tmp, "a/b", rows), false},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(tmp, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name  string
			err   error
			empty bool
		}{"throughput: read-only dir", ThroughputOverTime(ro, "t", series), false})
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.HasPrefix(c.err.Error(), "report: ") {
			t.Errorf("%s: error %q does not say where it comes from", c.name, c.err)
		}
		if errors.Is(c.err, ErrEmpty) != c.empty {
			t.Errorf("%s: errors.Is(%v, ErrEmpty) = %v, want %v", c.name, c.err, !c.empty, c.empty)
		}
	}
	// Nothing but the file the test made: failed calls leave no charts
	// or temporary files behind.
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if e.Name() != "file" && e.Name() != "ro" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestMedianOf(t *testing.T) {
	rs := []*sim.Result{
		result("seal", st(10, 2), map[string]sim.Stats{"0-1M": st(1, 1), "1-10G": st(100, 3)}),
		nil,
		result("seal", st(30, 4), map[string]sim.Stats{"0-1M": st(3, 2)}),
		result("seal", st(20, 9), map[string]sim.Stats{"0-1M": st(2, 5)}),
	}
	m := MedianOf(rs)
	if m.Scheduler != "seal" || m.Interactive.AvgTurnaround != 20 || m.Interactive.AvgSlowdown != 4 {
		t.Errorf("interactive medians: got %+v", m)
	}
	if c := m.ByClass["0-1M"]; c.AvgTurnaround != 2 || c.AvgSlowdown != 2 {
		t.Errorf("0-1M: got %+v", c)
	}
	if c := m.ByClass["1-10G"]; c.AvgTurnaround != 100 || c.AvgSlowdown != 3 {
		t.Errorf("1-10G (one repetition has it): got %+v", c)
	}
	if len(m.ByClass) != 2 {
		t.Errorf("classes: got %v", m.ByClass)
	}
	if MedianOf(nil) != nil {
		t.Error("MedianOf(nil) is not nil")
	}
}
