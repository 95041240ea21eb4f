package copyjob

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/dataset"
)

// TestSync: with a sync level, a copy keeps each file already at its
// destination that matches the source by the level's test (skipped, its
// bytes untouched) and copies the others over what is there; the same
// copy again moves nothing. Through Run (cp) and through the dataset
// planner (cp -r --auto), whose plan leaves out what is kept.
func TestSync(t *testing.T) {
	// Each destination file: its bytes and modification time against the
	// source's; what each level does with it.
	type want struct{ exists, size, mtime, checksum bool } // true: kept
	files := []struct {
		name string
		make func(src []byte) []byte // nil: nothing there
		age  time.Duration           // destination's mtime - source's
		want want
	}{
		{"missing", nil, 0, want{}},
		{"same", bytes.Clone, time.Hour, want{true, true, true, true}},
		{"older", bytes.Clone, -time.Hour, want{true, true, false, true}},
		{"samesize", func(b []byte) []byte { return bytes.Repeat([]byte{'z'}, len(b)) }, time.Hour, want{true, true, true, false}},
		{"bigger", func(b []byte) []byte { return append(bytes.Clone(b), 'x') }, time.Hour, want{true, false, false, false}},
	}
	for _, level := range []string{"exists", "size", "mtime", "checksum"} {
		for _, planner := range []bool{false, true} {
			name := level + "/run"
			if planner {
				name = level + "/dataset"
			}
			t.Run(name, func(t *testing.T) {
				srcDir, dstDir := t.TempDir(), t.TempDir()
				at := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
				srcData := map[string][]byte{}
				before := map[string][]byte{}
				for i, f := range files {
					src := filepath.Join(srcDir, "tree", f.name)
					srcData[f.name] = writeRandom(t, src, 1000*(i+1))
					os.Chtimes(src, at, at)
					if f.make == nil {
						continue
					}
					dst := filepath.Join(dstDir, "tree", f.name)
					os.MkdirAll(filepath.Dir(dst), 0o755)
					before[f.name] = f.make(srcData[f.name])
					if err := os.WriteFile(dst, before[f.name], 0o644); err != nil {
						t.Fatal(err)
					}
					os.Chtimes(dst, at.Add(f.age), at.Add(f.age))
				}
				o := opts(t)
				o.Recursive, o.Sync, o.Checksum = true, level, "none" // the checksum level compares them anyway
				src, dst := localEP(t, filepath.Join(srcDir, "tree")), localEP(t, dstDir+"/")
				first := true
				run := func() Summary {
					t.Helper()
					if !planner {
						sum, err := Run(context.Background(), []Endpoint{src}, dst, o, nil)
						if err != nil {
							t.Fatal(err)
						}
						return sum
					}
					d := prepare(t, src, dst, o)
					var planned []string
					for _, f := range d.Files() {
						planned = append(planned, path.Base(f.Src))
					}
					var wantPlanned []string
					for _, f := range files {
						if kept, _ := wantOf(f.want, level); !kept {
							wantPlanned = append(wantPlanned, f.name)
						}
					}
					slices.Sort(planned)
					slices.Sort(wantPlanned)
					if first && !slices.Equal(planned, wantPlanned) {
						t.Errorf("planned %v, want %v", planned, wantPlanned)
					}
					if _, err := dataset.Run(context.Background(), Fixed(d.Files(), 4, 1, 2), d); err != nil {
						t.Fatal(err)
					}
					return d.Summary()
				}
				sum := run()
				first = false
				kept := 0
				for _, f := range files {
					got, _ := os.ReadFile(filepath.Join(dstDir, "tree", f.name))
					if k, _ := wantOf(f.want, level); k {
						kept++
						if !bytes.Equal(got, before[f.name]) {
							t.Errorf("%s: replaced, want it kept", f.name)
						}
					} else if !bytes.Equal(got, srcData[f.name]) {
						t.Errorf("%s: not the source's bytes, want it copied", f.name)
					}
				}
				if sum.Skipped != kept || sum.Files != len(files) {
					t.Errorf("summary: %d files, %d skipped; want %d, %d", sum.Files, sum.Skipped, len(files), kept)
				}
				if again := run(); again.Skipped != len(files) || again.SkippedBytes != again.Bytes {
					t.Errorf("the same copy again: %d of %d skipped, %d of %d bytes; want it to move nothing", again.Skipped, again.Files, again.SkippedBytes, again.Bytes)
				}
			})
		}
	}
	o := opts(t)
	o.Sync = "sometimes"
	if _, err := Run(context.Background(), nil, Endpoint{}, o, nil); err == nil {
		t.Error("an unknown sync level was taken")
	}
}

// wantOf is w's verdict for level.
func wantOf(w struct{ exists, size, mtime, checksum bool }, level string) (bool, bool) {
	switch level {
	case "exists":
		return w.exists, true
	case "size":
		return w.size, true
	case "mtime":
		return w.mtime, true
	case "checksum":
		return w.checksum, true
	}
	return false, false
}

// TestPreserveModTime: with PreserveModTime every file lands with its
// source's modification time, whichever way it goes: whole small files
// and the engine's large ones, to a local directory and to an agent
// (one rename request for a group), through Run and the dataset planner
// (an agent's pull batches); without it, with the time of its copy.
func TestPreserveModTime(t *testing.T) {
	at := time.Date(2018, 5, 4, 3, 2, 1, 0, time.UTC)
	k := key(t)
	for _, tc := range []struct {
		name     string
		agentSrc bool
		agentDst bool
		planner  bool
		preserve bool
	}{
		{"local to local", false, false, false, true},
		{"local to agent", false, true, false, true},
		{"agent to agent, planner", true, true, true, true},
		{"local to local, planner", false, false, true, true},
		{"not asked", false, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), t.TempDir()
			sizes := map[string]int{"small1": 1000, "small2": 5000, "big": 3 << 20}
			for n, size := range sizes {
				p := filepath.Join(srcDir, "tree", n)
				writeRandom(t, p, size)
				os.Chtimes(p, at, at)
			}
			src := localEP(t, filepath.Join(srcDir, "tree"))
			if tc.agentSrc {
				u, b, tok := testAgent(t, srcDir, k)
				src = Endpoint{Backend: b, Path: "/tree", URL: u + "/tree", Token: tok}
			}
			dst := localEP(t, dstDir+"/")
			if tc.agentDst {
				u, b, _ := testAgent(t, dstDir, k)
				dst = Endpoint{Backend: b, Path: "/", URL: u + "/", Puller: b}
			}
			o := opts(t)
			o.Recursive, o.PreserveModTime = true, tc.preserve
			if tc.planner {
				d := prepare(t, src, dst, o)
				if _, err := dataset.Run(context.Background(), Fixed(d.Files(), 4, 1, 2), d); err != nil {
					t.Fatal(err)
				}
			} else if _, err := Run(context.Background(), []Endpoint{src}, dst, o, nil); err != nil {
				t.Fatal(err)
			}
			for n := range sizes {
				fi, err := os.Stat(filepath.Join(dstDir, "tree", n))
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.ModTime().Equal(at); got != tc.preserve {
					t.Errorf("%s: modified at %s, the source at %s", n, fi.ModTime(), at)
				}
			}
		})
	}
}
