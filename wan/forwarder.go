package wan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// bigBuf holds the largest read a TUN with TSO gives: a 64 KB GSO packet
// and its virtio header.
const bigBuf = vnetHdrLen + 65536 + 256

// smallBuf is what a small packet (an ACK, a ping) is copied into, so the
// delay line does not hold 64 KB for every ACK in flight.
const smallBuf = 2048

// midBuf holds one segment of a jumbo frame (MTU 9000), what a
// super-packet is cut into on a slow path.
const midBuf = 9216 + vnetHdrLen

// packet is one read from a source TUN on its way to a destination TUN.
type packet struct {
	buf    []byte // virtio header + packet
	shape  shape
	drops  []dropKind // per segment; nil when every segment is kept
	depart int64      // when it leaves the path, ns since start
}

func (p *packet) keptSegments() int {
	if p.drops == nil {
		return p.shape.nsegs
	}
	n := 0
	for _, d := range p.drops {
		if d == kept {
			n++
		}
	}
	return n
}

func (p *packet) drop(i int, why dropKind) {
	if p.drops == nil {
		p.drops = make([]dropKind, p.shape.nsegs)
	}
	p.drops[i] = why
}

func (p *packet) dropped(i int) bool { return p.drops != nil && p.drops[i] != kept }

// LinkCounters count one direction's segments (a super-packet counts as
// the segments it stands for) and wire bytes (headers of every segment
// included). SuperPackets were read as TSO super-packets; Segmented of
// them were cut into smaller packets (segments lost, or spread out on a
// slow path).
type LinkCounters struct {
	Packets      uint64 `json:"packets"`
	Bytes        uint64 `json:"bytes"`
	SuperPackets uint64 `json:"super_packets"`
	Segmented    uint64 `json:"segmented"`
	EgressDrops  uint64 `json:"egress_drops"`
	QueueDrops   uint64 `json:"queue_drops"`
	RandomDrops  uint64 `json:"random_drops"`
	BurstDrops   uint64 `json:"burst_drops"`
	IngressDrops uint64 `json:"ingress_drops"`
	WriteErrors  uint64 `json:"write_errors"`
}

type linkCounters struct {
	packets, bytes, superPackets, segmented                   atomic.Uint64
	egress, queue, random, burst, ingress, writeErrors, write atomic.Uint64
}

func (c *linkCounters) count(why dropKind) {
	switch why {
	case dropEgress:
		c.egress.Add(1)
	case dropQueue:
		c.queue.Add(1)
	case dropLoss:
		c.random.Add(1)
	case dropBurst:
		c.burst.Add(1)
	case dropIngress:
		c.ingress.Add(1)
	}
}

func (c *linkCounters) snapshot() LinkCounters {
	return LinkCounters{
		Packets: c.packets.Load(), Bytes: c.bytes.Load(), SuperPackets: c.superPackets.Load(),
		Segmented: c.segmented.Load(), EgressDrops: c.egress.Load(), QueueDrops: c.queue.Load(),
		RandomDrops: c.random.Load(), BurstDrops: c.burst.Load(), IngressDrops: c.ingress.Load(),
		WriteErrors: c.writeErrors.Load(),
	}
}

// pathState is a direction's parameters as set, with the time its rate
// series started.
type pathState struct {
	Path
	seriesStart int64
}

// link is one direction between two hosts.
type link struct {
	from, to int
	name     string
	params   atomic.Pointer[pathState]
	// Owned by the source host's reader goroutine.
	queue      server
	loss       lossState
	lastDepart int64
	counters   linkCounters
	// The delay line: packets in departure order.
	mu      sync.Mutex
	pending []*packet
	wake    chan struct{}
}

