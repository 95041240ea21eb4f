// Package file is the backend for local files. Every operation goes through
// an os.Root, so a path can never reach outside the directory the backend
// was opened on: "..", absolute paths and symbolic links that leave the
// root all fail with backend.ErrPermission. The sluice agent serves its
// tree through this backend.
package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dtn/sluice/backend"
)

// Backend serves the files below one directory.
type Backend struct {
	root *os.Root
	// fs is what the backend asks of the files below its root: root
	// itself, or on the machine's root the os functions, which nothing
	// can escape and which resolve a path in one system call where
	// os.Root opens each of its directories in turn (29 openat and close
	// per small file copied, a third of a copy of 50,000 empty files).
	fs  dirFS
	dir string
	// sub is, in a view (In), the directory the view is confined to,
	// relative to the backend's root ("" for the backend itself): paths
	// are still named from the root, and resolved from sub.
	sub string
	// top is the root's absolute name, which *os.File names (and so the
	// errors naming them) start with, in views too.
	top string
	// shared says that root is another Backend's, which closes it.
	shared bool
	// bufs holds copy buffers: io.Copy's 32 KiB turns a 16 MiB range
	// into five hundred write system calls. Views share their backend's.
	bufs *sync.Pool
	// syncfs, if set, replaces syncfs(2) in SyncMany (tests count the
	// file systems synced).
	syncfs func(fd int) error
	// renameat2, if set, replaces renameat2(2) in RenameNoReplace (tests
	// take the fallback for file systems without RENAME_NOREPLACE).
	renameat2 func(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint) error
}

// MaxSize bounds the offsets and sizes the backend writes: no file system
// sluice runs on holds a larger file, and a range or size beyond it is a
// bad request, refused before any file is opened (rather than the file
// system's EFBIG after the file is created).
const MaxSize = 1 << 60

// New opens a backend on directory dir.
func New(dir string) (*Backend, error) {
	// Opened by its absolute name, so that every *os.File name (and so
	// every error naming one) starts with it, and Rel can take it off.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file backend: %w", err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("file backend: %w", classify(err))
	}
	b := &Backend{root: r, fs: r, dir: dir, top: r.Name(), bufs: &sync.Pool{}}
	if b.machineRoot() {
		b.fs = machineFS{}
	}
	b.bufs.New = func() any { buf := make([]byte, 1<<20); return &buf }
	return b, nil
}

// Close releases the backend's handle on its directory (a view's own
// handle; a view of the whole root shares its backend's, which stays open).
func (b *Backend) Close() error {
	if b.shared {
		return nil
	}
	return b.root.Close()
}

// In returns a view of the backend confined to directory dir (a slash path
// from the root; "/" for the whole root). The view takes and gives paths
// named from the root, as the backend does, but resolves every one of them
// from a handle on dir opened once, here, and only through it (os.Root):
// no symbolic link below dir leads out of it, not even one swapped in
// while a request is served, because nothing is looked up twice. A check
// of the path followed by an open of it would be a race: a user who can
// write below dir swaps a file for a link to another user's file between
// the two, and wins often enough (hundreds of reads of 1,500).
//
// Paths not below dir are refused with ErrPermission. Links in dir itself
// are followed inside the root: dir is what the caller named (an agent:
// the directory its token was issued for). A dir that does not exist yet,
// or that is a file (a token for one file), is confined to its nearest
// ancestor that is a directory: what is created below it is then made by
// name, through that ancestor's handle. Close the view after use.
func (b *Backend) In(dir string) (*Backend, error) {
	d, err := clean(dir)
	if err != nil {
		return nil, err
	}
	if b.sub != "" {
		return nil, fmt.Errorf("file backend: a view of /%s cannot be narrowed to %s", b.sub, dir)
	}
	for sub := d; sub != "."; sub = path.Dir(sub) {
		r, err := openRoot(b.root, sub)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, b.classify(err)
		}
		return &Backend{root: r, fs: r, dir: path.Join(b.dir, sub), sub: sub, top: b.top, bufs: b.bufs, syncfs: b.syncfs, renameat2: b.renameat2}, nil
	}
	v := *b
	v.shared = true
	return &v, nil
}

