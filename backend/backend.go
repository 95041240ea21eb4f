// Package backend owns the interface every storage protocol implements, so
// the transfer engine moves bytes the same way whatever is at either end:
// local files (backend/file), a sluice agent over HTTP (backend/sluice), and
// later GridFTP and XRootD. Like rclone's backends, each protocol lives in
// its own package and only this small interface is shared.
//
// Paths are slash-separated and relative to what the backend serves (its
// root). Errors that callers act on are classified with the sentinel errors
// below (test with errors.Is); everything else is transient or unknown.
package backend

import (
	"context"
	"errors"
	"io"
	"time"
)

// FileInfo describes one file or directory.
type FileInfo struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	IsDir   bool      `json:"dir,omitempty"`
	// Err is set by List on an entry that cannot be copied (a broken
	// symbolic link, one to a directory or out of reach, a device, a
	// directory that cannot be read): why, in a few words. Its size and
	// time are not given. One such entry does not fail the listing, so
	// that the rest of a tree can be copied, and the entry reported.
	Err string `json:"error,omitempty"`
}

// Backend is one storage system reached through one protocol.
type Backend interface {
	// Stat describes one path.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List returns the entries below a directory (all levels if
	// recursive), files with their sizes: the paper's list_files.
	List(ctx context.Context, path string, recursive bool) ([]FileInfo, error)
	// OpenRange reads n bytes from offset off (n < 0: to the end).
	OpenRange(ctx context.Context, path string, off, n int64) (io.ReadCloser, error)
	// WriteAt writes exactly n bytes read from r at offset off, creating
	// the file (and its parent directories) if needed.
	WriteAt(ctx context.Context, path string, off int64, r io.Reader, n int64) error
	// Truncate sets a file's size, creating it if needed (used to
	// allocate a destination before ranges are written in any order).
	Truncate(ctx context.Context, path string, size int64) error
	// Sync makes what was written to path durable.
	Sync(ctx context.Context, path string) error
	// Rename moves from to to, replacing to.
	Rename(ctx context.Context, from, to string) error
	// Remove deletes a file or an empty directory.
	Remove(ctx context.Context, path string) error
	// Mkdir creates a directory and its parents.
	Mkdir(ctx context.Context, path string) error
	// Checksum computes a file's checksum with the named algorithm (see
	// Algorithms), as lowercase hex.
	Checksum(ctx context.Context, path, algo string) (string, error)
}

// RangeChecksummer is implemented by backends that compute the checksum
// of a byte range of a file where it is stored (the file backend, the
// sluice agent). A multi-source download uses it to find which replica
// sent wrong bytes: the destination's checksum of the ranges one source
// delivered against another replica's checksum of the same ranges.
type RangeChecksummer interface {
	// ChecksumRange is Checksum of the n bytes at offset off; a range
	// past the end of the file is an ErrInvalid.
	ChecksumRange(ctx context.Context, path, algo string, off, n int64) (string, error)
}

// ExistingWriter is implemented by backends that can write into a file
// only if it exists already (the file backend, the sluice agent). The
// engine writes a transfer's ranges into the temporary file it allocated
// this way: a temporary file removed meanwhile (its directory deleted,
// say) must not come back as a new file that holds only the ranges
// written after, with holes where the others were.
type ExistingWriter interface {
	// WriteAtExisting is WriteAt into a file that exists: ErrNotFound
	// if it does not (or a parent directory is missing).
	WriteAtExisting(ctx context.Context, path string, off int64, r io.Reader, n int64) error
}

// NoReplaceRenamer is implemented by backends that can rename a file
// without replacing one already at the new name, in one step (the file
// backend, the sluice agent). A service told to keep existing files puts
// its verified temporary file in place this way: a check before a plain
// Rename would leave a moment in which a file made by someone else is
// replaced unasked.
type NoReplaceRenamer interface {
	// RenameNoReplace is Rename, except that it fails with ErrExist
	// (and changes nothing) when to exists.
	RenameNoReplace(ctx context.Context, from, to string) error
}

// ModTimeSetter is implemented by backends that can set a file's
// modification time (the file backend, the sluice agent). A copy that
// preserves modification times sets the source's on its verified
// temporary file before the rename, so that the file appears with it.
type ModTimeSetter interface {
	// SetModTime sets the modification (and access) time of the file
	// at path.
	SetModTime(ctx context.Context, path string, t time.Time) error
}

// WholeWriter is implemented by backends that write a file only whole:
// one WriteAt at offset 0 with every byte of it (an HTTP PUT, an S3
// object, whose parallelism, multipart uploads say, is the backend's
// own). Their WriteAt refuses any other range with ErrInvalid, and
// Truncate need only create an empty file. The engine moves a file to
// such a backend in one write by one worker, never allocates it first,
// and never resumes part of it.
type WholeWriter interface {
	// WritesWhole marks the backend; it does nothing.
	WritesWhole()
}

// Algorithms are the checksum algorithms every backend must offer.
var Algorithms = []string{"adler32", "md5", "sha256", "crc32c"}

// Errors callers act on. Backends wrap them with context.
var (
	ErrNotFound   = errors.New("not found")
	ErrPermission = errors.New("permission denied")
	ErrNoSpace    = errors.New("no space left")
	ErrExist      = errors.New("already exists")
	ErrInvalid    = errors.New("invalid request")
	// ErrChanged: a source file's size or modification time changed
	// while it was read, so the bytes sent may mix two versions of it.
	// Not Permanent (a later attempt may find it settled), but the
	// attempt's bytes must not land.
	ErrChanged = errors.New("source changed during the transfer")
)

// ChecksumRate is the slowest rate, in bytes per second, at which a server
// or agent is expected to read a file while it computes its checksum:
// 10 MB/s, slower than any disk a DTN reads from, so that only one that has
// stopped working runs out of it (a 100 GB file gets 2 hours and 47
// minutes). A checksum says nothing until the whole file is read, so its
// wait is a no-answer bound plus the file at this rate (ReadWait).
const ChecksumRate = 10e6

// ReadWait is how long to wait for an answer that comes only once n bytes
// have been read at rate (bytes per second): base plus their time.
func ReadWait(base time.Duration, n int64, rate float64) time.Duration {
	return base + time.Duration(float64(max(n, 0))/rate*float64(time.Second))
}

// Permanent reports whether err will not go away by retrying.
func Permanent(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrPermission) ||
		errors.Is(err, ErrNoSpace) || errors.Is(err, ErrInvalid) ||
		errors.Is(err, ErrFenced) || errors.Is(err, context.Canceled)
}
