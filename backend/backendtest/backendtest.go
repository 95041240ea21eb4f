// Package backendtest owns the conformance suite of backend.Backend: one
// set of checks, written once against the contract backend/backend.go
// documents, that every storage backend runs against a real server (in
// the style of rclone's fstest/fstests). A backend's own _test file calls
// Run with a Fixture that gives a fresh backend on an empty directory of
// the server its tests already start, and declares, each with a one-line
// reason, what the backend does not do (an optional interface, a checksum
// algorithm, a way to take rights away). A declared difference is checked
// too (a backend that declares it lacks an interface must not implement
// it; an algorithm it cannot compute must be refused, not answered
// wrongly), so that no check is ever skipped in silence.
//
// The suite computes the expected checksums itself, with the standard
// library's adler32, md5, sha256 and crc32 (Castagnoli), each as the
// lowercase hex of its big-endian digest (backend/checksum.go's format),
// rather than through backend.Sum.
package backendtest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"hash/crc32"
	"io"
	mrand "math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// Env is one backend under test.
type Env struct {
	// B is the backend, rooted at Local. The fixture closes it in
	// t.Cleanup.
	B backend.Backend
	// Dir is the backend path of an empty directory B may write: every
	// path the suite makes is below it ("/" for a backend rooted at the
	// empty directory itself). Paths that try to leave the root start
	// from the root, not from Dir.
	Dir string
	// Local is the local directory that is B's root (the servers under
	// test run on this machine). Its parent must be a directory of the
	// test's own: the suite puts a file there that paths with ".." must
	// not reach, and checks that no other file appears there or in any
	// directory above.
	Local string
}

// Fixture is how a backend runs the suite.
type Fixture struct {
	// New returns a fresh backend on an empty, writable directory.
	// Run calls it once; the subtests share the backend, each in a
	// directory of its own below Env.Dir.
	New func(t *testing.T) Env
	// Deny, if set, takes away the backend's rights on directory dir
	// (a backend path below Env.Dir holding a file the suite wrote):
	// neither it nor anything in it may then be read, listed or
	// written. It returns the backend to ask (Env.B, or another client
	// with fewer rights), or nil and why it cannot on this machine (the
	// server runs as root, whom file permissions do not stop). Deny
	// gives the rights back in t.Cleanup. Without Deny, Lacks.Permissions
	// must say why.
	Deny func(t *testing.T, dir string) (backend.Backend, string)
	// Lacks declares what the backend does not do.
	Lacks Lacks
}

// Lacks declares, each with a one-line reason ("" for none: the backend
// does it), what a backend does not do. The suite checks each
// declaration: a declared interface the backend implements after all, or
// an algorithm it computes, is an error (drop the declaration); an
// interface it lacks without a declaration is an error too.
type Lacks struct {
	// Algorithms maps the algorithms of backend.Algorithms the backend
	// cannot compute to why: Checksum must refuse them, with an error.
	Algorithms map[string]string
	// RangeChecksummer, ExistingWriter and NoReplaceRenamer: why the
	// backend does not implement the optional interface.
	RangeChecksummer string
	ExistingWriter   string
	NoReplaceRenamer string
	// ModTimeSetter: why the backend cannot set a file's modification
	// time.
	ModTimeSetter string
	// Permissions: why there is no Fixture.Deny.
	Permissions string
	// DotNames: why the backend's listings leave out names that begin
	// with a dot (nginx's WebDAV listings do): Names then expects them
	// in Stat, reads and writes, not in List.
	DotNames string
	// Names maps the kinds of names (NameKinds) the backend refuses
	// to why: every operation on such a name must fail with
	// backend.ErrInvalid rather than act on another name.
	Names map[string]string
}

// The kinds of names the Names subtest tries, for Lacks.Names.
const (
	NonASCII     = "non-ASCII"
	Newline      = "newline"
	QuestionMark = "question mark"
)

// NameKinds are the kinds of names a backend may declare it refuses.
var NameKinds = []string{NonASCII, Newline, QuestionMark}

// names are the names the Names subtest writes, reads, lists, renames and
// removes, with their kind ("" for names every backend must take).
var names = []struct{ name, kind string }{
	{"space in name", ""},
	{" leading and trailing ", ""},
	{"hash#sign", ""},
	{"percent%41encoded", ""}, // must stay %41, not become A
	{"100%", ""},
	{"plus+equals=amp&at@", ""},
	{"semi;colon,comma", ""},
	{"quote'double\"", ""},
	{"brackets[x]{y}(z)", ""},
	{"tilde~dollar$star*", ""},
	{"back\\slash", ""},
	{"tab\tin", ""},
	{".hidden", ""},
	{"...", ""},
	{"-dash", ""},
	{strings.Repeat("long", 50), ""},
	{"question?mark", QuestionMark},
	{"new\nline", Newline},
	{"ünïcödé", NonASCII},
	{"日本語", NonASCII},
}

// LargeSize is the size of the file the Large subtest writes in pieces
// and reads back by ranges.
const LargeSize = 48 << 20

// Run runs the conformance suite against the backend f.New returns.
func Run(t *testing.T, f Fixture) {
	t.Helper()
	if f.New == nil {
		t.Fatal("backendtest: Fixture.New is nil")
	}
	env := f.New(t)
	if env.B == nil || env.Dir == "" || !filepath.IsAbs(env.Local) {
		t.Fatalf("backendtest: Fixture.New gave %+v: want a backend, its directory and the local directory of its root", env)
	}
	s := &suite{env: env, f: f}
	for _, st := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"StatMissing", s.statMissing},
		{"Mkdir", s.mkdir},
		{"WriteRead", s.writeRead},
		{"Truncate", s.truncate},
		{"List", s.list},
		{"Rename", s.rename},
		{"Remove", s.remove},
		{"Directories", s.directories},
		{"NotFound", s.notFound},
		{"Checksum", s.checksum},
		{"RangeChecksummer", s.rangeChecksummer},
		{"ExistingWriter", s.existingWriter},
		{"NoReplaceRenamer", s.noReplaceRenamer},
		{"ModTimeSetter", s.modTimeSetter},
		{"Names", s.names},
		{"BadRequests", s.badRequests},
		{"Escapes", s.escapes},
		{"Large", s.large},
		{"Permissions", s.permissions},
	} {
		t.Run(st.name, st.run)
	}
}

