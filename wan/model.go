package wan

import (
	"context"
	"math/rand/v2"
	"time"

	"golang.org/x/sys/unix"
)

// server is a FIFO of bytes drained at a rate, in virtual time: free is
// when the last byte admitted will have left (nanoseconds since the
// forwarder started). A packet arriving at now finds (free-now)·rate bytes
// ahead of it; it is dropped if those and its own bytes exceed the queue.
type server struct{ free int64 }

// admit serves size bytes arriving at now on a server of rate Mbit/s
// (<= 0: unlimited, no queue) with a queue of queue bytes; it returns when
// the last byte leaves, or false if the queue had no room.
func (s *server) admit(now int64, size int, rateMbps float64, queue int) (int64, bool) {
	if rateMbps <= 0 {
		return now, true
	}
	nsPerByte := 8e3 / rateMbps
	start := now
	if s.free > now {
		backlog := float64(s.free-now) / nsPerByte
		if backlog+float64(size) > float64(queue) {
			return 0, false
		}
		start = s.free
	}
	s.free = start + int64(float64(size)*nsPerByte)
	return s.free, true
}

// lossState is one direction's loss models, owned by the goroutine that
// reads the source host.
type lossState struct {
	bad bool // Gilbert-Elliott state
}

// dropKind says why a segment was dropped.
type dropKind int

const (
	kept dropKind = iota
	dropEgress
	dropLoss
	dropBurst
	dropQueue
	dropIngress
)

// lose draws whether one segment is lost on path p: the random loss first,
// then the bursty model, whose state advances once per segment.
func (l *lossState) lose(p *Path, rng *rand.Rand) dropKind {
	lost := kept
	if p.Loss > 0 && rng.Float64() < p.Loss {
		lost = dropLoss
	}
	if g := p.GE; g != nil && (g.P > 0 || l.bad) {
		pl := g.LossGood
		if l.bad {
			pl = g.LossBad
			if pl == 0 {
				pl = 1
			}
		}
		if lost == kept && pl > 0 && rng.Float64() < pl {
			lost = dropBurst
		}
		if l.bad {
			l.bad = rng.Float64() >= g.R
		} else {
			l.bad = rng.Float64() < g.P
		}
	}
	return lost
}

// jitter is the extra delay of one packet, uniform in [0, JitterMs].
func jitter(p *Path, rng *rand.Rand) int64 {
	if p.JitterMs <= 0 {
		return 0
	}
	return int64(rng.Float64() * p.JitterMs * float64(time.Millisecond))
}

// Clock is the forwarder's time, injected so the delay line can be tested
// without waiting.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// maxNap bounds one nanosleep, so a cancelled context is noticed soon.
const maxNap = 20 * time.Millisecond

// Sleep uses nanosleep rather than a Go timer: the runtime waits for timers
// in epoll with millisecond resolution, which made every hop up to 1 ms
// late (a 20 ms path measured 20.75 ms by ping); nanosleep wakes within
// the thread's timer slack (50 µs). The goroutine's thread blocks in the
// system call meanwhile, which the runtime handles like any blocking call.
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		ts := unix.NsecToTimespec(int64(min(left, maxNap)))
		for unix.Nanosleep(&ts, &ts) == unix.EINTR {
		}
	}
}
