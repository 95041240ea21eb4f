package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The store writes $1, $2, ... in SQLite queries too; this checks that
// the SQLite driver binds them by number, not by order of appearance.
func TestDollarPlaceholders(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got string
	if err := db.QueryRow(`SELECT $2 || '-' || $1 || '-' || $2`, "one", "two").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "two-one-two" {
		t.Fatalf("got %q, want two-one-two", got)
	}
}

func TestSQLitePath(t *testing.T) {
	for _, tc := range []struct {
		url, path string
		bad       bool
	}{
		{url: "/var/lib/sluice/sluice.db", path: "/var/lib/sluice/sluice.db"},
		{url: "data/sluice.db", path: "data/sluice.db"},
		{url: "sqlite:///var/lib/sluice.db", path: "/var/lib/sluice.db"},
		{url: "sqlite://data/sluice.db", path: "data/sluice.db"},
		{url: "SQLite://data/sluice.db", path: "data/sluice.db"},
		{url: "sqlite:data/sluice.db", path: "data/sluice.db"},
		{url: "file:/tmp/x.db", path: "/tmp/x.db"},
		{url: "file:///tmp/x.db", path: "/tmp/x.db"},
		{url: "file:x.db", path: "x.db"},
		{url: "", bad: true},
		{url: "sqlite://", bad: true},
		{url: ":memory:", bad: true},
		{url: "file::memory:", bad: true},
		{url: "x.db?mode=ro", bad: true},
		{url: "mysql://host/db", bad: true},
	} {
		path, err := sqlitePath(tc.url)
		switch {
		case tc.bad && err == nil:
			t.Errorf("sqlitePath(%q) = %q, want an error", tc.url, path)
		case !tc.bad && err != nil:
			t.Errorf("sqlitePath(%q): %v", tc.url, err)
		case !tc.bad && path != tc.path:
			t.Errorf("sqlitePath(%q) = %q, want %q", tc.url, path, tc.path)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "sluice.db") // parents do not exist
	s := mustOpen(t, "sqlite://"+path)
	if s.Dialect() != dialectSQLite {
		t.Fatalf("Dialect() = %q", s.Dialect())
	}
	// Only the owner reads the database (it holds the service's key),
	// whatever the umask.
	for _, f := range []string{path, path + "-wal"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %o; want no access for group and others", filepath.Base(f), m)
		}
	}
	ss := s.(*sqlStore)
	var mode string
	var fk int
	if err := ss.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := ss.w.QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys = %d, %v; want 1", fk, err)
	}
	// Readers are read-only.
	if _, err := ss.r.Exec(`INSERT INTO settings (key, value) VALUES ('k', 'v')`); err == nil {
		t.Fatal("write through a reader connection succeeded")
	}
	// Errors name the file.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(blocker, "sluice.db") // parent is a file
	if _, err := Open(ctx, bad); err == nil {
		t.Fatal("Open under a file succeeded")
	} else if want := "store: open sqlite " + bad + ": "; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q does not start with %q", err, want)
	}
}

func TestMigrationsTwice(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		s1, err := Open(ctx, db.url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s1.EnsureUser(ctx, "alice", "cms", true); err != nil {
			t.Fatal(err)
		}
		// A second store on the same database while the first is open
		// (two servers), then the first closed and reopened.
		s2 := mustOpen(t, db.url)
		if n, err := s2.CountUsers(ctx); err != nil || n != 1 {
			t.Fatalf("CountUsers = %d, %v; want 1", n, err)
		}
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		s3 := mustOpen(t, db.url)
		if n, err := s3.CountUsers(ctx); err != nil || n != 1 {
			t.Fatalf("CountUsers = %d, %v; want 1", n, err)
		}
		var versions int
		if err := rawDB(t, db).QueryRow(`SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0`).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		// Each migration applied once, though three stores opened.
		files, err := fs.Glob(migrations, "migrations/sqlite/*.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("embedded migrations: %v, %v", files, err)
		}
		if versions != len(files) {
			t.Fatalf("%d migrations recorded, want %d", versions, len(files))
		}
	})
}