type suite struct {
	env Env
	f   Fixture
}

// whole reports whether the backend writes only whole files
// (backend.WholeWriter): the suite writes each file in one WriteAt, and
// checks that a range is refused instead.
func (s *suite) whole() bool {
	_, ok := s.env.B.(backend.WholeWriter)
	return ok
}

// p is the backend path of elems below the suite's directory.
func (s *suite) p(elems ...string) string {
	return path.Join(append([]string{"/", s.env.Dir}, elems...)...)
}

// canon is the canonical form of a backend path, to compare the paths a
// backend gives back (relative to its root, as backend.go says) with the
// ones asked for.
func canon(p string) string { return path.Clean("/" + p) }

// ctx is a context for one subtest: a bound for a backend that hangs,
// far beyond what any step takes.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// randomBytes is n reproducible pseudo-random bytes.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	mrand.NewChaCha8([32]byte{seed, 's', 'u', 'i', 't', 'e'}).Read(b)
	return b
}

// localSum is algo's checksum of data, computed here: the lowercase hex of
// the digest (adler32 and crc32c: big-endian, 8 digits).
func localSum(algo string, data []byte) (string, error) {
	var h hash.Hash
	switch algo {
	case "adler32":
		h = adler32.New()
	case "md5":
		h = md5.New()
	case "sha256":
		h = sha256.New()
	case "crc32c":
		h = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	default:
		return "", fmt.Errorf("backendtest does not know checksum algorithm %q of backend.Algorithms: teach localSum it", algo)
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// write writes data to p in one WriteAt.
func (s *suite) write(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := s.env.B.WriteAt(ctx(t), p, 0, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("WriteAt(%s, 0, %d bytes): %v", p, len(data), err)
	}
}

// readRange reads n bytes at off of p (an error from OpenRange, a Read or
// Close alike).
func readRange(c context.Context, b backend.Backend, p string, off, n int64) ([]byte, error) {
	rc, err := b.OpenRange(c, p, off, n)
	if err != nil {
		return nil, err
	}
	got, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return got, err
}

// wantContent checks that p holds exactly want, by Stat and a full read.
func (s *suite) wantContent(t *testing.T, p string, want []byte) {
	t.Helper()
	c := ctx(t)
	fi, err := s.env.B.Stat(c, p)
	if err != nil {
		t.Errorf("Stat(%s): %v", p, err)
	} else if fi.Size != int64(len(want)) || fi.IsDir {
		t.Errorf("Stat(%s) = size %d, dir %v; want a %d-byte file", p, fi.Size, fi.IsDir, len(want))
	}
	got, err := readRange(c, s.env.B, p, 0, -1)
	if err != nil {
		t.Errorf("OpenRange(%s, 0, -1): %v", p, err)
	} else if !bytes.Equal(got, want) {
		t.Errorf("OpenRange(%s, 0, -1): %s", p, diff(got, want))
	}
}

// diff describes how got differs from want.
func diff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if len(got) < 64 && len(want) < 64 {
		return fmt.Sprintf("got %q, want %q", got, want)
	}
	return fmt.Sprintf("%d bytes, want %d; they differ from byte %d", len(got), len(want), i)
}

// wantErr checks that err is kind.
func wantErr(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: %v, want %v", what, err, kind)
	}
}

// sane checks a modification time a backend gave for a file written by
// this test: set, and not far from now (the servers run on this machine;
// an hour's slack either way).
func sane(t *testing.T, what string, mt time.Time) {
	t.Helper()
	if d := time.Since(mt); mt.IsZero() || d > time.Hour || d < -time.Hour {
		t.Errorf("%s: modification time %v, want about now", what, mt)
	}
}

func (s *suite) statMissing(t *testing.T) {
	c := ctx(t)
	fi, err := s.env.B.Stat(c, s.env.Dir)
	if err != nil || !fi.IsDir {
		t.Errorf("Stat(%s), the suite's directory: %+v, %v; want a directory", s.env.Dir, fi, err)
	}
	for _, p := range []string{s.p("missing"), s.p("missing", "deeper", "f")} {
		_, err := s.env.B.Stat(c, p)
		wantErr(t, "Stat("+p+") of a missing file", err, backend.ErrNotFound)
	}
}

func (s *suite) mkdir(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	leaf := s.p("mkdir", "a", "b", "c")
	// "creates a directory and its parents"
	if err := b.Mkdir(c, leaf); err != nil {
		t.Fatalf("Mkdir(%s): %v", leaf, err)
	}
	for _, p := range []string{s.p("mkdir"), s.p("mkdir", "a"), s.p("mkdir", "a", "b"), leaf} {
		fi, err := b.Stat(c, p)
		if err != nil || !fi.IsDir || canon(fi.Path) != p {
			t.Errorf("Stat(%s) after Mkdir(%s): %+v, %v; want the directory", p, leaf, fi, err)
		}
	}
	// As mkdir -p: a directory that is there already is no error.
	if err := b.Mkdir(c, s.p("mkdir", "a")); err != nil {
		t.Errorf("Mkdir of an existing directory: %v", err)
	}
	if l, err := b.List(c, leaf, true); err != nil || len(l) != 0 {
		t.Errorf("List of a new directory: %+v, %v; want nothing", l, err)
	}
	// A file where the directory (or a parent) would go: Mkdir cannot
	// create it, and must not say it did.
	f := s.p("mkdir", "file")
	s.write(t, f, []byte("a file"))
	for _, p := range []string{f, f + "/sub"} {
		if err := b.Mkdir(c, p); err == nil {
			t.Errorf("Mkdir(%s), where a file is, succeeded", p)
		}
	}
	s.wantContent(t, f, []byte("a file"))
}

