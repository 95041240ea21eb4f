package copyjob

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
)

// testAgent serves dir as an agent on a real loopback socket and returns
// its sluice:// base URL and a backend with an rw token for it.
func testAgent(t *testing.T, dir string, key []byte) (string, *sluice.Backend, string) {
	t.Helper()
	a, err := agent.New(agent.Config{Name: "t", Root: dir, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	tok, err := auth.Mint(key, auth.Claims{Sub: "test", Scope: auth.ScopeRW, Prefix: "/", Aud: "*", Exp: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sluice.New(srv.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return "sluice://" + strings.TrimPrefix(srv.URL, "http://"), b, tok
}

func localEP(t *testing.T, p string) Endpoint {
	b, err := file.New("/")
	if err != nil {
		t.Fatal(err)
	}
	return Endpoint{Backend: b, Path: p, URL: "file://" + p}
}

func writeRandom(t *testing.T, p string, n int) []byte {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func key(t *testing.T) []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

func opts(t *testing.T) Options {
	return Options{CC: 4, Files: 4, JournalDir: t.TempDir(), ChunkMin: 1 << 20, SubWrite: 256 << 10}
}

func sameFile(t *testing.T, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes differ from the source's %d", p, len(got), len(want))
	}
}

func TestCopyPaths(t *testing.T) {
	k := key(t)
	srcDir := t.TempDir()
	big := writeRandom(t, filepath.Join(srcDir, "tree/big.bin"), 5<<20+123)
	small := writeRandom(t, filepath.Join(srcDir, "tree/sub/small.txt"), 1000)
	empty := writeRandom(t, filepath.Join(srcDir, "tree/empty"), 0)
	dirA, dirB := t.TempDir(), t.TempDir()
	urlA, bA, tokA := testAgent(t, dirA, k)
	urlB, bB, _ := testAgent(t, dirB, k)
	ctx := context.Background()

	// Local file to an agent directory (trailing slash: into it).
	if _, err := Run(ctx, []Endpoint{localEP(t, filepath.Join(srcDir, "tree/big.bin"))},
		Endpoint{Backend: bA, Path: "/in/", URL: urlA + "/in/", Puller: bA}, opts(t), nil); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dirA, "in/big.bin"), big)

	// A directory needs -r.
	o := opts(t)
	if _, err := Run(ctx, []Endpoint{localEP(t, filepath.Join(srcDir, "tree"))}, Endpoint{Backend: bA, Path: "/t", URL: urlA + "/t"}, o, nil); err == nil || !strings.Contains(err.Error(), "-r") {
		t.Fatalf("directory without -r: %v", err)
	}
	o.Recursive = true
	sum, err := Run(ctx, []Endpoint{localEP(t, filepath.Join(srcDir, "tree"))}, Endpoint{Backend: bA, Path: "/t", URL: urlA + "/t"}, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 3 || sum.Bytes != int64(len(big)+len(small)) {
		t.Errorf("summary %+v", sum)
	}
	sameFile(t, filepath.Join(dirA, "t/sub/small.txt"), small)
	sameFile(t, filepath.Join(dirA, "t/empty"), empty)

	// Agent to agent: third-party (B pulls from A), into a directory
	// (arch/), so the tree keeps its name.
	os.MkdirAll(filepath.Join(dirB, "arch"), 0o755)
	sum, err = Run(ctx, []Endpoint{{Backend: bA, Path: "/t", URL: urlA + "/t", Token: tokA}},
		Endpoint{Backend: bB, Path: "/arch/", URL: urlB + "/arch/", Puller: bB}, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dirB, "arch/t/big.bin"), big)
	sameFile(t, filepath.Join(dirB, "arch/t/sub/small.txt"), small)

	// Run again: everything is there already and is skipped, not re-sent.
	sum, err = Run(ctx, []Endpoint{{Backend: bA, Path: "/t", URL: urlA + "/t", Token: tokA}},
		Endpoint{Backend: bB, Path: "/arch/", URL: urlB + "/arch/", Puller: bB}, o, nil)
	if err != nil || sum.Skipped != 3 {
		t.Errorf("second run: %+v, %v; want 3 skipped", sum, err)
	}
	// No temporary names or journals left behind.
	filepath.Walk(dirB, func(p string, fi os.FileInfo, err error) error {
		if strings.Contains(p, ".sluice-part") {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// TestSeveralSources: several local files into one directory, as cp a b dir/.
func TestSeveralSources(t *testing.T) {
	srcDir, dstDir := t.TempDir(), t.TempDir()
	a := writeRandom(t, filepath.Join(srcDir, "a"), 3<<20)
	b := writeRandom(t, filepath.Join(srcDir, "sub/b"), 100)
	_, err := Run(context.Background(), []Endpoint{localEP(t, filepath.Join(srcDir, "a")), localEP(t, filepath.Join(srcDir, "sub/b"))},
		localEP(t, dstDir+"/out/"), opts(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dstDir, "out/a"), a)
	sameFile(t, filepath.Join(dstDir, "out/b"), b)
}

func TestCopyErrors(t *testing.T) {
	k := key(t)
	srcDir := t.TempDir()
	writeRandom(t, filepath.Join(srcDir, "f"), 3<<20)
	dirA := t.TempDir()
	urlA, bA, _ := testAgent(t, dirA, k)
	ctx := context.Background()
	cases := []struct {
		name string
		src  Endpoint
		dst  Endpoint
		want error
	}{
		{"missing source", localEP(t, filepath.Join(srcDir, "nope")), Endpoint{Backend: bA, Path: "/x", URL: urlA + "/x"}, backend.ErrNotFound},
		{"escaping destination", localEP(t, filepath.Join(srcDir, "f")), Endpoint{Backend: bA, Path: "/../x", URL: urlA + "/../x"}, backend.ErrPermission},
	}
	for _, c := range cases {
		_, err := Run(ctx, []Endpoint{c.src}, c.dst, opts(t), nil)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A read-only token cannot write: refused, nothing left behind.
	ro, _ := auth.Mint(k, auth.Claims{Sub: "ro", Scope: auth.ScopeRead, Prefix: "/", Aud: "*", Exp: time.Now().Add(time.Hour).Unix()})
	srv := strings.Replace(urlA, "sluice://", "http://", 1)
	bRO, _ := sluice.New(srv, ro, nil)
	_, err := Run(ctx, []Endpoint{localEP(t, filepath.Join(srcDir, "f"))}, Endpoint{Backend: bRO, Path: "/ro/f", URL: urlA + "/ro/f"}, opts(t), nil)
	if !errors.Is(err, backend.ErrPermission) {
		t.Errorf("read-only token: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirA, "ro/f")); err == nil {
		t.Error("a file appeared under a read-only token")
	}
	// An unreachable agent fails (after retries), clearly.
	dead, _ := sluice.New("http://127.0.0.1:1", "x", nil)
	o := opts(t)
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = Run(ctx2, []Endpoint{localEP(t, filepath.Join(srcDir, "f"))}, Endpoint{Backend: dead, Path: "/f", URL: "sluice://127.0.0.1:1/f"}, o, nil)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable agent: %v", err)
	}
}

// TestEmptyDirectories: cp -r makes the source tree's empty directories
// too (files make their own parents), through Run and through a prepared
// dataset, to a local directory and to an agent; a source directory with
// no file at all is copied as an empty tree, not as nothing.
func TestEmptyDirectories(t *testing.T) {
	k := key(t)
	srcDir := t.TempDir()
	writeRandom(t, filepath.Join(srcDir, "tree/a/f"), 100)
	for _, d := range []string{"tree/empty", "tree/a/deep/er", "bare/x/y"} {
		if err := os.MkdirAll(filepath.Join(srcDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dirA := t.TempDir()
	urlA, bA, _ := testAgent(t, dirA, k)
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		dst     func(sub string) (Endpoint, string)
		dataset bool
	}{
		{"local", func(sub string) (Endpoint, string) {
			root := filepath.Join(t.TempDir(), sub)
			return localEP(t, root+"/"), root
		}, false},
		{"agent", func(sub string) (Endpoint, string) {
			return Endpoint{Backend: bA, Path: "/" + sub + "/", URL: urlA + "/" + sub + "/", Puller: bA}, filepath.Join(dirA, sub)
		}, false},
		{"agent dataset", func(sub string) (Endpoint, string) {
			return Endpoint{Backend: bA, Path: "/ds-" + sub + "/", URL: urlA + "/ds-" + sub + "/", Puller: bA}, filepath.Join(dirA, "ds-"+sub)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := opts(t)
			o.Recursive = true
			for _, tc := range []struct {
				src   string
				files int
				dirs  []string
			}{
				{"tree", 1, []string{"tree/a/f", "tree/empty/", "tree/a/deep/er/"}},
				{"bare", 0, []string{"bare/x/y/"}},
			} {
				dst, local := c.dst(tc.src)
				src := []Endpoint{localEP(t, filepath.Join(srcDir, tc.src))}
				var sum Summary
				if c.dataset {
					d, err := PrepareDataset(ctx, src, dst, o)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := d.Perform(ctx, d.Files(), 4, 1, 1); err != nil {
						t.Fatal(err)
					}
					sum = d.Summary()
				} else {
					var err error
					if sum, err = Run(ctx, src, dst, o, nil); err != nil {
						t.Fatal(err)
					}
				}
				if sum.Files != tc.files || sum.Dirs != len(tc.dirs)-tc.files {
					t.Errorf("%s: summary %d files, %d directories; want %d and %d", tc.src, sum.Files, sum.Dirs, tc.files, len(tc.dirs)-tc.files)
				}
				for _, p := range tc.dirs {
					fi, err := os.Stat(filepath.Join(local, p))
					if err != nil || fi.IsDir() != strings.HasSuffix(p, "/") {
						t.Errorf("%s: %s: %v", tc.src, p, err)
					}
				}
			}
		})
	}
}

// TestCopyOntoItself: as cp, a file is not copied onto itself and a
// directory not into itself (a rerun would copy its own copies); the
// source is left as it was. A sibling with a shared prefix is fine.
func TestCopyOntoItself(t *testing.T) {
	srcDir := t.TempDir()
	data := writeRandom(t, filepath.Join(srcDir, "tree/f"), 1000)
	ctx := context.Background()
	o := opts(t)
	o.Recursive = true
	tree := filepath.Join(srcDir, "tree")
	for _, tc := range []struct {
		name, src, dst, want string
	}{
		{"file onto itself", filepath.Join(tree, "f"), filepath.Join(tree, "f"), "same file"},
		{"file into its own directory", filepath.Join(tree, "f"), tree + "/", "same file"},
		{"directory onto itself", tree, tree, "into itself"},
		{"directory into a subdirectory", tree, filepath.Join(tree, "sub") + "/", "into itself"},
	} {
		_, err := Run(ctx, []Endpoint{localEP(t, tc.src)}, localEP(t, tc.dst), o, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	sameFile(t, filepath.Join(tree, "f"), data)
	if ents, _ := os.ReadDir(tree); len(ents) != 1 {
		t.Errorf("the source directory now holds %d entries", len(ents))
	}
	if _, err := Run(ctx, []Endpoint{localEP(t, tree)}, localEP(t, tree+"2"), o, nil); err != nil {
		t.Errorf("copy to a sibling sharing the name's prefix: %v", err)
	}
	sameFile(t, filepath.Join(tree+"2", "f"), data)
}

// TestSourcesOntoOnePath: sources whose files would land on one
// destination path (cp -r a/x b/x dst, or a file where another source's
// files go below) are refused before anything is written, by Run and by a
// prepared dataset; one would have overwritten the other, both counted as
// copied. The same source named twice is copied once.
func TestSourcesOntoOnePath(t *testing.T) {
	srcDir := t.TempDir()
	writeRandom(t, filepath.Join(srcDir, "a/x/f"), 100)
	writeRandom(t, filepath.Join(srcDir, "b/x/f"), 200)
	writeRandom(t, filepath.Join(srcDir, "b/x/g"), 300)
	writeRandom(t, filepath.Join(srcDir, "c/x"), 400)
	twice := writeRandom(t, filepath.Join(srcDir, "d/f"), 500)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		srcs []string
		want string // "" for a copy that succeeds
	}{
		{"same file name", []string{"a/x", "b/x"}, "would both be copied to"},
		{"file onto a directory", []string{"a/x", "c/x"}, "is to be copied below it"},
		{"directory onto a file", []string{"c/x", "b/x"}, "is to be copied below it"},
		{"the same file twice", []string{"d/f", "d/f"}, ""},
	} {
		for _, ds := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s dataset=%v", tc.name, ds), func(t *testing.T) {
				dstDir := t.TempDir()
				var srcs []Endpoint
				for _, s := range tc.srcs {
					srcs = append(srcs, localEP(t, filepath.Join(srcDir, s)))
				}
				o := opts(t)
				o.Recursive = true
				var err error
				if ds {
					var d *Dataset
					if d, err = PrepareDataset(ctx, srcs, localEP(t, dstDir+"/"), o); err == nil {
						_, err = RunDataset(ctx, d, Fixed(d.Files(), 4, 1, 4), nil)
					}
				} else {
					_, err = Run(ctx, srcs, localEP(t, dstDir+"/"), o, nil)
				}
				if tc.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					sameFile(t, filepath.Join(dstDir, "f"), twice)
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("copy: %v, want an error saying %q", err, tc.want)
				}
				if ents, _ := os.ReadDir(dstDir); len(ents) != 0 {
					t.Errorf("the destination holds %d entries after a refused copy", len(ents))
				}
			})
		}
	}
}

// failingReads is a backend whose reads fail (a source gone away).
type failingReads struct{ backend.Backend }

func (failingReads) OpenRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("read: connection reset")
}

// growingReads is a local source whose files grow as they are read (a
// writer appending to them during the copy).
type growingReads struct {
	backend.Backend
	dir string
}

func (g growingReads) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		f.Write(make([]byte, 500))
		f.Close()
	}
	return g.Backend.OpenRange(ctx, p, off, n)
}

// TestSmallFileGrows: a small file that grows while it is copied is not
// put in place cut to its listed size with a matching checksum (both of
// the bytes read); the copy fails, saying the source changed.
func TestSmallFileGrows(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	tree(t, src, 4000)
	se := localEP(t, src+"/tree")
	se.Backend = growingReads{se.Backend, src}
	o := opts(t)
	o.Recursive = true
	_, err := Run(context.Background(), []Endpoint{se}, localEP(t, out+"/"), o, nil)
	if !errors.Is(err, engine.ErrSourceChanged) {
		t.Fatalf("copy of a growing file: %v, want ErrSourceChanged", err)
	}
	if _, err := os.Stat(filepath.Join(out, "tree", "f00")); err == nil {
		t.Error("the truncated copy was put in place")
	}
}

// TestDestinationIsFile: a directory onto an existing file, or anything
// into "a directory" that is a file, is refused before anything is
// copied, saying the destination is a file; the file is left as it was.
// (Before, cp -r failed on its first file with "openat ...: not a
// directory".) A file onto a different file fails, saying so and leaving
// it as it was; with Overwrite it replaces it, as cp does.
func TestDestinationIsFile(t *testing.T) {
	srcDir := t.TempDir()
	a := writeRandom(t, filepath.Join(srcDir, "d/a"), 100)
	writeRandom(t, filepath.Join(srcDir, "d/sub/b"), 200)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		srcs      []string
		dst       string // below the test's directory, which has the file "f"
		overwrite bool
		want      string // "" for a copy that succeeds
	}{
		{"directory onto a file", []string{"d"}, "f", true, "which is a file"},
		{"file into a file/", []string{"d/a"}, "f/", true, "is a file, not a directory"},
		{"two files into a file", []string{"d/a", "d/sub/b"}, "f", true, "is a file, not a directory"},
		{"file onto a file", []string{"d/a"}, "f", false, "exists and differs; use --overwrite to replace it"},
		{"file onto a file with Overwrite", []string{"d/a"}, "f", true, ""},
	} {
		for _, ds := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s dataset=%v", tc.name, ds), func(t *testing.T) {
				dstDir := t.TempDir()
				old := writeRandom(t, filepath.Join(dstDir, "f"), 50)
				var srcs []Endpoint
				for _, s := range tc.srcs {
					srcs = append(srcs, localEP(t, filepath.Join(srcDir, s)))
				}
				o := opts(t)
				o.Recursive, o.Overwrite = true, tc.overwrite
				dst := localEP(t, dstDir+"/"+tc.dst)
				var err error
				if ds {
					var d *Dataset
					if d, err = PrepareDataset(ctx, srcs, dst, o); err == nil {
						_, err = RunDataset(ctx, d, Fixed(d.Files(), 4, 1, 4), nil)
					}
				} else {
					_, err = Run(ctx, srcs, dst, o, nil)
				}
				if tc.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					sameFile(t, filepath.Join(dstDir, "f"), a)
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error with %q", err, tc.want)
				}
				sameFile(t, filepath.Join(dstDir, "f"), old)
				if left, _ := filepath.Glob(filepath.Join(dstDir, ".*")); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			})
		}
	}
}