// A database migrated by a newer server must not be used.
func TestSchemaNewerThanServer(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		s, err := Open(ctx, db.url)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := rawDB(t, db).Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, $1)`, true); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(ctx, db.url); err == nil {
			s.Close()
			t.Fatal("Open succeeded on a database from the future")
		} else {
			t.Log(err)
		}
	})
}

func TestSettings(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if _, err := s.Setting(ctx, "secret"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Setting of unset key: %v, want ErrNotFound", err)
		}
		if v, err := s.InitSetting(ctx, "secret", "first"); err != nil || v != "first" {
			t.Fatalf("InitSetting = %q, %v; want first", v, err)
		}
		if v, err := s.InitSetting(ctx, "secret", "second"); err != nil || v != "first" {
			t.Fatalf("second InitSetting = %q, %v; want first", v, err)
		}
		if v, err := s.Setting(ctx, "secret"); err != nil || v != "first" {
			t.Fatalf("Setting = %q, %v; want first", v, err)
		}
		// Racing initializers all get the one value that was stored.
		const n = 16
		got := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				v, err := s.InitSetting(ctx, "race", fmt.Sprint("value", i))
				if err != nil {
					t.Error(err)
				}
				got[i] = v
			})
		}
		wg.Wait()
		stored, err := s.Setting(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != stored {
				t.Errorf("racer %d got %q, stored is %q", i, v, stored)
			}
		}
		// PutSetting replaces.
		for _, v := range []string{"one", "two"} {
			if err := s.PutSetting(ctx, "policy", v); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Setting(ctx, "policy"); err != nil || got != v {
				t.Fatalf("after PutSetting(%q): %q, %v", v, got, err)
			}
		}
	})
}

func TestUsersAndTokens(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if n, err := s.CountUsers(ctx); err != nil || n != 0 {
			t.Fatalf("CountUsers on a fresh store = %d, %v", n, err)
		}
		alice, err := s.EnsureUser(ctx, "alice", "cms", true)
		if err != nil {
			t.Fatal(err)
		}
		if alice.ID == 0 || alice.Name != "alice" || alice.VO != "cms" || !alice.Admin || alice.Created.IsZero() {
			t.Fatalf("EnsureUser = %+v", alice)
		}
		// Existing users are returned as stored, not updated.
		again, err := s.EnsureUser(ctx, "alice", "atlas", false)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "EnsureUser of an existing user", again, alice)
		bob := mustUser(t, s, "bob")
		if bob.ID == alice.ID || bob.Admin {
			t.Fatalf("bob = %+v, alice = %+v", bob, alice)
		}
		if n, err := s.CountUsers(ctx); err != nil || n != 2 {
			t.Fatalf("CountUsers = %d, %v; want 2", n, err)
		}

		now := ts(1000, 0)
		for _, tok := range []Token{
			{Hash: "forever", UserID: alice.ID, Label: "cli"},
			{Hash: "later", UserID: bob.ID, Expires: now.Add(time.Nanosecond)},
			{Hash: "now", UserID: bob.ID, Expires: now},
			{Hash: "past", UserID: bob.ID, Expires: now.Add(-time.Hour)},
		} {
			if err := s.AddToken(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddToken(ctx, Token{Hash: "forever", UserID: bob.ID}); !errors.Is(err, ErrConflict) {
			t.Errorf("AddToken of a duplicate hash: %v, want ErrConflict", err)
		}
		if err := s.AddToken(ctx, Token{Hash: "orphan", UserID: 9999}); !errors.Is(err, ErrNotFound) {
			t.Errorf("AddToken for a missing user: %v, want ErrNotFound", err)
		}
		for _, tc := range []struct {
			hash string
			want *User // nil: ErrNotFound
		}{
			{"forever", &alice},
			{"later", &bob},
			{"now", nil}, // expires at now: expired
			{"past", nil},
			{"orphan", nil},
			{"unknown", nil},
		} {
			u, err := s.UserByToken(ctx, tc.hash, now)
			if tc.want == nil {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("UserByToken(%q) = %+v, %v; want ErrNotFound", tc.hash, u, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("UserByToken(%q): %v", tc.hash, err)
				continue
			}
			same(t, "UserByToken("+tc.hash+")", u, *tc.want)
		}
	})
}

func TestCreateJob(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(5)
		tasks[3].Size = -1 // unknown yet
		tasks[3].State = ""
		tasks[4].State = ""
		tasks[4].Arrival = time.Time{}
		tasks[2].Replicas = []string{"sluice://b/x y", "sluice://c/x"}
		j := Job{
			OwnerID: alice.ID, VO: "cms", SubmissionID: "sub-1", Label: "run 1", Class: ClassInteractive,
			Priority: 3, Deadline: ts(3600, 123), VerifyChecksum: true, Checksum: "adler32", Retry: 2,
			Optimize: true, Streams: 6, Adaptive: `{"p":4}`, Selection: "tcs", Created: ts(0, 5),
		}
		created, err := s.CreateJob(ctx, &j, tasks)
		if err != nil || !created {
			t.Fatalf("CreateJob = %v, %v", created, err)
		}
		if j.ID == 0 || j.Owner != "alice" || j.State != StateActive {
			t.Fatalf("created job %+v", j)
		}
		// Defaults written back.
		if tasks[3].State != StateResolving || tasks[4].State != StateQueued || !tasks[4].Arrival.Equal(j.Created) {
			t.Fatalf("task defaults: %+v / %+v", tasks[3], tasks[4])
		}
		ids := map[int64]bool{}
		for i, task := range tasks {
			if task.ID == 0 || task.JobID != j.ID || ids[task.ID] {
				t.Fatalf("task %d: ID %d JobID %d (job %d)", i, task.ID, task.JobID, j.ID)
			}
			ids[task.ID] = true
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "Job", got, j)
		if got.Files != 5 || got.Bytes != 1000+1001+1002+1004 {
			t.Fatalf("counters: %+v", got)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "Tasks", stored, tasks)

		// Resubmission: the first job, nothing inserted.
		dup := Job{OwnerID: alice.ID, SubmissionID: "sub-1", Label: "other"}
		created, err = s.CreateJob(ctx, &dup, makeTasks(3))
		if err != nil || created {
			t.Fatalf("resubmission: created = %v, %v", created, err)
		}
		same(t, "resubmitted job", dup, j)
		if n, _ := s.Tasks(ctx, j.ID, 0, 0); len(n) != 5 {
			t.Fatalf("job has %d tasks after resubmission", len(n))
		}
		// The same submission id of another owner, and empty ids, are new jobs.
		bob := mustUser(t, s, "bob")
		other := Job{OwnerID: bob.ID, SubmissionID: "sub-1"}
		if created, err := s.CreateJob(ctx, &other, nil); err != nil || !created || other.ID == j.ID {
			t.Fatalf("other owner's job: %v, %v, %+v", created, err, other)
		}
		for range 2 {
			anon := Job{OwnerID: alice.ID}
			if created, err := s.CreateJob(ctx, &anon, nil); err != nil || !created {
				t.Fatalf("job without submission id: %v, %v", created, err)
			}
		}
		all, err := s.Jobs(ctx, JobFilter{})
		if err != nil || len(all) != 4 {
			t.Fatalf("Jobs = %d jobs, %v; want 4", len(all), err)
		}

		// Failures insert nothing.
		if _, err := s.CreateJob(ctx, &Job{OwnerID: 9999}, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("CreateJob for a missing owner: %v, want ErrNotFound", err)
		}
		bad := makeTasks(3)
		bad[2].Index = 0
		badJob := Job{OwnerID: alice.ID, SubmissionID: "bad"}
		if _, err := s.CreateJob(ctx, &badJob, bad); err == nil {
			t.Error("CreateJob with duplicate task indexes succeeded")
		}
		if bad[0].ID != 0 || badJob.ID != 0 {
			t.Errorf("failed CreateJob set IDs: job %d, task %d", badJob.ID, bad[0].ID)
		}
		if all, _ := s.Jobs(ctx, JobFilter{}); len(all) != 4 {
			t.Errorf("%d jobs after failed creates, want 4", len(all))
		}
		if _, err := s.Job(ctx, 9999); !errors.Is(err, ErrNotFound) {
			t.Errorf("Job(9999): %v, want ErrNotFound", err)
		}
	})
}

// Concurrent submissions with one submission id create one job.
func TestCreateJobRace(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		const n = 8
		jobs := make([]Job, n)
		created := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				jobs[i] = Job{OwnerID: alice.ID, SubmissionID: "same"}
				var err error
				if created[i], err = s.CreateJob(ctx, &jobs[i], makeTasks(50)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		ncreated := 0
		for i := range n {
			if created[i] {
				ncreated++
			}
			if jobs[i].ID != jobs[0].ID {
				t.Errorf("submission %d got job %d, submission 0 job %d", i, jobs[i].ID, jobs[0].ID)
			}
		}
		if ncreated != 1 {
			t.Errorf("%d submissions created a job, want 1", ncreated)
		}
		if tasks, err := s.Tasks(ctx, jobs[0].ID, 0, 0); err != nil || len(tasks) != 50 {
			t.Errorf("job has %d tasks, %v; want 50", len(tasks), err)
		}
	})
}

func TestUpdateTasksAndCounters(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(9)
		tasks[5].Size, tasks[5].State = -1, StateResolving
		j := mustJob(t, s, alice, tasks)
		sizes := int64(1000 + 1001 + 1002 + 1003 + 1004 + 1006 + 1007 + 1008)
		same(t, "counters of a new job", [6]int64{int64(j.Files), int64(j.FilesDone), int64(j.FilesFailed),
			int64(j.FilesCanceled), j.Bytes, j.BytesDone}, [6]int64{9, 0, 0, 0, sizes, 0})

		// Every mutable field changes.
		up := slices.Clone(tasks)
		up[0].State, up[0].Done, up[0].Checksum, up[0].Finished = StateDone, 1000, "adler32:00000000", ts(50, 1)
		up[1].State, up[1].Done, up[1].Error, up[1].Attempts = StateFailed, 10, "no space", 3
		up[2].State, up[2].Done, up[2].CC, up[2].Started = StateRunning, 500, 8, ts(20, 2)
		up[2].Wait, up[2].Trans, up[2].Throughput, up[2].Preemptions = 1.5, 2.25, 1e9, 1
		up[3].State = StateCanceled
		up[5].State, up[5].Size, up[5].SrcEndpoint, up[5].DstEndpoint = StateQueued, 4096, "src2", "dst2"
		// Distinct counts per terminal state: 3 done, 1 failed, 2 canceled.
		up[6].State, up[6].Done = StateDone, 1006
		up[7].State, up[7].Done = StateDone, 1007
		up[8].State = StateCanceled
		audit := []AuditEntry{
			{At: ts(50, 1), JobID: j.ID, TaskID: up[0].ID, Actor: "sched", From: StateRunning, To: StateDone},
			{At: ts(51, 1), JobID: j.ID, TaskID: up[1].ID, Actor: "sched", From: StateRunning, To: StateFailed, Detail: "no space"},
		}
		if err := s.UpdateTasks(ctx, up, audit); err != nil {
			t.Fatal(err)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "updated tasks", stored, up)
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "counters", [6]int64{int64(got.Files), int64(got.FilesDone), int64(got.FilesFailed),
			int64(got.FilesCanceled), got.Bytes, got.BytesDone},
			// Bytes done: not the failed file's 10 (its partial copy
			// is removed), the running file's 500.
			[6]int64{9, 3, 1, 2, sizes + 4096, 1000 + 500 + 1006 + 1007})
		entries, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "audit", entries, audit)

		// A missing task fails the whole call: nothing is written.
		up2 := slices.Clone(up)
		up2[4].State = StateRunning
		up2 = append(up2, Task{ID: 999999, State: StateDone})
		if err := s.UpdateTasks(ctx, up2, []AuditEntry{{JobID: j.ID, Detail: "x"}}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("UpdateTasks with a missing task: %v, want ErrNotFound", err)
		}
		if stored, _ := s.Tasks(ctx, j.ID, 4, 1); len(stored) != 1 || stored[0].State != StateQueued {
			t.Fatalf("task 4 after a failed update: %+v", stored)
		}
		if entries, _ := s.Audit(ctx, j.ID); len(entries) != 2 {
			t.Fatalf("%d audit entries after a failed update, want 2", len(entries))
		}
		if err := s.UpdateTasks(ctx, nil, nil); err != nil {
			t.Fatalf("empty UpdateTasks: %v", err)
		}

		// A task listed twice: the later entry wins.
		first, second := up[4], up[4]
		first.State, first.Done = StateRunning, 1
		second.State, second.Done = StateRunning, 2
		if err := s.UpdateTasks(ctx, []Task{first, up[0], second}, nil); err != nil {
			t.Fatal(err)
		}
		if stored, _ := s.Tasks(ctx, j.ID, 4, 1); len(stored) != 1 || stored[0].Done != 2 {
			t.Fatalf("task listed twice: stored %+v, want Done 2", stored)
		}
	})
}

// RETURNING rows may come back in any order: collectTaskIDs matches them
// to tasks by index.
func TestCollectTaskIDs(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	chunk := []Task{{Index: 7}, {Index: 8}, {Index: 9}}
	for _, tc := range []struct {
		rows string // (id, idx) pairs, as a VALUES list
		want []int64
		bad  bool
	}{
		{rows: "(10, 7), (11, 8), (12, 9)", want: []int64{10, 11, 12}},
		{rows: "(12, 9), (10, 7), (11, 8)", want: []int64{10, 11, 12}},
		{rows: "(10, 7), (12, 9), (11, 8)", want: []int64{10, 11, 12}},
		{rows: "(10, 7), (11, 8)", bad: true},          // a row missing
		{rows: "(10, 7), (11, 8), (12, 3)", bad: true}, // an unknown index
	} {
		rows, err := db.Query("SELECT column1, column2 FROM (VALUES " + tc.rows + ")")
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(chunk))
		err = collectTaskIDs(rows, chunk, ids)
		switch {
		case tc.bad && err == nil:
			t.Errorf("rows %s: no error", tc.rows)
		case !tc.bad && err != nil:
			t.Errorf("rows %s: %v", tc.rows, err)
		case !tc.bad:
			same(t, "IDs for rows "+tc.rows, ids, tc.want)
		}
	}
}

func TestLastPerID(t *testing.T) {
	for _, tc := range []struct {
		ids, done []int64 // input: task IDs and their Done values
		want      []int64 // Done values kept
	}{
		{nil, nil, nil},
		{[]int64{1}, []int64{10}, []int64{10}},
		{[]int64{1, 2, 3}, []int64{10, 20, 30}, []int64{10, 20, 30}},
		{[]int64{1, 2, 1}, []int64{10, 20, 11}, []int64{20, 11}},
		{[]int64{1, 1, 1}, []int64{10, 11, 12}, []int64{12}},
		{[]int64{2, 1, 2, 1}, []int64{20, 10, 21, 11}, []int64{21, 11}},
	} {
		var in []Task
		for i := range tc.ids {
			in = append(in, Task{ID: tc.ids[i], Done: tc.done[i]})
		}
		var got []int64
		for _, task := range lastPerID(in) {
			got = append(got, task.Done)
		}
		same(t, fmt.Sprint("lastPerID of ", tc.ids), got, tc.want)
	}
}

// UpdateTasks and audit inserts work in batches: check the batch edges.
func TestUpdateTasksBatches(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		const n = 2*taskUpdateBatch + 3
		tasks := makeTasks(n)
		j := mustJob(t, s, alice, tasks)
		for _, k := range []int{1, taskUpdateBatch - 1, taskUpdateBatch, taskUpdateBatch + 1, n} {
			up := slices.Clone(tasks[:k])
			var audit []AuditEntry
			for i := range up {
				up[i].Done = int64(k*1000 + i)
				audit = append(audit, AuditEntry{At: ts(int64(i), 0), JobID: j.ID, TaskID: up[i].ID, Detail: fmt.Sprint(k)})
			}
			before, err := s.Audit(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.UpdateTasks(ctx, up, audit); err != nil {
				t.Fatalf("UpdateTasks of %d: %v", k, err)
			}
			stored, err := s.Tasks(ctx, j.ID, 0, k)
			if err != nil {
				t.Fatal(err)
			}
			same(t, fmt.Sprint("tasks after updating ", k), stored, up)
			after, err := s.Audit(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			same(t, fmt.Sprint("audit after updating ", k), after[len(before):], audit)
		}
		// A missing task in the last batch.
		up := slices.Clone(tasks)
		up[n-1].ID = 1 << 40
		if err := s.UpdateTasks(ctx, up, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("UpdateTasks with a missing task in the last batch: %v, want ErrNotFound", err)
		}
	})
}

func TestJobsFilter(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		// Jobs 1..5 (in creation order): alice, bob, alice, bob, alice,
		// job k with k tasks (so that counters tell them apart).
		var jobs []Job
		for k := 1; k <= 5; k++ {
			owner := alice
			if k%2 == 0 {
				owner = bob
			}
			jobs = append(jobs, mustJob(t, s, owner, makeTasks(k)))
		}
		if err := s.FinishJob(ctx, jobs[2].ID, StateDone, ts(9, 0), "sched"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CancelJob(ctx, jobs[3].ID, ts(9, 0), "bob"); err != nil {
			t.Fatal(err)
		}
		// want lists 1-based job numbers, newest first.
		for _, tc := range []struct {
			name string
			f    JobFilter
			want []int
		}{
			{"all", JobFilter{}, []int{5, 4, 3, 2, 1}},
			{"alice", JobFilter{OwnerID: alice.ID}, []int{5, 3, 1}},
			{"bob", JobFilter{OwnerID: bob.ID}, []int{4, 2}},
			{"active", JobFilter{State: StateActive}, []int{5, 2, 1}},
			{"alice active", JobFilter{OwnerID: alice.ID, State: StateActive}, []int{5, 1}},
			{"done", JobFilter{State: StateDone}, []int{3}},
			{"canceled", JobFilter{State: StateCanceled}, []int{4}},
			{"failed", JobFilter{State: StateFailed}, nil},
			{"nobody", JobFilter{OwnerID: 9999}, nil},
			{"page 1", JobFilter{Limit: 2}, []int{5, 4}},
			{"page 2", JobFilter{Limit: 2, Before: jobs[3].ID}, []int{3, 2}},
			{"page 3", JobFilter{Limit: 2, Before: jobs[1].ID}, []int{1}},
			{"alice page 2", JobFilter{OwnerID: alice.ID, Limit: 1, Before: jobs[4].ID}, []int{3}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Jobs(ctx, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				var nums []int
				for _, j := range got {
					k := slices.IndexFunc(jobs, func(x Job) bool { return x.ID == j.ID }) + 1
					nums = append(nums, k)
					// Counters and owner belong to this job.
					one, err := s.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					same(t, "Jobs entry vs Job", j, one)
					if j.Files != k || j.Owner == "" {
						t.Errorf("job %d: Files %d, Owner %q", k, j.Files, j.Owner)
					}
				}
				same(t, "jobs", nums, tc.want)
			})
		}
	})
}

func TestTasksPaging(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(10)
		// Inserted out of index order: Tasks orders by index.
		slices.Reverse(tasks)
		j := mustJob(t, s, alice, tasks)
		mustJob(t, s, alice, makeTasks(3)) // another job's tasks are not listed
		for _, tc := range []struct {
			from, limit int
			want        []int
		}{
			{0, 0, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
			{0, 3, []int{0, 1, 2}},
			{3, 4, []int{3, 4, 5, 6}},
			{8, 5, []int{8, 9}},
			{9, 0, []int{9}},
			{10, 0, nil},
			{-5, 1, []int{0}},
		} {
			got, err := s.Tasks(ctx, j.ID, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, task := range got {
				if task.JobID != j.ID {
					t.Fatalf("task of job %d listed", task.JobID)
				}
				idx = append(idx, task.Index)
			}
			same(t, fmt.Sprintf("Tasks(from %d, limit %d)", tc.from, tc.limit), idx, tc.want)
		}
		if got, err := s.Tasks(ctx, 9999, 0, 0); err != nil || len(got) != 0 {
			t.Fatalf("Tasks of a missing job = %v, %v", got, err)
		}
	})
}

// TestTasksInState: a job's files of one state, paged by index as Tasks
// is, without the others (a large job's few failed files).
func TestTasksInState(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		j := mustJob(t, s, alice, makeTasks(10))
		other := mustJob(t, s, alice, makeTasks(3))
		up, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{1, 4, 5, 9} {
			up[i].State, up[i].Error = StateFailed, "no space"
		}
		up[2].State = StateDone
		otherUp, err := s.Tasks(ctx, other.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		otherUp[0].State = StateFailed // another job's failed file is not listed
		if err := s.UpdateTasks(ctx, append(up, otherUp...), nil); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			state       string
			from, limit int
			want        []int
		}{
			{StateFailed, 0, 0, []int{1, 4, 5, 9}},
			{StateFailed, 0, 2, []int{1, 4}},
			{StateFailed, 5, 2, []int{5, 9}},
			{StateFailed, 10, 0, nil},
			{StateDone, 0, 0, []int{2}},
			{StateQueued, 0, 3, []int{0, 3, 6}},
			{StateCanceled, 0, 0, nil},
		} {
			got, err := s.TasksInState(ctx, j.ID, tc.state, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, task := range got {
				if task.JobID != j.ID || task.State != tc.state {
					t.Fatalf("TasksInState(%s): task %d of job %d in state %s listed", tc.state, task.Index, task.JobID, task.State)
				}
				idx = append(idx, task.Index)
			}
			same(t, fmt.Sprintf("TasksInState(%s, from %d, limit %d)", tc.state, tc.from, tc.limit), idx, tc.want)
		}
		if _, err := s.TasksInState(ctx, j.ID, "", 0, 0); err == nil {
			t.Error("TasksInState without a state listed every task")
		}
	})
}

func TestActiveTasks(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		states := []string{StateResolving, StateQueued, StateRunning, StateDone, StateFailed, StateCanceled}
		var want []int64
		for range 2 {
			tasks := makeTasks(len(states))
			for i := range tasks {
				tasks[i].State = states[i]
			}
			mustJob(t, s, alice, tasks)
			for _, task := range tasks {
				if !Terminal(task.State) {
					want = append(want, task.ID)
				}
			}
		}
		active, err := s.ActiveTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, task := range active {
			got = append(got, task.ID)
		}
		same(t, "active task IDs", got, want)
		// Finishing one removes it.
		active[0].State = StateDone
		if err := s.UpdateTasks(ctx, active[:1], nil); err != nil {
			t.Fatal(err)
		}
		if again, err := s.ActiveTasks(ctx); err != nil || len(again) != len(want)-1 {
			t.Fatalf("ActiveTasks after one finished: %d, %v", len(again), err)
		}
	})
}

func TestFinishJob(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		j := mustJob(t, s, alice, makeTasks(2))
		at := ts(100, 9)
		if err := s.FinishJob(ctx, j.ID, StateActive, at, "sched"); err == nil {
			t.Fatal("FinishJob to a non-terminal state succeeded")
		}
		if err := s.FinishJob(ctx, j.ID, StateDone, at, "sched"); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != StateDone || !got.Finished.Equal(at) {
			t.Fatalf("finished job: state %s finished %v", got.State, got.Finished)
		}
		if err := s.FinishJob(ctx, j.ID, StateDone, at.Add(time.Second), "sched"); err != nil {
			t.Fatalf("repeated FinishJob: %v", err)
		}
		if err := s.FinishJob(ctx, j.ID, StateFailed, at, "sched"); !errors.Is(err, ErrConflict) {
			t.Fatalf("FinishJob failed after done: %v, want ErrConflict", err)
		}
		if err := s.FinishJob(ctx, 9999, StateDone, at, "sched"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("FinishJob of a missing job: %v, want ErrNotFound", err)
		}
		entries, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "audit", entries, []AuditEntry{{At: at, JobID: j.ID, Actor: "sched", From: StateActive, To: StateDone}})
	})
}

func TestCancelJob(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(6)
		for i, st := range []string{StateResolving, StateQueued, StateRunning, StateDone, StateFailed, StateCanceled} {
			tasks[i].State = st
		}
		j := mustJob(t, s, alice, tasks)
		other := mustJob(t, s, alice, makeTasks(2))
		at := ts(200, 3)
		ids, err := s.CancelJob(ctx, j.ID, at, "alice")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "canceled IDs", ids, []int64{tasks[0].ID, tasks[1].ID, tasks[2].ID})
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != StateCanceled || !got.Finished.Equal(at) || got.FilesCanceled != 4 || got.FilesDone != 1 || got.FilesFailed != 1 {
			t.Fatalf("canceled job: %+v", got)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, task := range stored {
			want := tasks[i]
			if i < 3 {
				want.State, want.Finished = StateCanceled, at
			}
			same(t, fmt.Sprint("task ", i), task, want)
		}
		entries, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "audit", entries, []AuditEntry{{At: at, JobID: j.ID, Actor: "alice", From: StateActive,
			To: StateCanceled, Detail: "3 tasks canceled"}})
		// Other jobs are untouched; canceling again is a no-op.
		if o, _ := s.Job(ctx, other.ID); o.State != StateActive || o.FilesCanceled != 0 {
			t.Fatalf("other job: %+v", o)
		}
		if ids, err := s.CancelJob(ctx, j.ID, at, "alice"); err != nil || ids != nil {
			t.Fatalf("second cancel = %v, %v; want nil, nil", ids, err)
		}
		if err := s.FinishJob(ctx, other.ID, StateDone, at, "sched"); err != nil {
			t.Fatal(err)
		}
		if ids, err := s.CancelJob(ctx, other.ID, at, "alice"); err != nil || ids != nil {
			t.Fatalf("cancel of a done job = %v, %v; want nil, nil", ids, err)
		}
		if _, err := s.CancelJob(ctx, 9999, at, "alice"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("cancel of a missing job: %v, want ErrNotFound", err)
		}
		if entries, _ := s.Audit(ctx, j.ID); len(entries) != 1 {
			t.Fatalf("%d audit entries after no-op cancels, want 1", len(entries))
		}
	})
}

// TestDoneAfterCancel: a canceled task found in place becomes done (with
// its checksum, its bytes counted, an audit entry); any other task is
// left as it is.
func TestDoneAfterCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(3)
		tasks[1].State, tasks[2].State = StateFailed, StateRunning
		j := mustJob(t, s, alice, tasks)
		if _, err := s.CancelJob(ctx, j.ID, ts(10, 0), "alice"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			task int
			want bool
		}{
			{0, true},  // canceled
			{0, false}, // done already
			{1, false}, // failed, not canceled
			{2, true},  // canceled by CancelJob while it ran
		} {
			got, err := s.DoneAfterCancel(ctx, tasks[tc.task].ID, "xxh3:ab", ts(11, 0), "sweep")
			if err != nil || got != tc.want {
				t.Fatalf("DoneAfterCancel(task %d) = %v, %v; want %v", tc.task, got, err, tc.want)
			}
		}
		if got, err := s.DoneAfterCancel(ctx, 9999, "xxh3:ab", ts(11, 0), "sweep"); err != nil || got {
			t.Fatalf("DoneAfterCancel(missing) = %v, %v; want false, nil", got, err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != StateCanceled || got.FilesDone != 2 || got.FilesFailed != 1 || got.FilesCanceled != 0 ||
			got.BytesDone != tasks[0].Size+tasks[2].Size {
			t.Fatalf("job after DoneAfterCancel: %+v", got)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st := stored[0]; st.State != StateDone || st.Checksum != "xxh3:ab" || st.Done != st.Size {
			t.Fatalf("task after DoneAfterCancel: %+v", st)
		}
		entries, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(entries); n != 3 || entries[1].From != StateCanceled || entries[1].To != StateDone || entries[1].TaskID != tasks[0].ID {
			t.Fatalf("audit: %+v", entries)
		}
	})
}

func TestEndpoints(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if eps, err := s.Endpoints(ctx); err != nil || len(eps) != 0 {
			t.Fatalf("Endpoints on a fresh store = %v, %v", eps, err)
		}
		b := Endpoint{Name: "b", URL: "https://b:8443", MaxThroughput: 1.25e9, MaxCC: 16,
			Registered: ts(1, 0), LastSeen: ts(1, 0), Up: true}
		a := Endpoint{Name: "a", URL: "http://a:80", Registered: ts(2, 0), LastSeen: ts(2, 0), Up: true}
		for _, e := range []Endpoint{b, a} {
			if err := s.UpsertEndpoint(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		// Re-registration: all but Registered updated.
		b2 := Endpoint{Name: "b", URL: "https://b2:8443", MaxThroughput: 2e9, MaxCC: 32,
			Registered: ts(10, 0), LastSeen: ts(10, 0), Up: true}
		if err := s.UpsertEndpoint(ctx, b2); err != nil {
			t.Fatal(err)
		}
		b2.Registered = b.Registered
		eps, err := s.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "endpoints", eps, []Endpoint{a, b2})

		// Down keeps LastSeen; a heartbeat sets it.
		if err := s.SetEndpointUp(ctx, "a", false, ts(20, 0)); err != nil {
			t.Fatal(err)
		}
		a.Up = false
		if err := s.SetEndpointUp(ctx, "b", true, ts(21, 0)); err != nil {
			t.Fatal(err)
		}
		b2.LastSeen = ts(21, 0)
		eps, err = s.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "endpoints after heartbeats", eps, []Endpoint{a, b2})
		if err := s.SetEndpointUp(ctx, "nope", true, ts(0, 0)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("SetEndpointUp of a missing endpoint: %v, want ErrNotFound", err)
		}
	})
}

// TestStorageEndpoints: a storage endpoint keeps its relaying agent,
// its credential is kept apart (replaced, removed, gone with the
// endpoint) and never listed with it.
func TestStorageEndpoints(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		x := Endpoint{Name: "xrd", URL: "root://xrd1:1094", Via: "dtn1", MaxCC: 8, Registered: ts(1, 0), Up: true}
		if err := s.UpsertEndpoint(ctx, x); err != nil {
			t.Fatal(err)
		}
		eps, err := s.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "endpoints", eps, []Endpoint{x})
		if !x.Storage() || (Endpoint{URL: "https://dtn1:8443"}).Storage() {
			t.Error("Storage tells agents from storage servers wrongly")
		}
		if _, err := s.Credential(ctx, "xrd"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("credential before one was put: %v, want ErrNotFound", err)
		}
		for _, c := range []string{`{"username":"a"}`, `{"username":"b","password":"p"}`} {
			if err := s.PutCredential(ctx, "xrd", []byte(c), ts(2, 0)); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Credential(ctx, "xrd"); err != nil || string(got) != c {
				t.Fatalf("credential %q, %v; want %q", got, err, c)
			}
		}
		if err := s.PutCredential(ctx, "xrd", nil, ts(3, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Credential(ctx, "xrd"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("credential after its removal: %v, want ErrNotFound", err)
		}
		if err := s.PutCredential(ctx, "xrd", []byte("secret"), ts(4, 0)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteEndpoint(ctx, "xrd"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Credential(ctx, "xrd"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("credential of a deleted endpoint: %v, want ErrNotFound", err)
		}
		if err := s.DeleteEndpoint(ctx, "xrd"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting a missing endpoint: %v, want ErrNotFound", err)
		}
	})
}

// TestEndedWithCheckpoint: the tasks that ended (done, failed, canceled)
// with a checkpoint left are what a cleanup still owes; running tasks'
// checkpoints and keys that are not a task's are not listed.
func TestEndedWithCheckpoint(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		j := Job{OwnerID: alice.ID, Created: ts(0, 0)}
		if _, err := s.CreateJob(ctx, &j, makeTasks(5)); err != nil {
			t.Fatal(err)
		}
		ts5, err := s.Tasks(ctx, j.ID, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		ts5[0].State, ts5[1].State, ts5[2].State, ts5[3].State = StateCanceled, StateRunning, StateFailed, StateDone
		if err := s.UpdateTasks(ctx, ts5, nil); err != nil {
			t.Fatal(err)
		}
		for _, x := range ts5[:4] {
			if err := s.PutCheckpoint(ctx, fmt.Sprint("task/", x.ID), []byte("j")); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []string{"task/x", "task/", "multi:x", "task/999999"} {
			if err := s.PutCheckpoint(ctx, k, []byte("j")); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.EndedWithCheckpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, x := range got {
			ids = append(ids, x.ID)
		}
		if want := []int64{ts5[0].ID, ts5[2].ID, ts5[3].ID}; !slices.Equal(ids, want) {
			t.Errorf("ended with a checkpoint: %v, want %v (canceled, failed, done; not running, queued or unknown)", ids, want)
		}
		if len(got) > 0 && got[0].Dst != ts5[0].Dst {
			t.Errorf("listed task %+v, want its destination", got[0])
		}
	})
}

func TestCheckpoints(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if _, err := s.Checkpoint(ctx, "k"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Checkpoint of a missing key: %v, want ErrNotFound", err)
		}
		big := make([]byte, 1<<20)
		for i := range big {
			big[i] = byte(i * 7)
		}
		for _, data := range [][]byte{[]byte("first"), {0, 1, 2, 255, 0}, big, {}} {
			if err := s.PutCheckpoint(ctx, "k", data); err != nil {
				t.Fatal(err)
			}
			got, err := s.Checkpoint(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(data) || got == nil {
				t.Fatalf("Checkpoint = %d bytes (nil %v), want %d", len(got), got == nil, len(data))
			}
		}
		if err := s.PutCheckpoint(ctx, "other", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteCheckpoint(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Checkpoint(ctx, "k"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Checkpoint after delete: %v, want ErrNotFound", err)
		}
		if err := s.DeleteCheckpoint(ctx, "k"); err != nil {
			t.Fatalf("DeleteCheckpoint of a missing key: %v", err)
		}
		if got, err := s.Checkpoint(ctx, "other"); err != nil || string(got) != "x" {
			t.Fatalf("other checkpoint = %q, %v", got, err)
		}
		// Several at once, more than one statement's worth, some absent.
		var keys []string
		for i := range 1200 {
			k := fmt.Sprint("batch/", i)
			if i%3 != 0 {
				if err := s.PutCheckpoint(ctx, k, []byte("y")); err != nil {
					t.Fatal(err)
				}
			}
			keys = append(keys, k)
		}
		if err := s.PutCheckpoint(ctx, "kept", []byte("z")); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteCheckpoints(ctx, keys); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"batch/1", "batch/599", "batch/1199"} {
			if _, err := s.Checkpoint(ctx, k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Checkpoint(%s) after DeleteCheckpoints: %v, want ErrNotFound", k, err)
			}
		}
		for _, k := range []string{"other", "kept"} {
			if _, err := s.Checkpoint(ctx, k); err != nil {
				t.Fatalf("Checkpoint(%s), not among the deleted: %v", k, err)
			}
		}
	})
}

func TestObservations(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if obs, err := s.Observations(ctx, 10); err != nil || len(obs) != 0 {
			t.Fatalf("Observations on a fresh store = %v, %v", obs, err)
		}
		var all []Observation
		for i := range 5 {
			o := Observation{Src: "a", Dst: fmt.Sprint("b", i), CC: i + 1, SrcLoad: i, DstLoad: 2 * i,
				Size: int64(i) << 30, Throughput: float64(i) * 1e8,
				At: ts(int64(10-i), 0)} // At decreasing: order is by insertion
			all = append(all, o)
		}
		// One alone, the rest in a batch: the order is insertion's.
		if err := s.AddObservation(ctx, all[0]); err != nil {
			t.Fatal(err)
		}
		if err := s.AddObservations(ctx, all[1:]); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			limit int
			want  []Observation
		}{
			{3, all[2:]},
			{1, all[4:]},
			{5, all},
			{10, all},
			{0, all},
		} {
			got, err := s.Observations(ctx, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			same(t, fmt.Sprint("Observations(", tc.limit, ")"), got, tc.want)
		}
	})
}

// TestOptimizations: the newest estimate of a pair is returned, pairs do
// not mix, and a pair never estimated is ErrNotFound.
func TestOptimizations(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if _, err := s.LatestOptimization(ctx, "a", "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("LatestOptimization on a fresh store: %v, want ErrNotFound", err)
		}
		rows := []Optimization{
			{Src: "a", Dst: "b", Streams: 4, Throughput: 5e7, SampleBytes: 20 << 20, Samples: `[[1,1e7],[2,2e7],[4,5e7]]`, Model: "second order", Cost: 2.5, CostBytes: 60 << 20, At: ts(10, 0)},
			{Src: "a", Dst: "c", Streams: 2, Throughput: 1e7, At: ts(11, 0)},
			{Src: "a", Dst: "b", Streams: 8, Throughput: 6e7, At: ts(5, 0)}, // newer row, older clock
			// An answer clamped to what its samples support.
			{Src: "a", Dst: "d", Streams: 2, Throughput: 1.89e9, Fitted: 2.9e9, Uncertainty: 0.05, Clamped: true, Note: "clamped", Samples: "[]", At: ts(10, 30)},
		}
		for i := range rows {
			if err := s.AddOptimization(ctx, &rows[i]); err != nil {
				t.Fatal(err)
			}
			if rows[i].ID == 0 {
				t.Fatalf("row %d: no ID", i)
			}
		}
		rows[1].Samples = "[]" // the default written back
		for _, tc := range []struct {
			src, dst string
			want     Optimization
		}{{"a", "b", rows[2]}, {"a", "c", rows[1]}, {"a", "d", rows[3]}} {
			got, err := s.LatestOptimization(ctx, tc.src, tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "LatestOptimization "+tc.src+"->"+tc.dst, got, tc.want)
		}
		if _, err := s.LatestOptimization(ctx, "b", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("reverse pair: %v, want ErrNotFound", err)
		}
	})
}

// TestAllocations: put inserts or replaces by ID, del removes, both in one
// call; times round-trip. A deletion with an expiry leaves a row whose
// stored expiry is later (renewed by another server since).
func TestAllocations(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if as, err := s.Allocations(ctx); err != nil || len(as) != 0 {
			t.Fatalf("Allocations on a fresh store = %v, %v", as, err)
		}
		a := Allocation{ID: "a1", Src: "x", Dst: "y", Client: "alice", VO: "cms", Streams: 16, Want: 0, Created: ts(1, 0), Expires: ts(301, 5)}
		b := Allocation{ID: "b2", Src: "x", Dst: "y", Client: "bob", VO: "atlas", Streams: 8, Want: 8, Draining: 4, Reason: "higher-priority VO", Created: ts(2, 0), Expires: ts(302, 0)}
		c := Allocation{ID: "c3", Src: "x", Dst: "z", Client: "carol", VO: "cms", Streams: 4, Created: ts(3, 0), Expires: ts(303, 0)}
		d := Allocation{ID: "d4", Src: "x", Dst: "z", Client: "dave", VO: "cms", Streams: 4, Created: ts(4, 0), Expires: ts(304, 0)}
		if err := s.SaveAllocations(ctx, []Allocation{a, b, c, d}, nil); err != nil {
			t.Fatal(err)
		}
		c.Expires = ts(500, 0) // renewed by another server
		if err := s.SaveAllocations(ctx, []Allocation{c}, nil); err != nil {
			t.Fatal(err)
		}
		a.Streams, a.Expires = 20, ts(400, 0) // renewed
		gone := []AllocationGone{
			{ID: "b2"}, {ID: "never-stored"}, // released
			{ID: "c3", Expires: ts(303, 0)}, // expired as this server saw it: kept
			{ID: "d4", Expires: ts(304, 0)}, // expired, and not renewed: gone
		}
		if err := s.SaveAllocations(ctx, []Allocation{a}, gone); err != nil {
			t.Fatal(err)
		}
		got, err := s.Allocations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "Allocations", got, []Allocation{a, c})
	})
}

func TestAuditOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		j := mustJob(t, s, alice, makeTasks(2))
		other := mustJob(t, s, alice, makeTasks(1))
		var want []AuditEntry
		for i := range 3 {
			batch := []AuditEntry{
				// At not increasing: order is the order of appending.
				{At: ts(int64(100-i), int64(i)), JobID: j.ID, TaskID: j.ID, Actor: "sched", From: "a", To: fmt.Sprint("b", i)},
				{At: ts(int64(100-i), 0), JobID: j.ID, Actor: "sched", Detail: fmt.Sprint("job-level ", i)},
			}
			if err := s.UpdateTasks(ctx, nil, append(batch, AuditEntry{At: ts(0, 0), JobID: other.ID})); err != nil {
				t.Fatal(err)
			}
			want = append(want, batch...)
		}
		got, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "audit", got, want)
		if got, err := s.Audit(ctx, 9999); err != nil || len(got) != 0 {
			t.Fatalf("Audit of a missing job = %v, %v", got, err)
		}
		// Pages: from and limit, in both dialects' forms.
		for _, pg := range []struct{ from, limit, lo, hi int }{
			{0, 2, 0, 2}, {2, 3, 2, 5}, {4, 0, 4, 6}, {5, 10, 5, 6}, {6, 1, 6, 6}, {0, 0, 0, 6},
		} {
			got, err := s.AuditPage(ctx, j.ID, pg.from, pg.limit)
			if err != nil {
				t.Fatalf("AuditPage(%d, %d): %v", pg.from, pg.limit, err)
			}
			if len(got) == 0 && pg.lo == pg.hi {
				continue
			}
			same(t, fmt.Sprintf("AuditPage(%d, %d)", pg.from, pg.limit), got, want[pg.lo:pg.hi])
		}
	})
}

// Zero times mean "none" and come back zero; other times come back equal,
// to the nanosecond, in UTC.
func TestTimesRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		zone := time.FixedZone("CET", 3600)
		deadline := time.Date(2031, 5, 6, 7, 8, 9, 123456789, zone)
		j := Job{OwnerID: alice.ID, Deadline: deadline, Created: ts(0, 1)}
		tasks := makeTasks(1)
		if _, err := s.CreateJob(ctx, &j, tasks); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Deadline.Equal(deadline) || got.Deadline.Location() != time.UTC {
			t.Errorf("Deadline = %v, want %v in UTC", got.Deadline, deadline)
		}
		if !got.Finished.IsZero() {
			t.Errorf("Finished = %v, want zero", got.Finished)
		}
		noDeadline := Job{OwnerID: alice.ID}
		if _, err := s.CreateJob(ctx, &noDeadline, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Job(ctx, noDeadline.ID); err != nil || !got.Deadline.IsZero() || got.Created.IsZero() {
			t.Errorf("job without deadline: Deadline %v Created %v, %v", got.Deadline, got.Created, err)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !stored[0].Started.IsZero() || !stored[0].Finished.IsZero() {
			t.Errorf("task times: %v %v, want zero", stored[0].Started, stored[0].Finished)
		}
		// Far future is clamped, not wrapped around.
		far := Job{OwnerID: alice.ID, Deadline: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
		if _, err := s.CreateJob(ctx, &far, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Job(ctx, far.ID); err != nil || got.Deadline.Year() != 2262 {
			t.Errorf("year 9999 deadline came back as %v, %v; want clamped to 2262", got.Deadline, err)
		}
		if err := s.UpsertEndpoint(ctx, Endpoint{Name: "e", Registered: ts(1, 0)}); err != nil {
			t.Fatal(err)
		}
		if eps, err := s.Endpoints(ctx); err != nil || !eps[0].LastSeen.IsZero() {
			t.Errorf("endpoint LastSeen = %v, %v; want zero", eps, err)
		}
		if err := s.AddToken(ctx, Token{Hash: "h", UserID: alice.ID}); err != nil {
			t.Fatal(err)
		}
		// Expires zero: valid at any time.
		if _, err := s.UserByToken(ctx, "h", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Errorf("never-expiring token: %v", err)
		}
	})
}

// Everything written is there after Close and Open again.
func TestReopen(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		s, err := Open(ctx, db.url)
		if err != nil {
			t.Fatal(err)
		}
		alice := mustUser(t, s, "alice")
		j := mustJob(t, s, alice, makeTasks(20))
		if err := s.AddToken(ctx, Token{Hash: "h", UserID: alice.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InitSetting(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutCheckpoint(ctx, "c", []byte("journal")); err != nil {
			t.Fatal(err)
		}
		if err := s.UpsertEndpoint(ctx, Endpoint{Name: "e", URL: "http://e", Registered: ts(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddObservation(ctx, Observation{Src: "a", Dst: "b", At: ts(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CancelJob(ctx, j.ID, ts(5, 0), "alice"); err != nil {
			t.Fatal(err)
		}
		before, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		tasksBefore, _ := s.Tasks(ctx, j.ID, 0, 0)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s = mustOpen(t, db.url)
		after, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "job after reopen", after, before)
		tasksAfter, _ := s.Tasks(ctx, j.ID, 0, 0)
		same(t, "tasks after reopen", tasksAfter, tasksBefore)
		if u, err := s.UserByToken(ctx, "h", ts(0, 0)); err != nil || u.ID != alice.ID {
			t.Errorf("token after reopen: %+v, %v", u, err)
		}
		if v, err := s.Setting(ctx, "k"); err != nil || v != "v" {
			t.Errorf("setting after reopen: %q, %v", v, err)
		}
		if c, err := s.Checkpoint(ctx, "c"); err != nil || string(c) != "journal" {
			t.Errorf("checkpoint after reopen: %q, %v", c, err)
		}
		if eps, err := s.Endpoints(ctx); err != nil || len(eps) != 1 {
			t.Errorf("endpoints after reopen: %v, %v", eps, err)
		}
		if obs, err := s.Observations(ctx, 0); err != nil || len(obs) != 1 {
			t.Errorf("observations after reopen: %v, %v", obs, err)
		}
		if a, err := s.Audit(ctx, j.ID); err != nil || len(a) != 1 {
			t.Errorf("audit after reopen: %v, %v", a, err)
		}
		// IDs are not reused after a restart.
		j2 := mustJob(t, s, alice, makeTasks(1))
		if j2.ID <= j.ID {
			t.Errorf("new job ID %d <= old %d", j2.ID, j.ID)
		}
	})
}

// TestTokensAndRevocation: a user's tokens are listed (only theirs) and
// one is deleted by a unique prefix of its hash.
func TestTokensAndRevocation(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		for i, tok := range []Token{
			{Hash: "aaaa1111", UserID: alice.ID, Label: "laptop", Created: ts(1, 0)},
			{Hash: "aaaa2222", UserID: alice.ID, Created: ts(2, 0), Expires: ts(9, 0)},
			{Hash: "bbbb1111", UserID: bob.ID, Created: ts(3, 0)},
		} {
			if err := s.AddToken(ctx, tok); err != nil {
				t.Fatalf("token %d: %v", i, err)
			}
		}
		if u, err := s.UserByName(ctx, "bob"); err != nil || u.ID != bob.ID {
			t.Fatalf("UserByName(bob) = %+v, %v", u, err)
		}
		if _, err := s.UserByName(ctx, "carol"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("UserByName(carol): %v, want ErrNotFound", err)
		}
		got, err := s.Tokens(ctx, alice.ID)
		if err != nil || len(got) != 2 || got[0].Label != "laptop" || !got[1].Expires.Equal(ts(9, 0)) {
			t.Fatalf("alice's tokens: %+v, %v", got, err)
		}
		for _, tc := range []struct {
			user   int64
			prefix string
			want   error
		}{
			{alice.ID, "aaaa", ErrConflict},     // two match
			{alice.ID, "bbbb", ErrNotFound},     // bob's
			{alice.ID, "aaaa%", ErrNotFound},    // no wildcards
			{alice.ID, "", ErrNotFound},         // nothing named
			{alice.ID, "aaaa2", nil},            // the second
			{alice.ID, "aaaa2222", ErrNotFound}, // gone
		} {
			if err := s.DeleteToken(ctx, tc.user, tc.prefix); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("DeleteToken(%q) = %v, want %v", tc.prefix, err, tc.want)
			}
		}
		if _, err := s.UserByToken(ctx, "aaaa2222", ts(5, 0)); !errors.Is(err, ErrNotFound) {
			t.Errorf("a deleted token still authenticates: %v", err)
		}
		if _, err := s.UserByToken(ctx, "bbbb1111", ts(5, 0)); err != nil {
			t.Errorf("bob's token: %v", err)
		}
	})
}

// TestCreateJobDurable: on SQLite a created job's commit is synced to
// disk (its write-ahead log fsynced) before CreateJob returns: the client
// is told "accepted", and synchronous=NORMAL alone would lose the job to
// a power loss. A resubmission (nothing written) syncs nothing, and a
// failed sync is the submission's error.
func TestCreateJobDurable(t *testing.T) {
	s := mustOpen(t, "sqlite://"+filepath.Join(t.TempDir(), "sluice.db"))
	ss := s.(*sqlStore)
	var synced []string
	var syncErr error
	ss.syncWAL = func(p string) error {
		synced = append(synced, p)
		return syncErr
	}
	bg := t.Context()
	alice := mustUser(t, s, "alice")
	j := Job{OwnerID: alice.ID, SubmissionID: "once"}
	if _, err := s.CreateJob(bg, &j, makeTasks(3)); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != ss.wal || !strings.HasSuffix(ss.wal, "sluice.db-wal") {
		t.Fatalf("WAL syncs after a new job: %v, want one of %s", synced, ss.wal)
	}
	again := Job{OwnerID: alice.ID, SubmissionID: "once"}
	if created, err := s.CreateJob(bg, &again, makeTasks(3)); err != nil || created {
		t.Fatalf("resubmission: created %v, %v", created, err)
	}
	if len(synced) != 1 {
		t.Errorf("a resubmission synced the WAL: %v", synced)
	}
	syncErr = errors.New("input/output error")
	if _, err := s.CreateJob(bg, &Job{OwnerID: alice.ID}, makeTasks(1)); err == nil || !strings.Contains(err.Error(), "not made durable") {
		t.Errorf("a failed sync: %v, want the submission to fail saying so", err)
	}
	// The real sync, on the real file.
	ss.syncWAL = nil
	if err := ss.durableCommit(); err != nil {
		t.Errorf("fsync of %s: %v", ss.wal, err)
	}
}

// TestMetadata: what a submitter attached to a job and its files comes
// back with them as sent (Rucio finds its requests by it), only from
// Job and Tasks, and goes with the job.
func TestMetadata(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(3)
		tasks[0].Metadata = `{"request_id":"abc","scope":"cms"}`
		tasks[2].Metadata = `{"request_id":"ghi"}`
		j := Job{OwnerID: alice.ID, Checksum: "adler32", Metadata: `{"activity":"T0 Export"}`, Created: ts(0, 0)}
		if _, err := s.CreateJob(ctx, &j, tasks); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil || got.Metadata != j.Metadata {
			t.Fatalf("job metadata %q, %v; want %q", got.Metadata, err, j.Metadata)
		}
		got2, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil || len(got2) != 3 {
			t.Fatalf("tasks: %v, %v", got2, err)
		}
		for i, want := range []string{tasks[0].Metadata, "", tasks[2].Metadata} {
			if got2[i].Metadata != want {
				t.Errorf("task %d metadata %q, want %q", i, got2[i].Metadata, want)
			}
		}
		if page, err := s.Tasks(ctx, j.ID, 2, 1); err != nil || len(page) != 1 || page[0].Metadata != tasks[2].Metadata {
			t.Errorf("a page of tasks: %+v, %v", page, err)
		}
		other := Job{OwnerID: alice.ID, Created: ts(0, 0)}
		if _, err := s.CreateJob(ctx, &other, makeTasks(1)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Job(ctx, other.ID); err != nil || got.Metadata != "" {
			t.Errorf("a job without metadata: %q, %v", got.Metadata, err)
		}
	})
}
