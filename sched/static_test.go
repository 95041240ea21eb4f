package sched_test

import (
	"testing"

	"github.com/sluice-dtn/sluice/sched"
)

// TestStaticCC: the baselines' fixed concurrency by file size (SC'15 §6.3):
// BaseCC1 always 1; BaseCC2, BaseCC4 and BaseCC8 2, 4 and 8 except for
// files of 10 MB or less, which are not split; BaseVary 1 up to 1 GB and 4
// above; the Globus default one file per connection.
func TestStaticCC(t *testing.T) {
	sizes := []int64{1, 1e6, 10e6, 10e6 + 1, 1e9, 1e9 + 1, 50e9}
	want := map[string][]int{
		"basecc1":  {1, 1, 1, 1, 1, 1, 1},
		"basecc2":  {1, 1, 1, 2, 2, 2, 2},
		"basecc4":  {1, 1, 1, 4, 4, 4, 4},
		"basecc8":  {1, 1, 1, 8, 8, 8, 8},
		"basevary": {1, 1, 1, 1, 1, 4, 4},
		"globus":   {1, 1, 1, 1, 1, 1, 1},
	}
	for name, ccs := range want {
		for i, size := range sizes {
			s := &sched.Snapshot{Endpoints: endpoints(nil), Estimator: lin,
				Waiting: []*sched.Task{waitingTask(1, "A", "B", size, 0)}}
			got := mustNew(t, name, sched.Options{}).Schedule(s)
			if w := []sched.Decision{start(1, ccs[i])}; !sameDecisions(got, w) {
				t.Errorf("%s, %d bytes: %v, want %v", name, size, got, w)
			}
		}
	}
}

// TestStaticMaxCC: no baseline gives a task more than Options.MaxCC.
func TestStaticMaxCC(t *testing.T) {
	cases := []struct {
		sched string
		maxCC int
		want  int
	}{{"basecc8", 4, 4}, {"basecc8", 0, 8}, {"basecc4", 2, 2}, {"basevary", 3, 3}, {"basecc2", 16, 2}}
	for _, c := range cases {
		s := &sched.Snapshot{Endpoints: endpoints(nil), Estimator: lin, Waiting: []*sched.Task{waitingTask(1, "A", "B", 5e9, 0)}}
		got := mustNew(t, c.sched, sched.Options{MaxCC: c.maxCC}).Schedule(s)
		if w := []sched.Decision{start(1, c.want)}; !sameDecisions(got, w) {
			t.Errorf("%s with MaxCC %d: %v, want %v", c.sched, c.maxCC, got, w)
		}
	}
}

