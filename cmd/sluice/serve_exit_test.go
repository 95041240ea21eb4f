package main

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// runSluice runs the sluice command args in a child process (this test
// binary, see TestMain) and returns its output and exit status, or fails
// the test if it runs longer than limit.
func runSluice(t *testing.T, limit time.Duration, args ...string) (string, int) {
	t.Helper()
	return runSluiceEnv(t, limit, nil, args...)
}

// runSluiceEnv is runSluice with env added to the child's environment.
func runSluiceEnv(t *testing.T, limit time.Duration, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "SLUICE_TEST_RUN="+strings.Join(args, "\x1f"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("sluice %s still runs after %s; output:\n%s", strings.Join(args, " "), limit, out)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestServeFatalErrorExitsNonZero: a server whose loop cannot start (a
// damaged database: it opens, but the loop cannot load its state) exits
// at once with a non-zero status and says why. Before, it logged
// "ERROR stopping", waited 20 s for the loop that had already returned,
// and exited 0, so a supervisor (systemd Restart=on-failure) neither
// restarted it nor reported a failure.
func TestServeFatalErrorExitsNonZero(t *testing.T) {
	// damage runs SQL on a first start's database behind the store's back.
	damage := func(sqlText string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			db := filepath.Join(dir, "sluice.db")
			st, err := store.Open(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			raw, err := sql.Open("sqlite", db)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.Exec(sqlText); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"observations table gone", damage("DROP TABLE observations"), "observations"},
		{"endpoints table gone", damage("DROP TABLE endpoints"), "endpoints"},
		// The database lost, an earlier server's tokens still there
		// (server.checkNotRestart).
		{"earlier tokens, no database", func(t *testing.T, dir string) {
			for _, f := range []string{"admin.token", "join.token"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("old\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}, "admin.token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			start := time.Now()
			out, code := runSluice(t, 60*time.Second, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
			if code == 0 {
				t.Errorf("exit status 0 after a fatal error; output:\n%s", out)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s to exit after a fatal error at start", d.Round(time.Second))
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the output does not say what failed (%q):\n%s", tc.want, out)
			}
		})
	}
}

// TestServeSIGTERMExitsZero: a server told to stop (SIGTERM, as a
// supervisor does) stops its loop and exits 0, and a server whose stop is
// not clean (its loop does not return in time) does not exit 0.
func TestServeSIGTERMExitsZero(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startProc(t, "serve", "--listen", addr, "--data-dir", dir)
	waitListening(t, addr, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit status 0; output:\n%s", err, p.output())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after SIGTERM; output:\n%s", p.output())
	}
	p.cmd = nil // waited for: nothing left to kill

	// A loop that never returns: the stop waits its bound, then fails.
	ctx, stop := context.WithCancel(context.Background())
	stop()
	hs := &http.Server{}
	err := stopServe(ctx, stop, hs, make(chan error), make(chan error), slog.New(slog.DiscardHandler), 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not stop") {
		t.Errorf("a loop that does not stop: %v, want an error saying so", err)
	}
}

// TestServeSaysWhereTokensAre: a first start that fails after writing
// the admin and join tokens (its port is taken) leaves them in the data
// directory, and the next start, which succeeds, says where they are.
// Before, only a first start named them, so the retry said nothing and
// the admin token's file went unmentioned.
func TestServeSaysWhereTokensAre(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out, code := runSluice(t, 30*time.Second, "serve", "--listen", taken.Addr().String(), "--data-dir", dir)
	if code == 0 || !strings.Contains(out, "address already in use") {
		t.Fatalf("serve on a taken port: exit %d\n%s", code, out)
	}
	admin, join := filepath.Join(dir, "admin.token"), filepath.Join(dir, "join.token")
	for _, f := range []string{admin, join} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the failed first start wrote no %s (%v): nothing to test", f, err)
		}
	}
	p := startProc(t, "serve", "--listen", freeAddr(t), "--data-dir", dir)
	if !p.waitOutput(20*time.Second, "admin API token (of the first start) in "+admin+"\n", "agents join with the token in "+join+"\n") {
		t.Errorf("the retry does not say where the tokens are:\n%s", p.output())
	}
}
