package gridftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, base, path string
		bad            bool
	}{
		{in: "ftp://127.0.0.1:2811", base: "ftp://127.0.0.1:2811", path: "/"},
		{in: "ftp://h", base: "ftp://h:21", path: "/"},
		{in: "gsiftp://h/data/x%20y", base: "gsiftp://h:2811", path: "/data/x y"},
		{in: "gsiftp://[::1]:2812/a", base: "gsiftp://[::1]:2812", path: "/a"},
		{in: "http://h/a", bad: true},
		{in: "ftp:/a", bad: true},
		{in: "ftp://u:p@h/a", bad: true},
		{in: "ftp://h/a?x", bad: true},
		{in: "ftp://h/a#x", bad: true},
		{in: "ftp://h/a%0D%0ADELE%20x", bad: true},
	} {
		base, p, err := ParseURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseURL(%q) = %q, %q; want an error", tc.in, base, p)
			}
			continue
		}
		if err != nil || base != tc.base || p != tc.path {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.in, base, p, err, tc.base, tc.path)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		code int
		msg  string
		want error
	}{
		{550, "GlobusError: v=1 c=PATH_NOT_FOUND\nGridFTP-Errno: 2\nGridFTP-Error-String: No such file or directory", backend.ErrNotFound},
		{553, "GlobusError: v=1 c=PATH_EXISTS\nGridFTP-Errno: 17", backend.ErrExist},
		{451, "GridFTP-Errno: 39\nGridFTP-Error-String: Directory not empty", backend.ErrExist},
		{500, "Command failed. : globus_l_gfs_file_open failed.\nglobus_xio: System error in open: Permission denied", backend.ErrPermission},
		{500, "globus_xio: System error in write: No space left on device", backend.ErrNoSpace},
		{552, "Requested file action aborted", backend.ErrNoSpace},
		{550, "File unavailable", backend.ErrNotFound},
		{530, "globus_credential: ... File does not exist: /tmp/x509up_u0 ... No such file or directory", backend.ErrPermission},
		{500, "Unknown checksum algorithm requested.", backend.ErrInvalid},
		{421, "Service not available", nil},
		{426, "Connection closed; transfer aborted", nil},
	} {
		got := classify(tc.code, tc.msg)
		if got != tc.want {
			t.Errorf("classify(%d, %q) = %v, want %v", tc.code, tc.msg, got, tc.want)
		}
	}
	te := &ToolError{Status: "exit status 1", Stderr: "error: globus_ftp_client: the server responded with an error; 500 500-Command failed. : globus_l_gfs_file_open failed.; 500-globus_xio: System error in open: No such file or directory; 500 End."}
	if !errors.Is(te, backend.ErrNotFound) {
		t.Errorf("%v: not ErrNotFound", te)
	}
}

func TestNewErrors(t *testing.T) {
	needTools(t)
	if _, err := New("ftp://127.0.0.1:1", Options{Binary: "/nonexistent/globus-url-copy"}); err == nil {
		t.Error("New with a missing binary succeeded")
	}
	t.Setenv("PATH", t.TempDir())
	_, err := New("ftp://127.0.0.1:1", Options{})
	if err == nil || !strings.Contains(err.Error(), "globus-gass-copy-progs") {
		t.Errorf("New without globus-url-copy in PATH: %v; want a hint at the package", err)
	}
}

// TestPaths checks that every operation refuses paths leaving the root.
func TestPaths(t *testing.T) {
	needTools(t)
	b, err := New("ftp://127.0.0.1:1/root", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"../x", "a/../../x", "/..", "a\r\nDELE x", "ü.txt"} {
		errs := map[string]error{}
		_, errs["stat"] = b.Stat(ctx, p)
		_, errs["list"] = b.List(ctx, p, true)
		_, errs["open"] = b.OpenRange(ctx, p, 0, 1)
		errs["write"] = b.WriteAt(ctx, p, 0, strings.NewReader("x"), 1)
		errs["truncate"] = b.Truncate(ctx, p, 1)
		errs["sync"] = b.Sync(ctx, p)
		errs["rename"] = b.Rename(ctx, p, "ok")
		errs["rename2"] = b.Rename(ctx, "ok", p)
		errs["remove"] = b.Remove(ctx, p)
		errs["mkdir"] = b.Mkdir(ctx, p)
		_, errs["checksum"] = b.Checksum(ctx, p, "md5")
		for op, err := range errs {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("%s %q: %v, want ErrInvalid", op, p, err)
			}
		}
	}
	for p, want := range map[string]string{"a/b": "/root/a/b", "/a//b/": "/root/a/b", "": "/root", "a/./b": "/root/a/b"} {
		if got, _ := b.serverPath(p); got != want {
			t.Errorf("serverPath(%q) = %q, want %q", p, got, want)
		}
	}
	if u, _ := b.URL("sp ace/a#b?%c;d+e"); u != "ftp://127.0.0.1:1/root/sp%20ace/a%23b%3F%25c%3Bd%2Be" {
		t.Errorf("URL = %s", u)
	}
}

