package root

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// random returns n reproducible pseudo-random bytes.
func random(n int, seed uint64) []byte {
	var s [32]byte
	s[0] = byte(seed)
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url, addr, path string
		bad             bool
	}{
		{url: "root://eos.example.org:1094//eos/data/f.root", addr: "eos.example.org:1094", path: "/eos/data/f.root"},
		{url: "root://eos.example.org:1094/eos/data/f.root", addr: "eos.example.org:1094", path: "/eos/data/f.root"},
		{url: "root://host//a//b/./c/", addr: "host:1094", path: "/a/b/c"},
		{url: "xroot://host:2000/", addr: "host:2000", path: "/"},
		{url: "root://host:2000", addr: "host:2000", path: "/"},
		{url: "root://[::1]:1095//x", addr: "[::1]:1095", path: "/x"},
		{url: "root://host//a%20b", addr: "host:1094", path: "/a b"},
		{url: "root://host//a/../../etc/passwd", bad: true},
		{url: "root://host//a/..", bad: true},
		{url: "roots://host//x", bad: true},
		{url: "http://host//x", bad: true},
		{url: "root:///x", bad: true},
		{url: "root://user@host//x", bad: true},
		{url: "root://host//x?authz=token", bad: true},
		{url: "root://host//x#frag", bad: true},
		{url: "root:opaque", bad: true},
	} {
		addr, p, err := ParseURL(tc.url)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseURL(%q) = %q, %q; want an error", tc.url, addr, p)
			} else if !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("ParseURL(%q): %v is not ErrInvalid", tc.url, err)
			}
			continue
		}
		if err != nil || addr != tc.addr || p != tc.path {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.url, addr, p, err, tc.addr, tc.path)
		}
	}
}

func TestNewErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := New(ctx, "host/path", Options{}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("New with a path for an address: %v, want ErrInvalid", err)
	}
	// A port nobody listens on: refused at once, not after DialTimeout.
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	if _, err := New(ctx, addr, Options{}); err == nil {
		t.Error("New on a closed port succeeded")
	} else if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New on a closed port took %v", d)
	} else if !strings.Contains(err.Error(), "refused") {
		t.Errorf("New on a closed port: %v does not say why", err)
	}
	// A server that accepts and never answers: the context ends it.
	l, err = netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := New(cctx, l.Addr().String(), Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("New on a silent server: %v, want DeadlineExceeded", err)
	}
	// And DialTimeout without a deadline in the context.
	start = time.Now()
	if _, err := New(ctx, l.Addr().String(), Options{DialTimeout: 200 * time.Millisecond}); err == nil ||
		!strings.Contains(err.Error(), "no answer") {
		t.Errorf("New on a silent server with DialTimeout: %v", err)
	} else if d := time.Since(start); d > 5*time.Second {
		t.Errorf("DialTimeout 200ms took %v", d)
	}
}

func TestBackend(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			b := open(t, tg, Options{})
			// Small blocks: every call spans many requests.
			small := open(t, tg, Options{BlockSize: 1000})
			t.Run("Stat", func(t *testing.T) { testStat(t, tg, b) })
			t.Run("List", func(t *testing.T) { testList(t, tg, b) })
			t.Run("OpenRange", func(t *testing.T) { testOpenRange(t, tg, b, small) })
			t.Run("WriteAt", func(t *testing.T) { testWriteAt(t, tg, b, small) })
			t.Run("ConcurrentWriteAt", func(t *testing.T) { testConcurrentWriteAt(t, tg, small) })
			t.Run("Checksum", func(t *testing.T) { testChecksum(t, tg, b) })
			t.Run("Rename", func(t *testing.T) { testRename(t, tg, b) })
			t.Run("Remove", func(t *testing.T) { testRemove(t, tg, b) })
			t.Run("Mkdir", func(t *testing.T) { testMkdir(t, tg, b) })
			t.Run("TruncateSync", func(t *testing.T) { testTruncateSync(t, tg, b) })
			t.Run("NotFound", func(t *testing.T) { testNotFound(t, b) })
			t.Run("Escapes", func(t *testing.T) { testEscapes(t, tg, b) })
			t.Run("Root", func(t *testing.T) { testRoot(t, tg) })
			t.Run("Cancel", func(t *testing.T) { testCancel(t, tg, small) })
			if tg.restart != nil {
				t.Run("Restart", func(t *testing.T) { testRestart(t, tg) })
			}
		})
	}
}