func (l *link) push(p *packet) {
	l.mu.Lock()
	l.pending = append(l.pending, p)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// fhost is one host as the forwarder sees it.
type fhost struct {
	name    string
	tun     io.ReadWriteCloser
	nic     atomic.Pointer[NIC]
	egress  server  // owned by the reader
	departs []int64 // the reader's scratch: per segment departures
	rng     *rand.Rand
	in      struct {
		sync.Mutex
		server
	}
	reads, readBytes, unroutable atomic.Uint64
}

// forwarder moves packets between the hosts' TUN devices.
type forwarder struct {
	clock Clock
	start time.Time
	hosts []*fhost
	links [][]*link // [from][to], nil when there is no link
	order []*link   // status order
	pools struct{ big, mid, small sync.Pool }
}

func newForwarder(p *Profile, tuns []io.ReadWriteCloser, clock Clock, seed uint64) *forwarder {
	if clock == nil {
		clock = realClock{}
	}
	f := &forwarder{clock: clock, start: clock.Now()}
	f.pools.big.New = func() any { b := make([]byte, bigBuf); return &b }
	f.pools.mid.New = func() any { b := make([]byte, midBuf); return &b }
	f.pools.small.New = func() any { b := make([]byte, smallBuf); return &b }
	for i, h := range p.Hosts {
		fh := &fhost{name: h.Name, rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		if i < len(tuns) {
			fh.tun = tuns[i]
		}
		nic := h.NIC
		fh.nic.Store(&nic)
		f.hosts = append(f.hosts, fh)
	}
	f.links = make([][]*link, len(p.Hosts))
	for i := range f.links {
		f.links[i] = make([]*link, len(p.Hosts))
	}
	for i := range p.Hosts {
		for j := range p.Hosts {
			path, ok := p.Paths()[[2]int{i, j}]
			if !ok {
				continue
			}
			l := &link{from: i, to: j, name: p.Hosts[i].Name + ">" + p.Hosts[j].Name, wake: make(chan struct{}, 1)}
			l.params.Store(&pathState{Path: path})
			f.links[i][j] = l
			f.order = append(f.order, l)
		}
	}
	return f
}

func (f *forwarder) now() int64 { return int64(f.clock.Now().Sub(f.start)) }

// run moves packets until ctx ends, then closes the TUN devices.
func (f *forwarder) run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(f.hosts))
	for i := range f.hosts {
		wg.Go(func() {
			if err := f.read(i); err != nil && ctx.Err() == nil {
				errc <- err
			}
		})
	}
	for _, l := range f.order {
		wg.Go(func() { f.deliver(ctx, l) })
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, h := range f.hosts {
		h.tun.Close()
	}
	// The delay lines stop with ctx; a reader's error stops them too.
	if err != nil {
		for _, l := range f.order {
			l.push(nil)
		}
	}
	wg.Wait()
	return err
}

// read moves packets from host i's TUN into the delay lines.
func (f *forwarder) read(i int) error {
	h := f.hosts[i]
	bp := f.pools.big.Get().(*[]byte)
	for {
		buf := *bp
		n, err := h.tun.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("wan: read host %s: %w", h.name, err)
		}
		if n <= vnetHdrLen+20 {
			continue
		}
		h.reads.Add(1)
		h.readBytes.Add(uint64(n - vnetHdrLen))
		pkt := buf[vnetHdrLen:n]
		to := -1
		// Addresses are 198.18.0.(index+1): see Addr.
		if pkt[0]>>4 == 4 && pkt[16] == 198 && pkt[17] == 18 && pkt[18] == 0 && int(pkt[19]) >= 1 && int(pkt[19]) <= len(f.hosts) {
			to = int(pkt[19]) - 1
		}
		if to < 0 || f.links[i][to] == nil {
			h.unroutable.Add(1)
			continue
		}
		p := &packet{shape: shapeOf(parseVnetHdr(buf), pkt)}
		if n <= smallBuf {
			sb := f.pools.small.Get().(*[]byte)
			p.buf = (*sb)[:n]
			copy(p.buf, buf[:n])
		} else {
			p.buf = buf[:n]
			bp = f.pools.big.Get().(*[]byte)
		}
		f.admit(h, f.links[i][to], p, f.now())
	}
}