func TestStatList(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	files := map[string]int{"a/b/c.txt": 11, "a/d.bin": 70000, "e.txt": 0, "sp ace/x#y%z.dat": 5}
	for p, n := range files {
		s.put(t, p, randomBytes(n, uint64(n)), false)
	}
	if err := os.Mkdir(s.local("a/empty"), 0o777); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	os.Chtimes(s.local("a/d.bin"), mtime, mtime)

	for p, n := range files {
		fi, err := b.Stat(ctx, p)
		if err != nil || fi.Size != int64(n) || fi.IsDir || fi.Path != "/"+p {
			t.Errorf("Stat(%q) = %+v, %v; want a %d-byte file", p, fi, err, n)
		}
	}
	if fi, _ := b.Stat(ctx, "a/d.bin"); !fi.ModTime.Equal(mtime) {
		t.Errorf("mtime %v, want %v", fi.ModTime, mtime)
	}
	for _, p := range []string{"a", "a/empty", "", "/"} {
		if fi, err := b.Stat(ctx, p); err != nil || !fi.IsDir {
			t.Errorf("Stat(%q) = %+v, %v; want a directory", p, fi, err)
		}
	}
	if _, err := b.Stat(ctx, "nope/x"); !errors.Is(err, backend.ErrNotFound) || !strings.HasPrefix(err.Error(), "gridftp: stat nope/x: ") {
		t.Errorf("Stat of a missing file: %v", err)
	}

	type ent struct {
		path string
		size int64
		dir  bool
	}
	flat := func(fis []backend.FileInfo) []ent {
		var out []ent
		for _, fi := range fis {
			e := ent{fi.Path, fi.Size, fi.IsDir}
			if fi.IsDir {
				e.size = 0
			}
			out = append(out, e)
		}
		slices.SortFunc(out, func(a, b ent) int { return strings.Compare(a.path, b.path) })
		return out
	}
	for _, mlsd := range []bool{false, true} {
		forceMLSD = mlsd
		for _, tc := range []struct {
			dir       string
			recursive bool
			want      []ent
		}{
			{"", false, []ent{{"/a", 0, true}, {"/e.txt", 0, false}, {"/sp ace", 0, true}}},
			{"a", false, []ent{{"/a/b", 0, true}, {"/a/d.bin", 70000, false}, {"/a/empty", 0, true}}},
			{"/", true, []ent{{"/a", 0, true}, {"/a/b", 0, true}, {"/a/b/c.txt", 11, false}, {"/a/d.bin", 70000, false},
				{"/a/empty", 0, true}, {"/e.txt", 0, false}, {"/sp ace", 0, true}, {"/sp ace/x#y%z.dat", 5, false}}},
			{"a/empty", true, nil},
		} {
			fis, err := b.List(ctx, tc.dir, tc.recursive)
			if err != nil {
				t.Errorf("List(%q, %v) (MLSD %v): %v", tc.dir, tc.recursive, mlsd, err)
				continue
			}
			if got := flat(fis); !slices.Equal(got, tc.want) {
				t.Errorf("List(%q, %v) (MLSD %v) =\n%v\nwant\n%v", tc.dir, tc.recursive, mlsd, got, tc.want)
			}
		}
	}
	forceMLSD = false
	if _, err := b.List(ctx, "a/d.bin", false); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("List of a file: %v, want ErrInvalid", err)
	}
	if _, err := b.List(ctx, "nope", true); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("List of a missing directory: %v, want ErrNotFound", err)
	}
}

