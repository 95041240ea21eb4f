package copyjob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// intruder makes a file of its own at the destination path of each file
// named in names (by base name), once, just before that file is renamed
// into place: after the copy's check of the destination (inPlace, or the
// dataset's listing) and before the rename that would replace it, as
// another user or program writing there meanwhile would.
type intruder struct {
	root  string // where the destination backend's paths are, on disk
	bytes []byte
	mu    sync.Mutex
	names map[string]bool // still to make
	made  []string        // base names made
}

func newIntruder(root string, names ...string) *intruder {
	in := &intruder{root: root, bytes: []byte("someone else's file\n"), names: map[string]bool{}}
	for _, n := range names {
		in.names[n] = true
	}
	return in
}

// before is called with a rename's target, before the rename.
func (in *intruder) before(t *testing.T, to string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	base := path.Base(to)
	if !in.names[base] {
		return
	}
	delete(in.names, base)
	if err := os.WriteFile(filepath.Join(in.root, filepath.FromSlash(to)), in.bytes, 0o644); err != nil {
		t.Errorf("making %s: %v", to, err)
	}
	in.made = append(in.made, base)
}

// intrudedFile and intrudedAgent are destinations at which an intruder
// makes its files just before the renames that land the copy's.
type intrudedFile struct {
	*file.Backend
	t  *testing.T
	in *intruder
}

func (b intrudedFile) Rename(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.Rename(ctx, from, to)
}

func (b intrudedFile) RenameNoSync(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.RenameNoSync(ctx, from, to)
}

func (b intrudedFile) RenameNoReplace(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.RenameNoReplace(ctx, from, to)
}

func (b intrudedFile) RenameNoReplaceNoSync(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.RenameNoReplaceNoSync(ctx, from, to)
}

type intrudedAgent struct {
	*sluice.Backend
	t  *testing.T
	in *intruder
}

func (b intrudedAgent) Rename(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.Rename(ctx, from, to)
}

func (b intrudedAgent) RenameNoReplace(ctx context.Context, from, to string) error {
	b.in.before(b.t, to)
	return b.Backend.RenameNoReplace(ctx, from, to)
}

func (b intrudedAgent) Renames(ctx context.Context, pairs []sluice.RenamePair) ([]sluice.PullBatchResult, error) {
	for _, p := range pairs {
		b.in.before(b.t, p.To)
	}
	return b.Backend.Renames(ctx, pairs)
}