// openRoot opens directory name below r as a root of its own. Not with
// r.OpenRoot, which opens the name without O_DIRECTORY and only then
// checks that it is a directory: a named pipe swapped in there would hang
// the open until a writer came. The directory is opened with O_DIRECTORY
// (a pipe or a file is ENOTDIR, at once) and non-blocking, and its open
// handle made a root: the same directory, looked up once.
func openRoot(r *os.Root, name string) (*os.Root, error) {
	d, err := r.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return rootOf(d, r, name)
}

// clean is the package's clean for a path named from the root, made
// relative to the view's directory in a view.
func (b *Backend) clean(p string) (string, error) {
	name, err := clean(p)
	if err != nil || b.sub == "" {
		return name, err
	}
	if name == b.sub {
		return ".", nil
	}
	rest, ok := strings.CutPrefix(name, b.sub+"/")
	if !ok {
		return "", fmt.Errorf("%w: /%s is not below /%s", backend.ErrPermission, name, b.sub)
	}
	return rest, nil
}

// slash is the slash path, from the root, of name (relative to the view's
// directory in a view): what a client calls the file.
func (b *Backend) slash(name string) string {
	if b.sub == "" {
		return slashPath(name)
	}
	return slashPath(path.Join(b.sub, name))
}

// Check reports whether the backend still serves the directory its path
// names: a root removed (or removed and made again) while the backend
// runs leaves it writing into a directory nobody can see, and every
// request fails with "no such file or directory".
func (b *Backend) Check() error {
	open, err := b.root.Stat(".")
	if err != nil {
		return fmt.Errorf("file backend: root %s: %w", b.dir, err)
	}
	now, err := os.Stat(b.dir)
	if err != nil || !os.SameFile(open, now) {
		return fmt.Errorf("file backend: root %s was removed or replaced since it was opened", b.dir)
	}
	return nil
}

// Dir is the directory the backend serves.
func (b *Backend) Dir() string { return b.dir }

// maxName is the longest name of one path element (NAME_MAX).
const maxName = 255

// clean turns a slash path into a name relative to the root. A leading
// slash means the root itself, not the machine's root: the backend has no
// other. "..", empty elements and NUL bytes are refused here already, so
// that the error names the request rather than what os.Root made of it.
func clean(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: NUL in path", backend.ErrInvalid)
	}
	p = strings.TrimPrefix(p, "/")
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: %q leaves the root", backend.ErrPermission, p)
		}
		if len(el) > maxName {
			// Refused before a write makes the parents.
			return "", fmt.Errorf("%w: /%s: a name in the path is longer than %d bytes", backend.ErrInvalid, p, maxName)
		}
	}
	c := path.Clean("/" + p)
	if c == "/" {
		return ".", nil
	}
	return c[1:], nil
}

// Rel returns err with the paths of the *fs.PathError and *os.LinkError
// in it made relative to the root ("/" being the root), as clients name
// files: errors reaching a client must not reveal where the root is on the
// machine. It unwraps to err, so errors.Is and errors.As still work.
// Every error the backend returns has been through it; the agent passes
// its own (from *os.File methods) through it too.
func (b *Backend) Rel(err error) error {
	if err == nil {
		return nil
	}
	orig := err.Error()
	msg := orig
	walk(err, func(e error) {
		// Wrapping errors hold their message as formatted, so the
		// message is rewritten where the inner error's text appears.
		switch e := e.(type) {
		case *fs.PathError:
			if r := b.relPath(e.Path); r != e.Path {
				msg = strings.ReplaceAll(msg, e.Error(), (&fs.PathError{Op: e.Op, Path: r, Err: e.Err}).Error())
			}
		case *os.LinkError:
			o, n := b.relPath(e.Old), b.relPath(e.New)
			if o != e.Old || n != e.New {
				msg = strings.ReplaceAll(msg, e.Error(), (&os.LinkError{Op: e.Op, Old: o, New: n, Err: e.Err}).Error())
			}
		}
	})
	if msg == orig {
		return err
	}
	return &relError{msg, err}
}

