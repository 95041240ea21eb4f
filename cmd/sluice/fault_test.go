package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/internal/testout"
)

// TestMain lets the test binary act as `sluice agent` in a child process,
// so that fault tests can kill a real agent with SIGKILL, and as the
// forwarder of `sluice net up`.
func TestMain(m *testing.M) {
	// The forwarder `sluice net up` starts is this binary too, named by
	// its arguments (it inherits the SLUICE_TEST_RUN of the up).
	if len(os.Args) > 2 && os.Args[1] == "net" && os.Args[2] == "forward" {
		root := newRoot()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "sluice:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	if args := os.Getenv("SLUICE_TEST_RUN"); args != "" {
		root := newRoot()
		root.SetArgs(strings.Split(args, "\x1f"))
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "sluice:", err)
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	isolateConfig()
	os.Exit(m.Run())
}

// agentProc is an agent running in a child process.
type agentProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	root string
	key  string
	log  testout.Buffer
}

func startAgent(t *testing.T, addr, root, keyFile string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, addr: addr, root: root, key: keyFile}
	a.cmd = exec.Command(os.Args[0], "-test.run=^$")
	a.cmd.Env = append(os.Environ(), "SLUICE_TEST_RUN="+strings.Join([]string{"agent", "--listen", addr, "--root", root, "--name", "t", "--token-key", keyFile}, "\x1f"))
	a.cmd.Stdout, a.cmd.Stderr = &a.log, &a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ready once it says so: it listens before it prints the line.
	if a.log.WaitFor(5*time.Second, " serving ") {
		return a
	}
	a.cmd.Process.Kill()
	t.Fatalf("agent did not start: %s", a.log.String())
	return nil
}

