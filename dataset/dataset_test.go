package dataset

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"pgregory.net/rapid"
)

func srcs(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Src)
	}
	return out
}

func flatten(chunks []Chunk) []File {
	var out []File
	for _, c := range chunks {
		out = append(out, c.Files...)
	}
	return out
}

func TestSortBySize(t *testing.T) {
	files := []File{
		{Src: "c", Size: 5}, {Src: "b", Size: 5}, {Src: "a", Size: 9},
		{Src: "d", Size: 1}, {Src: "b", Dst: "2", Size: 5}, {Src: "b", Dst: "1", Size: 5},
	}
	SortBySize(files)
	want := []File{
		{Src: "d", Size: 1}, {Src: "b", Size: 5}, {Src: "b", Dst: "1", Size: 5},
		{Src: "b", Dst: "2", Size: 5}, {Src: "c", Size: 5}, {Src: "a", Size: 9},
	}
	if !slices.Equal(files, want) {
		t.Errorf("sorted %v, want %v", files, want)
	}
}

func TestChunkSizes(t *testing.T) {
	c := Chunk{Files: []File{{Size: 1}, {Size: 2}, {Size: 4}}}
	if c.Len() != 3 || c.Size() != 7 || c.MeanSize() != 2 {
		t.Errorf("len %d size %d mean %d", c.Len(), c.Size(), c.MeanSize())
	}
	if (Chunk{}).MeanSize() != 0 {
		t.Errorf("empty chunk has a mean")
	}
}

