package wan

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServerQueueDropsTail(t *testing.T) {
	// 8 Mbit/s is one byte per microsecond: a 1000-byte queue holds a
	// millisecond.
	var s server
	const rate, queue = 8, 1000
	var departs []int64
	drops := 0
	for i := 0; i < 5; i++ {
		d, ok := s.admit(0, 400, rate, queue)
		if !ok {
			drops++
			continue
		}
		departs = append(departs, d)
	}
	if drops != 3 || len(departs) != 2 || departs[0] != 400_000 || departs[1] != 800_000 {
		t.Fatalf("5 packets of 400 B at once into a 1000 B queue: departs %v, %d drops; want 400 µs, 800 µs and 3 drops", departs, drops)
	}
	// Once drained, the queue takes packets again, served from arrival.
	if d, ok := s.admit(2_000_000, 400, rate, queue); !ok || d != 2_400_000 {
		t.Fatalf("after draining: %v %v, want 2.4 ms", d, ok)
	}
	// Unlimited: no delay, no drop.
	if d, ok := s.admit(7, 1<<30, 0, 0); !ok || d != 7 {
		t.Fatalf("unlimited rate: %v %v", d, ok)
	}
}

func TestGilbertElliottLossAndBursts(t *testing.T) {
	p := Path{GE: &GilbertElliott{P: 0.01, R: 0.25}}
	rng := rand.New(rand.NewPCG(1, 2))
	var l lossState
	const n = 400_000
	lost, bursts, run := 0, 0, 0
	for range n {
		if l.lose(&p, rng) == dropBurst {
			lost++
			run++
			continue
		}
		if run > 0 {
			bursts++
			run = 0
		}
	}
	want := p.GE.MeanLoss() // 0.01/0.26
	rate := float64(lost) / n
	if math.Abs(rate-want) > 0.1*want {
		t.Errorf("Gilbert-Elliott loss %.4f, want %.4f ± 10%%", rate, want)
	}
	if mean := float64(lost) / float64(bursts); math.Abs(mean-4) > 0.4 {
		t.Errorf("mean burst %.2f segments, want 1/R = 4 ± 10%%", mean)
	}
	// Random loss alone.
	p = Path{Loss: 0.02}
	lost = 0
	for range n {
		if l.lose(&p, rng) == dropLoss {
			lost++
		}
	}
	if rate := float64(lost) / n; math.Abs(rate-0.02) > 4*math.Sqrt(0.02*0.98/n) {
		t.Errorf("random loss %.4f, want 0.02", rate)
	}
}

