package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

func newTest(t *testing.T) (*Backend, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dir
}

func TestWriteReadRanges(t *testing.T) {
	b, _ := newTest(t)
	ctx := context.Background()
	data := []byte("0123456789abcdefghij")
	// Write out of order, as concurrent partial transfers do.
	if err := b.Truncate(ctx, "d/f", int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{10, 20}, {0, 10}} {
		if err := b.WriteAt(ctx, "d/f", int64(r[0]), strings.NewReader(string(data[r[0]:r[1]])), int64(r[1]-r[0])); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := b.OpenRange(ctx, "/d/f", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "56789abcde" {
		t.Errorf("range read %q", got)
	}
	fi, err := b.Stat(ctx, "d/f")
	if err != nil || fi.Size != 20 || fi.Path != "/d/f" {
		t.Errorf("stat %+v %v", fi, err)
	}
	sum, err := b.Checksum(ctx, "d/f", "adler32")
	want, _ := backend.Sum(strings.NewReader(string(data)), "adler32")
	if err != nil || sum != want || len(sum) != 8 {
		t.Errorf("checksum %q %v, want %q", sum, err, want)
	}
	// A short body is an error, not a silently short file.
	if err := b.WriteAt(ctx, "d/g", 0, strings.NewReader("abc"), 10); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("short body: %v", err)
	}
}

func TestConfinement(t *testing.T) {
	b, dir := newTest(t)
	ctx := context.Background()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "slink"))
	for _, p := range []string{"../x", "a/../../x", "link/secret", "slink", "/../x"} {
		if _, err := b.Stat(ctx, p); !errors.Is(err, backend.ErrPermission) && !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("stat %q: %v, want a refusal", p, err)
		}
		if _, err := b.OpenRange(ctx, p, 0, 1); err == nil {
			t.Errorf("read %q succeeded", p)
		}
		if err := b.WriteAt(ctx, p, 0, strings.NewReader("y"), 1); err == nil {
			t.Errorf("write %q succeeded", p)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "x" {
		t.Error("a file outside the root was changed")
	}
	if err := b.Remove(ctx, "/"); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("remove root: %v", err)
	}
}

func TestErrorsClassified(t *testing.T) {
	b, dir := newTest(t)
	ctx := context.Background()
	if _, err := b.Stat(ctx, "nope"); !errors.Is(err, backend.ErrNotFound) || !backend.Permanent(err) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := b.Checksum(ctx, "nope", "md5"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("checksum of missing file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "f"), []byte("abc"), 0o644)
	if _, err := b.Checksum(ctx, "f", "crc64"); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("unknown algorithm: %v", err)
	}
	if os.Getuid() != 0 {
		os.Mkdir(filepath.Join(dir, "ro"), 0o555)
		if err := b.WriteAt(ctx, "ro/f", 0, strings.NewReader("a"), 1); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("read-only dir: %v", err)
		}
	}
}

func TestListAndRename(t *testing.T) {
	b, _ := newTest(t)
	ctx := context.Background()
	for _, p := range []string{"a/1", "a/b/2", "a/b/c/3"} {
		if err := b.WriteAt(ctx, p, 0, strings.NewReader("xy"), 2); err != nil {
			t.Fatal(err)
		}
	}
	all, err := b.List(ctx, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, fi := range all {
		if !fi.IsDir {
			files++
			if fi.Size != 2 {
				t.Errorf("%s: size %d", fi.Path, fi.Size)
			}
		}
	}
	if files != 3 {
		t.Errorf("recursive list found %d files: %+v", files, all)
	}
	top, _ := b.List(ctx, "a", false)
	if len(top) != 2 {
		t.Errorf("flat list: %+v", top)
	}
	if err := b.Rename(ctx, "a/1", "z/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "z/1"); err != nil {
		t.Error(err)
	}
	if _, err := b.List(ctx, "z/1", true); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("listing a file: %v", err)
	}
}

