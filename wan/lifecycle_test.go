package wan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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

	// Killed through a pidfd, which then says when the process has
	// exited: no polling, and no other process's PID reused meanwhile.
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}, 10_000)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Poll([]unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}, 10_000)
	}
	if err != nil || n != 1 {
		t.Fatalf("the forwarder did not exit within 10 s of kill -9 (%v)", err)
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
