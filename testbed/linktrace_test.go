package testbed

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScaleSeries: scaling sets the mean and keeps the relative variation;
// a series that cannot be scaled is refused with the reason.
func TestScaleSeries(t *testing.T) {
	for _, c := range []struct {
		name   string
		xs     []float64
		target float64
		err    string
	}{
		{name: "varying", xs: []float64{0.9, 1.1, 2.4, 0.2, 0}, target: 51.02},
		{name: "steady", xs: []float64{0.89, 0.888, 0.852, 0.851}, target: 1.51},
		{name: "empty", xs: nil, target: 1, err: "empty"},
		{name: "all zero", xs: []float64{0, 0}, target: 1, err: "every sample is 0"},
		{name: "negative sample", xs: []float64{1, -1}, target: 1, err: "sample 1"},
		{name: "NaN sample", xs: []float64{1, math.NaN()}, target: 1, err: "sample 1"},
		{name: "zero target", xs: []float64{1, 2}, target: 0, err: "target"},
		{name: "infinite target", xs: []float64{1, 2}, target: math.Inf(1), err: "target"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ScaleSeries(c.xs, c.target)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m0, sd0 := meanPopSD(c.xs)
			m, sd := meanPopSD(got)
			if math.Abs(m-c.target) > 1e-9*c.target || math.Abs(sd/m-sd0/m0) > 1e-12 {
				t.Errorf("scaled mean %v CV %v, want %v and %v", m, sd/m, c.target, sd0/m0)
			}
		})
	}
}

// writeTraces makes a traces directory with the given manifest and files.
func writeTraces(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLoadLinkTraces: a manifest drives each link with its series, scaled
// to Table 1's mean and played one after another; a manifest or series
// that would drive a link wrongly is refused, naming the file and line.
func TestLoadLinkTraces(t *testing.T) {
	cfg := MultiConfig{Name: "figX", DataMB: 1, Links: []MultiLink{{"slow", 1.5, 0.04}, {"fast", 40, 13}}}
	good := "# comment\nfigX\tslow\t1.5\t0.04\ts/a\nfigX\tfast\t40\t13\ts/b,s/c\nother\tslow\t9\t9\ts/missing\n"
	files := map[string]string{
		"s/a": "0.0\t1.0\n5.0\t1.2\n10.0\t0.8\n",
		"s/b": "0 2\n5 6\n",
		"s/c": "0 10\n5 30\n10 20\n\n",
	}
	for _, c := range []struct {
		name     string
		manifest string
		files    map[string]string
		err      string
	}{
		{name: "good", manifest: good, files: files},
		{name: "no manifest", manifest: "", files: nil, err: "no series for figX link slow"},
		{name: "link missing", manifest: "figX\tslow\t1.5\t0.04\ts/a\n", files: files, err: "no series for figX link fast"},
		{name: "unknown link", manifest: good + "figX\tnone\t1\t1\ts/a\n", files: files, err: `no link "none"`},
		{name: "link twice", manifest: good + "figX\tslow\t1.5\t0.04\ts/a\n", files: files, err: "named twice"},
		{name: "other mean", manifest: "figX\tslow\t1.6\t0.04\ts/a\nfigX\tfast\t40\t13\ts/b\n", files: files, err: "Table 1 gives 1.5"},
		{name: "short line", manifest: "figX\tslow\t1.5\n", files: files, err: "want config, link, mean, sd, series"},
		{name: "series outside", manifest: "figX\tslow\t1.5\t0.04\t../a\nfigX\tfast\t40\t13\ts/b\n", files: files, err: "want a file name under"},
		{name: "series missing", manifest: "figX\tslow\t1.5\t0.04\ts/x\nfigX\tfast\t40\t13\ts/b\n", files: files, err: "no such file"},
		{name: "bad sample", manifest: good, files: map[string]string{"s/a": "0 1\n5 fast\n", "s/b": "0 1\n1 2\n", "s/c": "0 1\n1 1\n"}, err: `s/a:2: bandwidth "fast"`},
		{name: "negative sample", manifest: good, files: map[string]string{"s/a": "0 1\n5 -1\n", "s/b": "0 1\n1 2\n", "s/c": "0 1\n1 1\n"}, err: "s/a:2"},
		{name: "three fields", manifest: good, files: map[string]string{"s/a": "0 1 2\n", "s/b": "0 1\n1 2\n", "s/c": "0 1\n1 1\n"}, err: "3 fields"},
		{name: "one sample", manifest: good, files: map[string]string{"s/a": "0 1\n", "s/b": "0 1\n1 2\n", "s/c": "0 1\n1 1\n"}, err: "1 samples"},
		{name: "all zero", manifest: good, files: map[string]string{"s/a": "0 0\n1 0\n", "s/b": "0 1\n1 2\n", "s/c": "0 1\n1 1\n"}, err: "every sample is 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lts, err := LoadLinkTraces(writeTraces(t, c.manifest, c.files), cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := [][]float64{{1.5, 1.8, 1.2}, {20, 60, 20, 60, 40}}
			for i, lt := range lts {
				if lt.Link != cfg.Links[i].Name || len(lt.Mbps) != len(want[i]) {
					t.Fatalf("link %d: %+v", i, lt)
				}
				for j := range want[i] {
					if math.Abs(lt.Mbps[j]-want[i][j]) > 1e-9 {
						t.Errorf("%s sample %d: %v, want %v", lt.Link, j, lt.Mbps[j], want[i][j])
					}
				}
			}
			if got := lts[1].Series; len(got) != 2 || got[0] != "s/b" || got[1] != "s/c" {
				t.Errorf("fast link's series %v", got)
			}
		})
	}
}

