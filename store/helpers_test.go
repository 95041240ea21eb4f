package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store/storetest"
)

// The tests run against SQLite always and against PostgreSQL when
// SLUICE_TEST_POSTGRES is a URL of a database the test user can connect
// to and in which it can CREATE DATABASE (each test gets a fresh
// database, dropped at cleanup), for example
//
//	SLUICE_TEST_POSTGRES='postgres:///sluice_test?host=/var/run/postgresql' go test ./store/
const postgresEnv = "SLUICE_TEST_POSTGRES"

// testDB is a fresh, empty database of one dialect.
type testDB struct {
	dialect string
	url     string
}

// testDBs returns a fresh SQLite file (in t.TempDir) and, if
// SLUICE_TEST_POSTGRES is set, a fresh PostgreSQL database.
func testDBs(t testing.TB) []testDB {
	t.Helper()
	dbs := []testDB{{dialectSQLite, filepath.Join(t.TempDir(), "data", "sluice.db")}}
	if admin := os.Getenv(postgresEnv); admin != "" {
		dbs = append(dbs, testDB{dialectPostgres, freshPostgres(t, admin)})
	}
	return dbs
}

func freshPostgres(t testing.TB, admin string) string { return storetest.FreshPostgres(t, admin) }

// openTest returns a store on a fresh database of each dialect under
// test, closed at cleanup.
func openTest(t testing.TB) []Store {
	t.Helper()
	var out []Store
	for _, db := range testDBs(t) {
		out = append(out, mustOpen(t, db.url))
	}
	return out
}

// mustOpen opens url and closes the store at cleanup.
func mustOpen(t testing.TB, url string) Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eachStore runs fn as one subtest per dialect, each on a fresh store.
func eachStore(t *testing.T, fn func(t *testing.T, s Store)) {
	t.Helper()
	for _, s := range openTest(t) {
		t.Run(s.Dialect(), func(t *testing.T) { fn(t, s) })
	}
}

// eachDB runs fn as one subtest per dialect with a fresh database's URL
// (for tests that open and close stores themselves).
func eachDB(t *testing.T, fn func(t *testing.T, db testDB)) {
	t.Helper()
	for _, db := range testDBs(t) {
		t.Run(db.dialect, func(t *testing.T) { fn(t, db) })
	}
}

// rawDB opens the test database with plain database/sql, bypassing the
// store (to tamper with it).
func rawDB(t testing.TB, db testDB) *sql.DB {
	t.Helper()
	var raw *sql.DB
	var err error
	switch db.dialect {
	case dialectSQLite:
		raw, err = sql.Open("sqlite", db.url)
	default:
		var cfg *pgx.ConnConfig
		if cfg, err = pgx.ParseConfig(db.url); err == nil {
			raw = stdlib.OpenDB(*cfg)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

var ctx = context.Background()

// ts is a test time: UTC, nanosecond precision, no monotonic reading (so
// that reflect.DeepEqual compares what the store can round-trip).
func ts(sec, nsec int64) time.Time { return time.Unix(1_700_000_000+sec, nsec).UTC() }

// mustUser creates a user.
func mustUser(t testing.TB, s Store, name string) User {
	t.Helper()
	u, err := s.EnsureUser(ctx, name, "vo-"+name, false)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// makeTasks returns n tasks with distinct values in every column.
func makeTasks(n int) []Task {
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{
			Index:       i,
			Src:         fmt.Sprintf("sluice://src/data/run%04d/file%07d.root", i/1000, i),
			Dst:         fmt.Sprintf("sluice://dst/archive/run%04d/file%07d.root", i/1000, i),
			SrcEndpoint: "src",
			DstEndpoint: "dst",
			Size:        int64(1000 + i),
			Expected:    fmt.Sprintf("adler32:%08x", i),
			Batch:       i%2 == 0,
			State:       StateQueued,
			Arrival:     ts(int64(i), 7),
		}
	}
	return tasks
}

// mustJob creates a job of owner with tasks.
func mustJob(t testing.TB, s Store, owner User, tasks []Task) Job {
	t.Helper()
	j := Job{OwnerID: owner.ID, VO: owner.VO, Class: ClassBatch, Checksum: "adler32", Created: ts(0, 0)}
	created, err := s.CreateJob(ctx, &j, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Fatal("CreateJob: created = false for a new job")
	}
	return j
}

// same fails the test unless got and want are deeply equal.
func same[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
