package dispatch

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
)

func TestBuilderSnapshot(t *testing.T) {
	var b Builder
	b.Endpoint("a", 100, 8)
	b.Endpoint("b", 200, 0)
	b.Begin(Params{Trigger: sched.Completion, Now: 10, StartupCost: 0.5, Checkpoint: 1, Tasks: 2})
	// Added out of ID order: the snapshot has them in ID order.
	w2 := b.New()
	*w2 = sched.Task{ID: 7, Src: "a", Dst: "b", Size: 10, Left: -3, Wait: 1, CC: 4, Rate: 9, Running: true, Pending: true}
	b.Waiting(w2, 2)
	w1 := b.New()
	*w1 = sched.Task{ID: 3, Src: "a", Dst: "b", Size: 10, Left: 10}
	b.Waiting(w1, 0.5)
	r1 := &sched.Task{ID: 5, Src: "a", Dst: "b", CC: 3, Rate: 40, Trans: 1, Left: 4}
	b.Running(r1, 2)
	r2 := &sched.Task{ID: 2, Src: "b", Dst: "c", CC: 2, Rate: 10}
	b.RunningAt(r2, 0)
	b.Load("b", 2, 10)
	b.Load("c", 2, 10) // not declared: counts nowhere
	b.Load("a", 1, 5)  // a run the scheduler does not see
	snap := b.Snapshot()

	ids := func(ts []*sched.Task) []sched.TaskID {
		var out []sched.TaskID
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	if got, want := ids(snap.Waiting), []sched.TaskID{3, 7}; !reflect.DeepEqual(got, want) {
		t.Errorf("waiting %v, want %v", got, want)
	}
	if got, want := ids(snap.Running), []sched.TaskID{2, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("running %v, want %v", got, want)
	}
	// A waiting task's open time counts in Wait, its running fields
	// are cleared, its Left is not negative.
	if w2.Wait != 3 || w2.Running || w2.CC != 0 || w2.Rate != 0 || w2.Pending || w2.Left != 0 {
		t.Errorf("waiting record %+v", *w2)
	}
	if r1.Trans != 3 || !r1.Running {
		t.Errorf("running record %+v", *r1)
	}
	a, bb := snap.Endpoints["a"], snap.Endpoints["b"]
	if a.CC != 4 || a.Observed != 45 || bb.CC != 5 || bb.Observed != 50 {
		t.Errorf("loads a=%+v b=%+v", *a, *bb)
	}
	if _, ok := snap.Endpoints["c"]; ok || len(snap.Endpoints) != 2 {
		t.Errorf("endpoints %v", snap.Endpoints)
	}
	if snap.Now != 10 || snap.Trigger != sched.Completion || snap.StartupCost != 0.5 || snap.Checkpoint != 1 {
		t.Errorf("params not carried: %+v", snap)
	}

	// The next cycle starts from zero sums, keeps the endpoints, and
	// drops the old tasks.
	b.Begin(Params{Now: 11})
	b.Forget("b")
	snap = b.Snapshot()
	if len(snap.Waiting) != 0 || len(snap.Running) != 0 {
		t.Errorf("tasks kept across cycles: %d waiting %d running", len(snap.Waiting), len(snap.Running))
	}
	if a := snap.Endpoints["a"]; a == nil || a.CC != 0 || a.Observed != 0 || a.MaxCC != 8 || len(snap.Endpoints) != 1 {
		t.Errorf("endpoints after a cycle: %v", snap.Endpoints)
	}
}

// TestBuilderSlabGrows: more tasks than Begin was told keep the records
// already handed out intact.
func TestBuilderSlabGrows(t *testing.T) {
	var b Builder
	b.Begin(Params{Tasks: 1})
	var recs []*sched.Task
	for i := range 200 {
		st := b.New()
		st.ID = sched.TaskID(200 - i)
		b.Waiting(st, 0)
		recs = append(recs, st)
	}
	snap := b.Snapshot()
	for i, st := range recs {
		if st.ID != sched.TaskID(200-i) {
			t.Fatalf("record %d changed to ID %d", i, st.ID)
		}
	}
	for i, st := range snap.Waiting {
		if st.ID != sched.TaskID(i+1) {
			t.Fatalf("waiting[%d] is %d", i, st.ID)
		}
	}
}

// world is a runner over a map of tasks, recording what it carried out.
type world struct {
	cc   map[sched.TaskID]int // running tasks' concurrency; absent: waiting
	did  []string
	fail sched.TaskID // Lookup of this task fails
}

func (w *world) Lookup(d sched.Decision) (sched.TaskID, bool, error) {
	if d.Task == w.fail {
		return 0, false, errors.New("no such task")
	}
	_, running := w.cc[d.Task]
	return d.Task, (d.Kind == sched.Start) != running, nil
}
func (w *world) CC(id sched.TaskID) int { return w.cc[id] }
func (w *world) Start(id sched.TaskID, cc int) error {
	w.cc[id] = cc
	w.did = append(w.did, fmt.Sprintf("start %d cc=%d", id, cc))
	return nil
}
func (w *world) Preempt(id sched.TaskID, d sched.Decision) error {
	delete(w.cc, id)
	w.did = append(w.did, fmt.Sprintf("preempt %d for %d", id, d.For))
	return nil
}
func (w *world) SetCC(id sched.TaskID, cc int) error {
	w.cc[id] = cc
	w.did = append(w.did, fmt.Sprintf("set %d cc=%d", id, cc))
	return nil
}

// capRule allows at most max streams per task; fixRule replaces the
// concurrency of task fix by n.
type capRule struct{ max int }

func (capRule) Name() string { return "cap" }
func (c capRule) Admit(_ sched.TaskID, _ sched.Decision, cc, cur int) (int, string) {
	if cc > c.max {
		return max(c.max, cur), "capped"
	}
	return cc, ""
}

type fixRule struct {
	fix sched.TaskID
	n   int
}

func (fixRule) Name() string { return "fix" }
func (f fixRule) Admit(id sched.TaskID, d sched.Decision, cc, cur int) (int, string) {
	if id != f.fix {
		return cc, ""
	}
	if d.Kind == sched.SetCC {
		return cur, "fixed"
	}
	return f.n, "fixed"
}

type zeroRule struct{ id sched.TaskID }

func (zeroRule) Name() string { return "zero" }
func (z zeroRule) Admit(id sched.TaskID, _ sched.Decision, cc, _ int) (int, string) {
	if id == z.id {
		return 0, "no room"
	}
	return cc, ""
}

func TestApply(t *testing.T) {
	start := func(id, cc int) sched.Decision {
		return sched.Decision{Kind: sched.Start, Task: sched.TaskID(id), CC: cc}
	}
	set := func(id, cc int) sched.Decision {
		return sched.Decision{Kind: sched.SetCC, Task: sched.TaskID(id), CC: cc}
	}
	tests := []struct {
		name    string
		running map[sched.TaskID]int
		ds      []sched.Decision
		rules   []Rule[sched.TaskID]
		did     []string
		refused []sched.Refusal
	}{
		{
			name: "no rules: carried out in order",
			ds:   []sched.Decision{start(1, 2), {Kind: sched.Preempt, Task: 9, For: 1}, set(8, 3)},
			running: map[sched.TaskID]int{
				9: 4, 8: 1,
			},
			did: []string{"start 1 cc=2", "preempt 9 for 1", "set 8 cc=3"},
		},
		{
			name:    "a decision that does not apply is skipped",
			ds:      []sched.Decision{start(1, 2), start(1, 3), set(5, 2)},
			did:     []string{"start 1 cc=2"},
			running: map[sched.TaskID]int{},
		},
		{
			name:    "a rule trims a start and an increase",
			ds:      []sched.Decision{start(1, 8), set(2, 6)},
			running: map[sched.TaskID]int{2: 2},
			rules:   []Rule[sched.TaskID]{capRule{4}},
			did:     []string{"start 1 cc=4", "set 2 cc=4"},
			refused: []sched.Refusal{
				{Decision: start(1, 8), Rule: "cap", CC: 4, Why: "capped"},
				{Decision: set(2, 6), Rule: "cap", CC: 4, Why: "capped"},
			},
		},
		{
			name:    "a rule refusing a change stops it; later rules do not see it",
			ds:      []sched.Decision{set(2, 6)},
			running: map[sched.TaskID]int{2: 5},
			rules:   []Rule[sched.TaskID]{capRule{4}, zeroRule{2}},
			refused: []sched.Refusal{{Decision: set(2, 6), Rule: "cap", CC: 5, Why: "capped"}},
		},
		{
			name:    "fixed streams replace the scheduler's, and a later rule trims them",
			ds:      []sched.Decision{start(3, 1)},
			running: map[sched.TaskID]int{},
			rules:   []Rule[sched.TaskID]{fixRule{3, 16}, capRule{8}},
			did:     []string{"start 3 cc=8"},
			refused: []sched.Refusal{
				{Decision: start(3, 1), Rule: "fix", CC: 16, Why: "fixed"},
				{Decision: start(3, 1), Rule: "cap", CC: 8, Why: "capped"},
			},
		},
		{
			name:    "a preemption goes with its replacement's start",
			ds:      []sched.Decision{{Kind: sched.Preempt, Task: 9, For: 1}, start(2, 1), start(1, 2)},
			running: map[sched.TaskID]int{9: 4},
			did:     []string{"start 2 cc=1", "preempt 9 for 1", "start 1 cc=2"},
		},
		{
			name:    "a preemption for a refused start is not carried out",
			ds:      []sched.Decision{{Kind: sched.Preempt, Task: 9, For: 1}, {Kind: sched.Preempt, Task: 8, For: 2}, start(1, 2), start(2, 2)},
			running: map[sched.TaskID]int{9: 4, 8: 4},
			rules:   []Rule[sched.TaskID]{zeroRule{1}},
			did:     []string{"preempt 8 for 2", "start 2 cc=2"},
			refused: []sched.Refusal{
				{Decision: start(1, 2), Rule: "zero", CC: 0, Why: "no room"},
				{Decision: sched.Decision{Kind: sched.Preempt, Task: 9, For: 1}, Rule: "replacement", Why: "task 1, its replacement, does not start"},
			},
		},
		{
			name:    "a preemption listed after its start, or for no start of the cycle, is carried out in place",
			ds:      []sched.Decision{start(1, 2), {Kind: sched.Preempt, Task: 9, For: 1}, {Kind: sched.Preempt, Task: 8, For: 5}},
			running: map[sched.TaskID]int{9: 4, 8: 4},
			did:     []string{"start 1 cc=2", "preempt 9 for 1", "preempt 8 for 5"},
		},
		{
			name:    "a refused start waits; the others go on",
			ds:      []sched.Decision{start(1, 2), start(2, 2)},
			running: map[sched.TaskID]int{},
			rules:   []Rule[sched.TaskID]{zeroRule{1}},
			did:     []string{"start 2 cc=2"},
			refused: []sched.Refusal{{Decision: start(1, 2), Rule: "zero", CC: 0, Why: "no room"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{cc: tc.running}
			refused, err := Apply(tc.ds, w, tc.rules...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(w.did, tc.did) {
				t.Errorf("carried out %q, want %q", w.did, tc.did)
			}
			if !reflect.DeepEqual(refused, tc.refused) {
				t.Errorf("refused %+v, want %+v", refused, tc.refused)
			}
		})
	}
}

func TestApplyStopsAtError(t *testing.T) {
	w := &world{cc: map[sched.TaskID]int{}, fail: 2}
	_, err := Apply([]sched.Decision{
		{Kind: sched.Start, Task: 1, CC: 1}, {Kind: sched.Start, Task: 2, CC: 1}, {Kind: sched.Start, Task: 3, CC: 1},
	}, w)
	if err == nil {
		t.Fatal("no error")
	}
	if len(w.did) != 1 {
		t.Errorf("carried out %q after the error", w.did)
	}
}

// TestCycleCarriesRefusals: the next snapshot tells the scheduler what
// the last apply refused.
func TestCycleCarriesRefusals(t *testing.T) {
	var c Cycle
	c.Begin(Params{})
	if s := c.Snapshot(); len(s.Refused) != 0 {
		t.Fatalf("refusals before any apply: %v", s.Refused)
	}
	w := &world{cc: map[sched.TaskID]int{}}
	r, _ := Apply([]sched.Decision{{Kind: sched.Start, Task: 1, CC: 2}}, w, Rule[sched.TaskID](zeroRule{1}))
	c.Refused(r)
	c.Begin(Params{})
	if s := c.Snapshot(); len(s.Refused) != 1 || s.Refused[0].Rule != "zero" {
		t.Fatalf("refusals %v", s.Refused)
	}
}

func TestReplan(t *testing.T) {
	var b Builder
	b.Endpoint("a", 100, 8)
	b.Endpoint("b", 100, 8)
	b.Begin(Params{})
	for _, id := range []sched.TaskID{1, 2, 3, 4} {
		st := b.New()
		*st = sched.Task{ID: id, Src: "a", Dst: "b", Size: 10, Left: 10}
		b.Waiting(st, 0)
	}
	for _, id := range []sched.TaskID{8, 9} {
		b.Running(&sched.Task{ID: id, Src: "a", Dst: "b", CC: 2}, 0)
	}
	snap := b.Snapshot()
	waiting := snap.Waiting
	refusal := []sched.Refusal{{Decision: sched.Decision{Kind: sched.Start, Task: 2, CC: 1}, Rule: "r"}}
	// Task 3 started with 3 connections, 9 went from 2 to 4, 8 was
	// preempted; task 2 was refused and task 4 would be (same rule):
	// only task 1 is left to plan.
	applied := []sched.Decision{
		{Kind: sched.Preempt, Task: 8, For: 3},
		{Kind: sched.Start, Task: 3, CC: 3},
		{Kind: sched.SetCC, Task: 9, CC: 4},
	}
	Replan(snap, applied, func(t *sched.Task) bool { return t.ID == 1 }, refusal)
	if len(snap.Waiting) != 1 || snap.Waiting[0].ID != 1 {
		t.Errorf("waiting %v", snap.Waiting)
	}
	if len(snap.Running) != 3 || snap.Running[0].ID != 3 || snap.Running[1].ID != 8 || snap.Running[2].ID != 9 {
		t.Fatalf("running %v", snap.Running)
	}
	for i, want := range []int{3, 2, 4} {
		if r := snap.Running[i]; !r.Running || r.CC != want || !r.Pending {
			t.Errorf("running %d: %+v, want cc %d and pending", r.ID, *r, want)
		}
	}
	// 2 + 2 before; +3 started, +2 changed; the victim keeps its 2
	// until it stops.
	if a := snap.Endpoints["a"]; a.CC != 9 {
		t.Errorf("connections at a %d, want 9", a.CC)
	}
	if len(snap.Refused) != 1 {
		t.Errorf("refused %v", snap.Refused)
	}
	if len(waiting) != 4 {
		t.Errorf("the builder's slice changed: %d", len(waiting))
	}
}

// firstWaiting starts the first waiting task with one connection, and
// counts its plans.
type firstWaiting struct{ plans int }

func (*firstWaiting) Name() string { return "first" }
func (f *firstWaiting) Schedule(s *sched.Snapshot) []sched.Decision {
	f.plans++
	if len(s.Waiting) == 0 {
		return nil
	}
	return []sched.Decision{{Kind: sched.Start, Task: s.Waiting[0].ID, CC: 1}}
}

// planner is world as a Planner: it holds back what the rules refused.
type planner struct {
	*world
	round []sched.Decision
	held  map[sched.TaskID]bool
}

func (p *planner) Plan([]sched.Decision) { p.round = nil }
func (p *planner) Start(id sched.TaskID, cc int) error {
	p.round = append(p.round, sched.Decision{Kind: sched.Start, Task: id, CC: cc})
	return p.world.Start(id, cc)
}
func (p *planner) Applied() []sched.Decision { return p.round }
func (p *planner) Hold(refused []sched.Refusal) bool {
	for _, f := range refused {
		p.held[f.Decision.Task] = true
	}
	return len(refused) > 0
}
func (p *planner) Keep(t *sched.Task) bool { return !p.held[t.ID] }

// TestDecide: one cycle plans, applies through the rules and, for a
// runner that can, plans again around what the rules refused, within the
// bound on rounds; the refusals reach the next snapshot; a runner that
// cannot plan again gets one round.
func TestDecide(t *testing.T) {
	snapshot := func(c *Cycle, ids ...sched.TaskID) *sched.Snapshot {
		c.Begin(Params{})
		for _, id := range ids {
			st := c.New()
			*st = sched.Task{ID: id, Src: "a", Dst: "b", Size: 10, Left: 10}
			c.Waiting(st, 0)
		}
		return c.Snapshot()
	}
	// Tasks 1 and 2 are refused by the rules; 3 may start.
	rules := []Rule[sched.TaskID]{zeroRule{1}, zeroRule{2}}
	for _, tc := range []struct {
		name       string
		planner    bool
		maxReplans int
		rounds     int
		did        []string
		refused    int
	}{
		{"plans again around refusals", true, 3, 3, []string{"start 3 cc=1"}, 2},
		{"within the bound", true, 1, 2, nil, 2},
		{"a runner that cannot plan again", false, 3, 1, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cycle
			c.Endpoint("a", 100, 8)
			c.Endpoint("b", 100, 8)
			w := &world{cc: map[sched.TaskID]int{}}
			var r Runner[sched.TaskID] = w
			if tc.planner {
				r = &planner{world: w, held: map[sched.TaskID]bool{}}
			}
			s := &firstWaiting{}
			out, err := Decide(&c, s, snapshot(&c, 1, 2, 3), r, tc.maxReplans, rules...)
			if err != nil {
				t.Fatal(err)
			}
			if out.Rounds != tc.rounds || s.plans != tc.rounds || len(out.Decisions) != tc.rounds {
				t.Errorf("%d rounds, %d plans, decisions %v; want %d", out.Rounds, s.plans, out.Decisions, tc.rounds)
			}
			if !slices.Equal(w.did, tc.did) {
				t.Errorf("carried out %q, want %q", w.did, tc.did)
			}
			if len(out.Refused) != tc.refused {
				t.Errorf("refused %v, want %d", out.Refused, tc.refused)
			}
			if next := snapshot(&c); len(next.Refused) != tc.refused {
				t.Errorf("the next snapshot carries %d refusals, want %d", len(next.Refused), tc.refused)
			}
		})
	}
	t.Run("stops at the runner's error", func(t *testing.T) {
		var c Cycle
		w := &world{cc: map[sched.TaskID]int{}, fail: 1}
		if _, err := Decide(&c, &firstWaiting{}, snapshot(&c, 1, 2), Runner[sched.TaskID](w), 3); err == nil {
			t.Error("no error")
		}
	})
}