// TestListLarge lists a directory too large for one reply: the Globus
// server sends a long MLSC listing as preliminary 150 replies of about a
// thousand entries each before the final 250 with the rest, and every
// entry must be in the listing (over MLSD too).
func TestListLarge(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	const n = 2500
	s.put(t, "big/f0", nil, false)
	for i := 1; i < n; i++ {
		if err := os.WriteFile(s.local(fmt.Sprintf("big/f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, mlsd := range []bool{false, true} {
		forceMLSD = mlsd
		fis, err := b.List(ctx, "big", false)
		if err != nil {
			t.Fatalf("List (MLSD %v): %v", mlsd, err)
		}
		seen := map[string]bool{}
		for _, fi := range fis {
			seen[fi.Path] = true
		}
		if len(fis) != n || len(seen) != n {
			t.Errorf("List (MLSD %v): %d entries (%d distinct), want %d", mlsd, len(fis), len(seen), n)
		}
	}
	forceMLSD = false
}

// TestListLinks checks symbolic links on the server as backend/file
// treats local ones: a link to a file is listed as the file; a link to a
// directory is refused, naming it, rather than followed, which loops
// (the Globus server lists a link to "." as a directory, down to the
// kernel's 40 levels, and sluice cp -r copied every level).
func TestListLinks(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	s.put(t, "links/d/f", []byte("abc"), false)
	s.put(t, "loop/f", []byte("abc"), false)
	for link, target := range map[string]string{"links/flink": "d/f", "loop/self": ".", "dlink/to": "../links/d"} {
		os.MkdirAll(filepath.Dir(s.local(link)), 0o777)
		if err := os.Symlink(target, s.local(link)); err != nil {
			t.Fatal(err)
		}
	}
	fis, err := b.List(ctx, "links", true)
	if err != nil {
		t.Fatalf("List of a directory with a link to a file: %v", err)
	}
	var got []string
	for _, fi := range fis {
		if fi.IsDir {
			got = append(got, fi.Path+"/")
		} else {
			got = append(got, fmt.Sprintf("%s %d", fi.Path, fi.Size))
		}
	}
	slices.Sort(got)
	if want := []string{"/links/d/", "/links/d/f 3", "/links/flink 3"}; !slices.Equal(got, want) {
		t.Errorf("List(links) = %q, want %q", got, want)
	}
	for _, dir := range []string{"loop", "dlink"} {
		fis, err := b.List(ctx, dir, true)
		if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "symbolic link to a directory") {
			t.Errorf("List(%s) = %d entries, %v; want ErrInvalid naming the link to a directory", dir, len(fis), err)
		}
	}
}

func TestOpenRange(t *testing.T) {
	s := startServer(t)
	const size = 3<<20 + 12345
	data := randomBytes(size, 1)
	s.put(t, "f.bin", data, false)
	for _, par := range []int{1, 4} {
		b := newBackend(t, s, Options{Parallelism: par})
		ctx := ctxT(t)
		for _, tc := range []struct{ off, n int64 }{
			{0, -1}, {0, size}, {1000, 5000}, {1 << 20, 1<<20 + 1}, {size - 10, -1},
			{size - 10, 100}, // runs past the end: what there is
			{size, -1}, {size + 5, 10}, {123, 0}, {0, 1},
		} {
			rc, err := b.OpenRange(ctx, "f.bin", tc.off, tc.n)
			if err != nil {
				t.Errorf("p=%d OpenRange(%d, %d): %v", par, tc.off, tc.n, err)
				continue
			}
			got, err := io.ReadAll(rc)
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
			end := int64(size)
			if tc.n >= 0 {
				end = min(end, tc.off+tc.n)
			}
			want := data[min(tc.off, size):max(end, min(tc.off, size))]
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("p=%d OpenRange(%d, %d): %v, %s", par, tc.off, tc.n, err, firstDiff(got, want))
			}
		}
		if _, err := b.OpenRange(ctx, "nope.bin", 0, 10); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("p=%d OpenRange of a missing file: %v, want ErrNotFound", par, err)
		}
		if _, err := b.OpenRange(ctx, "nope.bin", 0, 0); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("p=%d empty OpenRange of a missing file: %v, want ErrNotFound", par, err)
		}
	}
	// Closing before the end kills the transfer and is not an error.
	b := newBackend(t, s, Options{})
	rc, err := b.OpenRange(ctxT(t), "f.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("early Close: %v", err)
	}
}

