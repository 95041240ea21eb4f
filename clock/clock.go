// Package clock owns time as a parameter: the loop of the service, and
// whatever else decides by the time, reads it from a Clock, so that a test
// or a deterministic simulation can run hours of virtual time in
// milliseconds, and replay them exactly, instead of sleeping.
//
// A Clock only tells the time. Code that waits (tickers, timeouts on
// network calls) keeps waiting on the real one: a simulation drives the
// steps such code would take, at the virtual times it chooses.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the machine's clock.
type System struct{}

// Now is time.Now.
func (System) Now() time.Time { return time.Now() }

// Fake is a clock that moves only when told to. It is safe for concurrent
// use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a fake clock showing t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d (a negative d is ignored: a clock
// does not go back).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d > 0 {
		f.now = f.now.Add(d)
	}
}

// Set moves the clock to t if t is later than its time.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
}