// relPath is p relative to the root: os.Root names files relative to it,
// *os.File names start with the root's absolute name.
func (b *Backend) relPath(p string) string {
	dir := strings.TrimSuffix(b.top, "/") // "" for the machine's root
	// A view's files are named from its own root's name (see rootOf).
	own := strings.TrimSuffix(b.root.Name(), "/")
	switch {
	case p == "." || p == b.root.Name():
		return b.slash(".")
	case b.sub != "" && strings.HasPrefix(p, own+"/"):
		return b.slash(p[len(own)+1:])
	case strings.HasPrefix(p, dir+"/"):
		return p[len(dir):]
	case !filepath.IsAbs(p):
		return b.slash(p)
	}
	return p
}

type relError struct {
	msg string
	err error
}

func (e *relError) Error() string { return e.msg }
func (e *relError) Unwrap() error { return e.err }

// walk calls f on err and every error it wraps.
func walk(err error, f func(error)) {
	for err != nil {
		f(err)
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, f)
			}
			return
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return
		}
	}
}

// classify is the package's classify of err with its paths made relative
// to the root.
func (b *Backend) classify(err error) error { return classify(b.Rel(err)) }

// classify maps OS errors onto the backend's sentinel errors.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %w", backend.ErrPermission, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: %w", backend.ErrNoSpace, err)
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("%w: %w", backend.ErrExist, err)
	case escapes(err), errors.Is(err, syscall.ELOOP):
		// os.Root's refusal of a path or symlink leaving the root; a
		// symbolic link loop (or one swapped in while a path is
		// followed) is refused like one.
		return fmt.Errorf("%w: %w", backend.ErrPermission, err)
	case tooLarge(err), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL),
		errors.Is(err, syscall.EISDIR):
		// A name, offset or size the file system cannot take, or a
		// directory written or read as a file: the request's fault,
		// retrying cannot help (unclassified, EISDIR would be retried
		// as transient; the other backends call it invalid too).
		return fmt.Errorf("%w: %w", backend.ErrInvalid, err)
	}
	return err
}

// tooLarge says whether err is the file system refusing an offset or size
// beyond what it holds.
func tooLarge(err error) bool {
	return errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EOVERFLOW)
}

func (b *Backend) info(name string, fi fs.FileInfo) backend.FileInfo {
	return backend.FileInfo{Path: b.slash(name), Size: fi.Size(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}
}

// Stat implements backend.Backend.
func (b *Backend) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	name, err := b.clean(p)
	if err != nil {
		return backend.FileInfo{}, err
	}
	fi, err := b.stat(name)
	if err != nil {
		return backend.FileInfo{}, b.classify(err)
	}
	return b.info(name, fi), nil
}

// dirFS is the part of os.Root the backend uses, with names relative to
// its root.
type dirFS interface {
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	MkdirAll(name string, perm fs.FileMode) error
	Rename(oldname, newname string) error
	Remove(name string) error
}

// machineFS is dirFS on the machine's root through the os functions.
type machineFS struct{}

// machinePath is name (relative to the machine's root) as an absolute path.
func machinePath(name string) string { return "/" + strings.TrimPrefix(name, "/") }

func (machineFS) Open(name string) (*os.File, error) { return os.Open(machinePath(name)) }
func (machineFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(machinePath(name), flag, perm)
}
func (machineFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(machinePath(name)) }
func (machineFS) MkdirAll(name string, perm fs.FileMode) error {
	return os.MkdirAll(machinePath(name), perm)
}
func (machineFS) Rename(oldname, newname string) error {
	return os.Rename(machinePath(oldname), machinePath(newname))
}
func (machineFS) Remove(name string) error { return os.Remove(machinePath(name)) }

