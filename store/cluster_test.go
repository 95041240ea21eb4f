package store

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"
)

func TestLeases(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		const ttl = time.Hour
		type step struct {
			what      string
			partition string
			owner     string
			ttl       time.Duration
			held      bool
			term      int64
			holder    string
		}
		steps := []step{
			{"a free partition is taken at term 1", "p1", "s1", ttl, true, 1, "s1"},
			{"another server cannot take a live lease", "p1", "s2", ttl, false, 1, "s1"},
			{"its owner re-acquires it (a restart) under a new term", "p1", "s1", ttl, true, 2, "s1"},
			{"a second partition is independent", "p2", "s2", -time.Second, true, 1, "s2"},
			{"an expired lease changes hands under a new term", "p2", "s1", ttl, true, 2, "s1"},
		}
		for _, st := range steps {
			l, held, err := s.AcquireLease(ctx, st.partition, st.owner, st.ttl)
			if err != nil {
				t.Fatalf("%s: %v", st.what, err)
			}
			if held != st.held || l.Term != st.term || l.Owner != st.holder {
				t.Fatalf("%s: held %v term %d owner %q; want %v %d %q", st.what, held, l.Term, l.Owner, st.held, st.term, st.holder)
			}
		}
		// Renewal keeps what is still held under the same term.
		held, err := s.RenewLeases(ctx, "s1", map[string]int64{"p1": 2, "p2": 1}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "renewed (p2's term 1 is stale)", held, map[string]int64{"p1": 2})
		// Released leases are free at once, and the next owner's term is higher.
		if err := s.ReleaseLease(ctx, "p1", "s1", 2); err != nil {
			t.Fatal(err)
		}
		if l, ok, err := s.AcquireLease(ctx, "p1", "s3", ttl); err != nil || !ok || l.Term != 3 {
			t.Fatalf("after release: %+v %v %v", l, ok, err)
		}
		ls, err := s.Leases(ctx)
		if err != nil || len(ls) != 2 || ls[0].Owner != "s3" || ls[1].Owner != "s1" {
			t.Fatalf("Leases: %+v %v", ls, err)
		}
	})
}

// TestRenewManyLeases renews more leases than one statement takes, some of
// them no longer held, and checks every held one is extended.
func TestRenewManyLeases(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		const n = renewBatch*2 + 37
		terms := map[string]int64{}
		for i := range n {
			p := fmt.Sprintf("p%04d", i)
			l, held, err := s.AcquireLease(ctx, p, "s1", time.Second)
			if err != nil || !held {
				t.Fatalf("acquire %s: %v %v", p, held, err)
			}
			terms[p] = l.Term
		}
		// Two are taken over (released, then taken); one expired but
		// nobody took it, so it is renewed.
		for _, p := range []string{"p0000", "p0600", "p1036"} {
			if err := s.ReleaseLease(ctx, p, "s1", terms[p]); err != nil {
				t.Fatal(err)
			}
			if p == "p1036" {
				continue
			}
			if _, held, err := s.AcquireLease(ctx, p, "s2", time.Hour); err != nil || !held {
				t.Fatalf("take over %s: %v %v", p, held, err)
			}
		}
		held, err := s.RenewLeases(ctx, "s1", terms, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(terms)
		delete(want, "p0000")
		delete(want, "p0600")
		for p := range want {
			if held[p] != want[p] {
				t.Fatalf("%s: renewed term %d, want %d", p, held[p], want[p])
			}
		}
		if len(held) != len(want) {
			t.Fatalf("renewed %d leases, want %d", len(held), len(want))
		}
		ls, err := s.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if _, ok := want[l.Partition]; ok && time.Until(l.Expires) < 30*time.Minute {
				t.Fatalf("%s: expires in %v after renewal for an hour", l.Partition, time.Until(l.Expires))
			}
		}
	})
}

func TestLeaseRace(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		// Eight servers race for one free partition: exactly one wins.
		var mu sync.Mutex
		winners := 0
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, held, err := s.AcquireLease(ctx, "p", string(rune('a'+i)), time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if held {
					mu.Lock()
					winners++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if winners != 1 {
			t.Fatalf("%d servers hold the lease", winners)
		}
	})
}