func (s *suite) writeRead(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	const size = 100_003
	data := randomBytes(size, 1)
	// Into directories that do not exist yet ("creating the file (and
	// its parent directories) if needed"), the last range first, in
	// pieces of uneven sizes.
	f := s.p("rw", "new", "deeper", "f")
	cuts := []int{0, 1, 4096, 50_000, 50_001, 99_000, size}
	order := []int{5, 0, 3, 2, 4, 1}
	if s.whole() {
		// Whole files only: one write, and a write of a range refused
		// before it changes anything.
		cuts, order = []int{0, size}, []int{0}
	}
	for k, i := range order {
		piece := data[cuts[i]:cuts[i+1]]
		if err := b.WriteAt(c, f, int64(cuts[i]), bytes.NewReader(piece), int64(len(piece))); err != nil {
			t.Fatalf("WriteAt(%s, %d, %d): %v", f, cuts[i], len(piece), err)
		}
		if k == 0 {
			// The file reaches the end of what was written.
			if fi, err := b.Stat(c, f); err != nil || fi.Size != size || fi.IsDir {
				t.Errorf("Stat after writing the last range first: %+v, %v; want %d bytes", fi, err, size)
			}
		}
	}
	fi, err := b.Stat(c, f)
	if err != nil {
		t.Fatalf("Stat(%s): %v", f, err)
	}
	if fi.Size != size || fi.IsDir || canon(fi.Path) != f || fi.Err != "" {
		t.Errorf("Stat(%s) = %+v; want a %d-byte file of that path", f, fi, size)
	}
	sane(t, "Stat("+f+")", fi.ModTime)
	for _, dir := range []string{s.p("rw", "new"), s.p("rw", "new", "deeper")} {
		if fi, err := b.Stat(c, dir); err != nil || !fi.IsDir {
			t.Errorf("Stat(%s), a parent WriteAt made: %+v, %v; want a directory", dir, fi, err)
		}
	}
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"whole file", 0, -1},
		{"whole file, sized", 0, size},
		{"first byte", 0, 1},
		{"middle", 4000, 50_000},
		{"middle to the end", 77_777, -1},
		{"range ending at the end", 90_000, size - 90_000},
		{"last byte", size - 1, 1},
		{"zero-length at the start", 0, 0},
		{"zero-length in the middle", 1234, 0},
		{"zero-length at the end", size, 0},
		{"to the end, from the end", size, -1}, // "n < 0: to the end": nothing
	} {
		end := int64(size)
		if tc.n >= 0 {
			end = tc.off + tc.n
		}
		got, err := readRange(c, b, f, tc.off, tc.n)
		if err != nil {
			t.Errorf("OpenRange %s (%d, %d): %v", tc.name, tc.off, tc.n, err)
		} else if want := data[tc.off:end]; !bytes.Equal(got, want) {
			t.Errorf("OpenRange %s (%d, %d): %s", tc.name, tc.off, tc.n, diff(got, want))
		}
	}

	if s.whole() {
		err := b.WriteAt(c, f, 60_000, strings.NewReader("a range"), 7)
		wantErr(t, "WriteAt of a range to a backend that writes whole files", err, backend.ErrInvalid)
		s.wantContent(t, f, data)
		// A whole write replaces the file.
		data = randomBytes(size/2, 9)
		s.write(t, f, data)
		s.wantContent(t, f, data)
	}
	// Writing into an existing file changes its n bytes at off, and
	// nothing else: no truncation.
	patch := []byte("patched in place")
	if s.whole() {
		patch = nil // (a write of nothing at 60,000, refused below)
	}
	if !s.whole() {
		if err := b.WriteAt(c, f, 60_000, bytes.NewReader(patch), int64(len(patch))); err != nil {
			t.Fatalf("WriteAt into the existing file: %v", err)
		}
		copy(data[60_000:], patch)
		s.wantContent(t, f, data)
	}

	// n bytes read from r: what r holds beyond them is not written.
	g := s.p("rw", "g")
	if err := b.WriteAt(c, g, 0, strings.NewReader("abc and more"), 3); err != nil {
		t.Fatalf("WriteAt of 3 bytes of a longer reader: %v", err)
	}
	s.wantContent(t, g, []byte("abc"))

	// Nothing to write leaves an existing file alone...
	if !s.whole() {
		if err := b.WriteAt(c, f, 10, strings.NewReader(""), 0); err != nil {
			t.Fatalf("WriteAt of 0 bytes into an existing file: %v", err)
		}
		s.wantContent(t, f, data)
	}
	// ... and still creates a missing one.
	empty := s.p("rw", "empty")
	if err := b.WriteAt(c, empty, 0, strings.NewReader(""), 0); err != nil {
		t.Fatalf("WriteAt of 0 bytes: %v", err)
	}
	s.wantContent(t, empty, nil)

	// "writes exactly n bytes read from r": a reader with fewer is an
	// error, not a short file reported as written.
	if err := b.WriteAt(c, s.p("rw", "short"), 0, strings.NewReader("abc"), 10); err == nil {
		t.Error("WriteAt of 10 bytes from a reader of 3 succeeded")
	}

	if err := b.Sync(c, f); err != nil {
		t.Errorf("Sync(%s): %v", f, err)
	}
}

