package emul

import (
	"context"
	"fmt"
	"time"
)

// RTT is the round-trip time s emulates (0 for a nil s or no RTTMs).
func (s *Shaper) RTT() time.Duration {
	if s == nil || s.cfg.RTTMs <= 0 {
		return 0
	}
	return time.Duration(s.cfg.RTTMs * float64(time.Millisecond))
}

// WaitRTT blocks for one round-trip time, or until ctx ends (its error,
// wrapped, is returned). A server calls it once per request before it
// answers, so that the client sees its first byte one RTT after it asked,
// as across a WAN: half a round trip for the request to arrive, half for
// the answer to come back. The cost is per request, not per byte or per
// connection, which is why one batch request for k files is cheaper than
// k requests (pipelining), and why k requests in parallel cost about one
// RTT between them (concurrency hides latency too).
//
// Bytes do not wait again: a stream's rate is its own matter (ConnBps,
// which stands for window/RTT). A nil s, or one without RTTMs, returns at
// once.
func (s *Shaper) WaitRTT(ctx context.Context) error {
	d := s.RTT()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("emul: %w", ctx.Err())
	}
}
