package web_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/internal/testout"
)

// The dashboard in a real browser: Debian's chromium driven by
// playwright-core (scripts/web-test-deps.sh installs it) against a
// `sluice serve` with three agents (and a fourth that is down), sampling
// its history every second. After a mixed job (files done, one failed,
// one still running), testdata/browser.mjs signs in as the admin, looks
// at every view of the console (overview, links and a link, failures,
// endpoints and an endpoint, jobs and a job, submit with its estimate,
// allocations) and the API reference at /docs, reloads to see the charts
// survive, filters by user and searches, submits a job from the form,
// cancels jobs from their pages, signs in as another user who must not
// see the admin's jobs, and measures the overview with 100 endpoints and
// 1,000 running jobs. Every request the browser makes is recorded and
// the test fails on any to a host that is not this machine's loopback.
// Screenshots go to $TEST_OUTPUT, else the test's artifact directory
// (go test -artifacts keeps it); docs/screenshots holds those of the
// console's views (see docs/operator-guide.md).
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, agents and a browser")
	}
	chromium := os.Getenv("SLUICE_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no chromium at %s (Debian package chromium; scripts/ci-deps.sh installs it; SLUICE_CHROMIUM overrides)", chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is missing (Debian package nodejs)")
	}
	deps := os.Getenv("SLUICE_WEB_DEPS")
	if deps == "" {
		deps, _ = filepath.Abs(filepath.Join("..", ".cache", "web-test"))
	}
	if _, err := os.Stat(filepath.Join(deps, "node_modules", "playwright-core")); err != nil {
		t.Skipf("playwright-core is not installed in %s: run scripts/web-test-deps.sh", deps)
	}
	out := os.Getenv("TEST_OUTPUT")
	if out == "" {
		out = t.ArtifactDir()
	}
	out, _ = filepath.Abs(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", out)

	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the server with: %v", err)
	}
	if b, err := exec.Command(goCmd, "build", "-o", bin, "github.com/sluice-dtn/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	base := "http://" + addr
	server := start(t, bin, "serve", "--listen", addr, "--data-dir", data, "--heartbeat-timeout", "3", "--sample-every", "1")
	waitHTTP(t, base+"/healthz", server)
	admin := readToken(t, filepath.Join(data, "admin.token"))
	join := readToken(t, filepath.Join(data, "join.token"))
	roots := map[string]string{}
	// a4 serves at 8 MB/s (the testbed's emulation), so that a job from
	// it runs long enough for the page to show its progress advance.
	slow := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(slow, []byte(`{"capacity_bps": 8000000}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a1", "a2", "a4"} {
		roots[name] = filepath.Join(dir, name)
		os.MkdirAll(roots[name], 0o755)
		a := freeAddr(t)
		args := []string{"agent", "--listen", a, "--root", roots[name], "--name", name, "--server", base, "--join-token", "@" + filepath.Join(data, "join.token")}
		if name == "a4" {
			args = append(args, "--emulate", slow)
		}
		p := start(t, bin, args...)
		// It listens, then says so.
		if !p.WaitFor(20*time.Second, " serving ") {
			t.Fatalf("agent %s does not serve\n%s", name, p.String())
		}
	}
	// a3 registers and then falls silent: once it is down, a job towards
	// it stays active, for the page to cancel.
	call(t, base, join, "POST", "/v1/agents/register", map[string]any{"name": "a3", "url": "http://127.0.0.1:9"}, nil)
	waitFor(t, 20*time.Second, "a1 and a2 up, a3 down", func() bool {
		var es []struct {
			Name string
			Up   bool
		}
		call(t, base, admin, "GET", "/v1/endpoints", nil, &es)
		up := map[string]bool{}
		for _, e := range es {
			up[e.Name] = e.Up
		}
		_, has3 := up["a3"]
		return up["a1"] && up["a2"] && up["a4"] && has3 && !up["a3"]
	})

	files := func(prefix, dst string, n int) []map[string]any {
		var fs []map[string]any
		for i := 0; i < n; i++ {
			rel := fmt.Sprintf("%s/%02d", prefix, i)
			b := make([]byte, 256<<10)
			rand.Read(b)
			os.MkdirAll(filepath.Join(roots["a1"], prefix), 0o755)
			if err := os.WriteFile(filepath.Join(roots["a1"], rel), b, 0o644); err != nil {
				t.Fatal(err)
			}
			fs = append(fs, map[string]any{"source": "sluice://a1/" + rel, "destination": "sluice://" + dst + "/" + rel})
		}
		return fs
	}
	type job struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	var done, held, mine job
	call(t, base, admin, "POST", "/v1/jobs", map[string]any{"label": "finished-job", "files": files("fin", "a2", 4)}, &done)
	waitFor(t, 30*time.Second, "the finished job", func() bool {
		call(t, base, admin, "GET", fmt.Sprintf("/v1/jobs/%d", done.ID), nil, &done)
		return done.State == "done"
	})
	call(t, base, admin, "POST", "/v1/jobs", map[string]any{"label": "held-job", "files": files("held", "a3", 3)}, &held)
	// A running job: 1 GiB from a4 at 8 MB/s, over two minutes, so that it
	// is still running when the page looks at it on a slow machine (a
	// 20-second job had finished by then on CI). The file is sparse: it
	// costs no disk on the source and no time to create.
	if f, err := os.Create(filepath.Join(roots["a4"], "big")); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	} else if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A job of 150 files held towards a3, whose page lists them 100 at a
	// time.
	var paged job
	var pf []map[string]any
	for i := 0; i < 150; i++ {
		pf = append(pf, map[string]any{"source": fmt.Sprintf("sluice://a1/paged/%03d", i), "destination": fmt.Sprintf("sluice://a3/paged/%03d", i), "size": 1})
	}
	call(t, base, admin, "POST", "/v1/jobs", map[string]any{"label": "paged-job", "files": pf}, &paged)
	var running job
	call(t, base, admin, "POST", "/v1/jobs", map[string]any{"label": "running-job", "files": []map[string]any{{"source": "sluice://a4/big", "destination": "sluice://a2/big"}}}, &running)
	// The mixed job: four files done, one failed (its expected checksum
	// is wrong), one still running (1 GiB from a4 at 8 MB/s).
	var mixed job
	mf := files("mixed", "a2", 5)
	mf[4]["checksum"] = "adler32:00000001"
	mf = append(mf, map[string]any{"source": "sluice://a4/big", "destination": "sluice://a2/mixed/big"})
	call(t, base, admin, "POST", "/v1/jobs", map[string]any{"label": "mixed-job", "files": mf}, &mixed)
	waitFor(t, 30*time.Second, "the mixed job: 4 files done, 1 failed, 1 running", func() bool {
		var j struct {
			State       string
			FilesDone   int `json:"files_done"`
			FilesFailed int `json:"files_failed"`
		}
		call(t, base, admin, "GET", fmt.Sprintf("/v1/jobs/%d", mixed.ID), nil, &j)
		return j.State == "active" && j.FilesDone == 4 && j.FilesFailed == 1
	})
	var alice struct{ Token string }
	call(t, base, admin, "PUT", "/v1/access", map[string]any{"rules": []map[string]any{
		{"endpoint": "*", "path": "/", "user": "*", "access": "write"}}}, nil)
	call(t, base, admin, "POST", "/v1/tokens", map[string]any{"user": "alice", "vo": "physics"}, &alice)
	call(t, base, alice.Token, "POST", "/v1/jobs", map[string]any{"label": "alice-job", "files": files("alice", "a2", 2)}, &mine)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "browser.mjs"))
	cmd.Env = append(os.Environ(),
		"BASE_URL="+base, "ADMIN_TOKEN="+admin, "USER_TOKEN="+alice.Token, "USER_NAME=alice",
		fmt.Sprintf("DONE_JOB=%d", done.ID), fmt.Sprintf("HELD_JOB=%d", held.ID), fmt.Sprintf("USER_JOB=%d", mine.ID),
		fmt.Sprintf("RUNNING_JOB=%d", running.ID), fmt.Sprintf("PAGED_JOB=%d", paged.ID), fmt.Sprintf("MIXED_JOB=%d", mixed.ID),
		"CHROMIUM="+chromium, "PW_DIR="+deps, "OUT_DIR="+out)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		t.Log(l)
	}
	if err != nil {
		t.Fatalf("browser script: %v\nserver:\n%s", err, server.String())
	}
	call(t, base, admin, "GET", fmt.Sprintf("/v1/jobs/%d", held.ID), nil, &held)
	if held.State != "canceled" {
		t.Errorf("the held job is %s after the page canceled it", held.State)
	}
}

func start(t *testing.T, bin string, args ...string) *testout.Buffer {
	t.Helper()
	out := &testout.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return out
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHTTP(t *testing.T, url string, p *testout.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			return
		}
	}
	t.Fatalf("%s did not answer\n%s", url, p.String())
}

func readToken(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func call(t *testing.T, base, token, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode >= 300 {
		t.Fatalf("%s %s: %s\n%s", method, path, r.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