func testStat(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"stat/f": "hello", "stat/d/": ""})
	for _, tc := range []struct {
		path, want string
		size       int64
		dir        bool
		err        error
	}{
		{path: "/stat/f", want: "/stat/f", size: 5},
		{path: "stat/f", want: "/stat/f", size: 5},
		{path: "/stat//d/./", want: "/stat/d", dir: true},
		{path: "/", want: "/", dir: true},
		{path: "", want: "/", dir: true},
		{path: "/stat/missing", err: backend.ErrNotFound},
	} {
		fi, err := b.Stat(ctx, tc.path)
		if tc.err != nil {
			wantErr(t, "Stat "+tc.path, err, tc.err)
			continue
		}
		if err != nil {
			t.Errorf("Stat %q: %v", tc.path, err)
			continue
		}
		if fi.Path != tc.want || fi.IsDir != tc.dir || (!tc.dir && fi.Size != tc.size) {
			t.Errorf("Stat %q = %+v; want path %s, size %d, dir %v", tc.path, fi, tc.want, tc.size, tc.dir)
		}
		if d := time.Since(fi.ModTime); d < -time.Minute || d > time.Hour {
			t.Errorf("Stat %q: mtime %v", tc.path, fi.ModTime)
		}
	}
}

func testList(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{
		"list/a": "1", "list/b/c": "22", "list/b/d/e": "333", "list/empty/": "",
	})
	type entry struct {
		path string
		size int64 // -1: directory
	}
	for _, tc := range []struct {
		path      string
		recursive bool
		want      []entry
		err       error
	}{
		{path: "/list", recursive: true, want: []entry{
			{"/list/a", 1}, {"/list/b", -1}, {"/list/b/c", 2}, {"/list/b/d", -1}, {"/list/b/d/e", 3}, {"/list/empty", -1},
		}},
		{path: "/list", want: []entry{{"/list/a", 1}, {"/list/b", -1}, {"/list/empty", -1}}},
		{path: "list/b/", recursive: true, want: []entry{{"/list/b/c", 2}, {"/list/b/d", -1}, {"/list/b/d/e", 3}}},
		{path: "/list/empty", recursive: true, want: []entry{}},
		{path: "/list/a", err: backend.ErrInvalid},
		{path: "/list/missing", recursive: true, err: backend.ErrNotFound},
	} {
		got, err := b.List(ctx, tc.path, tc.recursive)
		if tc.err != nil {
			wantErr(t, "List "+tc.path, err, tc.err)
			continue
		}
		if err != nil {
			t.Errorf("List %q: %v", tc.path, err)
			continue
		}
		var have []entry
		for _, fi := range got {
			e := entry{fi.Path, fi.Size}
			if fi.IsDir {
				e.size = -1
			}
			have = append(have, e)
		}
		if fmt.Sprint(have) != fmt.Sprint(tc.want) {
			t.Errorf("List %q recursive=%v:\n got %v\nwant %v", tc.path, tc.recursive, have, tc.want)
		}
	}
}

func testOpenRange(t *testing.T, tg *target, bs ...*Backend) {
	ctx := context.Background()
	data := random(10000, 1)
	seed(t, tg, map[string]string{"range/f": string(data)})
	for _, b := range bs {
		for _, tc := range []struct {
			off, n     int64
			start, end int // of data
		}{
			{0, -1, 0, 10000},        // whole file
			{1234, 5000, 1234, 6234}, // middle, across blocks
			{7777, -1, 7777, 10000},  // middle to the end
			{0, 10000, 0, 10000},
			{9000, 5000, 9000, 10000}, // past the end: stops there
			{10000, -1, 10000, 10000},
			{100, 0, 100, 100},
			{20000, 10, 10000, 10000},
		} {
			rc, err := b.OpenRange(ctx, "/range/f", tc.off, tc.n)
			if err != nil {
				t.Errorf("OpenRange(%d, %d): %v", tc.off, tc.n, err)
				continue
			}
			got, err := io.ReadAll(rc)
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
			if err != nil || !bytes.Equal(got, data[tc.start:tc.end]) {
				t.Errorf("OpenRange(%d, %d) with %d-byte blocks: %d bytes, %v; want data[%d:%d]",
					tc.off, tc.n, b.opts.BlockSize, len(got), err, tc.start, tc.end)
			}
		}
	}
	_, err := bs[0].OpenRange(ctx, "/range/f", -1, 10)
	wantErr(t, "OpenRange at -1", err, backend.ErrInvalid)
	// XRootD refuses to open a directory; go-hep's server opens it and
	// fails the read.
	if rc, err := bs[0].OpenRange(ctx, "/range", 0, 10); err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
		if !backend.Permanent(err) {
			t.Errorf("reading a directory: %v, want a permanent error", err)
		}
	} else if !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("opening a directory: %v, want ErrInvalid", err)
	}
}

