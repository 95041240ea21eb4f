package server

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/store/storetest"
)

// TestMaxSizeIsTheAgents: the service bounds sizes where the agents'
// file backend does, so that a file it accepts can be written.
func TestMaxSizeIsTheAgents(t *testing.T) {
	if store.MaxSize != file.MaxSize {
		t.Fatalf("store.MaxSize %d, backend/file.MaxSize %d", int64(store.MaxSize), int64(file.MaxSize))
	}
}

// TestSubmitSizes: a file's size must be -1 (unknown) or 0 to
// store.MaxSize, and a job's sizes must add up to at most store.MaxSize;
// a job accepted has a total that is its sizes' sum. Before, two files of
// 2^63-1 bytes were accepted with a total of -2 bytes, and the job made
// every listing that held it fail (the owner's, the admins', the
// server's own start).
func TestSubmitSizes(t *testing.T) {
	s, admin := submitter(t)
	ctx := context.Background()
	files := func(sizes ...int64) []FileSpec {
		var fs []FileSpec
		for i, n := range sizes {
			fs = append(fs, FileSpec{Source: "sluice://a1/f" + string(rune('a'+i)), Destination: "sluice://a2/f" + string(rune('a'+i)), Size: n})
		}
		return fs
	}
	for _, tc := range []struct {
		name  string
		sizes []int64
		want  string // in the refusal; "" accepted
		bytes int64
	}{
		{"two of 2^63-1", []int64{math.MaxInt64, math.MaxInt64}, "size 9223372036854775807", 0},
		{"one over the bound", []int64{store.MaxSize + 1}, "size", 0},
		{"below -1", []int64{-2}, "size -2", 0},
		{"min int64", []int64{math.MinInt64}, "size", 0},
		{"sum over the bound", []int64{store.MaxSize, 1}, "add up to more than", 0},
		{"sum that would wrap", []int64{store.MaxSize, store.MaxSize, store.MaxSize, store.MaxSize, store.MaxSize, store.MaxSize, store.MaxSize, store.MaxSize}, "add up to more than", 0},
		{"at the bound", []int64{store.MaxSize}, "", store.MaxSize},
		{"unknown and known", []int64{-1, 5, 0}, "", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _, err := s.Submit(ctx, admin, JobSpec{Files: files(tc.sizes...)})
			if tc.want != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v; want a refusal naming %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Bytes != tc.bytes {
				t.Errorf("bytes %d, want %d", j.Bytes, tc.bytes)
			}
		})
	}
	js, err := s.Jobs(ctx, admin, store.JobFilter{})
	if err != nil {
		t.Fatalf("listing the jobs: %v", err)
	}
	if len(js) != 2 {
		t.Errorf("%d jobs stored, want the 2 accepted", len(js))
	}
}

// testStores returns the URL of a fresh SQLite database and, with
// SLUICE_TEST_POSTGRES, of a fresh PostgreSQL one, by dialect.
func testStores(t *testing.T) map[string]string {
	dbs := map[string]string{"sqlite": filepath.Join(t.TempDir(), "s.db")}
	if admin := os.Getenv(storetest.PostgresEnv); admin != "" {
		dbs["postgres"] = storetest.FreshPostgres(t, admin)
	}
	return dbs
}

// rawSQL opens a test database with plain database/sql, to write rows
// no submission makes.
func rawSQL(t *testing.T, dialect, url string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if dialect == "sqlite" {
		db, err = sql.Open("sqlite", url)
	} else {
		var cfg *pgx.ConnConfig
		if cfg, err = pgx.ParseConfig(url); err == nil {
			db = stdlib.OpenDB(*cfg)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestStartWithRowsOutOfRange: stored task rows with sizes or byte counts
// no submission makes (written here directly with SQL) do not keep the
// server from starting: it starts, logs the rows, fails them saying why,
// finishes their jobs, and jobs are listed. Before, the start failed with
// "loading active jobs: ... integer overflow" until the table was edited
// by hand.
func TestStartWithRowsOutOfRange(t *testing.T) {
	for dialect, url := range testStores(t) {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			u, err := st.EnsureUser(ctx, "alice", "vo", false)
			if err != nil {
				t.Fatal(err)
			}
			mk := func(n int) store.Job {
				var ts []store.Task
				for i := range n {
					ts = append(ts, store.Task{Index: i, Src: "sluice://a/f" + string(rune('a'+i)), Dst: "sluice://b/f" + string(rune('a'+i)),
						SrcEndpoint: "a", DstEndpoint: "b", Size: 10, State: store.StateQueued})
				}
				j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
				if _, err := st.CreateJob(ctx, &j, ts); err != nil {
					t.Fatal(err)
				}
				return j
			}
			huge, bad, fine := mk(2), mk(2), mk(1)
			raw := rawSQL(t, dialect, url)
			for _, q := range []struct {
				sql string
				job int64
			}{
				{`UPDATE tasks SET size = 9223372036854775807 WHERE job_id = $1`, huge.ID},
				{`UPDATE tasks SET done = -5 WHERE job_id = $1 AND idx = 0`, bad.ID},
			} {
				if _, err := raw.Exec(q.sql, q.job); err != nil {
					t.Fatal(err)
				}
			}

			var logs bytes.Buffer
			s, err := New(ctx, Config{Store: st, Scheduler: "basecc1", DataDir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.load(ctx); err != nil {
				t.Fatalf("the server does not start: %v", err)
			}
			for _, want := range []string{"job=" + strconv.FormatInt(huge.ID, 10), "job=" + strconv.FormatInt(bad.ID, 10), "size=9223372036854775807", "done=-5"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log does not name the bad rows (%s):\n%s", want, logs.String())
				}
			}
			c := Caller{User: u}
			js, err := s.Jobs(ctx, c, store.JobFilter{})
			if err != nil {
				t.Fatalf("listing jobs: %v", err)
			}
			if len(js) != 3 {
				t.Fatalf("%d jobs listed, want 3", len(js))
			}
			states := map[int64]string{}
			for _, j := range js {
				states[j.ID] = j.State
				if j.Bytes < 0 || j.BytesDone < 0 {
					t.Errorf("job %d: bytes %d, done %d", j.ID, j.Bytes, j.BytesDone)
				}
			}
			if states[huge.ID] != store.StateFailed || states[fine.ID] != store.StateActive {
				t.Errorf("job states %v: want the huge job failed, the fine one active", states)
			}
			// bad has a good file left: active until that one ends.
			files, err := s.Files(ctx, c, bad.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if files[0].State != store.StateFailed || !strings.Contains(files[0].Error, "bytes done -5 is out of range") || files[1].State != store.StateQueued {
				t.Errorf("files of the job with a bad done: %+v", files)
			}
			files, err = s.Files(ctx, c, huge.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if !strings.Contains(f.Error, "size 9223372036854775807 is out of range") {
					t.Errorf("file %d: error %q; want it to say the size is out of range", f.Index, f.Error)
				}
			}
			if _, err := s.Cancel(ctx, c, bad.ID); err != nil {
				t.Errorf("canceling: %v", err)
			}
		})
	}
}
