package wan

import (
	"encoding/binary"
	"errors"
)

// virtio_net_hdr (include/uapi/linux/virtio_net.h), the 10 bytes in front
// of every packet on a TUN opened with IFF_VNET_HDR.
const (
	vnetHdrLen = 10

	vnetFlagNeedsCsum = 1

	gsoNone  = 0
	gsoTCPv4 = 1
	gsoUDP   = 3
	gsoTCPv6 = 4
	gsoECN   = 0x80
)

type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16
	csumOffset uint16
}

func parseVnetHdr(b []byte) vnetHdr {
	return vnetHdr{
		flags:      b[0],
		gsoType:    b[1],
		hdrLen:     binary.LittleEndian.Uint16(b[2:]),
		gsoSize:    binary.LittleEndian.Uint16(b[4:]),
		csumStart:  binary.LittleEndian.Uint16(b[6:]),
		csumOffset: binary.LittleEndian.Uint16(b[8:]),
	}
}

// shape is how the wire would carry one packet read from a TUN: nsegs
// segments, each with hdr bytes of IP and TCP header and up to mss bytes of
// payload; payload is the super-packet's total payload.
type shape struct {
	nsegs   int
	hdr     int
	mss     int
	payload int
}

// segBytes is the size on the wire of segment i.
func (s shape) segBytes(i int) int {
	if s.nsegs == 1 {
		return s.hdr + s.payload
	}
	if i < s.nsegs-1 {
		return s.hdr + s.mss
	}
	return s.hdr + s.payload - s.mss*(s.nsegs-1)
}

// shapeOf reads a packet's shape from its virtio header and IPv4 header
// (pkt without the virtio header). A packet that is not a TCPv4
// super-packet is one segment of its own length.
func shapeOf(h vnetHdr, pkt []byte) shape {
	one := shape{nsegs: 1, payload: len(pkt)}
	if h.gsoType&^gsoECN != gsoTCPv4 || h.gsoSize == 0 {
		return one
	}
	hl, ok := tcp4HeaderLen(pkt)
	if !ok || len(pkt) <= hl {
		return one
	}
	payload := len(pkt) - hl
	mss := int(h.gsoSize)
	return shape{nsegs: (payload + mss - 1) / mss, hdr: hl, mss: mss, payload: payload}
}

// tcp4HeaderLen is the IPv4 plus TCP header length of pkt.
func tcp4HeaderLen(pkt []byte) (int, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != 6 {
		return 0, false
	}
	ihl := int(pkt[0]&0xf) * 4
	if ihl < 20 || len(pkt) < ihl+20 {
		return 0, false
	}
	doff := int(pkt[ihl+12]>>4) * 4
	if doff < 20 || len(pkt) < ihl+doff {
		return 0, false
	}
	return ihl + doff, true
}

var errNotTCP4 = errors.New("wan: not a TCPv4 super-packet")

// segment cuts a TCPv4 super-packet (pkt without the virtio header) into
// the segments the sender's NIC would have sent, as TSO does: each gets a
// copy of the headers, its sequence number, an IP id one above the last,
// FIN and PSH only on the last, CWR only on the first, and full IP and TCP
// checksums (the kernel then needs no offload hint). keep says which
// segments to build; emit is called for each with a virtio header of zeros
// in front (ownership of the buffer passes to emit).
func segment(pkt []byte, s shape, keep func(int) bool, alloc func(int) []byte, emit func([]byte)) error {
	hl, ok := tcp4HeaderLen(pkt)
	if !ok || s.nsegs < 1 || hl != s.hdr {
		return errNotTCP4
	}
	ihl := int(pkt[0]&0xf) * 4
	id := binary.BigEndian.Uint16(pkt[4:])
	seq := binary.BigEndian.Uint32(pkt[ihl+4:])
	flags := pkt[ihl+13]
	for i := 0; i < s.nsegs; i++ {
		if !keep(i) {
			continue
		}
		off := hl + i*s.mss
		end := min(off+s.mss, len(pkt))
		n := hl + end - off
		b := alloc(vnetHdrLen + n)[:vnetHdrLen+n]
		clear(b[:vnetHdrLen])
		seg := b[vnetHdrLen:]
		copy(seg, pkt[:hl])
		copy(seg[hl:], pkt[off:end])
		binary.BigEndian.PutUint16(seg[2:], uint16(n))
		binary.BigEndian.PutUint16(seg[4:], id+uint16(i))
		binary.BigEndian.PutUint16(seg[10:], 0)
		binary.BigEndian.PutUint16(seg[10:], ^checksum(seg[:ihl], 0))
		tcp := seg[ihl:]
		binary.BigEndian.PutUint32(tcp[4:], seq+uint32(i*s.mss))
		f := flags
		if i != s.nsegs-1 {
			f &^= 0x01 | 0x08 // FIN, PSH
		}
		if i != 0 {
			f &^= 0x80 // CWR
		}
		tcp[13] = f
		binary.BigEndian.PutUint16(tcp[16:], 0)
		// The pseudo-header: source, destination, protocol, TCP length.
		var ph [12]byte
		copy(ph[:8], seg[12:20])
		ph[9] = 6
		binary.BigEndian.PutUint16(ph[10:], uint16(len(tcp)))
		binary.BigEndian.PutUint16(tcp[16:], ^checksum(tcp, checksum(ph[:], 0)))
		emit(b)
	}
	return nil
}

