// Package emul emulates the data path of a wide-area data transfer node
// (DTN) on one machine, so that a testbed of several sluice agents on
// localhost behaves like endpoints on a WAN. It is a test facility: it
// only ever slows data down, and nothing in a production deployment
// should configure it (sluice agent --emulate FILE).
//
// An endpoint is emulated by a Shaper built from a Config. Every data
// stream through the endpoint (one request's body, one pull) is a Stream,
// and each byte of a stream passes two token buckets: the stream's own,
// at ConnBps, which stands for what one TCP connection gets on a long
// path, where the window and the round trip time rather than the hosts
// bound it; and the endpoint's, shared by all its streams, at the
// aggregate rate
//
//	A(n, t) = CapacityBps / (1 + Decline·(n-Knee)/Knee) · (1 - f(t))
//
// where n is the number of open streams, the decline term applies only
// when Knee > 0 and n > Knee (storage and host contention), and f(t) is
// the fraction of capacity outside traffic takes: the Fraction of the
// last External step whose At (seconds since the Shaper was made) has
// passed. These are the formulas of sim.EndpointSpec (with capacity in
// bytes/s rather than Gb/s), so the simulator can predict an emulated
// testbed: n equal, busy streams move
//
//	T(n, t) = min(A(n, t), n·ConnBps)
//
// together (Config.Throughput), each an equal share of it. Streams queue
// on the endpoint's bucket one chunk (at most MaxChunk bytes) at a time,
// which is what makes the shares equal, and a change of A (a stream
// opening or closing past the knee, an External step) applies at once,
// also to streams already waiting.
//
// A Listener adds a fixed delay to each new connection (StartupMs): the
// cost of connecting and authenticating, which a reused connection does
// not pay again.
//
// WaitRTT adds the path's round-trip time (RTTMs) to each request: the
// agent waits it before answering, so a request's first byte arrives one
// RTT after it was sent. That per-request cost is what pipelining (many
// files in one batch request) and concurrency amortise on a real WAN.
//
// What it does not emulate: latency on each packet (a stream's bytes are
// paced by the buckets, not delayed), loss, and TCP's slow start; a stream
// is at its cap from its first byte. Kernel
// socket buffers on loopback are megabytes deep, so a sender can run
// ahead of a slower receiver by that much: throughput is the slower
// end's, but the sender's streams may end before the receiver's do.
package emul
