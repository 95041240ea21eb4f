package wan

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestUpAgainAndAfterKill: a second Up of the running profile keeps the
// running forwarder; after a kill -9 of the forwarder, Up removes what it
// left and brings up a working network; Close leaves nothing behind.
func TestUpAgainAndAfterKill(t *testing.T) {
	needRoot(t)
	needTools(t, "ping")
	ctx := context.Background()
	p, err := LoadProfile("campus")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Forwarder = detached
	n1, err := Up(ctx, p, o)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	pid := n1.PID()
	if pid == os.Getpid() || !alive(pid) {
		t.Fatalf("forwarder pid %d: want a live process of its own", pid)
	}
	n2, err := Up(ctx, p, o)
	if err != nil {
		t.Fatal(err)
	}
	if n2.PID() != pid {
		t.Errorf("a second up of the same profile started forwarder %d, want %d kept", n2.PID(), pid)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := n1.Exec(ctx, "a", "ping", "-c", "1", "-W", "1", "b"); err == nil {
		t.Fatal("ping worked with the forwarder killed")
	}
	// A namespace of the same prefix that no profile names (a leftover of
	// some other run) goes too.
	if _, err := ip(ctx, "netns", "add", testPrefix+"zz"); err != nil {
		t.Fatal(err)
	}
	n3, err := Up(ctx, p, o)
	if err != nil {
		t.Fatalf("up after kill -9 of the forwarder: %v", err)
	}
	if n3.PID() == pid {
		t.Fatal("up after the kill reused the dead forwarder")
	}
	if out, err := n3.Exec(ctx, "client", "ping", "-c", "1", "-W", "2", "b"); err != nil {
		t.Fatalf("ping after the second up: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(netnsDir, testPrefix+"zz")); err == nil {
		t.Error("the stale namespace slct-zz survived up")
	}
	if err := n3.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := stale(testPrefix); len(left) > 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
	if alive(n3.PID()) {
		t.Errorf("forwarder %d still runs after Close", n3.PID())
	}
	if _, err := os.Stat(stateFile(o.withDefaults())); err == nil {
		t.Error("state file left after Close")
	}
	for _, h := range p.Hosts {
		if _, err := os.Stat(filepath.Join("/etc/netns", testPrefix+h.Name)); err == nil {
			t.Errorf("/etc/netns/%s%s left after Close", testPrefix, h.Name)
		}
	}
}

func TestUpWithoutRootRefuses(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root: the refusal without root cannot be seen")
	}
	p, _ := LoadProfile("wan-untuned")
	if _, err := Up(context.Background(), p, testOptions(t)); err != ErrNotRoot {
		t.Fatalf("up without root: %v, want ErrNotRoot", err)
	}
}