func (s *suite) truncate(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	if s.whole() {
		// Whole files only: Truncate makes an empty file, and nothing
		// else (the engine never allocates such a backend's files).
		if err := b.Mkdir(c, s.p("truncate")); err != nil {
			t.Fatal(err)
		}
		e := s.p("truncate", "empty")
		if err := b.Truncate(c, e, 0); err != nil {
			t.Fatalf("Truncate of a new file to 0: %v", err)
		}
		s.wantContent(t, e, nil)
		err := b.Truncate(c, s.p("truncate", "sized"), 1000)
		wantErr(t, "Truncate to 1000 bytes on a backend that writes whole files", err, backend.ErrInvalid)
		return
	}
	// "creating it if needed": a new file of the size, all zeros.
	n := s.p("truncate", "new")
	if err := b.Mkdir(c, s.p("truncate")); err != nil {
		t.Fatal(err)
	}
	if err := b.Truncate(c, n, 1000); err != nil {
		t.Fatalf("Truncate of a new file: %v", err)
	}
	s.wantContent(t, n, make([]byte, 1000))

	f := s.p("truncate", "f")
	data := randomBytes(20_000, 2)
	s.write(t, f, data)
	for _, tc := range []struct {
		name string
		size int
		want []byte
	}{
		{"same size", 20_000, data},
		{"grow", 25_000, append(slices.Clone(data), make([]byte, 5000)...)},
		{"shrink", 1234, data[:1234]},
		{"grow again", 1500, append(slices.Clone(data[:1234]), make([]byte, 1500-1234)...)},
		{"to zero", 0, nil},
	} {
		if err := b.Truncate(c, f, int64(tc.size)); err != nil {
			t.Errorf("Truncate %s to %d: %v", tc.name, tc.size, err)
			continue
		}
		t.Run(tc.name, func(t *testing.T) { s.wantContent(t, f, tc.want) })
	}
	// An allocated file filled in afterwards, as the engine does.
	alloc := s.p("truncate", "alloc")
	if err := b.Truncate(c, alloc, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	for _, r := range [][2]int{{half, len(data)}, {0, half}} {
		if err := b.WriteAt(c, alloc, int64(r[0]), bytes.NewReader(data[r[0]:r[1]]), int64(r[1]-r[0])); err != nil {
			t.Fatal(err)
		}
	}
	s.wantContent(t, alloc, data)
	if err := b.Sync(c, alloc); err != nil {
		t.Errorf("Sync(%s): %v", alloc, err)
	}
}

// entry is a listing entry as the suite compares them.
type entry struct {
	path string
	size int64 // -1: a directory
}

func (s *suite) list(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	files := map[string]int{"a": 1, "b/c": 22, "b/d/e": 333, "b/d/f": 0}
	for name, n := range files {
		s.write(t, s.p("list", name), randomBytes(n, 3))
	}
	if err := b.Mkdir(c, s.p("list", "empty")); err != nil {
		t.Fatal(err)
	}
	file := func(name string) entry { return entry{s.p("list", name), int64(files[name])} }
	dir := func(name string) entry { return entry{s.p("list", name), -1} }
	for _, tc := range []struct {
		dir       string
		recursive bool
		want      []entry
	}{
		{"", false, []entry{file("a"), dir("b"), dir("empty")}},
		{"", true, []entry{file("a"), dir("b"), file("b/c"), dir("b/d"), file("b/d/e"), file("b/d/f"), dir("empty")}},
		{"b", false, []entry{file("b/c"), dir("b/d")}},
		{"b", true, []entry{file("b/c"), dir("b/d"), file("b/d/e"), file("b/d/f")}},
		{"empty", false, nil},
		{"empty", true, nil},
	} {
		p := s.p("list", tc.dir)
		fis, err := b.List(c, p, tc.recursive)
		if err != nil {
			t.Errorf("List(%s, recursive %v): %v", p, tc.recursive, err)
			continue
		}
		var got []entry
		for _, fi := range fis {
			e := entry{canon(fi.Path), fi.Size}
			if fi.IsDir {
				e.size = -1
			} else {
				sane(t, "List("+p+") entry "+fi.Path, fi.ModTime)
			}
			if fi.Err != "" {
				t.Errorf("List(%s): %s listed with error %q", p, fi.Path, fi.Err)
			}
			got = append(got, e)
		}
		// Entries are named from the root, in no order the contract
		// gives.
		slices.SortFunc(got, func(a, b entry) int { return strings.Compare(a.path, b.path) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%s, recursive %v):\n got %v\nwant %v", p, tc.recursive, got, tc.want)
		}
	}
}

func (s *suite) rename(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	a, moved := []byte("the first file's bytes"), s.p("rename", "moved")
	from := s.p("rename", "from")
	s.write(t, from, a)
	if err := b.Rename(c, from, moved); err != nil {
		t.Fatalf("Rename(%s, %s): %v", from, moved, err)
	}
	s.wantContent(t, moved, a)
	_, err := b.Stat(c, from)
	wantErr(t, "Stat of a renamed file's old name", err, backend.ErrNotFound)

	// "replacing to": onto an existing, longer file.
	other := s.p("rename", "other")
	s.write(t, other, randomBytes(5000, 4))
	if err := b.Rename(c, moved, other); err != nil {
		t.Fatalf("Rename onto an existing file: %v", err)
	}
	s.wantContent(t, other, a)
	_, err = b.Stat(c, moved)
	wantErr(t, "Stat of the name renamed onto another file", err, backend.ErrNotFound)

	// Into another (existing) directory.
	if err := b.Mkdir(c, s.p("rename", "sub")); err != nil {
		t.Fatal(err)
	}
	there := s.p("rename", "sub", "there")
	if err := b.Rename(c, other, there); err != nil {
		t.Fatalf("Rename into another directory: %v", err)
	}
	s.wantContent(t, there, a)
}

func (s *suite) remove(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	f := s.p("remove", "f")
	s.write(t, f, []byte("x"))
	if err := b.Remove(c, f); err != nil {
		t.Fatalf("Remove(%s): %v", f, err)
	}
	_, err := b.Stat(c, f)
	wantErr(t, "Stat of a removed file", err, backend.ErrNotFound)
	wantErr(t, "Remove of a file removed already", b.Remove(c, f), backend.ErrNotFound)
	wantErr(t, "Remove below a missing directory", b.Remove(c, s.p("remove", "nodir", "f")), backend.ErrNotFound)

	// "or an empty directory": only an empty one.
	empty := s.p("remove", "empty")
	if err := b.Mkdir(c, empty); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(c, empty); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	_, err = b.Stat(c, empty)
	wantErr(t, "Stat of a removed directory", err, backend.ErrNotFound)
	full := s.p("remove", "full")
	s.write(t, full+"/f", []byte("kept"))
	if err := b.Remove(c, full); err == nil {
		t.Error("Remove of a directory that is not empty succeeded")
	}
	s.wantContent(t, full+"/f", []byte("kept"))
}

// result is what one operation returned.
type result struct {
	name string
	err  error
}

// directories: what needs a file's bytes fails on a directory, and
// permanently (backend.Permanent: a directory does not become a file by
// retrying), leaving it as it was.
func (s *suite) directories(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	dir := s.p("dirs", "d")
	s.write(t, dir+"/f", []byte("in the directory"))
	for _, op := range []result{
		{"OpenRange", func() error { _, err := readRange(c, b, dir, 0, -1); return err }()},
		{"Checksum", func() error { _, err := b.Checksum(c, dir, s.algo()); return err }()},
		{"WriteAt", b.WriteAt(c, dir, 0, strings.NewReader("x"), 1)},
		{"Truncate", b.Truncate(c, dir, 1)},
	} {
		if op.err == nil || !backend.Permanent(op.err) {
			t.Errorf("%s of a directory: %v, want a permanent error", op.name, op.err)
		}
	}
	if fi, err := b.Stat(c, dir); err != nil || !fi.IsDir {
		t.Errorf("Stat(%s) after refused requests: %+v, %v; want the directory", dir, fi, err)
	}
	s.wantContent(t, dir+"/f", []byte("in the directory"))
}

func (s *suite) notFound(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	if err := b.Mkdir(c, s.p("notfound")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.p("notfound", "f"), s.p("notfound", "nodir", "f")} {
		ops := []result{
			{"Stat", func() error { _, err := b.Stat(c, p); return err }()},
			{"List", func() error { _, err := b.List(c, p, true); return err }()},
			{"OpenRange whole", func() error { _, err := readRange(c, b, p, 0, -1); return err }()},
			{"OpenRange part", func() error { _, err := readRange(c, b, p, 1, 2); return err }()},
			{"OpenRange empty", func() error { _, err := readRange(c, b, p, 0, 0); return err }()},
			{"Remove", b.Remove(c, p)},
			{"Rename from", b.Rename(c, p, s.p("notfound", "to"))},
		}
		for _, algo := range backend.Algorithms {
			if _, lacks := s.f.Lacks.Algorithms[algo]; lacks {
				continue
			}
			_, err := b.Checksum(c, p, algo)
			ops = append(ops, result{"Checksum " + algo, err})
		}
		if rc, ok := b.(backend.RangeChecksummer); ok {
			_, err := rc.ChecksumRange(c, p, s.algo(), 0, 0)
			ops = append(ops, result{"ChecksumRange", err})
		}
		for _, op := range ops {
			wantErr(t, op.name+" of missing "+p, op.err, backend.ErrNotFound)
		}
	}
	// A failed rename made nothing.
	_, err := b.Stat(c, s.p("notfound", "to"))
	wantErr(t, "Stat of the target of a failed Rename", err, backend.ErrNotFound)
}

func (s *suite) checksum(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	for algo := range s.f.Lacks.Algorithms {
		if !slices.Contains(backend.Algorithms, algo) {
			t.Errorf("Lacks.Algorithms names %q, which is not in backend.Algorithms", algo)
		}
	}
	files := map[string][]byte{
		"empty": nil,
		"hello": []byte("hello, world\n"),
		"zeros": make([]byte, 7), // adler32 00070001: leading zeros kept
		"large": randomBytes(1<<20+7, 5),
	}
	for name, data := range files {
		s.write(t, s.p("checksum", name), data)
	}
	for _, algo := range backend.Algorithms {
		for name, data := range files {
			p := s.p("checksum", name)
			got, err := b.Checksum(c, p, algo)
			if why, lacks := s.f.Lacks.Algorithms[algo]; lacks {
				if err == nil {
					t.Errorf("Checksum(%s, %s) = %q, declared not computed (%s): drop the declaration, or refuse", p, algo, got, why)
				}
				continue
			}
			want, lerr := localSum(algo, data)
			if lerr != nil {
				t.Error(lerr)
				continue
			}
			if err != nil || got != want {
				t.Errorf("Checksum(%s, %s) = %q, %v; want %q", p, algo, got, err, want)
			}
		}
	}
	_, err := b.Checksum(c, s.p("checksum", "hello"), "sha1")
	wantErr(t, "Checksum with an algorithm not in backend.Algorithms", err, backend.ErrInvalid)
}

// implements checks a backend's optional interface against its
// declaration, and says whether to check what it does.
func implements(t *testing.T, name string, ok bool, lacks string) bool {
	t.Helper()
	switch {
	case ok && lacks != "":
		t.Errorf("the backend implements %s, but is declared to lack it (%s): drop the declaration", name, lacks)
	case !ok && lacks == "":
		t.Errorf("the backend does not implement backend.%s: implement it, or declare why not in Lacks.%s", name, name)
	case !ok:
		t.Skipf("declared: %s", lacks)
	}
	return ok
}

func (s *suite) rangeChecksummer(t *testing.T) {
	rc, ok := s.env.B.(backend.RangeChecksummer)
	if !implements(t, "RangeChecksummer", ok, s.f.Lacks.RangeChecksummer) {
		return
	}
	c := ctx(t)
	const size = 300_001
	data := randomBytes(size, 6)
	f := s.p("rangesum", "f")
	s.write(t, f, data)
	for _, algo := range backend.Algorithms {
		if _, lacks := s.f.Lacks.Algorithms[algo]; lacks {
			continue
		}
		for _, r := range [][2]int64{{0, size}, {0, 1}, {12_345, 100_000}, {size - 10, 10}, {777, 0}, {size, 0}} {
			want, err := localSum(algo, data[r[0]:r[0]+r[1]])
			if err != nil {
				t.Fatal(err)
			}
			got, err := rc.ChecksumRange(c, f, algo, r[0], r[1])
			if err != nil || got != want {
				t.Errorf("ChecksumRange(%s, %d, %d) = %q, %v; want %q", algo, r[0], r[1], got, err, want)
			}
		}
	}
	// "a range past the end of the file is an ErrInvalid"
	for _, r := range [][2]int64{{size - 10, 11}, {size + 1, 0}, {size + 5, 10}, {-1, 10}, {0, -1}} {
		_, err := rc.ChecksumRange(c, f, "md5", r[0], r[1])
		wantErr(t, fmt.Sprintf("ChecksumRange(%d, %d) of a %d-byte file", r[0], r[1], size), err, backend.ErrInvalid)
	}
}

func (s *suite) existingWriter(t *testing.T) {
	ew, ok := s.env.B.(backend.ExistingWriter)
	if !implements(t, "ExistingWriter", ok, s.f.Lacks.ExistingWriter) {
		return
	}
	c := ctx(t)
	b := s.env.B
	f := s.p("existing", "f")
	if err := b.Truncate(c, f, 6); err != nil {
		t.Fatal(err)
	}
	if err := ew.WriteAtExisting(c, f, 3, strings.NewReader("def"), 3); err != nil {
		t.Fatalf("WriteAtExisting into an existing file: %v", err)
	}
	s.wantContent(t, f, []byte("\x00\x00\x00def"))
	// Not there, or its directory not there: ErrNotFound, and nothing
	// made.
	for _, p := range []string{s.p("existing", "missing"), s.p("existing", "nodir", "f")} {
		err := ew.WriteAtExisting(c, p, 3, strings.NewReader("def"), 3)
		wantErr(t, "WriteAtExisting("+p+")", err, backend.ErrNotFound)
		_, err = b.Stat(c, p)
		wantErr(t, "Stat after a refused WriteAtExisting("+p+")", err, backend.ErrNotFound)
	}
	_, err := b.Stat(c, s.p("existing", "nodir"))
	wantErr(t, "Stat of the directory a refused WriteAtExisting named", err, backend.ErrNotFound)
}

func (s *suite) noReplaceRenamer(t *testing.T) {
	nr, ok := s.env.B.(backend.NoReplaceRenamer)
	if !implements(t, "NoReplaceRenamer", ok, s.f.Lacks.NoReplaceRenamer) {
		return
	}
	c := ctx(t)
	ours, theirs := s.p("noreplace", ".f.part"), s.p("noreplace", "f")
	s.write(t, ours, []byte("ours"))
	s.write(t, theirs, []byte("theirs, longer"))
	// "fails with ErrExist (and changes nothing) when to exists"
	wantErr(t, "RenameNoReplace onto a file", nr.RenameNoReplace(c, ours, theirs), backend.ErrExist)
	s.wantContent(t, theirs, []byte("theirs, longer"))
	s.wantContent(t, ours, []byte("ours"))
	dir := s.p("noreplace", "dir")
	if err := s.env.B.Mkdir(c, dir); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "RenameNoReplace onto a directory", nr.RenameNoReplace(c, ours, dir), backend.ErrExist)
	s.wantContent(t, ours, []byte("ours"))
	free := s.p("noreplace", "g")
	if err := nr.RenameNoReplace(c, ours, free); err != nil {
		t.Fatalf("RenameNoReplace to a free name: %v", err)
	}
	s.wantContent(t, free, []byte("ours"))
	_, err := s.env.B.Stat(c, ours)
	wantErr(t, "Stat of a renamed file's old name", err, backend.ErrNotFound)
}

