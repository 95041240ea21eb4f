package store

import (
	"math"
	"strings"
	"testing"
)

// TestJobsWithRowsOutOfRange: whatever sizes and byte counts a task row
// holds (written here directly with SQL, as an older version, a hand
// edit or a bug could leave them), Job and Jobs answer, with totals that
// are neither negative nor wrapped, and FailOutOfRange fails exactly the
// rows still to end that are out of range, saying why. Before, a job of
// two files of 2^63-1 bytes made every listing that held it fail with
// "integer overflow" (SQLite) or "bigint out of range" (PostgreSQL).
func TestJobsWithRowsOutOfRange(t *testing.T) {
	eachDB(t, func(t *testing.T, db testDB) {
		s := mustOpen(t, db.url)
		u := mustUser(t, s, "alice")
		good := mustJob(t, s, u, makeTasks(3))
		tasks := makeTasks(6)
		j := mustJob(t, s, u, tasks)
		raw := rawDB(t, db)
		set := func(idx int, col string, v int64, state string) {
			t.Helper()
			if _, err := raw.Exec(`UPDATE tasks SET `+col+` = $1, state = $2 WHERE job_id = $3 AND idx = $4`, v, state, j.ID, idx); err != nil {
				t.Fatal(err)
			}
		}
		set(0, "size", math.MaxInt64, StateQueued)
		set(1, "size", math.MaxInt64, StateQueued)
		set(2, "size", -7, StateResolving)
		set(3, "done", math.MaxInt64, StateRunning)
		set(4, "done", math.MinInt64, StateQueued)
		set(5, "size", math.MaxInt64, StateDone) // ended: counted, not failed

		check := func(what string, got Job) {
			t.Helper()
			if got.Bytes < 0 || got.BytesDone < 0 {
				t.Errorf("%s: bytes %d, bytes done %d: negative", what, got.Bytes, got.BytesDone)
			}
			// Each term counts at most MaxSize: 3 sizes at the bound,
			// the others as they were (1003, 1004), the -7 as 0.
			if want := int64(3*MaxSize + 1003 + 1004); got.Bytes != want {
				t.Errorf("%s: bytes %d, want %d", what, got.Bytes, want)
			}
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatalf("Job: %v", err)
		}
		check("Job", got)
		js, err := s.Jobs(ctx, JobFilter{})
		if err != nil {
			t.Fatalf("Jobs: %v", err)
		}
		if len(js) != 2 || js[0].ID != j.ID || js[1].ID != good.ID {
			t.Fatalf("Jobs listed %+v", js)
		}
		check("Jobs", js[0])
		if want := int64(1000 + 1001 + 1002); js[1].Bytes != want {
			t.Errorf("the other job: bytes %d, want %d", js[1].Bytes, want)
		}

		bad, err := s.FailOutOfRange(ctx, ts(5, 0), "s1")
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		for _, b := range bad {
			idx = append(idx, b.Index)
		}
		same(t, "failed indexes", idx, []int{0, 1, 2, 3, 4})
		rows, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[:5] {
			if r.State != StateFailed || !strings.Contains(r.Error, "out of range") {
				t.Errorf("task %d: %s %q; want failed, saying the row is out of range", r.Index, r.State, r.Error)
			}
		}
		if rows[5].State != StateDone {
			t.Errorf("the ended task is %s, want done (untouched)", rows[5].State)
		}
		audit, err := s.Audit(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range audit {
			if a.To == StateFailed && strings.Contains(a.Detail, "out of range") {
				n++
			}
		}
		if n != 5 {
			t.Errorf("%d audit entries for the failed rows, want 5: %+v", n, audit)
		}
		if again, err := s.FailOutOfRange(ctx, ts(6, 0), "s1"); err != nil || len(again) != 0 {
			t.Errorf("a second pass failed %d tasks, err %v; want none", len(again), err)
		}
		if _, err := s.Jobs(ctx, JobFilter{}); err != nil {
			t.Fatalf("Jobs after: %v", err)
		}
	})
}

// TestSumBytes: the joined parts of a byte sum saturate rather than wrap.
func TestSumBytes(t *testing.T) {
	for _, tc := range []struct{ hi, lo, want int64 }{
		{0, 0, 0},
		{1, 5, 1<<30 + 5},
		{MaxSize >> 30, 0, MaxSize},
		{1 << 33, 0, math.MaxInt64},
		{math.MaxInt64 >> 30, math.MaxInt64 & (1<<30 - 1), math.MaxInt64},
		{math.MaxInt64 >> 30, 1 << 30, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
	} {
		if got := sumBytes(tc.hi, tc.lo); got != tc.want {
			t.Errorf("sumBytes(%d, %d) = %d, want %d", tc.hi, tc.lo, got, tc.want)
		}
	}
	if got := AddBytes(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("AddBytes wrapped: %d", got)
	}
}
