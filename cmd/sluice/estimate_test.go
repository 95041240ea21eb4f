package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceEstimate: the estimation service samples a path whose
// source caps each stream at 8 MB/s and the whole endpoint at 40 MB/s,
// finds that several streams are needed (not 1, as the default would
// run), predicts a throughput near the cap, leaves no sample file behind,
// answers the same question from history without sampling, rejects bad
// requests with 4xx, and runs an optimization job with the estimated
// streams.
func TestServiceEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and samples a throttled path")
	}
	c := newCluster(t, 1)
	emu := filepath.Join(c.dir, "wan.json")
	if err := os.WriteFile(emu, []byte(`{"capacity_bps": 40e6, "conn_bps": 8e6}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.addAgent("src", "--emulate", emu)
	c.waitEndpoints(2)
	c.file("src", "data/big.dat", 64<<20, 3)
	ctx := context.Background()
	alice := userClient(t, c, "alice", "cms")

	req := api.EstimateIn{Source: "sluice://src/data/big.dat", Destination: "sluice://a1/in/big.dat",
		Size: 5e9, SampleSize: 4 << 20}
	e, err := alice.Estimate(ctx, req)
	if err != nil {
		t.Fatalf("estimate: %v\n%s", err, c.server.output())
	}
	t.Logf("estimate: %d streams, %.1f MB/s, %.0f s for 5 GB; samples %+v; cost %.2f s %d B; %s",
		e.Streams, e.Throughput/1e6, e.Seconds, e.Samples, e.Cost, e.CostBytes, e.Model)
	// One stream gets 8 MB/s; the endpoint saturates at 40 MB/s, so
	// the optimum is 5 or more streams.
	if e.Streams < 4 || e.Streams > 16 {
		t.Errorf("optimal streams %d, want 4..16 (cap 8 MB/s per stream, 40 MB/s in all)", e.Streams)
	}
	if e.Throughput < 25e6 || e.Throughput > 50e6 {
		t.Errorf("predicted %.1f MB/s, want near the 40 MB/s capacity", e.Throughput/1e6)
	}
	if len(e.Samples) < 3 || e.Samples[0].Streams != 1 || e.Samples[1].Streams != 4 || e.Samples[2].Streams != 16 {
		t.Errorf("samples %+v: want 1, 4, 16, ... streams (Algorithm 2, model.DefaultGrowth)", e.Samples)
	}
	if one := e.Samples[0].Throughput; one < 5e6 || one > 10e6 {
		t.Errorf("one stream sampled at %.1f MB/s, want about 8", one/1e6)
	}
	if want := 5e9 / e.Throughput; e.Seconds < 0.99*want || e.Seconds > 1.01*want {
		t.Errorf("seconds %.1f, want size/throughput = %.1f", e.Seconds, want)
	}
	// The answer never lies above every sample by more than the fit's
	// uncertainty, and says when the curve did.
	best := 0.0
	for _, s := range e.Samples {
		best = max(best, s.Throughput)
	}
	switch {
	case e.Uncertainty < 0.05:
		t.Errorf("uncertainty %g, want at least the sample noise 0.05", e.Uncertainty)
	case e.Throughput > best*(1+e.Uncertainty)*(1+1e-9):
		t.Errorf("predicted %.1f MB/s, above the best sample %.1f MB/s by more than ±%.0f%%", e.Throughput/1e6, best/1e6, 100*e.Uncertainty)
	case e.Clamped != (e.Fitted > e.Throughput) || (e.Clamped && e.Note == "") || e.Fitted <= 0:
		t.Errorf("fitted %.1f MB/s, answer %.1f MB/s, clamped %v, note %q: inconsistent", e.Fitted/1e6, e.Throughput/1e6, e.Clamped, e.Note)
	}
	// The cost: the samples (4 MiB, or more where one was too short
	// against a request's set-up and was taken again, larger), those
	// taken again, and the 64 KiB pull that measured the set-up.
	moved := int64(64 << 10)
	for _, s := range e.Samples {
		if s.Bytes < 4<<20 {
			t.Errorf("sample %+v: want at least the 4 MiB asked for", s)
		}
		moved += s.Bytes
	}
	if e.FromHistory || e.Cost <= 0 || e.CostBytes < moved {
		t.Errorf("cost %.2f s %d B from_history %v: want at least the %d B the %d samples and the set-up pull moved", e.Cost, e.CostBytes, e.FromHistory, moved, len(e.Samples))
	}
	// The samples leave nothing behind: no file, and no directory of
	// the destination's path ("in" did not exist; they went to its
	// deepest existing ancestor, here the root).
	if left, _ := filepath.Glob(filepath.Join(c.roots["a1"], "*", ".sluice-sample-*")); len(left) > 0 {
		t.Errorf("sample files left: %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(c.roots["a1"], ".sluice-sample-*")); len(left) > 0 {
		t.Errorf("sample files left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(c.roots["a1"], "in")); !os.IsNotExist(err) {
		t.Errorf("the estimate made the destination's directory (stat: %v)", err)
	}

	// From history: no sampling, same answer, the new size's time.
	req.UseHistory, req.Size = true, 1e9
	h, err := alice.Estimate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !h.FromHistory || h.Streams != e.Streams || h.Throughput != e.Throughput || h.Cost != 0 || len(h.Samples) != len(e.Samples) ||
		h.Fitted != e.Fitted || h.Uncertainty != e.Uncertainty || h.Clamped != e.Clamped || h.Note != e.Note {
		t.Errorf("history answer %+v, want the stored one (%d streams) at no cost", h, e.Streams)
	}
	if want := 1e9 / e.Throughput; h.Seconds < 0.99*want || h.Seconds > 1.01*want {
		t.Errorf("history seconds %.1f, want %.1f", h.Seconds, want)
	}

	// The paper's doubling on request: 1, 2, 4, ... streams.
	req.UseHistory, req.Growth = false, 2
	d, err := alice.Estimate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Samples) < 3 || d.Samples[0].Streams != 1 || d.Samples[1].Streams != 2 || d.Samples[2].Streams != 4 {
		t.Errorf("growth 2: samples %+v, want 1, 2, 4, ... streams", d.Samples)
	}
	if d.Streams < 4 || d.Streams > 16 {
		t.Errorf("growth 2: optimal streams %d, want 4..16", d.Streams)
	}

	// Two requests for a new pair at once: one samples, the other waits
	// for it and answers from history (never two samplings of one path
	// at once); a request for another pair is not held up by them.
	c.file("a1", "back/big.dat", 16<<20, 5)
	type answer struct {
		e   api.EstimateOut
		err error
	}
	results := make(chan answer, 2)
	for range 2 {
		go func() {
			e, err := alice.Estimate(ctx, api.EstimateIn{Source: "sluice://a1/back/big.dat", Destination: "sluice://src/back/big.dat",
				Size: 1e9, SampleSize: 1 << 20, UseHistory: true})
			results <- answer{e, err}
		}()
	}
	sampled, fromHistory := 0, 0
	for range 2 {
		a := <-results
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.e.FromHistory {
			fromHistory++
		} else {
			sampled++
		}
	}
	if sampled != 1 || fromHistory != 1 {
		t.Errorf("concurrent requests for one pair: %d sampled, %d from history; want 1 and 1", sampled, fromHistory)
	}

	// Bad requests: 4xx with a problem document, nothing sampled.
	c.file("src", "data/tiny.dat", 4, 9) // a few bytes say nothing of the path
	base := "http://" + c.addr
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"zero size", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":0}`, 422},
		{"negative size", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":-1}`, 422},
		{"absurd sample", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":100,"sample_size":1099511627776}`, 422},
		{"tiny sample", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":100,"sample_size":10}`, 422},
		{"unknown endpoint", `{"source":"sluice://nowhere/data/big.dat","destination":"sluice://a1/in/x","size":100}`, 422},
		{"missing source file", `{"source":"sluice://src/data/none.dat","destination":"sluice://a1/in/x","size":100}`, 422},
		{"path escape", `{"source":"sluice://src/../etc/passwd","destination":"sluice://a1/in/x","size":100}`, 422},
		{"no destination", `{"source":"sluice://src/data/big.dat","size":100}`, 422},
		{"source too small to sample", `{"source":"sluice://src/data/tiny.dat","destination":"sluice://a1/in/tiny","size":100}`, 422},
		{"growth 1", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":100,"growth":1}`, 422},
		{"growth 17", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":100,"growth":17}`, 422},
		{"source is the destination", `{"source":"sluice://src/data/big.dat","destination":"sluice://src/data/big.dat","size":100}`, 422},
		{"no token", `{"source":"sluice://src/data/big.dat","destination":"sluice://a1/in/x","size":100}`, 401},
	} {
		t.Run(tt.name, func(t *testing.T) {
			token := c.adminTo
			if tt.want == 401 {
				token = ""
			}
			status, ct, body := rawCall(t, "POST", base+"/v1/estimate", token, tt.body)
			if status != tt.want || !strings.Contains(ct, "problem+json") {
				t.Fatalf("status %d %s, want %d problem: %s", status, ct, tt.want, body)
			}
		})
	}

	// An optimization job runs with the estimated streams (from
	// history here: the pair was just sampled, last with growth 2, whose
	// answer is the newest stored).
	c.file("src", "data/run.dat", 24<<20, 4)
	j, _, err := alice.Submit(ctx, api.JobIn{Optimization: true,
		Files: []api.FileIn{{Source: "sluice://src/data/run.dat", Destination: "sluice://a1/in/run.dat"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !j.Optimization {
		t.Errorf("job %d does not say optimization", j.ID)
	}
	j = c.waitJob(alice, j.ID, time.Minute)
	if j.State != store.StateDone {
		t.Fatalf("optimization job ended %s", j.State)
	}
	if !sameContent(t, c.path("src", "data/run.dat"), c.path("a1", "in/run.dat")) {
		t.Fatal("optimization job's file differs")
	}
	if audit, err := alice.Audit(ctx, j.ID); err != nil || !startedWith(audit, fmt.Sprintf("cc=%d", d.Streams)) {
		t.Errorf("optimization job's starts: %+v (%v), want cc=%d", audit, err, d.Streams)
	}

	// A job that fixes its streams (FTS3's nostreams) runs with them;
	// streams and optimization together are refused.
	fixed, _, err := alice.Submit(ctx, api.JobIn{Params: &api.ParamsIn{NoStreams: ptr(3)},
		Files: []api.FileIn{{Source: "sluice://src/data/run.dat", Destination: "sluice://a1/in/fixed.dat"}}})
	if err != nil {
		t.Fatal(err)
	}
	if fixed = c.waitJob(alice, fixed.ID, time.Minute); fixed.State != store.StateDone || fixed.Streams != 3 {
		t.Fatalf("nostreams job: %+v", fixed)
	}
	if audit, err := alice.Audit(ctx, fixed.ID); err != nil || !startedWith(audit, "cc=3") {
		t.Errorf("nostreams=3 job's starts: %+v (%v)", audit, err)
	}
	if _, _, err := alice.Submit(ctx, api.JobIn{Streams: 2, Optimization: true,
		Files: []api.FileIn{{Source: "sluice://src/data/run.dat", Destination: "sluice://a1/in/both.dat"}}}); status(err) != http.StatusUnprocessableEntity {
		t.Errorf("streams with optimization: %v, want 422", err)
	}

	// Stork users' submit files work unchanged but for the URLs' hosts
	// naming Sluice endpoints: an estimation ad, then a transfer ad with
	// optimization.
	ad := filepath.Join(c.dir, "job.classad")
	if err := os.WriteFile(ad, []byte(`[
  dap_type = "estimation";
  src_url = "gsiftp://src/data/big.dat";
  dest_url = "gsiftp://a1/in/big.dat";
  use_history = "YES";
  size = "2G";
]
[
  dap_type = "transfer";
  src_url = "gsiftp://src/data/run.dat";
  dest_url = "gsiftp://a1/in/stork.dat";
  optimization = "YES";
  arguments = "-b 128K -s 10M";
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "submit", "--server", base, "--token", c.adminTo, "-f", ad)
	if err != nil {
		t.Fatalf("submit -f job.classad: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.Contains(out, fmt.Sprintf("optimal streams  %d", d.Streams)) || !strings.Contains(out, "from history") {
		t.Errorf("estimation ad's answer:\n%s", out)
	}
	var id int64
	if _, err := fmt.Sscan(lines[len(lines)-1], &id); err != nil {
		t.Fatalf("no job id at the end of:\n%s", out)
	}
	if j := c.waitJob(c.admin, id, time.Minute); j.State != store.StateDone || !j.Optimization {
		t.Fatalf("Stork transfer job: %+v", j)
	}
	if !sameContent(t, c.path("src", "data/run.dat"), c.path("a1", "in/stork.dat")) {
		t.Fatal("Stork job's file differs")
	}

	// A file whose second ad names an endpoint that does not exist runs
	// none of its ads: fixing it and submitting again must not give the
	// first ad's job twice.
	mixed := filepath.Join(c.dir, "mixed.classad")
	if err := os.WriteFile(mixed, []byte(`[ src_url = "gsiftp://src/data/run.dat"; dest_url = "gsiftp://a1/in/m1.dat"; ]
[ src_url = "gsiftp://src/data/run.dat"; dest_url = "gsiftp://nope/in/m2.dat"; ]
[ src_url = "gsiftp://src/data/run.dat"; dest_url = "gsiftp://a1/in/m3.dat"; ]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := c.admin.Jobs(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "submit", "--server", base, "--token", c.adminTo, "-f", mixed)
	if err == nil || !strings.Contains(err.Error(), "ad 2") || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "nothing was submitted") {
		t.Errorf("a file with a bad ad: %v\n%s", err, out)
	}
	if after, err := c.admin.Jobs(ctx, "", 0); err != nil || len(after) != len(before) {
		t.Errorf("jobs went from %d to %d (%v): a file with a bad ad was partly submitted", len(before), len(after), err)
	}
}

func ptr[T any](v T) *T { return &v }

// startedWith reports whether every start in the audit has detail want
// (and there is one).
func startedWith(audit []api.AuditOut, want string) bool {
	n := 0
	for _, a := range audit {
		if a.To == store.StateRunning {
			if a.Detail != want {
				return false
			}
			n++
		}
	}
	return n > 0
}