func (s *suite) modTimeSetter(t *testing.T) {
	ms, ok := s.env.B.(backend.ModTimeSetter)
	if !implements(t, "ModTimeSetter", ok, s.f.Lacks.ModTimeSetter) {
		return
	}
	c := ctx(t)
	p := s.p("mtime", "f")
	s.write(t, p, []byte("dated"))
	// A time with a fraction of a second: kept to the microsecond at
	// least.
	at := time.Date(2019, 11, 5, 6, 7, 8, 123456000, time.UTC)
	if err := ms.SetModTime(c, p, at); err != nil {
		t.Fatalf("SetModTime: %v", err)
	}
	fi, err := s.env.B.Stat(c, p)
	if err != nil {
		t.Fatal(err)
	}
	if d := fi.ModTime.Sub(at); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("Stat after SetModTime(%s): %s", at, fi.ModTime)
	}
	s.wantContent(t, p, []byte("dated"))
	err = ms.SetModTime(c, s.p("mtime", "missing"), at)
	wantErr(t, "SetModTime of a missing file", err, backend.ErrNotFound)
}

func (s *suite) names(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	for kind := range s.f.Lacks.Names {
		if !slices.Contains(NameKinds, kind) {
			t.Errorf("Lacks.Names declares %q, which is not one of NameKinds %q", kind, NameKinds)
		}
	}
	dir := s.p("names")
	if err := b.Mkdir(c, dir); err != nil {
		t.Fatal(err)
	}
	localDir := filepath.Join(s.env.Local, filepath.FromSlash(dir))
	var want []string
	for _, n := range names {
		p := dir + "/" + n.name
		content := []byte("the file named " + n.name)
		if why, refused := s.f.Lacks.Names[n.kind]; n.kind != "" && refused {
			for _, op := range []result{
				{"WriteAt", b.WriteAt(c, p, 0, bytes.NewReader(content), int64(len(content)))},
				{"Stat", func() error { _, err := b.Stat(c, p); return err }()},
				{"OpenRange", func() error { _, err := readRange(c, b, p, 0, -1); return err }()},
				{"Mkdir", b.Mkdir(c, p)},
			} {
				wantErr(t, fmt.Sprintf("%s(%q), a name declared refused (%s)", op.name, n.name, why), op.err, backend.ErrInvalid)
			}
			continue
		}
		if err := b.WriteAt(c, p, 0, bytes.NewReader(content), int64(len(content))); err != nil {
			t.Errorf("WriteAt(%q): %v", p, err)
			continue
		}
		want = append(want, p)
		if fi, err := b.Stat(c, p); err != nil || canon(fi.Path) != p || fi.Size != int64(len(content)) {
			t.Errorf("Stat(%q) = %+v, %v; want its %d bytes, under its own name", p, fi, err, len(content))
		}
		if got, err := readRange(c, b, p, 0, -1); err != nil || !bytes.Equal(got, content) {
			t.Errorf("OpenRange(%q): %v, %s", p, err, diff(got, content))
		}
		// The server keeps the name as given.
		if got, err := os.ReadFile(filepath.Join(localDir, n.name)); err != nil || !bytes.Equal(got, content) {
			t.Errorf("%q on the server's disk: %v, %s", n.name, err, diff(got, content))
		}
	}
	fis, err := b.List(c, dir, false)
	if err != nil {
		t.Fatalf("List(%s): %v", dir, err)
	}
	var got []string
	for _, fi := range fis {
		got = append(got, canon(fi.Path))
	}
	listed := want
	if s.f.Lacks.DotNames != "" {
		listed = slices.DeleteFunc(slices.Clone(want), func(p string) bool { return strings.HasPrefix(path.Base(p), ".") })
		if len(got) > len(listed) {
			t.Errorf("List(%s) lists names that begin with a dot, but they are declared left out (%s): drop the declaration", dir, s.f.Lacks.DotNames)
		}
	}
	slices.Sort(got)
	slices.Sort(listed)
	if !slices.Equal(got, listed) {
		t.Errorf("List(%s):\n got %q\nwant %q", dir, got, listed)
	}
	for _, p := range want {
		to := p + ".renamed"
		if err := b.Rename(c, p, to); err != nil {
			t.Errorf("Rename(%q, %q): %v", p, to, err)
			continue
		}
		if err := b.Remove(c, to); err != nil {
			t.Errorf("Remove(%q): %v", to, err)
		}
	}
	if ents, err := os.ReadDir(localDir); err != nil || len(ents) != 0 {
		t.Errorf("after renaming and removing every name, the server's directory holds %d entries, %v", len(ents), err)
	}
}

