// Package testout collects what a test's child process (or command)
// writes, and lets the test wait for a line of it instead of polling:
// each write wakes the waiters.
package testout

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// Buffer is an io.Writer safe for concurrent use (a process's stdout and
// stderr copy into it from two goroutines). The zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// grew is closed, and replaced, at every write.
	grew chan struct{}
}

// Write appends p and wakes WaitFor.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits until what was written holds every one of subs, or
// timeout passes, and reports whether it does. It wakes at each write,
// never on a timer of its own.
func (s *Buffer) WaitFor(timeout time.Duration, subs ...string) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		out := s.b.String()
		all := true
		for _, sub := range subs {
			if !strings.Contains(out, sub) {
				all = false
				break
			}
		}
		if all {
			s.mu.Unlock()
			return true
		}
		if s.grew == nil {
			s.grew = make(chan struct{})
		}
		grew := s.grew
		s.mu.Unlock()
		select {
		case <-grew:
		case <-deadline.C:
			return false
		}
	}
}
