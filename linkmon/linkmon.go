// Package linkmon measures the bandwidth of the links from replicas to a
// destination as time series, as the Network Weather Service does for the
// multi-source planner of Yang, Schopf, Foster, "Improving Parallel Data
// Transfer Times Using Predicted Variances in Shared Networks": at a fixed
// frequency each link gets a sample, passive when a transfer is reading from
// the replica (the bytes it moved in the interval), otherwise from an active
// probe (a small range read). Package multisrc/forecast turns a series into
// the predicted mean and standard deviation of the coming transfer's
// bandwidth.
//
// A Monitor measures from where it runs: probes read through this process,
// so they describe the replica → this host path. That is the destination's
// path when this process is the destination (`sluice cp` to a local
// directory); for a third-party copy between agents it is an
// approximation.
package linkmon

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// Link is one replica: a backend and a file on it to probe.
type Link struct {
	Name    string
	Backend backend.Backend
	Path    string
	Size    int64
}

// Options tunes a Monitor.
type Options struct {
	// Hz is the sampling frequency (default 4).
	Hz float64
	// ProbeBytes is the size of an active probe (default 512 KiB; NWS
	// sends 64 kB, but a probe must outlast what a link lets through at
	// once after idling, a TCP window or a token bucket's burst, which
	// SkipBytes discards).
	ProbeBytes int64
	// SkipBytes of each probe are not timed (default 128 KiB, the burst
	// of the emulated testbed's links): the rate is measured from the
	// moment they have arrived.
	SkipBytes int64
	// Keep is the most samples kept per link (default 4096).
	Keep int
	// Seed chooses the probes' offsets.
	Seed uint64
}

func (o *Options) defaults() {
	if o.Hz <= 0 {
		o.Hz = 4
	}
	if o.ProbeBytes <= 0 {
		o.ProbeBytes = 512 << 10
	}
	if o.SkipBytes < 0 || o.SkipBytes >= o.ProbeBytes {
		o.SkipBytes = 0
	} else if o.SkipBytes == 0 {
		o.SkipBytes = min(128<<10, o.ProbeBytes/4)
	}
	if o.Keep <= 0 {
		o.Keep = 4096
	}
}

// Monitor samples a set of links.
type Monitor struct {
	o     Options
	links []*link
	// paused stops new probes; probing is read-held by every probe, so
	// that Pause can wait for those in flight.
	paused  atomic.Bool
	probing sync.RWMutex
}

// Pause stops the monitor's probes, once those in flight have finished,
// until Resume; passive samples go on. An evaluation pauses it so that
// no probe shares a link with the transfer it times.
func (m *Monitor) Pause() {
	m.paused.Store(true)
	m.probing.Lock()
	m.probing.Unlock() //nolint:staticcheck // an empty section: waits for the probes in flight
}

// Resume lets the monitor probe again.
func (m *Monitor) Resume() { m.paused.Store(false) }

type link struct {
	Link
	active atomic.Int64 // transfer streams reading from it now
	moved  atomic.Int64 // their bytes

	mu      sync.Mutex
	probeN  int64 // this link's probe size: ProbeBytes, grown on fast links
	samples []float64
	latency []float64 // seconds to a probe's first byte
	probes  int
	passive int
	rng     *rand.Rand
}

// New returns a monitor of links; Run samples them.
func New(links []Link, o Options) *Monitor {
	o.defaults()
	m := &Monitor{o: o}
	for i, l := range links {
		m.links = append(m.links, &link{Link: l, rng: rand.New(rand.NewPCG(o.Seed, uint64(i)))})
	}
	return m
}

// Hz is the sampling frequency of the series.
func (m *Monitor) Hz() float64 { return m.o.Hz }

// Run samples every link at the monitor's frequency until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range m.links {
		wg.Go(func() { m.runLink(ctx, l) })
	}
	wg.Wait()
}

// Collect samples for d (a short measurement before a transfer) and
// returns.
func (m *Monitor) Collect(ctx context.Context, d time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m.Run(cctx)
	return ctx.Err()
}