// badRequests: offsets and sizes no file can have are the request's
// fault (backend.ErrInvalid, permanent), and change nothing.
func (s *suite) badRequests(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	f := s.p("bad", "f")
	s.write(t, f, []byte("unchanged"))
	for _, op := range []result{
		{"OpenRange at offset -1", func() error { _, err := readRange(c, b, f, -1, 5); return err }()},
		{"WriteAt at offset -1", b.WriteAt(c, f, -1, strings.NewReader("x"), 1)},
		{"WriteAt of -1 bytes", b.WriteAt(c, f, 0, strings.NewReader("x"), -1)},
		{"Truncate to -1", b.Truncate(c, f, -1)},
	} {
		wantErr(t, op.name, op.err, backend.ErrInvalid)
	}
	s.wantContent(t, f, []byte("unchanged"))
}

// escapes tries paths that name something outside the backend's root:
// each must fail with a permanent error, or name something inside. The
// suite puts a file beside the root, which none may read, list, change or
// remove, and checks that no file the requests name appears outside.
func (s *suite) escapes(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	algo := s.algo()
	parent := filepath.Dir(s.env.Local)
	var tag [6]byte
	rand.Read(tag[:])
	secretName := "outside-" + hex.EncodeToString(tag[:])
	secret := []byte("a file beside the backend's root: " + secretName)
	secretPath := filepath.Join(parent, secretName)
	if err := os.WriteFile(secretPath, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secretPath) })
	refuse := func(op, p string, err error) bool {
		t.Helper()
		if err != nil && !backend.Permanent(err) {
			t.Errorf("%s(%q): %v, want a permanent error or a path inside the root", op, p, err)
		}
		return err != nil
	}

	// The root's parent, named as a client might: sent as they are,
	// not cleaned here (which would take the ".."s away).
	depth := len(strings.FieldsFunc(s.env.Dir, func(r rune) bool { return r == '/' }))
	ups := []string{"..", "/..", "a/../..", "/a/b/../../..", strings.TrimSuffix(s.env.Dir, "/") + "/" + strings.Repeat("../", depth) + ".."}
	var toSecret []string
	for _, up := range ups {
		toSecret = append(toSecret, up+"/"+secretName)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	isOutside := func(data []byte) bool {
		return bytes.Equal(data, secret) || (len(passwd) > 0 && bytes.Equal(data, passwd))
	}
	for _, p := range append(toSecret, "/../../../../../../../../../../etc/passwd", "/etc/passwd") {
		fi, err := b.Stat(c, p)
		if !refuse("Stat", p, err) && !fi.IsDir && (fi.Size == int64(len(secret)) || (len(passwd) > 0 && fi.Size == int64(len(passwd)))) {
			t.Errorf("Stat(%q) = %+v: the file outside the root?", p, fi)
		}
		data, err := readRange(c, b, p, 0, -1)
		if !refuse("OpenRange", p, err) && isOutside(data) {
			t.Errorf("OpenRange(%q) read a file outside the root", p)
		}
		sum, err := b.Checksum(c, p, algo)
		if !refuse("Checksum", p, err) {
			for _, out := range [][]byte{secret, passwd} {
				if want, _ := localSum(algo, out); len(out) > 0 && sum == want {
					t.Errorf("Checksum(%q) summed a file outside the root", p)
				}
			}
		}
	}
	for _, up := range ups {
		fis, err := b.List(c, up, false)
		refuse("List", up, err)
		for _, fi := range fis {
			if path.Base(fi.Path) == secretName {
				t.Errorf("List(%q) lists %s, beside the root", up, fi.Path)
			}
		}
	}
	// Each may fail, or act on a file inside; none may touch the one
	// outside.
	for _, p := range toSecret {
		refuse("WriteAt", p, b.WriteAt(c, p, 0, strings.NewReader("overwritten"), 11))
		refuse("Truncate", p, b.Truncate(c, p, 1))
		refuse("Remove", p, b.Remove(c, p))
		refuse("Rename from", p, b.Rename(c, p, s.p("escapes", "taken")))
		if got, err := os.ReadFile(secretPath); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("after requests on %q, the file beside the root is %q, %v", p, got, err)
		}
	}

	// Files and directories to make outside: none may appear there.
	made := "escaped-" + hex.EncodeToString(tag[:])
	inside := s.p("escapes", "inside")
	up := strings.Repeat("../", 12)
	for _, p := range []string{"../" + made, "/../" + made, "a/../../" + made, "/../../" + made, "/" + up + made, up + made + "/sub/f"} {
		refuse("WriteAt", p, b.WriteAt(c, p, 0, strings.NewReader("escaped"), 7))
		refuse("Truncate", p+"-t", b.Truncate(c, p+"-t", 7))
		refuse("Mkdir", p+"-d", b.Mkdir(c, p+"-d"))
		s.write(t, inside, []byte("inside"))
		refuse("Rename to", p+"-r", b.Rename(c, inside, p+"-r"))
	}
	for dir := parent; ; dir = filepath.Dir(dir) {
		for _, suffix := range []string{"", "-t", "-d", "-r"} {
			if _, err := os.Lstat(filepath.Join(dir, made+suffix)); err == nil {
				t.Errorf("%s was made outside the backend's root", filepath.Join(dir, made+suffix))
				os.RemoveAll(filepath.Join(dir, made+suffix))
			}
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
}

// algo is an algorithm the backend computes.
func (s *suite) algo() string {
	for _, a := range []string{"md5", "sha256", "adler32", "crc32c"} {
		if _, lacks := s.f.Lacks.Algorithms[a]; !lacks {
			return a
		}
	}
	return "md5"
}

func (s *suite) large(t *testing.T) {
	c := ctx(t)
	b := s.env.B
	data := randomBytes(LargeSize, 7)
	f := s.p("large", "f")
	// Six pieces of uneven sizes, written out of order (whole, where
	// the backend writes only whole files).
	cuts := []int{0, 9<<20 + 1, 16 << 20, 24<<20 - 3, 33 << 20, 40<<20 + 12345, LargeSize}
	order := []int{3, 5, 0, 2, 4, 1}
	if s.whole() {
		cuts, order = []int{0, LargeSize}, []int{0}
	}
	for _, i := range order {
		piece := data[cuts[i]:cuts[i+1]]
		if err := b.WriteAt(c, f, int64(cuts[i]), bytes.NewReader(piece), int64(len(piece))); err != nil {
			t.Fatalf("WriteAt(%d, %d): %v", cuts[i], len(piece), err)
		}
	}
	if fi, err := b.Stat(c, f); err != nil || fi.Size != LargeSize {
		t.Fatalf("Stat: %+v, %v; want %d bytes", fi, err, LargeSize)
	}
	// Read back by ranges cut elsewhere than the writes.
	const step = 7<<20 + 333
	for off := 0; off < LargeSize; off += step {
		n := min(step, LargeSize-off)
		want := data[off : off+n]
		if off+n == LargeSize {
			n = -1 // the last one to the end
		}
		got, err := readRange(c, b, f, int64(off), int64(n))
		if err != nil {
			t.Fatalf("OpenRange(%d, %d): %v", off, n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("OpenRange(%d, %d): %s", off, n, diff(got, want))
		}
	}
	// A reader closed before its end (a transfer given up) leaves the
	// backend working.
	rc, err := b.OpenRange(c, f, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Errorf("reading 1 MiB of the file: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Logf("Close before the end: %v", err)
	}
	if got, err := readRange(c, b, f, 5, 10); err != nil || !bytes.Equal(got, data[5:15]) {
		t.Errorf("OpenRange after a reader closed early: %v, %s", err, diff(got, data[5:15]))
	}
	algo := "sha256"
	if _, lacks := s.f.Lacks.Algorithms[algo]; lacks {
		algo = "md5"
	}
	want, err := localSum(algo, data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Checksum(c, f, algo); err != nil || got != want {
		t.Errorf("Checksum(%s) = %q, %v; want %q", algo, got, err, want)
	}
}

func (s *suite) permissions(t *testing.T) {
	if s.f.Deny == nil {
		if s.f.Lacks.Permissions == "" {
			t.Fatal("no Fixture.Deny: set it, or declare why not in Lacks.Permissions")
		}
		t.Skipf("declared: %s", s.f.Lacks.Permissions)
	}
	if s.f.Lacks.Permissions != "" {
		t.Errorf("Fixture.Deny is set, but Lacks.Permissions says %q: drop one", s.f.Lacks.Permissions)
	}
	dir := s.p("perm", "denied")
	f := dir + "/f"
	s.write(t, f, []byte("not for you"))
	b, why := s.f.Deny(t, dir)
	if b == nil {
		t.Skip(why)
	}
	c := ctx(t)
	var size int64 = 1
	if s.whole() {
		size = 0 // the only size such a backend truncates to
	}
	for _, op := range []result{
		{"Stat", func() error { _, err := b.Stat(c, f); return err }()},
		{"List", func() error { _, err := b.List(c, dir, false); return err }()},
		{"OpenRange", func() error { _, err := readRange(c, b, f, 0, -1); return err }()},
		{"Checksum", func() error { _, err := b.Checksum(c, f, s.algo()); return err }()},
		{"WriteAt a new file", b.WriteAt(c, dir+"/new", 0, strings.NewReader("x"), 1)},
		{"WriteAt the file", b.WriteAt(c, f, 0, strings.NewReader("x"), 1)},
		{"Truncate", b.Truncate(c, f, size)},
		{"Mkdir", b.Mkdir(c, dir+"/sub")},
		{"Remove", b.Remove(c, f)},
		{"Rename", b.Rename(c, f, s.p("perm", "taken"))},
	} {
		wantErr(t, op.name+" of a path without rights", op.err, backend.ErrPermission)
	}
}