// TestRateNeverNegative: the progress rate is the bytes done over the
// last five seconds; when bytes in flight are given up (a retry, Ctrl-C)
// done falls, and the rate shows zero, not a negative figure.
func TestRateNeverNegative(t *testing.T) {
	t0 := time.Now()
	for _, tc := range []struct {
		name string
		done []int64
		want float64
	}{
		{"rising", []int64{0, 1e6, 2e6}, 1e6},
		{"given back", []int64{3e6, 2e6, 1e6}, 0},
		{"still", []int64{5, 5, 5}, 0},
	} {
		var m rateMeter
		var got float64
		for i, d := range tc.done {
			got = m.observe(t0.Add(time.Duration(i)*time.Second), d)
		}
		if math.Abs(got-tc.want) > 1e-9*max(1, tc.want) {
			t.Errorf("%s: rate %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestThirdPartyOddNames: agent to agent, files whose names hold ?, # or %
// are pulled under their own names, large ones (pulled in ranges by URL)
// and small ones alike.
func TestThirdPartyOddNames(t *testing.T) {
	k := key(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	urlA, bA, tokA := testAgent(t, dirA, k)
	urlB, bB, _ := testAgent(t, dirB, k)
	want := map[string][]byte{}
	for i, name := range []string{"big?x#y%z", "small?a#b%c"} {
		size := 3 << 20 // past 2*ChunkMin: pulled in ranges
		if i == 1 {
			size = 1000
		}
		want[name] = writeRandom(t, filepath.Join(dirA, "t", name), size)
	}
	o := opts(t)
	o.Recursive = true
	if _, err := Run(context.Background(), []Endpoint{{Backend: bA, Path: "/t", URL: urlA + "/t", Token: tokA}},
		Endpoint{Backend: bB, Path: "/", URL: urlB + "/", Puller: bB}, o, nil); err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		sameFile(t, filepath.Join(dirB, "t", name), b)
	}
}
