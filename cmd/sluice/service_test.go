package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/auth"
	sluicebackend "github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/internal/testout"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/store/storetest"
	"github.com/sluice-dtn/sluice/wire"
)

// eachStore runs test as a subtest on each store the service tests use:
// SQLite always ("" for the data directory's file), and a fresh PostgreSQL
// database when SLUICE_TEST_POSTGRES names a server (.ci/run starts one).
func eachStore(t *testing.T, test func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { test(t, "") })
	if admin := os.Getenv(storetest.PostgresEnv); admin != "" {
		t.Run("postgres", func(t *testing.T) { test(t, storetest.FreshPostgres(t, admin)) })
	}
}

// proc is a sluice subcommand running in a child process (this test
// binary, see TestMain), so that tests can kill it with SIGKILL.
type proc struct {
	t    *testing.T
	args []string
	env  []string // added to the test's environment
	cmd  *exec.Cmd
	log  testout.Buffer // what it wrote, over every start
}

func (p *proc) output() string { return p.log.String() }

// waitOutput waits until the process has written every one of subs, or
// timeout passes, and reports whether it has.
func (p *proc) waitOutput(timeout time.Duration, subs ...string) bool {
	return p.log.WaitFor(timeout, subs...)
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv is startProc with env added to the child's environment.
func startProcEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, args: args, env: env}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of sluice %s:\n%s", strings.Join(args, " "), p.output())
		}
	})
	return p
}

func (p *proc) start() {
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(append(os.Environ(), p.env...), "SLUICE_TEST_RUN="+strings.Join(p.args, "\x1f"))
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

func (p *proc) restart() {
	p.kill()
	p.start()
}

func waitListening(t *testing.T, addr string, p *proc) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s; output:\n%s", addr, p.output())
}

// cluster is a server and its agents, each in its own process.
type cluster struct {
	t       *testing.T
	dir     string
	addr    string
	server  *proc
	agents  map[string]*proc
	roots   map[string]string
	addrs   map[string]string // each agent's listen address
	admin   *client.Client
	db      string
	adminTo string
	env     []string // added to every process's environment
}

// newCluster starts `sluice serve` (with extra flags) and agents named
// a1..aN, each serving its own directory.
func newCluster(t *testing.T, agents int, serveFlags ...string) *cluster {
	return newClusterOn(t, "", agents, serveFlags...)
}

// newClusterOn is newCluster on the store db (a URL; "": SQLite in the
// data directory).
func newClusterOn(t *testing.T, db string, agents int, serveFlags ...string) *cluster {
	t.Helper()
	// Each cluster has its own processes, ports and directories, and its
	// test mostly waits on them: such tests run side by side.
	t.Parallel()
	return startCluster(t, db, agents, serveFlags...)
}

// newClusterSerial is newCluster for a test that changes the process's
// environment (t.Setenv: the CLI's login), which cannot run beside others.
func newClusterSerial(t *testing.T, agents int, serveFlags ...string) *cluster {
	t.Helper()
	return startCluster(t, "", agents, serveFlags...)
}

// newClusterEnv is newCluster with env added to the environment of its
// server and agents (SSL_CERT_FILE naming a test's certificate authority,
// say).
func newClusterEnv(t *testing.T, env []string, agents int, serveFlags ...string) *cluster {
	t.Helper()
	t.Parallel()
	return startClusterEnv(t, "", env, agents, serveFlags...)
}

func startCluster(t *testing.T, db string, agents int, serveFlags ...string) *cluster {
	t.Helper()
	return startClusterEnv(t, db, nil, agents, serveFlags...)
}

func startClusterEnv(t *testing.T, db string, env []string, agents int, serveFlags ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), agents: map[string]*proc{}, roots: map[string]string{}, addrs: map[string]string{}, db: db, env: env}
	c.addr = freeAddr(t)
	args := append([]string{"serve", "--listen", c.addr, "--data-dir", filepath.Join(c.dir, "data"), "--heartbeat-timeout", "3"}, serveFlags...)
	if c.db != "" {
		args = append(args, "--db", c.db)
	}
	c.server = startProcEnv(t, env, args...)
	waitListening(t, c.addr, c.server)
	tok, err := os.ReadFile(filepath.Join(c.dir, "data", "admin.token"))
	if err != nil {
		t.Fatalf("admin token: %v\n%s", err, c.server.output())
	}
	c.adminTo = strings.TrimSpace(string(tok))
	if c.admin, err = client.New("http://"+c.addr, c.adminTo, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= agents; i++ {
		c.addAgent(fmt.Sprintf("a%d", i))
	}
	c.waitEndpoints(agents)
	return c
}

func (c *cluster) addAgent(name string, extra ...string) {
	root := filepath.Join(c.dir, name)
	if err := os.MkdirAll(root, 0o755); err != nil {
		c.t.Fatal(err)
	}
	addr := freeAddr(c.t)
	c.addrs[name] = addr
	args := append([]string{"agent", "--listen", addr, "--root", root, "--name", name,
		"--server", "http://" + c.addr, "--join-token", "@" + filepath.Join(c.dir, "data", "join.token")}, extra...)
	c.agents[name] = startProcEnv(c.t, c.env, args...)
	c.roots[name] = root
	waitListening(c.t, addr, c.agents[name])
	// The agent listens and joins before it opens its root (the key
	// comes with the join): a test that touches the root must wait
	// until it serves.
	if !c.agents[name].waitOutput(20*time.Second, " serving ") {
		c.t.Fatalf("agent %s does not serve:\n%s", name, c.agents[name].output())
	}
}

func (c *cluster) waitEndpoints(n int) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		es, err := c.admin.Endpoints(context.Background())
		up := 0
		for _, e := range es {
			if e.Up {
				up++
			}
		}
		if err == nil && up >= n && len(es) >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%d endpoints did not come up\n%s", n, c.server.output())
}

// file writes a random file of size bytes under an agent's root.
// addEmulated adds an agent whose data path is shaped by the emul.Config
// JSON cfg (a throttled source, say) and waits until the server knows
// every agent.
func (c *cluster) addEmulated(name, cfg string) {
	c.t.Helper()
	emu := filepath.Join(c.dir, name+"-emul.json")
	if err := os.WriteFile(emu, []byte(cfg), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.addAgent(name, "--emulate", emu)
	c.waitEndpoints(len(c.agents))
}

// waitDown waits until the server marks the endpoint down: within the
// heartbeat timeout (3 s here) and a cycle.
func (c *cluster) waitDown(name string) {
	c.t.Helper()
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		es, err := c.admin.Endpoints(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range es {
			if e.Name == name && !e.Up {
				return
			}
		}
	}
	c.t.Fatalf("%s was not marked down", name)
}

func (c *cluster) file(agent, rel string, size int64, seed uint64) string {
	p := filepath.Join(c.roots[agent], filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	fastRandom(c.t, p, size, seed)
	return p
}

func (c *cluster) path(agent, rel string) string {
	return filepath.Join(c.roots[agent], filepath.FromSlash(rel))
}

// waitJob waits until a job is no longer active. It follows the job's
// events (subscribed before the job is read, so no end is missed), and
// renews the stream every few seconds: with several servers another may
// end the job, and a restarting server breaks the stream.
func (c *cluster) waitJob(cl *client.Client, id int64, timeout time.Duration) api.JobOut {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var j api.JobOut
	var err error
	ended := func() bool {
		j, err = cl.Job(ctx, id)
		return err == nil && j.State != store.StateActive
	}
	for ctx.Err() == nil {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		done := false
		serr := cl.EventsFrom(sctx, id, func() bool { done = ended(); return !done }, func(e wire.Event) bool {
			if e.Type == "job" && e.State != store.StateActive {
				done = ended()
			}
			return !done
		})
		scancel()
		if done {
			return j
		}
		if serr != nil && sctx.Err() == nil {
			// No stream (the server restarts): the job as it stands.
			if ended() {
				return j
			}
			<-sctx.Done()
		}
	}
	c.t.Fatalf("job %d still %s after %s (err %v): %+v\n%s", id, j.State, timeout, err, j, c.server.output())
	return j
}

// events follows the events a client may see, from the moment it
// returns (the server has subscribed it), until the test ends.
type events struct {
	t  *testing.T
	ch chan wire.Event
}

func follow(t *testing.T, cl *client.Client) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ev := &events{t: t, ch: make(chan wire.Event, 1024)}
	open := make(chan struct{})
	go cl.EventsFrom(ctx, 0, func() bool { close(open); return true }, func(e wire.Event) bool {
		select {
		case ev.ch <- e:
			return true
		case <-ctx.Done():
			return false
		}
	})
	select {
	case <-open:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream did not open")
	}
	return ev
}

// waitFor waits until an event satisfies ok (earlier ones are skipped),
// and fails the test after timeout, naming what it waited for.
func (ev *events) waitFor(timeout time.Duration, what string, ok func(wire.Event) bool) wire.Event {
	ev.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case e := <-ev.ch:
			if ok(e) {
				return e
			}
		case <-deadline.C:
			ev.t.Fatalf("no event: %s after %s", what, timeout)
			return wire.Event{}
		}
	}
}