func testWriteAt(t *testing.T, tg *target, b, small *Backend) {
	ctx := context.Background()
	data := random(10007, 2)
	// Out of order, into directories that do not exist yet, in pieces
	// spanning several blocks.
	cuts := []int{0, 1500, 4000, 4001, 8000, len(data)}
	for _, i := range []int{3, 0, 4, 1, 2} {
		piece := data[cuts[i]:cuts[i+1]]
		if err := small.WriteAt(ctx, "write/sub/dir/f", int64(cuts[i]), bytes.NewReader(piece), int64(len(piece))); err != nil {
			t.Fatalf("WriteAt piece %d: %v", i, err)
		}
	}
	if got := readLocal(t, tg, "write/sub/dir/f"); !bytes.Equal(got, data) {
		t.Fatalf("after out-of-order writes: %d bytes, differ from the %d written", len(got), len(data))
	}
	// An existing file is updated in place, not truncated.
	if err := b.WriteAt(ctx, "/write/sub/dir/f", 2, strings.NewReader("XYZ-ignored"), 3); err != nil {
		t.Fatal(err)
	}
	copy(data[2:], "XYZ")
	if got := readLocal(t, tg, "write/sub/dir/f"); !bytes.Equal(got, data) {
		t.Error("an update in place changed more than its bytes")
	}
	// Beyond the end: a hole, then the bytes.
	if err := b.WriteAt(ctx, "write/hole", 100, strings.NewReader("end"), 3); err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, tg, "write/hole"); !bytes.Equal(got, append(make([]byte, 100), "end"...)) {
		t.Errorf("write past the end: %q", got)
	}
	// Nothing to write still creates the file.
	if err := b.WriteAt(ctx, "write/empty", 0, strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, tg, "write/empty"); len(got) != 0 {
		t.Errorf("empty write: %d bytes", len(got))
	}
	// A body shorter than announced is the caller's error.
	err := b.WriteAt(ctx, "write/short", 0, strings.NewReader("abc"), 10)
	wantErr(t, "WriteAt of a short body", err, backend.ErrInvalid)
	err = b.WriteAt(ctx, "write/neg", -1, strings.NewReader("abc"), 3)
	wantErr(t, "WriteAt at -1", err, backend.ErrInvalid)
	// A reader's own failure comes back as it is.
	boom := errors.New("boom")
	err = b.WriteAt(ctx, "write/fail", 0, io.MultiReader(strings.NewReader("abc"), errReader{boom}), 10)
	wantErr(t, "WriteAt of a failing body", err, boom)
	// Writing a directory is invalid.
	err = b.WriteAt(ctx, "write/sub", 0, strings.NewReader("abc"), 3)
	if err == nil || backend.Permanent(err) != true {
		t.Errorf("WriteAt on a directory: %v, want a permanent error", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func testConcurrentWriteAt(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	data := random(1<<20+123, 3)
	const workers, pieces = 4, 8
	for _, name := range []string{"conc/new/f", "conc/new/g"} { // created by the race, twice
		var wg sync.WaitGroup
		errs := make(chan error, workers*pieces)
		quarter := len(data) / workers
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start, end := w*quarter, (w+1)*quarter
				if w == workers-1 {
					end = len(data)
				}
				step := (end - start + pieces - 1) / pieces
				for off := start; off < end; off += step {
					piece := data[off:min(off+step, end)]
					errs <- b.WriteAt(ctx, name, int64(off), bytes.NewReader(piece), int64(len(piece)))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent WriteAt: %v", err)
			}
		}
		if got := readLocal(t, tg, name); !bytes.Equal(got, data) {
			t.Fatalf("%s after concurrent writes: %d bytes, not what was written", name, len(got))
		}
	}
}

func testChecksum(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	data := random(3<<20+17, 4)
	seed(t, tg, map[string]string{"sum/f": string(data), "sum/empty": ""})
	noServer := open(t, tg, Options{NoServerChecksum: true})
	for _, algo := range backend.Algorithms {
		for _, tc := range []struct {
			name string
			data []byte
		}{{"sum/f", data}, {"sum/empty", nil}} {
			want, err := backend.Sum(bytes.NewReader(tc.data), algo)
			if err != nil {
				t.Fatal(err)
			}
			before := b.serverSums.Load()
			got, err := b.Checksum(ctx, tc.name, algo)
			if err != nil || got != want {
				t.Errorf("Checksum(%s, %s) = %q, %v; want %q", tc.name, algo, got, err, want)
			}
			// XRootD computes what it is configured for, go-hep's
			// server nothing.
			byServer := b.serverSums.Load() > before
			if wantServer := tg.native && algo != "sha256"; byServer != wantServer {
				t.Errorf("Checksum(%s, %s): computed by the server %v, want %v", tc.name, algo, byServer, wantServer)
			}
			if got, err := noServer.Checksum(ctx, tc.name, algo); err != nil || got != want {
				t.Errorf("Checksum(%s, %s) without the server = %q, %v; want %q", tc.name, algo, got, err, want)
			}
		}
	}
	if noServer.serverSums.Load() != 0 {
		t.Error("NoServerChecksum asked the server")
	}
	_, err := b.Checksum(ctx, "sum/f", "sha1")
	wantErr(t, "Checksum sha1", err, backend.ErrInvalid)
	_, err = b.Checksum(ctx, "sum/missing", "adler32")
	wantErr(t, "Checksum of a missing file", err, backend.ErrNotFound)
}

func testRename(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"mv/a": "A", "mv/b": "B", "mv/d/x": "X"})
	for _, tc := range []struct {
		from, to string
		err      error
	}{
		{from: "/mv/a", to: "/mv/b"},        // replaces b
		{from: "/mv/b", to: "mv/new/dir/c"}, // makes the parents
		{from: "/mv/d", to: "/mv/d2"},       // a directory
		{from: "/mv/missing", to: "/mv/z", err: backend.ErrNotFound},
		{from: "/", to: "/mv/root", err: backend.ErrPermission},
	} {
		err := b.Rename(ctx, tc.from, tc.to)
		if tc.err != nil {
			wantErr(t, "Rename "+tc.from, err, tc.err)
		} else if err != nil {
			t.Errorf("Rename %s %s: %v", tc.from, tc.to, err)
		}
	}
	if got := readLocal(t, tg, "mv/new/dir/c"); string(got) != "A" {
		t.Errorf("renamed over b, then moved: %q, want A", got)
	}
	if got := readLocal(t, tg, "mv/d2/x"); string(got) != "X" {
		t.Errorf("renamed directory: %q", got)
	}
	for _, gone := range []string{"/mv/a", "/mv/b", "/mv/d"} {
		_, err := b.Stat(ctx, gone)
		wantErr(t, "Stat after rename "+gone, err, backend.ErrNotFound)
	}
}

