package dataset

import (
	"fmt"
	"math"
)

// Tuner decides how many streams a running transfer keeps open, from the
// throughput it measures window by window, without stopping the transfer:
// the live counterpart of the planners, which move one chunk at a time and
// pay a ramp-up and a drained tail for every sample. On a path with a
// round trip to speak of, those ramps are what a short dataset spends its
// time on (with a 50 ms RTT a new TCP connection needs 6-8 round trips of
// slow start to fill a 1 Gb/s share), so the transfer keeps running while
// the level moves.
//
// The caller measures the throughput of each window (bytes delivered over
// the window's length, a window long enough for several round trips) and
// reports it with Observe; Level is the number of streams to run in the
// next window. Tuners are pure, like the planners: no clock, no I/O.
type Tuner interface {
	Level() int
	Observe(bytesPerSec float64)
}

// HillParams configures Hill. The zero value of a field takes its default.
type HillParams struct {
	Start, Min, Max int
	// Gain is the relative rise of throughput a higher level must show
	// to be kept (default 0.1): below it, more streams only share the
	// same bottleneck and cost the others on the path.
	Gain float64
	// Settle is how many windows after a change are not judged (default
	// 1): new connections are still in slow start, stopped ones still
	// drain.
	Settle int
	// ProbeEvery is how many windows a settled level holds before it
	// tries a higher one (default 4): a path whose bandwidth rose is only
	// seen by asking for more. After a probe that gains nothing the wait
	// doubles, up to ProbeMax windows (default 4·ProbeEvery), and it is
	// back to ProbeEvery when the throughput moves by more than Shift.
	ProbeEvery, ProbeMax int
	// Shift is the relative change of a settled level's throughput that
	// means the path changed (default 0.25).
	Shift float64
}

func (p HillParams) withDefaults() (HillParams, error) {
	if p.Min == 0 {
		p.Min = 1
	}
	if p.Max == 0 {
		p.Max = 64
	}
	if p.Start == 0 {
		p.Start = min(max(4, p.Min), p.Max)
	}
	if p.Gain == 0 {
		p.Gain = 0.1
	}
	if p.Settle == 0 {
		p.Settle = 1
	}
	if p.ProbeEvery == 0 {
		p.ProbeEvery = 4
	}
	if p.ProbeMax == 0 {
		p.ProbeMax = 4 * p.ProbeEvery
	}
	if p.Shift == 0 {
		p.Shift = 0.25
	}
	switch {
	case p.Min < 1 || p.Max < p.Min || p.Start < p.Min || p.Start > p.Max:
		return p, fmt.Errorf("%w: hill levels: want 1 <= min %d <= start %d <= max %d", ErrInvalid, p.Min, p.Start, p.Max)
	case !(p.Gain > 0 && p.Gain < 10) || !(p.Shift > 0 && p.Shift < 1):
		return p, fmt.Errorf("%w: hill gain %v (want (0, 10)) or shift %v (want (0, 1))", ErrInvalid, p.Gain, p.Shift)
	case p.Settle < 0 || p.ProbeEvery < 1 || p.ProbeMax < p.ProbeEvery:
		return p, fmt.Errorf("%w: hill settle %d, probe every %d, probe max %d", ErrInvalid, p.Settle, p.ProbeEvery, p.ProbeMax)
	}
	return p, nil
}

// hillState is what Hill is doing.
type hillState int

const (
	hillRamp  hillState = iota // doubling while each doubling gains
	hillHold                   // at the chosen level, watching
	hillProbe                  // trying a higher level once
)

// Hill is a Tuner that climbs: from Start it doubles the level while each
// doubling raises the throughput by Gain (slow start for streams, as
// Adaptive_CC of Yildirim's SC'13 client doubles concurrency, but on a
// running transfer), then holds: at the last doubling if it lowered the
// throughput by less than Gain/2, else at the level before it. Holding, it probes half as
// many streams again every ProbeEvery windows and keeps them if they gain,
// climbing on from there; that is how it finds a path whose bandwidth
// rose. When the bandwidth falls, the throughput of the held level falls
// with it and more streams would not help: Hill keeps the level, takes the
// lower throughput as its new reference and probes soon, which also finds
// a level that a changed path now needs.
type Hill struct {
	prm   HillParams
	state hillState
	level int
	// skip is the windows still to settle before the next judgement.
	skip int
	// prevLevel and prevThr are the level before the current one in a
	// ramp or probe, and the throughput it gave.
	prevLevel int
	prevThr   float64
	// base is the held level's throughput (a mean of its last windows).
	base float64
	// held counts the windows held since the last probe; wait is the
	// windows to hold before the next one.
	held, wait int
}

