package copyjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// stopAtLandingFile and stopAtLandingAgent are destinations that
// interrupt the copy (as Ctrl-C does) once a file has been put in place.
type stopAtLandingFile struct {
	*file.Backend
	stop func()
}

func (b stopAtLandingFile) Rename(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.Rename(ctx, from, to)
}

func (b stopAtLandingFile) RenameNoSync(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.RenameNoSync(ctx, from, to)
}

type stopAtLandingAgent struct {
	*sluice.Backend
	stop func()
}

func (b stopAtLandingAgent) Rename(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.Rename(ctx, from, to)
}

func (b stopAtLandingAgent) Renames(ctx context.Context, pairs []sluice.RenamePair) ([]sluice.PullBatchResult, error) {
	defer b.stop()
	return b.Backend.Renames(ctx, pairs)
}

// filesBelow returns the regular files below dir by path relative to it.
func filesBelow(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return nil
	})
	return out
}

// TestRerunIsIdempotent: the same `cp -r tree DST` run again, after a
// first run that completed or was interrupted, and with files changed,
// added and removed at the source in between, finds the first run's
// files where it put them: the tree is never nested a level down (as cp
// -r puts it in DST/tree once DST exists), and the rerun moves only the
// files not in place. DST is the tree's new name (its contents go there);
// DST/ receives it under its own name, DST/tree. Local to local and agent
// to agent (third-party), through Run and through a dataset.
func TestRerunIsIdempotent(t *testing.T) {
	k := key(t)
	for _, ends := range []string{"local", "agents"} {
		for _, ds := range []bool{false, true} {
			for _, slash := range []bool{false, true} {
				for _, interrupted := range []bool{false, true} {
					name := fmt.Sprintf("%s dataset=%v slash=%v interrupted=%v", ends, ds, slash, interrupted)
					t.Run(name, func(t *testing.T) { rerunOnce(t, k, ends == "agents", ds, slash, interrupted) })
				}
			}
		}
	}
}

