package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/store"
)

// TestServiceSyncLevels: a job with a sync level (Globus's sync_level)
// copies exactly the files whose destination is missing or differs from
// the source by the level's test, replaces those, and keeps the others
// (done, "already in place", not a byte moved); a finished job submitted
// again with the checksum level keeps every file (the same inodes: no
// file was put in place again). Small files (pull batches) and a large one
// (the engine) alike; sync_level with overwrite false is refused.
func TestServiceSyncLevels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	const small, big = 200 << 10, 9 << 20 // big: above the batch limit, moved by the engine
	// What each level does with each file: keep (done, in place, the
	// destination's own bytes) or copy (the source's bytes).
	type files struct{ missing, same, older, sameSize, bigger, bigSameSize string }
	cases := []struct {
		level string
		want  files
	}{
		{"exists", files{"copy", "keep", "keep", "keep", "keep", "keep"}},
		{"size", files{"copy", "keep", "keep", "keep", "copy", "keep"}},
		{"mtime", files{"copy", "keep", "copy", "keep", "copy", "keep"}},
		{"checksum", files{"copy", "keep", "keep", "copy", "copy", "copy"}},
	}
	hour := time.Hour
	for k, tc := range cases {
		t.Run(tc.level, func(t *testing.T) {
			d := fmt.Sprintf("sync%d/", k)
			names := []string{"missing", "same", "older", "samesize", "bigger", "bigsamesize"}
			wants := []string{tc.want.missing, tc.want.same, tc.want.older, tc.want.sameSize, tc.want.bigger, tc.want.bigSameSize}
			var in []api.FileIn
			before := map[string][]byte{}
			for i, n := range names {
				size := int64(small)
				if n == "bigsamesize" {
					size = big
				}
				src := c.file("a1", d+n, size, uint64(100*k+i))
				dst := c.path("a2", d+n)
				srcTime := time.Now().Add(-24 * hour).Truncate(time.Second)
				if err := os.Chtimes(src, srcTime, srcTime); err != nil {
					t.Fatal(err)
				}
				dstTime := srcTime.Add(hour) // written after the source
				switch n {
				case "same", "older":
					b, _ := os.ReadFile(src)
					os.MkdirAll(filepath.Dir(dst), 0o755)
					os.WriteFile(dst, b, 0o644)
					if n == "older" {
						dstTime = srcTime.Add(-hour)
					}
				case "samesize", "bigsamesize":
					c.file("a2", d+n, size, uint64(5000+100*k+i))
				case "bigger":
					c.file("a2", d+n, size+1, uint64(5000+100*k+i))
				}
				if n != "missing" {
					if err := os.Chtimes(dst, dstTime, dstTime); err != nil {
						t.Fatal(err)
					}
				}
				before[n], _ = os.ReadFile(dst)
				in = append(in, api.FileIn{Source: "sluice://a1/" + d + n, Destination: "sluice://a2/" + d + n})
			}
			j, _, err := c.admin.Submit(ctx, api.JobIn{Files: in, SyncLevel: tc.level})
			if err != nil {
				t.Fatal(err)
			}
			j = c.waitJob(c.admin, j.ID, 2*time.Minute)
			if j.IfExists != "sync" || j.SyncLevel != tc.level {
				t.Errorf("the job says if_exists %q, sync_level %q", j.IfExists, j.SyncLevel)
			}
			fs, err := c.admin.AllFiles(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for i, f := range fs {
				n, w := names[i], wants[i]
				dst := c.path("a2", d+n)
				got, _ := os.ReadFile(dst)
				switch {
				case f.State != store.StateDone:
					t.Errorf("%s: %s (%s), want done", n, f.State, f.Error)
				case w == "keep" && (f.Note != store.NoteInPlace || string(got) != string(before[n])):
					t.Errorf("%s: note %q; want it kept, as it was, and noted %q", n, f.Note, store.NoteInPlace)
				case w == "copy" && (f.Note != "" || !sameContent(t, c.path("a1", d+n), dst)):
					t.Errorf("%s: note %q; want the source's bytes copied there", n, f.Note)
				}
				if w == "keep" {
					kept++
				}
			}
			if j.FilesInPlace != kept {
				t.Errorf("files_in_place %d, want %d", j.FilesInPlace, kept)
			}
			if tc.level != "checksum" {
				return
			}
			// Every destination is now the source's: the same job again
			// keeps every file, and puts none in place again.
			inodes := map[string]uint64{}
			for _, n := range names {
				fi, err := os.Stat(c.path("a2", d+n))
				if err != nil {
					t.Fatal(err)
				}
				inodes[n] = fi.Sys().(*syscall.Stat_t).Ino
			}
			again, _, err := c.admin.Submit(ctx, api.JobIn{Files: in, SyncLevel: tc.level})
			if err != nil {
				t.Fatal(err)
			}
			again = c.waitJob(c.admin, again.ID, 2*time.Minute)
			if again.FilesDone != len(names) || again.FilesInPlace != len(names) {
				t.Errorf("the rerun: %d done, %d in place; want all %d kept", again.FilesDone, again.FilesInPlace, len(names))
			}
			for _, n := range names {
				fi, err := os.Stat(c.path("a2", d+n))
				if err != nil || fi.Sys().(*syscall.Stat_t).Ino != inodes[n] {
					t.Errorf("%s: put in place again by the rerun (%v)", n, err)
				}
			}
		})
	}
	no := false
	_, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://a1/x", Destination: "sluice://a2/x"}}, SyncLevel: "size", Overwrite: &no})
	if status(err) != http.StatusUnprocessableEntity {
		t.Errorf("sync_level with overwrite false: %v, want 422", err)
	}
}

