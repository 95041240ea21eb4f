package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
)

// TestBackupRestore follows the operator guide's backup and restore: a
// backup taken while the server runs, the database lost, the backup put
// in its place: the server starts, its jobs, users and tokens are there,
// and the agents work with it as before.
func TestBackupRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	c.file("a1", "d/f", 1<<20, 1)
	job, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/d/f", Destination: "sluice://a2/d/f"}}})
	if err != nil {
		t.Fatal(err)
	}
	if j := c.waitJob(c.admin, job.ID, 30*time.Second); j.State != "done" {
		t.Fatalf("job %s", j.State)
	}
	data := filepath.Join(c.dir, "data")
	backup := filepath.Join(c.dir, "backup.db")
	if out, err := run(t, "backup", "--data-dir", data, backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := run(t, "backup", "--data-dir", data, backup); err == nil {
		t.Fatalf("a second backup replaced the first:\n%s", out)
	}
	// The database is lost; the server, restarted, refuses to start
	// afresh; the backup, restored, brings everything back.
	c.server.kill()
	for _, f := range []string{"sluice.db", "sluice.db-wal", "sluice.db-shm"} {
		os.Remove(filepath.Join(data, f))
	}
	if out, code := runSluice(t, time.Minute, "serve", "--listen", freeAddr(t), "--data-dir", data); code == 0 {
		t.Fatalf("the server started afresh beside the old tokens:\n%s", out)
	}
	os.Remove(filepath.Join(data, "sluice.db")) // what the refused start made
	if err := os.Rename(backup, filepath.Join(data, "sluice.db")); err != nil {
		t.Fatal(err)
	}
	c.server.start()
	waitListening(t, c.addr, c.server)
	if j, err := c.admin.Job(ctx, job.ID); err != nil || j.State != "done" {
		t.Fatalf("after the restore the job is %+v, %v", j.State, err)
	}
	// The agents' keys come from the restored data key: a new job runs.
	c.file("a1", "d/g", 1<<20, 2)
	job2, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/d/g", Destination: "sluice://a2/d/g"}}})
	if err != nil {
		t.Fatal(err)
	}
	if j := c.waitJob(c.admin, job2.ID, 30*time.Second); j.State != "done" {
		t.Fatalf("a job after the restore: %s", j.State)
	}
	sameFile(t, c.path("a1", "d/g"), c.path("a2", "d/g"))
}
