package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BackupSQLite writes a consistent copy of the SQLite store at url to
// out, while servers may be using it: SQLite's VACUUM INTO reads one
// snapshot (WAL readers do not block the writer), so the copy holds every
// transaction committed before it started and none half. The copy is
// written under a temporary name beside out, checked (integrity_check,
// and the service's data key is there), synced, and only then linked to
// out, which must not exist: a backup never replaces a file. It is made
// 0600, as the store is: it holds the service's signing key and the
// hashes of every token.
//
// A PostgreSQL store is backed up with PostgreSQL's own tools (pg_dump),
// which this refuses, saying so.
func BackupSQLite(ctx context.Context, url, out string) (err error) {
	lower := strings.ToLower(url)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return errors.New("store: backup: a PostgreSQL store is backed up with pg_dump (see the operator guide)")
	}
	path, err := sqlitePath(url)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("store: backup: %s exists; a backup never replaces a file (name a new one)", out)
	}
	dir := filepath.Dir(out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(out)+".part-*")
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	// VACUUM INTO wants a file that is not there.
	if err := os.Remove(tmpName); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmpName)
		}
	}()
	if strings.ContainsRune(path, '?') || strings.ContainsRune(tmpName, '?') {
		return fmt.Errorf("store: backup: a path with '?' cannot be given to SQLite")
	}
	db, err := sql.Open("sqlite", path+fmt.Sprintf("?_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmpName); err != nil {
		return fmt.Errorf("store: backup of %s: %w", path, err)
	}
	if err := checkBackup(ctx, tmpName); err != nil {
		return err
	}
	f, err := os.OpenFile(tmpName, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("store: backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("store: backup: %w", err)
	}
	f.Close()
	// A link, not a rename: it fails if out appeared meanwhile.
	if err := os.Link(tmpName, out); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	os.Remove(tmpName)
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// checkBackup checks that the SQLite file at p is whole and is a Sluice
// store (its data key is there).
func checkBackup(ctx context.Context, p string) error {
	db, err := sql.Open("sqlite", p+"?_pragma=query_only(1)")
	if err != nil {
		return fmt.Errorf("store: backup check: %w", err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("store: backup check: integrity_check says %q (%v)", ok, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM settings WHERE key = 'data_key'").Scan(&n); err != nil || n != 1 {
		return fmt.Errorf("store: backup check: not a Sluice store that has started once (no data key; %v)", err)
	}
	return nil
}