// TestServicePreserveMtime: a job with preserve_mtime gives each file its
// source's modification time, through pull batches (small files) and the
// engine (a large one) alike; a job without it leaves the time of the
// copy. With the times preserved, the mtime sync level then keeps every
// file of a rerun.
func TestServicePreserveMtime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	at := time.Date(2021, 3, 14, 15, 9, 26, 0, time.UTC)
	for _, preserve := range []bool{true, false} {
		d := fmt.Sprintf("mt-%v/", preserve)
		var in []api.FileIn
		names := []string{"s1", "s2", "big"}
		for i, n := range names {
			size := int64(100 << 10)
			if n == "big" {
				size = 9 << 20
			}
			src := c.file("a1", d+n, size, uint64(7000+i))
			if err := os.Chtimes(src, at, at); err != nil {
				t.Fatal(err)
			}
			in = append(in, api.FileIn{Source: "sluice://a1/" + d + n, Destination: "sluice://a2/" + d + n})
		}
		j, _, err := c.admin.Submit(ctx, api.JobIn{Files: in, PreserveMtime: preserve})
		if err != nil {
			t.Fatal(err)
		}
		if j = c.waitJob(c.admin, j.ID, 2*time.Minute); j.FilesDone != len(names) || j.PreserveMtime != preserve {
			t.Fatalf("preserve %v: %d of %d done, preserve_mtime %v", preserve, j.FilesDone, len(names), j.PreserveMtime)
		}
		for _, n := range names {
			fi, err := os.Stat(c.path("a2", d+n))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.ModTime().Equal(at); got != preserve {
				t.Errorf("preserve %v: %s modified at %s, the source at %s", preserve, n, fi.ModTime(), at)
			}
		}
		if !preserve {
			continue
		}
		again, _, err := c.admin.Submit(ctx, api.JobIn{Files: in, SyncLevel: "mtime", PreserveMtime: true})
		if err != nil {
			t.Fatal(err)
		}
		if again = c.waitJob(c.admin, again.ID, 2*time.Minute); again.FilesInPlace != len(names) {
			t.Errorf("a rerun with sync level mtime kept %d of %d files", again.FilesInPlace, len(names))
		}
	}
}
