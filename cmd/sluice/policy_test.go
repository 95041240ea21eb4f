package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
)

// TestServicePolicy: the Policy Service through the API, on both stores.
func TestServicePolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachStore(t, testPolicy)
}

func testPolicy(t *testing.T, db string) {
	c := newClusterOn(t, db, 2)
	ctx := context.Background()
	alice := userClient(t, c, "alice", "cms")
	bob := userClient(t, c, "bob", "atlas")

	// The paper's greedy policy with Table III/VII defaults: 16 streams
	// first, 4 more per update.
	a, err := alice.RequestAllocation(ctx, api.AllocationIn{Source: "a1", Destination: "a2"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Streams != 16 || a.VO != "cms" || a.Client != "alice" || !a.Expires.After(time.Now()) {
		t.Fatalf("first allocation %+v, want 16 streams for alice of cms with a lease", a)
	}
	if a, err = alice.UpdateAllocation(ctx, a.ID, api.AllocationUpdateIn{}); err != nil || a.Streams != 20 {
		t.Fatalf("update: %+v, %v; want 20 streams", a, err)
	}

	// Other users neither see nor touch it; bad input changes nothing.
	if _, err := bob.UpdateAllocation(ctx, a.ID, api.AllocationUpdateIn{}); status(err) != http.StatusNotFound || strings.Contains(err.Error(), "alice") {
		t.Errorf("bob updates alice's allocation: %v, want 404 that does not name its owner", err)
	}
	if err := bob.ReleaseAllocation(ctx, a.ID, ""); status(err) != http.StatusNotFound || strings.Contains(err.Error(), "alice") {
		t.Errorf("bob releases alice's allocation: %v, want 404 that does not name its owner", err)
	}
	if _, err := bob.Allocation(ctx, a.ID); status(err) != http.StatusNotFound {
		t.Errorf("bob reads alice's allocation: %v, want 404", err)
	}
	if as, err := bob.Allocations(ctx); err != nil || len(as) != 0 {
		t.Errorf("bob lists %v (%v), want none", as, err)
	}
	for _, tt := range []struct {
		name string
		in   api.AllocationIn
		want int
	}{
		{"unknown endpoint", api.AllocationIn{Source: "a1", Destination: "nowhere"}, 422},
		{"no destination", api.AllocationIn{Source: "a1"}, 422},
		{"negative streams", api.AllocationIn{Source: "a1", Destination: "a2", Streams: -1}, 422},
		{"absurd streams", api.AllocationIn{Source: "a1", Destination: "a2", Streams: 1 << 30}, 422},
	} {
		if _, err := bob.RequestAllocation(ctx, tt.in); status(err) != tt.want {
			t.Errorf("%s: %v, want %d", tt.name, err, tt.want)
		}
	}
	// One user cannot hold more than server.MaxAllocationsPerUser.
	var extra []string
	for i := range server.MaxAllocationsPerUser {
		x, err := bob.RequestAllocation(ctx, api.AllocationIn{Source: "a1", Destination: "a2", Client: fmt.Sprint("c", i)})
		if err != nil {
			t.Fatalf("bob's allocation %d: %v", i, err)
		}
		extra = append(extra, x.ID)
	}
	if _, err := bob.RequestAllocation(ctx, api.AllocationIn{Source: "a1", Destination: "a2", Client: "one-more"}); status(err) != 422 || !strings.Contains(err.Error(), "release some") {
		t.Errorf("bob's allocation past the limit: %v, want 422", err)
	}
	for i, id := range extra {
		if err := bob.ReleaseAllocation(ctx, id, fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.UpdateAllocation(ctx, a.ID, api.AllocationUpdateIn{Streams: -3}); status(err) != 422 {
		t.Errorf("negative update: %v, want 422", err)
	}
	if got, err := alice.Allocation(ctx, a.ID); err != nil || got.Streams != 20 {
		t.Errorf("after refused requests alice holds %+v (%v), want 20 streams", got, err)
	}

	// Admins change the rules at run time; users may not.
	cfg, err := c.admin.Policy(ctx)
	if err != nil || cfg.Policy != "greedy" || cfg.Defaults.PairMax != 128 {
		t.Fatalf("default policy %+v (%v)", cfg, err)
	}
	cfg.Pairs = []server.PairPolicy{{Source: "a2", Destination: "a1",
		Params: server.PolicyParams{Initial: 2, Update: 1, PairMax: 3, ClientMax: 2, LeaseSeconds: 60}}}
	if _, err := alice.SetPolicy(ctx, cfg); status(err) != http.StatusForbidden {
		t.Errorf("alice sets the policy: %v, want 403", err)
	}
	for _, tt := range []struct {
		name   string
		break_ func(*server.PolicyConfig)
	}{
		{"zero lease", func(p *server.PolicyConfig) { p.Defaults.LeaseSeconds = 0 }},
		// Every allocation would end before its client could renew it,
		// and the pair's limit would hold nothing back.
		{"lease shorter than a renewal", func(p *server.PolicyConfig) { p.Defaults.LeaseSeconds = 0.001 }},
		{"pair's lease shorter than a renewal", func(p *server.PolicyConfig) { p.Pairs[0].Params.LeaseSeconds = 0.5 }},
		{"lease past any clock", func(p *server.PolicyConfig) { p.Defaults.LeaseSeconds = 1e300 }},
		{"initial above client max", func(p *server.PolicyConfig) { p.Defaults.Initial = p.Defaults.ClientMax + 1 }},
		{"pair twice", func(p *server.PolicyConfig) { p.Pairs = append(p.Pairs, p.Pairs[0]) }},
		{"weights under greedy", func(p *server.PolicyConfig) { p.Weights = map[string]float64{"cms": 2} }},
	} {
		bad := cfg
		bad.Pairs = slices.Clone(cfg.Pairs)
		tt.break_(&bad)
		if _, err := c.admin.SetPolicy(ctx, bad); status(err) != 422 {
			t.Errorf("%s: %v, want 422", tt.name, err)
		}
	}
	if _, err := c.admin.SetPolicy(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	b1, err := bob.RequestAllocation(ctx, api.AllocationIn{Source: "a2", Destination: "a1", Client: "dtn-x"})
	if err != nil || b1.Streams != 2 {
		t.Fatalf("bob's first on a2->a1: %+v %v, want 2 (s_i)", b1, err)
	}
	b2, err := bob.RequestAllocation(ctx, api.AllocationIn{Source: "a2", Destination: "a1", Client: "dtn-y"})
	if err != nil || b2.Streams != 1 {
		t.Fatalf("bob's second on a2->a1: %+v %v, want the 1 left of s_pmax 3", b2, err)
	}
	if u, err := c.admin.PolicyUsage(ctx); err != nil || !hasUsage(u, "a2", "a1", 3, "atlas") {
		t.Errorf("usage %+v (%v): want 3 streams of atlas on a2->a1", u, err)
	}
	if err := bob.ReleaseAllocation(ctx, b1.ID, "dtn-x"); err != nil {
		t.Fatal(err)
	}
	if b2, err = bob.UpdateAllocation(ctx, b2.ID, api.AllocationUpdateIn{Client: "dtn-y"}); err != nil || b2.Streams != 2 {
		t.Fatalf("after bob released 2: %+v %v, want 2 (its client max)", b2, err)
	}

	// A VO's jobs never run more streams on a pair than its allocation:
	// atlas has 1 stream left on a2->a1 while bob holds 2.
	var job api.JobIn
	for i := range 4 {
		rel := fmt.Sprintf("out/f%d.dat", i)
		c.file("a2", rel, 24<<20, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a2/" + rel, Destination: "sluice://a1/in/" + rel})
	}
	j, _, err := bob.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	j = c.waitJob(bob, j.ID, 2*time.Minute)
	if j.State != store.StateDone {
		t.Fatalf("atlas job ended %s", j.State)
	}
	audit, err := bob.Audit(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range audit {
		if e.To == store.StateRunning && e.Detail != "cc=1" {
			t.Errorf("an atlas transfer started with %s; its VO had 1 stream left", e.Detail)
		}
	}
	// The scheduler gives its allocation back once the VO's work is done.
	waitNoAllocs(t, c, "sluice-scheduler:")

	// An adaptive job (Fig. 3): every file runs with p streams, and its
	// allocation is given back when it ends.
	var ajob api.JobIn
	for i := range 6 {
		rel := fmt.Sprintf("ad/f%d.dat", i)
		c.file("a1", rel, 12<<20, uint64(10+i))
		ajob.Files = append(ajob.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	ajob.AdaptiveParams = &server.AdaptiveSpec{Ci: 1, Cmax: 3, Delta: 1, D: 1, P: 2, T: 0.05}
	aj, _, err := alice.Submit(ctx, ajob)
	if err != nil {
		t.Fatal(err)
	}
	if aj = c.waitJob(alice, aj.ID, 2*time.Minute); aj.State != store.StateDone || !aj.Adaptive {
		t.Fatalf("adaptive job: %+v", aj)
	}
	if audit, err := alice.Audit(ctx, aj.ID); err != nil || !startedWith(audit, "cc=2") {
		t.Errorf("adaptive job's starts: %+v (%v), want p = 2 streams each", audit, err)
	}
	for _, bad := range []api.JobIn{
		{Files: ajob.Files[:1], Adaptive: true, Streams: 2},
		{Files: ajob.Files[:1], AdaptiveParams: &server.AdaptiveSpec{P: -1}},
		{Files: ajob.Files[:1], AdaptiveParams: &server.AdaptiveSpec{Ci: 9, Cmax: 3}},
		// More streams per file than an allocation on a1->a2 can hold
		// (32): its files would wait for ever.
		{Files: ajob.Files[:1], AdaptiveParams: &server.AdaptiveSpec{P: 40}},
	} {
		if _, _, err := alice.Submit(ctx, bad); status(err) != 422 {
			t.Errorf("bad adaptive job %+v: %v, want 422", bad.AdaptiveParams, err)
		}
	}
	waitNoAllocs(t, c, "sluice-job:")

	// Leases and the configuration survive a restart of the server.
	c.server.restart()
	waitListening(t, c.addr, c.server)
	if got, err := alice.Allocation(ctx, a.ID); err != nil || got.Streams != 20 {
		t.Errorf("after a restart alice's allocation is %+v (%v), want 20 streams", got, err)
	}
	if cfg, err := c.admin.Policy(ctx); err != nil || len(cfg.Pairs) != 1 || cfg.Pairs[0].Params.PairMax != 3 {
		t.Errorf("after a restart the policy is %+v (%v)", cfg, err)
	}
	if err := alice.ReleaseAllocation(ctx, a.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Allocation(ctx, a.ID); status(err) != http.StatusNotFound {
		t.Errorf("released allocation: %v, want 404", err)
	}
}

func hasUsage(us []server.PairUsage, src, dst string, used int, vo string) bool {
	for _, u := range us {
		if u.Source == src && u.Destination == dst {
			return u.Used == used && u.PerVO[vo] == used
		}
	}
	return false
}

// waitNoAllocs waits until no allocation's client starts with prefix.
func waitNoAllocs(t *testing.T, c *cluster, prefix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		as, err := c.admin.Allocations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held := false
		for _, x := range as {
			held = held || strings.HasPrefix(x.Client, prefix)
		}
		if !held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocations of %s* still held after their jobs ended: %+v", prefix, as)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestServicePolicyLowered: an administrator lowers a pair's limits while
// a VO's transfer runs on it with more streams. The allocations over the
// new limits shrink at once (a client's next update says so), and the
// running transfer comes down to its VO's allocation within seconds,
// without waiting for its end or a lease renewal; it still completes.
func TestServicePolicyLowered(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	c.addEmulated("src", `{"capacity_bps": 24e6, "conn_bps": 3e6}`)
	ctx := context.Background()
	alice := userClient(t, c, "alice", "cms")
	cfg, err := c.admin.Policy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wide := server.PolicyParams{Initial: 8, Update: 4, PairMax: 16, ClientMax: 12, LeaseSeconds: 60}
	cfg.Pairs = []server.PairPolicy{{Source: "src", Destination: "a1", Params: wide}}
	if _, err := c.admin.SetPolicy(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	a, err := alice.RequestAllocation(ctx, api.AllocationIn{Source: "src", Destination: "a1", Client: "dtn-x"})
	if err != nil || a.Streams != 8 {
		t.Fatalf("alice's allocation: %+v (%v), want 8", a, err)
	}
	c.file("src", "in/big.dat", 96<<20, 5) // 4-5 s at 8 streams of 3 MB/s, 11 s at 3
	j, _, err := c.admin.Submit(ctx, api.JobIn{Streams: 8, Files: []api.FileIn{
		{Source: "sluice://src/in/big.dat", Destination: "sluice://a1/out/big.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ccNow := func() int {
		fs, err := c.admin.AllFiles(ctx, j.ID)
		if err != nil || len(fs) != 1 || fs[0].State != store.StateRunning {
			return -1
		}
		return fs[0].CC
	}
	for deadline := time.Now().Add(20 * time.Second); ccNow() != 8; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the transfer never ran with its 8 streams (cc %d)", ccNow())
		}
	}
	narrow := wide
	narrow.Initial, narrow.PairMax, narrow.ClientMax = 3, 6, 6
	cfg.Pairs[0].Params = narrow
	if _, err := c.admin.SetPolicy(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// 8 + 8 over a pair limit of 6: three each.
	if u, err := alice.UpdateAllocation(ctx, a.ID, api.AllocationUpdateIn{Client: "dtn-x"}); err != nil || u.Streams != 3 || u.Shrunk != 5 || u.Reason == "" {
		t.Errorf("alice's update after the limits came down: %+v (%v), want 3 streams, 5 shrunk, with a reason", u, err)
	}
	cc := ccNow()
	for deadline := time.Now().Add(8 * time.Second); cc > 3 && time.Now().Before(deadline); cc = ccNow() {
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case cc == -1:
		t.Errorf("the transfer ended (or stopped running) before its streams came down to its VO's 3")
	case cc > 3:
		t.Errorf("the running transfer has %d streams after its VO's allocation came down to 3", cc)
	}
	// Another file of the VO waits for the first's streams, and says so.
	c.file("src", "in/small.dat", 1<<20, 6)
	j2, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: "sluice://src/in/small.dat", Destination: "sluice://a1/out/small.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var note string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && note == ""; time.Sleep(100 * time.Millisecond) {
		if fs, err := c.admin.AllFiles(ctx, j2.ID); err == nil && len(fs) == 1 && fs[0].State == store.StateQueued {
			note = fs[0].Error
		}
	}
	if !strings.Contains(note, "Policy Service") {
		t.Errorf("a file held back by its VO's allocation says %q", note)
	}
	if j = c.waitJob(c.admin, j.ID, 2*time.Minute); j.State != store.StateDone {
		t.Fatalf("job ended %s", j.State)
	}
	if !sameContent(t, c.path("src", "in/big.dat"), c.path("a1", "out/big.dat")) {
		t.Error("out/big.dat differs")
	}
	if j2 = c.waitJob(c.admin, j2.ID, time.Minute); j2.State != store.StateDone {
		t.Fatalf("the second job ended %s", j2.State)
	}
	if fs, err := c.admin.AllFiles(ctx, j2.ID); err != nil || fs[0].Error != "" {
		t.Errorf("the second file, done, still says %q (%v)", fs[0].Error, err)
	}
}

// TestServicePolicyFlag: a server started with --policy keeps to it: an
// administrator may change the limits through the API but not the policy,
// which the flag would undo at the next start.
func TestServicePolicyFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 0, "--policy", "weighted-shares")
	ctx := context.Background()
	cfg, err := c.admin.Policy(ctx)
	if err != nil || cfg.Policy != "weighted-shares" {
		t.Fatalf("policy %+v (%v), want weighted-shares from --policy", cfg, err)
	}
	other := cfg
	other.Policy = "greedy"
	if _, err := c.admin.SetPolicy(ctx, other); status(err) != 422 || !strings.Contains(err.Error(), "--policy") {
		t.Errorf("changing the policy the flag sets: %v, want 422 naming --policy", err)
	}
	cfg.Defaults.PairMax = 64
	if _, err := c.admin.SetPolicy(ctx, cfg); err != nil {
		t.Errorf("changing the limits: %v", err)
	}
	// An empty policy name keeps the one in force: it must not run
	// greedy (which ignores the weights) until the next start.
	unnamed := cfg
	unnamed.Policy, unnamed.Weights = "", map[string]float64{"cms": 3}
	if got, err := c.admin.SetPolicy(ctx, unnamed); err != nil || got.Policy != "weighted-shares" {
		t.Errorf("setting weights with no policy name: %+v (%v), want weighted-shares kept", got, err)
	}
	if got, err := c.admin.Policy(ctx); err != nil || got.Policy != "weighted-shares" || got.Weights["cms"] != 3 {
		t.Errorf("policy after setting weights with no policy name: %+v (%v), want weighted-shares with the weights", got, err)
	}
	c.server.restart()
	waitListening(t, c.addr, c.server)
	if got, err := c.admin.Policy(ctx); err != nil || got.Policy != "weighted-shares" || got.Defaults.PairMax != 64 {
		t.Errorf("after a restart: %+v (%v), want weighted-shares with the pair max set through the API", got, err)
	}
}

// TestServicePolicyBroken: when the operator's Starlark policy fails, a
// user's request gets a server error that does not show the policy's
// file or code; the server log has the details.
func TestServicePolicyBroken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	star := filepath.Join(dir, "secret-policy.star")
	src := "def add(request):\n    fail(\"boom\")\n\ndef update(allocation, request):\n    return 0\n\ndef remove(allocation):\n    pass\n"
	if err := os.WriteFile(star, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 2, "--policy", "starlark:"+star)
	alice := userClient(t, c, "alice", "cms")
	_, err := alice.RequestAllocation(context.Background(), api.AllocationIn{Source: "a1", Destination: "a2"})
	if status(err) != http.StatusInternalServerError || strings.Contains(err.Error(), "secret-policy") || strings.Contains(err.Error(), "boom") {
		t.Errorf("request under a failing policy: %v, want a 500 that does not show the policy", err)
	}
	// The process's output reaches the test through a pipe.
	if !c.server.waitOutput(3*time.Second, "boom") {
		t.Error("the server log does not say why the policy failed")
	}
}

// TestServicePolicyAdaptiveBelowP: an administrator lowers a pair's
// per-client limit below an adaptive job's p while it runs. No allocation
// can carry one of its files any more, so its remaining files wait; they
// say why (before, they sat queued without a word, for ever), and run
// once the limit is raised again.
func TestServicePolicyAdaptiveBelowP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	c.addEmulated("src", `{"capacity_bps": 8e6}`)
	ctx := context.Background()
	var job api.JobIn
	for i := range 5 {
		rel := fmt.Sprintf("in/f%d.dat", i)
		c.file("src", rel, 4<<20, uint64(20+i)) // half a second each
		job.Files = append(job.Files, api.FileIn{Source: "sluice://src/" + rel, Destination: "sluice://a1/" + rel})
	}
	job.AdaptiveParams = &server.AdaptiveSpec{Ci: 1, Cmax: 1, Delta: 1, D: 1, P: 4, T: 0.1}
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.admin.Policy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wide := cfg
	cfg.Defaults.Initial, cfg.Defaults.ClientMax = 2, 2
	if _, err := c.admin.SetPolicy(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	var note string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && note == ""; time.Sleep(100 * time.Millisecond) {
		fs, err := c.admin.AllFiles(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.State == store.StateQueued && f.Error != "" {
				note = f.Error
			}
		}
	}
	if !strings.Contains(note, "per-client limit") || !strings.Contains(note, "src->a1") {
		t.Errorf("a file of an adaptive job whose p is above the lowered limit says %q, want why it waits", note)
	}
	if _, err := c.admin.SetPolicy(ctx, wide); err != nil {
		t.Fatal(err)
	}
	if j = c.waitJob(c.admin, j.ID, time.Minute); j.State != store.StateDone {
		t.Fatalf("adaptive job ended %s after the limit was raised again", j.State)
	}
}