func TestWriteAt(t *testing.T) {
	s := startServer(t)
	for _, par := range []int{1, 4} {
		b := newBackend(t, s, Options{Parallelism: par})
		ctx := ctxT(t)
		const size = 5<<20 + 777
		data := randomBytes(size, uint64(par))
		// Ranges of uneven sizes, written in a shuffled order, into a
		// file in directories that do not exist yet.
		type rng struct{ off, n int64 }
		var rs []rng
		r := rand.New(rand.NewPCG(uint64(par), 2))
		for off := int64(0); off < size; {
			n := min(int64(1+r.IntN(1<<20)), size-off)
			rs = append(rs, rng{off, n})
			off += n
		}
		r.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		name := "new/dir/out.bin"
		if par > 1 {
			name = "new/par/out.bin"
		}
		for _, x := range rs {
			if err := b.WriteAt(ctx, name, x.off, bytes.NewReader(data[x.off:x.off+x.n]), x.n); err != nil {
				t.Fatalf("p=%d WriteAt(%d, %d): %v", par, x.off, x.n, err)
			}
		}
		if got := s.readLocal(t, name); !bytes.Equal(got, data) {
			t.Fatalf("p=%d assembled file: %s", par, firstDiff(got, data))
		}
		// Overwriting the middle leaves the rest alone, the tail too.
		patch := bytes.Repeat([]byte("P"), 4096)
		if err := b.WriteAt(ctx, name, 100000, bytes.NewReader(patch), int64(len(patch))); err != nil {
			t.Fatal(err)
		}
		copy(data[100000:], patch)
		if got := s.readLocal(t, name); !bytes.Equal(got, data) {
			t.Fatalf("p=%d after an overwrite: %s", par, firstDiff(got, data))
		}
	}
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)

	// An *os.File source is read from where it stands, not seeked to off.
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("0123456789abcdef"), 0o644)
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Seek(2, io.SeekStart)
	if err := b.WriteAt(ctx, "f.txt", 10, f, 4); err != nil {
		t.Fatal(err)
	}
	if got := s.readLocal(t, "f.txt"); string(got) != "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x002345" {
		t.Errorf("write from an *os.File: %q", got)
	}

	// Zero bytes: creates the file, and leaves an existing one alone.
	if err := b.WriteAt(ctx, "empty", 0, strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.local("empty")); err != nil || fi.Size() != 0 {
		t.Errorf("zero-byte write: %v, %v", fi, err)
	}
	if err := b.WriteAt(ctx, "f.txt", 3, strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(s.local("f.txt")); fi.Size() != 14 {
		t.Errorf("zero-byte write changed the size to %d", fi.Size())
	}

	// A short source is the caller's error.
	err = b.WriteAt(ctx, "short", 0, strings.NewReader("abc"), 10)
	if !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("short source: %v, want ErrInvalid", err)
	}
	// A failing source is reported as such.
	boom := errors.New("boom")
	err = b.WriteAt(ctx, "failing", 0, io.MultiReader(strings.NewReader("abc"), errReader{boom}), 10)
	if !errors.Is(err, boom) {
		t.Errorf("failing source: %v, want boom", err)
	}
	// Writing into a directory the server's user may not write:
	// permission. (Run as root, the server serves anonymous logins as
	// nobody, and the directory is root's; otherwise it is read-only.)
	os.Mkdir(s.local("ro"), 0o755)
	if os.Geteuid() != 0 {
		os.Chmod(s.local("ro"), 0o555)
	}
	err = b.WriteAt(ctx, "ro/x", 0, strings.NewReader("x"), 1)
	if !errors.Is(err, backend.ErrPermission) || !strings.HasPrefix(err.Error(), "gridftp: write ro/x: ") {
		t.Errorf("write into a read-only directory: %v, want ErrPermission", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestTruncate(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	data := randomBytes(100000, 3)
	check := func(p string, want []byte) {
		t.Helper()
		if got := s.readLocal(t, p); !bytes.Equal(got, want) {
			t.Errorf("%s: %s", p, firstDiff(got, want))
		}
	}
	// New files: sparse, of the right size.
	for _, size := range []int64{0, 1, 1 << 20} {
		p := "d/new" + string(rune('a'+size%26))
		if err := b.Truncate(ctx, p, size); err != nil {
			t.Fatalf("Truncate(new, %d): %v", size, err)
		}
		check(p, make([]byte, size))
	}
	if err := b.WriteAt(ctx, "f", 0, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := b.Truncate(ctx, "f", 100000); err != nil { // same size
		t.Fatal(err)
	}
	check("f", data)
	if err := b.Truncate(ctx, "f", 150000); err != nil { // grow
		t.Fatal(err)
	}
	check("f", append(slices.Clone(data), make([]byte, 50000)...))
	if err := b.Truncate(ctx, "f", 1234); err != nil { // shrink
		t.Fatal(err)
	}
	check("f", data[:1234])
	if err := b.Truncate(ctx, "f", 0); err != nil {
		t.Fatal(err)
	}
	check("f", nil)
	if err := b.Truncate(ctx, "d", 5); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Truncate of a directory: %v", err)
	}
	if err := b.Sync(ctx, "f"); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if err := b.Sync(ctx, "nope"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Sync of a missing file: %v", err)
	}
	if m, _ := filepath.Glob(s.local("*truncate*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}

func TestChecksum(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	files := map[string][]byte{
		"big.bin":   randomBytes(2<<20+3, 4),
		"small.txt": []byte("hello"),
		"empty":     nil,
		"zeros":     make([]byte, 7), // adler32 00070001: leading zeros kept
	}
	for p, d := range files {
		s.put(t, p, d, false)
	}
	for _, par := range []int{1, 3} {
		b := newBackend(t, s, Options{Parallelism: par})
		for p, d := range files {
			for _, algo := range backend.Algorithms {
				got, err := b.Checksum(ctx, p, algo)
				if want := sumOf(t, d, algo); err != nil || got != want {
					t.Errorf("p=%d Checksum(%s, %s) = %q, %v; want %q", par, p, algo, got, err, want)
				}
			}
		}
	}
	b := newBackend(t, s, Options{})
	for _, algo := range backend.Algorithms { // CKSM and streamed (crc32c)
		if _, err := b.Checksum(ctx, "nope", algo); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("Checksum(%s) of a missing file: %v", algo, err)
		}
	}
	if _, err := b.Checksum(ctx, "small.txt", "sha1"); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("unknown algorithm: %v", err)
	}
}

func TestRenameRemoveMkdir(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	write := func(p, content string) {
		t.Helper()
		if err := b.WriteAt(ctx, p, 0, strings.NewReader(content), int64(len(content))); err != nil {
			t.Fatal(err)
		}
	}
	isDirLocal := func(p string) bool { fi, err := os.Stat(s.local(p)); return err == nil && fi.IsDir() }

	if err := b.Mkdir(ctx, "m/n/o"); err != nil || !isDirLocal("m/n/o") {
		t.Fatalf("Mkdir with parents: %v", err)
	}
	if err := b.Mkdir(ctx, "m/n"); err != nil {
		t.Errorf("Mkdir of an existing directory: %v", err)
	}
	write("m/file", "x")
	if err := b.Mkdir(ctx, "m/file/sub"); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Mkdir below a file: %v, want ErrInvalid", err)
	}
	if err := b.Mkdir(ctx, "m/file"); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("Mkdir over a file: %v, want ErrInvalid", err)
	}

	write("r/a", "aaa")
	write("r/b", "bbbbbb")
	if err := b.Rename(ctx, "r/a", "r/new/dir/a2"); err != nil { // creates parents
		t.Fatal(err)
	}
	if got := string(s.readLocal(t, "r/new/dir/a2")); got != "aaa" {
		t.Errorf("renamed file holds %q", got)
	}
	if err := b.Rename(ctx, "r/new/dir/a2", "r/b"); err != nil { // replaces
		t.Fatal(err)
	}
	if got := string(s.readLocal(t, "r/b")); got != "aaa" {
		t.Errorf("replaced file holds %q", got)
	}
	if err := b.Rename(ctx, "r/nope", "r/x"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Rename of a missing file: %v, want ErrNotFound", err)
	}

	for _, tc := range []struct {
		p    string
		want error
	}{
		{"r/b", nil},
		{"r/b", backend.ErrNotFound},
		{"r/new", backend.ErrExist}, // not empty
		{"r/new/dir", nil},
		{"r/new", nil},
		{"", backend.ErrPermission},
		{"/", backend.ErrPermission},
	} {
		err := b.Remove(ctx, tc.p)
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("Remove(%q) = %v, want %v", tc.p, err, tc.want)
		}
	}
	if _, err := os.Stat(s.local("r/new")); !os.IsNotExist(err) {
		t.Errorf("r/new still there: %v", err)
	}
	// Removing a directory drops it from the cache of known ones: a
	// write below it must create it again.
	write("r/new/again", "z")
	if got := string(s.readLocal(t, "r/new/again")); got != "z" {
		t.Errorf("write after remove: %q", got)
	}
}

