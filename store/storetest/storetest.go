// Package storetest gives tests fresh PostgreSQL databases, so that the
// store's own tests and the service's end-to-end tests run against
// PostgreSQL the same way (see SLUICE_TEST_POSTGRES in .ci/run).
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgresEnv names the environment variable with the URL of a database
// the test user can connect to and in which it can CREATE DATABASE.
const PostgresEnv = "SLUICE_TEST_POSTGRES"

// FreshPostgres creates a randomly named database through the admin URL
// and returns the URL of the new database. It is dropped at cleanup
// (WITH (FORCE): a test that failed, or a process it killed, may have left
// connections open).
func FreshPostgres(t testing.TB, admin string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "sluice_test_" + hex.EncodeToString(rnd[:])
	exec := func(q string) error {
		cfg, err := pgx.ParseConfig(admin)
		if err != nil {
			return err
		}
		db := stdlib.OpenDB(*cfg)
		defer db.Close()
		_, err = db.ExecContext(context.Background(), q)
		return err
	}
	if err := exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		// WITH (FORCE) refuses when a backend of another role is
		// connected, such as an autovacuum worker that started on the
		// freshly filled database; a plain DROP cancels autovacuum
		// itself, so retry without FORCE for a while.
		err := exec("DROP DATABASE " + name + " WITH (FORCE)")
		for i := 0; err != nil && i < 50; i++ {
			time.Sleep(100 * time.Millisecond)
			err = exec("DROP DATABASE IF EXISTS " + name)
		}
		if err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
