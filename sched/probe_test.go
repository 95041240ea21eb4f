package sched_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/sched"
)

// retuneRun drives seal+ in closed loop, in simulated time, over one path
// A→B whose bandwidth changes while one large task runs on it, as the
// live service does: every 0.5 s a cycle sees the task's rate (the
// engine's five-second moving average), the endpoints' maxima learned by
// Peaks (nobody configured a capacity), and the world's prior as the
// estimator (each connection a quarter of the learned maximum: no file
// has finished, so nothing else is known). Each connection carries at
// most perConn (a TCP window per round trip); the path carries
// capacity(t). A change of concurrency takes effect a second after it is
// ordered (connections open and ramp up). It returns the task's
// throughput and concurrency every 0.5 s.
func retuneRun(t *testing.T, name string, perConn float64, capacity func(float64) float64, until float64) (thr []float64, ccs []int) {
	t.Helper()
	s := mustNew(t, name, sched.Options{})
	var peaks sched.Peaks
	learned := map[string]float64{}
	maxOf := func(ep string) float64 {
		if v := learned[ep]; v > 0 {
			return v
		}
		return 1.25e9 // the service's prior until something is observed
	}
	prior := func(src, dst string, cc, sl, dl int, _ int64) float64 {
		capa := math.Min(maxOf(src), maxOf(dst))
		return math.Min(capa*float64(cc)/float64(cc+max(sl, dl)), capa/4*float64(cc))
	}
	const dt, cycle, avg = 0.1, 0.5, 5.0
	task := &sched.Task{ID: 1, Src: "A", Dst: "B", Size: 1e12, Left: 1e12, Running: true, CC: 4}
	cc, pendingCC, pendingAt := 4, 0, 0.0
	var moved []float64 // bytes per dt step
	for step := 0; float64(step)*dt < until; step++ {
		now := float64(step) * dt
		if pendingCC > 0 && now >= pendingAt {
			cc, pendingCC = pendingCC, 0
		}
		moved = append(moved, math.Min(float64(cc)*perConn, capacity(now))*dt)
		if step%int(cycle/dt) != 0 {
			continue
		}
		n := min(len(moved), int(avg/dt))
		sum := 0.0
		for _, b := range moved[len(moved)-n:] {
			sum += b
		}
		task.Rate, task.CC, task.Pending = sum/(float64(n)*dt), cc, pendingCC > 0
		task.Trans = now
		thr = append(thr, moved[len(moved)-1]/dt)
		ccs = append(ccs, cc)
		snap := &sched.Snapshot{Trigger: sched.Tick, Now: now, Running: []*sched.Task{task},
			Endpoints: map[string]*sched.Endpoint{}, Estimator: estFunc(prior), StartupCost: 0.5, Checkpoint: 1}
		for _, ep := range []string{"A", "B"} {
			m, probe := peaks.Observe(ep, now, task.Rate)
			learned[ep] = m
			snap.Endpoints[ep] = &sched.Endpoint{Name: ep, MaxThroughput: maxOf(ep), MaxCC: 32, Observed: task.Rate, CC: cc, Probe: probe}
		}
		for _, d := range s.Schedule(snap) {
			if d.Kind == sched.SetCC && d.Task == 1 && !task.Pending {
				pendingCC, pendingAt = d.CC, now+1
			}
		}
	}
	return thr, ccs
}

// TestRetuneFollowsBandwidthSteps: a path of 125 MB/s, halved at 10 s and
// then tripled at 25 s, with a 35 MB/s window per connection (wan-untuned:
// 2 MB buffers over 50 ms). The task starts with four connections, which
// fill the path at first and after the halving, but carry at most 140 MB/s
// of the 187.5 MB/s it has after the tripling. seal+ must reach 80% of each
// new rate within 10 s of the change: upward only by probing, since the
// endpoint's learned maximum says it is full. On a path that does not grow,
// probes that do not pay back off instead of piling connections on.
func TestRetuneFollowsBandwidthSteps(t *testing.T) {
	const perConn = 35e6
	steps := []struct{ at, rate float64 }{{0, 125e6}, {10, 62.5e6}, {25, 187.5e6}}
	capacity := func(now float64) float64 {
		r := 0.0
		for _, s := range steps {
			if now >= s.at {
				r = s.rate
			}
		}
		return r
	}
	thr, ccs := retuneRun(t, "seal+", perConn, capacity, 45)
	trace := func() string {
		var b strings.Builder
		for i := range thr {
			fmt.Fprintf(&b, "%.1fs %.0f MB/s cc %d; ", float64(i)*0.5, thr[i]/1e6, ccs[i])
		}
		return b.String()
	}
	for _, s := range steps[1:] {
		reached := -1.0
		for i, v := range thr {
			if at := float64(i) * 0.5; at >= s.at && v >= 0.8*s.rate {
				reached = at - s.at
				break
			}
		}
		if reached < 0 || reached > 10 {
			t.Errorf("after the change to %.1f MB/s at %.0f s: 80%% reached after %.1f s (-1: never), want within 10 s\n%s", s.rate/1e6, s.at, reached, trace())
		}
	}
	// While the halved path stays flat (10-25 s), probes find nothing and
	// back off: at most three of them.
	raises := 0
	for i := 1; i < len(ccs); i++ {
		if at := float64(i) * 0.5; at > 10 && at < 25 && ccs[i] > ccs[i-1] {
			raises++
		}
	}
	if raises > 3 {
		t.Errorf("%d raises of concurrency on the halved path, want at most 3 (probes back off)\n%s", raises, trace())
	}
}

// TestPeaks: the learned maximum is the most observed over the window;
// probes are asked for only at the maximum, and again sooner after one
// that paid than after one that did not.
func TestPeaks(t *testing.T) {
	p := sched.Peaks{Window: 10, Every: 2, MaxWait: 8}
	type obs struct {
		now, v    float64
		wantMax   float64
		wantProbe bool
	}
	for i, o := range []obs{
		{0, 100, 100, true},  // first sample: at its maximum
		{1, 110, 110, false}, // within the wait
		{2, 120, 120, true},  // the maximum rose 20% since: paid, wait 2
		{3, 50, 120, false},  // below the maximum
		{4, 121, 121, true},  // rose <5%: did not pay, wait 4
		{6, 121, 121, false}, // within the wait
		{8, 121, 121, true},  // did not pay: wait 8
		{9, 0, 121, false},   // idle: says nothing
		{15, 60, 121, false}, // 121 (at 4..8) still in the window
		{18.5, 60, 60, true}, // the window forgot it; at the new maximum (wait 8 kept)
	} {
		m, probe := p.Observe("A", o.now, o.v)
		if m != o.wantMax || probe != o.wantProbe {
			t.Errorf("step %d (t=%v, obs %v): max %v probe %v, want %v %v", i, o.now, o.v, m, probe, o.wantMax, o.wantProbe)
		}
	}
	if p.Max("A") != 60 || p.Max("B") != 0 {
		t.Errorf("Max: A %v, B %v; want 60, 0", p.Max("A"), p.Max("B"))
	}
	p.Seed("B", 80)
	if m, _ := p.Observe("B", 20, 0); m != 80 {
		t.Errorf("seeded, idle: max %v, want 80", m)
	}
}
