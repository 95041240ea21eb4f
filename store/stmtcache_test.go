package store

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestStmtCache: statements are kept prepared, those run in a transaction
// once it is over; a transaction holding SQLite's one writer connection
// and a write outside it that prepares a new statement do not wait for
// each other for good (the cache's lock is not held while a statement is
// prepared, which waits for the connection).
func TestStmtCache(t *testing.T) {
	for _, st := range openTest(t) {
		s := st.(*sqlStore)
		t.Run(s.dialect, func(t *testing.T) {
			ctx := context.Background()
			const inTxQ = `SELECT count(*) FROM settings WHERE key <> $1`
			err := s.inTx(ctx, func(tx *stx) error {
				var n int
				return tx.QueryRowContext(ctx, inTxQ, "x").Scan(&n)
			})
			if err != nil {
				t.Fatal(err)
			}
			if s.w.cached(inTxQ, 1) == nil {
				t.Errorf("the transaction's statement was not prepared after it")
			}
			if err := s.PutSetting(ctx, "k", "v"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Setting(ctx, "k"); err != nil {
				t.Fatal(err)
			}

			inTx, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 2)
			go func() {
				done <- s.inTx(ctx, func(tx *stx) error {
					close(inTx)
					<-release
					// A statement nobody prepared yet, while the
					// other goroutine waits to prepare its own.
					_, err := tx.ExecContext(ctx, `UPDATE settings SET value = $1 WHERE key = $2 AND value <> $1`, "w", "k")
					return err
				})
			}()
			<-inTx
			waits := s.w.Stats().WaitCount
			go func() {
				_, err := s.w.ExecContext(ctx, `UPDATE settings SET value = $1 WHERE key = $2 AND 1 = 1`, "v2", "k")
				done <- err
			}()
			if s.dialect == dialectSQLite {
				// The second waits for the writer's one connection.
				for deadline := time.Now().Add(10 * time.Second); s.w.Stats().WaitCount == waits; runtime.Gosched() {
					if time.Now().After(deadline) {
						t.Fatal("the write outside the transaction never waited for the connection")
					}
				}
			}
			close(release)
			for range 2 {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("a transaction and a write outside it wait for each other")
				}
			}
			// Statements with many arguments are not kept.
			args := make([]any, maxStmtArgs+1)
			q := "SELECT 1 WHERE 1 IN ("
			for i := range args {
				args[i] = i
				if i > 0 {
					q += ","
				}
				q += fmt.Sprintf("$%d", i+1)
			}
			q += ")"
			if s.dialect == dialectPostgres {
				q = "SELECT 1 WHERE 1::bigint IN (" + q[len("SELECT 1 WHERE 1 IN ("):]
			}
			rows, err := s.r.QueryContext(ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if s.r.cached(q, 1) != nil {
				t.Errorf("a statement of %d arguments was kept", len(args))
			}
		})
	}
}