func testRemove(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"rm/f": "x", "rm/empty/": "", "rm/full/x": "x"})
	for _, tc := range []struct {
		path string
		err  error
	}{
		{path: "/rm/f"},
		{path: "rm/empty/"},
		{path: "/rm/full", err: backend.ErrExist},
		{path: "/rm/missing", err: backend.ErrNotFound},
		{path: "/", err: backend.ErrPermission},
	} {
		err := b.Remove(ctx, tc.path)
		if tc.err != nil {
			wantErr(t, "Remove "+tc.path, err, tc.err)
			continue
		}
		if err != nil {
			t.Errorf("Remove %s: %v", tc.path, err)
		}
		if _, err := os.Lstat(filepath.Join(tg.dir, tc.path)); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove: %v", tc.path, err)
		}
	}
}

func testMkdir(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"mk/f": "x", "mk/shared/": "", "mk/sticky/": ""})
	// Shared directories on storage servers are often group-writable or
	// sticky: XRootD answers "exists" to a mkdir -p of them with another
	// mode, which must still mean "there" (and a file can go in).
	for name, mode := range map[string]os.FileMode{"mk/shared": 0o775, "mk/sticky": 0o1777} {
		if err := os.Chmod(filepath.Join(tg.dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/mk/shared", "/mk/sticky"} {
		if err := b.Mkdir(ctx, p); err != nil {
			t.Errorf("Mkdir of the existing %s: %v", p, err)
		}
		if err := b.WriteAt(ctx, p+"/up", 0, strings.NewReader("abc"), 3); err != nil {
			t.Errorf("WriteAt into the existing %s: %v", p, err)
		}
	}
	for _, tc := range []struct {
		path string
		err  error
	}{
		{path: "/mk/a/b/c"},
		{path: "mk/a/b/c"}, // again
		{path: "/"},
		{path: "/mk/f", err: backend.ErrExist},
	} {
		err := b.Mkdir(ctx, tc.path)
		if tc.err != nil {
			wantErr(t, "Mkdir "+tc.path, err, tc.err)
			continue
		}
		if err != nil {
			t.Errorf("Mkdir %s: %v", tc.path, err)
		}
		if fi, err := os.Stat(filepath.Join(tg.dir, tc.path)); err != nil || !fi.IsDir() {
			t.Errorf("Mkdir %s: %v", tc.path, err)
		} else if tc.path != "/" && fi.Mode().Perm()&0o700 != 0o700 {
			t.Errorf("Mkdir %s: mode %v", tc.path, fi.Mode())
		}
	}
}

func testTruncateSync(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"tr/f": "0123456789"})
	if err := b.Truncate(ctx, "/tr/new/dir/g", 100); err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, tg, "tr/new/dir/g"); !bytes.Equal(got, make([]byte, 100)) {
		t.Errorf("new truncated file: %q", got)
	}
	if err := b.Truncate(ctx, "/tr/f", 4); err != nil {
		t.Fatal(err)
	}
	if err := b.Truncate(ctx, "/tr/f", 6); err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, tg, "tr/f"); string(got) != "0123\x00\x00" {
		t.Errorf("shrunk then grown: %q", got)
	}
	wantErr(t, "Truncate to -1", b.Truncate(ctx, "/tr/f", -1), backend.ErrInvalid)
	if err := b.Sync(ctx, "/tr/f"); err != nil {
		t.Errorf("Sync: %v", err)
	}
	wantErr(t, "Sync of a missing file", b.Sync(ctx, "/tr/missing"), backend.ErrNotFound)
}

