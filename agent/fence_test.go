package agent

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
)

// TestFence: a server that lost its lease (an older term of the same
// partition) can neither put a file in place, nor remove it, nor write
// into it, once the new owner has written it; the new owner can, as can a
// writer of another partition and a client that sends no fence (sluice
// cp). The refusal reaches the client as backend.ErrFenced, so the
// server leaves the task to its new owner.
func TestFence(t *testing.T) {
	e := newEnv(t, "d", nil)
	c, err := sluice.New("http://"+e.addr(), e.token("write", "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	old := backend.WithFence(bg, backend.Fence{Partition: "src-a", Term: 4})
	cur := backend.WithFence(bg, backend.Fence{Partition: "src-a", Term: 5})
	other := backend.WithFence(bg, backend.Fence{Partition: "src-b", Term: 1})
	write := func(ctx context.Context, p, s string) error {
		return c.WriteAt(ctx, p, 0, strings.NewReader(s), int64(len(s)))
	}
	// The old owner writes first (its term is the newest the file has
	// seen), then the new owner takes over and writes.
	if err := write(old, "/in/.f.part", "AAAA"); err != nil {
		t.Fatalf("first write under term 4: %v", err)
	}
	if err := c.Truncate(cur, "/in/.f.part", 4); err != nil {
		t.Fatalf("term 5 after term 4: %v", err)
	}
	if err := write(cur, "/in/.f.part", "BBBB"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"rename", func() error { return c.Rename(old, "/in/.f.part", "/in/f") }},
		{"remove", func() error { return c.Remove(old, "/in/.f.part") }},
		{"write", func() error { return write(old, "/in/.f.part", "CCCC") }},
		{"truncate", func() error { return c.Truncate(old, "/in/.f.part", 0) }},
	} {
		err := tc.do()
		if !errors.Is(err, backend.ErrFenced) {
			t.Errorf("%s under the stale term: %v, want ErrFenced", tc.name, err)
		}
	}
	if got := e.read("in/.f.part"); got != "BBBB" {
		t.Fatalf("after the stale requests the file holds %q, want the new owner's BBBB", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, "in/f")); !os.IsNotExist(err) {
		t.Fatalf("the stale rename put the file in place: %v", err)
	}
	if !strings.Contains(e.logs.String(), "fenced") {
		t.Error("a refusal is not logged")
	}
	// The new owner renames; the fence does not follow the file.
	if err := c.Rename(cur, "/in/.f.part", "/in/f"); err != nil {
		t.Fatalf("rename under the current term: %v", err)
	}
	if fh, err := os.Open(filepath.Join(e.root, "in/f")); err == nil {
		if v, ok, _ := getXattr(fh, fenceXattr); ok && v != "" {
			t.Errorf("the file put in place keeps fence %q", v)
		}
		fh.Close()
	}
	// Another partition's fence and no fence at all are not compared.
	if err := write(cur, "/in/.g.part", "1"); err != nil {
		t.Fatal(err)
	}
	if err := write(other, "/in/.g.part", "2"); err != nil {
		t.Errorf("another partition's writer: %v", err)
	}
	if err := write(bg, "/in/.g.part", "3"); err != nil {
		t.Errorf("a writer without a fence: %v", err)
	}
	// A malformed fence is the request's error.
	r := e.raw("DELETE", "/v1/files/in/f", e.token("write", "/"), map[string]string{sluice.FenceHeader: "x:y"}, "")
	if r.status != 400 {
		t.Errorf("malformed fence: %v, want 400", r)
	}
	// A fence past fenceMaxAge is not enforced (a database started
	// afresh counts terms from 1 again).
	long := e.tokenFor(auth.Claims{Sub: "test", Scope: "write", Prefix: "/", Aud: e.name, Exp: time.Now().Add(3 * time.Hour).Unix()})
	if c, err = sluice.New("http://"+e.addr(), long, nil); err != nil {
		t.Fatal(err)
	}
	e.s.now = func() time.Time { return time.Now().Add(fenceMaxAge + time.Minute) }
	if err := c.Remove(backend.WithFence(bg, backend.Fence{Partition: "src-b", Term: 0}), "/in/.g.part"); err != nil {
		t.Errorf("removal under an old fence past its age: %v", err)
	}
}

// TestFencePullBatch: in a pull batch and a rename batch each file
// carries its own fence; a file a newer owner wrote is neither replaced
// nor renamed, and the others of the batch go through.
func TestFencePullBatch(t *testing.T) {
	src, dst, _, dstTok, srcTok := pullSetup(t, 1<<10)
	src.write("data/a", "new a")
	src.write("data/b", "new b")
	c, err := sluice.New("http://"+dst.addr(), dstTok, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The new owner (term 7) has written .b already.
	newer := backend.WithFence(context.Background(), backend.Fence{Partition: "s", Term: 7})
	if err := c.WriteAt(newer, "/in/.b", 0, strings.NewReader("owner's b"), 9); err != nil {
		t.Fatal(err)
	}
	stale := backend.Fence{Partition: "s", Term: 6}.String()
	res := pullBatchReply(t, dst.raw("POST", "/v1/pullbatch", dstTok, nil, jsonBody(sluice.PullBatchRequest{
		Source: "sluice://" + src.addr(), Token: srcTok, Checksum: "crc32c",
		Files: []sluice.PullBatchFile{{Src: "/data/a", Dst: "/in/.a", Size: 5, Fence: stale}, {Src: "/data/b", Dst: "/in/.b", Size: 5, Fence: stale}},
	})))
	if res[0].Error != "" || res[1].Kind != "fenced" {
		t.Fatalf("pull batch results %+v: want the first written, the second fenced", res)
	}
	if dst.read("in/.a") != "new a" || dst.read("in/.b") != "owner's b" {
		t.Fatalf("files hold %q and %q", dst.read("in/.a"), dst.read("in/.b"))
	}
	rr, err := c.Renames(context.Background(), []sluice.RenamePair{{From: "/in/.a", To: "/in/a", Fence: stale}, {From: "/in/.b", To: "/in/b", Fence: stale}})
	if err != nil {
		t.Fatal(err)
	}
	if rr[0].Err() != nil || !errors.Is(rr[1].Err(), backend.ErrFenced) {
		t.Fatalf("renames: %v, %v; want the first done, the second fenced", rr[0].Err(), rr[1].Err())
	}
	if dst.read("in/a") != "new a" || dst.read("in/.b") != "owner's b" {
		t.Fatal("renames did the wrong thing")
	}
}

// TestFenceInMemory: where the file system keeps no extended attributes
// (or the agent may not set them on a file), fences are kept in memory
// and enforced the same way, and forgotten with the file.
func TestFenceInMemory(t *testing.T) {
	e := newEnv(t, "d", nil)
	e.s.fences.get = func(*os.File, string) (string, bool, error) { return "", false, nil }
	e.s.fences.set = func(*os.File, string, string) (bool, error) { return false, nil }
	c, err := sluice.New("http://"+e.addr(), e.token("write", "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	cur := backend.WithFence(bg, backend.Fence{Partition: "p", Term: 3})
	old := backend.WithFence(bg, backend.Fence{Partition: "p", Term: 2})
	if err := c.WriteAt(cur, "/.x.part", 0, strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(old, "/.x.part", "/x"); !errors.Is(err, backend.ErrFenced) {
		t.Fatalf("stale rename with fences in memory: %v, want ErrFenced", err)
	}
	if err := c.Rename(cur, "/.x.part", "/x"); err != nil {
		t.Fatal(err)
	}
	e.s.fences.mu.Lock()
	n := len(e.s.fences.mem)
	e.s.fences.mu.Unlock()
	if n != 0 {
		t.Errorf("%d fences still in memory after the rename", n)
	}
}

// TestFenceStopsStaleWrite: a write admitted under an old term and still
// in progress (its writer paused mid-body) when the new owner's first
// write arrives is stopped, and the new owner's write waits until it has
// returned: no byte of the stale writer lands after the new owner's, and
// the stale writer is told it was fenced.
func TestFenceStopsStaleWrite(t *testing.T) {
	e := newEnv(t, "d", nil)
	c, err := sluice.New("http://"+e.addr(), e.token("write", "/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	old := backend.WithFence(bg, backend.Fence{Partition: "p", Term: 4})
	cur := backend.WithFence(bg, backend.Fence{Partition: "p", Term: 5})
	const size = 256 << 10
	pr, pw := io.Pipe()
	staleDone := make(chan error, 1)
	go func() { staleDone <- c.WriteAt(old, "/in/.f.part", 0, pr, size) }()
	// The stale writer sends half its body, then pauses. (Some of it may
	// wait in the client's buffers; a quarter is enough to have landed.)
	go pw.Write([]byte(strings.Repeat("A", size/2)))
	landed := func() int {
		b, _ := os.ReadFile(filepath.Join(e.root, "in/.f.part"))
		return strings.Count(string(b), "A")
	}
	deadline := time.Now().Add(10 * time.Second)
	for landed() < size/4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := landed(); got < size/4 {
		t.Fatalf("the stale write landed %d bytes, want %d before the takeover", got, size/4)
	}
	start := time.Now()
	if err := c.WriteAt(cur, "/in/.f.part", 0, strings.NewReader(strings.Repeat("B", size)), size); err != nil {
		t.Fatalf("the new owner's write: %v", err)
	}
	if took := time.Since(start); took > staleWriteWait/2 {
		t.Errorf("the new owner's write took %v: the stale write was not stopped, only waited out", took)
	}
	// The stale writer wakes up and sends the rest.
	go func() { pw.Write([]byte(strings.Repeat("A", size/2))); pw.Close() }()
	t.Cleanup(func() { pr.Close() })
	select {
	case err := <-staleDone:
		if err == nil {
			t.Error("the stale write succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stale write never returned")
	}
	time.Sleep(100 * time.Millisecond)
	if got := landed(); got != 0 {
		t.Fatalf("after the takeover the file holds %d A bytes; want only the new owner's", got)
	}
	if !strings.Contains(e.logs.String(), "took over") {
		t.Errorf("the stopped write is not logged:\n%s", e.logs.String())
	}
}
