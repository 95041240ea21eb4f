package store

import (
	"fmt"
	"testing"
	"time"
)

// createJob100kLimit is the slowest acceptable insertion of a 100,000-task
// job (the target is about 2 s on a slow 2-core machine).
const createJob100kLimit = 10 * time.Second

// TestCreateJob100k inserts a 100,000-task job, logs how long that and the
// operations that touch every task take, and fails if the insertion takes
// longer than createJob100kLimit. Under the race detector it inserts
// 10,000 tasks and enforces no limit.
func TestCreateJob100k(t *testing.T) {
	n := 100_000
	if raceEnabled {
		n = 10_000
	}
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(n)
		j := Job{OwnerID: alice.ID, SubmissionID: "big"}
		start := time.Now()
		created, err := s.CreateJob(ctx, &j, tasks)
		took := time.Since(start)
		if err != nil || !created {
			t.Fatalf("CreateJob = %v, %v", created, err)
		}
		t.Logf("%s: CreateJob with %d tasks: %v", s.Dialect(), n, took)
		if took > createJob100kLimit && !raceEnabled {
			t.Errorf("CreateJob with %d tasks took %v, limit %v", n, took, createJob100kLimit)
		}
		seen := make(map[int64]bool, n)
		for i := range tasks {
			if tasks[i].ID == 0 || seen[tasks[i].ID] || tasks[i].JobID != j.ID {
				t.Fatalf("task %d: ID %d, JobID %d", i, tasks[i].ID, tasks[i].JobID)
			}
			seen[tasks[i].ID] = true
		}
		// Spot-check that IDs were matched to the right rows.
		for _, i := range []int{0, 1, 255, 256, 511, 512, 4242, n - 1} {
			got, err := s.Tasks(ctx, j.ID, i, 1)
			if err != nil || len(got) != 1 || got[0].ID != tasks[i].ID || got[0].Src != tasks[i].Src {
				t.Fatalf("task %d: stored %+v, %v; inserted ID %d", i, got, err, tasks[i].ID)
			}
		}

		start = time.Now()
		got, err := s.Job(ctx, j.ID)
		if err != nil || got.Files != n {
			t.Fatalf("Job = %+v, %v", got, err)
		}
		t.Logf("%s: Job counters over %d tasks: %v", s.Dialect(), n, time.Since(start))

		// The scheduler's typical batch: a few thousand state changes.
		up := tasks[:5000]
		audit := make([]AuditEntry, len(up))
		for i := range up {
			up[i].State, up[i].Started = StateRunning, ts(100, 0)
			audit[i] = AuditEntry{JobID: j.ID, TaskID: up[i].ID, Actor: "sched", From: StateQueued, To: StateRunning}
		}
		start = time.Now()
		if err := s.UpdateTasks(ctx, up, audit); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: UpdateTasks of %d tasks (+%d audit entries): %v", s.Dialect(), len(up), len(audit), time.Since(start))
		for _, i := range []int{0, len(up) - 1, len(up)} {
			got, err := s.Tasks(ctx, j.ID, i, 1)
			if want := tasks[i].State; err != nil || got[0].State != want {
				t.Fatalf("task %d after UpdateTasks: %+v, %v; want state %s", i, got, err, want)
			}
		}

		start = time.Now()
		active, err := s.ActiveTasks(ctx)
		if err != nil || len(active) != n {
			t.Fatalf("ActiveTasks = %d tasks, %v", len(active), err)
		}
		t.Logf("%s: ActiveTasks (%d): %v", s.Dialect(), n, time.Since(start))

		start = time.Now()
		ids, err := s.CancelJob(ctx, j.ID, ts(200, 0), "alice")
		if err != nil || len(ids) != n {
			t.Fatalf("CancelJob = %d IDs, %v", len(ids), err)
		}
		t.Logf("%s: CancelJob of %d tasks: %v", s.Dialect(), n, time.Since(start))
	})
}

// BenchmarkCreateJob100k measures CreateJob of a 100,000-task job per
// dialect and per multi-row INSERT batch size (1 is a single-row prepared
// statement executed once per task); the default batch size is marked.
//
//	go test -run '^$' -bench CreateJob100k -benchtime 3x ./store/
func BenchmarkCreateJob100k(b *testing.B) {
	const n = 100_000
	for _, s := range openTest(b) {
		ss := s.(*sqlStore)
		def := ss.taskBatch
		owner := mustUser(b, s, "bench")
		for _, batch := range []int{1, 64, 256, 512, 1024} {
			name := fmt.Sprintf("%s/batch=%d", s.Dialect(), batch)
			if batch == def {
				name += "(default)"
			}
			b.Run(name, func(b *testing.B) {
				ss.taskBatch = batch
				defer func() { ss.taskBatch = def }()
				for b.Loop() {
					b.StopTimer()
					tasks := makeTasks(n)
					j := Job{OwnerID: owner.ID}
					b.StartTimer()
					if _, err := s.CreateJob(ctx, &j, tasks); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/task")
			})
		}
	}
}