// TestCommittedTraces: the committed subset drives every link of every
// configuration at its Table 1 mean, each series keeping its measured
// relative variation, long enough for a same-links evaluation of 30
// groups of fig6 (about 350 s of the links' clock), and with a fast, highly
// variable link in fig3 as the criteria need.
func TestCommittedTraces(t *testing.T) {
	dir := filepath.Join("..", "docs", "results", "multisource", "traces")
	for _, name := range MultiConfigNames {
		cfg := MultiConfigs[name]
		lts, err := LoadLinkTraces(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, lt := range lts {
			l := cfg.Links[i]
			m, sd := meanPopSD(lt.Mbps)
			if math.Abs(m-l.MeanMbps) > 0.01*l.MeanMbps {
				t.Errorf("%s %s: mean %.3f, Table 1 %.3f", name, l.Name, m, l.MeanMbps)
			}
			if secs := float64(len(lt.Mbps)) * StepSeconds; secs < 400 {
				t.Errorf("%s %s: %.0f s of series", name, l.Name, secs)
			}
			if name == "fig3" && l.Name == "nouba.ucsd.edu" && sd/m < 0.3 {
				t.Errorf("fig3's fastest link has CV %.2f: not highly variable", sd/m)
			}
			for _, cv := range lt.CV {
				if !(cv > 0) {
					t.Errorf("%s %s: a series with CV %v", name, l.Name, cv)
				}
			}
		}
	}
}

// TestTraceSteps: the emulated bandwidth is the series (in bytes/s at the
// testbed's scale), repeated past its end; drift moves a slow link's level
// block by block and leaves a fast link alone.
func TestTraceSteps(t *testing.T) {
	mbps := []float64{1, 2, 3, 4}
	for _, c := range []struct {
		name  string
		slow  bool
		drift Drift
		want  func(i int, got float64) bool
	}{
		{name: "no drift", slow: true, want: func(i int, got float64) bool { return math.Abs(got-mbps[i%4]) < 1e-9 }},
		{name: "fast link ignores drift", slow: false, drift: Drift{SD: 0.5, Block: 1, Seed: 1},
			want: func(i int, got float64) bool { return math.Abs(got-mbps[i%4]) < 1e-9 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			capacity, steps := traceSteps(mbps, 10*StepSeconds, c.slow, c.drift, 0)
			if len(steps) != 10 || capacity != 4*BWScale {
				t.Fatalf("%d steps, capacity %v", len(steps), capacity)
			}
			for i, s := range steps {
				got := capacity * (1 - s.Fraction) / BWScale
				if s.At != float64(i)*StepSeconds || !c.want(i, got) {
					t.Errorf("step %d at %v: %v Mb/s", i, s.At, got)
				}
			}
		})
	}
	// Drift: constant within a block of 4 steps, differing between
	// blocks, the same for the same seed.
	flat := []float64{2, 2, 2, 2, 2, 2, 2, 2}
	d := Drift{SD: 0.2, Block: 4 * StepSeconds, Seed: 9}
	capacity, steps := traceSteps(flat, 8*StepSeconds, true, d, 1)
	_, again := traceSteps(flat, 8*StepSeconds, true, d, 1)
	lv := func(i int) float64 { return capacity * (1 - steps[i].Fraction) }
	for i := range steps {
		if steps[i] != again[i] {
			t.Fatalf("same seed, step %d: %+v and %+v", i, steps[i], again[i])
		}
		if i%4 != 0 && math.Abs(lv(i)-lv(i-1)) > 1e-6 {
			t.Errorf("level changed within a block at step %d", i)
		}
	}
	if math.Abs(lv(0)-lv(4)) < 1e-6 {
		t.Errorf("level the same in both blocks: %v", lv(0))
	}
	// An outage (0 Mb/s) leaves the emulation's floor, not a stopped link.
	_, st := traceSteps([]float64{0, 1}, 2*StepSeconds, false, Drift{}, 0)
	if st[0].Fraction != 0.999 {
		t.Errorf("outage fraction %v, want 0.999", st[0].Fraction)
	}
}

// TestRunMultiSourceTraces: an evaluation on fig4's links playing the
// committed measured series (the slow link drifting) moves every file,
// records the series, each group's stretch and the intervals, and the
// monitor sees the links near their Table 1 means. Drift without series
// is refused before anything starts.
func TestRunMultiSourceTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("moves real bytes through emulated replicas")
	}
	cfg := MultiConfigs["fig4"]
	if _, err := RunMultiSource(context.Background(), cfg, MultiOptions{Runs: 2, Drift: Drift{SD: 0.1, Block: 10}}); err == nil || !strings.Contains(err.Error(), "measured series") {
		t.Fatalf("drift without series: %v", err)
	}
	dir := filepath.Join("..", "docs", "results", "multisource", "traces")
	r, err := RunMultiSource(context.Background(), cfg, MultiOptions{Runs: 2, Policies: []string{"ms", "tcs"}, Warmup: 2 * time.Second,
		Seed: 2, SameLinks: true, Settle: 500 * time.Millisecond, Traces: dir, Drift: Drift{SD: 0.1, Block: 10, Seed: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 4 || len(r.Traces) != 3 || len(r.SeriesSeconds) != 3 || r.Drift == nil {
		t.Fatalf("result %+v", r)
	}
	if len(r.GroupClocks) != 2 || len(r.GroupClocks[1]) != 3 || !(r.GroupClocks[1][0] > r.GroupClocks[0][0]) {
		t.Errorf("group clocks %v", r.GroupClocks)
	}
	if r.Intervals == nil || r.Intervals.Groups != 2 {
		t.Errorf("intervals %+v", r.Intervals)
	}
	for _, l := range r.Links {
		m := r.Measured[l.Name]
		if m[0] < l.MeanMbps/3 || m[0] > l.MeanMbps*3 {
			t.Errorf("link %s monitored at %.2f Mb/s, Table 1 %.2f", l.Name, m[0], l.MeanMbps)
		}
	}
}