// machineRoot says whether the backend serves the whole machine (sluice
// cp's local files), where no path can leave the root.
func (b *Backend) machineRoot() bool { return b.sub == "" && path.Clean(b.dir) == "/" }

// stat is os.Root's Stat, which follows symbolic links inside the root.
// os.Root refuses absolute links as leaving it; on the machine's root
// nothing can leave it, so such a link is resolved and followed there.
func (b *Backend) stat(name string) (fs.FileInfo, error) {
	fi, err := b.fs.Stat(name)
	if err != nil && b.machineRoot() && escapes(err) {
		if real, rerr := resolve(name); rerr == nil {
			return b.fs.Stat(real)
		}
	}
	return fi, err
}

// resolve resolves name's symbolic links on the machine's root, giving a
// name without any (which os.Root then opens).
func resolve(name string) (string, error) {
	real, err := filepath.EvalSymlinks("/" + name)
	if err != nil {
		return "", err
	}
	if real = strings.TrimPrefix(filepath.ToSlash(real), "/"); real == "" {
		real = "."
	}
	return real, nil
}

// escapes says whether err is os.Root's refusal of a path leaving it.
func escapes(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"))
}

// kind names a file type that is not copied, for error messages.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// List implements backend.Backend. An entry that cannot be copied is
// listed with Err set (see backend.FileInfo), and a file that vanished
// while the directory was read is left out: neither fails the listing. In
// a view (In), a symbolic link whose target is not below the view's
// directory is listed with Err set, and its target's size and time are
// not given: reading it is refused, and a listing must not say what it
// leads to either.
func (b *Backend) List(ctx context.Context, p string, recursive bool) ([]backend.FileInfo, error) {
	out, _, err := b.list(ctx, p, recursive, "", 0)
	return out, err
}

// ListPage is a page of the recursive listing of directory p: at most
// limit entries (files, directories, and those that cannot be copied,
// with Err), those after the entry whose Path is after ("": from the
// first), in the order of a depth-first walk with each directory's names
// sorted. more says whether entries follow the page. A tree of a million
// files is listed this way a page at a time, each page resuming from the
// last entry of the one before, without the whole listing in memory.
func (b *Backend) ListPage(ctx context.Context, p, after string, limit int) (entries []backend.FileInfo, more bool, err error) {
	if limit < 1 {
		return nil, false, fmt.Errorf("%w: a page of %d entries", backend.ErrInvalid, limit)
	}
	return b.list(ctx, p, true, after, limit)
}

// errPageFull stops a walk whose page is full.
var errPageFull = errors.New("page full")