// TestLinksAndSpecialFiles: a listing moves what a copy would read. A
// link to a file is listed with its target's size (the link's own length
// once cut copies short, with matching checksums); links to directories,
// broken links and named pipes are refused with a message naming them,
// and opening a named pipe fails at once instead of hanging. On the
// machine's root (sluice cp's local files) absolute links are followed;
// below an agent's root they stay refused.
func TestLinksAndSpecialFiles(t *testing.T) {
	ctx := context.Background()
	b, dir := newTest(t)
	target := []byte("the target file, longer than its link")
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		return p
	}
	os.WriteFile(mk("data/target"), target, 0o644)
	if err := os.Symlink("../data/target", mk("ok/link")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(mk("ok/plain"), []byte("x"), 0o644)
	os.Symlink("..", mk("dirlink/up"))
	os.Symlink("nowhere", mk("broken/l"))
	if err := syscallMkfifo(mk("pipe/p")); err != nil {
		t.Fatal(err)
	}
	list, err := b.List(ctx, "/ok", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if strings.HasSuffix(e.Path, "/link") && (e.Size != int64(len(target)) || e.IsDir) {
			t.Errorf("link listed as %+v, want its target's %d bytes", e, len(target))
		}
	}
	if len(list) != 2 {
		t.Errorf("listing %+v, want the link and the plain file", list)
	}
	// Entries that cannot be copied are listed as such, with why, and
	// nothing of their targets; the listing goes on.
	os.WriteFile(mk("broken/fine"), []byte("fine"), 0o644)
	for _, tc := range []struct{ dir, entry, want string }{
		{"/dirlink", "/dirlink/up", "link to a directory"},
		{"/broken", "/broken/l", "broken"},
		{"/pipe", "/pipe/p", "named pipe"},
	} {
		list, err := b.List(ctx, tc.dir, true)
		if err != nil {
			t.Errorf("listing %s: %v", tc.dir, err)
			continue
		}
		i := slices.IndexFunc(list, func(e backend.FileInfo) bool { return e.Path == tc.entry })
		if i < 0 || !strings.Contains(list[i].Err, tc.want) || list[i].Size != 0 || !list[i].ModTime.IsZero() {
			t.Errorf("listing %s: %+v, want %s listed with an error saying %q", tc.dir, list, tc.entry, tc.want)
		}
	}
	if list, err := b.List(ctx, "/broken", true); err != nil || len(list) != 2 || !slices.ContainsFunc(list, func(e backend.FileInfo) bool { return e.Path == "/broken/fine" && e.Size == 4 && e.Err == "" }) {
		t.Errorf("listing /broken: %+v, %v; want its good file too", list, err)
	}
	done := make(chan error, 1)
	go func() { _, err := b.Open("/pipe/p"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("opening a named pipe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a named pipe hangs")
	}

	// Absolute links: followed on the machine's root, refused below any
	// other.
	os.Symlink(filepath.Join(dir, "data/target"), mk("abs/link"))
	if _, err := b.Stat(ctx, "/abs/link"); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("absolute link below a root: %v, want a permission error", err)
	}
	machine, err := New("/")
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	abs := filepath.ToSlash(filepath.Join(dir, "abs/link"))
	fi, err := machine.Stat(ctx, abs)
	if err != nil || fi.Size != int64(len(target)) {
		t.Fatalf("absolute link on the machine's root: %+v, %v", fi, err)
	}
	r, err := machine.OpenRange(ctx, abs, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != string(target) {
		t.Errorf("read %q through the absolute link", got)
	}
}

// TestCheckRoot: a backend whose root directory is removed, or removed
// and made again, says so (it would otherwise write into a directory
// nobody sees and fail every request with "no such file").
func TestCheckRoot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(dir string) error
		ok     bool
	}{
		{"untouched", func(string) error { return nil }, true},
		{"removed", os.RemoveAll, false},
		{"replaced", func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Mkdir(dir, 0o755)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := New(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := tc.change(dir); err != nil {
				t.Fatal(err)
			}
			if err := b.Check(); (err == nil) != tc.ok {
				t.Errorf("Check: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestBadRequestsRefused: names, offsets and sizes the file system cannot
// take are the request's fault (ErrInvalid, a loop ErrPermission), their
// errors name the path relative to the root, never the root's place on
// the machine, and a refused write or truncate leaves no file behind.
func TestBadRequestsRefused(t *testing.T) {
	b, dir := newTest(t)
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "f"), []byte("abc"), 0o644)
	os.Symlink("loop2", filepath.Join(dir, "loop1"))
	os.Symlink("loop1", filepath.Join(dir, "loop2"))
	long := strings.Repeat("n", 300)
	write := func(p string, off int64) func() error {
		return func() error { return b.WriteAt(ctx, p, off, strings.NewReader("xy"), 2) }
	}
	for _, tc := range []struct {
		name    string
		op      func() error
		want    error
		created string // a file the refusal must not leave
		mention string // what the message names
	}{
		{"long name open", func() error { _, err := b.Open("/" + long); return err }, backend.ErrInvalid, "", "/" + long},
		{"long name stat", func() error { _, err := b.Stat(ctx, long); return err }, backend.ErrInvalid, "", "/" + long},
		{"long name write", write("d/"+long, 0), backend.ErrInvalid, "d", "/d/" + long},
		{"offset at int64's end", write("w1", 1<<63-3), backend.ErrInvalid, "w1", ""},
		{"offset beyond MaxSize", write("w2", MaxSize-1), backend.ErrInvalid, "w2", ""},
		// Below MaxSize, beyond ext4's 16 TiB: EFBIG after the open
		// (file systems that take it are skipped below).
		{"offset beyond the file system", write("w3", 1<<50), backend.ErrInvalid, "w3", "/w3"},
		{"truncate beyond MaxSize", func() error { return b.Truncate(ctx, "t1", 1<<63-1) }, backend.ErrInvalid, "t1", ""},
		{"truncate beyond the file system", func() error { return b.Truncate(ctx, "t2", 1<<50) }, backend.ErrInvalid, "t2", "/t2"},
		{"symbolic link loop", func() error { _, err := b.Open("loop1"); return err }, backend.ErrPermission, "", "loop1"},
		{"file as a directory", func() error { _, err := b.Stat(ctx, "f/x"); return err }, nil, "", "/f/x"},
	} {
		err := tc.op()
		if err == nil {
			if strings.Contains(tc.name, "file system") {
				t.Logf("%s: this file system takes it", tc.name)
				os.Remove(filepath.Join(dir, tc.created))
				continue
			}
			t.Errorf("%s: succeeded", tc.name)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), dir) {
			t.Errorf("%s: %q names the root's directory", tc.name, err)
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %q does not name %s", tc.name, err, tc.mention)
		}
		if tc.created != "" {
			if _, serr := os.Lstat(filepath.Join(dir, tc.created)); !errors.Is(serr, fs.ErrNotExist) {
				t.Errorf("%s: left %s behind (%v)", tc.name, tc.created, serr)
			}
		}
	}
}

// TestRel: paths in errors, wrapped or not, are made relative to the
// root, and the error still unwraps to what it wrapped.
func TestRel(t *testing.T) {
	b, dir := newTest(t)
	abs, _ := filepath.Abs(dir)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "write", Path: abs + "/a/b", Err: syscall.EFBIG}, "write /a/b: file too large"},
		{fmt.Errorf("sending x: %w", &fs.PathError{Op: "read", Path: abs + "/x", Err: syscall.EIO}), "sending x: read /x: input/output error"},
		{&fs.PathError{Op: "openat", Path: "a/b", Err: syscall.ENOENT}, "openat /a/b: no such file or directory"},
		{&fs.PathError{Op: "stat", Path: abs, Err: syscall.EIO}, "stat /: input/output error"},
		{&os.LinkError{Op: "renameat", Old: abs + "/a", New: abs + "/b", Err: syscall.EXDEV}, "renameat /a /b: invalid cross-device link"},
		{errors.Join(errors.New("x"), &fs.PathError{Op: "open", Path: abs + "/y", Err: syscall.EIO}), "x\nopen /y: input/output error"},
		{&fs.PathError{Op: "open", Path: "/elsewhere/y", Err: syscall.EIO}, "open /elsewhere/y: input/output error"},
		{errors.New("no paths"), "no paths"},
	} {
		got := b.Rel(tc.err)
		if got.Error() != tc.want {
			t.Errorf("Rel(%q) = %q, want %q", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Rel(%q) does not unwrap to it", tc.err)
		}
	}
}

