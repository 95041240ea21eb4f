package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlStore implements Store over database/sql for both dialects.
//
// Query text is shared: both schemas have the same tables and columns,
// times are BIGINT/INTEGER unix nanoseconds in both, and placeholders are
// written $1, $2, ... which PostgreSQL requires and the modernc SQLite
// driver binds by number too (TestDollarPlaceholders checks it). Both
// dialects support INSERT ... ON CONFLICT, UPDATE ... FROM and RETURNING.
// The one difference is in the generated multi-row statements, where
// SQLite gets ? placeholders (see writeValues).
type sqlStore struct {
	dialect string
	// w is used for every write (on SQLite a pool of exactly one
	// connection: the single writer); r for reads outside a write
	// transaction (on SQLite read-only connections, on PostgreSQL the same
	// pool as w).
	w, r *cdb
	// taskBatch is the number of rows per multi-row INSERT in CreateJob.
	taskBatch int
	// pgConfig is the PostgreSQL connection's configuration, for the
	// LISTEN connection (nil on SQLite).
	pgConfig *pgx.ConnConfig
	// wal is SQLite's write-ahead log file ("" on PostgreSQL), synced
	// by durableCommit; syncWAL, if set, replaces that sync (tests).
	wal     string
	syncWAL func(path string) error
	// file is the SQLite database file's path and opened its identity
	// when the store opened it ("" and nil on PostgreSQL), for Check.
	file   string
	opened os.FileInfo
	// rescue makes Check save a copy of a removed or replaced database
	// once (filecheck.go).
	rescue rescueOnce
}

// durableCommit makes the transactions committed so far survive an OS
// crash or a power loss, not only the process being killed. On SQLite
// (synchronous=NORMAL, see openSQLite) a commit is in the -wal file but
// not yet on disk: an fsync of that file makes it durable (and every
// commit before it). A WAL already checkpointed into the database was
// synced by the checkpoint; a missing -wal file means that. PostgreSQL
// commits are durable already.
func (s *sqlStore) durableCommit() error {
	if s.wal == "" {
		return nil
	}
	if s.syncWAL != nil {
		return s.syncWAL(s.wal)
	}
	f, err := os.Open(s.wal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync the write-ahead log: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync the write-ahead log: %w", err)
	}
	return nil
}

func (s *sqlStore) Dialect() string { return s.dialect }

// Close closes both pools. On SQLite, closing the last connection
// checkpoints the WAL into the main file.
func (s *sqlStore) Close() error {
	var err error
	if s.r != s.w {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

// inTx runs fn in a write transaction, committing if it returns nil and
// rolling back otherwise. fn must use only tx: on SQLite the writer pool
// has one connection, which tx holds.
func (s *sqlStore) inTx(ctx context.Context, fn func(tx *stx) error) error {
	sqltx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &stx{Tx: sqltx, db: s.w}
	defer tx.prepareRest(ctx)
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Times are stored as unix nanoseconds (UTC) with 0 for the zero
// time.Time. Unix nanoseconds cover the years 1678 to 2262; times outside
// are clamped to the range (a "far future" deadline stays far future).

// minNanos and maxNanos bound the representable times.
var (
	minNanos = time.Unix(0, math.MinInt64+1).UTC()
	maxNanos = time.Unix(0, math.MaxInt64).UTC()
)

func toNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanos):
		return math.MinInt64 + 1
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// queryer is a *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// --- settings ---

func (s *sqlStore) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: setting %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: setting %q: %w", key, err)
	}
	return v, nil
}