func (a *agentProc) kill() {
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// fastRandom writes n pseudo-random bytes to p quickly (ChaCha8), so big
// test files do not take long to make.
func fastRandom(t *testing.T, p string, n int64, seed uint64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	buf := make([]byte, 1<<20)
	for left := n; left > 0; {
		k := min(left, int64(len(buf)))
		r.Read(buf[:k])
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		left -= k
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func sameContent(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err1 := os.Open(a)
	fb, err2 := os.Open(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("compare: %v %v", err1, err2)
	}
	defer fa.Close()
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, ea := fa.Read(ba)
		nb, eb := fb.Read(bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return ea == eb
		}
	}
}

func testKey(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	p := filepath.Join(dir, "key")
	k, err := auth.GenerateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, k
}

func agentBackend(t *testing.T, addr string, k []byte) *sluice.Backend {
	tok, err := auth.Mint(k, auth.Claims{Sub: "t", Scope: auth.ScopeRW, Prefix: "/", Aud: "*", Exp: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sluice.New("http://"+addr, tok, &http.Client{Transport: &http.Transport{DisableKeepAlives: false}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKillDestinationAgent copies a 1 GiB file to an agent and kills the
// agent with SIGKILL at a random point, 20 times. The copy keeps retrying
// while the agent is down and resumes from its checkpoints when a new
// agent comes up on the same port. Every run must end with identical
// content; the destination path must never hold a partial file; and the
// bytes sent again per kill must stay within about one checkpoint interval
// of throughput (the engine records written ranges every second) plus one
// sub-write per concurrent partial transfer in flight.
func TestKillDestinationAgent(t *testing.T) {
	size := int64(1 << 30)
	runs := 20
	if testing.Short() {
		size, runs = 64<<20, 5
	}
	work := t.TempDir()
	keyFile, k := testKey(t, work)
	src := filepath.Join(work, "src.bin")
	fastRandom(t, src, size, 7)
	dstRoot := filepath.Join(work, "dst")
	os.MkdirAll(dstRoot, 0o755)
	addr := freeAddr(t)
	r := rand.New(rand.NewPCG(1, 2))
	const cc, subWrite = 4, 16 << 20
	for run := 0; run < runs; run++ {
		a := startAgent(t, addr, dstRoot, keyFile)
		dst := agentBackend(t, addr, k)
		final := filepath.Join(dstRoot, "big.bin")
		os.Remove(final)
		type outcome struct {
			sum copyjob.Summary
			err error
		}
		done := make(chan outcome, 1)
		start := time.Now()
		// Kill at a random point while data moves: when the copy has
		// written between 5% and 90% of the file.
		at := int64(float64(size) * (0.05 + 0.85*r.Float64()))
		reached := make(chan struct{})
		var once sync.Once
		go func() {
			s, err := copyjob.Run(context.Background(),
				[]copyjob.Endpoint{localEndpoint(t, src)},
				copyjob.Endpoint{Backend: dst, Path: "/big.bin", URL: "sluice://" + addr + "/big.bin"},
				copyjob.Options{CC: cc, JournalDir: filepath.Join(work, "journal"), SubWrite: subWrite},
				func(p copyjob.Progress) {
					if p.Done >= at {
						once.Do(func() { close(reached) })
					}
				})
			done <- outcome{s, err}
		}()
		select {
		case <-reached:
		case o := <-done:
			t.Fatalf("run %d: the copy ended (%v) before reaching %d bytes", run, o.err, at)
		}
		a.kill()
		killedAt := time.Since(start)
		if _, err := os.Stat(final); err == nil {
			select {
			case <-done:
				t.Logf("run %d: finished before the kill at %v", run, killedAt)
				continue
			default:
				t.Fatalf("run %d: the destination path exists while the copy is unfinished", run)
			}
		}
		time.Sleep(200 * time.Millisecond)
		a = startAgent(t, addr, dstRoot, keyFile)
		var o outcome
		select {
		case o = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("run %d: the copy did not finish", run)
		}
		a.kill()
		if o.err != nil {
			t.Fatalf("run %d: copy failed after the agent came back: %v", run, o.err)
		}
		if !sameContent(t, src, final) {
			t.Fatalf("run %d: content differs", run)
		}
		rate := float64(size) / time.Since(start).Seconds()
		bound := int64(cc*subWrite) + int64(rate*1.5)
		if o.sum.Resent > bound {
			t.Errorf("run %d: re-sent %d MB after one kill, bound %d MB (a checkpoint interval of throughput and a sub-write per worker)", run, o.sum.Resent>>20, bound>>20)
		}
		t.Logf("run %d: killed at %v, re-sent %.1f MB, %d retries", run, killedAt.Round(time.Millisecond), float64(o.sum.Resent)/1e6, o.sum.Retries)
	}
}

func localEndpoint(t *testing.T, p string) copyjob.Endpoint {
	ep, err := (&cpFlags{}).endpoint(context.Background(), p, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestDiskFull copies more than the destination can hold (an 8 MiB tmpfs
// under a real agent): the copy fails with a clear "no space" error and a
// non-zero exit, and nothing is left at the destination path.
func TestDiskFull(t *testing.T) {
	work := t.TempDir()
	small := filepath.Join(work, "small")
	os.MkdirAll(small, 0o755)
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", small).Run(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): needs root", err)
	}
	defer exec.Command("umount", small).Run()
	keyFile, k := testKey(t, work)
	src := filepath.Join(work, "src.bin")
	fastRandom(t, src, 20<<20, 3)
	addr := freeAddr(t)
	a := startAgent(t, addr, small, keyFile)
	defer a.kill()
	_, err := copyjob.Run(context.Background(), []copyjob.Endpoint{localEndpoint(t, src)},
		copyjob.Endpoint{Backend: agentBackend(t, addr, k), Path: "/out.bin", URL: "sluice://" + addr + "/out.bin"},
		copyjob.Options{JournalDir: filepath.Join(work, "j")}, nil)
	if !errors.Is(err, backend.ErrNoSpace) {
		t.Fatalf("error %v, want no space", err)
	}
	if !strings.Contains(err.Error(), "no space") {
		t.Errorf("message %q does not say what happened", err)
	}
	if _, err := os.Stat(filepath.Join(small, "out.bin")); err == nil {
		t.Error("a partial file is at the destination path")
	}
	ents, _ := os.ReadDir(small)
	for _, e := range ents {
		t.Logf("left in the destination: %s", e.Name())
	}
	// From two replicas: the same error, and the partial file and its
	// journal are given back too (they held on to the space that ran out).
	jdir := filepath.Join(work, "jm")
	src2 := filepath.Join(work, "src2.bin")
	if b, err := os.ReadFile(src); err != nil || os.WriteFile(src2, b, 0o644) != nil {
		t.Fatal("second replica", err)
	}
	_, err = copyjob.RunMulti(context.Background(), []copyjob.Endpoint{localEndpoint(t, src), localEndpoint(t, src2)},
		copyjob.Endpoint{Backend: agentBackend(t, addr, k), Path: "/multi.bin", URL: "sluice://" + addr + "/multi.bin"},
		copyjob.MultiOptions{JournalDir: jdir, ProbeTime: 200 * time.Millisecond})
	if !errors.Is(err, backend.ErrNoSpace) {
		t.Errorf("from two replicas: %v, want no space", err)
	}
	if parts, _ := filepath.Glob(filepath.Join(small, ".multi.bin*")); len(parts) > 0 {
		t.Errorf("from two replicas, left in the destination: %v", parts)
	}
	if js, _ := filepath.Glob(filepath.Join(jdir, "*.journal")); len(js) > 0 {
		t.Errorf("from two replicas, journals left: %v", js)
	}
	// The command line says it too, with a non-zero exit.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+work, "SLUICE_TEST_RUN="+strings.Join([]string{"cp", "--token-key", keyFile, src, "sluice://" + addr + "/out2.bin"}, "\x1f"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no space") {
		t.Errorf("sluice cp on a full disk: exit %v, output %q", err, out)
	}
}
