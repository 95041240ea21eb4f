package testbed

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/trace"
	"github.com/sluice-dtn/sluice/wan"
)

// TestReplayOverWAN: with an emulated WAN the agents live in its hosts,
// every file crosses the network (its counters see at least the files'
// bytes) and arrives verified, and the source host's NIC, not an
// emulation in the agents, bounds the rate.
func TestReplayOverWAN(t *testing.T) {
	if testing.Short() {
		t.Skip("moves real bytes over an emulated WAN")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the emulated WAN's namespaces and TUN devices (CI runs make test as root)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
	p, err := wan.ParseProfile([]byte(`{"name": "tb", "hosts": [
	  {"name": "src", "mtu": 9000, "cc": "cubic", "nic": {"egress_mbps": 200}},
	  {"name": "d1", "mtu": 9000, "cc": "cubic"}, {"name": "d2", "mtu": 9000, "cc": "cubic"}],
	 "links": [{"hosts": ["src", "d1"], "rate_mbps": 1000, "delay_ms": 5}, {"hosts": ["src", "d2"], "rate_mbps": 1000, "delay_ms": 10}]}`), ".")
	if err != nil {
		t.Fatal(err)
	}
	n, err := wan.Up(context.Background(), p, wan.Options{Prefix: "slctb-", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tb := loadTestbed(t, `{"name": "tb", "source": "src", "conn_gbps": 1, "replay": {"size_scale": 1, "time_scale": 1},
	  "endpoints": [{"name": "src", "capacity_gbps": 0.2}, {"name": "d1", "capacity_gbps": 1}, {"name": "d2", "capacity_gbps": 1}]}`)
	tr := &trace.Trace{Name: "wan"}
	for i := range 8 {
		tr.Transfers = append(tr.Transfers, trace.Transfer{ID: int64(i + 1), Src: "src", Dst: []string{"d1", "d2"}[i%2], Size: 10e6})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := Replay(ctx, tb, tr, Options{Scheduler: "basecc2", Net: n})
	if err != nil {
		t.Fatal(err)
	}
	if run.Verified != 8 || run.Network == nil || run.Network.Bytes < uint64(run.Bytes) {
		t.Fatalf("verified %d of 8; the network carried %+v for %d bytes", run.Verified, run.Network, run.Bytes)
	}
	// 80 MB through a 200 Mbit/s NIC take at least 3.2 s.
	rate := float64(run.Bytes) * 8 / run.Seconds / 1e6
	t.Logf("%d bytes in %.2f s: %.0f Mbit/s through a 200 Mbit/s NIC; the network carried %d bytes", run.Bytes, run.Seconds, rate, run.Network.Bytes)
	if rate > 1.1*200 {
		t.Errorf("%.0f Mbit/s, above the source NIC's 200: the data did not go through it", rate)
	}
	// A profile endpoint that is no host of the network is refused.
	bad := loadTestbed(t, `{"name": "bad", "source": "src", "replay": {"size_scale": 1, "time_scale": 1},
	  "endpoints": [{"name": "src", "capacity_gbps": 0.2}, {"name": "elsewhere", "capacity_gbps": 1}]}`)
	if _, err := Up(ctx, bad, t.TempDir(), "seal", nil, n); err == nil {
		t.Error("an endpoint that is no host of the network was accepted")
	}
}

// loadTestbed reads a testbed from its JSON, as a profile file is read.
func loadTestbed(t *testing.T, js string) *sim.Testbed {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tb.json")
	if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	tb, err := sim.LoadTestbed(f)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestRepredict: saved runs are predicted again from their trace and
// seed with another model, and a run whose trace the model would not
// generate again (another number of transfers) is refused.
func TestRepredict(t *testing.T) {
	tb, err := Load("sc15-mini")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Trace(tb, "smoke", 2)
	if err != nil {
		t.Fatal(err)
	}
	run := &ComparedRun{Scheduler: "basecc2", Seed: 2, Files: len(tr.Transfers), Verified: len(tr.Transfers),
		Measured: &sim.Result{Interactive: sim.Stats{N: len(tr.Transfers), AvgSlowdown: 2, AvgTurnaround: 1}}}
	c := &Comparison{Profile: "elsewhere", Trace: "smoke", Runs: []*ComparedRun{run}}
	if err := Repredict(tb, c, []string{"basecc2"}); err != nil {
		t.Fatal(err)
	}
	want, err := Predict(tb, tr, "basecc2")
	if err != nil {
		t.Fatal(err)
	}
	if run.Predicted == nil || run.Predicted.Interactive != want.Interactive {
		t.Errorf("predicted %+v, want %+v", run.Predicted, want)
	}
	if len(c.Median) != 1 || c.Median[0].SimTurnaround == nil {
		t.Errorf("the medians were not summarised again: %+v", c.Median)
	}
	run.Files++
	if err := Repredict(tb, c, []string{"basecc2"}); err == nil {
		t.Error("a run of another trace was predicted")
	}
}