// TestFileAppearingBeforeRenameIsKept: a file that appears at a
// destination path after the copy looked there (Run's stat before each
// file, a dataset's listing of the destination up front) and before the
// copy's file is renamed into place is not replaced without Overwrite, on
// every way a file lands: Run's small files (the committer's renames,
// one by one at a local destination, in one request at an agent) and
// large ones (the engine), a dataset's batches (renamed here, or pulled
// and renamed by the destination agent), split and whole files and its
// engine. The file is given up, named, with the error of a file found
// there before the copy (ErrExists, "use --overwrite"); the others are
// copied; no temporary file of a small one is left; a later run with
// Overwrite replaces them. With Overwrite from the start, the copy's
// files replace the intruder's, as before.
func TestFileAppearingBeforeRenameIsKept(t *testing.T) {
	k := key(t)
	srcRoot := t.TempDir()
	sizes := map[string]int{"small": 1000, "split": 300_000, "big": 2<<20 + 10, "other": 800}
	src := map[string][]byte{}
	for name, n := range sizes {
		src[name] = writeRandom(t, filepath.Join(srcRoot, "tree", name), n)
	}
	urlA, bA, tokA := testAgent(t, srcRoot, k)
	for _, mode := range []string{"run local", "run agents", "dataset local", "dataset agents"} {
		for _, overwrite := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s overwrite=%v", mode, overwrite), func(t *testing.T) {
				dstRoot := t.TempDir()
				targets := []string{"small", "big"}
				if strings.HasPrefix(mode, "dataset") {
					targets = append(targets, "split")
				}
				in := newIntruder(dstRoot, targets...)
				var source, dst Endpoint
				if strings.HasSuffix(mode, "agents") {
					urlB, bB, _ := testAgent(t, dstRoot, k)
					source = Endpoint{Backend: bA, Path: "/tree", URL: urlA + "/tree", Token: tokA}
					dst = Endpoint{Backend: intrudedAgent{bB, t, in}, Path: "/copy", URL: urlB + "/copy", Puller: bB}
				} else {
					if mode == "dataset local" {
						// Batches from an agent, renamed here.
						source = Endpoint{Backend: bA, Path: "/tree", URL: urlA + "/tree", Token: tokA}
					} else {
						source = localEP(t, filepath.Join(srcRoot, "tree"))
					}
					b, err := file.New(dstRoot)
					if err != nil {
						t.Fatal(err)
					}
					dst = Endpoint{Backend: intrudedFile{b, t, in}, Path: "/copy", URL: "file://" + filepath.Join(dstRoot, "copy")}
				}
				o := opts(t)
				o.Recursive, o.Overwrite, o.PartMin = true, overwrite, 64<<10
				copyOnce := func(o Options) (Summary, error) {
					if strings.HasPrefix(mode, "run") {
						return Run(context.Background(), []Endpoint{source}, dst, o, nil)
					}
					d, err := PrepareDataset(context.Background(), []Endpoint{source}, dst, o)
					if err != nil {
						t.Fatal(err)
					}
					return RunDataset(context.Background(), d, Fixed(d.Files(), 4, 2, 2), nil)
				}
				sum, err := copyOnce(o)
				slices.Sort(in.made)
				if want := slices.Sorted(slices.Values(targets)); !slices.Equal(in.made, want) {
					t.Fatalf("the intruder made %v before renames, want %v: the test no longer reaches each way a file lands", in.made, want)
				}
				out := filepath.Join(dstRoot, "copy")
				if overwrite {
					if err != nil {
						t.Fatalf("with Overwrite: %v", err)
					}
					sameTree(t, out, src)
					return
				}
				var fe *FilesError
				if !errors.As(err, &fe) || !errors.Is(err, ErrExists) || fe.Failed != len(targets) {
					t.Fatalf("got %v, want %d files given up with ErrExists", err, len(targets))
				}
				var refused []string
				for _, f := range sum.Failures {
					refused = append(refused, path.Base(f.Dst))
					if want := path.Join("/copy", path.Base(f.Dst)) + " exists and differs; use --overwrite to replace it"; !strings.Contains(f.Error, want) {
						t.Errorf("%s: %q does not say %q", f.Dst, f.Error, want)
					}
				}
				slices.Sort(refused)
				if !slices.Equal(refused, in.made) {
					t.Errorf("given up %v, want %v", refused, in.made)
				}
				if sum.Files != len(src)-len(targets) {
					t.Errorf("%d files copied, want %d", sum.Files, len(src)-len(targets))
				}
				for name, data := range src {
					if slices.Contains(targets, name) {
						sameFile(t, filepath.Join(out, name), in.bytes)
					} else {
						sameFile(t, filepath.Join(out, name), data)
					}
				}
				for _, name := range []string{"small", "split"} {
					if _, err := os.Stat(filepath.Join(out, "."+name+".sluice-part")); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the temporary file of %s: %v", name, err)
					}
				}

				// Asked, a rerun replaces them (the large file's
				// verified temporary file was kept for it).
				o.Overwrite = true
				if _, err := copyOnce(o); err != nil {
					t.Fatalf("rerun with Overwrite: %v", err)
				}
				sameTree(t, out, src)
			})
		}
	}
}

// TestRunMultiFileAppearingBeforeRename: a multi-source copy (--sources)
// onto a path free when it starts, where a file appears before the final
// rename, keeps that file without Overwrite and fails naming it, with
// the error of a file found there before the copy; with Overwrite the
// copy replaces it.
func TestRunMultiFileAppearingBeforeRename(t *testing.T) {
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}}
	for _, overwrite := range []bool{false, true} {
		t.Run(fmt.Sprintf("overwrite=%v", overwrite), func(t *testing.T) {
			srcs, dstDir, data, _ := twoReplicas(t, 3<<20)
			in := newIntruder("/", "f")
			b, err := file.New("/")
			if err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dstDir, "f")
			dst := Endpoint{Backend: intrudedFile{b, t, in}, Path: target, URL: "file://" + target}
			_, err = RunMulti(context.Background(), srcs, dst, MultiOptions{Split: "tcs", History: hist, ProbeTime: 1,
				JournalDir: t.TempDir(), CheckReplicas: true, Overwrite: overwrite})
			if len(in.made) != 1 {
				t.Fatal("the intruder made no file: the copy renamed nothing into place")
			}
			if overwrite {
				if err != nil {
					t.Fatal(err)
				}
				sameFile(t, target, data)
				return
			}
			if want := target + " exists and differs; use --overwrite to replace it"; !errors.Is(err, ErrExists) || !strings.Contains(fmt.Sprint(err), want) {
				t.Fatalf("got %v, want ErrExists saying %q", err, want)
			}
			sameFile(t, target, in.bytes)
		})
	}
}
