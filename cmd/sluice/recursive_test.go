package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceRecursive: `sluice submit -r` copies a directory whole. The
// service lists it a page at a time (here 5 entries a page) and its
// files start while it lists; a kill -9 of the server in the middle of
// the listing loses no file and adds none twice (the listing resumes from
// the last page recorded); every file lands verified where cp -r puts it,
// empty directories are made, and an entry that cannot be copied (a
// broken link) is a failed file that says why.
func TestServiceRecursive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2, "--list-page", "5")
	ctx := context.Background()
	var want []string
	for d := range 6 {
		for f := range 120 {
			rel := fmt.Sprintf("run/d%d/sub%d/f%03d", d, f%3, f)
			if f == 7 {
				rel = fmt.Sprintf("run/d%d/a name with spaces", d)
			}
			c.file("a1", rel, int64(100+f*37), uint64(1000*d+f))
			want = append(want, strings.TrimPrefix(rel, "run/"))
		}
	}
	os.MkdirAll(c.path("a1", "run/empty/inner"), 0o755)
	if err := os.Symlink("nowhere", c.path("a1", "run/d0/broken")); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "submit", "--server", "http://"+c.addr, "--token", c.adminTo, "-r", "sluice://a1/run", "sluice://a2/copy")
	if err != nil {
		t.Fatalf("submit -r: %v\n%s", err, out)
	}
	var id int64
	if _, err := fmt.Sscan(strings.TrimSpace(out), &id); err != nil {
		t.Fatalf("submit printed %q", out)
	}
	// Kill the server once some files are listed and the listing is not
	// over.
	killed := false
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		j, err := c.admin.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !j.Listing {
			t.Logf("the listing ended before the kill (%d files)", j.Files)
			break
		}
		if j.Files > 0 {
			t.Logf("kill -9 of the server with %d of %d files listed", j.Files, len(want)+1)
			c.server.restart()
			waitListening(t, c.addr, c.server)
			killed = true
			break
		}
	}
	j := c.waitJob(c.admin, id, 3*time.Minute)
	if j.State != store.StateFailed || j.Files != len(want)+1 || j.FilesDone != len(want) || j.FilesFailed != 1 || j.Listing {
		t.Errorf("job: %s, %d files (%d done, %d failed), listing %v; want failed for the broken link, %d files, %d done",
			j.State, j.Files, j.FilesDone, j.FilesFailed, j.Listing, len(want)+1, len(want))
	}
	fs, err := c.admin.AllFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f.Source] {
			t.Errorf("%s listed twice", f.Source)
		}
		seen[f.Source] = true
		if strings.HasSuffix(f.Source, "/broken") && (f.State != store.StateFailed || !strings.Contains(f.Error, "not copied: a symbolic link that is broken")) {
			t.Errorf("the broken link: %s %q", f.State, f.Error)
		}
	}
	for _, rel := range want {
		if !sameContent(t, c.path("a1", "run/"+rel), c.path("a2", "copy/"+rel)) {
			t.Errorf("copy/%s is not run/%s", rel, rel)
		}
	}
	if fi, err := os.Stat(c.path("a2", "copy/empty/inner")); err != nil || !fi.IsDir() {
		t.Errorf("the empty directory was not made: %v", err)
	}
	if parts, _ := filepath.Glob(c.path("a2", "copy/d*/sub*/.*")); len(parts) > 0 {
		t.Errorf("temporary files left: %v", parts)
	}
	t.Logf("killed mid-listing: %v", killed)

	// Two directories and a file in one job.
	c.file("a1", "more/x/one", 10, 1)
	c.file("a1", "more/y/sub/two", 20, 2)
	c.file("a1", "single", 30, 3)
	mixed, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: "sluice://a1/more/x", Destination: "sluice://a2/mx", Recursive: true},
		{Source: "sluice://a1/single", Destination: "sluice://a2/single"},
		{Source: "sluice://a1/more/y", Destination: "sluice://a2/my", Recursive: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if mixed = c.waitJob(c.admin, mixed.ID, time.Minute); mixed.State != store.StateDone || mixed.Files != 3 || mixed.FilesDone != 3 {
		t.Errorf("two directories and a file: job %s, %d of %d files done", mixed.State, mixed.FilesDone, mixed.Files)
	}
	for src, dst := range map[string]string{"more/x/one": "mx/one", "more/y/sub/two": "my/sub/two", "single": "single"} {
		if !sameContent(t, c.path("a1", src), c.path("a2", dst)) {
			t.Errorf("%s is not %s", dst, src)
		}
	}
	// Items that would read what another writes are refused.
	for _, files := range [][]api.FileIn{
		{{Source: "sluice://a1/more", Destination: "sluice://a2/m", Recursive: true}, {Source: "sluice://a2/m/x", Destination: "sluice://a1/z", Recursive: true}},
		{{Source: "sluice://a1/more/x", Destination: "sluice://a2/same", Recursive: true}, {Source: "sluice://a1/more/y", Destination: "sluice://a2/same/y", Recursive: true}},
		{{Source: "sluice://a1/more", Destination: "sluice://a2/m", Recursive: true}, {Source: "sluice://a2/m/f", Destination: "sluice://a1/f"}},
		{{Source: "sluice://a1/more", Destination: "sluice://a2/m", Recursive: true}, {Source: "sluice://a1/single", Destination: "sluice://a1/more/single"}},
	} {
		if _, _, err := c.admin.Submit(ctx, api.JobIn{Files: files}); status(err) != http.StatusUnprocessableEntity {
			t.Errorf("%+v: %v, want 422", files, err)
		}
	}

	// A directory that is not there: the job fails, and says why.
	bad, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/nope", Destination: "sluice://a2/nope", Recursive: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if bad = c.waitJob(c.admin, bad.ID, time.Minute); bad.State != store.StateFailed || !strings.Contains(bad.ListingError, "not found") {
		t.Errorf("a missing directory: job %s, listing error %q; want failed, saying it is not found", bad.State, bad.ListingError)
	}
}

// TestPrintJobListing: `sluice status` says that a directory is being
// listed (the count is of the files found so far), or why its listing
// stopped, and a job's sync level.
func TestPrintJobListing(t *testing.T) {
	for _, tc := range []struct {
		j    api.JobOut
		want string
	}{
		{api.JobOut{Files: 10, FilesDone: 3, Listing: true}, "3 done, 0 failed, 0 canceled, of 10 found so far (listing the directory)"},
		{api.JobOut{Files: 1, FilesFailed: 1, ListingError: "sluice list /nope: not found"}, "(the listing stopped: sluice list /nope: not found)"},
		{api.JobOut{Files: 2, SyncLevel: "checksum"}, "sync   checksum: a file already there that matches by this test is kept"},
	} {
		var b strings.Builder
		printJob(&b, tc.j)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("status of %+v:\n%s\nwant it to say %q", tc.j, b.String(), tc.want)
		}
	}
}
