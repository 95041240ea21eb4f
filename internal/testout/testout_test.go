package testout

import (
	"testing"
	"time"
)

// TestWaitFor: WaitFor returns as soon as a write completes what it
// waits for, and reports false when the time is up first.
func TestWaitFor(t *testing.T) {
	var b Buffer
	got := make(chan bool, 1)
	go func() { got <- b.WaitFor(time.Minute, "ready", "port") }()
	b.Write([]byte("listening on port 1\n"))
	select {
	case <-got:
		t.Fatal("WaitFor returned before every string was written")
	case <-time.After(10 * time.Millisecond):
	}
	b.Write([]byte("ready\n"))
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("WaitFor reported false with both strings written")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitFor did not wake at the write")
	}
	if b.WaitFor(time.Millisecond, "never") {
		t.Error("WaitFor found what was never written")
	}
	if s := b.String(); s != "listening on port 1\nready\n" {
		t.Errorf("String() = %q", s)
	}
}
