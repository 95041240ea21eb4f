package linkmon

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/emul"
)

// emulated serves a 32 MiB file from an agent emulating capacity bytes/s.
func emulated(t *testing.T, capacity float64) Link {
	t.Helper()
	dir := t.TempDir()
	const size = 32 << 20
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	a, err := agent.New(agent.Config{Name: "x", Root: dir, Key: key, Emulation: &emul.Config{CapacityBps: capacity}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	tok, err := auth.Mint(key, auth.Claims{Sub: "t", Scope: auth.ScopeRead, Prefix: "/", Aud: auth.AnyAudience, Exp: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sluice.New(srv.URL, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Link{Name: srv.URL, Backend: b, Path: "/f", Size: size}
}

// TestProbesMeasureTheLink: on a slow and a fast emulated link the probes'
// median is within 15% of the configured rate (the fast one's probes grow
// until they are long enough to time), and a transfer through Observe
// turns into passive samples of its rate.
func TestProbesMeasureTheLink(t *testing.T) {
	for _, rate := range []float64{1e6, 40e6} {
		l := emulated(t, rate)
		m := New([]Link{l}, Options{Hz: 8, ProbeBytes: 256 << 10, SkipBytes: 128 << 10})
		if err := m.Collect(context.Background(), 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		s := m.Series(0)
		if len(s) < 3 {
			t.Fatalf("%.0f B/s: %d samples", rate, len(s))
		}
		med := median(s[len(s)/2:]) // after the probe size settled
		if med < 0.85*rate || med > 1.15*rate {
			t.Errorf("%.0f B/s link: probes read %.0f B/s (series %v)", rate, med, s)
		}
		if m.Latency(0) <= 0 {
			t.Errorf("no latency measured")
		}
	}

	// Passive samples: a long read through Observe.
	l := emulated(t, 4e6)
	m := New([]Link{l}, Options{Hz: 8})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	rc, err := m.Observe(0).OpenRange(context.Background(), "/f", 0, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	cancel()
	<-done
	probes, passive := m.Counts(0)
	s := m.Series(0)
	if passive < 5 {
		t.Fatalf("%d passive samples (%d probes) during a 2 s read", passive, probes)
	}
	if med := median(s); med < 0.8*4e6 || med > 1.2*4e6 {
		t.Errorf("passive samples of a 4 MB/s read: median %.0f (%v)", med, s)
	}
}

func median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return c[len(c)/2]
}
