package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceExistingDestinations: a job replaces nothing at its
// destinations unless it asks. Sluice's default skips a file already in
// place (same size and checksum, recorded done with a note, counted) and
// fails one that differs; an FTS3 job fails every file whose destination
// exists unless params.overwrite; overwrite replaces. A destination that
// is a directory fails at once, without retries. Small files (pull
// batches) and one large file (the engine) alike.
func TestServiceExistingDestinations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	yes, no := true, false
	const big = 9 << 20 // above the batch limit: moved by the engine
	type want struct {
		state   string
		has     string // in the file's error, or note when done
		content string // "src": the source's bytes; "theirs": what was there
	}
	cases := []struct {
		name     string
		job      func(files []api.FileIn) api.JobIn
		same     want // identical file there
		differs  want // another file of the same size there
		bigDiff  want // another large file there
		dir      want // a directory there
		fresh    want // nothing there
		inPlace  int
		fts3Form bool
	}{
		{
			name: "sluice default", job: func(fs []api.FileIn) api.JobIn { return api.JobIn{Files: fs} },
			same:    want{store.StateDone, store.NoteInPlace, "src"},
			differs: want{store.StateFailed, "destination exists and differs from the source (same size, different checksum)", "theirs"},
			bigDiff: want{store.StateFailed, "destination exists and differs from the source", "theirs"},
			dir:     want{store.StateFailed, "is an existing directory", ""},
			fresh:   want{store.StateDone, "", "src"},
			inPlace: 1,
		},
		{
			name: "sluice overwrite", job: func(fs []api.FileIn) api.JobIn { return api.JobIn{Files: fs, Overwrite: &yes} },
			same:    want{store.StateDone, "", "src"},
			differs: want{store.StateDone, "", "src"},
			bigDiff: want{store.StateDone, "", "src"},
			dir:     want{store.StateFailed, "is an existing directory", ""},
			fresh:   want{store.StateDone, "", "src"},
		},
		{
			name: "fts3 default", fts3Form: true,
			job:     func(fs []api.FileIn) api.JobIn { return api.JobIn{Files: fs, Params: &api.ParamsIn{}} },
			same:    want{store.StateFailed, "destination exists; overwrite is not enabled", "src"},
			differs: want{store.StateFailed, "destination exists; overwrite is not enabled", "theirs"},
			bigDiff: want{store.StateFailed, "destination exists; overwrite is not enabled", "theirs"},
			dir:     want{store.StateFailed, "is an existing directory", ""},
			fresh:   want{store.StateDone, "", "src"},
		},
		{
			name: "fts3 overwrite false", fts3Form: true,
			job:     func(fs []api.FileIn) api.JobIn { return api.JobIn{Files: fs, Params: &api.ParamsIn{Overwrite: &no}} },
			same:    want{store.StateFailed, "destination exists; overwrite is not enabled", "src"},
			differs: want{store.StateFailed, "destination exists; overwrite is not enabled", "theirs"},
			bigDiff: want{store.StateFailed, "destination exists; overwrite is not enabled", "theirs"},
			dir:     want{store.StateFailed, "is an existing directory", ""},
			fresh:   want{store.StateDone, "", "src"},
		},
		{
			name: "fts3 overwrite true", fts3Form: true,
			job:     func(fs []api.FileIn) api.JobIn { return api.JobIn{Files: fs, Params: &api.ParamsIn{Overwrite: &yes}} },
			same:    want{store.StateDone, "", "src"},
			differs: want{store.StateDone, "", "src"},
			bigDiff: want{store.StateDone, "", "src"},
			dir:     want{store.StateFailed, "is an existing directory", ""},
			fresh:   want{store.StateDone, "", "src"},
		},
	}
	for k, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := fmt.Sprintf("ex%d/", k)
			names := []string{"same", "differs", "bigdiff", "dir", "fresh"}
			wants := []want{tc.same, tc.differs, tc.bigDiff, tc.dir, tc.fresh}
			var files []api.FileIn
			for i, n := range names {
				size := int64(200 << 10)
				if n == "bigdiff" {
					size = big
				}
				src := c.file("a1", d+n, size, uint64(10*k+i))
				dst := c.path("a2", d+n)
				switch n {
				case "same":
					b, _ := os.ReadFile(src)
					os.MkdirAll(filepath.Dir(dst), 0o755)
					os.WriteFile(dst, b, 0o644)
				case "differs", "bigdiff":
					c.file("a2", d+n, size, uint64(1000+10*k+i))
				case "dir":
					c.file("a2", d+n+"/inside", 10, 1)
				}
				f := api.FileIn{Source: "sluice://a1/" + d + n, Destination: "sluice://a2/" + d + n}
				if tc.fts3Form {
					f = api.FileIn{Sources: []string{f.Source}, Destinations: []string{f.Destination}}
				}
				files = append(files, f)
			}
			before := map[string][]byte{}
			for _, n := range names {
				before[n], _ = os.ReadFile(c.path("a2", d+n))
			}
			j, _, err := c.admin.Submit(ctx, tc.job(files))
			if err != nil {
				t.Fatal(err)
			}
			j = c.waitJob(c.admin, j.ID, 2*time.Minute)
			if j.FilesInPlace != tc.inPlace {
				t.Errorf("files_in_place %d, want %d", j.FilesInPlace, tc.inPlace)
			}
			fs, err := c.admin.AllFiles(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range fs {
				n, w := names[i], wants[i]
				said := f.Error
				if f.State == store.StateDone {
					said = f.Note
				}
				if f.State != w.state || (w.has == "" && said != "") || !strings.Contains(said, w.has) {
					t.Errorf("%s: %s %q, want %s saying %q", n, f.State, said, w.state, w.has)
				}
				if f.State == store.StateFailed && f.Attempts != 0 {
					t.Errorf("%s: failed after %d attempts; an existing destination is final", n, f.Attempts)
				}
				dst := c.path("a2", d+n)
				switch w.content {
				case "src":
					if !sameContent(t, c.path("a1", d+n), dst) {
						t.Errorf("%s: destination is not the source's file", n)
					}
				case "theirs":
					if got, _ := os.ReadFile(dst); string(got) != string(before[n]) {
						t.Errorf("%s: the file that was there was replaced", n)
					}
				}
			}
			if _, err := os.Stat(c.path("a2", d+"dir/inside")); err != nil {
				t.Errorf("the directory at a destination was touched: %v", err)
			}
			if parts, _ := filepath.Glob(c.path("a2", d+".*")); len(parts) > 0 {
				// Removed in the background, soon after.
				time.Sleep(3 * time.Second)
				if parts, _ = filepath.Glob(c.path("a2", d+".*")); len(parts) > 0 {
					t.Errorf("temporary files left: %v", parts)
				}
			}
		})
	}
}