func rerunOnce(t *testing.T, k []byte, agents, ds, slash, interrupted bool) {
	srcRoot, dstRoot := t.TempDir(), t.TempDir()
	tree(t, srcRoot, 3000, 5000, 2<<20+1000, 0, 700)
	if err := os.MkdirAll(filepath.Join(srcRoot, "tree", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeRandom(t, filepath.Join(srcRoot, "tree", "sub", "g"), 1200)
	dstPath := "/copy"
	if slash {
		dstPath += "/"
	}
	target := filepath.Join(dstRoot, "copy") // where the tree's contents go
	if slash {
		target = filepath.Join(target, "tree")
	}
	var src, dst Endpoint
	if agents {
		urlA, bA, tokA := testAgent(t, srcRoot, k)
		urlB, bB, _ := testAgent(t, dstRoot, k)
		src = Endpoint{Backend: bA, Path: "/tree", URL: urlA + "/tree", Token: tokA}
		dst = Endpoint{Backend: bB, Path: dstPath, URL: urlB + dstPath, Puller: bB}
	} else {
		src = localEP(t, filepath.Join(srcRoot, "tree"))
		dst = localEP(t, filepath.Join(dstRoot, "copy"))
		if slash {
			dst.Path += "/"
			dst.URL += "/"
		}
	}
	o := opts(t)
	o.Recursive = true
	copyOnce := func(ctx context.Context, dst Endpoint) (Summary, error) {
		if !ds {
			return Run(ctx, []Endpoint{src}, dst, o, nil)
		}
		d, err := PrepareDataset(ctx, []Endpoint{src}, dst, o)
		if err != nil {
			return Summary{}, err
		}
		return RunDataset(ctx, d, Fixed(d.Files(), 2, 1, 2), nil)
	}

	first := dst
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if interrupted {
		stop := sync.OnceFunc(cancel)
		if agents {
			first.Backend = stopAtLandingAgent{dst.Backend.(*sluice.Backend), stop}
		} else {
			first.Backend = stopAtLandingFile{dst.Backend.(*file.Backend), stop}
		}
	}
	_, err := copyOnce(ctx, first)
	if interrupted != (err != nil) || err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}

	// Between the runs: one file changed, one added, one removed.
	writeRandom(t, filepath.Join(srcRoot, "tree", "f01"), 6000)
	writeRandom(t, filepath.Join(srcRoot, "tree", "sub", "new"), 900)
	os.Remove(filepath.Join(srcRoot, "tree", "f04"))
	want := filesBelow(t, filepath.Join(srcRoot, "tree"))
	had := filesBelow(t, target)
	moves := 0
	for rel, data := range want {
		if old, ok := had[rel]; !ok || !bytes.Equal(old, data) {
			moves++
		}
	}

	sum, err := copyOnce(context.Background(), dst)
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if got := sum.Files - sum.Skipped; got != moves || sum.Skipped != len(want)-moves {
		t.Errorf("the rerun moved %d files and skipped %d; want %d moved (those not in place) and %d skipped", got, sum.Skipped, moves, len(want)-moves)
	}
	got := filesBelow(t, target)
	for rel := range got {
		if strings.HasPrefix(rel, "tree/") {
			t.Fatalf("the rerun nested the tree: %s", filepath.Join(target, rel))
		}
		if strings.Contains(rel, ".sluice-part") {
			t.Errorf("left behind: %s", rel)
		}
	}
	for rel, data := range want {
		if !bytes.Equal(got[rel], data) {
			t.Errorf("%s: %d bytes, want the source's %d", rel, len(got[rel]), len(data))
		}
	}
	if fi, err := os.Stat(filepath.Join(target, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("the empty directory: %v", err)
	}
	if slash {
		if ents, _ := os.ReadDir(filepath.Join(dstRoot, "copy")); len(ents) != 1 {
			t.Errorf("copy/ holds %d entries, want the tree alone", len(ents))
		}
	}
}

// TestTreeTarget: where a copy puts its sources, whether or not the
// destination exists (the same either way, so that a rerun lands where
// the first run did): a directory's contents go to DST, made if missing
// or merged into an existing one; DST/ and several sources go below DST
// under their own names; a file goes onto DST, or below it when DST is a
// directory, as cp puts it.
func TestTreeTarget(t *testing.T) {
	srcDir := t.TempDir()
	writeRandom(t, filepath.Join(srcDir, "tree/a"), 100)
	writeRandom(t, filepath.Join(srcDir, "f"), 200)
	for _, tc := range []struct {
		name   string
		srcs   []string
		dst    string
		exists bool   // dst is an existing directory (holding "old")
		want   string // a file the copy makes, below the test's directory
	}{
		{"tree to a new name", []string{"tree"}, "d", false, "d/a"},
		{"tree to an existing directory", []string{"tree"}, "d", true, "d/a"},
		{"tree into a new d/", []string{"tree"}, "d/", false, "d/tree/a"},
		{"tree into an existing d/", []string{"tree"}, "d/", true, "d/tree/a"},
		{"file to a new name", []string{"f"}, "d", false, "d"},
		{"file into an existing directory", []string{"f"}, "d", true, "d/f"},
		{"two sources", []string{"tree", "f"}, "d", false, "d/tree/a"},
	} {
		for _, ds := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s dataset=%v", tc.name, ds), func(t *testing.T) {
				out := t.TempDir()
				if tc.exists {
					writeRandom(t, filepath.Join(out, "d", "old"), 10)
				}
				var srcs []Endpoint
				for _, s := range tc.srcs {
					srcs = append(srcs, localEP(t, filepath.Join(srcDir, s)))
				}
				o := opts(t)
				o.Recursive = true
				dst := localEP(t, filepath.Join(out, tc.dst))
				if strings.HasSuffix(tc.dst, "/") {
					dst.Path += "/"
				}
				var err error
				if ds {
					var d *Dataset
					if d, err = PrepareDataset(context.Background(), srcs, dst, o); err == nil {
						_, err = RunDataset(context.Background(), d, Fixed(d.Files(), 2, 1, 2), nil)
					}
				} else {
					_, err = Run(context.Background(), srcs, dst, o, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(filepath.Join(out, tc.want)); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("want the file %s: %v", tc.want, err)
				}
				if tc.exists {
					if _, err := os.Stat(filepath.Join(out, "d", "old")); err != nil {
						t.Errorf("the destination's own file: %v", err)
					}
				}
			})
		}
	}
}