// chunkSpread bounds how long after a packet's first segment would have
// left the bottleneck its last one may: a super-packet whose segments
// spread further is cut into smaller ones, each delivered when its last
// segment leaves. Forwarding a 64 KB super-packet whole would delay its
// first segment by up to 64 KB at the path's rate (2.6 ms at 200 Mbit/s),
// which a window-limited stream pays every round trip; a quarter of a
// millisecond keeps that small while fast links keep whole super-packets
// (at 2 Gbit/s and more nothing is cut).
const chunkSpread = 250 * time.Microsecond

// admit takes one packet read at now through the source NIC, the loss
// models and the path queue, and puts it on the delay line (cut into
// pieces when segments were lost or spread out, see chunkSpread), or drops
// it.
func (f *forwarder) admit(h *fhost, l *link, p *packet, now int64) {
	ps := l.params.Load()
	nic := h.nic.Load()
	rate := ps.RateAt(float64(now-ps.seriesStart) / 1e9)
	queue := ps.Queue()
	nicQueue := nic.EgressQueueBytes
	if nicQueue == 0 {
		nicQueue = defaultNICQueue
	}
	s := p.shape
	if s.nsegs > 1 {
		l.counters.superPackets.Add(1)
	}
	departs := h.departs[:0]
	first, last := int64(-1), int64(-1)
	for i := 0; i < s.nsegs; i++ {
		departs = append(departs, -1)
		b := s.segBytes(i)
		t1, ok := h.egress.admit(now, b, nic.EgressMbps, nicQueue)
		if !ok {
			p.drop(i, dropEgress)
			continue
		}
		if why := l.loss.lose(&ps.Path, h.rng); why != kept {
			p.drop(i, why)
			continue
		}
		t2, ok := l.queue.admit(t1, b, rate, queue)
		if !ok {
			p.drop(i, dropQueue)
			continue
		}
		departs[i] = t2
		if first < 0 {
			first = t2
		}
		last = t2
	}
	h.departs = departs
	for _, d := range p.drops {
		l.counters.count(d)
	}
	if last < 0 {
		f.free(p)
		return
	}
	if p.drops == nil && time.Duration(last-first) <= chunkSpread {
		f.depart(h, l, ps, p, last)
		return
	}
	// Cut: each run of kept segments whose departures lie within
	// chunkSpread of the run's first becomes a packet of its own.
	l.counters.segmented.Add(1)
	vh := parseVnetHdr(p.buf)
	pkt := p.buf[vnetHdrLen:]
	for i := 0; i < s.nsegs; {
		if departs[i] < 0 {
			i++
			continue
		}
		j := i + 1
		for j < s.nsegs && departs[j] >= 0 && time.Duration(departs[j]-departs[i]) <= chunkSpread {
			j++
		}
		size := vnetHdrLen + s.hdr + min(j*s.mss, s.payload) - i*s.mss
		c := &packet{buf: chunk(pkt, vh, s, i, j, f.alloc(size))}
		c.shape = shape{nsegs: j - i, hdr: s.hdr, mss: s.mss, payload: len(c.buf) - vnetHdrLen - s.hdr}
		f.depart(h, l, ps, c, departs[j-1])
		i = j
	}
	f.free(p)
}

// depart puts p on l's delay line to leave at t (when its last segment
// leaves the bottleneck) plus the path's delay and jitter.
func (f *forwarder) depart(h *fhost, l *link, ps *pathState, p *packet, t int64) {
	t += int64(ps.DelayMs*float64(time.Millisecond)) + jitter(&ps.Path, h.rng)
	// Jitter never reorders: a packet leaves no earlier than the one
	// before it.
	t = max(t, l.lastDepart)
	l.lastDepart = t
	p.depart = t
	l.push(p)
}

