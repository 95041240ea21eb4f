package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupSQLite: a backup taken while the store is open holds what was
// committed (users, the data key), opens as a store, is 0600, and never
// replaces a file; a store that never started, and PostgreSQL, are
// refused, leaving nothing at the destination.
func TestBackupSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "sluice.db")
	st, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	empty := filepath.Join(dir, "empty-backup.db")
	if err := BackupSQLite(ctx, db, empty); err == nil || !strings.Contains(err.Error(), "data key") {
		t.Errorf("backup of a store that never started: %v, want an error naming the data key", err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s (%v)", empty, err)
	}
	if _, err := st.InitSetting(ctx, "data_key", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureUser(ctx, "alice", "cms", false); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "backup.db")
	if err := BackupSQLite(ctx, "sqlite://"+db, out); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup: %v, %v; want a 0600 file", fi, err)
	}
	if err := BackupSQLite(ctx, db, out); err == nil || !strings.Contains(err.Error(), "never replaces") {
		t.Errorf("a second backup to the same name: %v, want a refusal", err)
	}
	if err := BackupSQLite(ctx, "postgres://localhost/sluice", filepath.Join(dir, "pg.db")); err == nil || !strings.Contains(err.Error(), "pg_dump") {
		t.Errorf("PostgreSQL: %v, want a refusal naming pg_dump", err)
	}
	// The backup is a store with what was committed.
	b, err := Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v, err := b.Setting(ctx, "data_key"); err != nil || v != "k" {
		t.Errorf("data key in the backup: %q, %v", v, err)
	}
	if n, err := b.CountUsers(ctx); err != nil || n != 1 {
		t.Errorf("users in the backup: %d, %v; want 1", n, err)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".backup.db.part-*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}