// TestServiceFTS3Fields: FTS3 parameters and file fields Sluice does not
// honour are refused, or named in the answer's warnings (and by sluice
// submit on stderr), never ignored in silence; parameters at their "off"
// value ask for nothing and pass quietly.
func TestServiceFTS3Fields(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newClusterSerial(t, 2)
	c.file("a1", "fts/f", 1000, 1)
	fileJSON := `{"sources":["sluice://a1/fts/f"],"destinations":["sluice://a2/fts/%s"]%s}`
	cases := []struct {
		name, params, file string
		status             int      // 0: accepted
		warn               []string // in the warnings
		quiet              []string // not in them
	}{
		{name: "defaults as FTS3 clients send them",
			params: `"overwrite":false,"bring_online":-1,"copy_pin_lifetime":-1,"multihop":false,"reuse":null,"job_metadata":null,"id_generator":"standard","strict_copy":false,"max_time_in_queue":null`,
			quiet:  []string{"bring_online", "copy_pin_lifetime", "multihop", "reuse", "job_metadata", "id_generator", "strict_copy", "max_time_in_queue"}},
		{name: "harmless ones warned", params: `"job_metadata":{"exp":"cms"},"reuse":true,"timeout":3600,"fancy_new_thing":1`,
			file:  `,"metadata":{"k":"v"},"activity":"Production"`,
			warn:  []string{"params.reuse", "params.timeout", "params.fancy_new_thing", "files[].activity ignored (1 files)"},
			quiet: []string{"params.job_metadata", "files[].metadata"}}, // kept, and given back
		{name: "staging refused", params: `"bring_online":3600`, status: http.StatusUnprocessableEntity, warn: []string{"params.bring_online 3600: staging files from tape is not supported"}},
		{name: "multihop refused", params: `"multihop":true`, status: http.StatusUnprocessableEntity, warn: []string{"params.multihop"}},
		{name: "pin refused", params: `"copy_pin_lifetime":600`, status: http.StatusUnprocessableEntity, warn: []string{"params.copy_pin_lifetime"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"files":[`+fileJSON+`],"params":{%s}}`, fmt.Sprint(i), tc.file, tc.params)
			st, _, out := rawCall(t, http.MethodPost, "http://"+c.addr+"/v1/jobs", c.adminTo, body)
			if tc.status != 0 {
				if st != tc.status {
					t.Fatalf("status %d, want %d: %s", st, tc.status, out)
				}
				for _, w := range tc.warn {
					if !strings.Contains(out, w) {
						t.Errorf("refusal does not say %q: %s", w, out)
					}
				}
				return
			}
			if st != http.StatusCreated {
				t.Fatalf("status %d: %s", st, out)
			}
			for _, w := range tc.warn {
				if !strings.Contains(out, w) {
					t.Errorf("answer does not warn about %q: %s", w, out)
				}
			}
			for _, q := range tc.quiet {
				if strings.Contains(out, q) {
					t.Errorf("answer names %q, set to its off value: %s", q, out)
				}
			}
		})
	}
	// sluice submit -f passes the parameters on and prints the warnings.
	t.Setenv("SLUICE_SERVER", "http://"+c.addr)
	t.Setenv("SLUICE_TOKEN", c.adminTo)
	t.Setenv("SLUICE_CONFIG", filepath.Join(c.dir, "client.json"))
	job := filepath.Join(c.dir, "fts3.json")
	os.WriteFile(job, []byte(`{"files":[{"sources":["sluice://a1/fts/f"],"destinations":["sluice://a2/fts/cli"],"metadata":"x"}],"params":{"job_metadata":{"a":1},"overwrite":false}}`), 0o644)
	out, err := run(t, "submit", "-f", job)
	if err != nil {
		t.Fatalf("submit -f: %v\n%s", err, out)
	}
	// Metadata is kept and given back, so no warning names it.
	for _, w := range []string{"job_metadata", "metadata"} {
		if strings.Contains(out, w) {
			t.Errorf("sluice submit -f warns about %q, which is kept:\n%s", w, out)
		}
	}
	os.WriteFile(job, []byte(`{"files":[{"sources":["sluice://a1/fts/f"],"destinations":["sluice://a2/fts/cli2"]}],"params":{"bring_online":60}}`), 0o644)
	if out, err := run(t, "submit", "-f", job); err == nil || !strings.Contains(err.Error(), "bring_online") {
		t.Errorf("sluice submit -f with bring_online: %v\n%s", err, out)
	}
	// --overwrite on an FTS3 job file replaces, as params.overwrite would.
	os.WriteFile(job, []byte(`{"files":[{"sources":["sluice://a1/fts/f"],"destinations":["sluice://a2/fts/cli3"]}],"params":{}}`), 0o644)
	c.file("a2", "fts/cli3", 1000, 99)
	out, err = run(t, "submit", "-f", job, "--overwrite", "--json")
	if err != nil {
		t.Fatalf("submit -f --overwrite: %v\n%s", err, out)
	}
	var j api.JobOut
	if err := json.Unmarshal([]byte(out), &j); err != nil || !j.Overwrite || j.IfExists != "replace" {
		t.Fatalf("submit --overwrite --json: %v %+v", err, j)
	}
	if j = c.waitJob(c.admin, j.ID, time.Minute); j.State != store.StateDone || !sameContent(t, c.path("a1", "fts/f"), c.path("a2", "fts/cli3")) {
		t.Errorf("--overwrite job %s; the destination replaced: %v", j.State, sameContent(t, c.path("a1", "fts/f"), c.path("a2", "fts/cli3")))
	}
}

// TestServiceResubmitAfterCancel: a job canceled after some files were
// done, submitted again, copies only the others: the done files are
// recorded done with the note "already in place" and counted, and their
// destinations are not written again (the same inode: no rename).
func TestServiceResubmitAfterCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 1)
	c.addEmulated("src", `{"capacity_bps": 16e6}`) // 2 MB/s: the large file takes seconds
	ctx := context.Background()
	var job api.JobIn
	small := []string{"rs/s0", "rs/s1", "rs/s2", "rs/s3"}
	for i, n := range small {
		c.file("src", n, 64<<10, uint64(i))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://src/" + n, Destination: "sluice://a1/" + n})
	}
	c.file("src", "rs/big", 12<<20, 9)
	job.Files = append(job.Files, api.FileIn{Source: "sluice://src/rs/big", Destination: "sluice://a1/rs/big"})
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if j, err = c.admin.Job(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if j.FilesDone >= len(small) {
			break
		}
		if time.Now().After(deadline) || j.State != store.StateActive {
			t.Fatalf("the small files did not finish first: %+v", j)
		}
	}
	if j, err = c.admin.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if j.FilesDone != len(small) || j.FilesCanceled != 1 {
		t.Fatalf("after the cancel: %d done, %d canceled; the test needs the large file still running", j.FilesDone, j.FilesCanceled)
	}
	inode := map[string]uint64{}
	for _, n := range small {
		fi, err := os.Stat(c.path("a1", n))
		if err != nil {
			t.Fatal(err)
		}
		inode[n] = fi.Sys().(*syscall.Stat_t).Ino
	}
	j2, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	j2 = c.waitJob(c.admin, j2.ID, 2*time.Minute)
	if j2.State != store.StateDone || j2.FilesDone != len(job.Files) || j2.FilesInPlace != len(small) {
		t.Fatalf("resubmitted job %s: %d done, %d in place; want done, %d, %d", j2.State, j2.FilesDone, j2.FilesInPlace, len(job.Files), len(small))
	}
	fs, err := c.admin.AllFiles(ctx, j2.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		wantNote := ""
		if i < len(small) {
			wantNote = store.NoteInPlace
		}
		if f.State != store.StateDone || f.Note != wantNote {
			t.Errorf("file %d: %s, note %q; want done, note %q", i, f.State, f.Note, wantNote)
		}
	}
	for _, n := range small {
		fi, err := os.Stat(c.path("a1", n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Sys().(*syscall.Stat_t).Ino != inode[n] {
			t.Errorf("%s was written again", n)
		}
		if !sameContent(t, c.path("src", n), c.path("a1", n)) {
			t.Errorf("%s differs", n)
		}
	}
	if !sameContent(t, c.path("src", "rs/big"), c.path("a1", "rs/big")) {
		t.Error("the large file differs")
	}
}