func (f *forwarder) free(p *packet) {
	b := p.buf[:cap(p.buf)]
	switch cap(b) {
	case smallBuf:
		f.pools.small.Put(&b)
	case midBuf:
		f.pools.mid.Put(&b)
	case bigBuf:
		f.pools.big.Put(&b)
	}
}

// alloc is a pooled buffer of n bytes.
func (f *forwarder) alloc(n int) []byte {
	switch {
	case n <= smallBuf:
		return (*f.pools.small.Get().(*[]byte))[:n]
	case n <= midBuf:
		return (*f.pools.mid.Get().(*[]byte))[:n]
	}
	return (*f.pools.big.Get().(*[]byte))[:n]
}

// deliver releases link l's packets at their departure times through the
// destination's NIC ingress into its TUN.
func (f *forwarder) deliver(ctx context.Context, l *link) {
	dst := f.hosts[l.to]
	var batch []*packet
	for {
		l.mu.Lock()
		batch, l.pending = l.pending, batch[:0]
		l.mu.Unlock()
		for i, p := range batch {
			if p == nil {
				return
			}
			if wait := time.Duration(p.depart - f.now()); wait > 20*time.Microsecond {
				if f.clock.Sleep(ctx, wait) != nil {
					return
				}
			}
			f.ingress(ctx, dst, l, p)
			batch[i] = nil
		}
		batch = batch[:0]
		l.mu.Lock()
		empty := len(l.pending) == 0
		l.mu.Unlock()
		if empty {
			select {
			case <-ctx.Done():
				return
			case <-l.wake:
			}
		}
	}
}

// ingress serves a packet at the destination NIC (when its ingress is
// limited) and writes what survives to the destination TUN.
func (f *forwarder) ingress(ctx context.Context, dst *fhost, l *link, p *packet) {
	defer f.free(p)
	nic := dst.nic.Load()
	if nic.IngressMbps > 0 {
		q := nic.IngressQueueBytes
		if q == 0 {
			q = defaultNICQueue
		}
		// The packet reached the NIC at its departure from the path,
		// not when this goroutine woke up: a wake-up is late by the
		// timer's slack, and serving from then would leave the NIC
		// idle for that slack once per packet (at 448 Mbit/s, 64 KB
		// packets got 75% of the rate).
		now := min(p.depart, f.now())
		var done int64
		dst.in.Lock()
		for i := 0; i < p.shape.nsegs; i++ {
			if p.dropped(i) {
				continue
			}
			t, ok := dst.in.admit(now, p.shape.segBytes(i), nic.IngressMbps, q)
			if !ok {
				p.drop(i, dropIngress)
				l.counters.count(dropIngress)
				continue
			}
			done = t
		}
		dst.in.Unlock()
		if wait := time.Duration(done - f.now()); wait > 20*time.Microsecond {
			if f.clock.Sleep(ctx, wait) != nil {
				return
			}
		}
	}
	kept := p.keptSegments()
	if kept == 0 {
		return
	}
	if p.drops == nil {
		if _, err := dst.tun.Write(p.buf); err != nil {
			l.counters.writeErrors.Add(1)
			return
		}
		l.counters.packets.Add(uint64(p.shape.nsegs))
		l.counters.bytes.Add(uint64(p.shape.hdr*(p.shape.nsegs-1) + len(p.buf) - vnetHdrLen))
		return
	}
	// Some segments were lost: send the others as the wire would have.
	l.counters.segmented.Add(1)
	err := segment(p.buf[vnetHdrLen:], p.shape, func(i int) bool { return !p.dropped(i) },
		f.alloc,
		func(b []byte) {
			if _, err := dst.tun.Write(b); err != nil {
				l.counters.writeErrors.Add(1)
			} else {
				l.counters.packets.Add(1)
				l.counters.bytes.Add(uint64(len(b) - vnetHdrLen))
			}
			f.free(&packet{buf: b})
		})
	if err != nil {
		l.counters.writeErrors.Add(1)
	}
}