// InitSetting inserts unless present and then reads back what is stored,
// in one transaction. On PostgreSQL, ON CONFLICT DO NOTHING waits for a
// concurrent inserter of the same key to commit and then does nothing, so
// the read sees the winner's value.
func (s *sqlStore) InitSetting(ctx context.Context, key, value string) (string, error) {
	var v string
	err := s.inTx(ctx, func(tx *stx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`,
			key, value); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&v)
	})
	if err != nil {
		return "", fmt.Errorf("store: init setting %q: %w", key, err)
	}
	return v, nil
}

func (s *sqlStore) PutSetting(ctx context.Context, key, value string) error {
	if _, err := s.w.ExecContext(ctx,
		`INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		key, value); err != nil {
		return fmt.Errorf("store: put setting %q: %w", key, err)
	}
	return nil
}

// --- users and tokens ---

const userCols = `id, name, vo, admin, created`

func scanUser(row scanner) (User, error) {
	var u User
	var created int64
	if err := row.Scan(&u.ID, &u.Name, &u.VO, &u.Admin, &created); err != nil {
		return User{}, err
	}
	u.Created = fromNanos(created)
	return u, nil
}

func (s *sqlStore) EnsureUser(ctx context.Context, name, vo string, admin bool) (User, error) {
	var u User
	err := s.inTx(ctx, func(tx *stx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO users (name, vo, admin, created) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`,
			name, vo, admin, toNanos(time.Now())); err != nil {
			return err
		}
		var err error
		u, err = scanUser(tx.QueryRowContext(ctx, `SELECT `+userCols+` FROM users WHERE name = $1`, name))
		return err
	})
	if err != nil {
		return User{}, fmt.Errorf("store: ensure user %q: %w", name, err)
	}
	return u, nil
}

// AddToken stores t. It fails with ErrNotFound if the user does not exist
// and with ErrConflict if a token with the same hash is stored already.
func (s *sqlStore) AddToken(ctx context.Context, t Token) error {
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	err := s.inTx(ctx, func(tx *stx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM users WHERE id = $1`, t.UserID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("user %d: %w", t.UserID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO tokens (hash, user_id, label, expires, created) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (hash) DO NOTHING`,
			t.Hash, t.UserID, t.Label, toNanos(t.Expires), toNanos(t.Created))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("token exists: %w", ErrConflict)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: add token for user %d: %w", t.UserID, err)
	}
	return nil
}

func (s *sqlStore) UserByToken(ctx context.Context, hash string, now time.Time) (User, error) {
	u, _, err := s.TokenUser(ctx, hash, now)
	return u, err
}

func (s *sqlStore) TokenUser(ctx context.Context, hash string, now time.Time) (User, time.Time, error) {
	var u User
	var created, expires int64
	err := s.r.QueryRowContext(ctx,
		`SELECT u.id, u.name, u.vo, u.admin, u.created, t.expires FROM tokens t JOIN users u ON u.id = t.user_id
		WHERE t.hash = $1 AND (t.expires = 0 OR t.expires > $2)`,
		hash, toNanos(now)).Scan(&u.ID, &u.Name, &u.VO, &u.Admin, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		// Do not echo the hash: it identifies a credential.
		return User{}, time.Time{}, fmt.Errorf("store: token: %w", ErrNotFound)
	}
	if err != nil {
		return User{}, time.Time{}, fmt.Errorf("store: token: %w", err)
	}
	u.Created = fromNanos(created)
	return u, fromNanos(expires), nil
}

func (s *sqlStore) UserByName(ctx context.Context, name string) (User, error) {
	u, err := scanUser(s.r.QueryRowContext(ctx, `SELECT id, name, vo, admin, created FROM users WHERE name = $1`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, fmt.Errorf("store: user %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("store: user %q: %w", name, err)
	}
	return u, nil
}

func (s *sqlStore) Tokens(ctx context.Context, userID int64) ([]Token, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT hash, user_id, label, expires, created FROM tokens WHERE user_id = $1 ORDER BY created, hash`, userID)
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var exp, created int64
		if err := rows.Scan(&t.Hash, &t.UserID, &t.Label, &exp, &created); err != nil {
			return nil, fmt.Errorf("store: tokens: %w", err)
		}
		t.Expires, t.Created = fromNanos(exp), fromNanos(created)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteToken(ctx context.Context, userID int64, prefix string) error {
	if prefix == "" || strings.ContainsAny(prefix, "%_") {
		return fmt.Errorf("store: token %q: %w", prefix, ErrNotFound)
	}
	return s.inTx(ctx, func(tx *stx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tokens WHERE user_id = $1 AND hash LIKE $2`, userID, prefix+"%").Scan(&n); err != nil {
			return fmt.Errorf("store: token: %w", err)
		}
		switch {
		case n == 0:
			return fmt.Errorf("store: token %q: %w", prefix, ErrNotFound)
		case n > 1:
			return fmt.Errorf("store: token %q names %d tokens; give more of it: %w", prefix, n, ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE user_id = $1 AND hash LIKE $2`, userID, prefix+"%"); err != nil {
			return fmt.Errorf("store: token: %w", err)
		}
		return nil
	})
}

func (s *sqlStore) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count users: %w", err)
	}
	return n, nil
}

// --- endpoints ---

// UpsertEndpoint inserts e or updates everything but Registered. A zero
// e.Registered is recorded as now on first registration.
func (s *sqlStore) UpsertEndpoint(ctx context.Context, e Endpoint) error {
	if e.Registered.IsZero() {
		e.Registered = time.Now()
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO endpoints (name, url, max_throughput, max_cc, registered, last_seen, up, via)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (name) DO UPDATE SET url = excluded.url, max_throughput = excluded.max_throughput,
			max_cc = excluded.max_cc, last_seen = excluded.last_seen, up = excluded.up, via = excluded.via`,
		e.Name, e.URL, e.MaxThroughput, e.MaxCC, toNanos(e.Registered), toNanos(e.LastSeen), e.Up, e.Via)
	if err != nil {
		return fmt.Errorf("store: upsert endpoint %q: %w", e.Name, err)
	}
	return nil
}

func (s *sqlStore) SetEndpointUp(ctx context.Context, name string, up bool, at time.Time) error {
	var res sql.Result
	var err error
	if up {
		res, err = s.w.ExecContext(ctx, `UPDATE endpoints SET up = $2, last_seen = $3 WHERE name = $1`,
			name, true, toNanos(at))
	} else {
		res, err = s.w.ExecContext(ctx, `UPDATE endpoints SET up = $2 WHERE name = $1`, name, false)
	}
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("store: endpoint %q: %w", name, err)
	}
	return nil
}

func (s *sqlStore) Endpoints(ctx context.Context) ([]Endpoint, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT name, url, max_throughput, max_cc, registered, last_seen, up, via FROM endpoints ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: endpoints: %w", err)
	}
	defer rows.Close()
	var out []Endpoint
	for rows.Next() {
		var e Endpoint
		var reg, seen int64
		if err := rows.Scan(&e.Name, &e.URL, &e.MaxThroughput, &e.MaxCC, &reg, &seen, &e.Up, &e.Via); err != nil {
			return nil, fmt.Errorf("store: endpoints: %w", err)
		}
		e.Registered, e.LastSeen = fromNanos(reg), fromNanos(seen)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: endpoints: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteEndpoint(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *stx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM endpoint_credentials WHERE endpoint = $1`, name); err != nil {
			return fmt.Errorf("store: delete endpoint %q: %w", name, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM endpoints WHERE name = $1`, name)
		if err != nil {
			return fmt.Errorf("store: delete endpoint %q: %w", name, err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return fmt.Errorf("store: endpoint %q: %w", name, ErrNotFound)
		}
		return nil
	})
}

func (s *sqlStore) PutCredential(ctx context.Context, endpoint string, cred []byte, at time.Time) error {
	var err error
	if len(cred) == 0 {
		_, err = s.w.ExecContext(ctx, `DELETE FROM endpoint_credentials WHERE endpoint = $1`, endpoint)
	} else {
		_, err = s.w.ExecContext(ctx,
			`INSERT INTO endpoint_credentials (endpoint, credential, updated) VALUES ($1, $2, $3)
			ON CONFLICT (endpoint) DO UPDATE SET credential = excluded.credential, updated = excluded.updated`,
			endpoint, cred, toNanos(at))
	}
	if err != nil {
		// Never the credential itself in an error.
		return fmt.Errorf("store: credential of endpoint %q: %w", endpoint, err)
	}
	return nil
}

func (s *sqlStore) Credential(ctx context.Context, endpoint string) ([]byte, error) {
	var cred []byte
	err := s.r.QueryRowContext(ctx, `SELECT credential FROM endpoint_credentials WHERE endpoint = $1`, endpoint).Scan(&cred)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: credential of endpoint %q: %w", endpoint, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: credential of endpoint %q: %w", endpoint, err)
	}
	return cred, nil
}

// --- checkpoints ---

func (s *sqlStore) PutCheckpoint(ctx context.Context, key string, data []byte) error {
	if data == nil {
		data = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO checkpoints (key, data, updated) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated = excluded.updated`,
		key, data, toNanos(time.Now()))
	if err != nil {
		return fmt.Errorf("store: put checkpoint %q: %w", key, err)
	}
	return nil
}

// Checkpoint returns the stored journal; an empty journal comes back as
// an empty, non-nil slice.
func (s *sqlStore) Checkpoint(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := s.r.QueryRowContext(ctx, `SELECT data FROM checkpoints WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: checkpoint %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint %q: %w", key, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func (s *sqlStore) DeleteCheckpoint(ctx context.Context, key string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM checkpoints WHERE key = $1`, key); err != nil {
		return fmt.Errorf("store: delete checkpoint %q: %w", key, err)
	}
	return nil
}

// DeleteCheckpoints removes the checkpoints of keys, a few hundred per
// statement (the loop deletes those of a turn's completions together).
func (s *sqlStore) DeleteCheckpoints(ctx context.Context, keys []string) error {
	numbered := s.dialect == dialectPostgres
	for lo := 0; lo < len(keys); lo += 500 {
		chunk := keys[lo:min(lo+500, len(keys))]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		if _, err := s.w.ExecContext(ctx, `DELETE FROM checkpoints WHERE key IN `+inList(1, len(chunk), numbered), args...); err != nil {
			return fmt.Errorf("store: delete %d checkpoints: %w", len(chunk), err)
		}
	}
	return nil
}

// --- observations ---

// AddObservations appends obs in one transaction.
func (s *sqlStore) AddObservations(ctx context.Context, obs []Observation) error {
	if len(obs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *stx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO observations (src, dst, cc, src_load, dst_load, size, throughput, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, o := range obs {
			if o.At.IsZero() {
				o.At = time.Now()
			}
			if _, err := st.ExecContext(ctx, o.Src, o.Dst, o.CC, o.SrcLoad, o.DstLoad, o.Size, o.Throughput, toNanos(o.At)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: add %d observations: %w", len(obs), err)
	}
	return nil
}

func (s *sqlStore) AddObservation(ctx context.Context, o Observation) error {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	_, err := s.w.ExecContext(ctx,
		`INSERT INTO observations (src, dst, cc, src_load, dst_load, size, throughput, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		o.Src, o.Dst, o.CC, o.SrcLoad, o.DstLoad, o.Size, o.Throughput, toNanos(o.At))
	if err != nil {
		return fmt.Errorf("store: add observation: %w", err)
	}
	return nil
}

// Observations returns the newest limit observations (all if limit <= 0)
// in insertion order. "Newest" is by insertion (id), not by At, so that a
// clock step does not reorder the model's history.
func (s *sqlStore) Observations(ctx context.Context, limit int) ([]Observation, error) {
	const cols = `id, src, dst, cc, src_load, dst_load, size, throughput, at`
	q := `SELECT ` + cols + ` FROM observations ORDER BY id`
	var args []any
	if limit > 0 {
		q = `SELECT ` + cols + ` FROM (SELECT ` + cols + ` FROM observations ORDER BY id DESC LIMIT $1) newest ORDER BY id`
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: observations: %w", err)
	}
	defer rows.Close()
	var out []Observation
	for rows.Next() {
		var o Observation
		var id, at int64
		if err := rows.Scan(&id, &o.Src, &o.Dst, &o.CC, &o.SrcLoad, &o.DstLoad, &o.Size, &o.Throughput, &at); err != nil {
			return nil, fmt.Errorf("store: observations: %w", err)
		}
		o.At = fromNanos(at)
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: observations: %w", err)
	}
	return out, nil
}

// --- optimizations ---

func (s *sqlStore) AddOptimization(ctx context.Context, o *Optimization) error {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	if o.Samples == "" {
		o.Samples = "[]"
	}
	err := s.w.QueryRowContext(ctx,
		`INSERT INTO optimizations (src, dst, streams, throughput, sample_bytes, samples, model, cost, cost_bytes, at, fitted, uncertainty, clamped, note)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id`,
		o.Src, o.Dst, o.Streams, o.Throughput, o.SampleBytes, o.Samples, o.Model, o.Cost, o.CostBytes, toNanos(o.At), o.Fitted, o.Uncertainty, o.Clamped, o.Note,
	).Scan(&o.ID)
	if err != nil {
		return fmt.Errorf("store: add optimization %s->%s: %w", o.Src, o.Dst, err)
	}
	return nil
}

// LatestOptimization reads the pair's newest row through the
// optimizations_pair index.
func (s *sqlStore) LatestOptimization(ctx context.Context, src, dst string) (Optimization, error) {
	var o Optimization
	var at int64
	err := s.r.QueryRowContext(ctx,
		`SELECT id, src, dst, streams, throughput, sample_bytes, samples, model, cost, cost_bytes, at, fitted, uncertainty, clamped, note
		FROM optimizations WHERE src = $1 AND dst = $2 ORDER BY id DESC LIMIT 1`, src, dst,
	).Scan(&o.ID, &o.Src, &o.Dst, &o.Streams, &o.Throughput, &o.SampleBytes, &o.Samples, &o.Model, &o.Cost, &o.CostBytes, &at, &o.Fitted, &o.Uncertainty, &o.Clamped, &o.Note)
	if errors.Is(err, sql.ErrNoRows) {
		return Optimization{}, fmt.Errorf("store: optimization %s->%s: %w", src, dst, ErrNotFound)
	}
	if err != nil {
		return Optimization{}, fmt.Errorf("store: optimization %s->%s: %w", src, dst, err)
	}
	o.At = fromNanos(at)
	return o, nil
}

// --- allocations ---

func (s *sqlStore) SaveAllocations(ctx context.Context, put []Allocation, del []AllocationGone) error {
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *stx) error {
		for _, g := range del {
			var err error
			if g.Expires.IsZero() {
				_, err = tx.ExecContext(ctx, `DELETE FROM allocations WHERE id = $1`, g.ID)
			} else {
				_, err = tx.ExecContext(ctx, `DELETE FROM allocations WHERE id = $1 AND expires <= $2`, g.ID, toNanos(g.Expires))
			}
			if err != nil {
				return err
			}
		}
		for _, a := range put {
			_, err := tx.ExecContext(ctx,
				`INSERT INTO allocations (id, src, dst, client, vo, streams, want, draining, reason, created, expires)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
				ON CONFLICT (id) DO UPDATE SET src = excluded.src, dst = excluded.dst, client = excluded.client,
					vo = excluded.vo, streams = excluded.streams, want = excluded.want, draining = excluded.draining,
					reason = excluded.reason, created = excluded.created, expires = excluded.expires`,
				a.ID, a.Src, a.Dst, a.Client, a.VO, a.Streams, a.Want, a.Draining, a.Reason, toNanos(a.Created), toNanos(a.Expires))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: save allocations: %w", err)
	}
	return nil
}

func (s *sqlStore) Allocations(ctx context.Context) ([]Allocation, error) {
	rows, err := s.r.QueryContext(ctx,
		`SELECT id, src, dst, client, vo, streams, want, draining, reason, created, expires FROM allocations ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: allocations: %w", err)
	}
	defer rows.Close()
	var out []Allocation
	for rows.Next() {
		var a Allocation
		var created, expires int64
		if err := rows.Scan(&a.ID, &a.Src, &a.Dst, &a.Client, &a.VO, &a.Streams, &a.Want, &a.Draining, &a.Reason, &created, &expires); err != nil {
			return nil, fmt.Errorf("store: allocations: %w", err)
		}
		a.Created, a.Expires = fromNanos(created), fromNanos(expires)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: allocations: %w", err)
	}
	return out, nil
}