// mixedSize draws sizes like the SC'15 traces: mostly small files, a few
// large ones.
func mixedSize(r *rand.Rand) int64 {
	switch x := r.IntN(100); {
	case x < 50:
		return 1 + r.Int64N(1<<20)
	case x < 85:
		return 1<<20 + r.Int64N(9<<20)
	case x < 97:
		return 10<<20 + r.Int64N(22<<20)
	default:
		return 64 << 20
	}
}

// TestServiceEndToEnd: server and three agents in their own processes;
// 200 files of mixed sizes (four of them empty) across the pairs complete with checksums
// verified and identical content; the audit shows each file done once.
func TestServiceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and moves ~1 GB")
	}
	eachStore(t, testEndToEnd)
}

func testEndToEnd(t *testing.T, db string) {
	c := newClusterOn(t, db, 3)
	r := rand.New(rand.NewPCG(7, 7))
	names := []string{"a1", "a2", "a3"}
	var job api.JobIn
	type want struct{ src, dst string }
	var wants []want
	for i := 0; i < 200; i++ {
		s, d := names[i%3], names[(i+1)%3]
		rel := fmt.Sprintf("in/f%03d.dat", i)
		size := mixedSize(r)
		if i%50 == 7 {
			size = 0 // empty files are copied too
		}
		c.file(s, rel, size, uint64(i))
		f := api.FileIn{Source: "sluice://" + s + "/" + rel, Destination: fmt.Sprintf("sluice://%s/out/%s/f%03d.dat", d, s, i)}
		if i%2 == 0 {
			f.Size = &size // half stat'ed by the service
		}
		job.Files = append(job.Files, f)
		wants = append(wants, want{c.path(s, rel), c.path(d, fmt.Sprintf("out/%s/f%03d.dat", s, i))})
	}
	job.Label = "e2e"
	ctx := context.Background()
	j, created, err := c.admin.Submit(ctx, job)
	if err != nil || !created {
		t.Fatalf("submit: %v (created %v)", err, created)
	}
	start := time.Now()
	j = c.waitJob(c.admin, j.ID, 3*time.Minute)
	t.Logf("200 files, %.0f MB in %s", float64(j.Bytes)/1e6, time.Since(start).Round(time.Millisecond))
	if j.State != store.StateDone || j.FilesDone != 200 {
		t.Fatalf("job ended %s with %d/%d files done: %+v", j.State, j.FilesDone, j.Files, j)
	}
	files, err := c.admin.AllFiles(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		if f.State != store.StateDone || !strings.HasPrefix(f.Checksum, "adler32:") {
			t.Errorf("file %d: state %s checksum %q error %q", i, f.State, f.Checksum, f.Error)
		}
		if !sameContent(t, wants[i].src, wants[i].dst) {
			t.Errorf("file %d: %s and %s differ", i, wants[i].src, wants[i].dst)
		}
	}
	for _, n := range names {
		matches, _ := filepath.Glob(filepath.Join(c.roots[n], "out", "*", ".*.sluice-part"))
		if len(matches) > 0 {
			t.Errorf("temporary files left on %s: %v", n, matches)
		}
	}
	// Resubmitting with the same submission id returns the same job.
	job.SubmissionID = "once"
	j1, created1, err := c.admin.Submit(ctx, job)
	if err != nil || !created1 {
		t.Fatalf("submit with id: %v %v", err, created1)
	}
	j2, created2, err := c.admin.Submit(ctx, job)
	if err != nil || created2 || j2.ID != j1.ID {
		t.Fatalf("resubmission: job %d created %v err %v, want job %d not created", j2.ID, created2, err, j1.ID)
	}
	c.waitJob(c.admin, j1.ID, 3*time.Minute)
}

// TestServiceCancel: a canceled job stops, its state says so, and no
// partial file is left at the destination.
func TestServiceCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachStore(t, testCancel)
}