// WalkBefore reports whether path a comes before path b in a depth-first
// walk whose directories list their names sorted: an ancestor before
// what is below it, siblings by name (so "d/z" before "d-a", which a plain
// comparison of the strings puts first).
func WalkBefore(a, b string) bool {
	as, bs := strings.Split(strings.Trim(a, "/"), "/"), strings.Split(strings.Trim(b, "/"), "/")
	for i := range min(len(as), len(bs)) {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

func (b *Backend) list(ctx context.Context, p string, recursive bool, after string, limit int) ([]backend.FileInfo, bool, error) {
	name, err := b.clean(p)
	if err != nil {
		return nil, false, err
	}
	var out []backend.FileInfo
	more := false
	add := func(fi backend.FileInfo) error {
		if limit > 0 && len(out) == limit {
			more = true
			return errPageFull
		}
		out = append(out, fi)
		return nil
	}
	bad := func(n, why string) error {
		return add(backend.FileInfo{Path: b.slash(n), Err: why})
	}
	err = fs.WalkDir(b.root.FS(), name, func(n string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if after != "" && n != name {
			// An entry at or before the last one a page gave is
			// skipped, and a directory wholly before it is not read.
			if sp := b.slash(n); !WalkBefore(after, sp) {
				if d != nil && d.IsDir() && !strings.HasPrefix(strings.TrimSuffix(after, "/")+"/", sp+"/") {
					return fs.SkipDir
				}
				return nil
			}
		}
		if err != nil {
			if n == name {
				return err // the directory asked for
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone since its directory was read
			}
			// A directory below that cannot be read (listed already
			// as a directory): what is below it is not known.
			if err := bad(n, "a directory that cannot be read: "+reason(err)); err != nil {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if n == name {
			if !d.IsDir() {
				return fmt.Errorf("%w: %s is not a directory", backend.ErrInvalid, p)
			}
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return bad(n, "cannot be read: "+reason(err))
		}
		switch m := fi.Mode(); {
		case m&fs.ModeSymlink != 0:
			// A link to a file is followed: its target's bytes and
			// size are what a copy moves (listing the link's own size
			// would cut the copy short). A link to a directory is not
			// followed, which could loop; a broken one has nothing.
			t, err := b.stat(n)
			switch {
			case err != nil && b.sub != "" && (escapes(err) || errors.Is(err, syscall.ELOOP)):
				return bad(n, "a symbolic link that leads out of /"+b.sub)
			case err != nil:
				return bad(n, "a symbolic link that is broken or leaves the root")
			case t.IsDir():
				return bad(n, "a symbolic link to a directory; links to directories are not followed (name the directory itself)")
			case !t.Mode().IsRegular():
				return bad(n, "a symbolic link to "+kind(t.Mode())+", which cannot be copied")
			}
			fi = t
		case !m.IsRegular() && !m.IsDir():
			return bad(n, kind(m)+", which cannot be copied")
		}
		if err := add(b.info(n, fi)); err != nil {
			return err
		}
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	if err != nil {
		return nil, false, b.classify(err)
	}
	return out, more, nil
}

// slashPath is the slash path (from the root) of a name in the root.
func slashPath(name string) string {
	if name == "." {
		return "/"
	}
	return "/" + strings.TrimPrefix(name, "./")
}

// reason is the system's few words for err ("permission denied"), without
// the paths it names (a listing's entry names its path already, and the
// machine's paths are not a client's business).
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if errors.Is(err, fs.ErrPermission) {
		return "permission denied"
	}
	return "an error"
}

// Open opens a file for reading; the agent serves it with sendfile.
func (b *Backend) Open(p string) (*os.File, error) {
	f, _, err := b.open(p)
	return f, err
}

// open is Open, also giving what it learnt of the file.
func (b *Backend) open(p string) (*os.File, fs.FileInfo, error) {
	name, err := b.clean(p)
	if err != nil {
		return nil, nil, err
	}
	// Non-blocking, so that a named pipe cannot hang the open; it is
	// refused below, with devices and sockets. Reads of regular files
	// are not affected.
	f, err := b.fs.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil && b.machineRoot() && escapes(err) {
		if real, rerr := resolve(name); rerr == nil {
			f, err = b.fs.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		}
	}
	if err != nil {
		return nil, nil, b.classify(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, b.classify(err)
	}
	if m := fi.Mode(); !m.IsRegular() && !m.IsDir() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %s, which cannot be copied", backend.ErrInvalid, p, kind(m))
	}
	return f, fi, nil
}

type rangeReader struct {
	io.Reader
	f *os.File
}

func (r rangeReader) Close() error { return r.f.Close() }

// OpenRange implements backend.Backend.
func (b *Backend) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	f, fi, err := b.open(p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		// Refused here: its Reads would fail with EISDIR, unclassified
		// and naming the root's place on the machine (Rel never sees
		// them).
		f.Close()
		return nil, fmt.Errorf("%w: %s is a directory", backend.ErrInvalid, p)
	}
	if off < 0 {
		f.Close()
		return nil, fmt.Errorf("%w: negative offset %d", backend.ErrInvalid, off)
	}
	var r io.Reader = io.NewSectionReader(f, off, 1<<62)
	if n >= 0 {
		r = io.NewSectionReader(f, off, n)
	}
	return rangeReader{r, f}, nil
}

// WriteAt implements backend.Backend.
func (b *Backend) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	return b.writeAt(p, off, r, n, true)
}

// WriteAtExisting is WriteAt into a file that must exist already
// (backend.ErrNotFound otherwise). Third-party pulls write into a
// destination the engine allocated: a pull that arrives after the file was
// removed (its transfer canceled) must not bring it back.
func (b *Backend) WriteAtExisting(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	return b.writeAt(p, off, r, n, false)
}

func (b *Backend) writeAt(p string, off int64, r io.Reader, n int64, create bool) error {
	name, err := b.clean(p)
	if err != nil {
		return err
	}
	if off < 0 || n < 0 || off > MaxSize-n {
		return fmt.Errorf("%w: range %d+%d (at most %d bytes from the start of a file)", backend.ErrInvalid, off, n, int64(MaxSize))
	}
	var f *os.File
	var created bool
	if create {
		f, created, err = b.openForWrite(name)
	} else if f, err = b.fs.OpenFile(name, os.O_WRONLY, 0); err != nil {
		err = b.classify(err)
	}
	if err != nil {
		return err
	}
	buf := b.bufs.Get().(*[]byte)
	w, err := io.CopyBuffer(io.NewOffsetWriter(f, off), io.LimitReader(r, n), *buf)
	b.bufs.Put(buf)
	if err == nil && w < n {
		err = io.EOF
	}
	if err == nil && w >= writebackMin {
		startWriteback(f, off, w)
	}
	if err != nil && created && w == 0 {
		b.undoCreate(name, f, err)
	}
	cerr := f.Close()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: body ended after %d of %d bytes", backend.ErrInvalid, w, n)
		}
		return b.classify(err)
	}
	return b.classify(cerr)
}

// writebackMin is the smallest write whose writeback starts at once
// (startWriteback): the sub-writes of large files, not small files,
// whose batches are synced together.
const writebackMin = 1 << 20

// openForWrite opens (creating it and its parents) a file to write into,
// and says whether it created the file.
func (b *Backend) openForWrite(name string) (*os.File, bool, error) {
	f, err := b.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if dir := path.Dir(name); parentMissing(err) && dir != "." {
		// The parents, only when missing: making them every time would
		// walk the path once more per file. (A file where a parent
		// should be fails there, as "exists".)
		if err := b.fs.MkdirAll(dir, 0o755); err != nil {
			return nil, false, b.classify(err)
		}
		f, err = b.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	}
	if err == nil {
		return f, true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		// O_CREATE as before the O_EXCL try: a link inside the root
		// to a file not there yet still creates it.
		if f, err = b.fs.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
			return f, false, nil
		}
	}
	return nil, false, b.classify(err)
}

