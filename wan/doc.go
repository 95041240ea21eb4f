// Package wan owns the emulated wide-area network: host network
// namespaces, their TUN devices and the user-space forwarder that joins
// them. Unlike package emul, which shapes a stream's bytes with token
// buckets inside the agent (the simulator's own formulas), wan carries the
// kernel's own TCP between hosts: real windows, slow start, loss recovery
// and congestion control meet a path with a round-trip time, a rate, a
// drop-tail queue and loss, so that parallel streams, pipelining and
// buffer tuning pay off (or not) as they do on a real WAN.
//
// A Profile names hosts and links. Up makes one network namespace per
// host (named Options.Prefix + host, under /run/netns so that
// `ip netns exec` works, with /etc/netns/NS/hosts naming every host), a
// TUN device "wan0" in each with the host's address in 198.18.0.0/15
// (the range reserved for benchmarks) and the host's TCP settings, and
// starts the forwarder, in-process or as a detached process (the CLI's
// `sluice net up`). Net.Command runs a program inside a host, Net.Status
// reads the counters and Net.Set changes a parameter while traffic flows.
// A process that plays several hosts (the emulated testbed) opens their
// sockets in place: Net.Listen and Net.DialFrom make a socket inside a
// host's namespace, Net.DialInto reaches a host's address from outside.
//
// The forwarder reads each host's TUN with IFF_VNET_HDR and TSO enabled,
// so one read returns a TCP super-packet of up to 64 KB with a
// virtio_net_hdr describing its segmentation (gso_size). It accounts for
// such a packet as the nsegs = ceil(payload/gso_size) segments the wire
// would carry: rate and queue occupancy count every segment's headers,
// and loss is drawn per segment. Usually it passes the super-packet
// through unchanged, in one write. When a drop (random loss, the bursty
// loss model, a full queue) hits some of its segments, or its segments
// would leave the bottleneck more than chunkSpread (250 µs) apart (a slow
// path, where forwarding 64 KB whole would delay its first segment
// noticeably), the forwarder cuts it in user space into runs of surviving
// segments with the headers TSO would have made, each delivered when its
// last segment leaves, and counts each lost segment: the receiver sees the
// holes and the spacing a router would have made. Each directed host pair
// has one delay line (one goroutine), so nothing is reordered.
//
// Per direction of each host pair a packet passes, in order: the source
// host's NIC egress (rate and queue shared by all its flows), the path
// (random and Gilbert-Elliott loss, a drop-tail queue in bytes drained at
// the path rate, which may follow a time series, then the one-way delay
// plus jitter that never reorders), and the destination host's NIC
// ingress (shared by all flows into it). Times are virtual (computed when
// a packet is read) except the ingress, which is served when packets
// arrive, in arrival order.
//
// State of a network lives in Options.StateDir (/run/sluice-net): a state
// file naming the forwarder's pid and the namespaces, and the forwarder's
// control socket. A killed forwarder's TUN devices vanish with it; Up
// removes its namespaces, state and any leftovers carrying the prefix
// before it builds anew.
package wan
