package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// migrations holds one goose migration set per dialect. The two sets
// describe the same tables and columns (see the comments at the top of
// each file): all query text in this package is shared between them.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// Dialect names, as returned by Store.Dialect.
const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// sqliteBusyTimeout is how long a SQLite statement waits for a lock held
// by another connection (another process on the same file, or a reader
// during a WAL checkpoint) before failing with SQLITE_BUSY.
const sqliteBusyTimeout = 10 * time.Second

// Open opens the store at url and brings its schema up to date.
//
// url is either a PostgreSQL URL (postgres://... or postgresql://..., any
// URL pgx accepts) or a SQLite database file: a plain path, sqlite://PATH
// or file:PATH (sqlite:///abs/db and file:///abs/db are absolute paths,
// sqlite://rel/db is relative). The SQLite file and its parent directory
// are created if missing.
//
// Open runs the dialect's migrations before returning (on PostgreSQL under
// an advisory lock, so servers starting together do not race), and fails
// if the database has a schema version newer than this binary knows.
func Open(ctx context.Context, url string) (Store, error) {
	lower := strings.ToLower(url)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return openPostgres(ctx, url)
	}
	path, err := sqlitePath(url)
	if err != nil {
		return nil, err
	}
	return openSQLite(ctx, path)
}

// sqlitePath extracts the file path from a SQLite database URL.
func sqlitePath(u string) (string, error) {
	path := u
	lower := strings.ToLower(u)
	for _, prefix := range []string{"sqlite://", "sqlite:", "file://", "file:"} {
		if strings.HasPrefix(lower, prefix) {
			path = u[len(prefix):]
			break
		}
	}
	switch {
	case path == "":
		return "", fmt.Errorf("store: open %q: empty database path", u)
	case path == ":memory:" || strings.HasPrefix(path, ":memory:"):
		// A memory database is private to one connection, and the store
		// uses a writer and separate readers.
		return "", fmt.Errorf("store: open %q: in-memory SQLite is not supported, use a file", u)
	case strings.ContainsRune(path, '?'):
		// The driver takes its options after '?' in the DSN: a path with
		// '?' would be cut there.
		return "", fmt.Errorf("store: open %q: SQLite path must not contain '?'", u)
	case path == u && strings.Contains(u, "://"):
		return "", fmt.Errorf("store: open %q: unsupported database URL scheme (want postgres://, postgresql://, sqlite:// or a file path)", u)
	}
	return path, nil
}