func (m *Monitor) runLink(ctx context.Context, l *link) {
	period := time.Duration(float64(time.Second) / m.o.Hz)
	t := time.NewTicker(period)
	defer t.Stop()
	lastAt, lastMoved := time.Now(), l.moved.Load()
	wasActive := l.active.Load() > 0
	for {
		// A probe now, unless a transfer is reading: then its bytes are
		// the sample.
		if !wasActive && !m.paused.Load() {
			m.probing.RLock()
			if !m.paused.Load() { // Pause may have begun while this waited
				if bps, lat, err := m.probe(ctx, l); err == nil {
					l.add(bps, lat, false, m.o.Keep)
				}
			}
			m.probing.RUnlock()
		}
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			moved, active := l.moved.Load(), l.active.Load() > 0
			if wasActive && active {
				if dt := now.Sub(lastAt).Seconds(); dt > 0 {
					l.add(float64(moved-lastMoved)/dt, -1, true, m.o.Keep)
				}
			}
			lastAt, lastMoved, wasActive = now, moved, active
		}
	}
}

// Probe timing: the timed part of a probe should last between minTimed
// and maxTimed. Faster, and the clock's and the scheduler's granularity
// (or a burst that socket buffers had already taken in) dominates the
// reading, so it is not used and the link's probes double in size (up to
// maxProbe); slower, and they halve, down to ProbeBytes.
const (
	minTimed = 40 * time.Millisecond
	maxTimed = 400 * time.Millisecond
	maxProbe = 16 << 20
)