// NewHill returns a Hill tuner.
func NewHill(prm HillParams) (*Hill, error) {
	prm, err := prm.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Hill{prm: prm, level: prm.Start, skip: prm.Settle, wait: prm.ProbeEvery}, nil
}

// Max is the highest level h asks for.
func (h *Hill) Max() int { return h.prm.Max }

// Level is the number of streams to run now.
func (h *Hill) Level() int { return h.level }

// Probing reports whether the current level is a trial (a ramp's or a
// probe's) rather than a settled one.
func (h *Hill) Probing() bool { return h.state != hillHold }

// set moves to level n, with the windows of settling that a change needs.
func (h *Hill) set(n int) {
	if n != h.level {
		h.skip = h.prm.Settle
	}
	h.level = n
}

// up is the next level above the current one: double in a ramp, half
// again in a probe, at least one more, at most Max.
func (h *Hill) up(factor float64) int {
	return min(h.prm.Max, max(h.level+1, int(math.Ceil(float64(h.level)*factor))))
}

// Observe takes the throughput of the window just ended at Level().
func (h *Hill) Observe(bytesPerSec float64) {
	thr := throughput(bytesPerSec)
	if h.skip > 0 {
		h.skip--
		return
	}
	switch h.state {
	case hillRamp:
		if h.prevThr == 0 || thr > h.prevThr*(1+h.prm.Gain) {
			h.climb(thr)
			return
		}
		if thr >= h.prevThr*(1-h.prm.Gain/2) {
			// The doubling did not pay, but cost next to nothing
			// either (less than half of Gain, about the noise of a
			// window): it is kept. Going back is not free on a loss-based TCP: the
			// streams left have the windows they had while sharing the
			// path with twice as many, and grow them in congestion
			// avoidance, for seconds (on the emulated 1 Gb/s, 50 ms
			// path, 16 partial transfers moved 122-125 MB/s before a
			// doubling to 32 and 96-104 MB/s for the 4 s after coming
			// back to 16).
			h.hold(thr)
			return
		}
		// The doubling cost throughput: back to the level before it.
		h.set(h.prevLevel)
		h.hold(h.prevThr)
	case hillProbe:
		if thr > h.prevThr*(1+h.prm.Gain) {
			// The path has room for more: climb on from here.
			h.state = hillRamp
			h.wait = h.prm.ProbeEvery
			h.climb(thr)
			return
		}
		h.set(h.prevLevel)
		h.hold(h.prevThr)
		h.wait = min(h.prm.ProbeMax, 2*h.wait)
	case hillHold:
		h.held++
		if thr < h.base*(1-h.prm.Shift) || thr > h.base*(1+h.prm.Shift) {
			// The path changed: this is the level's throughput now, and
			// it is time to look around again.
			h.base = thr
			h.wait = h.prm.ProbeEvery
			h.held = min(h.held, h.wait-1)
		} else {
			h.base = 0.75*h.base + 0.25*thr
		}
		if h.held >= h.wait && h.level < h.prm.Max {
			h.state = hillProbe
			h.prevLevel, h.prevThr = h.level, h.base
			h.set(h.up(1.5))
		}
	}
}

// climb doubles the level from one that gave thr, or holds it at Max.
func (h *Hill) climb(thr float64) {
	if h.level == h.prm.Max {
		h.hold(thr)
		return
	}
	h.prevLevel, h.prevThr = h.level, thr
	h.set(h.up(2))
}

// hold settles at the current level with throughput thr.
func (h *Hill) hold(thr float64) {
	h.state = hillHold
	h.base = thr
	h.held = 0
}
