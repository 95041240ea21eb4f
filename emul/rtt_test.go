package emul

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestWaitRTT(t *testing.T) {
	const rtt = 80 * time.Millisecond
	s := newShaper(t, Config{RTTMs: float64(rtt / time.Millisecond)})
	if s.RTT() != rtt {
		t.Fatalf("RTT() = %v, want %v", s.RTT(), rtt)
	}
	// The best of three, so that one late wake-up on a busy machine does
	// not fail the test; each must still be within 10% of the RTT.
	best := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		if err := s.WaitRTT(context.Background()); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	t.Logf("WaitRTT: configured %v, measured %v", rtt, best)
	if d := best - rtt; d < 0 || d > rtt/10 {
		t.Errorf("WaitRTT took %v, want %v within 10%%", best, rtt)
	}

	// An abandoned request stops waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := newShaper(t, Config{RTTMs: 10_000}).WaitRTT(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("WaitRTT with a 10 ms deadline: %v after %v", err, time.Since(start))
	}

	// No RTT, or no shaper: no wait.
	var nilShaper *Shaper
	for name, sh := range map[string]*Shaper{"nil shaper": nilShaper, "no rtt_ms": newShaper(t, Config{ConnBps: 1})} {
		start := time.Now()
		if err := sh.WaitRTT(context.Background()); err != nil || time.Since(start) > 20*time.Millisecond || sh.RTT() != 0 {
			t.Errorf("%s: WaitRTT %v after %v, RTT() %v", name, err, time.Since(start), sh.RTT())
		}
	}
}

func TestRTTValidate(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := (Config{RTTMs: v}).Validate(); err == nil || !strings.Contains(err.Error(), "rtt_ms") {
			t.Errorf("rtt_ms %v: %v, want an error about rtt_ms", v, err)
		}
	}
	if err := (Config{RTTMs: 20}).Validate(); err != nil {
		t.Errorf("rtt_ms 20: %v", err)
	}
}
