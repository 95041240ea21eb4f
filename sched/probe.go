package sched

// Endpoints whose capacity nobody configured have a MaxThroughput the world
// learns from what it observes there. Such a maximum is not a capacity:
// an endpoint running at the most it has ever been seen to carry passes
// saturation test (a) by construction, and so does a link whose bandwidth
// has since grown. Without more, nothing then ever asks for more
// concurrency there (the estimator learns a concurrency only by running
// it), and a task started at four connections on a path that later
// triples keeps four.
//
// Peaks is the world's side of the remedy: the learned maximum is the most
// observed over a recent window (so a path that lost bandwidth is known
// to be full at its new rate, not held against an old peak), and while an
// endpoint sits at that maximum, Peaks asks the scheduler to probe upward
// (Endpoint.Probe) every so often. A probe that paid (the maximum rose)
// is followed soon by the next; one that did not doubles the wait before
// the next, so a full path is probed rarely. seal+'s side is in
// increaseCC: at an endpoint that asks for a probe, the saturation test
// gives way for one task, which gets half as many connections again.

// Peaks defaults.
const (
	DefaultPeakWindow = 10.0 // seconds a peak is remembered
	DefaultProbeEvery = 2.0  // seconds between probes that pay
	DefaultProbeMax   = 60.0 // longest wait between probes that do not
	// probeAtMax: an endpoint observed at this fraction of its learned
	// maximum or more is at it.
	probeAtMax = 0.9
	// probePaid: a probe paid if the maximum rose by this factor.
	probePaid = 1.05
)

// Peaks learns endpoints' maximum throughput from observations and says
// when to probe above it. The zero value uses the defaults. Time is the
// world's (seconds); Peaks reads no clock, so the simulator and the live
// service use it alike.
type Peaks struct {
	// Window is how long an observation counts towards the maximum.
	Window float64
	// Every is the wait after a probe that paid; MaxWait bounds the
	// doubled wait after probes that did not.
	Every, MaxWait float64
	eps            map[string]*peakState
}

type peakSample struct{ t, v float64 }

type peakState struct {
	samples []peakSample // within the window, oldest first; values decreasing
	last    float64      // the maximum when the window last held a sample
	// probeAt is when the last probe was asked for (if probed), atProbe
	// the maximum then, wait the time until the next may be.
	probed                 bool
	probeAt, atProbe, wait float64
}

func (p *Peaks) defaults() (window, every, most float64) {
	window, every, most = p.Window, p.Every, p.MaxWait
	if window <= 0 {
		window = DefaultPeakWindow
	}
	if every <= 0 {
		every = DefaultProbeEvery
	}
	if most <= 0 {
		most = DefaultProbeMax
	}
	return window, every, max(most, every)
}

func (p *Peaks) state(name string) *peakState {
	if p.eps == nil {
		p.eps = map[string]*peakState{}
	}
	s := p.eps[name]
	if s == nil {
		s = &peakState{}
		p.eps[name] = s
	}
	return s
}

// Seed makes v the endpoint's maximum until something is observed there
// (for example the best of its stored history, after a restart).
func (p *Peaks) Seed(name string, v float64) {
	if s := p.state(name); v > s.last {
		s.last = v
	}
}

// Max is the endpoint's learned maximum (0 if nothing is known).
func (p *Peaks) Max(name string) float64 {
	if s := p.eps[name]; s != nil {
		return s.current()
	}
	return 0
}

func (s *peakState) current() float64 {
	if len(s.samples) > 0 {
		return s.samples[0].v
	}
	return s.last
}

// Observe records the endpoint's aggregate throughput obs at time now
// (once per scheduling cycle) and returns its learned maximum and whether
// the scheduler should probe above it in this cycle. Idle cycles (obs 0)
// neither lower the maximum nor probe: an idle endpoint says nothing about
// its capacity.
func (p *Peaks) Observe(name string, now, obs float64) (maxThr float64, probe bool) {
	window, every, most := p.defaults()
	s := p.state(name)
	// A monotonic deque: the window's maximum is at the front.
	for len(s.samples) > 0 && now-s.samples[0].t > window {
		s.samples = s.samples[1:]
	}
	if obs > 0 {
		for len(s.samples) > 0 && s.samples[len(s.samples)-1].v <= obs {
			s.samples = s.samples[:len(s.samples)-1]
		}
		s.samples = append(s.samples, peakSample{now, obs})
	}
	maxThr = s.current()
	s.last = maxThr
	if obs <= 0 || maxThr <= 0 || obs < probeAtMax*maxThr {
		return maxThr, false
	}
	if s.probed && now-s.probeAt < s.wait {
		return maxThr, false
	}
	switch {
	case !s.probed || maxThr >= probePaid*s.atProbe:
		s.wait = every
	default:
		s.wait = min(2*s.wait, most)
	}
	s.probed, s.probeAt, s.atProbe = true, now, maxThr
	return maxThr, true
}