// TestStaticEndpointLimitBelowCC: a baseline whose fixed concurrency is
// above an endpoint's (or the total) limit runs its tasks at the limit,
// once there is room, rather than never: a task of BaseCC8 to an endpoint
// that allows 6 connections starts with 6; with 2 of them in use, it
// waits.
func TestStaticEndpointLimitBelowCC(t *testing.T) {
	eps := func() map[string]*sched.Endpoint {
		e := endpoints(nil)
		e["B"].MaxCC = 6
		return e
	}
	cases := []struct {
		name    string
		running []*sched.Task
		total   int
		want    []sched.Decision
	}{
		{"room: the limit", nil, 0, []sched.Decision{start(1, 6)}},
		{"a total limit below", nil, 5, []sched.Decision{start(1, 5)}},
		{"two connections in use: waits", []*sched.Task{runningTask(9, "C", "B", 5e9, 1e9, 2, 1e6, 1, 0)}, 0, nil},
	}
	for _, c := range cases {
		s := &sched.Snapshot{Endpoints: eps(), Estimator: lin, TotalMaxCC: c.total, Running: c.running,
			Waiting: []*sched.Task{waitingTask(1, "A", "B", 5e9, 0)}}
		got := mustNew(t, "basecc8", sched.Options{}).Schedule(s)
		if !sameDecisions(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStaticAdmission: the baselines ask for a cycle at every arrival
// (they stand for services that start a transfer when it is submitted)
// unless CycleAdmission puts them on the periodic cycle; SEAL never asks
// (it waits for its cycle) whatever CycleAdmission says, and seal+ always
// does (admission on arrival is one of its changes).
func TestStaticAdmission(t *testing.T) {
	cases := []struct {
		sched string
		cycle bool
		want  bool
	}{
		{"basecc1", false, true}, {"basecc1", true, false},
		{"basecc2", false, true}, {"basecc2", true, false},
		{"basecc4", false, true}, {"basecc4", true, false},
		{"basecc8", false, true}, {"basecc8", true, false},
		{"basevary", false, true}, {"basevary", true, false},
		{"globus", false, true}, {"globus", true, false},
		{"seal", false, false}, {"seal", true, false},
		{"seal+", false, true}, {"seal+", true, true},
	}
	for _, c := range cases {
		s := mustNew(t, c.sched, sched.Options{CycleAdmission: c.cycle})
		a, ok := s.(sched.ArrivalAdmitter)
		got := ok && a.AdmitsOnArrival()
		if got != c.want {
			t.Errorf("%s with CycleAdmission=%v: admits on arrival %v, want %v", c.sched, c.cycle, got, c.want)
		}
	}
}

// TestStaticStartsEverythingWithoutLimits: the baselines start every task
// on arrival, saturated or not, and never preempt or resize.
func TestStaticStartsEverythingWithoutLimits(t *testing.T) {
	for _, name := range []string{"basecc1", "basecc2", "basecc4", "basecc8", "basevary"} {
		s := fill(&sched.Snapshot{Endpoints: endpoints(map[string]float64{"A": 999e6, "B": 999e6}), Estimator: lin,
			Running: []*sched.Task{runningTask(1, "A", "B", 50e9, 1e9, 4, 999e6, 100, 0)},
			Waiting: []*sched.Task{waitingTask(3, "A", "B", 5e9, 0), waitingTask(2, "A", "C", 2e9, 100)}})
		s.Waiting[0].Arrival, s.Waiting[1].Arrival = 1, 2
		got := mustNew(t, name, sched.Options{}).Schedule(s)
		if len(got) != 2 || got[0].Kind != sched.Start || got[0].Task != 3 || got[1].Kind != sched.Start || got[1].Task != 2 {
			t.Errorf("%s: %v, want starts of 3 then 2 (arrival order)", name, got)
		}
	}
}

func TestStaticQueues(t *testing.T) {
	arr := func(tk *sched.Task, at float64) *sched.Task { tk.Arrival = at; return tk }
	pending := func(tk *sched.Task) *sched.Task { tk.Pending = true; return tk }
	cases := []struct {
		name  string
		sched string
		snap  *sched.Snapshot
		want  []sched.Decision
	}{
		{
			// One A→B file runs; Globus allows two per pair: the earliest
			// waiting A→B (ID 2, arrival 1) starts, IDs 3 and 1 wait; the
			// A→C file is another pair and starts.
			name: "globus: at most two files per pair", sched: "globus",
			snap: fill(&sched.Snapshot{Endpoints: endpoints(nil), Running: []*sched.Task{runningTask(9, "A", "B", 5e9, 1e9, 1, 1e6, 1, 0)},
				Waiting: []*sched.Task{arr(waitingTask(1, "A", "B", 5e9, 0), 3), arr(waitingTask(2, "A", "B", 5e9, 0), 1),
					arr(waitingTask(3, "A", "B", 5e9, 0), 2), arr(waitingTask(4, "A", "C", 5e9, 0), 5)}}),
			want: []sched.Decision{start(2, 1), start(4, 1)},
		},
		{
			name: "globus: two running on the pair, none starts", sched: "globus",
			snap: fill(&sched.Snapshot{Endpoints: endpoints(nil),
				Running: []*sched.Task{runningTask(8, "A", "B", 5e9, 1e9, 1, 1e6, 1, 0), runningTask(9, "A", "B", 5e9, 1e9, 1, 1e6, 1, 0)},
				Waiting: []*sched.Task{arr(waitingTask(1, "A", "B", 5e9, 0), 3)}}),
			want: nil,
		},
		{
			name: "globus: the reverse direction is another pair", sched: "globus",
			snap: fill(&sched.Snapshot{Endpoints: endpoints(nil),
				Running: []*sched.Task{runningTask(8, "A", "B", 5e9, 1e9, 1, 1e6, 1, 0), runningTask(9, "A", "B", 5e9, 1e9, 1, 1e6, 1, 0)},
				Waiting: []*sched.Task{arr(waitingTask(1, "B", "A", 5e9, 0), 3)}}),
			want: []sched.Decision{start(1, 1)},
		},
		{
			// Total limit 10, 2 used: room for two cc-4 starts. First come,
			// first served: ID 2 and ID 4 arrived at 2 (tie → lower ID
			// first), ID 3 at 3, ID 1 at 4.
			name: "FIFO when TotalMaxCC is reached", sched: "basecc4",
			snap: fill(&sched.Snapshot{Endpoints: endpoints(nil), TotalMaxCC: 10,
				Running: []*sched.Task{runningTask(9, "A", "B", 5e9, 1e9, 2, 1e6, 1, 0)},
				Waiting: []*sched.Task{arr(waitingTask(1, "A", "B", 5e9, 0), 4), arr(waitingTask(4, "A", "B", 5e9, 0), 2),
					arr(waitingTask(3, "A", "B", 5e9, 0), 3), arr(waitingTask(2, "A", "B", 5e9, 0), 2)}}),
			want: []sched.Decision{start(2, 4), start(4, 4)},
		},
		{
			name: "total limit already reached: nothing starts", sched: "basecc1",
			snap: fill(&sched.Snapshot{Endpoints: endpoints(nil), TotalMaxCC: 2,
				Running: []*sched.Task{runningTask(9, "A", "B", 5e9, 1e9, 2, 1e6, 1, 0)},
				Waiting: []*sched.Task{arr(waitingTask(1, "A", "C", 1e6, 0), 4)}}),
			want: nil,
		},
		{
			// A allows 5 connections, 2 are used: ID 1 (cc 4) does not fit
			// and waits; ID 2 goes B→C and starts.
			name: "an endpoint's MaxCC", sched: "basecc4",
			snap: func() *sched.Snapshot {
				s := fill(&sched.Snapshot{Endpoints: endpoints(nil),
					Running: []*sched.Task{runningTask(9, "A", "B", 5e9, 1e9, 2, 1e6, 1, 0)},
					Waiting: []*sched.Task{arr(waitingTask(1, "A", "C", 5e9, 0), 1), arr(waitingTask(2, "B", "C", 5e9, 0), 2)}})
				s.Endpoints["A"].MaxCC = 5
				return s
			}(),
			want: []sched.Decision{start(2, 4)},
		},
		{
			name: "pending waiting tasks are left alone", sched: "basecc1",
			snap: &sched.Snapshot{Endpoints: endpoints(nil),
				Waiting: []*sched.Task{pending(arr(waitingTask(1, "A", "B", 5e9, 0), 1)), arr(waitingTask(2, "A", "B", 5e9, 0), 2)}},
			want: []sched.Decision{start(2, 1)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.snap.Estimator = lin
			got := mustNew(t, c.sched, sched.Options{}).Schedule(c.snap)
			if !sameDecisions(got, c.want) {
				t.Errorf("decisions %v, want %v", got, c.want)
			}
		})
	}
}