func TestDivide(t *testing.T) {
	files := same("f", 10, 1)
	for _, tc := range []struct {
		n    int
		lens []int
	}{
		{3, []int{4, 3, 3}}, {1, []int{10}}, {0, []int{10}}, {-2, []int{10}},
		{10, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}, {25, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{4, []int{3, 3, 2, 2}},
	} {
		chunks := Divide(files, tc.n)
		var lens []int
		for _, c := range chunks {
			lens = append(lens, c.Len())
			if c.PP != 1 || c.P != 1 || c.CC != 1 {
				t.Errorf("Divide(%d): settings %v", tc.n, c)
			}
		}
		if !slices.Equal(lens, tc.lens) || !slices.Equal(flatten(chunks), files) {
			t.Errorf("Divide(%d): %v, want %v", tc.n, lens, tc.lens)
		}
	}
	if Divide(nil, 3) != nil {
		t.Errorf("Divide(nil) not nil")
	}
	for _, tc := range []struct {
		per  int
		lens []int
	}{{4, []int{4, 4, 2}}, {10, []int{10}}, {11, []int{10}}, {0, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}} {
		chunks := DivideBy(files, tc.per)
		var lens []int
		for _, c := range chunks {
			lens = append(lens, c.Len())
		}
		if !slices.Equal(lens, tc.lens) || !slices.Equal(flatten(chunks), files) {
			t.Errorf("DivideBy(%d): %v, want %v", tc.per, lens, tc.lens)
		}
	}
	// Chunks own their files: appending to one touches neither the
	// input nor the next chunk.
	chunks := Divide(files, 2)
	chunks[0].Files = append(chunks[0].Files, File{Src: "x"})
	chunks[0].Files[0].Src = "changed"
	if files[0].Src == "changed" || files[5].Src == "x" || chunks[1].Files[0].Src == "x" {
		t.Errorf("chunks alias the input")
	}
}

func TestSplitLargest(t *testing.T) {
	a := Chunk{Files: same("a", 4, mib), PP: 6, P: 1, CC: 1}
	b := Chunk{Files: same("b", 1, 10*mib), PP: 2, P: 1, CC: 3}
	// b is the largest but a single file: a is halved.
	got := SplitLargest([]Chunk{a, b}, 3)
	var lens []int
	for _, c := range got {
		lens = append(lens, c.Len())
	}
	if !slices.Equal(lens, []int{2, 2, 1}) || got[0].PP != 6 || got[1].PP != 6 || got[2].CC != 3 {
		t.Errorf("split to 3: %v", got)
	}
	// Asking for more than can be had stops at single files.
	got = SplitLargest([]Chunk{a, b}, 10)
	if len(got) != 5 || !slices.Equal(flatten(got), flatten([]Chunk{a, b})) {
		t.Errorf("split to 10: %v", got)
	}
	// By bytes, not by count: [1, 1, 1, 1, 4] halves after the fourth
	// file (4 bytes each side).
	c := Chunk{Files: []File{{Src: "1", Size: 1}, {Src: "2", Size: 1}, {Src: "3", Size: 1}, {Src: "4", Size: 1}, {Src: "5", Size: 4}}}
	got = SplitLargest([]Chunk{c}, 2)
	if len(got) != 2 || got[0].Len() != 4 || got[1].Len() != 1 {
		t.Errorf("split by bytes: %v", got)
	}
	if got := SplitLargest(nil, 3); len(got) != 0 {
		t.Errorf("split of nothing: %v", got)
	}
}

func TestCombine(t *testing.T) {
	f := same("f", 6, 1)
	in := []Chunk{
		{Files: f[0:1], PP: 6, P: 1, CC: 1},
		{Files: f[1:2], PP: 2, P: 1, CC: 1},
		{Files: f[2:4], PP: 6, P: 1, CC: 1},
		{Files: nil, PP: 9, P: 1, CC: 1},
		{Files: f[4:5], PP: 6, P: 1, CC: 8},
		{Files: f[5:6], PP: 2, P: 1, CC: 1},
	}
	got := Combine(in)
	want := []Chunk{
		{Files: []File{f[0], f[2], f[3]}, PP: 6, P: 1, CC: 1},
		{Files: []File{f[1], f[5]}, PP: 2, P: 1, CC: 1},
		{Files: []File{f[4]}, PP: 6, P: 1, CC: 8},
	}
	if len(got) != len(want) {
		t.Fatalf("combined %v", got)
	}
	for i := range want {
		if !slices.Equal(got[i].Files, want[i].Files) || !got[i].sameSettings(want[i]) {
			t.Errorf("chunk %d: %v %v, want %v %v", i, got[i], srcs(got[i].Files), want[i], srcs(want[i].Files))
		}
	}
	if in[0].Len() != 1 || f[1] != in[1].Files[0] {
		t.Errorf("Combine modified its input")
	}
}

// Divide then Combine gives back the files; so does SplitLargest.
func TestDivideCombineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		files := drawFiles(t, 200)
		n := rapid.IntRange(-1, 50).Draw(t, "n")
		chunks := Divide(files, n)
		for _, c := range chunks {
			if c.Len() == 0 {
				t.Fatalf("empty chunk")
			}
		}
		if len(files) > 0 && len(chunks) != min(max(n, 1), len(files)) {
			t.Fatalf("%d chunks for n %d and %d files", len(chunks), n, len(files))
		}
		if got := flatten(Combine(chunks)); !slices.Equal(got, files) {
			t.Fatalf("combine of divide lost files")
		}
		if got := flatten(SplitLargest(chunks, rapid.IntRange(0, 300).Draw(t, "split"))); !slices.Equal(got, flatten(chunks)) {
			t.Fatalf("split lost files")
		}
	})
}

