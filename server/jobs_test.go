package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// TestFilesPageBounded: GET /v1/jobs/ID/files?limit=0 (the API allows 0,
// and the client sends no limit for "the server's default page") lists
// one page, not every file of the job: a job of a million files would be
// read into memory and sent whole.
func TestFilesPageBounded(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	const page = 1000 // FilesPage, the API's default
	tasks := make([]store.Task, page+5)
	for i := range tasks {
		tasks[i] = store.Task{Index: i, Src: "sluice://a/f", Dst: "sluice://b/f", SrcEndpoint: "a", DstEndpoint: "b", Size: 1, State: store.StateQueued}
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	s := &Server{st: st}
	for _, c := range []struct{ from, limit, want int }{
		{0, 0, page},
		{0, -1, page},
		{0, 10, 10},
		{page, 0, 5},
		{0, page + 5, page + 5},
	} {
		ts, err := s.Files(ctx, Caller{User: u}, j.ID, c.from, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != c.want {
			t.Errorf("Files(from %d, limit %d): %d files, want %d", c.from, c.limit, len(ts), c.want)
		}
	}
	// Another user's job is not found.
	bob, err := st.EnsureUser(ctx, "bob", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files(ctx, Caller{User: bob}, j.ID, 0, 0); err == nil {
		t.Error("bob listed alice's files")
	}
}
