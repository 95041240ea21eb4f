package emul

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

const (
	// MaxChunk is the most a stream passes per reservation. Streams queue
	// on the endpoint's bucket one chunk at a time, so chunks bound how
	// far a stream can run ahead of the others (fairness) and how coarse
	// the pacing is.
	MaxChunk = 64 << 10
	// minChunk keeps slow rates from costing a wake-up per few bytes.
	minChunk = 4 << 10
	// chunkTime sizes chunks at slow rates: a chunk takes about this long
	// at the rate in force, so pacing stays smooth over a second's window.
	chunkTime = 5 * time.Millisecond
	// burst is both buckets' depth: small, so a rate measured over a
	// second or two is the configured one, but two chunks deep, so a
	// stream woken a little late catches up rather than losing the time.
	burst = 2 * MaxChunk
)

var errClosed = errors.New("emul: stream used after Close")

// Shaper is one emulated endpoint. It is safe for concurrent use. All its
// methods accept a nil *Shaper and then shape nothing: Stream returns a
// nil *Stream (whose Wait and Close do nothing), Reader, Writer and
// Listener return their argument's behaviour unchanged, Active returns 0.
// So a caller can hold a nil Shaper for "emulation off", though one that
// must keep a zero-copy path (sendfile) should still test for nil, since
// the Reader and Writer wrappers hide the concrete type.
type Shaper struct {
	cfg   Config
	start time.Time
	agg   *rate.Limiter // the endpoint's bucket; nil when CapacityBps is 0

	mu   sync.Mutex
	n    int     // open streams
	step int     // External steps begun
	frac float64 // fraction of capacity outside traffic takes now
	// limit is the aggregate rate in force (bytes/s); changed is closed,
	// and replaced, when it changes, so that waiting streams re-time
	// their reservations at once.
	limit   float64
	changed chan struct{}
}

// New makes a Shaper for c; its External clock starts now.
func New(c Config) (*Shaper, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.External = append([]Step(nil), c.External...)
	s := &Shaper{cfg: c, start: time.Now(), limit: math.Inf(1), changed: make(chan struct{})}
	if c.CapacityBps > 0 {
		s.agg = rate.NewLimiter(rate.Limit(c.CapacityBps), burst)
		s.mu.Lock()
		s.update(time.Now())
		s.mu.Unlock()
	}
	return s, nil
}

// Clock is the External clock: seconds since the Shaper started, or
// since the moment a Rewind set it to.
func (s *Shaper) Clock() float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.start).Seconds()
}

// Rewind sets the External clock to at seconds, so that the outside
// traffic replays from there. An evaluation that runs several transfers
// against the same stretch of a varying link (the same conditions for
// each policy it compares, rather than adjacent ones) rewinds before
// each. Streams open now are re-timed at once.
func (s *Shaper) Rewind(at float64) {
	if s == nil || !(at >= 0) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.start = now.Add(-time.Duration(at * float64(time.Second)))
	ext := s.cfg.External
	s.step = sort.Search(len(ext), func(i int) bool { return ext[i].At > at })
	s.frac = 0
	if s.step > 0 {
		s.frac = ext[s.step-1].Fraction
	}
	s.update(now)
}

// Config returns the configuration s emulates.
func (s *Shaper) Config() Config {
	if s == nil {
		return Config{}
	}
	c := s.cfg
	c.External = append([]Step(nil), c.External...)
	return c
}

// Active is the number of open streams (Stream called, Close not yet).
func (s *Shaper) Active() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// update brings the aggregate rate up to date with s.n and the External
// step in force at now. s.mu must be held. Reservations made before a
// change keep the times they were given; the waiters holding them re-time
// themselves when changed is closed (see Stream.waitChunk).
func (s *Shaper) update(now time.Time) {
	if s.agg == nil {
		return
	}
	el := now.Sub(s.start).Seconds()
	for s.step < len(s.cfg.External) && s.cfg.External[s.step].At <= el {
		s.frac = s.cfg.External[s.step].Fraction
		s.step++
	}
	l := s.cfg.capacity(s.n, s.frac)
	if l == s.limit {
		return
	}
	s.agg.SetLimitAt(now, rate.Limit(l))
	s.limit = l
	close(s.changed)
	s.changed = make(chan struct{})
}

// Stream opens a data stream: it counts towards the open streams n that
// set the aggregate rate (Knee) until Close, and has its own ConnBps cap.
func (s *Shaper) Stream() *Stream {
	if s == nil {
		return nil
	}
	st := &Stream{s: s}
	if s.cfg.ConnBps > 0 {
		st.conn = rate.NewLimiter(rate.Limit(s.cfg.ConnBps), burst)
	}
	s.mu.Lock()
	s.n++
	s.update(time.Now())
	s.mu.Unlock()
	return st
}

