package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceMultiSource: a job whose file has two sources is downloaded
// from both and verified; replicas of different sizes fail the file with
// a clear error; with one replica's agent dead, the other carries the file.
func TestServiceMultiSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 4)
	ctx := context.Background()
	const size = 40 << 20
	orig := c.file("a1", "d/f.bin", size, 5)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"a2", "a4"} {
		os.MkdirAll(c.path(a, "d"), 0o755)
		if err := os.WriteFile(c.path(a, "d/f.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(dst string, sources ...string) api.JobOut {
		t.Helper()
		j, _, err := c.admin.Submit(ctx, api.JobIn{Selection: "tcs-dynamic", Files: []api.FileIn{{Sources: sources, Destination: dst}}})
		if err != nil {
			t.Fatal(err)
		}
		return c.waitJob(c.admin, j.ID, 2*time.Minute)
	}
	j := submit("sluice://a3/out/f.bin", "sluice://a1/d/f.bin", "sluice://a2/d/f.bin", "sluice://a4/d/f.bin")
	if j.State != store.StateDone || j.Selection != "tcs-dynamic" {
		t.Fatalf("job %+v\n%s", j, c.server.output())
	}
	if !sameContent(t, orig, c.path("a3", "out/f.bin")) {
		t.Fatal("the file assembled from three sources differs")
	}
	if out := c.server.output(); !strings.Contains(out, "multi-source transfer") || !strings.Contains(out, "sources=3") {
		t.Errorf("the server did not run a multi-source transfer:\n%s", out)
	}

	// The service's status: the scheduler (seal+ by default), its cycle, the queues by class.
	code, _, body := rawCall(t, "GET", "http://"+c.addr+"/v1/status", c.adminTo, "")
	var st api.StatusOut
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Scheduler != "seal+" || st.Period != 0.5 || st.CycleSeconds < 0 {
		t.Errorf("GET /v1/status: %d %s (%v)", code, body, err)
	}
	if code, _, _ := rawCall(t, "GET", "http://"+c.addr+"/v1/status", "", ""); code != 401 {
		t.Errorf("status without a token: %d, want 401", code)
	}

	// An agent of one replica dies: the others carry the file.
	c.agents["a2"].kill()
	j = submit("sluice://a3/out/g.bin", "sluice://a1/d/f.bin", "sluice://a2/d/f.bin")
	if j.State != store.StateDone || !sameContent(t, orig, c.path("a3", "out/g.bin")) {
		t.Fatalf("with a dead replica: %+v\n%s", j, c.server.output())
	}

	// Replicas that are not copies of one file.
	if err := os.Truncate(c.path("a4", "d/f.bin"), size-1); err != nil {
		t.Fatal(err)
	}
	j = submit("sluice://a3/out/h.bin", "sluice://a1/d/f.bin", "sluice://a4/d/f.bin")
	fs, err := c.admin.Files(ctx, j.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != store.StateFailed || len(fs) != 1 || !strings.Contains(fs[0].Error, "not copies of one file") {
		t.Errorf("replicas of different sizes: job %s, files %+v", j.State, fs)
	}
	if _, err := os.Stat(c.path("a3", "out/h.bin")); !os.IsNotExist(err) {
		t.Error("a refused file was written")
	}

	// Bad input: the same endpoint twice, an unknown endpoint, an unknown selection.
	for _, in := range []api.JobIn{
		{Files: []api.FileIn{{Sources: []string{"sluice://a1/d/f.bin", "sluice://a1/d/g.bin"}, Destination: "sluice://a3/x"}}},
		{Files: []api.FileIn{{Sources: []string{"sluice://a1/d/f.bin", "sluice://nowhere/d/f.bin"}, Destination: "sluice://a3/x"}}},
		{Selection: "fastest", Files: []api.FileIn{{Sources: []string{"sluice://a1/d/f.bin", "sluice://a4/d/f.bin"}, Destination: "sluice://a3/x"}}},
	} {
		if _, _, err := c.admin.Submit(ctx, in); status(err) != 422 {
			t.Errorf("%+v: %v, want 422", in, err)
		}
	}
}