// parentMissing says whether err, of a create or rename, may be for a
// parent of the path that is missing (or is not a directory).
func parentMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// undoCreate removes a file this request created and the file system
// refused to extend (an offset or size beyond what it holds), so that a
// refused request leaves nothing behind. Any other failure keeps the file,
// which a concurrent writer of another range may be using.
func (b *Backend) undoCreate(name string, f *os.File, err error) {
	if !tooLarge(err) && !errors.Is(err, syscall.EINVAL) {
		return
	}
	if fi, serr := f.Stat(); serr == nil && fi.Size() == 0 {
		b.fs.Remove(name)
	}
}

// Truncate implements backend.Backend.
func (b *Backend) Truncate(ctx context.Context, p string, size int64) error {
	name, err := b.clean(p)
	if err != nil {
		return err
	}
	if size < 0 || size > MaxSize {
		return fmt.Errorf("%w: size %d (at most %d)", backend.ErrInvalid, size, int64(MaxSize))
	}
	f, created, err := b.openForWrite(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err != nil && created {
		b.undoCreate(name, f, err)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b.classify(err)
}

// Sync implements backend.Backend.
func (b *Backend) Sync(ctx context.Context, p string) error {
	f, err := b.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b.classify(err)
}

// Rename implements backend.Backend. The parent directory is synced so the
// new name survives a crash.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	return b.rename(from, to, b.fs.Rename, true)
}

// SyncDirs syncs the directory of each path in paths, once per directory,
// so that names made there (by RenameNoSync) survive a crash. It is best
// effort, as Rename's: a file system that cannot sync a directory keeps
// its names when it keeps anything.
func (b *Backend) SyncDirs(ctx context.Context, paths []string) {
	seen := make(map[string]bool, 1)
	for _, p := range paths {
		name, err := b.clean(p)
		if err != nil {
			continue
		}
		dir := path.Dir(name)
		if seen[dir] || ctx.Err() != nil {
			continue
		}
		seen[dir] = true
		b.syncDir(dir)
	}
}

// syncDir syncs directory dir (relative to the root), best effort.
func (b *Backend) syncDir(dir string) {
	if d, err := b.fs.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// RenameNoSync is Rename without the sync of the target's directory, for
// a caller that renames many files and then calls SyncDirs once: a batch
// of small files into one directory would otherwise sync it once per
// file.
func (b *Backend) RenameNoSync(ctx context.Context, from, to string) error {
	return b.rename(from, to, b.fs.Rename, false)
}

// rename renames from to to with op (names relative to the root: a
// rename that replaces to, or one that does not), making to's parents
// when missing, and syncs to's directory if sync is set.
func (b *Backend) rename(from, to string, op func(f, t string) error, sync bool) error {
	f, err := b.clean(from)
	if err != nil {
		return err
	}
	t, err := b.clean(to)
	if err != nil {
		return err
	}
	err = op(f, t)
	if dir := path.Dir(t); parentMissing(err) && dir != "." {
		// The target's parents, only when missing (see openForWrite).
		if err := b.fs.MkdirAll(dir, 0o755); err != nil {
			return b.classify(err)
		}
		err = op(f, t)
	}
	if err != nil {
		return b.classify(err)
	}
	if sync {
		b.syncDir(path.Dir(t))
	}
	return nil
}

// Remove implements backend.Backend.
func (b *Backend) Remove(ctx context.Context, p string) error {
	name, err := b.clean(p)
	if err != nil {
		return err
	}
	if name == "." {
		return fmt.Errorf("%w: refusing to remove the root", backend.ErrPermission)
	}
	return b.classify(b.fs.Remove(name))
}

// Mkdir implements backend.Backend.
func (b *Backend) Mkdir(ctx context.Context, p string) error {
	name, err := b.clean(p)
	if err != nil {
		return err
	}
	return b.classify(b.fs.MkdirAll(name, 0o755))
}

// Checksum implements backend.Backend.
func (b *Backend) Checksum(ctx context.Context, p, algo string) (string, error) {
	f, err := b.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, err := backend.Sum(f, algo)
	if err != nil {
		return "", b.classify(err)
	}
	return sum, nil
}

// ChecksumRange implements backend.RangeChecksummer.
func (b *Backend) ChecksumRange(ctx context.Context, p, algo string, off, n int64) (string, error) {
	f, err := b.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", b.classify(err)
	}
	if off < 0 || n < 0 || off > fi.Size() || n > fi.Size()-off {
		return "", fmt.Errorf("%w: checksum of [%d,%d) of %s, which has %d bytes", backend.ErrInvalid, off, off+n, p, fi.Size())
	}
	sum, err := backend.Sum(io.NewSectionReader(f, off, n), algo)
	if err != nil {
		return "", b.classify(err)
	}
	return sum, nil
}

var (
	_ backend.Backend          = (*Backend)(nil)
	_ backend.RangeChecksummer = (*Backend)(nil)
)

// SetModTime implements backend.ModTimeSetter: the file is opened (below
// the root, as any read) and its times set through the open descriptor,
// so that a link swapped in after a check cannot redirect it.
func (b *Backend) SetModTime(ctx context.Context, p string, t time.Time) error {
	f, err := b.Open(p)
	if err != nil {
		return err
	}
	tv := unix.NsecToTimeval(t.UnixNano())
	err = unix.Futimes(int(f.Fd()), []unix.Timeval{tv, tv})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b.classify(err)
}
