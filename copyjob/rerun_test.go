package copyjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
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

func (b stopAtLandingFile) RenameNoReplace(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.RenameNoReplace(ctx, from, to)
}

func (b stopAtLandingFile) RenameNoReplaceNoSync(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.RenameNoReplaceNoSync(ctx, from, to)
}

type stopAtLandingAgent struct {
	*sluice.Backend
	stop func()
}

func (b stopAtLandingAgent) Rename(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.Rename(ctx, from, to)
}

func (b stopAtLandingAgent) RenameNoReplace(ctx context.Context, from, to string) error {
	defer b.stop()
	return b.Backend.RenameNoReplace(ctx, from, to)
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
// files not there: those changed at the source are left as they are and
// named (ErrExists) until a run with Overwrite replaces them, alone. DST is the tree's new name (its contents go there);
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

	// Between the runs: files changed (one to another size, one small
	// and one large to the same size), one added, one removed.
	changed := map[string]int{"f00": 3000, "f01": 6000, "f02": 2<<20 + 1000}
	for name, size := range changed {
		writeRandom(t, filepath.Join(srcRoot, "tree", name), size)
	}
	writeRandom(t, filepath.Join(srcRoot, "tree", "sub", "new"), 900)
	os.Remove(filepath.Join(srcRoot, "tree", "f04"))
	want := filesBelow(t, filepath.Join(srcRoot, "tree"))
	had := filesBelow(t, target)
	moves, conflicts := 0, map[string]bool{}
	for rel, data := range want {
		if old, ok := had[rel]; !ok || !bytes.Equal(old, data) {
			moves++
			if ok {
				conflicts[rel] = true
			}
		}
	}
	if !interrupted && len(conflicts) != len(changed) {
		t.Fatalf("after a complete first run, %d files differ, want the %d changed", len(conflicts), len(changed))
	}

	// The rerun copies what is not there and leaves the files that
	// differ as they are, naming them.
	sum, err := copyOnce(context.Background(), dst)
	if (len(conflicts) > 0) != (err != nil) || err != nil && !errors.Is(err, ErrExists) {
		t.Fatalf("rerun with %d files that differ at the destination: %v", len(conflicts), err)
	}
	if got := sum.Files - sum.Skipped; got != moves-len(conflicts) || sum.Skipped != len(want)-moves {
		t.Errorf("the rerun moved %d files and skipped %d; want %d moved (those not there) and %d skipped", got, sum.Skipped, moves-len(conflicts), len(want)-moves)
	}
	if len(sum.Failures) != len(conflicts) {
		t.Errorf("the rerun gave up %v, want %v", sum.Failures, conflicts)
	}
	below := sourceBase(dst) + strings.TrimSuffix(dst.Path, "/") + "/" // what names a file of the tree
	if slash {
		below += "tree/"
	}
	for _, f := range sum.Failures {
		if rel := strings.TrimPrefix(f.Dst, below); !conflicts[rel] || !strings.Contains(f.Error, "use --overwrite") {
			t.Errorf("given up: %+v", f)
		}
	}
	for rel := range conflicts {
		if now, _ := os.ReadFile(filepath.Join(target, rel)); !bytes.Equal(now, had[rel]) {
			t.Errorf("%s was replaced without --overwrite", rel)
		}
	}

	// With --overwrite, those files alone move.
	o.Overwrite = true
	if sum, err = copyOnce(context.Background(), dst); err != nil {
		t.Fatalf("rerun with Overwrite: %v", err)
	}
	if got := sum.Files - sum.Skipped; got != len(conflicts) || sum.Skipped != len(want)-len(conflicts) {
		t.Errorf("the rerun with Overwrite moved %d files and skipped %d; want %d and %d", got, sum.Skipped, len(conflicts), len(want)-len(conflicts))
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

// unlisted is a destination whose listings fail: a Dataset then checks
// each file's path as it comes (Dataset.there), not from the listing.
type unlisted struct{ backend.Backend }

func (unlisted) List(context.Context, string, bool) ([]backend.FileInfo, error) {
	return nil, errors.New("list: not answering")
}

// TestNothingReplacedUnasked: a destination file that differs from its
// source is not replaced, on every way a file is put in place (Run's
// small files and its engine, a Dataset's batches, split files and
// engine, with the destination listed up front or each path checked as
// its file comes); the file is given up with ErrExists, naming it, and
// the others are copied. A file in place is skipped; with checksum none,
// the same size counts as in place. Overwrite replaces them, but not a
// directory in the way of a file.
func TestNothingReplacedUnasked(t *testing.T) {
	srcRoot := t.TempDir()
	sizes := map[string]int{"small": 1000, "small2": 1000, "mid": 300_000, "big": 2<<20 + 10, "dir": 500, "same": 700, "new": 800}
	src := map[string][]byte{}
	for name, n := range sizes {
		src[name] = writeRandom(t, filepath.Join(srcRoot, "tree", name), n)
	}
	source := sourceAgent(t, srcRoot, "/tree", nil, nil) // batches
	for _, tc := range []struct {
		checksum  string
		overwrite bool
		refused   []string
		skipped   int
	}{
		{"", false, []string{"big", "dir", "mid", "small", "small2"}, 1},
		{"none", false, []string{"dir", "small2"}, 4}, // same size: in place
		{"", true, []string{"dir"}, 1},
	} {
		for _, mode := range []string{"run", "dataset", "dataset unlisted"} {
			t.Run(fmt.Sprintf("%s checksum=%q overwrite=%v", mode, tc.checksum, tc.overwrite), func(t *testing.T) {
				out := t.TempDir()
				there := map[string][]byte{}
				for name, data := range src {
					p := filepath.Join(out, name)
					switch name {
					case "new":
						continue
					case "dir":
						writeRandom(t, filepath.Join(p, "inside"), 10)
						continue
					case "same":
						there[name] = data
					case "small2":
						there[name] = bytes.Repeat([]byte{'y'}, len(data)+1)
					default:
						there[name] = bytes.Repeat([]byte{'x'}, len(data))
					}
					if err := os.WriteFile(p, there[name], 0o644); err != nil {
						t.Fatal(err)
					}
				}
				o := opts(t)
				o.Recursive, o.Checksum, o.Overwrite, o.PartMin = true, tc.checksum, tc.overwrite, 64<<10
				dst := localEP(t, out)
				if mode == "dataset unlisted" {
					dst.Backend = unlisted{dst.Backend}
				}
				var sum Summary
				var err error
				if mode == "run" {
					sum, err = Run(context.Background(), []Endpoint{source}, dst, o, nil)
				} else {
					d, perr := PrepareDataset(context.Background(), []Endpoint{source}, dst, o)
					if perr != nil {
						t.Fatal(perr)
					}
					sum, err = RunDataset(context.Background(), d, Fixed(d.Files(), 4, 2, 2), nil)
				}
				var fe *FilesError
				if !errors.As(err, &fe) || !errors.Is(err, ErrExists) || fe.Failed != len(tc.refused) {
					t.Fatalf("got %v, want %d files given up with ErrExists", err, len(tc.refused))
				}
				var refused []string
				for _, f := range sum.Failures {
					refused = append(refused, filepath.Base(f.Dst))
					if want := "use --overwrite"; filepath.Base(f.Dst) != "dir" && !strings.Contains(f.Error, want) {
						t.Errorf("%s: %q does not say %q", f.Dst, f.Error, want)
					}
				}
				slices.Sort(refused)
				if !slices.Equal(refused, tc.refused) {
					t.Errorf("given up %v, want %v", refused, tc.refused)
				}
				if sum.Skipped != tc.skipped || sum.Files != len(src)-len(tc.refused) {
					t.Errorf("%d files, %d skipped; want %d and %d", sum.Files, sum.Skipped, len(src)-len(tc.refused), tc.skipped)
				}
				for name, data := range src {
					switch {
					case name == "dir":
						if fi, err := os.Stat(filepath.Join(out, name)); err != nil || !fi.IsDir() {
							t.Errorf("the directory in the way: %v", err)
						}
					case slices.Contains(tc.refused, name) || tc.checksum == "none" && len(there[name]) == len(data):
						sameFile(t, filepath.Join(out, name), there[name])
					default:
						sameFile(t, filepath.Join(out, name), data)
					}
				}
			})
		}
	}
}
