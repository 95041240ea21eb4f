package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnavailable: the database's own refusals for now (a full disk, as
// SQLite reports it; PostgreSQL's disk full, shutdown and connection
// failures) are told from other errors, however wrapped.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the page limit is the connection's
	var full error
	for _, q := range []string{"PRAGMA max_page_count = 8", "CREATE TABLE t (x TEXT)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10000 && full == nil; i++ {
		_, full = db.ExecContext(ctx, "INSERT INTO t VALUES (?)", fmt.Sprintf("%01000d", i))
	}
	if full == nil {
		t.Fatal("the database never filled up")
	}
	_, syntax := db.ExecContext(ctx, "INSERT INTO nowhere VALUES (1)")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"sqlite full", fmt.Errorf("store: create job: commit: %w", full), true},
		{"sqlite no such table", syntax, false},
		{"postgres disk full", fmt.Errorf("store: %w", &pgconn.PgError{Code: "53100"}), true},
		{"postgres shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"postgres unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"postgres unreachable", fmt.Errorf("store: token: %w", &pgconn.ConnectError{}), true},
		{"other", errors.New("no"), false},
		{"nil", nil, false},
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): Unavailable = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