// Stream is one data stream of a Shaper. Its methods are safe for
// concurrent use (concurrent Waits share the stream's cap).
type Stream struct {
	s      *Shaper
	conn   *rate.Limiter // the stream's own bucket; nil when ConnBps is 0
	closed atomic.Bool
}

// Close ends the stream, so it no longer counts towards n. Closing twice
// is harmless; Wait after Close fails.
func (st *Stream) Close() error {
	if st == nil || st.closed.Swap(true) {
		return nil
	}
	s := st.s
	s.mu.Lock()
	s.n--
	s.update(time.Now())
	s.mu.Unlock()
	return nil
}

// Wait blocks until n bytes may pass both the stream's cap and the
// endpoint's aggregate rate, or ctx ends (its error, wrapped, is
// returned). Large n is passed chunk by chunk, each chunk queueing behind
// those the other streams reserved before it.
func (st *Stream) Wait(ctx context.Context, n int) error {
	if st == nil {
		return nil
	}
	for n > 0 {
		if st.closed.Load() {
			return errClosed
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("emul: %w", err)
		}
		k, err := st.waitChunk(ctx, n)
		if err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// chunkSize is the reservation size for a stream whose tightest limit is
// r bytes/s.
func chunkSize(r float64) int {
	if math.IsInf(r, 1) {
		return MaxChunk
	}
	return int(max(minChunk, min(MaxChunk, r*chunkTime.Seconds())))
}

// waitChunk reserves up to want bytes in both buckets and sleeps until
// both allow them. It returns how many bytes it passed.
//
// A rate.Limiter fixes a reservation's time when it is made, at the rate
// then in force; a later SetLimit only times later reservations. So that
// a rate change (a stream opening or closing past the knee, an External
// step) applies at once to streams already waiting, the waiter scales
// what remains of its aggregate wait by old rate / new rate: the
// limiter's debt is paid at the new rate from the change on, and this
// wait's place in that debt is the same.
func (st *Stream) waitChunk(ctx context.Context, want int) (int, error) {
	s := st.s
	s.mu.Lock()
	// Taken under the lock so that reservations are made in time order.
	now := time.Now()
	s.update(now)
	tight := s.limit
	if st.conn != nil {
		tight = math.Min(tight, s.cfg.ConnBps)
	}
	k := min(want, chunkSize(tight))
	lim0, changed, next := s.limit, s.changed, s.nextStepLocked()
	var agg *rate.Reservation
	if s.agg != nil {
		agg = s.agg.ReserveN(now, k)
	}
	s.mu.Unlock()
	var conn *rate.Reservation
	if st.conn != nil {
		conn = st.conn.ReserveN(now, k)
	}
	// k <= burst and the limits are positive, so this cannot happen.
	if (agg != nil && !agg.OK()) || (conn != nil && !conn.OK()) {
		return 0, fmt.Errorf("emul: cannot reserve %d bytes", k)
	}
	aggAt, connAt := now, now
	if agg != nil {
		aggAt = now.Add(agg.DelayFrom(now))
	}
	if conn != nil {
		connAt = now.Add(conn.DelayFrom(now))
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// retime applies what changed the aggregate rate since the
	// reservation: an External step that has begun (steps are applied
	// lazily, by update, so a waiter whose wait spans a step's start must
	// apply it itself: a stream reserving at an outage's rate would
	// otherwise sleep out the outage's rate long after the outage ended),
	// or another stream's update.
	retime := func() {
		s.mu.Lock()
		s.update(time.Now())
		lim1 := s.limit
		changed, next = s.changed, s.nextStepLocked()
		s.mu.Unlock()
		if rem := time.Until(aggAt); rem > 0 && lim1 != lim0 {
			aggAt = time.Now().Add(time.Duration(float64(rem) * lim0 / lim1))
		}
		lim0 = lim1
	}
	for {
		wake := aggAt
		if connAt.After(wake) {
			wake = connAt
		}
		d := time.Until(wake)
		if d <= 0 {
			return k, nil
		}
		atStep := agg != nil && !next.IsZero() && next.Before(wake)
		if atStep {
			d = time.Until(next)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			if atStep {
				retime()
			}
		case <-ctx.Done():
			if agg != nil {
				agg.Cancel()
			}
			if conn != nil {
				conn.Cancel()
			}
			return 0, fmt.Errorf("emul: %w", ctx.Err())
		case <-changed:
			retime()
		}
	}
}

// nextStepLocked is when the next External step begins (zero if none is
// left). s.mu must be held. A microsecond late, so that update, which
// compares seconds, is sure to find it begun.
func (s *Shaper) nextStepLocked() time.Time {
	if s.step >= len(s.cfg.External) {
		return time.Time{}
	}
	return s.start.Add(time.Duration(s.cfg.External[s.step].At*float64(time.Second)) + time.Microsecond)
}
