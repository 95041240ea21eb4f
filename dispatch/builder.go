// Package dispatch owns the scheduling cycle, once for every world that
// runs one: building the scheduler's snapshot from the world's active
// tasks and endpoints (Builder), running the cycle (Decide: the scheduler
// plans, and plans again around what was refused), and applying the
// scheduler's decisions through an explicit chain of admission rules to a
// runner that carries them out (Apply), returning what each rule refused
// or changed so that the next snapshot tells the scheduler
// (sched.Snapshot.Refused).
//
// The live service (package server: its runner is the transfer engine and
// the agents, its rules the fixed streams of a job, the adaptive clients
// and the Policy Service's VO allocations) and the simulator (package sim:
// its runner is the fluid model in virtual time) both build their
// snapshots and apply their decisions here, so the order the scheduler
// sees tasks in, how loads are summed at endpoints, how time in the
// current state is counted and how decisions are trimmed cannot drift
// apart between what is replayed and what runs. What differs between the
// worlds (which tasks are visible, what a running task's rate and progress
// are) is each world's own, stated where it fills the records.
//
// Like the schedulers, nothing here reads a clock, starts a goroutine or
// does I/O: times come in as numbers, and effects go out through the
// world's Runner.
package dispatch

import (
	"github.com/sluice-dtn/sluice/sched"
)

// Params are the constants of one cycle's snapshot.
type Params struct {
	Trigger sched.Trigger
	// Now is the world's time, seconds since its epoch.
	Now        float64
	TotalMaxCC int
	Estimator  sched.Estimator
	// StartupCost and Checkpoint are what the world tells the scheduler
	// a (re)start costs and how often runs checkpoint, seconds.
	StartupCost, Checkpoint float64
	// Tasks is how many tasks the world expects to add (the size of its
	// table), so the builder's memory is sized once.
	Tasks int
}

// Builder builds one world's snapshots, reusing its memory from cycle to
// cycle: the task records come from one slab, and the endpoint records
// stay in one map from their declaration on, their sums reset at every
// Begin. Nothing may keep a snapshot, or a record from New, past the next
// Begin.
type Builder struct {
	p       Params
	eps     map[string]*sched.Endpoint
	slab    []sched.Task
	waiting []*sched.Task
	running []*sched.Task
	ids     sched.IDSorter
}

// Begin starts a snapshot.
func (b *Builder) Begin(p Params) {
	b.p = p
	for _, e := range b.eps {
		e.CC, e.Observed = 0, 0
	}
	n := p.Tasks
	if cap(b.slab) < n || cap(b.slab) > 4*n+1024 {
		// Room to grow; shrinks after a backlog drains.
		b.slab = make([]sched.Task, 0, n+n/4)
	}
	b.slab = b.slab[:0]
	b.waiting, b.running = b.waiting[:0], b.running[:0]
}

// Endpoint declares an endpoint, or declares it anew with another
// maximum, its sums at zero and Probe off, and returns its record (the
// world may set Probe, or the maximum once the loads are summed). It stays
// in every snapshot until Forget; a world whose endpoints never change
// declares them once.
func (b *Builder) Endpoint(name string, maxThroughput float64, maxCC int) *sched.Endpoint {
	if b.eps == nil {
		b.eps = map[string]*sched.Endpoint{}
	}
	e := b.eps[name]
	if e == nil {
		e = &sched.Endpoint{Name: name}
		b.eps[name] = e
	}
	*e = sched.Endpoint{Name: name, MaxThroughput: maxThroughput, MaxCC: maxCC}
	return e
}

// Forget takes an endpoint out of the snapshots.
func (b *Builder) Forget(name string) { delete(b.eps, name) }

// Endpoints are the endpoint records of the snapshot being built (and,
// between cycles, of the last one): the world reads the loads the cycle
// summed from them.
func (b *Builder) Endpoints() map[string]*sched.Endpoint { return b.eps }

// New returns a zeroed task record from the builder's slab, for a world
// that keeps no record of its own; it is valid until the next Begin.
func (b *Builder) New() *sched.Task {
	if len(b.slab) == cap(b.slab) {
		// More tasks than Begin was told (added while the world was
		// walked): a new slab; the records handed out stay where they
		// are.
		b.slab = make([]sched.Task, 0, max(2*cap(b.slab), 64))
	}
	b.slab = b.slab[:len(b.slab)+1]
	st := &b.slab[len(b.slab)-1]
	*st = sched.Task{}
	return st
}

// Waiting adds a waiting task. open is the time since it began waiting
// this time, which counts in its Wait; its running fields are cleared.
func (b *Builder) Waiting(st *sched.Task, open float64) {
	st.Wait += open
	st.Running, st.CC, st.Rate, st.Pending = false, 0, 0, false
	st.Left = max(st.Left, 0)
	b.waiting = append(b.waiting, st)
}

// Running adds a running task the scheduler sees and counts its
// concurrency and rate at its source and destination. open is the time
// since its run began, which counts in its Trans. A world whose tasks use
// other endpoints too (replicas) uses RunningAt and Load instead.
func (b *Builder) Running(st *sched.Task, open float64) {
	b.RunningAt(st, open)
	b.Load(st.Src, st.CC, st.Rate)
	b.Load(st.Dst, st.CC, st.Rate)
}

// RunningAt adds a running task the scheduler sees without counting it at
// any endpoint: the world counts its uses with Load.
func (b *Builder) RunningAt(st *sched.Task, open float64) {
	st.Trans += open
	st.Running = true
	st.Left = max(st.Left, 0)
	b.running = append(b.running, st)
}

// Load counts cc connections and rate bytes per second at endpoint name:
// a visible task's use of it, or one the scheduler does not see (a run
// riding on another's connections, a victim draining after a preemption,
// another server's transfers). An undeclared endpoint counts nothing.
func (b *Builder) Load(name string, cc int, rate float64) {
	if e := b.eps[name]; e != nil {
		e.CC += cc
		e.Observed += rate
	}
}

// Snapshot finishes the snapshot: the tasks in ID order, whatever order
// the world holds them in (decisions must not depend on it), and the
// endpoints declared.
func (b *Builder) Snapshot() *sched.Snapshot {
	b.ids.Sort(b.waiting)
	b.ids.Sort(b.running)
	// Drop the last cycle's pointers past the end, so that they keep no
	// finished task alive.
	clear(b.waiting[len(b.waiting):cap(b.waiting)])
	clear(b.running[len(b.running):cap(b.running)])
	return &sched.Snapshot{
		Trigger: b.p.Trigger, Now: b.p.Now, Waiting: b.waiting, Running: b.running,
		Endpoints: b.eps, TotalMaxCC: b.p.TotalMaxCC, Estimator: b.p.Estimator,
		StartupCost: b.p.StartupCost, Checkpoint: b.p.Checkpoint,
	}
}
