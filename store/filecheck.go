package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrDatabaseGone: the SQLite database file the store opened was removed
// or replaced while in use (see sqlStore.Check).
var ErrDatabaseGone = errors.New("database file gone")

// rescueOnce is the outcome of Check's one copy of a removed or replaced
// database.
type rescueOnce struct {
	once sync.Once
	path string
	err  error
}

// Check reports whether the SQLite file at the store's path is still the
// file it opened (same device and inode). SQLite goes on reading and
// writing the file it has open when its name is removed (rm) or another
// file is put in its place (mv, a restore from a backup): the server
// would then keep accepting jobs into a file no one can open again, and
// the next start would find an empty database and begin afresh (new
// tokens, every user, job and rule gone, every agent locked out). The
// open file is then the only copy of the service's state: Check saves a
// copy of it next to the path (once; VACUUM INTO, a consistent copy that
// the WAL's last commits are part of) and returns an error wrapping
// ErrDatabaseGone that names that copy.
func (s *sqlStore) Check(ctx context.Context) error {
	if s.file == "" {
		return nil
	}
	fi, err := os.Stat(s.file)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "was removed"
	case err != nil:
		return fmt.Errorf("store: checking the SQLite database %s: %w", s.file, err)
	case !os.SameFile(fi, s.opened):
		what = "was replaced by another file"
	default:
		return nil
	}
	s.rescue.once.Do(func() { s.rescue.path, s.rescue.err = s.saveCopy(ctx) })
	saved := fmt.Sprintf("the database as this server had it is saved in %s: stop every server using it, then put that file back at %s (removing any -wal and -shm files there) and start again", s.rescue.path, s.file)
	if s.rescue.err != nil {
		saved = fmt.Sprintf("saving a copy of the database this server had open failed (%v): restore %s from a backup", s.rescue.err, s.file)
	}
	return fmt.Errorf("store: %w: the SQLite database %s %s while in use; %s", ErrDatabaseGone, s.file, what, saved)
}

// saveCopy writes a consistent copy of the open database to a new file
// next to its path (mode 0600: it holds the signing key and token
// hashes) and returns that file's name.
func (s *sqlStore) saveCopy(ctx context.Context) (string, error) {
	name := fmt.Sprintf("%s.saved-%s", s.file, time.Now().UTC().Format("20060102T150405Z"))
	// The directory may be gone too (rm -r of the data directory).
	if err := os.MkdirAll(filepath.Dir(s.file), 0o700); err != nil {
		return "", err
	}
	// VACUUM INTO wants a new or empty file; made here, it gets the
	// owner-only mode SQLite would not give it.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	f.Close()
	if _, err := s.w.ExecContext(ctx, "VACUUM INTO $1", name); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("VACUUM INTO %s: %w", name, err)
	}
	return name, nil
}