// checksum is the Internet checksum's folded one's-complement sum of b
// added to initial (not yet inverted).
func checksum(b []byte, initial uint16) uint16 {
	sum := uint64(initial)
	for len(b) >= 8 {
		sum += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		sum += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return uint16(sum)
}

// chunk builds segments [i, j) of a TCPv4 super-packet (pkt without the
// virtio header, read with virtio header h) as one packet into b (which
// must hold vnetHdrLen+hdr+payload bytes) and returns it: a smaller
// super-packet when j-i > 1, which the kernel takes as it took the whole.
// The IP length, id and checksum, the sequence number and the flags are
// those TSO would give; the TCP checksum is left to the offload as in the
// original (the pseudo-header sum for this length) when the original asked
// for it, and computed in full otherwise.
func chunk(pkt []byte, h vnetHdr, s shape, i, j int, b []byte) []byte {
	ihl := int(pkt[0]&0xf) * 4
	hl := s.hdr
	off := hl + i*s.mss
	end := min(hl+j*s.mss, len(pkt))
	n := hl + end - off
	b = b[:vnetHdrLen+n]
	v := b[:vnetHdrLen]
	v[0], v[1] = h.flags, h.gsoType
	binary.LittleEndian.PutUint16(v[2:], h.hdrLen)
	binary.LittleEndian.PutUint16(v[4:], h.gsoSize)
	binary.LittleEndian.PutUint16(v[6:], h.csumStart)
	binary.LittleEndian.PutUint16(v[8:], h.csumOffset)
	if j-i == 1 {
		v[1] = gsoNone
		binary.LittleEndian.PutUint16(v[4:], 0)
	}
	seg := b[vnetHdrLen:]
	copy(seg, pkt[:hl])
	copy(seg[hl:], pkt[off:end])
	binary.BigEndian.PutUint16(seg[2:], uint16(n))
	binary.BigEndian.PutUint16(seg[4:], binary.BigEndian.Uint16(pkt[4:])+uint16(i))
	binary.BigEndian.PutUint16(seg[10:], 0)
	binary.BigEndian.PutUint16(seg[10:], ^checksum(seg[:ihl], 0))
	tcp := seg[ihl:]
	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(pkt[ihl+4:])+uint32(i*s.mss))
	f := pkt[ihl+13]
	if j != s.nsegs {
		f &^= 0x01 | 0x08 // FIN, PSH
	}
	if i != 0 {
		f &^= 0x80 // CWR
	}
	tcp[13] = f
	var ph [12]byte
	copy(ph[:8], seg[12:20])
	ph[9] = 6
	binary.BigEndian.PutUint16(ph[10:], uint16(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:], 0)
	if h.flags&vnetFlagNeedsCsum != 0 {
		binary.BigEndian.PutUint16(tcp[16:], checksum(ph[:], 0))
	} else {
		binary.BigEndian.PutUint16(tcp[16:], ^checksum(tcp, checksum(ph[:], 0)))
	}
	return b
}
