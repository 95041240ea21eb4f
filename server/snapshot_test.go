package server

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

func TestTaskTable(t *testing.T) {
	mk := func(id int64) *task { return &task{Task: store.Task{ID: id}} }
	ids := func(tt *taskTable) []int64 {
		var out []int64
		for t := range tt.all() {
			out = append(out, t.ID)
		}
		return out
	}
	tests := []struct {
		name string
		ops  func(tt *taskTable)
		want []int64
	}{
		{"in order", func(tt *taskTable) {
			for _, id := range []int64{1, 2, 3} {
				tt.add(mk(id))
			}
		}, []int64{1, 2, 3}},
		{"walked in the order added", func(tt *taskTable) {
			for _, id := range []int64{5, 1, 9, 3} {
				tt.add(mk(id))
			}
		}, []int64{5, 1, 9, 3}},
		{"removed tasks are not walked", func(tt *taskTable) {
			a, b, c := mk(1), mk(2), mk(3)
			tt.add(a)
			tt.add(b)
			tt.add(c)
			tt.remove(b)
		}, []int64{1, 3}},
		{"a task removed and added again is walked once", func(tt *taskTable) {
			a, b := mk(1), mk(2)
			tt.add(a)
			tt.add(b)
			tt.remove(a)
			tt.add(a)
		}, []int64{1, 2}},
		{"a new task with a removed task's ID replaces it", func(tt *taskTable) {
			tt.add(mk(1))
			tt.add(mk(2))
			tt.add(mk(1))
		}, []int64{2, 1}},
		{"removing during a walk", func(tt *taskTable) {
			for id := range int64(10) {
				tt.add(mk(id + 1))
			}
			for t := range tt.all() {
				if t.ID%2 == 0 {
					tt.remove(t)
				}
			}
		}, []int64{1, 3, 5, 7, 9}},
		{"compaction keeps the live tasks", func(tt *taskTable) {
			var all []*task
			for id := range int64(100) {
				t := mk(id + 1)
				all = append(all, t)
				tt.add(t)
			}
			for _, t := range all[:90] {
				tt.remove(t)
			}
			for range tt.all() { // compacts
			}
			tt.add(mk(5)) // after compaction, at the end
		}, []int64{91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := newTaskTable()
			tc.ops(&tt)
			if got := ids(&tt); !slices.Equal(got, tc.want) {
				t.Fatalf("walk = %v, want %v", got, tc.want)
			}
			if tt.len() != len(tc.want) {
				t.Fatalf("len = %d, want %d", tt.len(), len(tc.want))
			}
			for _, id := range tc.want {
				if tt.get(id) == nil {
					t.Fatalf("get(%d) = nil", id)
				}
			}
		})
	}
}

// testWorld is a loop's world with endpoints and tasks but no store, for
// the snapshot alone.
func testWorld(endpoints, queued, running int) *world {
	s := &Server{cfg: Config{TotalMaxCC: 0, StartupCost: 2 * time.Second, JournalWrites: 500}, epoch: time.Now().Add(-time.Hour)}
	w := &world{s: s, tasks: newTaskTable(), jobs: map[int64]*jobState{}, eps: map[string]*endpoint{},
		est: model.NewHistory(), ext: map[string]cluster.Load{}}
	for i := range endpoints {
		name := fmt.Sprintf("ep%04d", i)
		w.eps[name] = &endpoint{Endpoint: store.Endpoint{Name: name, MaxThroughput: 1.25e9, MaxCC: 64, Up: true}}
	}
	j := &jobState{Job: store.Job{ID: 1}}
	w.jobs[1] = j
	now := time.Now()
	// Tasks spread over every pair, in the order a take-over's claims
	// deliver them: partition by partition (ClaimTasks fills a batch from
	// one partition's index range before the next), so consecutive IDs
	// are far apart in memory.
	n := queued + running
	order := make([]int64, 0, n)
	for p := range endpoints {
		for id := p; id <= n; id += endpoints {
			if id > 0 {
				order = append(order, int64(id))
			}
		}
	}
	for k, id := range order {
		t := &task{Task: store.Task{ID: id, JobID: 1, Size: 1 << 30, State: store.StateQueued,
			SrcEndpoint: fmt.Sprintf("ep%04d", int(id)%endpoints), DstEndpoint: fmt.Sprintf("ep%04d", int(id*31)%endpoints),
			Arrival: now.Add(-time.Minute)}, job: j, since: now}
		if k < running {
			t.State, t.CC, t.rate = store.StateRunning, 2, 1e7
		}
		w.tasks.add(t)
		j.active++
	}
	return w
}

func TestSnapshotOrderAndEndpoints(t *testing.T) {
	w := testWorld(10, 200, 20)
	// The snapshot reuses its memory from cycle to cycle: each cycle
	// must still see exactly the world of that moment.
	for cycle, down := range []bool{true, false, true} {
		w.eps["ep0003"].Up = !down
		snap := w.snapshot(time.Now(), sched.Tick)
		if len(snap.Running) != 20 {
			t.Fatalf("cycle %d: %d running, want 20", cycle, len(snap.Running))
		}
		for _, l := range [][]*sched.Task{snap.Waiting, snap.Running} {
			if !slices.IsSortedFunc(l, func(a, b *sched.Task) int { return int(a.ID - b.ID) }) {
				t.Fatalf("cycle %d: tasks not in ID order", cycle)
			}
		}
		want := 0
		for tk := range w.tasks.all() {
			if tk.State == store.StateQueued && (!down || tk.SrcEndpoint != "ep0003" && tk.DstEndpoint != "ep0003") {
				want++
			}
		}
		if len(snap.Waiting) != want || !down && want != 200 {
			t.Fatalf("cycle %d: %d waiting, want %d", cycle, len(snap.Waiting), want)
		}
		for _, st := range snap.Waiting {
			if down && (st.Src == "ep0003" || st.Dst == "ep0003") {
				t.Fatalf("cycle %d: task %d of a down endpoint in the snapshot", cycle, st.ID)
			}
			if tk := w.tasks.get(int64(st.ID)); tk.SrcEndpoint != st.Src || tk.DstEndpoint != st.Dst || st.Running {
				t.Fatalf("cycle %d: task %d has another task's record", cycle, st.ID)
			}
		}
		var cc int
		for _, e := range snap.Endpoints {
			cc += e.CC
		}
		if cc != 20*2*2 { // 20 runs of cc 2, counted at source and destination
			t.Fatalf("cycle %d: endpoint concurrency sums to %d, want 80", cycle, cc)
		}
	}
}

// BenchmarkSnapshot times the live loop's snapshot build at the scale of
// the store scale target (docs/SCALING.md): 1,000,000 queued and 10,000
// running tasks over 1,000 endpoints (bench/store-scale.sh runs it).
func BenchmarkSnapshot(b *testing.B) {
	w := testWorld(1000, 1_000_000, 10_000)
	w.snapshot(time.Now(), sched.Tick) // the first sorts the table and sizes the slab
	runtime.GC()                       // the setup's garbage is not the snapshot's
	b.ReportAllocs()
	b.ResetTimer()
	var snap *sched.Snapshot
	for b.Loop() {
		snap = w.snapshot(time.Now(), sched.Tick)
	}
	b.ReportMetric(float64(len(snap.Waiting)), "waiting")
}