func TestGroupByPair(t *testing.T) {
	files := []File{
		{Src: "gsiftp://a/x/1", Dst: "file:///d/1"},
		{Src: "gsiftp://b/x/2", Dst: "file:///d/2"},
		{Src: "gsiftp://a/y/3", Dst: "file:///d/3"},
		{Src: "gsiftp://a/x/4", Dst: "sluice://c/4"},
	}
	host := func(u string) string { x, _ := url.Parse(u); return x.Host }
	got := GroupByPair(files, func(f File) (string, string) { return host(f.Src), host(f.Dst) })
	want := []Group{
		{Src: "a", Dst: "", Files: []File{files[0], files[2]}},
		{Src: "b", Dst: "", Files: []File{files[1]}},
		{Src: "a", Dst: "c", Files: []File{files[3]}},
	}
	if len(got) != len(want) {
		t.Fatalf("groups %v", got)
	}
	for i := range want {
		if got[i].Src != want[i].Src || got[i].Dst != want[i].Dst || !slices.Equal(got[i].Files, want[i].Files) {
			t.Errorf("group %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// The default key: parent directories.
	got = GroupByPair([]File{{Src: "/s/a/1", Dst: "/d/1"}, {Src: "/s/b/2", Dst: "/d/2"}, {Src: "/s/a/3", Dst: "/d/3"}}, nil)
	if len(got) != 2 || got[0].Src != "/s/a" || got[0].Dst != "/d" || len(got[0].Files) != 2 {
		t.Errorf("default groups %+v", got)
	}
}

func TestQueue(t *testing.T) {
	var q Queue
	if _, ok := q.Dequeue(); ok {
		t.Fatal("zero queue not empty")
	}
	f := same("f", 6, 10)
	q.Enqueue(Chunk{Files: f[:2], PP: 1}, Chunk{}, Chunk{Files: f[2:5], PP: 2})
	if q.Len() != 2 {
		t.Fatalf("len %d (empty chunks are dropped)", q.Len())
	}
	q.Requeue(Chunk{Files: f[5:], PP: 3})
	if n, b := q.Pending(); n != 6 || b != 60 {
		t.Errorf("pending %d files %d bytes", n, b)
	}
	// Remove files 0 and 1 (emptying the first queued chunk) and 3.
	gone := q.Remove(func(x File) bool { return x == f[0] || x == f[1] || x == f[3] })
	if !slices.Equal(gone, []File{f[0], f[1], f[3]}) || q.Len() != 2 {
		t.Errorf("removed %v, %d chunks left", srcs(gone), q.Len())
	}
	c, _ := q.Dequeue()
	if c.PP != 3 || !slices.Equal(c.Files, f[5:]) {
		t.Errorf("first out %v, want the requeued chunk", c)
	}
	c, _ = q.Dequeue()
	if c.PP != 2 || !slices.Equal(c.Files, []File{f[2], f[4]}) {
		t.Errorf("second out %v %v", c, srcs(c.Files))
	}
	if _, ok := q.Dequeue(); ok || q.Len() != 0 {
		t.Errorf("queue not empty at the end")
	}
}

// Producers and consumers at once: every chunk comes out exactly once.
func TestQueueConcurrent(t *testing.T) {
	var q Queue
	const producers, perProducer = 4, 500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				q.Enqueue(Chunk{Files: []File{{Src: fmt.Sprintf("%d/%d", p, i), Size: 1}}})
			}
		}()
	}
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	var consumers sync.WaitGroup
	for range 4 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for {
				c, ok := q.Dequeue()
				if !ok {
					select {
					case <-done:
						if q.Len() == 0 {
							return
						}
					default:
					}
					runtime.Gosched()
					continue
				}
				mu.Lock()
				seen[c.Files[0].Src]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(done)
	consumers.Wait()
	if len(seen) != producers*perProducer {
		t.Fatalf("%d chunks seen, want %d", len(seen), producers*perProducer)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s dequeued %d times", k, n)
		}
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"a": 3, "sub/b": 0, "sub/deeper/c": 10, "z": 1} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		root string
		want []File
	}{
		{"/", []File{
			{Src: "/a", Dst: "a", Size: 3}, {Src: "/sub/b", Dst: "sub/b", Size: 0},
			{Src: "/sub/deeper/c", Dst: "sub/deeper/c", Size: 10}, {Src: "/z", Dst: "z", Size: 1},
		}},
		{"sub", []File{{Src: "sub/b", Dst: "b", Size: 0}, {Src: "sub/deeper/c", Dst: "deeper/c", Size: 10}}},
		{"/sub/", []File{{Src: "/sub/b", Dst: "b", Size: 0}, {Src: "/sub/deeper/c", Dst: "deeper/c", Size: 10}}},
		{"sub/deeper/c", []File{{Src: "sub/deeper/c", Dst: "c", Size: 10}}},
		{"empty", nil},
	} {
		got, err := List(ctx, b, tc.root)
		if err != nil {
			t.Errorf("List(%q): %v", tc.root, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.root, got, tc.want)
		}
	}
	if _, err := List(ctx, b, "nope"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("missing root: %v", err)
	}
}