func testCancel(t *testing.T, db string) {
	c := newClusterOn(t, db, 2)
	var job api.JobIn
	for i := 0; i < 40; i++ {
		rel := fmt.Sprintf("big/%02d", i)
		c.file("a1", rel, 32<<20, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	ctx := context.Background()
	ev := follow(t, c.admin)
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// Cancel mid-copy: once bytes of the job have arrived.
	ev.waitFor(20*time.Second, "bytes of the job moved", func(e wire.Event) bool {
		return e.Job == j.ID && e.Type == "progress" && e.BytesDone > 0
	})
	cj, err := c.admin.Cancel(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cj.State != store.StateCanceled {
		t.Fatalf("after cancel the job is %s", cj.State)
	}
	if cj.FilesDone == 40 {
		t.Fatalf("all files were done before the cancel; the test needs a slower job")
	}
	// Partial files go shortly after the runs stop.
	deadline := time.Now().Add(10 * time.Second)
	for {
		parts, _ := filepath.Glob(filepath.Join(c.roots["a2"], "big", ".*.sluice-part"))
		if len(parts) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partial files left after cancel: %v", parts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A file that was being verified when the cancel came ends done:
	// the store says canceled until its run has put it in place and the
	// done state is written (Server.Cancel: the done count may still
	// rise after the cancel returns). So the check waits for the files
	// to settle, and fails on a canceled file whose destination is still
	// there after that.
	var files []api.FileOut
	var problems []string
	canceled := 0
	for deadline := time.Now().Add(15 * time.Second); ; {
		if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		problems, canceled = problems[:0], 0
		for _, f := range files {
			switch f.State {
			case store.StateCanceled:
				canceled++
				if _, err := os.Stat(c.path("a2", strings.TrimPrefix(f.Destination, "sluice://a2/"))); err == nil {
					// A run that completed between the cancel and its
					// stop is reported done, never canceled with a
					// file in place.
					problems = append(problems, fmt.Sprintf("canceled file %d exists at its destination", f.Index))
				}
			case store.StateDone:
				if !sameContent(t, c.path("a1", strings.TrimPrefix(f.Source, "sluice://a1/")), c.path("a2", strings.TrimPrefix(f.Destination, "sluice://a2/"))) {
					problems = append(problems, fmt.Sprintf("done file %d differs", f.Index))
				}
			default:
				problems = append(problems, fmt.Sprintf("file %d is %s after cancel", f.Index, f.State))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if canceled == 0 {
		t.Error("no file was canceled")
	}
	// Canceling again is harmless.
	if _, err := c.admin.Cancel(ctx, j.ID); err != nil {
		t.Errorf("second cancel: %v", err)
	}
}

// TestServiceAPIErrors: unauthenticated, cross-user and invalid requests
// get the right statuses and clear problem documents.
func TestServiceAPIErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachStore(t, testAPIErrors)
}

func testAPIErrors(t *testing.T, db string) {
	c := newClusterOn(t, db, 2)
	ctx := context.Background()
	base := "http://" + c.addr
	alice := userClient(t, c, "alice", "cms")
	bob := userClient(t, c, "bob", "atlas")
	c.file("a1", "x", 1000, 1)
	j, _, err := alice.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/x", Destination: "sluice://a2/x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Job(ctx, j.ID); status(err) != http.StatusNotFound {
		t.Errorf("bob reads alice's job: %v, want 404", err)
	}
	if _, err := bob.Cancel(ctx, j.ID); status(err) != http.StatusNotFound {
		t.Errorf("bob cancels alice's job: %v, want 404", err)
	}
	if js, err := bob.Jobs(ctx, "", 0); err != nil || len(js) != 0 {
		t.Errorf("bob lists %d jobs (err %v), want none", len(js), err)
	}
	if js, err := c.admin.Jobs(ctx, "", 0); err != nil || len(js) != 1 {
		t.Errorf("admin lists %d jobs (err %v), want 1", len(js), err)
	}
	if _, err := bob.CreateToken(ctx, api.TokenIn{User: "alice"}); status(err) != http.StatusForbidden {
		t.Errorf("bob mints alice's token: %v, want 403", err)
	}
	tests := []struct {
		name, method, path, token, body string
		want                            int
	}{
		{"no token", "GET", "/v1/jobs", "", "", 401},
		{"forged token", "GET", "/v1/jobs", "sk_forged", "", 401},
		{"events without token", "GET", "/v1/events", "", "", 401},
		{"not JSON", "POST", "/v1/jobs", c.adminTo, "{", 400},
		{"unknown field", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/y"}],"colour":"red"}`, 422},
		{"no files", "POST", "/v1/jobs", c.adminTo, `{"files":[]}`, 422},
		{"bad class", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/y"}],"class":"urgent"}`, 422},
		{"unknown endpoint", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://nowhere/x","destination":"sluice://a2/y"}]}`, 422},
		{"path escape", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/../etc/passwd","destination":"sluice://a2/y"}]}`, 422},
		{"bad checksum", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/y","checksum":"adler32:zz"}]}`, 422},
		{"negative size", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/y","size":-5}]}`, 422},
		{"replicas on one endpoint", "POST", "/v1/jobs", c.adminTo, `{"files":[{"sources":["sluice://a1/x","sluice://a1/z"],"destinations":["sluice://a2/y"]}]}`, 422},
		{"source is the destination", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a1/./x"}]}`, 422},
		{"name too long for a file system", "POST", "/v1/jobs", c.adminTo, `{"files":[{"source":"sluice://a1/x","destination":"sluice://a2/` + strings.Repeat("n", 256) + `"}]}`, 422},
		{"deadline already passed", "POST", "/v1/jobs", c.adminTo, `{"deadline":"2001-01-01T00:00:00Z","files":[{"source":"sluice://a1/x","destination":"sluice://a2/y"}]}`, 422},
		{"unknown selection", "POST", "/v1/jobs", c.adminTo, `{"selection":"fastest","files":[{"sources":["sluice://a1/x","sluice://a2/x"],"destinations":["sluice://a2/y"]}]}`, 422},
		{"token lifetime past any clock", "POST", "/v1/tokens", c.adminTo, `{"ttl_seconds":9300000000}`, 422},
		{"missing job", "GET", "/v1/jobs/999999", c.adminTo, "", 404},
		{"bad job id", "GET", "/v1/jobs/abc", c.adminTo, "", 422},
		{"bad join token", "POST", "/v1/agents/register", "sj_nope", `{"name":"evil","url":"http://127.0.0.1:1"}`, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ct, body := rawCall(t, tt.method, base+tt.path, tt.token, tt.body)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %s", status, tt.want, body)
			}
			if !strings.Contains(ct, "problem+json") {
				t.Errorf("content type %q, want a problem document", ct)
			}
			if !strings.Contains(body, `"detail"`) && !strings.Contains(body, `"errors"`) {
				t.Errorf("no detail in %s", body)
			}
		})
	}
	// The scheme's name is case-insensitive (RFC 9110 §11.1).
	lower, _ := http.NewRequest("GET", base+"/v1/jobs", nil)
	lower.Header.Set("Authorization", "bearer "+c.adminTo)
	if resp, err := http.DefaultClient.Do(lower); err != nil {
		t.Error(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization: bearer (lower case): %s, want 200", resp.Status)
		}
	}
	// The FTS3 shape is accepted.
	fts := `{"files":[{"sources":["sluice://a1/x"],"destinations":["sluice://a2/fts/x"],"filesize":1000}],"params":{"verify_checksum":"both","retry":2,"overwrite":true}}`
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(fts))
	req.Header.Set("Authorization", "Bearer "+c.adminTo)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("FTS3 job: status %d", resp.StatusCode)
	}
}

// rawCall sends a JSON request (with a bearer token unless token is "")
// and returns the status, content type and body of the answer.
func rawCall(t *testing.T, method, url, token, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b.String()
}

func status(err error) int {
	if e, ok := err.(*client.Error); ok {
		return e.Status
	}
	return 0
}

// clientWith is a client of the cluster's server with another token.
func (c *cluster) clientWith(token string) *client.Client {
	c.t.Helper()
	cl, err := client.New("http://"+c.addr, token, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// userClient creates a user and returns a client with their token. Every
// user may read and write every path (TestServiceAccessRules tests the
// rules themselves).
func userClient(t *testing.T, c *cluster, name, vo string) *client.Client {
	t.Helper()
	if _, err := c.admin.SetAccess(context.Background(), server.AccessConfig{Rules: []server.AccessRule{
		{Endpoint: "*", Path: "/", User: "*", Access: server.AccessWrite}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.CreateToken(context.Background(), api.TokenIn{User: name, VO: vo})
	if err != nil {
		t.Fatal(err)
	}
	return c.clientWith(tok.Token)
}

// TestServiceAccessRules: a user's job may read and write only where an
// access rule allows it. Before, any user could copy any file of any
// agent (another user's included) and overwrite it.
func TestServiceAccessRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	c.file("a1", "home/alice/in", 1000, 1)
	c.file("a1", "home/bob/secret", 1000, 2)
	c.file("a1", "data/cms/run1", 1000, 3)
	tok, err := c.admin.CreateToken(ctx, api.TokenIn{User: "alice", VO: "cms"})
	if err != nil {
		t.Fatal(err)
	}
	alice := c.clientWith(tok.Token)
	job := func(src, dst string) api.JobIn {
		return api.JobIn{Files: []api.FileIn{{Source: "sluice://" + src, Destination: "sluice://" + dst}}}
	}
	// No rules yet: nothing.
	if _, _, err := alice.Submit(ctx, job("a1/home/alice/in", "a2/home/alice/out")); status(err) != http.StatusForbidden {
		t.Fatalf("with no rules: %v, want 403", err)
	}
	rules := server.AccessConfig{Rules: []server.AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: server.AccessWrite},
		{Endpoint: "a1", Path: "/data/{vo}", VO: "*", Access: server.AccessRead},
	}}
	if _, err := alice.SetAccess(ctx, rules); status(err) != http.StatusForbidden {
		t.Fatalf("a user set access rules: %v, want 403", err)
	}
	if _, err := c.admin.SetAccess(ctx, rules); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, dst string
		want           int
	}{
		{"her home to her home", "a1/home/alice/in", "a2/home/alice/out", 0},
		{"her VO's data to her home", "a1/data/cms/run1", "a2/home/alice/run1", 0},
		{"another user's file", "a1/home/bob/secret", "a2/home/alice/stolen", http.StatusForbidden},
		{"over another user's file", "a1/home/alice/in", "a2/home/bob/secret", http.StatusForbidden},
		{"into read-only data", "a1/home/alice/in", "a1/data/cms/run2", http.StatusForbidden},
		{"data of the VO on another endpoint", "a2/data/cms/run1", "a2/home/alice/x", http.StatusForbidden},
	} {
		j, _, err := alice.Submit(ctx, job(tc.src, tc.dst))
		if tc.want != 0 {
			if status(err) != tc.want || !strings.Contains(fmt.Sprint(err), "no access rule allows it") {
				t.Errorf("%s: %v, want %d saying no rule allows it", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := c.waitJob(alice, j.ID, time.Minute); got.State != store.StateDone {
			t.Errorf("%s: job %s", tc.name, got.State)
		}
	}
	if _, err := os.Stat(c.path("a2", "home/alice/stolen")); err == nil {
		t.Error("a refused job wrote its destination")
	}
	// Rules are checked by name, and agents follow links: links alice
	// made in her home must not take her jobs into bob's. A link as the
	// source file, and one as the destination's directory, where the
	// data tokens' prefixes lie (they are the file and the directory).
	if err := os.Symlink("../bob/secret", c.path("a1", "home/alice/link")); err != nil {
		t.Fatal(err)
	}
	// Larger than a pull batch takes: moved alone, with a read token
	// scoped to the file itself (the link).
	c.file("a1", "home/bob/big", 9<<20, 4)
	if err := os.Symlink("../bob/big", c.path("a1", "home/alice/biglink")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(c.path("a2", "home/bob"), 0o755)
	if err := os.Symlink("../bob", c.path("a2", "home/alice/outdir")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, src, dst, leak string }{
		{"a link to another user's file", "a1/home/alice/link", "a2/home/alice/got", "a2:home/alice/got"},
		{"a link to another user's large file", "a1/home/alice/biglink", "a2/home/alice/gotbig", "a2:home/alice/gotbig"},
		{"a link to another user's directory", "a1/home/alice/in", "a2/home/alice/outdir/planted", "a2:home/bob/planted"},
	} {
		j, _, err := alice.Submit(ctx, job(tc.src, tc.dst))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.waitJob(alice, j.ID, time.Minute); got.State != store.StateFailed {
			t.Errorf("%s: job %s, want failed", tc.name, got.State)
		}
		ep, p, _ := strings.Cut(tc.leak, ":")
		if _, err := os.Stat(c.path(ep, p)); err == nil {
			t.Errorf("%s: %s was written", tc.name, tc.leak)
		}
	}
	// Replicas need read access too.
	if _, _, err := alice.Submit(ctx, api.JobIn{Files: []api.FileIn{{Sources: []string{"sluice://a1/home/alice/in", "sluice://a2/home/bob/secret"},
		Destinations: []string{"sluice://a2/home/alice/two"}}}}); status(err) != http.StatusForbidden {
		t.Errorf("a replica under another user's home: %v, want 403", err)
	}
	// Alice sees her own rules, filled in; the admin sees them all.
	mine, err := alice.Access(ctx)
	if err != nil || len(mine.Rules) != 2 || mine.Rules[0].Path != "/home/alice" || mine.Rules[1].Path != "/data/cms" {
		t.Errorf("alice's rules: %+v, %v", mine, err)
	}
	if all, err := c.admin.Access(ctx); err != nil || len(all.Rules) != 2 || all.Rules[0].Path != "/home/{user}" {
		t.Errorf("all rules: %+v, %v", all, err)
	}
	// The admin is not bound by them.
	if _, _, err := c.admin.Submit(ctx, job("a1/home/bob/secret", "a2/backup/secret")); err != nil {
		t.Errorf("admin: %v", err)
	}
	// A bad rule is refused with the reason.
	bad := server.AccessConfig{Rules: []server.AccessRule{{Endpoint: "a1", Path: "data", User: "*", Access: "read"}}}
	if _, err := c.admin.SetAccess(ctx, bad); status(err) != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(err), "absolute") {
		t.Errorf("relative path rule: %v, want 422", err)
	}
}

// TestServiceAgentKeysAndNames: each agent gets its own data-token key,
// so a token minted with one agent's key is refused by the others; and
// the join token does not let anyone take a live agent's name (and with
// it the agent's transfers). Before, every agent got the service's one
// key, and a registration under a live agent's name moved its URL.
func TestServiceAgentKeysAndNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	c.file("a2", "secret", 1000, 1)
	join, err := os.ReadFile(filepath.Join(c.dir, "data", "join.token"))
	if err != nil {
		t.Fatal(err)
	}
	jc := c.clientWith(strings.TrimSpace(string(join)))
	// A third agent joins (any holder of the join token can) and mints a
	// token for every audience with the key it got.
	evil, err := jc.Register(ctx, api.AgentIn{Name: "a3", URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.Mint(evil.Key, auth.Claims{Sub: "x", Scope: auth.ScopeRead, Prefix: "/", Aud: auth.AnyAudience, Exp: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	es, err := c.admin.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url := map[string]string{}
	for _, e := range es {
		url[e.Name] = e.URL
	}
	b, err := sluicebackend.New(url["a2"], tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "/secret"); err == nil {
		t.Error("a token minted with agent a3's key was accepted by agent a2")
	}
	// The name of a live agent cannot be taken.
	_, err = jc.Register(ctx, api.AgentIn{Name: "a1", URL: "http://127.0.0.1:2"})
	if status(err) != http.StatusConflict || !strings.Contains(fmt.Sprint(err), "in use by a live agent") {
		t.Errorf("registering a live agent's name at another URL: %v, want 409", err)
	}
	if err := jc.Heartbeat(ctx, api.AgentIn{Name: "a1", URL: "http://127.0.0.1:2"}); status(err) != http.StatusConflict {
		t.Errorf("heartbeat of a live agent's name from another URL: %v, want 409", err)
	}
	if es, _ := c.admin.Endpoints(ctx); len(es) > 0 {
		for _, e := range es {
			if e.Name == "a1" && e.URL != url["a1"] {
				t.Errorf("a1 moved to %s", e.URL)
			}
		}
	}
	// Transfers between the real agents still work.
	c.file("a1", "in", 3<<20, 2)
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/in", Destination: "sluice://a2/out"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.waitJob(c.admin, j.ID, time.Minute); got.State != store.StateDone {
		t.Fatalf("job %s", got.State)
	}
	// A restarted agent at a new address gets its name back once the old
	// one is silent (here: killed; the registration is retried).
	c.agents["a1"].kill()
	c.addAgent("a1")
	c.waitEndpoints(2)
	j, _, err = c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/in", Destination: "sluice://a2/out2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.waitJob(c.admin, j.ID, time.Minute); got.State != store.StateDone {
		t.Fatalf("after the restart at a new address: job %s", got.State)
	}
}

// TestServiceTokenLifetime: a token a user creates with a short-lived one
// expires with it, and an event stream ends when its token expires.
// Before, a 5-second token could create a permanent one, and a stream
// opened with it went on for ever.
func TestServiceTokenLifetime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	ctx := context.Background()
	short, err := c.admin.CreateToken(ctx, api.TokenIn{User: "carol", TTLSeconds: 3})
	if err != nil {
		t.Fatal(err)
	}
	carol := c.clientWith(short.Token)
	child, err := carol.CreateToken(ctx, api.TokenIn{})
	if err != nil {
		t.Fatal(err)
	}
	if child.Expires == nil || short.Expires == nil || child.Expires.After(*short.Expires) {
		t.Fatalf("child token expires %v, its parent %v", child.Expires, short.Expires)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+short.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		ended <- string(b)
	}()
	select {
	case got := <-ended:
		if !strings.Contains(got, "token expired") {
			t.Errorf("the stream ended without saying why: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream outlived its token")
	}
	cc := c.clientWith(child.Token)
	if _, err := cc.Jobs(ctx, "", 10); status(err) != http.StatusUnauthorized {
		t.Errorf("the child token after its parent expired: %v, want 401", err)
	}

	// Revocation: dave lists his tokens and revokes one, which stops
	// working at once; another user cannot revoke it; an admin can.
	var dave [2]*client.Client
	for i := range dave {
		tok, err := c.admin.CreateToken(ctx, api.TokenIn{User: "dave", Label: fmt.Sprint("token ", i)})
		if err != nil {
			t.Fatal(err)
		}
		dave[i] = c.clientWith(tok.Token)
	}
	ts, err := dave[0].Tokens(ctx, "")
	if err != nil || len(ts) != 2 || ts[1].Label != "token 1" {
		t.Fatalf("dave's tokens: %+v, %v", ts, err)
	}
	erin, err := c.admin.CreateToken(ctx, api.TokenIn{User: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	ec := c.clientWith(erin.Token)
	if err := ec.RevokeToken(ctx, "dave", ts[1].ID); status(err) != http.StatusForbidden {
		t.Errorf("another user revoking dave's token: %v, want 403", err)
	}
	if err := ec.RevokeToken(ctx, "", ts[1].ID); status(err) != http.StatusNotFound {
		t.Errorf("another user revoking dave's token as their own: %v, want 404", err)
	}
	if err := dave[0].RevokeToken(ctx, "", ts[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := dave[1].Jobs(ctx, "", 10); status(err) != http.StatusUnauthorized {
		t.Errorf("a revoked token: %v, want 401", err)
	}
	if err := c.admin.RevokeToken(ctx, "dave", ts[0].ID); err != nil {
		t.Errorf("admin revoking dave's token: %v", err)
	}
	if _, err := dave[0].Jobs(ctx, "", 10); status(err) != http.StatusUnauthorized {
		t.Errorf("a token the admin revoked: %v, want 401", err)
	}
}

// TestServiceAuthBeforeBody: a request without valid credentials is
// answered 401 before its body is read. Before, the server read and
// decoded up to 512 MiB of a job's body first, using gigabytes of memory
// for a request it then refused.
func TestServiceAuthBeforeBody(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 0)
	for _, tc := range []struct{ path, token string }{
		{"/v1/jobs", "not-a-token"},
		{"/v1/jobs", ""},
		{"/v1/agents/register", "not-the-join-token"},
	} {
		// Headers announcing 100 MB, then a few bytes of it and no
		// more: only an answer that does not wait for the body comes
		// back. (Raw TCP: net/http's client would wait to send it all.)
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		auth := ""
		if tc.token != "" {
			auth = "Authorization: Bearer " + tc.token + "\r\n"
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n%s\r\n{\"files\": [", tc.path, c.addr, auth)
		conn.SetReadDeadline(time.Now().Add(4 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		switch {
		case err != nil:
			t.Errorf("%s with token %q: no answer (%v): the server waited for the body", tc.path, tc.token, err)
		case resp.StatusCode != http.StatusUnauthorized:
			t.Errorf("%s with token %q: %s, want 401", tc.path, tc.token, resp.Status)
		}
		conn.Close()
	}
}

// TestServiceSurvivesCrashes: kill -9 the server five times, then the
// destination agent five times, while a job runs. The job completes,
// every file is whole and verified, and no file is put in place twice.
func TestServiceSurvivesCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	eachStore(t, testSurvivesCrashes)
}

func testSurvivesCrashes(t *testing.T, db string) {
	c := newClusterOn(t, db, 2)
	const n = 96
	var job api.JobIn
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("d/%03d", i)
		c.file("a1", rel, 16<<20+int64(i)*4099, uint64(100+i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/out/" + rel})
	}
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// Watch the destination: a file put in place twice shows up as a
	// new inode under the same name.
	replaced := make(chan string, n)
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		seen := map[string]uint64{}
		for {
			ents, _ := os.ReadDir(c.path("a2", "out/d"))
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") {
					continue
				}
				var st syscall.Stat_t
				if syscall.Stat(c.path("a2", "out/d/"+e.Name()), &st) != nil {
					continue
				}
				if ino, ok := seen[e.Name()]; ok && ino != st.Ino {
					replaced <- e.Name()
				}
				seen[e.Name()] = st.Ino
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	progress := func() int64 {
		for i := 0; i < 100; i++ {
			if cur, err := c.admin.Job(ctx, j.ID); err == nil {
				return cur.BytesDone
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("server does not answer\n%s", c.server.output())
		return 0
	}
	faults := faultRand(t)
	for k := 1; k <= 5; k++ {
		time.Sleep(time.Duration(400+faults.IntN(600)) * time.Millisecond)
		before := progress()
		c.server.restart()
		waitListening(t, c.addr, c.server)
		t.Logf("server kill %d at %.0f MB", k, float64(before)/1e6)
	}
	for k := 1; k <= 5; k++ {
		time.Sleep(time.Duration(400+faults.IntN(600)) * time.Millisecond)
		before := progress()
		a := c.agents["a2"]
		a.kill()
		time.Sleep(300 * time.Millisecond)
		a.start()
		t.Logf("agent kill %d at %.0f MB", k, float64(before)/1e6)
	}
	j = c.waitJob(c.admin, j.ID, 4*time.Minute)
	close(stopWatch)
	<-watched
	close(replaced)
	if j.State != store.StateDone || j.FilesDone != n {
		t.Fatalf("job ended %s with %d/%d files done", j.State, j.FilesDone, n)
	}
	for name := range replaced {
		t.Errorf("file %s was put in place twice (its inode changed)", name)
	}
	files, err := c.admin.AllFiles(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	renames := c.agents["a2"].output()
	for _, f := range files {
		rel := strings.TrimPrefix(f.Source, "sluice://a1/")
		if f.State != store.StateDone || f.Checksum == "" {
			t.Errorf("file %s: %s, checksum %q, error %q", rel, f.State, f.Checksum, f.Error)
		}
		if !sameContent(t, c.path("a1", rel), c.path("a2", "out/"+rel)) {
			t.Errorf("file %s differs", rel)
		}
		// A kill between the rename and its log line loses the line,
		// so the agent's log can only show too many renames.
		if got := strings.Count(renames, "to=/out/"+rel+"\n"); got > 1 {
			t.Errorf("file %s was put in place %d times", rel, got)
		}
	}
	if parts, _ := filepath.Glob(filepath.Join(c.roots["a2"], "out", "d", ".*.sluice-part")); len(parts) > 0 {
		t.Errorf("temporary files left: %v", parts)
	}
}

// TestServiceStealBatchYields: under STEAL, a batch job running on an
// endpoint pair gives way when interactive work arrives: the interactive
// job finishes first, while most batch files still wait.
func TestServiceStealBatchYields(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachStore(t, testStealBatchYields)
}

func testStealBatchYields(t *testing.T, db string) {
	c := newClusterOn(t, db, 0, "--scheduler", "steal")
	// A concurrency limit the batch job fills, and a declared capacity
	// loopback exceeds: the endpoints are saturated, so interactive work
	// can only start if batch work yields.
	c.addAgent("a1", "--max-mbps", "100", "--max-cc", "4")
	c.addAgent("a2", "--max-mbps", "100", "--max-cc", "4")
	c.waitEndpoints(2)
	ctx := context.Background()
	var batch, inter api.JobIn
	for i := 0; i < 24; i++ {
		rel := fmt.Sprintf("b/%02d", i)
		c.file("a1", rel, 64<<20, uint64(i))
		batch.Files = append(batch.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	for i := 0; i < 4; i++ {
		rel := fmt.Sprintf("i/%02d", i)
		c.file("a1", rel, 32<<20, uint64(50+i))
		inter.Files = append(inter.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	batch.Class = store.ClassBatch
	ev := follow(t, c.admin)
	bj, _, err := c.admin.Submit(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until batch transfers hold the endpoints.
	ev.waitFor(10*time.Second, "the batch job past 64 MiB", func(e wire.Event) bool {
		return e.Job == bj.ID && e.Type == "progress" && e.BytesDone > 64<<20
	})
	// What the batch job had done when the interactive one came: on a
	// loaded machine the event above can come late, and the batch job
	// far along by then.
	bjThen, err := c.admin.Job(ctx, bj.ID)
	if err != nil {
		t.Fatal(err)
	}
	ij, _, err := c.admin.Submit(ctx, inter)
	if err != nil {
		t.Fatal(err)
	}
	ij = c.waitJob(c.admin, ij.ID, 2*time.Minute)
	bjNow, _ := c.admin.Job(ctx, bj.ID)
	bj = c.waitJob(c.admin, bj.ID, 3*time.Minute)
	if ij.State != store.StateDone || bj.State != store.StateDone {
		t.Fatalf("jobs ended %s and %s", ij.State, bj.State)
	}
	t.Logf("interactive job took %s; batch job %s, %d/%d files done when the interactive one came, %d when it ended",
		ij.Finished.Sub(ij.Created).Round(time.Millisecond), bj.Finished.Sub(bj.Created).Round(time.Millisecond), bjThen.FilesDone, bjNow.Files, bjNow.FilesDone)
	if !ij.Finished.Before(*bj.Finished) {
		t.Errorf("the interactive job did not finish before the batch job")
	}
	files, err := c.admin.AllFiles(ctx, bj.ID)
	if err != nil {
		t.Fatal(err)
	}
	pre := 0
	for _, f := range files {
		pre += f.Preemptions
	}
	// Without classes the interactive files would queue behind the 24
	// batch files that arrived first. They yield (by preemption, or by
	// STEAL keeping batch work to spare capacity): the interactive job
	// ends while most batch files still wait.
	t.Logf("batch preemptions: %d", pre)
	if waiting, during := bjThen.Files-bjThen.FilesDone, bjNow.FilesDone-bjThen.FilesDone; during >= waiting/2 {
		t.Errorf("%d of the %d batch files left when the interactive job came were done before it ended", during, waiting)
	}
}

// TestServiceHugeJob: one job of 100,000 files is accepted whole (its
// speed is measured by bench/submit.sh), listed page by page, and can be
// canceled.
func TestServiceHugeJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachStore(t, testHugeJob)
}

func testHugeJob(t *testing.T, db string) {
	c := newClusterOn(t, db, 2)
	ctx := context.Background()
	const n = 100_000
	job := api.JobIn{Files: make([]api.FileIn, n)}
	size := int64(1 << 20)
	for i := range job.Files {
		// Sources that do not exist: the job is canceled before they
		// could be tried, and would fail cleanly if they were.
		job.Files[i] = api.FileIn{Source: fmt.Sprintf("sluice://a1/huge/%06d", i), Destination: fmt.Sprintf("sluice://a2/huge/%06d", i), Size: &size}
	}
	start := time.Now()
	j, created, err := c.admin.Submit(ctx, job)
	if err != nil || !created {
		t.Fatalf("submit: %v", err)
	}
	t.Logf("100,000 files accepted in %s", time.Since(start).Round(time.Millisecond))
	if j.Files != n || j.Bytes != n<<20 {
		t.Errorf("job has %d files and %d bytes", j.Files, j.Bytes)
	}
	start = time.Now()
	if _, err := c.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("canceled in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	files, err := c.admin.AllFiles(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listed in %s", time.Since(start).Round(time.Millisecond))
	if len(files) != n || files[n-1].Index != n-1 {
		t.Fatalf("listed %d files", len(files))
	}
	done, canceled := 0, 0
	for _, f := range files {
		switch f.State {
		case store.StateCanceled:
			canceled++
		case store.StateFailed, store.StateDone:
			done++
		default:
			t.Fatalf("file %d is %s after cancel", f.Index, f.State)
		}
	}
	t.Logf("after cancel: %d canceled, %d ended before it", canceled, done)
	// The server stays responsive.
	if _, err := c.admin.Endpoints(ctx); err != nil {
		t.Fatal(err)
	}
	// And exports its metrics.
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"sluice_tasks_queued", "sluice_scheduler_cycle_seconds", "sluice_jobs_submitted_total"} {
		if !strings.Contains(b.String(), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestServiceCLI: the commands a scientist uses, against a live server:
// submit (plain and from a file), watch, status, endpoints, cancel, and a
// token for a second user who cannot see the first one's jobs.
func TestServiceCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newClusterSerial(t, 2)
	t.Setenv("SLUICE_SERVER", "http://"+c.addr)
	t.Setenv("SLUICE_TOKEN", "@"+filepath.Join(c.dir, "data", "admin.token"))
	t.Setenv("SLUICE_CONFIG", filepath.Join(c.dir, "client.json"))
	c.file("a1", "cli/one", 3<<20, 1)
	out, err := run(t, "submit", "sluice://a1/cli/one", "sluice://a2/cli/one", "--label", "cli", "--watch")
	if err != nil {
		t.Fatalf("submit --watch: %v\n%s", err, out)
	}
	id := strings.Fields(out)[0]
	if !sameContent(t, c.path("a1", "cli/one"), c.path("a2", "cli/one")) {
		t.Fatal("copy differs")
	}
	out, err = run(t, "status", id, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st api.JobOut
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.State != store.StateDone || st.Label != "cli" {
		t.Fatalf("status --json: %v %+v\n%s", err, st, out)
	}
	if out, err = run(t, "status", id, "--files"); err != nil || !strings.Contains(out, "adler32:") {
		t.Errorf("status --files: %v\n%s", err, out)
	}
	// A failed job: status shows it and exits non-zero, text or JSON.
	out, err = run(t, "submit", "sluice://a1/cli/missing", "sluice://a2/cli/missing", "--watch")
	if err == nil {
		t.Fatalf("submit --watch of a missing source succeeded:\n%s", out)
	}
	failed := strings.Fields(out)[0]
	for _, args := range [][]string{{"status", failed}, {"status", failed, "--json"}} {
		if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "failed") || !strings.Contains(out, "failed") {
			t.Errorf("%v of a failed job: %v\n%s; want it shown and an error", args, err, out)
		}
	}
	if out, err = run(t, "watch", id); err != nil || !strings.Contains(out, "1 done") {
		t.Errorf("watch of a finished job: %v\n%s", err, out)
	}
	if out, err = run(t, "endpoints"); err != nil || !strings.Contains(out, "a1") || !strings.Contains(out, "a2") {
		t.Errorf("endpoints: %v\n%s", err, out)
	}
	// A job file in the FTS3 shape, then cancel.
	c.file("a1", "cli/two", 1<<20, 2)
	job := filepath.Join(c.dir, "job.json")
	os.WriteFile(job, []byte(`{"files":[{"sources":["sluice://a1/cli/two"],"destinations":["sluice://a2/cli/two"]}],"params":{"verify_checksum":true}}`), 0o644)
	if out, err = run(t, "submit", "-f", job); err != nil {
		t.Fatalf("submit -f: %v\n%s", err, out)
	}
	id2 := strings.TrimSpace(out)
	if out, err = run(t, "cancel", id2); err != nil || !strings.Contains(out, "job "+id2) {
		t.Errorf("cancel: %v\n%s", err, out)
	}
	// Bad input is refused with a clear message.
	if out, err = run(t, "submit", "sluice://nowhere/x", "sluice://a2/x"); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Errorf("submit to an unknown endpoint: %v\n%s", err, out)
	}
	// A second user sees none of the admin's jobs.
	out, err = run(t, "api-token", "create", "--user", "carol", "--vo", "lhcb")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.Fields(out)[0]
	t.Setenv("SLUICE_TOKEN", tok)
	if out, err = run(t, "status", id); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("carol reads the admin's job: %v\n%s", err, out)
	}
	// login takes its flags from the environment as every command does
	// (SLUICE_SERVER, SLUICE_TOKEN): with no server anywhere it fails.
	t.Setenv("SLUICE_SERVER", "")
	if out, err = run(t, "login"); err == nil {
		t.Errorf("login without --server and SLUICE_SERVER succeeded:\n%s", out)
	}
	t.Setenv("SLUICE_SERVER", "http://"+c.addr)
	if out, err = run(t, "login"); err != nil || !strings.Contains(out, "carol") {
		t.Errorf("login from SLUICE_SERVER and SLUICE_TOKEN: %v\n%s", err, out)
	}
	if out, err = run(t, "login", "--server", "http://"+c.addr, "--token", tok); err != nil || !strings.Contains(out, "carol") {
		t.Errorf("login: %v\n%s", err, out)
	}
}

// TestServiceEndpointDown: an agent that stops heartbeating is marked
// down, its running transfers go back to the queue, and when it returns
// the job completes.
func TestServiceEndpointDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	var job api.JobIn
	for i := 0; i < 24; i++ {
		rel := fmt.Sprintf("down/%02d", i)
		c.file("a1", rel, 32<<20, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	ctx := context.Background()
	ev := follow(t, c.admin)
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	ev.waitFor(20*time.Second, "a file of the job running", func(e wire.Event) bool {
		return e.Job == j.ID && e.Type == "task" && e.State == store.StateRunning
	})
	a2 := c.agents["a2"]
	a2.kill()
	c.waitDown("a2")
	// Nothing runs towards it now.
	time.Sleep(500 * time.Millisecond)
	files, err := c.admin.AllFiles(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.State == store.StateRunning {
			t.Errorf("file %d still running towards a down endpoint", f.Index)
		}
	}
	// The files not done say why they wait.
	noted := false
	for deadline := time.Now().Add(5 * time.Second); !noted && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		noted = true
		for _, f := range files {
			if f.State == store.StateQueued && !strings.Contains(f.Error, "a2 is down") {
				noted = false
			}
		}
	}
	if !noted {
		t.Errorf("queued files do not say that a2 is down: %+v", files)
	}
	a2.start()
	j = c.waitJob(c.admin, j.ID, 2*time.Minute)
	if j.State != store.StateDone || j.FilesDone != 24 {
		t.Fatalf("job ended %s with %d/24 done", j.State, j.FilesDone)
	}
	// The server says once that a2 went down, and that it came back
	// (before, it logged "down" and wrote the store every cycle, and
	// never "up").
	out := c.server.output()
	// (Twice at most: a loaded machine may delay a heartbeat past the
	// timeout once more.)
	if n := strings.Count(out, `"endpoint down: no heartbeat" endpoint=a2`); n < 1 || n > 2 {
		t.Errorf("the server logged a2 down %d times, want once", n)
	}
	if !strings.Contains(out, `"endpoint up" endpoint=a2`) {
		t.Error("the server did not log a2 up again")
	}
	if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Error != "" {
			t.Errorf("file %d, done, says %q", f.Index, f.Error)
		}
	}
	for i := 0; i < 24; i++ {
		rel := fmt.Sprintf("down/%02d", i)
		if !sameContent(t, c.path("a1", rel), c.path("a2", rel)) {
			t.Errorf("%s differs", rel)
		}
	}
}

// TestServiceSourceDownResolving: files submitted without sizes while
// their source endpoint is down wait for it, and say so (their error
// names the endpoint); when it returns they move and the note goes.
func TestServiceSourceDownResolving(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	var job api.JobIn
	for i := range 3 {
		rel := fmt.Sprintf("wait/%d", i)
		c.file("a1", rel, 1<<20, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	c.agents["a1"].kill()
	c.waitDown("a1")
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var files []api.FileOut
	noted := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !noted; time.Sleep(100 * time.Millisecond) {
		if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		noted = true
		for _, f := range files {
			noted = noted && f.State == store.StateResolving && strings.Contains(f.Error, "a1 is down")
		}
	}
	if !noted {
		t.Fatalf("files waiting for a down source do not say so: %+v", files)
	}
	c.agents["a1"].start()
	j = c.waitJob(c.admin, j.ID, time.Minute)
	if j.State != store.StateDone {
		t.Fatalf("job ended %s with %d/3 done", j.State, j.FilesDone)
	}
	if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Error != "" {
			t.Errorf("file %d done with error %q", f.Index, f.Error)
		}
	}
}

// TestServiceWatchSurvivesRestart: `sluice watch` waits for a server that
// is killed and started again (it loses nothing) and follows the job to
// its end; before, it quit on the first refused connection.
func TestServiceWatchSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newClusterSerial(t, 1)
	c.addEmulated("src", `{"capacity_bps": 16e6}`)
	t.Setenv("SLUICE_SERVER", "http://"+c.addr)
	t.Setenv("SLUICE_TOKEN", "@"+filepath.Join(c.dir, "data", "admin.token"))
	t.Setenv("SLUICE_CONFIG", filepath.Join(c.dir, "client.json"))
	c.file("src", "w/one", 64<<20, 1) // 4 s at 16 MB/s
	out, err := run(t, "submit", "sluice://src/w/one", "sluice://a1/w/one")
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	id := strings.Fields(out)[0]
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := run(t, "watch", id)
		done <- result{out, err}
	}()
	time.Sleep(time.Second)
	c.server.kill()
	time.Sleep(2 * time.Second)
	c.server.start()
	waitListening(t, c.addr, c.server)
	select {
	case r := <-done:
		if r.err != nil || !strings.Contains(r.out, "1 done") {
			t.Errorf("watch across a server restart: %v\n%s", r.err, r.out)
		}
	case <-time.After(time.Minute):
		t.Fatal("watch did not end within a minute of the restart")
	}
}

// TestServiceCancelDestinationDown: a job canceled while its destination
// agent is down (killed mid-transfer) keeps no partial file for good:
// the removal the cancel owes is done once the agent is back. Before, the
// partial files stayed until someone removed them by hand.
func TestServiceCancelDestinationDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	c.addEmulated("src", `{"capacity_bps": 16e6}`)
	c.file("src", "in/big.dat", 64<<20, 7)
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: "sluice://src/in/big.dat", Destination: "sluice://a1/out/big.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	parts := func() []string {
		p, _ := filepath.Glob(filepath.Join(c.roots["a1"], "out", ".*sluice-part"))
		return p
	}
	for deadline := time.Now().Add(30 * time.Second); len(parts()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the copy never started")
		}
	}
	c.agents["a1"].kill()
	if _, err := c.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	// The cancel's own removal fails meanwhile. The agent returns before
	// the heartbeat timeout (3 s) marks it down: its registration, not an
	// up-again, must bring the removal on.
	time.Sleep(1500 * time.Millisecond)
	if len(parts()) == 0 {
		t.Fatal("the partial file went while its agent was down: the test shows nothing")
	}
	c.agents["a1"].start()
	var left []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if left = parts(); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("partial files left after the agent came back: %v", left)
	}
}

// TestServiceAgentRootRemoved: an agent whose root directory is removed
// (and made again) stops heartbeating, so the server marks it down and
// its files wait, saying so, instead of failing one after another on a
// directory nobody can see.
func TestServiceAgentRootRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	root := c.roots["a2"]
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c.waitDown("a2")
	if !strings.Contains(c.agents["a2"].output(), "not sending heartbeats") {
		t.Error("the agent does not say why it stopped heartbeating")
	}
}

// TestServiceSmallFilesBatched: a job of many small files moves in pull
// batches (several files per request to the destination agent, server
// batch.go), every file arrives whole and verified, a file whose expected
// checksum is wrong fails with a clear error without holding the others
// back, and --batch-max 0 moves each file on its own.
func TestServiceSmallFilesBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		name    string
		flags   []string
		batched bool
	}{
		{"default", nil, true},
		{"off", []string{"--batch-max", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2, tc.flags...)
			const n = 240
			var job api.JobIn
			r := rand.New(rand.NewPCG(3, 3))
			for i := range n {
				rel := fmt.Sprintf("small/d%d/f%03d", i%2, i)
				c.file("a1", rel, r.Int64N(64<<10), uint64(i))
				job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
			}
			// One file the user says has another checksum: it fails, and
			// only it.
			c.file("a1", "small/d0/wrong", 1000, 99)
			job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/small/d0/wrong", Destination: "sluice://a2/small/d0/wrong", Checksum: "adler32:00000001"})
			ctx := context.Background()
			j, _, err := c.admin.Submit(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			j = c.waitJob(c.admin, j.ID, 2*time.Minute)
			if j.FilesDone != n {
				t.Fatalf("job ended %s with %d of %d files done", j.State, j.FilesDone, n)
			}
			files, err := c.admin.AllFiles(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range files[:n] {
				rel := fmt.Sprintf("small/d%d/f%03d", i%2, i)
				if f.State != store.StateDone || !strings.HasPrefix(f.Checksum, "adler32:") {
					t.Errorf("%s: state %s checksum %q error %q", rel, f.State, f.Checksum, f.Error)
				}
				if !sameContent(t, c.path("a1", rel), c.path("a2", rel)) {
					t.Errorf("%s differs at the destination", rel)
				}
			}
			if w := files[n]; w.State != store.StateFailed || !strings.Contains(w.Error, "expected") {
				t.Errorf("the file with a wrong expected checksum: state %s, error %q", w.State, w.Error)
			}
			if _, err := os.Stat(c.path("a2", "small/d0/wrong")); !os.IsNotExist(err) {
				t.Errorf("the file with a wrong checksum is at the destination (stat: %v)", err)
			}
			left, _ := filepath.Glob(filepath.Join(c.roots["a2"], "small", "*", ".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			// How the files went: the destination agent logs each batch.
			batches, inBatches, largest := 0, 0, 0
			for _, l := range strings.Split(c.agents["a2"].output(), "\n") {
				if strings.Contains(l, `msg="pulled batch"`) {
					var files int
					if i := strings.Index(l, " files="); i >= 0 {
						fmt.Sscanf(l[i+len(" files="):], "%d", &files)
					}
					batches++
					inBatches += files
					largest = max(largest, files)
				}
			}
			t.Logf("%d files in %d batches, the largest of %d", inBatches, batches, largest)
			// How many files share a batch depends on how many the
			// scheduler starts together, which depends on the machine's
			// speed: ask only that they were pipelined at all.
			switch {
			case tc.batched && (inBatches < n || batches >= n || largest < 2):
				t.Errorf("batching on: %d of %d files went in %d batches, the largest of %d; want all, in fewer batches than files", inBatches, n, batches, largest)
			case !tc.batched && batches > 0:
				t.Errorf("batching off, yet %d batches", batches)
			}
		})
	}
}

// countingProxy stands in front of an agent (which advertises the
// proxy's URL) and counts the requests it forwards by method and route.
type countingProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	target *url.URL
	counts map[string]int
}

func newCountingProxy(t *testing.T) *countingProxy {
	p := &countingProxy{counts: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		target := p.target
		route := r.URL.Path
		if parts := strings.SplitN(route, "/", 4); len(parts) >= 3 {
			route = "/" + parts[1] + "/" + parts[2]
		}
		p.counts[r.Method+" "+route]++
		p.mu.Unlock()
		if target == nil {
			http.Error(w, "no agent yet", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *countingProxy) to(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = &url.URL{Scheme: "http", Host: addr}
}

func (p *countingProxy) count(route string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[route]
}

// TestServiceSmallFilesFewRequests: a job of many small files in a few
// directories costs the source agent far fewer requests than files. The
// sizes are learnt a directory at a time (POST /v1/stats), and each of
// the few connections the destination's limit allows carries a full
// batch: when the scheduler starts one file, the queued files of its job
// and directory ride with it. One request per file, or batches shrunk to
// the one or two files a cycle starts, fail it.
func TestServiceSmallFilesFewRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 0)
	px := newCountingProxy(t)
	c.addAgent("a1", "--advertise", px.srv.URL)
	px.to(c.addrs["a1"])
	c.addAgent("a2", "--max-cc", "2") // two connections at a time
	c.waitEndpoints(2)
	const n = 300
	var job api.JobIn
	for i := range n {
		// Interleaved directories: a job's files need not come sorted.
		rel := fmt.Sprintf("small/d%d/f%03d", i%3, i)
		c.file("a1", rel, 1000+int64(i), uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	j = c.waitJob(c.admin, j.ID, 2*time.Minute)
	if j.FilesDone != n {
		t.Fatalf("job ended %s with %d of %d files done", j.State, j.FilesDone, n)
	}
	for i := range n {
		rel := fmt.Sprintf("small/d%d/f%03d", i%3, i)
		if !sameContent(t, c.path("a1", rel), c.path("a2", rel)) {
			t.Fatalf("%s differs at the destination", rel)
		}
	}
	stats := px.count("GET /v1/stat") + px.count("POST /v1/stats")
	batches := px.count("POST /v1/batch")
	t.Logf("source agent: %d stat requests (%d single), %d batch requests, for %d files", stats, px.count("GET /v1/stat"), batches, n)
	// Three directories: a few stat requests each at most.
	if stats > n/20 {
		t.Errorf("%d stat requests at the source for %d files in 3 directories; want at most %d", stats, n, n/20)
	}
	// 1 KB files go 64 to a batch (the default BDP of 256 KiB): 15
	// batches would do, a few more for each directory's last.
	if batches > n/10 {
		t.Errorf("%d batch requests at the source for %d files; want at most %d", batches, n, n/10)
	}
}

// TestServiceBatchFileAlreadyInPlace: a small file whose earlier run put
// it in place without the done state being recorded (a server killed
// between the rename and the write) is checked, not copied and put in
// place a second time. The state is made by hand: the destination holds
// the file and the store a complete checkpoint while the destination
// agent is down.
func TestServiceBatchFileAlreadyInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	c.agents["a2"].kill()
	c.waitDown("a2")
	var job api.JobIn
	for i := range 3 {
		rel := fmt.Sprintf("placed/%d", i)
		c.file("a1", rel, 100<<10, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// File 1 is "already in place": its bytes at the destination, and a
	// complete checkpoint in the store.
	in := c.path("a2", "placed/1")
	if err := os.MkdirAll(filepath.Dir(in), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.path("a1", "placed/1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(c.dir, "data", "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := st.Tasks(ctx, j.ID, 0, 10)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("tasks: %d, %v", len(tasks), err)
	}
	cp := fmt.Sprintf(`{"version":1,"src":"/placed/1","dst":"/placed/1","size":%d,"done":[[0,%d]]}`, len(b), len(b))
	if err := st.PutCheckpoint(ctx, fmt.Sprintf("task/%d", tasks[1].ID), []byte(cp)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	c.agents["a2"].start()
	j = c.waitJob(c.admin, j.ID, time.Minute)
	if j.State != store.StateDone || j.FilesDone != 3 {
		t.Fatalf("job ended %s with %d/3 done", j.State, j.FilesDone)
	}
	after, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("the file already in place was copied and put in place again")
	}
	for i := range 3 {
		rel := fmt.Sprintf("placed/%d", i)
		if !sameContent(t, c.path("a1", rel), c.path("a2", rel)) {
			t.Errorf("%s differs", rel)
		}
	}
}

// TestServiceCanceledFileInPlace: a canceled task whose run had verified
// its file and put it in place before the server could write done (the
// server crashed in between, or lost the partition) is found by the
// sweep and recorded done, so the job does not report canceled a file
// that is there. A canceled task whose destination holds other bytes of
// the same size (the user's own file) stays canceled, and the file is
// left alone, as does one whose source is gone. Before, the first stayed
// canceled too.
func TestServiceCanceledFileInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	// The destination is down, so nothing runs before the cancel.
	c.agents["a2"].kill()
	c.waitDown("a2")
	var job api.JobIn
	for i := range 3 {
		rel := fmt.Sprintf("placed/%d", i)
		c.file("a1", rel, 3<<20+int64(i), uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
	}
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	// The sizes are known (from the source) before the cancel, as for
	// any file whose run got as far as verifying.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		js, err := c.admin.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if js.Bytes == 3*(3<<20)+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sizes not resolved: %+v", js)
		}
	}
	if _, err := c.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	// File 0: the run's verified file, in place. File 1: the user's own
	// file at the destination, same size, other bytes.
	for i, content := range []string{"placed/0", "placed/2"} {
		b, err := os.ReadFile(c.path("a1", content))
		if err != nil {
			t.Fatal(err)
		}
		b = b[:3<<20+i]
		out := c.path("a2", fmt.Sprintf("placed/%d", i))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := os.ReadFile(c.path("a2", "placed/1"))
	if err != nil {
		t.Fatal(err)
	}
	// File 2: a file of the right size at the destination, and the
	// source gone, so nothing can show it is the source's.
	if err := os.WriteFile(c.path("a2", "placed/2"), make([]byte, 3<<20+2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(c.path("a1", "placed/2")); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(c.dir, "data", "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := st.Tasks(ctx, j.ID, 0, 10)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("tasks: %d, %v", len(tasks), err)
	}
	for i := range 3 {
		size := 3<<20 + i
		cp := fmt.Sprintf(`{"version":1,"src":"/placed/%d","dst":"/placed/%d","size":%d,"done":[[0,%d]]}`, i, i, size, size)
		if err := st.PutCheckpoint(ctx, fmt.Sprintf("task/%d", tasks[i].ID), []byte(cp)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	c.agents["a2"].start() // its registration asks for a sweep
	var files []api.FileOut
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if files, err = c.admin.AllFiles(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if files[0].State == store.StateDone || time.Now().After(deadline) {
			break
		}
	}
	want := []string{store.StateDone, store.StateCanceled, store.StateCanceled}
	for i, f := range files {
		if f.State != want[i] {
			t.Errorf("file %d is %s, want %s (%s)", i, f.State, want[i], f.Error)
		}
	}
	if files[0].Checksum == "" {
		t.Error("file 0 was recorded done without its checksum")
	}
	if got, err := os.ReadFile(c.path("a2", "placed/1")); err != nil || !bytes.Equal(got, mine) {
		t.Errorf("the user's own file at the destination was changed (%v)", err)
	}
	if js, err := c.admin.Job(ctx, j.ID); err != nil || js.State != store.StateCanceled || js.FilesDone != 1 {
		t.Errorf("job: %+v, %v; want canceled with one file done", js, err)
	}
	// The checkpoints are gone once settled.
	time.Sleep(time.Second)
	st, err = store.Open(ctx, filepath.Join(c.dir, "data", "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	left, err := st.EndedWithCheckpoint(ctx)
	if err != nil || len(left) != 0 {
		t.Errorf("checkpoints left: %d tasks, %v", len(left), err)
	}
}

// TestServiceSameDestination: jobs of two users that name one destination
// path at once each write their own temporary file, so none writes into
// another's. With overwrite, both end done with a verified file, no temporary file is
// left, and the destination holds, whole, the source of the job whose
// rename came last (an earlier job's file was replaced by a later,
// complete one, as a second upload replaces the first). Before, the two
// shared one temporary name: one job ended "done, verified" while the
// other's bytes were what stood at the destination. Small files (pull
// batches) and files large enough for the engine are both run. That is
// with overwrite; without it (the default) the job that comes second
// finds the first one's file and fails, keeping it.
func TestServiceSameDestination(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	alice := userClient(t, c, "alice", "cms")
	bob := userClient(t, c, "bob", "atlas")
	ctx := context.Background()
	yes := true
	for _, tc := range []struct {
		name      string
		size      int64
		overwrite bool
	}{{"small", 2 << 20, true}, {"large", 40 << 20, true}, {"small-keep", 2 << 20, false}, {"large-keep", 40 << 20, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srcA := c.file("a1", tc.name+"/from-alice", tc.size, 11)
			srcB := c.file("a1", tc.name+"/from-bob", tc.size+12345, 12)
			dst := "sluice://a2/shared/" + tc.name + ".bin"
			var ow *bool
			if tc.overwrite {
				ow = &yes
			}
			var ids [2]int64
			var wg sync.WaitGroup
			for i, u := range []struct {
				cl  *client.Client
				src string
			}{{alice, "from-alice"}, {bob, "from-bob"}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					j, _, err := u.cl.Submit(ctx, api.JobIn{Overwrite: ow, Files: []api.FileIn{{Source: "sluice://a1/" + tc.name + "/" + u.src, Destination: dst}}})
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = j.ID
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var last time.Time
			var lastSrc string
			done := 0
			for i, cl := range []*client.Client{alice, bob} {
				j := c.waitJob(cl, ids[i], 2*time.Minute)
				files, err := cl.AllFiles(ctx, ids[i])
				if err != nil {
					t.Fatal(err)
				}
				if !tc.overwrite && j.State == store.StateFailed && len(files) == 1 && strings.Contains(files[0].Error, "destination exists") {
					// Without overwrite, the job that comes second
					// finds the first one's file and keeps it.
					continue
				}
				if j.State != store.StateDone || len(files) != 1 || files[0].Checksum == "" {
					t.Fatalf("job %d ended %s: %+v", ids[i], j.State, files)
				}
				done++
				if f := files[0].Finished; f != nil && f.After(last) {
					last, lastSrc = *f, []string{srcA, srcB}[i]
				}
			}
			if !tc.overwrite && done != 1 {
				t.Errorf("%d jobs done without overwrite; want exactly one, the other failing on the existing destination", done)
			}
			got := c.path("a2", "shared/"+tc.name+".bin")
			if !tc.overwrite && !sameContent(t, lastSrc, got) {
				t.Errorf("the destination is not the source of the job that put it in place")
			}
			if !sameContent(t, srcA, got) && !sameContent(t, srcB, got) {
				t.Errorf("the destination matches neither source whole")
			} else if !sameContent(t, lastSrc, got) {
				t.Logf("the destination holds the source of the job that finished first (their renames were close together)")
			}
			if parts, _ := filepath.Glob(filepath.Join(c.roots["a2"], "shared", ".*sluice-part")); len(parts) > 0 {
				t.Errorf("temporary files left: %v", parts)
			}
		})
	}
}

// TestServiceFailedLeavesNoPart: a file that fails for good in the middle
// of its copy (here: its source is deleted while it moves, at 160 MB/s)
// leaves no temporary file behind at the destination. Before, the partial
// file kept its space (of a full disk, say) for good, while a canceled
// file's was removed.
func TestServiceFailedLeavesNoPart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	c.addEmulated("src", `{"capacity_bps": 160e6, "conn_bps": 160e6}`)
	src := c.file("src", "in/big.dat", 100<<20, 3)
	ctx := context.Background()
	retry := 0
	j, _, err := c.admin.Submit(ctx, api.JobIn{Retry: &retry, Files: []api.FileIn{
		{Source: "sluice://src/in/big.dat", Destination: "sluice://a1/out/big.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Once bytes are moving, the source goes. The copy lasts well under
	// a second here, shorter than the server's progress period, so the
	// test watches the destination's partial file itself.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if parts, _ := filepath.Glob(filepath.Join(c.roots["a1"], "out", ".*sluice-part")); len(parts) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy never started")
		}
	}
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	j = c.waitJob(c.admin, j.ID, 2*time.Minute)
	if j.State != store.StateFailed || j.FilesFailed != 1 {
		t.Fatalf("job ended %s with %d failed files, want failed", j.State, j.FilesFailed)
	}
	// The removal runs in the background: give it a few seconds.
	var left []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if left, _ = filepath.Glob(filepath.Join(c.roots["a1"], "out", ".*sluice-part")); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("temporary files left by the failed file: %v", left)
	}
	if _, err := os.Stat(c.path("a1", "out/big.dat")); err == nil {
		t.Error("out/big.dat is in place although its source went away")
	}
}

// TestServiceRunOutlivesItsTokens: a transfer that runs longer than the
// data tokens it was given (--data-token-ttl 2, a file of 24 MiB from an
// agent shaped to 8 MB/s: about 3 s) is given fresh ones as it goes and
// ends done; it failed for good when its tokens expired (an agent refuses
// an expired token, and no retry with it can help).
func TestServiceRunOutlivesItsTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1, "--data-token-ttl", "2")
	c.addEmulated("slow", `{"capacity_bps": 8e6}`)
	c.file("slow", "f.bin", 24<<20, 9)
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://slow/f.bin", Destination: "sluice://a1/f.bin"}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := c.waitJob(c.admin, j.ID, 60*time.Second); got.State != store.StateDone {
		files, _ := c.admin.AllFiles(ctx, j.ID)
		t.Fatalf("job ended %s: %+v", got.State, files)
	}
	if took := time.Since(start); took < 2500*time.Millisecond {
		t.Logf("the job took %v: shorter than its tokens, so this run tests nothing", took)
	}
	want, _ := os.ReadFile(c.path("slow", "f.bin"))
	if got, err := os.ReadFile(c.path("a1", "f.bin")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs from the original (%v)", err)
	}
}

// TestServiceOddNames: file names with ?, #, % or a space, percent-encoded
// in the job's URLs as in cp's, are moved, small ones and a large one
// pulled in ranges agent to agent alike.
func TestServiceOddNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	names := map[string]string{ // on disk: in the URL
		"odd/a?b":    "odd/a%3Fb",
		"odd/c#d":    "odd/c%23d",
		"odd/50%":    "odd/50%25",
		"odd/g h":    "odd/g%20h",
		"odd/big?x#": "odd/big%3Fx%23",
	}
	var job api.JobIn
	for disk, u := range names {
		size := int64(1000)
		if strings.HasPrefix(disk, "odd/big") {
			size = 48 << 20
		}
		c.file("a1", disk, size, uint64(len(disk)))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + u, Destination: "sluice://a2/" + u})
	}
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	j = c.waitJob(c.admin, j.ID, 2*time.Minute)
	if j.FilesDone != len(names) {
		files, _ := c.admin.AllFiles(ctx, j.ID)
		for _, f := range files {
			t.Logf("%s: %s %s", f.Source, f.State, f.Error)
		}
		t.Fatalf("job ended %s with %d of %d files done", j.State, j.FilesDone, len(names))
	}
	for disk := range names {
		if !sameContent(t, c.path("a1", disk), c.path("a2", disk)) {
			t.Errorf("%s differs at the destination", disk)
		}
	}
	// Shown as submitted: URLs that name the files again.
	files, err := c.admin.AllFiles(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.ContainsFunc(job.Files, func(in api.FileIn) bool { return in.Source == f.Source && in.Destination == f.Destination }) {
			t.Errorf("file shown as %s -> %s, not as submitted", f.Source, f.Destination)
		}
	}
}