// TestNames checks that names with spaces and URL metacharacters survive
// both globus-url-copy's URLs and the control connection. (Non-ASCII
// names do not: the server drops those bytes; TestPaths checks they are
// refused.)
func TestNames(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	for _, p := range []string{"sp ace/a#b?%c;d+e.txt", " lead/trail ", "x&y=z@w:v,u$t!s'r(q)\tz"} {
		content := "data of " + p
		if err := b.WriteAt(ctx, p, 0, strings.NewReader(content), int64(len(content))); err != nil {
			t.Errorf("write %q: %v", p, err)
			continue
		}
		if got, err := os.ReadFile(s.local(p)); err != nil || string(got) != content {
			t.Errorf("%q on disk: %q, %v", p, got, err)
		}
		rc, err := b.OpenRange(ctx, p, 0, -1)
		if err != nil {
			t.Errorf("read %q: %v", p, err)
			continue
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != content {
			t.Errorf("read %q: %q", p, got)
		}
		if fi, err := b.Stat(ctx, p); err != nil || fi.Size != int64(len(content)) {
			t.Errorf("stat %q: %+v, %v", p, fi, err)
		}
		if sum, err := b.Checksum(ctx, p, "md5"); err != nil || sum != sumOf(t, []byte(content), "md5") {
			t.Errorf("checksum %q: %s, %v", p, sum, err)
		}
	}
	fis, err := b.List(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range fis {
		if !fi.IsDir {
			names = append(names, fi.Path)
		}
	}
	slices.Sort(names)
	want := []string{"/ lead/trail ", "/sp ace/a#b?%c;d+e.txt", "/x&y=z@w:v,u$t!s'r(q)\tz"}
	if !slices.Equal(names, want) {
		t.Errorf("listed %q, want %q", names, want)
	}
}

func TestCancel(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	s.put(t, "big", randomBytes(32<<20, 5), false)

	// A read in progress: cancelling kills globus-url-copy, and Read
	// reports the cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := b.OpenRange(ctx, "big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	_, err = io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("read after cancel: %v after %v, want context.Canceled", err, time.Since(start))
	}

	// A write whose source stalls: the deadline ends it.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("some bytes, then nothing"))
	start = time.Now()
	err = b.WriteAt(ctx, "stalled", 0, pr, 1<<20)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("stalled write: %v after %v, want DeadlineExceeded", err, time.Since(start))
	}

	// Control connection: an already cancelled context fails at once,
	// and a server that never answers is bounded by the deadline.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := b.Stat(ctx, "big"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with a cancelled context: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
			defer c.Close() // says nothing, ever
		}
	}()
	mute, err := New("ftp://"+l.Addr().String()+"/", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := mute.Stat(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("Stat on a mute server: %v after %v", err, time.Since(start))
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := mute.Mkdir(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Mkdir on a mute server, cancelled: %v", err)
	}
}

// TestStalledServer checks that a server that stops answering (frozen
// with SIGSTOP: its connections stay open, nothing is refused) fails
// every kind of operation within a bounded time even when the caller's
// context has no deadline, as sluice cp's has not: a control reply
// that does not come within Options.Stall, and a globus-url-copy run
// that moves no data for that long (-stall-timeout), end with an error
// that says so.
func TestStalledServer(t *testing.T) {
	s := startServer(t)
	const stall = 2 * time.Second
	b := newBackend(t, s, Options{Stall: stall})
	s.put(t, "big", randomBytes(8<<20, 9), false)
	ctx := context.Background()
	if _, err := b.Stat(ctx, "big"); err != nil { // a pooled connection, logged in
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer s.Signal(syscall.SIGCONT)
	bound := 4 * stall
	for _, tc := range []struct {
		op string
		f  func() error
	}{
		{"stat", func() error { _, err := b.Stat(ctx, "big"); return err }},
		{"mkdir", func() error { return b.Mkdir(ctx, "d/e") }},
		{"read", func() error {
			rc, err := b.OpenRange(ctx, "big", 0, -1)
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			return err
		}},
		{"write", func() error {
			return b.WriteAt(ctx, "up", 0, bytes.NewReader(make([]byte, 64<<20)), 64<<20)
		}},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- tc.f() }()
		select {
		case err := <-done:
			took := time.Since(start)
			if err == nil || took > bound || !strings.Contains(err.Error(), "2s") {
				t.Errorf("%s on a frozen server: %v after %v; want an error naming the %v bound within %v", tc.op, err, took, stall, bound)
			}
		case <-time.After(bound + 5*time.Second):
			t.Errorf("%s on a frozen server still blocked after %v", tc.op, time.Since(start))
		}
	}
	// A mute server that accepts connections and never greets.
	l, err := net.Listen("tcp", "127.0.0.1:0")
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
	mute, err := New("ftp://"+l.Addr().String()+"/", Options{Stall: stall})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, err := mute.Stat(ctx, "x"); done <- err }()
	select {
	case err := <-done:
		if err == nil || time.Since(start) > bound || !strings.Contains(err.Error(), "2s") {
			t.Errorf("Stat on a mute server: %v after %v", err, time.Since(start))
		}
	case <-time.After(bound + 5*time.Second):
		t.Errorf("Stat on a mute server still blocked after %v", time.Since(start))
	}
}

