package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	return gfalEnv(t, nil, args...)
}

// gfalEnv is gfal with env added to the command's environment.
func gfalEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	// gfal2's Python modules are Debian's: its scripts take the first
	// python on the PATH that imports them, and a pyenv's comes first.
	cmd.Env = append(append(os.Environ(), env...), "GFAL_PYTHONBIN=/usr/bin/python3")
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

// TestGfal2InteropHTTP: the same agreement over HTTP: between two
// WebDAV servers (XRootD over HTTPS), a Sluice job's HTTP third-party copy
// and gfal-copy's (pull mode, as FTS3 runs it) give the same bytes, and
// gfal-sum, the servers' Digest and the job's verified checksum the same
// adler32.
func TestGfal2InteropHTTP(t *testing.T) {
	if _, err := exec.LookPath("gfal-copy"); err != nil {
		t.Skip("gfal2's commands are not installed (scripts/ci-deps.sh installs gfal2-util-scripts and its plugins)")
	}
	if err := storagetest.XRootDHTTPAvailable(true); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is needed to give gfal2 the test's authority (a hashed certificate directory)")
	}
	ca := storagetest.NewTestCA(t)
	dir := t.TempDir()
	caDir := filepath.Join(dir, "certificates")
	if err := os.Mkdir(caDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(caDir, "ca.pem"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("openssl", "rehash", caDir).CombinedOutput(); err != nil {
		t.Fatalf("openssl rehash: %v: %s", err, out)
	}
	c := newClusterEnv(t, []string{"SSL_CERT_FILE=" + filepath.Join(caDir, "ca.pem")}, 1)
	da := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	db := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	davs := func(s *storagetest.XRootDHTTPServer) string { return "davs://" + strings.TrimPrefix(s.URL, "https://") }
	ctx := context.Background()
	for name, s := range map[string]*storagetest.XRootDHTTPServer{"da": da, "db": db} {
		if _, err := c.admin.PutStorageEndpoint(ctx, name, wire.StorageEndpointIn{URL: davs(s)}); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 7<<20+5)
	for i := range data {
		data[i] = byte(i*17 + i>>11)
	}
	da.Put(t, "in/f.dat", data)
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: davs(da) + "/in/f.dat", Destination: davs(db) + "/out/sluice.dat"}},
		Checksum: "adler32"})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 2*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("job %s: %+v", jj.State, fs)
	}
	// A bearer token (any: these servers ask for none) has gfal2 ask for
	// the copy without delegating an X.509 proxy ("Credential: none"),
	// as FTS3 does with tokens; XRootD refuses its gridsite delegation.
	env := []string{"X509_CERT_DIR=" + caDir, "BEARER_TOKEN=sluice-test"}
	gfalEnv(t, env, "gfal-copy", "--copy-mode", "pull", "--no-delegation", "-K", "ADLER32", da.URL+"/in/f.dat", db.URL+"/out/gfal.dat")
	a, b := db.Read(t, "out/sluice.dat"), db.Read(t, "out/gfal.dat")
	if !bytes.Equal(a, data) || !bytes.Equal(b, data) {
		t.Fatalf("copies differ from the source: Sluice's %d bytes (equal %v), gfal2's %d (equal %v)", len(a), bytes.Equal(a, data), len(b), bytes.Equal(b, data))
	}
	fs, err := c.admin.Files(ctx, j.ID, 0, 10)
	if err != nil || len(fs) != 1 {
		t.Fatalf("files: %v %v", fs, err)
	}
	sum := func(u string) string {
		f := strings.Fields(gfalEnv(t, env, "gfal-sum", u, "ADLER32"))
		if len(f) != 2 {
			t.Fatalf("gfal-sum %s: %q", u, f)
		}
		return strings.ToLower(f[1])
	}
	sums := map[string]string{
		"the Sluice job's verified checksum": strings.TrimPrefix(fs[0].Checksum, "adler32:"),
		"gfal-sum of the source":             sum(da.URL + "/in/f.dat"),
		"gfal-sum of Sluice's copy":          sum(db.URL + "/out/sluice.dat"),
		"gfal-sum of gfal2's copy":           sum(db.URL + "/out/gfal.dat"),
	}
	want := sums["gfal-sum of the source"]
	for what, got := range sums {
		if got != want {
			t.Errorf("%s is %q, the source's %q", what, got, want)
		}
	}
	t.Logf("adler32 %s everywhere: %v", want, sums)
}
