package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// TestProgressEventCountsQueuedBytes: a job's progress events count the
// bytes its files hold as the job's status does, including the
// checkpointed bytes of a file waiting to resume (preempted, or retrying
// after a transient failure). Before, the events counted running files'
// bytes only, so `sluice watch` (which reads the status every few
// seconds and follows the events in between) and the dashboard showed
// the job's progress jumping back and forth while a file was preempted.
func TestProgressEventCountsQueuedBytes(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	task := func(i int, state string, done int64) store.Task {
		return store.Task{Index: i, Src: "sluice://a/f" + string(rune('0'+i)), Dst: "sluice://d/f" + string(rune('0'+i)),
			SrcEndpoint: "a", DstEndpoint: "d", Size: 1000, State: state, Done: done}
	}
	tasks := []store.Task{
		task(0, store.StateDone, 1000),
		task(1, store.StateQueued, 300), // moving again below
		task(2, store.StateQueued, 400), // preempted: waits with its checkpoint
		task(3, store.StateQueued, 0),
	}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	w := loadedWorld(t, Config{Store: st})
	claimed, _ := claimPartitions(t, w, st, "local", 3, "a")
	for _, c := range claimed {
		if c.Index == 1 {
			run := w.tasks.get(c.ID)
			run.State, run.xfer = store.StateRunning, &engine.Transfer{}
		}
	}
	alice := Caller{User: u}
	ch, done, err := w.s.Subscribe(alice, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	w.progressEvents()
	status, err := w.s.Job(ctx, alice, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if status.BytesDone != 1700 {
		t.Fatalf("the job's status says %d bytes done, want 1700 (the test's premise)", status.BytesDone)
	}
	select {
	case e := <-ch:
		if e.Type != "progress" || e.BytesDone != status.BytesDone || e.Bytes != status.Bytes {
			t.Errorf("progress event %s: %d of %d bytes done; the job's status says %d of %d", e.Type, e.BytesDone, e.Bytes, status.BytesDone, status.Bytes)
		}
	default:
		t.Fatal("no progress event for a job with a running file")
	}
}