func TestClaimAndFencedUpdate(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(6)
		for i := range tasks {
			tasks[i].SrcEndpoint = []string{"a", "b"}[i%2]
		}
		tasks[4].State = StateDone
		j := mustJob(t, s, alice, tasks)
		if _, ok, err := s.AcquireLease(ctx, "a", "s1", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, ok, err := s.AcquireLease(ctx, "b", "s2", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		// s1 claims partition a's active tasks (0 and 2; 4 is done), once.
		got, err := s.ClaimTasks(ctx, "s1", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != tasks[0].ID || got[1].ID != tasks[2].ID || got[0].Term != 1 {
			t.Fatalf("claimed %+v", got)
		}
		if again, err := s.ClaimTasks(ctx, "s1", 100); err != nil || len(again) != 0 {
			t.Fatalf("claimed twice: %d %v", len(again), err)
		}
		// A fenced write under the held term succeeds and records it.
		got[0].State = StateRunning
		audit := []AuditEntry{{At: ts(1, 0), JobID: j.ID, TaskID: got[0].ID, Actor: "scheduler@s1", From: StateQueued, To: StateRunning}}
		if skipped, err := s.UpdateTasksFenced(ctx, "s1", got[:1], audit); err != nil || len(skipped) != 0 {
			t.Fatal(skipped, err)
		}
		a, err := s.Audit(ctx, j.ID)
		if err != nil || len(a) != 1 || a[0].Term != 1 {
			t.Fatalf("audit: %+v %v", a, err)
		}
		if err := s.CheckClaim(ctx, "s1", got[0].ID, 1); err != nil {
			t.Fatalf("CheckClaim of a held task: %v", err)
		}
		if err := s.CheckClaim(ctx, "s2", got[0].ID, 1); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("CheckClaim by a server without the lease: %v", err)
		}
		// Its run's checkpoints are written under the claim, and only
		// under it.
		if err := s.PutCheckpointFenced(ctx, "task/a0", []byte("s1's journal"), "s1", got[0].ID, 1); err != nil {
			t.Fatalf("fenced checkpoint of a held task: %v", err)
		}
		if err := s.PutCheckpointFenced(ctx, "task/a0", []byte("s2's"), "s2", got[0].ID, 1); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("fenced checkpoint by a server without the lease: %v", err)
		}
		// Many at once: each under its own claim, in one transaction;
		// a task of another's partition, or one that does not exist,
		// fails alone.
		errs, err := s.PutCheckpointsFenced(ctx, "s1", []CheckpointPut{
			{Key: "task/a2", Data: []byte("a2"), Task: got[1].ID, Term: 1},
			{Key: "task/b1", Data: []byte("b1"), Task: tasks[1].ID, Term: 1},
			{Key: "task/none", Data: []byte("?"), Task: 1 << 40, Term: 1},
		})
		if err != nil || len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], ErrStaleTerm) || !errors.Is(errs[2], ErrNotFound) {
			t.Fatalf("batch of fenced checkpoints: %v %v", errs, err)
		}
		if b, err := s.Checkpoint(ctx, "task/a2"); err != nil || string(b) != "a2" {
			t.Fatalf("checkpoint written in a batch: %q %v", b, err)
		}
		for _, k := range []string{"task/b1", "task/none"} {
			if _, err := s.Checkpoint(ctx, k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("checkpoint %s refused in a batch was written: %v", k, err)
			}
		}
		// s1 may not write partition b's tasks.
		bTask := tasks[1]
		bTask.Term = 1
		if _, err := s.UpdateTasksFenced(ctx, "s1", []Task{bTask}, nil); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("write to another's partition: %v", err)
		}
		// s2 takes partition a over (s1's lease expired): s1's writes are
		// refused, and s2 claims a's tasks, the running one included.
		if err := s.ReleaseLease(ctx, "a", "s1", 1); err != nil {
			t.Fatal(err)
		}
		if l, ok, err := s.AcquireLease(ctx, "a", "s2", time.Hour); err != nil || !ok || l.Term != 2 {
			t.Fatal(l, ok, err)
		}
		if err := s.CheckClaim(ctx, "s1", got[0].ID, 1); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("CheckClaim after a take-over: %v", err)
		}
		if err := s.PutCheckpointFenced(ctx, "task/a0", []byte("stale"), "s1", got[0].ID, 1); !errors.Is(err, ErrStaleTerm) {
			t.Fatalf("fenced checkpoint after a take-over: %v", err)
		}
		if errs, err := s.PutCheckpointsFenced(ctx, "s1", []CheckpointPut{{Key: "task/a0", Data: []byte("stale"), Task: got[0].ID, Term: 1}}); err != nil || !errors.Is(errs[0], ErrStaleTerm) {
			t.Fatalf("batch of fenced checkpoints after a take-over: %v %v", errs, err)
		}
		if b, err := s.Checkpoint(ctx, "task/a0"); err != nil || string(b) != "s1's journal" {
			t.Fatalf("checkpoint after refused writes: %q %v", b, err)
		}
		got[0].Done = 10
		var se *StaleTermError
		if _, err := s.UpdateTasksFenced(ctx, "s1", got[:1], nil); !errors.As(err, &se) || se.Partitions[0] != "a" {
			t.Fatalf("stale write: %v", err)
		}
		claimed, err := s.ClaimTasks(ctx, "s2", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 5 {
			t.Fatalf("s2 claimed %d tasks, want 5 (three of b, two of a)", len(claimed))
		}
		for _, c := range claimed {
			want := int64(1)
			if c.SrcEndpoint == "a" {
				want = 2
			}
			if c.Term != want {
				t.Fatalf("task %d of %s claimed under term %d, want %d", c.ID, c.SrcEndpoint, c.Term, want)
			}
			if c.ID == got[0].ID && (c.State != StateRunning || c.Done != 0) {
				t.Fatalf("the stale write changed the task: %+v", c)
			}
		}
		// A user cancels the job through any server: the scheduler's later
		// write of a task is skipped, not an error, and leaves it canceled.
		if _, err := s.CancelJob(ctx, j.ID, ts(5, 0), "alice"); err != nil {
			t.Fatal(err)
		}
		c := claimed[0]
		c.State = StateQueued // a preemption, say
		skipped, err := s.UpdateTasksFenced(ctx, "s2", []Task{c}, []AuditEntry{{JobID: j.ID, TaskID: c.ID, To: StateQueued}})
		if err != nil || len(skipped) != 1 || skipped[0] != c.ID {
			t.Fatalf("write after cancel: %v %v", skipped, err)
		}
		// But a file put in place before the run heard of the cancel is
		// done, and the store says so.
		c2 := claimed[1]
		c2.State = StateDone
		if skipped, err := s.UpdateTasksFenced(ctx, "s2", []Task{c2}, nil); err != nil || len(skipped) != 0 {
			t.Fatalf("done after cancel: %v %v", skipped, err)
		}
		c2.State = StateFailed
		if skipped, err := s.UpdateTasksFenced(ctx, "s2", []Task{c2}, nil); err != nil || len(skipped) != 1 {
			t.Fatalf("a done task was changed again: %v %v", skipped, err)
		}
		ids, err := s.CanceledJobs(ctx, ts(0, 0))
		if err != nil || len(ids) != 1 || ids[0] != j.ID {
			t.Fatalf("CanceledJobs: %v %v", ids, err)
		}
		if ids, err := s.CanceledJobs(ctx, ts(6, 0)); err != nil || len(ids) != 0 {
			t.Fatalf("CanceledJobs later: %v %v", ids, err)
		}
	})
}

