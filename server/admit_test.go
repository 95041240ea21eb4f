package server

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/dispatch"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// ccXfer is a run that takes concurrency changes.
type ccXfer struct{ cc int }

func (x *ccXfer) Progress() engine.Progress   { return engine.Progress{CC: x.cc} }
func (x *ccXfer) SetCC(cc int) error          { x.cc = cc; return nil }
func (x *ccXfer) Pause(context.Context) error { return nil }

// TestLimitRule: the endpoints' connection limits hold when a plan is
// carried out in part, and a start gets the connections of the tasks
// preempted for it (the scheduler planned the handover).
func TestLimitRule(t *testing.T) {
	start := func(id, cc int) sched.Decision {
		return sched.Decision{Kind: sched.Start, Task: sched.TaskID(id), CC: cc}
	}
	tests := []struct {
		name     string
		running  map[int64]int // task -> cc, a->b
		ext      int           // another server's connections at a
		streams  int           // the job's fixed streams
		ds       []sched.Decision
		wantCC   map[int64]int // after: running tasks' cc (0: not running or being stopped)
		refusals int
		note     string // task 2's note after
	}{
		{
			name:    "a start gets its victim's connections",
			running: map[int64]int{1: 4},
			ds:      []sched.Decision{{Kind: sched.Preempt, Task: 1, For: 2}, start(2, 4)},
			wantCC:  map[int64]int{1: 0, 2: 4},
		},
		{
			name:     "a start gets the room that is left",
			running:  map[int64]int{1: 3},
			ds:       []sched.Decision{start(2, 2)},
			wantCC:   map[int64]int{1: 3, 2: 1},
			refusals: 1,
		},
		{
			name:     "a full endpoint refuses",
			running:  map[int64]int{1: 4},
			ds:       []sched.Decision{start(2, 2), {Kind: sched.SetCC, Task: 1, CC: 6}},
			wantCC:   map[int64]int{1: 4},
			refusals: 2,
			note:     "waiting: a has 4 of its 4 connections in use",
		},
		{
			name:     "an increase is trimmed to the room",
			running:  map[int64]int{1: 2},
			ds:       []sched.Decision{{Kind: sched.SetCC, Task: 1, CC: 6}},
			wantCC:   map[int64]int{1: 4},
			refusals: 1,
		},
		{
			name:     "a job's fixed streams wait until they fit",
			running:  map[int64]int{1: 3},
			streams:  3,
			ds:       []sched.Decision{start(2, 3)},
			wantCC:   map[int64]int{1: 3, 2: 0},
			refusals: 1,
			note:     "waiting: a has 3 of its 4 connections in use",
		},
		{
			name:    "fixed streams that could never fit run with what there is",
			streams: 6,
			ds:      []sched.Decision{start(2, 6)},
			// The limit, not the 6 fixed: waiting would be for good.
			wantCC:   map[int64]int{2: 4},
			refusals: 1,
		},
		{
			name:     "another server's connections count",
			ext:      3,
			ds:       []sched.Decision{start(2, 2)},
			wantCC:   map[int64]int{2: 1},
			refusals: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			// The pause's report is not needed here: nothing runs.
			s := &Server{cfg: Config{Clock: clk, ServerID: "s1"}, events: newBroker(clk), epoch: clk.Now(), spawn: func(func()) {}}
			w := &world{s: s, tasks: newTaskTable(), jobs: map[int64]*jobState{}, eps: map[string]*endpoint{},
				est: model.NewHistory(), ext: map[string]cluster.Load{"a": {CC: tc.ext}}, victims: map[int64][]int64{}}
			for _, n := range []string{"a", "b"} {
				w.eps[n] = &endpoint{Endpoint: store.Endpoint{Name: n, MaxCC: 4, Up: true}}
			}
			j := &jobState{Job: store.Job{ID: 1, Streams: tc.streams}}
			w.jobs[1] = j
			for id := int64(1); id <= 2; id++ {
				task := &task{Task: store.Task{ID: id, JobID: 1, Size: 1 << 30, State: store.StateQueued, SrcEndpoint: "a", DstEndpoint: "b"}, job: j}
				if cc, ok := tc.running[id]; ok {
					task.State, task.CC, task.xfer = store.StateRunning, cc, &ccXfer{cc}
					w.runTasks = append(w.runTasks, task)
				}
				w.tasks.add(task)
			}
			r := newLiveRunner(w, clk.Now())
			r.Plan(tc.ds)
			refused, err := dispatch.Apply(tc.ds, r, dispatch.Rule[*task](limitRule{r}))
			if err != nil {
				t.Fatal(err)
			}
			if len(refused) != tc.refusals {
				t.Errorf("refusals %+v, want %d", refused, tc.refusals)
			}
			if got := w.tasks.get(2).Error; got != tc.note {
				t.Errorf("task 2's note %q, want %q", got, tc.note)
			}
			for id, want := range tc.wantCC {
				task := w.tasks.get(id)
				got := 0
				if task.State == store.StateRunning && task.stop == "" && task.preemptFor == 0 {
					got = task.CC
				}
				if got != want {
					t.Errorf("task %d: cc %d (state %s), want %d", id, got, task.State, want)
				}
			}
		})
	}
}