// TestGSIFTP checks what works without GSI: metadata operations refuse
// clearly; data operations go to globus-url-copy, which against this
// anonymous-only server fails to authenticate (permission).
func TestGSIFTP(t *testing.T) {
	s := startServer(t)
	s.put(t, "f", []byte("hello"), false)
	b, err := New(s.url("gsiftp"), Options{Env: []string{
		"X509_USER_PROXY=/nonexistent/proxy", "X509_USER_CERT=/nonexistent/cert", "X509_USER_KEY=/nonexistent/key"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	_, err = b.Stat(ctx, "f")
	if !errors.Is(err, ErrNoGSIControl) || !errors.Is(err, errors.ErrUnsupported) || !backend.Permanent(err) {
		t.Errorf("Stat over gsiftp: %v", err)
	}
	for op, err := range map[string]error{
		"mkdir":    b.Mkdir(ctx, "d"),
		"remove":   b.Remove(ctx, "f"),
		"rename":   b.Rename(ctx, "f", "g"),
		"truncate": b.Truncate(ctx, "f", 3),
	} {
		if !errors.Is(err, ErrNoGSIControl) {
			t.Errorf("%s over gsiftp: %v", op, err)
		}
	}
	_, err = b.OpenRange(ctx, "f", 0, -1)
	if !errors.Is(err, backend.ErrPermission) || !strings.Contains(err.Error(), "credential") {
		t.Errorf("OpenRange over gsiftp without credentials: %v, want ErrPermission", err)
	}
	if _, err := b.Checksum(ctx, "f", "md5"); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("Checksum over gsiftp without credentials: %v, want ErrPermission", err)
	}
}

func TestDownloadUpload(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{Concurrency: 3, Pipelining: true})
	ctx := ctxT(t)
	local := t.TempDir()
	var up, down []FilePair
	want := map[string][]byte{}
	for i := range 12 {
		p := "many/" + string(rune('a'+i%3)) + "/f " + string(rune('A'+i))
		want[p] = randomBytes(1000*i, uint64(i))
		name := filepath.Join(local, "src", filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(name), 0o755)
		os.WriteFile(name, want[p], 0o644)
		up = append(up, FilePair{Path: p, Local: name})
		down = append(down, FilePair{Path: p, Local: filepath.Join(local, "dst", filepath.FromSlash(p))})
	}
	if err := b.Upload(ctx, up); err != nil {
		t.Fatal(err)
	}
	if err := b.Download(ctx, down); err != nil {
		t.Fatal(err)
	}
	for i, f := range down {
		if got := s.readLocal(t, f.Path); !bytes.Equal(got, want[f.Path]) {
			t.Errorf("uploaded %s: %s", f.Path, firstDiff(got, want[f.Path]))
		}
		if got, err := os.ReadFile(f.Local); err != nil || !bytes.Equal(got, want[up[i].Path]) {
			t.Errorf("downloaded %s: %v", f.Path, err)
		}
	}
	err := b.Download(ctx, []FilePair{{Path: "nope", Local: filepath.Join(local, "x")}})
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("download of a missing file: %v, want ErrNotFound", err)
	}
}

