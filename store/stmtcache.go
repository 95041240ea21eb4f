package store

import (
	"context"
	"database/sql"
	"sync"
)

// The store keeps its statements prepared, per pool: the SQLite driver
// parses a statement's text on every call otherwise, which was a third of
// the CPU of the service's loop in its deterministic simulation (the
// claims, task writes and loads it makes every second), and PostgreSQL
// plans it again. The generated multi-row statements have a text per row
// count: those of a few rows (a cycle's starts, a turn's completions) are
// kept, longer ones (a job's submission, a claim of thousands) are not,
// and the cache stops growing at maxStmts.
const (
	maxStmts    = 256
	maxStmtArgs = 160
)

// cdb is a pool whose ExecContext, QueryContext and QueryRowContext use
// prepared statements.
type cdb struct {
	*sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newCDB(db *sql.DB) *cdb { return &cdb{DB: db, stmts: map[string]*sql.Stmt{}} }

// stmt returns q prepared on the pool, or nil where it is not kept (or
// could not be prepared: the caller then runs the text, and gets its
// error from there).
func (c *cdb) stmt(ctx context.Context, q string, nargs int) *sql.Stmt {
	if st := c.cached(q, nargs); st != nil || nargs > maxStmtArgs {
		return st
	}
	return c.prepare(ctx, q)
}

// cached returns q's statement if it is prepared already, and nil (for the
// caller to run the text) otherwise. A transaction uses this: preparing
// on the pool needs a connection, and the SQLite writer's only one is the
// transaction's (inTx prepares the statement once the transaction ends).
func (c *cdb) cached(q string, nargs int) *sql.Stmt {
	if nargs > maxStmtArgs {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// prepare prepares q on the pool and keeps it. The lock is not held while
// preparing, which waits for a connection: a transaction holding the
// SQLite writer's only one may be asking for a statement meanwhile.
func (c *cdb) prepare(ctx context.Context, q string) *sql.Stmt {
	c.mu.Lock()
	st, full := c.stmts[q], len(c.stmts) >= maxStmts
	c.mu.Unlock()
	if st != nil || full {
		return st
	}
	// Prepared without the caller's deadline: the statement outlives
	// the call.
	st, err := c.DB.PrepareContext(context.WithoutCancel(ctx), q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.stmts[q]; old != nil {
		st.Close() // prepared by another caller meanwhile
		return old
	}
	c.stmts[q] = st
	return st
}

func (c *cdb) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, q, len(args)); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.DB.ExecContext(ctx, q, args...)
}

func (c *cdb) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, q, len(args)); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.DB.QueryContext(ctx, q, args...)
}

func (c *cdb) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := c.stmt(ctx, q, len(args)); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.DB.QueryRowContext(ctx, q, args...)
}

// stx is a write transaction that uses its pool's prepared statements
// (on the transaction's connection, where database/sql keeps them
// prepared).
type stx struct {
	*sql.Tx
	db *cdb
	// unprepared are the statements run as text, to prepare once the
	// transaction is over (see cdb.cached).
	unprepared []string
}

// stmt is q's kept statement on the transaction, or nil.
func (t *stx) stmt(ctx context.Context, q string, nargs int) *sql.Stmt {
	if st := t.db.cached(q, nargs); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	if nargs <= maxStmtArgs && len(t.unprepared) < maxStmts {
		t.unprepared = append(t.unprepared, q)
	}
	return nil
}

// prepareRest prepares the statements the transaction ran as text, after
// it ended.
func (t *stx) prepareRest(ctx context.Context) {
	for _, q := range t.unprepared {
		t.db.prepare(ctx, q)
	}
}

func (t *stx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, q, len(args)); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t *stx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, q, len(args)); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

func (t *stx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if st := t.stmt(ctx, q, len(args)); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}
