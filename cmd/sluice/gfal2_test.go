package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/internal/storagetest"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// gfal runs one of gfal2's commands (gfal-copy, gfal-sum, ...), the
// WLCG clients' own, and returns what it printed.
func gfal(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// gfal2's Python modules are Debian's: its scripts take the first
	// python on the PATH that imports them, and a pyenv's comes first.
	cmd.Env = append(os.Environ(), "GFAL_PYTHONBIN=/usr/bin/python3")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// gfalSum is gfal-sum's checksum of url (lowercase hex).
func gfalSum(t *testing.T, url, algo string) string {
	t.Helper()
	f := strings.Fields(gfal(t, "gfal-sum", url, strings.ToUpper(algo)))
	if len(f) != 2 {
		t.Fatalf("gfal-sum %s: %q", url, f)
	}
	return strings.ToLower(f[1])
}

// TestGfal2Interop: Sluice and gfal2 (what FTS3 and Rucio move data
// with) agree on the same XRootD servers: a third-party copy by a Sluice
// job and one by gfal-copy between the same two servers give the
// same bytes and the same adler32 (how gfal2 copies, third-party or
// streamed, is its plugin's choice, as in FTS3), as gfal-sum and the
// job's verified checksum say; a file gfal2 wrote is copied by Sluice into an agent,
// and one Sluice wrote is read back by gfal2.
func TestGfal2Interop(t *testing.T) {
	if _, err := exec.LookPath("gfal-copy"); err != nil {
		t.Skip("gfal2's commands are not installed (scripts/ci-deps.sh installs gfal2-util-scripts and its plugins)")
	}
	if err := storagetest.XRootDTPCAvailable(); err != nil {
		t.Skip(err)
	}
	c := newCluster(t, 1)
	xa := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	xb := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	ctx := context.Background()
	for name, u := range map[string]string{"xa": "root://" + xa.Addr, "xb": "root://" + xb.Addr} {
		if _, err := c.admin.PutStorageEndpoint(ctx, name, wire.StorageEndpointIn{URL: u}); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 9<<20+77)
	for i := range data {
		data[i] = byte(i*31 + i>>9)
	}
	xa.Put(t, "in/f.dat", data)

	// The same copy, by Sluice and by gfal2.
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: xa.URL("in/f.dat"), Destination: xb.URL("out/sluice.dat")}},
		Checksum: "adler32"})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 2*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("job %s: %+v", jj.State, fs)
	}
	gfal(t, "gfal-copy", "-K", "ADLER32", xa.URL("in/f.dat"), xb.URL("out/gfal.dat"))
	a, b := xb.Read(t, "out/sluice.dat"), xb.Read(t, "out/gfal.dat")
	if !bytes.Equal(a, data) || !bytes.Equal(b, data) {
		t.Fatalf("copies differ from the source: Sluice's %d bytes (equal %v), gfal2's %d (equal %v)", len(a), bytes.Equal(a, data), len(b), bytes.Equal(b, data))
	}
	fs, err := c.admin.Files(ctx, j.ID, 0, 10)
	if err != nil || len(fs) != 1 {
		t.Fatalf("files: %v %v", fs, err)
	}
	sums := map[string]string{
		"the Sluice job's verified checksum": strings.TrimPrefix(fs[0].Checksum, "adler32:"),
		"gfal-sum of the source":             gfalSum(t, xa.URL("in/f.dat"), "adler32"),
		"gfal-sum of Sluice's copy":          gfalSum(t, xb.URL("out/sluice.dat"), "adler32"),
		"gfal-sum of gfal2's copy":           gfalSum(t, xb.URL("out/gfal.dat"), "adler32"),
	}
	want := sums["gfal-sum of the source"]
	for what, got := range sums {
		if got != want {
			t.Errorf("%s is %q, the source's %q", what, got, want)
		}
	}
	t.Logf("adler32 %s everywhere: %v", want, sums)

	// gfal2 writes, Sluice copies into an agent; Sluice writes, gfal2 reads.
	gfal(t, "gfal-copy", "file://"+c.file("a1", "local.dat", 3<<20, 9), xa.URL("in/bygfal.dat"))
	j, _, err = c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://xa/in/bygfal.dat", Destination: "sluice://a1/back/fromxrd.dat"}}})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 2*time.Minute); jj.State != store.StateDone {
		t.Fatalf("job %s", jj.State)
	}
	if got, want := readFile(t, c.path("a1", "back/fromxrd.dat")), readFile(t, c.path("a1", "local.dat")); !bytes.Equal(got, want) {
		t.Error("the file gfal2 wrote and Sluice copied back differs")
	}
	local := t.TempDir() + "/read.dat"
	gfal(t, "gfal-copy", xb.URL("out/sluice.dat"), "file://"+local)
	if got := readFile(t, local); !bytes.Equal(got, data) {
		t.Error("gfal2 read back other bytes than Sluice wrote")
	}
}