// countingFS counts the opens of each name through a dirFS.
type countingFS struct {
	dirFS
	opens map[string]int
}

func (c *countingFS) Open(name string) (*os.File, error) {
	c.opens[name]++
	return c.dirFS.Open(name)
}

// TestRenameManySyncsEachDirectoryOnce: files renamed with RenameNoSync
// are made durable by one SyncDirs, which syncs each of their directories
// once, not once per file (a batch of a thousand small files into one
// directory synced it a thousand times); Rename still syncs its own.
func TestRenameManySyncsEachDirectoryOnce(t *testing.T) {
	dir := t.TempDir()
	b, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var targets []string
	for i, p := range []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/d/1"} {
		tmp := fmt.Sprintf("/tmp%d", i)
		if err := b.WriteAt(ctx, tmp, 0, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		if err := b.RenameNoSync(ctx, tmp, "/"+p); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, "/"+p)
	}
	cf := &countingFS{dirFS: b.fs, opens: map[string]int{}}
	b.fs = cf
	b.SyncDirs(ctx, targets)
	want := map[string]int{"a": 1, "b": 1, "c/d": 1}
	if !maps.Equal(cf.opens, want) {
		t.Errorf("SyncDirs opened %v, want each directory once: %v", cf.opens, want)
	}
	for _, p := range targets {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	clear(cf.opens)
	if err := b.WriteAt(ctx, "/t", 0, strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Rename(ctx, "/t", "/a/4"); err != nil || cf.opens["a"] != 1 {
		t.Errorf("Rename: %v, directory opened %d times for its sync, want 1", err, cf.opens["a"])
	}
}

// TestView: a view (In) takes and gives paths named from the root, refuses
// paths not below its directory and links that lead out of it (listing
// them without their target's size), names files from the root in its
// errors, and is held to the nearest existing directory when its own is
// missing or a file.
func TestView(t *testing.T) {
	b, dir := newTest(t)
	ctx := context.Background()
	for p, content := range map[string]string{"alice/f": "alice", "bob/secret": "bob's"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"alice/out": "../bob/secret", "alice/dout": "../bob", "alice/in": "f"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := b.In("/alice")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if fi, err := v.Stat(ctx, "/alice/in"); err != nil || fi.Path != "/alice/in" || fi.Size != 5 {
		t.Errorf("stat of a link inside: %+v %v", fi, err)
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"read through a link out", func() error { _, err := v.Open("/alice/out"); return err }},
		{"write through a directory link", func() error {
			return v.WriteAt(ctx, "/alice/dout/x", 0, strings.NewReader("x"), 1)
		}},
		{"rename into a directory link", func() error { return v.Rename(ctx, "/alice/f", "/alice/dout/f") }},
		{"remove through a directory link", func() error { return v.Remove(ctx, "/alice/dout/secret") }},
		{"mkdir through a directory link", func() error { return v.Mkdir(ctx, "/alice/dout/d") }},
		{"a path beside the view", func() error { _, err := v.Stat(ctx, "/bob/secret"); return err }},
	} {
		if err := tc.op(); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("%s: %v, want a permission error", tc.name, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bob/secret")); string(got) != "bob's" {
		t.Errorf("bob's secret is now %q", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "bob")); len(ents) != 1 {
		t.Errorf("bob's directory holds %d entries", len(ents))
	}
	list, err := v.List(ctx, "/alice", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list {
		if f.Path == "/alice/out" && (f.Err != "a symbolic link that leads out of /alice" || f.Size != 0) {
			t.Errorf("a link out listed as %+v", f)
		}
	}
	if _, err := v.Open("/alice/nothere"); err == nil || !strings.Contains(err.Error(), "/alice/nothere") || strings.Contains(err.Error(), dir) {
		t.Errorf("error of a view names %v, want the path from the root only", err)
	}
	if f, err := v.Open("/alice/f"); err != nil {
		t.Error(err)
	} else {
		f.Close()
		_, err := f.Stat() // an *os.File's error names its file
		if got := v.Rel(err).Error(); got != "stat /alice/f: file already closed" {
			t.Errorf("a view's file named %q", got)
		}
	}
	// A missing directory, or a file, is held to its nearest existing
	// directory; what is written below is made by name there.
	for _, d := range []string{"/alice/new/deeper", "/alice/f"} {
		w, err := b.In(d)
		if err != nil {
			t.Fatalf("In(%s): %v", d, err)
		}
		if w.dir != filepath.Join(dir, "alice") {
			t.Errorf("In(%s) is held to %s, want alice", d, w.dir)
		}
		w.Close()
	}
	w, _ := b.In("/alice/new")
	defer w.Close()
	if err := w.WriteAt(ctx, "/alice/new/x", 0, strings.NewReader("x"), 1); err != nil {
		t.Errorf("writing below a directory not made yet: %v", err)
	}
	// The whole root's view shares the backend's handle: closing it
	// leaves the backend open.
	r, _ := b.In("/")
	r.Close()
	if _, err := b.Stat(ctx, "/alice/f"); err != nil {
		t.Errorf("the backend after its root view closed: %v", err)
	}
}