func testNotFound(t *testing.T, b *Backend) {
	ctx := context.Background()
	const p = "/nf/missing"
	for name, op := range map[string]func() error{
		"Stat":   func() error { _, err := b.Stat(ctx, p); return err },
		"List":   func() error { _, err := b.List(ctx, p, true); return err },
		"Open":   func() error { _, err := b.OpenRange(ctx, p, 0, -1); return err },
		"Sum":    func() error { _, err := b.Checksum(ctx, p, "md5"); return err },
		"Remove": func() error { return b.Remove(ctx, p) },
		"Rename": func() error { return b.Rename(ctx, p, "/nf/other") },
		"Sync":   func() error { return b.Sync(ctx, p) },
	} {
		err := op()
		wantErr(t, name, err, backend.ErrNotFound)
		if err != nil && !strings.Contains(err.Error(), "root: ") {
			t.Errorf("%s: %v lacks context", name, err)
		}
	}
}

func testEscapes(t *testing.T, tg *target, b *Backend) {
	ctx := context.Background()
	outside := filepath.Join(filepath.Dir(tg.dir), "escaped")
	for _, p := range []string{"../escaped", "/a/../../escaped", "/..", "a/..", "x?y=1", "a\nb", "a\x00b"} {
		for name, op := range map[string]func() error{
			"Stat":     func() error { _, err := b.Stat(ctx, p); return err },
			"List":     func() error { _, err := b.List(ctx, p, true); return err },
			"Open":     func() error { _, err := b.OpenRange(ctx, p, 0, -1); return err },
			"Write":    func() error { return b.WriteAt(ctx, p, 0, strings.NewReader("x"), 1) },
			"Truncate": func() error { return b.Truncate(ctx, p, 1) },
			"Sync":     func() error { return b.Sync(ctx, p) },
			"RenameTo": func() error { return b.Rename(ctx, "/x", p) },
			"Rename":   func() error { return b.Rename(ctx, p, "/x") },
			"Remove":   func() error { return b.Remove(ctx, p) },
			"Mkdir":    func() error { return b.Mkdir(ctx, p) },
			"Checksum": func() error { _, err := b.Checksum(ctx, p, "md5"); return err },
		} {
			wantErr(t, fmt.Sprintf("%s %q", name, p), op(), backend.ErrInvalid)
		}
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Errorf("%s was created outside the served directory", outside)
	}
}

