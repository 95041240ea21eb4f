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
	if testing.Short() {
		t.Skip("measures an emulated link's rate against the wall clock")
	}
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

// TestSnapshotRestorePause: a Snapshot keeps the history of its moment
// while the monitor goes on; Restore takes the monitor back to it; a
// paused monitor takes no probe (and Pause waits for the one in flight)
// until Resume.
func TestSnapshotRestorePause(t *testing.T) {
	l := emulated(t, 2e6)
	m := New([]Link{l}, Options{Hz: 8, ProbeBytes: 64 << 10, SkipBytes: 16 << 10})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitSamples := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); len(m.Series(0)) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("monitor has %d samples after 5 s, want %d", len(m.Series(0)), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSamples(3)
	snap := m.Snapshot()
	at := snap.Series(0)
	if snap.Hz() != 8 || snap.Latency(0) <= 0 || !slices.Equal(at, m.Series(0)[:len(at)]) {
		t.Fatalf("snapshot %v (hz %v, latency %v) is not the monitor's history %v", at, snap.Hz(), snap.Latency(0), m.Series(0))
	}
	waitSamples(len(at) + 2)
	if got := snap.Series(0); !slices.Equal(got, at) {
		t.Fatalf("snapshot changed as the monitor went on: %v, was %v", got, at)
	}

	m.Pause()
	probes, _ := m.Counts(0)
	time.Sleep(600 * time.Millisecond) // several periods
	if p, _ := m.Counts(0); p != probes {
		t.Errorf("paused monitor probed %d times", p-probes)
	}
	m.Restore(snap)
	if got := m.Series(0); !slices.Equal(got, at) {
		t.Errorf("restored history %v, want %v", got, at)
	}
	m.Resume()
	waitSamples(len(at) + 1)
}