// openSQLite opens (creating if needed) the SQLite database at path.
//
// It uses two pools over the same file: a writer pool of exactly one
// connection, through which every write goes (SQLite allows one writer at
// a time, and serializing writers in Go rather than in SQLite avoids
// SQLITE_BUSY between our own connections), and a pool of read-only
// connections which, thanks to WAL, read a consistent snapshot without
// waiting for the writer (for example while a 100,000-task job is being
// inserted).
//
// The writer's settings:
//   - journal_mode=WAL: readers do not block the writer nor it them, and
//     a commit is one sequential append to the -wal file.
//   - synchronous=NORMAL: in WAL mode a commit then writes its frames to
//     the -wal file without an fsync; the WAL is synced at checkpoints.
//     A commit that returned is in the OS page cache, so it survives the
//     process being killed (kill -9, a panic, the OOM killer): the next
//     open replays the WAL. Only an OS crash or power loss can lose the
//     last transactions before a checkpoint, and even then the database is
//     consistent (never corrupt). Our requirement is "no task lost after
//     kill -9 of the server", which this meets; FULL would fsync on every
//     commit, costing a disk flush per scheduler state change. A job's
//     submission is the exception: its client was told "accepted", so
//     CreateJob syncs the WAL after its commit (durableCommit).
//   - foreign_keys=ON: SQLite does not enforce REFERENCES otherwise.
//   - busy_timeout: wait (instead of failing at once) when another
//     process holds the lock, e.g. an operator's sqlite3 shell.
//   - _txlock=immediate: transactions take the write lock at BEGIN, so a
//     transaction that reads and then writes cannot fail with SQLITE_BUSY
//     halfway because another process wrote in between.
func openSQLite(ctx context.Context, path string) (_ Store, err error) {
	fail := func(err error) error { return fmt.Errorf("store: open sqlite %s: %w", path, err) }
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fail(err)
	}
	// The database holds the service's signing key and users' token
	// hashes: only its owner reads it. A new file is made 0600 before
	// SQLite opens it (its -wal and -shm files take the same mode).
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
		// A -wal file with no database: SQLite would replay another
		// database's last writes into this new one.
		if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
			os.Remove(path)
			return nil, fail(fmt.Errorf("%s-wal holds the last writes of a database that is not there (removed?): "+
				"restore that database next to it, or move %s-wal and %s-shm away to start a new one", path, path, path))
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fail(err)
	}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds())
	w, err := sql.Open("sqlite", path+"?"+busy+
		"&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fail(err)
	}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	// One connection, kept open for the life of the store.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, fail(err)
	}
	// The writer has the file open now: its identity, for Check.
	opened, err := os.Stat(path)
	if err != nil {
		return nil, fail(err)
	}
	if !strings.EqualFold(mode, "wal") {
		// WAL needs shared memory between processes on the same host; it
		// is refused on some network file systems. Without it readers and
		// the writer would block each other.
		return nil, fail(fmt.Errorf("journal_mode is %q, not WAL (is the file on a network file system?)", mode))
	}
	if err := migrate(ctx, goose.DialectSQLite3, w, "migrations/sqlite"); err != nil {
		return nil, fail(err)
	}

	// Readers open the file after the writer has set WAL (a persistent
	// property of the file) and migrated it. query_only makes a write
	// through a reader an error rather than a second writer.
	r, err := sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)")
	if err != nil {
		return nil, fail(err)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		return nil, fail(err)
	}
	return &sqlStore{dialect: dialectSQLite, w: newCDB(w), r: newCDB(r), taskBatch: sqliteTaskBatch, wal: path + "-wal", file: path, opened: opened}, nil
}

// openPostgres connects to PostgreSQL. Reads and writes share one pool:
// PostgreSQL handles concurrent writers itself.
func openPostgres(ctx context.Context, rawURL string) (_ Store, err error) {
	// The URL may carry a password: only its redacted form goes into errors.
	shown := "(unparsable URL)"
	if u, err := url.Parse(rawURL); err == nil {
		shown = u.Redacted()
	}
	fail := func(err error) error { return fmt.Errorf("store: open postgres %s: %w", shown, err) }
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fail(errors.New("invalid URL")) // pgx's message may quote the password
	}
	db := stdlib.OpenDB(*cfg)
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	// A bounded pool: each connection is a server process. Enough for the
	// API handlers plus the scheduler; idle connections are released.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		return nil, fail(err)
	}
	// Several servers may start at once against one database: goose takes
	// a session-level advisory lock around the migrations.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fail(err)
	}
	if err := migrate(ctx, goose.DialectPostgres, db, "migrations/postgres", goose.WithSessionLocker(locker)); err != nil {
		return nil, fail(err)
	}
	c := newCDB(db)
	return &sqlStore{dialect: dialectPostgres, w: c, r: c, taskBatch: postgresTaskBatch, pgConfig: cfg}, nil
}

// migrate applies the embedded migrations under dir to db with a goose
// Provider (no goose global state: the global Go-migration registry is
// disabled), then checks that the database is not ahead of this binary.
func migrate(ctx context.Context, dialect goose.Dialect, db *sql.DB, dir string, opts ...goose.ProviderOption) error {
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(dialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("migrate: schema version: %w", err)
	}
	if current > target {
		return fmt.Errorf("database schema version %d is newer than this server's (%d): upgrade the server", current, target)
	}
	return nil
}