// testRoot checks Options.Root: paths are relative to it, also in results.
func testRoot(t *testing.T, tg *target) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"jail/in/f": "abc", "secret": "s"})
	b := open(t, tg, Options{Root: "/jail"})
	fi, err := b.Stat(ctx, "/in/f")
	if err != nil || fi.Path != "/in/f" || fi.Size != 3 {
		t.Errorf("Stat under Root: %+v, %v", fi, err)
	}
	list, err := b.List(ctx, "/", true)
	if err != nil || len(list) != 2 || list[1].Path != "/in/f" {
		t.Errorf("List under Root: %v, %v", list, err)
	}
	if err := b.WriteAt(ctx, "/out", 0, strings.NewReader("o"), 1); err != nil {
		t.Fatal(err)
	}
	if got := readLocal(t, tg, "jail/out"); string(got) != "o" {
		t.Errorf("WriteAt under Root wrote %q", got)
	}
	_, err = b.Stat(ctx, "/../secret")
	wantErr(t, "escaping Root", err, backend.ErrInvalid)
}

// testCancel cancels reads and writes at random moments, then checks that
// the backend still works: go-hep's client wedges for good when a request
// it was given is cancelled (see conn.go).
func testCancel(t *testing.T, tg *target, b *Backend) {
	data := random(256<<10, 5)
	seed(t, tg, map[string]string{"cancel/f": string(data)})
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, err := b.Stat(dead, "/cancel/f"); !errors.Is(err, context.Canceled) || !backend.Permanent(err) {
		t.Errorf("Stat with a cancelled context: %v", err)
	}
	if err := b.WriteAt(dead, "/cancel/g", 0, bytes.NewReader(data), int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteAt with a cancelled context: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("calls with a cancelled context took %v", d)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
		if rc, err := b.OpenRange(ctx, "/cancel/f", 0, -1); err == nil {
			got, err := io.ReadAll(rc)
			rc.Close()
			if err == nil && !bytes.Equal(got, data) {
				t.Fatalf("round %d: read wrong bytes", i)
			} else if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: read: %v", i, err)
			}
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: open: %v", i, err)
		}
		err := b.WriteAt(ctx, "/cancel/g", 0, bytes.NewReader(data), int64(len(data)))
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: write: %v", i, err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.WriteAt(ctx, "/cancel/g", 0, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("after cancellations: %v", err)
	}
	if got := readLocal(t, tg, "cancel/g"); !bytes.Equal(got, data) {
		t.Fatal("after cancellations: wrong bytes")
	}
}

// testRestart restarts the server under an open backend: go-hep's client
// would panic; here calls fail transiently, then reconnect.
func testRestart(t *testing.T, tg *target) {
	ctx := context.Background()
	seed(t, tg, map[string]string{"restart/f": "abc"})
	b := open(t, tg, Options{})
	rc, err := b.OpenRange(ctx, "/restart/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	tg.restart(t)
	time.Sleep(50 * time.Millisecond) // let the relay notice
	if _, err := io.ReadAll(rc); err == nil {
		t.Error("a read through a handle of the old server succeeded")
	} else if backend.Permanent(err) {
		t.Errorf("a read cut by the restart is permanent: %v", err)
	}
	rc.Close()
	var fi backend.FileInfo
	for deadline := time.Now().Add(5 * time.Second); ; {
		if fi, err = b.Stat(ctx, "/restart/f"); err == nil {
			break
		}
		if backend.Permanent(err) || time.Now().After(deadline) {
			t.Fatalf("Stat after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fi.Size != 3 {
		t.Errorf("Stat after the restart: %+v", fi)
	}
}
