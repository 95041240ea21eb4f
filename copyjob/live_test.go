package copyjob

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/emul"
)

// levelTuner is a Tuner held at a level, counting the windows it saw.
type levelTuner struct {
	level    int
	observed atomic.Int64
}

func (l *levelTuner) Level() int      { return l.level }
func (l *levelTuner) Observe(float64) { l.observed.Add(1) }
func (l *levelTuner) Max() int        { return 8 } // workers beyond the level wait
func (l *levelTuner) windows() int64  { return l.observed.Load() }

// mostAtOnce wraps a handler, keeping in most the most requests of the
// given methods it served at once.
func mostAtOnce(most *atomic.Int64, methods ...string) func(http.Handler) http.Handler {
	var inFlight atomic.Int64
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slices.Contains(methods, r.Method) {
				n := inFlight.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				defer inFlight.Add(-1)
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestRunLive: a live-tuned copy of a tree (small files in batches, one
// file large enough for the engine) lands every file, never runs more
// requests at the source than the tuner's level allows, reports its
// windows, and leaves a different file already at the destination as it
// was, naming it.
func TestRunLive(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var sizes []int
	for i := range 60 {
		sizes = append(sizes, 1000+(i*7919)%100_000)
	}
	sizes = append(sizes, 3<<20)
	want := tree(t, srcDir, sizes...)
	var most atomic.Int64
	count := mostAtOnce(&most, http.MethodPost, http.MethodGet)
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{RTTMs: 20, ConnBps: 20e6}, count)
	// A different file where one of the source's lands: kept.
	keep := filepath.Join(dstDir, "tree", "f03")
	os.MkdirAll(filepath.Dir(keep), 0o755)
	os.WriteFile(keep, []byte("mine"), 0o644)
	d := prepare(t, src, localEP(t, dstDir+"/"), opts(t))
	tu := &levelTuner{level: 2}
	sum, err := RunLive(context.Background(), d, LiveOptions{Tuner: tu, Window: 50 * time.Millisecond, BatchBytes: 200_000, P: 1}, nil)
	var fe *FilesError
	if !errors.As(err, &fe) || fe.Failed != 1 || !errors.Is(err, ErrExists) {
		t.Fatalf("RunLive: %v, want the one different file refused", err)
	}
	if got, _ := os.ReadFile(keep); string(got) != "mine" {
		t.Errorf("the destination's own file was replaced: %q", got)
	}
	delete(want, "f03")
	os.Remove(keep)
	sameTree(t, filepath.Join(dstDir, "tree"), want)
	if m := most.Load(); m > 2 {
		t.Errorf("%d requests at once at the source, the level is 2", m)
	}
	if len(sum.Tuning) == 0 || tu.windows() == 0 {
		t.Errorf("no tuning windows reported (%d) or observed (%d)", len(sum.Tuning), tu.windows())
	}
	for _, w := range sum.Tuning {
		if w.Level != 2 || w.Rate < 0 {
			t.Errorf("window %+v: want level 2 and a rate >= 0", w)
		}
	}
}

// TestRunLiveCanceled: a canceled live copy stops and says so.
func TestRunLiveCanceled(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	var sizes []int
	for range 40 {
		sizes = append(sizes, 50_000)
	}
	tree(t, srcDir, sizes...)
	src := sourceAgent(t, srcDir, "/tree", &emul.Config{RTTMs: 50, ConnBps: 1e6}, nil)
	d := prepare(t, src, localEP(t, dstDir+"/"), opts(t))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := RunLive(ctx, d, LiveOptions{Tuner: &levelTuner{level: 1}, Window: 50 * time.Millisecond, BatchBytes: 50_000}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunLive canceled: %v, want the context's error", err)
	}
}

func TestLiveDefaults(t *testing.T) {
	for _, c := range []struct {
		rtt            time.Duration
		window         time.Duration
		start, oneFile int
		sub            int64
	}{
		{0, time.Second, 4, 8, 4 << 20},
		{2 * time.Millisecond, time.Second, 4, 8, 4 << 20},
		{51 * time.Millisecond, 1020 * time.Millisecond, 16, 16, 4 << 20},
		{150 * time.Millisecond, 3 * time.Second, 16, 16, 12 << 20},
		{600 * time.Millisecond, 3 * time.Second, 16, 16, 16 << 20},
	} {
		if w := WindowFor(c.rtt); w != c.window {
			t.Errorf("WindowFor(%v) = %v, want %v", c.rtt, w, c.window)
		}
		if s, one := StartFor(c.rtt, false), StartFor(c.rtt, true); s != c.start || one != c.oneFile {
			t.Errorf("StartFor(%v) = %d, %d for one file; want %d, %d", c.rtt, s, one, c.start, c.oneFile)
		}
		if s := SubWriteFor(c.rtt); s != c.sub {
			t.Errorf("SubWriteFor(%v) = %d, want %d", c.rtt, s, c.sub)
		}
	}
}

// TestTunedFileStartsAtTunersLevel: a large file tuned live starts with as
// many partial transfers as the tuner starts at, not with Options.CC: the
// tuner moves the level only after its first judged window, and a slow
// path's first windows are seconds long.
func TestTunedFileStartsAtTunersLevel(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	want := writeRandom(t, filepath.Join(srcDir, "big"), 8<<20)
	var most atomic.Int64
	count := mostAtOnce(&most, http.MethodGet)
	src := sourceAgent(t, srcDir, "/big", &emul.Config{RTTMs: 20, ConnBps: 8e6}, count)
	o := opts(t)
	o.CC, o.ChunkMin, o.SubWrite = 2, 256<<10, 128<<10
	o.Tune = &LiveOptions{Start: 6, Window: time.Hour}
	if _, err := Run(context.Background(), []Endpoint{src}, localEP(t, filepath.Join(dstDir, "big")), o, nil); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dstDir, "big"), want)
	if m := most.Load(); m != 6 {
		t.Errorf("at most %d partial transfers at once, want the tuner's start, 6", m)
	}
}