// probe reads the link's probe size at a random offset and returns the
// rate after the first SkipBytes and the time to the first byte.
func (m *Monitor) probe(ctx context.Context, l *link) (float64, float64, error) {
	l.mu.Lock()
	if l.probeN == 0 {
		l.probeN = m.o.ProbeBytes
	}
	n := min(l.probeN, l.Size)
	l.mu.Unlock()
	if n <= m.o.SkipBytes {
		return 0, 0, fmt.Errorf("linkmon: %s is too small to probe", l.Path)
	}
	l.mu.Lock()
	off := int64(0)
	if l.Size > n {
		off = l.rng.Int64N(l.Size - n + 1)
	}
	l.mu.Unlock()
	start := time.Now()
	rc, err := l.Backend.OpenRange(ctx, l.Path, off, n)
	if err != nil {
		return 0, 0, err
	}
	defer rc.Close()
	buf := make([]byte, 32<<10)
	var got int64
	var first, timed time.Time
	for got < n {
		k, err := rc.Read(buf[:min(int64(len(buf)), n-got)])
		if k > 0 && first.IsZero() {
			first = time.Now()
		}
		got += int64(k)
		if timed.IsZero() && got >= m.o.SkipBytes {
			timed = time.Now()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	el := time.Since(timed)
	if got < n {
		return 0, 0, fmt.Errorf("linkmon: probe of %s read %d of %d bytes", l.Path, got, n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case el < minTimed:
		grown := min(2*l.probeN, maxProbe)
		if grown > l.probeN && grown <= l.Size {
			l.probeN = grown
			return 0, 0, fmt.Errorf("linkmon: probe of %s timed over %v only: probing with %d bytes", l.Path, el, grown)
		}
		if el <= 0 {
			return 0, 0, fmt.Errorf("linkmon: probe of %s took no measurable time", l.Path)
		}
	case el > maxTimed && l.probeN > m.o.ProbeBytes:
		l.probeN = max(m.o.ProbeBytes, l.probeN/2)
	}
	return float64(got-m.o.SkipBytes) / el.Seconds(), first.Sub(start).Seconds(), nil
}

func (l *link) add(bps, latency float64, passive bool, keep int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, bps)
	if len(l.samples) > keep {
		l.samples = slices.Delete(l.samples, 0, len(l.samples)-keep)
	}
	if passive {
		l.passive++
	} else {
		l.probes++
		l.latency = append(l.latency, latency)
		if len(l.latency) > keep {
			l.latency = slices.Delete(l.latency, 0, len(l.latency)-keep)
		}
	}
}

// Series returns a copy of link i's samples (bytes/s), oldest first.
func (m *Monitor) Series(i int) []float64 {
	l := m.links[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.samples)
}

// Latency is the median time to a probe's first byte on link i, seconds
// (0 before any probe): the effective latency of eq. 2.
func (m *Monitor) Latency(i int) float64 {
	l := m.links[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	return medianOf(l.latency)
}

// medianOf is the median of xs (0 if empty), sorting a copy.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// History is what a planner reads of a monitor: each link's series, the
// sampling frequency and the links' latency. A Monitor is one, live; a
// Snapshot is one frozen.
type History interface {
	Series(i int) []float64
	Latency(i int) float64
	Hz() float64
}

// Snapshot is a monitor's history frozen at one moment.
type Snapshot struct {
	hz      float64
	series  [][]float64
	latency [][]float64
}

// Snapshot freezes the monitor's history as it is now: planners given
// the same Snapshot predict the same links.
func (m *Monitor) Snapshot() *Snapshot {
	s := &Snapshot{hz: m.o.Hz}
	for _, l := range m.links {
		l.mu.Lock()
		s.series = append(s.series, slices.Clone(l.samples))
		s.latency = append(s.latency, slices.Clone(l.latency))
		l.mu.Unlock()
	}
	return s
}

// Restore puts back the samples of a Snapshot of this monitor, dropping
// those taken since (the counts of probes and passive samples stay): an
// evaluation that replayed a stretch of its links several times keeps
// one copy of it in the history.
func (m *Monitor) Restore(s *Snapshot) {
	for i, l := range m.links {
		if i >= len(s.series) {
			break
		}
		l.mu.Lock()
		l.samples = slices.Clone(s.series[i])
		l.latency = slices.Clone(s.latency[i])
		l.mu.Unlock()
	}
}

// Series returns a copy of link i's frozen samples (bytes/s), oldest
// first.
func (s *Snapshot) Series(i int) []float64 { return slices.Clone(s.series[i]) }

// Latency is link i's median probe latency when the snapshot was taken.
func (s *Snapshot) Latency(i int) float64 { return medianOf(s.latency[i]) }

// Hz is the sampling frequency of the series.
func (s *Snapshot) Hz() float64 { return s.hz }

// Counts returns how many probes and passive samples link i has.
func (m *Monitor) Counts(i int) (probes, passive int) {
	l := m.links[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probes, l.passive
}

// Observe returns link i's backend as a transfer should use it: the bytes
// it reads become the link's passive samples.
func (m *Monitor) Observe(i int) backend.Backend {
	l := m.links[i]
	b := &observed{Backend: l.Backend, l: l}
	if rc, ok := l.Backend.(backend.RangeChecksummer); ok {
		return &observedSums{observed: b, rc: rc}
	}
	return b
}

// observed counts the bytes and streams of a transfer's range reads.
type observed struct {
	backend.Backend
	l *link
}

func (o *observed) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	rc, err := o.Backend.OpenRange(ctx, p, off, n)
	if err != nil {
		return nil, err
	}
	o.l.active.Add(1)
	return &counting{rc: rc, l: o.l}, nil
}

// observedSums keeps the wrapped backend's range checksums visible.
type observedSums struct {
	*observed
	rc backend.RangeChecksummer
}

func (o *observedSums) ChecksumRange(ctx context.Context, p, algo string, off, n int64) (string, error) {
	return o.rc.ChecksumRange(ctx, p, algo, off, n)
}

type counting struct {
	rc   io.ReadCloser
	l    *link
	once sync.Once
}

func (c *counting) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	c.l.moved.Add(int64(n))
	return n, err
}

func (c *counting) Close() error {
	c.once.Do(func() { c.l.active.Add(-1) })
	return c.rc.Close()
}
