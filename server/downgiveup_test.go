package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// TestDownStaysDownAfterRestart: an endpoint the store recorded as down
// stays down when the server restarts, until its agent is heard from
// again. Before, the restarted server counted every endpoint's heartbeat
// timeout from its own start: it logged the dead endpoint up, started
// its files towards it (each spending one of its attempts on a refused
// connection), and marked it down again after the timeout.
func TestDownStaysDownAfterRestart(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for _, e := range []store.Endpoint{
		{Name: "a", LastSeen: now, Up: true},
		{Name: "d", LastSeen: now.Add(-time.Hour)},
	} {
		e.URL, e.Registered = "http://127.0.0.1:1", now.Add(-2*time.Hour)
		if err := st.UpsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := st.SetEndpointUp(ctx, e.Name, e.Up, e.LastSeen); err != nil {
			t.Fatal(err)
		}
	}
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: now}
	tasks := []store.Task{{Src: "sluice://a/f", Dst: "sluice://d/f", SrcEndpoint: "a", DstEndpoint: "d", Size: 1 << 20}}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	w := loadedWorld(t, Config{Store: st})
	claimPartitions(t, w, st, "local", 1, "a")
	w.tick(time.Now())
	w.cycle(sched.Tick)
	w.flush()
	if w.eps["d"].Up {
		t.Error("the restarted server holds d up, unheard from for an hour")
	}
	if w.inflight != 0 {
		t.Errorf("%d runs begun towards an endpoint down for an hour", w.inflight)
	}
	rows, err := st.Tasks(ctx, j.ID, 0, 0)
	if err != nil || len(rows) != 1 || rows[0].State != store.StateQueued || !strings.Contains(rows[0].Error, "d is down") {
		t.Fatalf("task in the store: %+v, %v (want queued, waiting for d)", rows, err)
	}
	// Heard from again: it is up, and the file goes.
	if err := w.s.beat(ctx, AgentInfo{Name: "d", URL: "http://127.0.0.1:1"}, false); err != nil {
		t.Fatal(err)
	}
	w.tick(time.Now())
	if !w.eps["d"].Up {
		t.Error("d, heard from again, is still down")
	}
}

// TestDownEndpointGivenUp: files that wait for an endpoint whose agent
// never comes back fail after Config.DownGiveUp, saying which endpoint
// and since when, so that the job ends instead of staying active for
// good; this holds across a restart (the last heartbeat is the store's)
// and for files whose size is not known yet (their source is down).
// Files of endpoints down for less than that still wait.
func TestDownEndpointGivenUp(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	long, lately := now.Add(-2*time.Hour), now.Add(-time.Minute)
	for _, e := range []store.Endpoint{
		{Name: "a", LastSeen: now, Up: true},
		{Name: "gone", LastSeen: long, Up: false}, // down before the restart
		{Name: "blip", LastSeen: lately, Up: false},
	} {
		e.URL, e.Registered = "http://127.0.0.1:1", long
		if err := st.UpsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
		if !e.Up {
			if err := st.SetEndpointUp(ctx, e.Name, false, e.LastSeen); err != nil {
				t.Fatal(err)
			}
		}
	}
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(i int, src, dst string, size int64) store.Task {
		return store.Task{Index: i, Src: "sluice://" + src + "/f", Dst: "sluice://" + dst + "/f", SrcEndpoint: src, DstEndpoint: dst, Size: size}
	}
	gone := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: now}
	if _, err := st.CreateJob(ctx, &gone, []store.Task{mk(0, "a", "gone", 1<<20), mk(1, "gone", "a", -1)}); err != nil {
		t.Fatal(err)
	}
	blip := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: now}
	if _, err := st.CreateJob(ctx, &blip, []store.Task{mk(0, "a", "blip", 1<<20)}); err != nil {
		t.Fatal(err)
	}
	w := loadedWorld(t, Config{Store: st, DownGiveUp: time.Hour})
	claimPartitions(t, w, st, "local", 3, "a", "gone")
	// A few turns of the loop, as Run makes them.
	for range 3 {
		w.tick(time.Now())
		w.resolve()
		w.cycle(sched.Tick)
		w.flush()
	}
	rows, err := st.Tasks(ctx, gone.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.State != store.StateFailed || !strings.Contains(r.Error, "gone has been down") || !strings.Contains(r.Error, long.UTC().Format(time.RFC3339)) {
			t.Errorf("file %s -> %s: %s, %q; want failed, saying that gone has been down since %s", r.Src, r.Dst, r.State, r.Error, long.UTC().Format(time.RFC3339))
		}
	}
	if j, err := st.Job(ctx, gone.ID); err != nil || j.State != store.StateFailed {
		t.Errorf("the job of the down endpoint: %s, %v; want failed", j.State, err)
	}
	rows, err = st.Tasks(ctx, blip.ID, 0, 0)
	if err != nil || len(rows) != 1 || rows[0].State != store.StateQueued {
		t.Fatalf("a file of an endpoint down for a minute: %+v, %v; want queued", rows, err)
	}
	if j, err := st.Job(ctx, blip.ID); err != nil || j.State != store.StateActive {
		t.Errorf("the job of the endpoint down for a minute: %s, %v; want active", j.State, err)
	}
}
