package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceFenced: the service's runs carry their fence to the
// destination agent. Temporary files that a newer owner of the partition
// has written (a fence with a higher term, set here by hand) are neither
// replaced nor put in place, for a large file's run and for a small
// file's pull batch alike, and the server gives the partition up. Once
// the fences are gone (aged out, here removed), the server takes the
// partition back under a new term and finishes both files.
func TestServiceFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2, "--lease-ttl", "2")
	big := c.file("a1", "in/big.dat", 20<<20, 1)
	small := c.file("a1", "in/small.dat", 100<<10, 2)
	fence := []byte("99:a1@" + strconv.FormatInt(time.Now().Unix(), 10))
	var parts []string
	for i, name := range []string{"big.dat", "small.dat"} {
		// The tasks' own temporary files (engine.TempNameFor, tagged
		// with the task ID: the job below is the first in a fresh
		// store, so its tasks are 1 and 2, in order).
		p := c.path("a2", "out/."+name+".t"+strconv.Itoa(i+1)+".sluice-part")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("the newer owner's bytes"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(p, "user.sluice.fence", fence, 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
				t.Skipf("no user extended attributes here: %v", err)
			}
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: "sluice://a1/in/big.dat", Destination: "sluice://a2/out/big.dat"},
		{Source: "sluice://a1/in/small.dat", Destination: "sluice://a2/out/small.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.agents["a2"].waitOutput(20*time.Second, "fenced") || !c.server.waitOutput(20*time.Second, "another server schedules this partition") {
		t.Fatalf("no fenced refusal\nserver:\n%s\nagent a2:\n%s", c.server.output(), c.agents["a2"].output())
	}
	time.Sleep(time.Second)
	for _, p := range parts {
		if b, err := os.ReadFile(p); err != nil || string(b) != "the newer owner's bytes" {
			t.Errorf("%s: %q, %v: a stale run touched the newer owner's file", p, b, err)
		}
	}
	for _, name := range []string{"big.dat", "small.dat"} {
		if _, err := os.Stat(c.path("a2", "out/"+name)); !os.IsNotExist(err) {
			t.Errorf("out/%s was put in place under a stale fence (%v)", name, err)
		}
	}
	for _, p := range parts {
		if err := unix.Removexattr(p, "user.sluice.fence"); err != nil {
			t.Fatal(err)
		}
	}
	if j = c.waitJob(c.admin, j.ID, time.Minute); j.State != store.StateDone {
		t.Fatalf("job after the fences went: %+v\n%s", j, c.server.output())
	}
	if !sameContent(t, big, c.path("a2", "out/big.dat")) || !sameContent(t, small, c.path("a2", "out/small.dat")) {
		t.Fatal("copies differ from their sources")
	}
}