func TestFinishJobIfDone(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		cases := []struct {
			name   string
			states []string
			want   string
		}{
			{"still active", []string{StateDone, StateRunning}, StateActive},
			{"all done", []string{StateDone, StateDone}, StateDone},
			{"one failed", []string{StateDone, StateFailed}, StateFailed},
		}
		for _, c := range cases {
			tasks := makeTasks(len(c.states))
			for i := range tasks {
				tasks[i].State = c.states[i]
			}
			j := mustJob(t, s, alice, tasks)
			got, err := s.FinishJobIfDone(ctx, j.ID, ts(9, 0), "scheduler@s1")
			if err != nil || got != c.want {
				t.Fatalf("%s: %q %v, want %q", c.name, got, err, c.want)
			}
			// A second call (another server) agrees and changes nothing.
			if again, err := s.FinishJobIfDone(ctx, j.ID, ts(10, 0), "scheduler@s2"); err != nil || again != c.want {
				t.Fatalf("%s again: %q %v", c.name, again, err)
			}
		}
	})
}

func TestServersAndLoads(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		if _, err := s.ServerBeat(ctx, "s1", "http://a", time.Hour); err != nil {
			t.Fatal(err)
		}
		live, err := s.ServerBeat(ctx, "s2", "http://b", time.Hour)
		if err != nil || len(live) != 2 || live[0].ID != "s1" || live[1].URL != "http://b" {
			t.Fatalf("servers: %+v %v", live, err)
		}
		if err := s.PutEndpointLoads(ctx, "s1", []EndpointLoad{{Endpoint: "e1", CC: 4, Throughput: 1e6}, {Endpoint: "e2", CC: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutEndpointLoads(ctx, "s1", []EndpointLoad{{Endpoint: "e1", CC: 2, Throughput: 5e5}}); err != nil {
			t.Fatal(err)
		}
		ls, err := s.EndpointLoads(ctx, "s2", time.Minute)
		if err != nil || len(ls) != 1 || ls[0].CC != 2 || ls[0].Endpoint != "e1" || ls[0].Server != "s1" {
			t.Fatalf("loads seen by s2: %+v %v", ls, err)
		}
		if ls, err := s.EndpointLoads(ctx, "s1", time.Minute); err != nil || len(ls) != 0 {
			t.Fatalf("a server sees its own loads: %+v %v", ls, err)
		}
		if err := s.Notify(ctx, "sluice_work"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSaveProgress: progress is written only to rows still claimed under
// the given term and not terminal, and a stale lease refuses it all.
func TestSaveProgress(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		tasks := makeTasks(4)
		for i := range tasks {
			tasks[i].SrcEndpoint = "a"
		}
		tasks[3].State = StateDone
		j := mustJob(t, s, alice, tasks)
		if _, ok, err := s.AcquireLease(ctx, "a", "s1", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		got, err := s.ClaimTasks(ctx, "s1", 100)
		if err != nil || len(got) != 3 {
			t.Fatalf("claimed %d, %v", len(got), err)
		}
		stored, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ps := []Progress{
			{ID: got[0].ID, SrcEndpoint: "a", Term: 1, Done: 100},
			{ID: got[1].ID, SrcEndpoint: "a", Term: 1, Done: 200},
			{ID: stored[3].ID, SrcEndpoint: "a", Term: 1, Done: 999}, // done: left alone
		}
		if err := s.SaveProgress(ctx, "s1", ps); err != nil {
			t.Fatal(err)
		}
		after, err := s.Tasks(ctx, j.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]int64{got[0].ID: 100, got[1].ID: 200, got[2].ID: 0, stored[3].ID: stored[3].Done}
		for _, tk := range after {
			if tk.Done != want[tk.ID] {
				t.Fatalf("task %d: done %d, want %d", tk.ID, tk.Done, want[tk.ID])
			}
		}
		// After a take-over, the old owner's progress is refused.
		if err := s.ReleaseLease(ctx, "a", "s1", 1); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.AcquireLease(ctx, "a", "s2", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
		var se *StaleTermError
		if err := s.SaveProgress(ctx, "s1", ps[:1]); !errors.As(err, &se) || se.Partitions[0] != "a" {
			t.Fatalf("stale progress: %v", err)
		}
	})
}
