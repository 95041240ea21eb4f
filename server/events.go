package server

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Event is wire.Event: the API documents live in package wire.
type Event = wire.Event

// broker fans events out to subscribers. A subscriber that does not keep
// up loses events (and is told so by a gap in the sequence) rather than
// slowing the scheduler down.
type broker struct {
	clk    clock.Clock
	mu     sync.Mutex
	subs   map[chan Event]func(Event) bool
	byUser map[int64]int // open subscriptions per user
}

func newBroker(clk clock.Clock) *broker {
	return &broker{clk: clk, subs: map[chan Event]func(Event) bool{}, byUser: map[int64]int{}}
}

// MaxStreamsPerUser bounds the event streams one user holds open at once.
// Each holds a buffer of 256 events and a goroutine for as long as its
// connection lives, so one token must not be able to open them without
// end; a dashboard needs one per open page.
const MaxStreamsPerUser = 32

// ErrTooManyStreams refuses an event stream past MaxStreamsPerUser.
var ErrTooManyStreams = errors.New("too many event streams open for this user")

func (b *broker) publish(e Event) {
	if e.At.IsZero() {
		e.At = b.clk.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, want := range b.subs {
		if !want(e) {
			continue
		}
		select {
		case ch <- e:
		default:
		}
	}
}

// Subscribe returns a channel of the events the caller may see, and a
// function to call when done; ErrTooManyStreams if the caller's user
// already has MaxStreamsPerUser open.
func (s *Server) Subscribe(c Caller, job int64) (<-chan Event, func(), error) {
	ch := make(chan Event, 256)
	want := func(e Event) bool {
		return (c.User.Admin || e.Owner == c.User.ID) && (job == 0 || e.Job == job)
	}
	b := s.events
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byUser[c.User.ID] >= MaxStreamsPerUser {
		return nil, nil, fmt.Errorf("%w (%d): close one first", ErrTooManyStreams, MaxStreamsPerUser)
	}
	b.subs[ch] = want
	b.byUser[c.User.ID]++
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, ch)
			if b.byUser[c.User.ID]--; b.byUser[c.User.ID] <= 0 {
				delete(b.byUser, c.User.ID)
			}
			b.mu.Unlock()
		})
	}, nil
}

// jobLive is a job's live figures, kept by the loop for status queries.
type jobLive struct {
	rate  float64
	extra int64 // bytes written by running tasks beyond what the store has
}

// progressEvents publishes each active job's progress and refreshes the
// live figures status queries read.
func (w *world) progressEvents() {
	live := make(map[int64]jobLive, len(w.jobs))
	// Checkpointed bytes of the tasks still to end, per job: running or
	// waiting to resume (preempted, retrying), as a job's status counts
	// them.
	held := make(map[int64]int64)
	st := Status{Scheduler: w.s.sch.Name(), CycleSeconds: w.lastCycle.Seconds(), Period: w.s.cfg.Cycle.Seconds(), Server: w.s.cfg.ServerID}
	for p := range w.parts {
		st.Partitions = append(st.Partitions, p)
	}
	sort.Strings(st.Partitions)
	for t := range w.tasks.all() {
		c := &st.Interactive
		if t.Batch {
			c = &st.Batch
		}
		switch t.State {
		case store.StateQueued, store.StateResolving:
			c.Queued++
		case store.StateRunning:
			c.Running++
		}
		if t.Done > 0 {
			held[t.JobID] = store.AddBytes(held[t.JobID], t.Done)
		}
		if t.State != store.StateRunning {
			continue
		}
		if t.xfer == nil {
			continue
		}
		l := live[t.JobID]
		l.rate += t.rate
		if d := t.xfer.Progress().Done - t.Done; d > 0 {
			l.extra = store.AddBytes(l.extra, d)
		}
		live[t.JobID] = l
	}
	eps := make(map[string]EndpointStatus, len(w.eps))
	for n, e := range w.eps {
		eps[n] = EndpointStatus{Throughput: e.observed, CC: e.cc, Peak: e.peak, Endpoint: store.Endpoint{Up: e.Up}}
	}
	w.s.mu.Lock()
	w.s.jobLive = live
	w.s.epLive = eps
	w.s.nowStat = st
	w.s.mu.Unlock()
	for id, l := range live {
		j := w.jobs[id]
		if j == nil {
			continue
		}
		done := store.AddBytes(max(j.completed, 0), held[id])
		w.s.events.publish(Event{Type: "progress", Job: id, Owner: j.OwnerID, Throughput: l.rate,
			BytesDone: store.AddBytes(done, l.extra), Bytes: j.Bytes, FilesDone: j.FilesDone, Files: j.Files})
	}
}

// Status is what the service is doing now, for a dashboard's overview.
type Status struct {
	Scheduler string
	// CycleSeconds is how long the last scheduling cycle took; Period is
	// the time between cycles.
	CycleSeconds, Period float64
	// Files waiting (queued, or being stat'ed) and running, per class,
	// of the partitions this server schedules.
	Interactive, Batch ClassCounts
	// Server is this server's ID; Partitions the source endpoints it
	// schedules (with several servers, each holds a share).
	Server     string
	Partitions []string
}

// ClassCounts are one class's files in the queue and running.
type ClassCounts struct{ Queued, Running int }

// Status returns the service's figures as the loop last published them.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.nowStat
	if st.Scheduler == "" {
		st.Scheduler, st.Period, st.Server = s.sch.Name(), s.cfg.Cycle.Seconds(), s.cfg.ServerID
	}
	return st
}
