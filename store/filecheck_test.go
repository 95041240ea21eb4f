package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckDatabaseFile: Check notices the SQLite file removed or
// replaced under a running store, and saves the only copy left (the file
// the store still has open, with what was written after the removal)
// where the error says. Before, nothing noticed: the service kept writing
// to a file no one could open again, and the next start began afresh.
func TestCheckDatabaseFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, db string)
		want   string // in the error; "": no error
	}{
		{"untouched", func(t *testing.T, db string) {}, ""},
		{"removed", func(t *testing.T, db string) {
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
		}, "was removed"},
		{"directory removed", func(t *testing.T, db string) {
			if err := os.RemoveAll(filepath.Dir(db)); err != nil {
				t.Fatal(err)
			}
		}, "was removed"},
		{"replaced", func(t *testing.T, db string) {
			other := db + ".other"
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, db); err != nil {
				t.Fatal(err)
			}
		}, "was replaced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "data", "sluice.db")
			st := mustOpen(t, db)
			if err := st.PutSetting(ctx, "before", "1"); err != nil {
				t.Fatal(err)
			}
			if err := st.Check(ctx); err != nil {
				t.Fatalf("Check of an untouched store: %v", err)
			}
			tc.change(t, db)
			// Written after the change: only the open file has it.
			if err := st.PutSetting(ctx, "after", "2"); err != nil {
				t.Fatal(err)
			}
			err := st.Check(ctx)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrDatabaseGone) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), db) {
				t.Fatalf("Check: %v, want ErrDatabaseGone saying the file %s", err, tc.want)
			}
			// The error names the saved copy, which holds everything.
			msg := err.Error()
			i := strings.Index(msg, db+".saved-")
			if i < 0 {
				t.Fatalf("the error names no saved copy: %v", err)
			}
			saved := strings.Fields(msg[i:])[0]
			saved = strings.TrimRight(saved, ":;,")
			fi, err := os.Stat(saved)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("the saved copy has mode %s, want 0600 (it holds secrets)", fi.Mode().Perm())
			}
			if err := st.Check(ctx); err == nil || !strings.Contains(err.Error(), saved) {
				t.Errorf("a second Check: %v, want the same copy named", err)
			}
			copySt := mustOpen(t, saved)
			for k, want := range map[string]string{"before": "1", "after": "2"} {
				if got, err := copySt.Setting(ctx, k); err != nil || got != want {
					t.Errorf("the saved copy's setting %s: %q, %v; want %q", k, got, err, want)
				}
			}
		})
	}
}

// TestCheckPostgres: PostgreSQL's files are the database server's own;
// Check has nothing to say.
func TestCheckPostgres(t *testing.T) {
	for _, db := range testDBs(t) {
		if db.dialect != dialectPostgres {
			continue
		}
		if err := mustOpen(t, db.url).Check(context.Background()); err != nil {
			t.Errorf("Check: %v", err)
		}
	}
}

// TestOpenRefusesOrphanWAL: a SQLite database that is missing while its
// -wal file is there (it was removed) is not created anew: SQLite would
// replay the other database's last writes into the new file.
func TestOpenRefusesOrphanWAL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sluice.db")
	if err := os.WriteFile(db+"-wal", []byte("frames of another database"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(context.Background(), db)
	if err == nil {
		st.Close()
		t.Fatal("opened a new database next to another's -wal file")
	}
	if !strings.Contains(err.Error(), db+"-wal") {
		t.Errorf("the error does not name the -wal file: %v", err)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("the refused open left a database file")
	}
	// An empty -wal holds nothing to replay.
	if err := os.WriteFile(db+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, db)
}