// TestPool checks that idle control connections are reused, and that one
// the server has dropped is replaced rather than failing the operation.
func TestPool(t *testing.T) {
	s := startServer(t)
	b := newBackend(t, s, Options{})
	ctx := ctxT(t)
	s.put(t, "f", []byte("x"), false)
	if _, err := b.Stat(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	b.ctl.mu.Lock()
	if len(b.ctl.idle) != 1 {
		t.Fatalf("%d idle connections after one Stat, want 1", len(b.ctl.idle))
	}
	first := b.ctl.idle[0]
	b.ctl.mu.Unlock()
	if _, err := b.Stat(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if b.ctl.idle[0] != first {
		t.Error("the idle connection was not reused")
	}

	b.ctl.probeAfter = -1                       // probe before every reuse
	if _, err := b.Stat(ctx, "f"); err != nil { // probed with NOOP
		t.Fatal(err)
	}
	// The connection dies while idle (as after the server's idle
	// timeout): the probe notices, and a new one is dialled.
	b.ctl.idle[0].nc.Close()
	if _, err := b.Stat(ctx, "f"); err != nil {
		t.Fatalf("Stat after the idle connection died: %v", err)
	}
	if b.ctl.idle[0] == first {
		t.Error("the dead connection is back in the pool")
	}
}

// TestOpenRangeNative: a range that ends at the end of an ftp:// file is
// read over a pooled control connection (PASV, REST, RETR), without a
// globus-url-copy run, and the connection serves again once the range is
// read: a dataset of small files costs neither a process nor a login per
// file. A range that stops short of the end is the tool's; a read
// abandoned part-way leaves the backend working.
func TestOpenRangeNative(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	files := map[string][]byte{}
	for i := range 40 {
		p := fmt.Sprintf("small/f%02d", i)
		files[p] = randomBytes(i*997, uint64(i))
		s.put(t, p, files[p], false)
	}
	b := newBackend(t, s, Options{})
	for p, want := range files {
		for _, n := range []int64{-1, int64(len(want))} { // to the end, or exactly the file
			rc, err := b.OpenRange(ctx, p, 0, n)
			if err != nil {
				t.Fatalf("OpenRange(%s, 0, %d): %v", p, n, err)
			}
			got := make([]byte, len(want))
			if _, err := io.ReadFull(rc, got); err != nil || !bytes.Equal(got, want) {
				t.Errorf("OpenRange(%s, 0, %d): %v, %s", p, n, err, firstDiff(got, want))
			}
			if err := rc.Close(); err != nil { // without reading the end: a reader of exactly n bytes
				t.Errorf("Close: %v", err)
			}
		}
	}
	if got := b.nativeReads.Load(); got != int64(2*len(files)-2) { // f00 is empty: nothing to RETR
		t.Errorf("%d native reads, want %d", got, 2*len(files)-2)
	}
	if d := b.ctl.dials.Load(); d > 2 {
		t.Errorf("%d logins for %d sequential reads: the control connection was not reused", d, 2*len(files))
	}
	// The tail of a file, from an offset (REST).
	rc, err := b.OpenRange(ctx, "small/f39", 1000, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, files["small/f39"][1000:]) {
		t.Errorf("tail from 1000: %v, %s", err, firstDiff(got, files["small/f39"][1000:]))
	}
	rc.Close()
	// A range short of the end goes to the tool.
	before := b.nativeReads.Load()
	rc, err = b.OpenRange(ctx, "small/f39", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, files["small/f39"][10:110]) {
		t.Errorf("range 10+100: %v, %s", err, firstDiff(got, files["small/f39"][10:110]))
	}
	rc.Close()
	if b.nativeReads.Load() != before {
		t.Errorf("a range short of the end was read natively")
	}
	// Abandoned after one byte: the next operations still work.
	rc, err = b.OpenRange(ctx, "small/f39", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if fi, err := b.Stat(ctx, "small/f38"); err != nil || fi.Size != int64(len(files["small/f38"])) {
		t.Errorf("Stat after an abandoned read: %+v, %v", fi, err)
	}
	if _, err := b.OpenRange(ctx, "small/nope", 0, -1); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a missing file: %v, want ErrNotFound", err)
	}
	if _, err := b.OpenRange(ctx, "small", 0, -1); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("a directory: %v, want ErrInvalid", err)
	}
}

// TestWriteAtNative: writes of up to 64 MiB to an ftp:// server go over a
// pooled control connection (ESTO A at the offset, which leaves the rest
// of the file alone), not a globus-url-copy run each, and reuse it: the
// pieces of a file written out of order, and an empty write, land as the
// tool's would.
func TestWriteAtNative(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	b := newBackend(t, s, Options{})
	data := randomBytes(300_000, 7)
	pieces := [][2]int64{{200_000, 100_000}, {0, 50_000}, {150_000, 50_000}, {50_000, 100_000}}
	for _, pc := range pieces {
		if err := b.WriteAt(ctx, "dir/f.bin", pc[0], bytes.NewReader(data[pc[0]:pc[0]+pc[1]]), pc[1]); err != nil {
			t.Fatalf("WriteAt(%d, %d): %v", pc[0], pc[1], err)
		}
	}
	if got := s.readLocal(t, "dir/f.bin"); !bytes.Equal(got, data) {
		t.Errorf("file written in pieces: %s", firstDiff(got, data))
	}
	// An empty write makes a missing file and leaves an existing one.
	if err := b.WriteAt(ctx, "dir/empty", 0, bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAt(ctx, "dir/f.bin", 0, bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	if got := s.readLocal(t, "dir/empty"); len(got) != 0 {
		t.Errorf("empty write made %d bytes", len(got))
	}
	if got := s.readLocal(t, "dir/f.bin"); !bytes.Equal(got, data) {
		t.Errorf("an empty write changed the file: %s", firstDiff(got, data))
	}
	if got := b.nativeWrites.Load(); got != int64(len(pieces)+2) {
		t.Errorf("%d native writes, want %d", got, len(pieces)+2)
	}
	if d := b.ctl.dials.Load(); d > 2 {
		t.Errorf("%d logins for %d writes: the control connection was not reused", d, len(pieces)+2)
	}
	// A source shorter than n: an error naming it, and the backend
	// still works.
	err := b.WriteAt(ctx, "dir/short", 0, bytes.NewReader(data[:10]), 100)
	if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "10 of 100") {
		t.Errorf("short source: %v", err)
	}
	if fi, err := b.Stat(ctx, "dir/f.bin"); err != nil || fi.Size != int64(len(data)) {
		t.Errorf("Stat after a short write: %+v, %v", fi, err)
	}
}
