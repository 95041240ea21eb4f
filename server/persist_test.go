package server

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// TestPersistSomeStalePartition: when another server has taken one
// partition over, a batch of writes still writes the other partitions'
// tasks, and reports exactly which were written (the loop deletes the
// checkpoints of those only).
func TestPersistSomeStalePartition(t *testing.T) {
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
	var tasks []store.Task
	for i, src := range []string{"a", "b", "a", "b"} {
		tasks = append(tasks, store.Task{Index: i, Src: "sluice://" + src + "/f", Dst: "sluice://d/f", SrcEndpoint: src,
			DstEndpoint: "d", Size: 10, State: store.StateQueued})
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		if _, ok, err := st.AcquireLease(ctx, p, "s1", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	claimed, err := st.ClaimTasks(ctx, "s1", 100)
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	// s2 takes partition b over.
	if err := st.ReleaseLease(ctx, "b", "s1", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.AcquireLease(ctx, "b", "s2", time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	s := &Server{st: st, cfg: Config{ServerID: "s1"}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w := &world{s: s, ctx: ctx}
	var ts []*task
	for _, c := range claimed {
		c.State = store.StateDone
		ts = append(ts, &task{Task: c})
	}
	written := w.persistSome(ts, nil)
	for _, tk := range ts {
		if want := tk.SrcEndpoint == "a"; written(tk) != want {
			t.Errorf("task %d of partition %s: written %v, want %v", tk.ID, tk.SrcEndpoint, written(tk), want)
		}
	}
	if len(w.stale) != 1 || w.stale[0] != "b" {
		t.Errorf("stale partitions %v, want [b]", w.stale)
	}
	if w.persist(ts, nil) {
		t.Error("persist of a batch with a lost partition reported every task written")
	}
	rows, err := st.Tasks(ctx, j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if want := r.SrcEndpoint == "a"; (r.State == store.StateDone) != want {
			t.Errorf("task %d of %s is %s in the store", r.ID, r.SrcEndpoint, r.State)
		}
	}
}

// TestStaleStartNeverRuns: a server whose partition was taken over while
// it did not know (a paused process) decides to start a task; the store
// refuses the start, and no run begins: the task is forgotten, the new
// owner's to run.
func TestStaleStartNeverRuns(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"a", "d"} {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: name, URL: "http://127.0.0.1:1", Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	tasks := []store.Task{{Src: "sluice://a/f", Dst: "sluice://d/f", SrcEndpoint: "a", DstEndpoint: "d", Size: 1 << 20, State: store.StateQueued}}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	w := loadedWorld(t, Config{Store: st, ServerID: "s1"})
	// s1 holds partition a and claims its task, as the coordinator would.
	claimed, leases := claimPartitions(t, w, st, "s1", 1, "a")
	l := leases["a"]
	for _, e := range w.eps {
		e.Up = true
	}
	// Meanwhile s2 took partition a over (s1 was paused past its lease).
	if err := st.ReleaseLease(ctx, "a", "s1", l.Term); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.AcquireLease(ctx, "a", "s2", time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	w.cycle(sched.Tick)
	if w.inflight != 0 {
		t.Fatalf("%d runs begun on a partition the store says is another server's", w.inflight)
	}
	if w.tasks.get(claimed[0].ID) != nil {
		t.Error("the task stayed in the loop")
	}
	rows, err := st.Tasks(ctx, j.ID, 0, 0)
	if err != nil || len(rows) != 1 || rows[0].State != store.StateQueued {
		t.Fatalf("task in the store: %+v, %v (want queued, untouched)", rows, err)
	}
}