// tcpSuper builds an IPv4/TCP super-packet with payload bytes of data.
func tcpSuper(payload int, flags byte) []byte {
	pkt := make([]byte, 20+32+payload)
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	binary.BigEndian.PutUint16(pkt[4:], 100)
	pkt[8], pkt[9] = 64, 6
	copy(pkt[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	tcp := pkt[20:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 1_000_000)
	tcp[12] = 8 << 4 // 32-byte header (timestamps)
	tcp[13] = flags
	for i := range payload {
		pkt[52+i] = byte(i * 7)
	}
	return pkt
}

func TestSegmentBuildsValidSegments(t *testing.T) {
	const mss = 1000
	pkt := tcpSuper(3500, 0x18|0x01|0x80) // ACK PSH FIN CWR
	s := shapeOf(vnetHdr{gsoType: gsoTCPv4, gsoSize: mss}, pkt)
	if s.nsegs != 4 || s.hdr != 52 || s.segBytes(0) != 1052 || s.segBytes(3) != 552 {
		t.Fatalf("shape %+v: want 4 segments of 52-byte headers, the last 500 bytes of payload", s)
	}
	var segs [][]byte
	err := segment(pkt, s, func(i int) bool { return i != 1 }, func(n int) []byte { return make([]byte, n) },
		func(b []byte) { segs = append(segs, b) })
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 {
		t.Fatalf("%d segments, want 3 (segment 1 dropped)", len(segs))
	}
	for k, i := range []int{0, 2, 3} {
		b := segs[k]
		if !allZero(b[:vnetHdrLen]) {
			t.Errorf("segment %d: virtio header %v, want zeros (no offload left)", i, b[:vnetHdrLen])
		}
		seg := b[vnetHdrLen:]
		if got := int(binary.BigEndian.Uint16(seg[2:])); got != len(seg) || got != s.segBytes(i) {
			t.Errorf("segment %d: IP length %d, segment %d bytes, want %d", i, got, len(seg), s.segBytes(i))
		}
		if checksum(seg[:20], 0) != 0xffff {
			t.Errorf("segment %d: bad IP checksum", i)
		}
		var ph [12]byte
		copy(ph[:8], seg[12:20])
		ph[9] = 6
		binary.BigEndian.PutUint16(ph[10:], uint16(len(seg)-20))
		if checksum(seg[20:], checksum(ph[:], 0)) != 0xffff {
			t.Errorf("segment %d: bad TCP checksum", i)
		}
		if seq := binary.BigEndian.Uint32(seg[24:]); seq != 1_000_000+uint32(i*mss) {
			t.Errorf("segment %d: seq %d", i, seq)
		}
		if id := binary.BigEndian.Uint16(seg[4:]); id != 100+uint16(i) {
			t.Errorf("segment %d: IP id %d", i, id)
		}
		want := byte(0x10)
		if i == 3 {
			want |= 0x08 | 0x01
		}
		if i == 0 {
			want |= 0x80
		}
		if seg[33] != want {
			t.Errorf("segment %d: flags %#x, want %#x", i, seg[33], want)
		}
		if string(seg[52:]) != string(pkt[52+i*mss:52+min((i+1)*mss, 3500)]) {
			t.Errorf("segment %d: payload is not bytes %d.. of the super-packet", i, i*mss)
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// fakeClock is a clock that advances only when slept on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return ctx.Err()
}

func TestJitterNeverReorders(t *testing.T) {
	p := &Profile{Name: "j", Hosts: []Host{{Name: "a"}, {Name: "b"}},
		Links: []LinkSpec{{Hosts: []string{"a", "b"}, Path: Path{RateMbps: 1000, DelayMs: 10, JitterMs: 5}}}}
	f := newForwarder(p, nil, &fakeClock{t: time.Unix(0, 0)}, 3)
	l := f.links[0][1]
	for i := range 2000 {
		pkt := &packet{buf: make([]byte, smallBuf)[:100], shape: shape{nsegs: 1, payload: 90}}
		f.admit(f.hosts[0], l, pkt, int64(i)*10_000) // one every 10 µs
	}
	spread := int64(0)
	for i := 1; i < len(l.pending); i++ {
		if l.pending[i].depart < l.pending[i-1].depart {
			t.Fatalf("packet %d leaves at %d, before packet %d at %d", i, l.pending[i].depart, i-1, l.pending[i-1].depart)
		}
		d := l.pending[i].depart - int64(i)*10_000
		spread = max(spread, d)
		if d < 10_000_000 {
			t.Fatalf("packet %d delayed %d ns, less than the 10 ms path delay", i, d)
		}
	}
	if spread < 13_000_000 {
		t.Errorf("largest delay %v: jitter of up to 5 ms did not show", time.Duration(spread))
	}
}

func TestSuperPacketCountsSegments(t *testing.T) {
	// A 4-segment super-packet through a queue with room for two: the
	// first two segments go on, the other two are counted as queue drops.
	// At 8 Mbit/s (a byte a microsecond) a 1052-byte segment takes longer
	// than chunkSpread, so each goes on as a packet of its own, leaving
	// when its last byte leaves the bottleneck.
	p := &Profile{Name: "s", Hosts: []Host{{Name: "a"}, {Name: "b"}},
		Links: []LinkSpec{{Hosts: []string{"a", "b"}, Path: Path{RateMbps: 8, QueueBytes: 2200}}}}
	f := newForwarder(p, nil, &fakeClock{t: time.Unix(0, 0)}, 1)
	l := f.links[0][1]
	pkt := tcpSuper(4000, 0x10)
	vh := vnetHdr{flags: vnetFlagNeedsCsum, gsoType: gsoTCPv4, gsoSize: 1000, hdrLen: 52, csumStart: 20, csumOffset: 16}
	buf := append(make([]byte, vnetHdrLen), pkt...)
	buf[0], buf[1], buf[4] = vh.flags, vh.gsoType, 0xe8 // gso_size 1000 = 0x3e8
	buf[5] = 0x03
	f.admit(f.hosts[0], l, &packet{buf: buf, shape: shapeOf(vh, pkt)}, 0)
	if len(l.pending) != 2 || l.counters.queue.Load() != 2 {
		t.Fatalf("%d packets queued, %d queue drops; want 2 and 2", len(l.pending), l.counters.queue.Load())
	}
	for i, q := range l.pending {
		seg := q.buf[vnetHdrLen:]
		if q.shape.nsegs != 1 || len(seg) != 1052 || q.buf[1] != gsoNone || q.buf[0] != vnetFlagNeedsCsum {
			t.Errorf("piece %d: %d segments, %d bytes, gso type %d, flags %d; want one 1052-byte segment, no GSO, checksum offload kept",
				i, q.shape.nsegs, len(seg), q.buf[1], q.buf[0])
		}
		if seq := binary.BigEndian.Uint32(seg[24:]); seq != 1_000_000+uint32(i*1000) {
			t.Errorf("piece %d: seq %d", i, seq)
		}
		if want := int64(i+1) * 1052_000; q.depart != want {
			t.Errorf("piece %d departs at %d ns, want %d", i, q.depart, want)
		}
	}

	// On a fast path the same super-packet goes on whole.
	p.Links[0].Path = Path{RateMbps: 10000}
	f = newForwarder(p, nil, &fakeClock{t: time.Unix(0, 0)}, 1)
	l = f.links[0][1]
	f.admit(f.hosts[0], l, &packet{buf: buf, shape: shapeOf(vh, pkt)}, 0)
	if len(l.pending) != 1 || l.pending[0].shape.nsegs != 4 || &l.pending[0].buf[0] != &buf[0] {
		t.Errorf("at 10 Gbit/s: %d packets; want the super-packet passed through whole", len(l.pending))
	}
}

func TestShippedProfiles(t *testing.T) {
	for _, name := range []string{"wan-tuned", "wan-untuned", "intercontinental", "campus", "sc15"} {
		p, err := LoadProfile(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name != "sc15" && (p.Hosts[0].Name != "a" || p.Hosts[1].Name != "b") {
			t.Errorf("%s: hosts %s, %s; want a and b", name, p.Hosts[0].Name, p.Hosts[1].Name)
		}
	}
	p, _ := LoadProfile("wan-untuned")
	if rtt := 2 * p.Links[0].DelayMs; rtt != 50 || p.Links[0].RateMbps != 1000 || p.Hosts[0].RmemMax > 2<<20 {
		t.Errorf("wan-untuned: %v ms, %v Mbit/s, rmem %d", rtt, p.Links[0].RateMbps, p.Hosts[0].RmemMax)
	}
	sc, _ := LoadProfile("sc15")
	ratio := []float64{9.2, 8, 7, 4, 2.5, 2}
	for i, h := range sc.Hosts {
		if got := h.NIC.EgressMbps / sc.Hosts[0].NIC.EgressMbps; math.Abs(got-ratio[i]/9.2) > 0.01 {
			t.Errorf("sc15 %s: NIC %.0f Mbit/s, ratio %.3f, want %.3f", h.Name, h.NIC.EgressMbps, got, ratio[i]/9.2)
		}
	}
}

func TestProfileErrors(t *testing.T) {
	dir := t.TempDir()
	series := filepath.Join(dir, "s.txt")
	if err := os.WriteFile(series, []byte("# t mbps\n0 100\n1.5 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("0 100\n0 50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := `"hosts": [{"name": "a"}, {"name": "b"}]`
	for _, c := range []struct{ json, err string }{
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "b"], "rate_mbps": 10, "series_file": "s.txt"}]}`, ""},
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "b"], "series_file": "bad.txt"}]}`, "times must increase"},
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "c"]}]}`, "two different hosts"},
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "b"]}, {"from": "a", "to": "b"}]}`, "given twice"},
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "b"], "loss": 1.5}]}`, "loss"},
		{`{"name": "x", ` + hosts + `, "links": [{"hosts": ["a", "b"], "rate": 5}]}`, "unknown field"},
		{`{"name": "x", "hosts": [{"name": "a"}, {"name": "A"}], "links": []}`, "host name"},
		{`{"name": "x", "hosts": [{"name": "a", "cc": "vegas"}, {"name": "b"}], "links": [{"hosts": ["a", "b"]}]}`, "congestion control"},
		{`{"name": "x", ` + hosts + `, "links": []}`, "no links"},
	} {
		p, err := ParseProfile([]byte(c.json), dir)
		if c.err == "" {
			if err != nil || len(p.Links[0].Series) != 2 || p.Links[0].RateAt(2) != 50 || p.Links[0].RateAt(0.5) != 100 {
				t.Errorf("%s: %v", c.json, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one saying %q", c.json, err, c.err)
		}
	}
	if _, err := LoadProfile("no-such-profile"); err == nil || !strings.Contains(err.Error(), "wan-untuned") {
		t.Errorf("unknown profile: %v, want the shipped names listed", err)
	}
}

func TestSetChecksTargetsAndValues(t *testing.T) {
	p := &Profile{Name: "s", Hosts: []Host{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		Links: []LinkSpec{{Hosts: []string{"a", "b"}, Path: Path{RateMbps: 100, DelayMs: 5}}, {From: "a", To: "c"}}}
	f := newForwarder(p, nil, &fakeClock{t: time.Unix(0, 0)}, 1)
	if err := f.set("a-b", Update{RateMbps: ptr(50.0), Loss: ptr(0.001)}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*link{f.links[0][1], f.links[1][0]} {
		if ps := l.params.Load(); ps.RateMbps != 50 || ps.Loss != 0.001 || ps.DelayMs != 5 {
			t.Errorf("%s after set: %+v", l.name, ps.Path)
		}
	}
	if err := f.set("b", Update{EgressMbps: ptr(20.0), IngressQueue: ptr(1 << 20)}); err != nil ||
		f.hosts[1].nic.Load().EgressMbps != 20 || f.hosts[1].nic.Load().IngressQueueBytes != 1<<20 {
		t.Errorf("set host b's NIC: %v", err)
	}
	for _, c := range []struct {
		target string
		u      Update
	}{
		{"a-c", Update{RateMbps: ptr(1.0)}}, // one direction only
		{"b>c", Update{RateMbps: ptr(1.0)}},
		{"a>b", Update{Loss: ptr(2.0)}},
		{"b", Update{EgressQueue: ptr(-1)}},
		{"a>b", Update{EgressMbps: ptr(2.0)}},
		{"a", Update{DelayMs: ptr(2.0)}},
		{"z", Update{EgressMbps: ptr(2.0)}},
		{"a>b", Update{}},
	} {
		if err := f.set(c.target, c.u); err == nil {
			t.Errorf("set %s %+v: no error", c.target, c.u)
		}
	}
	if ps := f.links[0][1].params.Load(); ps.Loss != 0.001 {
		t.Errorf("a refused set changed the link: loss %v", ps.Loss)
	}
}
