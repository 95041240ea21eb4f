package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/internal/storagetest"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// procIO is what a process has read and written through system calls
// (/proc/PID/io rchar + wchar): a third-party copy must not move its
// bytes through the server or an agent.
func procIO(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Skipf("process I/O counters: %v", err)
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		if k == "rchar" || k == "wchar" {
			x, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			n += x
		}
	}
	return n
}

// TestServiceStorageEndpoints: one job mixes schemes against real
// servers: an agent to XRootD, GridFTP to an agent, GridFTP to GridFTP
// and XRootD to XRootD by third-party copy, and GridFTP to XRootD
// streamed by the via agent; every file lands verified. A second job of
// third-party copies only moves (nearly) nothing through the server's
// and the agents' processes. Storage endpoints are admins' to register,
// and their credentials are never shown.
func TestServiceStorageEndpoints(t *testing.T) {
	if err := storagetest.XRootDTPCAvailable(); err != nil {
		t.Skip(err)
	}
	if err := storagetest.GridFTPAvailable(); err != nil {
		t.Skip(err)
	}
	c := newCluster(t, 2)
	xa := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	xb := storagetest.XRootD(t, storagetest.XRootDOptions{TPC: true})
	ga := storagetest.GridFTP(t, storagetest.GridFTPOptions{})
	gb := storagetest.GridFTP(t, storagetest.GridFTPOptions{Users: map[string]string{"mover": "s3cretpw"}})
	ctx := context.Background()

	// Registered by an admin (one through the CLI), with a credential
	// that is described and never shown.
	out, err := run(t, "endpoint", "add", "xa", "root://"+xa.Addr, "--via", "a1", "--user", "sluice",
		"--server", "http://"+c.addr, "--token", c.adminTo)
	if err != nil || !strings.Contains(out, "storage endpoint xa: root://"+xa.Addr) {
		t.Fatalf("endpoint add: %v\n%s", err, out)
	}
	for name, u := range map[string]string{"xb": "root://" + xb.Addr, "ga": "ftp://" + ga.Addr, "gb": "ftp://" + gb.Addr} {
		in := wire.StorageEndpointIn{URL: u, Via: "a1"}
		if name == "gb" {
			in.Credential = &wire.CredentialIn{Username: "mover", Password: "s3cretpw"}
		}
		if _, err := c.admin.PutStorageEndpoint(ctx, name, in); err != nil {
			t.Fatalf("registering %s: %v", name, err)
		}
	}
	eps, err := c.admin.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if e.Name == "gb" && (e.Kind != "storage" || !strings.Contains(e.Credential, "password") || !e.Up) {
			t.Errorf("endpoint gb listed as %+v", e)
		}
	}
	for _, bad := range []struct {
		name string
		in   wire.StorageEndpointIn
		want int
	}{
		{"a1", wire.StorageEndpointIn{URL: "root://" + xb.Addr}, 409},       // an agent's name
		{"xc", wire.StorageEndpointIn{URL: "root://" + xa.Addr}, 409},       // xa's server
		{"h", wire.StorageEndpointIn{URL: "sluice://example.org:1"}, 400},   // agents join
		{"p", wire.StorageEndpointIn{URL: "root://" + xa.Addr + "/d"}, 400}, // a path
		{"v", wire.StorageEndpointIn{URL: "root://127.0.0.1:1", Via: "nobody"}, 400},
		{"t", wire.StorageEndpointIn{URL: "ftp://127.0.0.1:1", Credential: &wire.CredentialIn{Token: "x"}}, 400},
	} {
		if _, err := c.admin.PutStorageEndpoint(ctx, bad.name, bad.in); status(err) != bad.want && !(bad.want == 400 && status(err) == 422) {
			t.Errorf("registering %s %+v: %v, want %d", bad.name, bad.in, err, bad.want)
		}
	}

	const size = 5<<20 + 11
	data := func(seed byte) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(i*7) ^ seed
		}
		return b
	}
	c.file("a1", "up/toxrd.dat", size, 1)
	ga.Put(t, "in/toagent.dat", data(2))
	ga.Put(t, "in/togb.dat", data(3))
	xa.Put(t, "in/toxb.dat", data(4))
	ga.Put(t, "in/toxb2.dat", data(5))
	xa.Put(t, "in/toagent.dat", data(6))
	c.file("a2", "up/togb.dat", size, 7)
	ftp := func(s *storagetest.GridFTPServer, p string) string { return s.URL("ftp", p) }
	job := api.JobIn{Files: []api.FileIn{
		{Source: "sluice://a1/up/toxrd.dat", Destination: xa.URL("out/fromagent.dat")},
		{Source: ftp(ga, "in/toagent.dat"), Destination: "sluice://a2/down/fromftp.dat"},
		{Source: ftp(ga, "in/togb.dat"), Destination: ftp(gb, "out/tpc.dat")},
		{Source: xa.URL("in/toxb.dat"), Destination: xb.URL("out/tpc.dat")},
		{Source: ftp(ga, "in/toxb2.dat"), Destination: "sluice://xb/out/streamed.dat"},
		{Source: xa.URL("in/toagent.dat"), Destination: "sluice://a1/down/fromxrd.dat"},
		{Source: "sluice://a2/up/togb.dat", Destination: ftp(gb, "out/fromagent.dat")},
	}}
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 3*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("mixed job %s: %+v", jj.State, fs)
	}
	agentFile, _ := os.ReadFile(c.path("a1", "up/toxrd.dat"))
	agentFile2, _ := os.ReadFile(c.path("a2", "up/togb.dat"))
	for _, chk := range []struct {
		what string
		got  []byte
		want []byte
	}{
		{"agent to XRootD", xa.Read(t, "out/fromagent.dat"), agentFile},
		{"GridFTP to agent", readFile(t, c.path("a2", "down/fromftp.dat")), data(2)},
		{"GridFTP to GridFTP", gb.Read(t, "out/tpc.dat"), data(3)},
		{"XRootD to XRootD", xb.Read(t, "out/tpc.dat"), data(4)},
		{"GridFTP to XRootD via an agent", xb.Read(t, "out/streamed.dat"), data(5)},
		{"XRootD to agent", readFile(t, c.path("a1", "down/fromxrd.dat")), data(6)},
		{"agent to GridFTP with a password", gb.Read(t, "out/fromagent.dat"), agentFile2},
	} {
		if !bytes.Equal(chk.got, chk.want) {
			t.Errorf("%s: %d bytes differ from the source's %d", chk.what, len(chk.got), len(chk.want))
		}
	}
	if strings.Contains(c.server.output(), "s3cret") || strings.Contains(c.agents["a1"].output(), "s3cret") || strings.Contains(c.agents["a2"].output(), "s3cret") {
		t.Error("a credential was logged")
	}

	// Third-party copies only: the bytes go server to server.
	const big = 48 << 20
	ga.Put(t, "in/big.dat", bytes.Repeat([]byte("gridftp!"), big/8))
	xa.Put(t, "in/big.dat", bytes.Repeat([]byte("xrootd!!"), big/8))
	pids := map[string]int{"server": c.server.cmd.Process.Pid, "a1": c.agents["a1"].cmd.Process.Pid, "a2": c.agents["a2"].cmd.Process.Pid}
	before := map[string]int64{}
	for n, pid := range pids {
		before[n] = procIO(t, pid)
	}
	j, _, err = c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: ftp(ga, "in/big.dat"), Destination: ftp(gb, "big/tpc.dat")},
		{Source: xa.URL("in/big.dat"), Destination: xb.URL("big/tpc.dat")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 3*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("third-party job %s: %+v", jj.State, fs)
	}
	for n, pid := range pids {
		moved := procIO(t, pid) - before[n]
		t.Logf("%s read and wrote %d bytes while %d bytes were copied", n, moved, 2*big)
		if moved > big/4 { // a copy through it would be 4x big
			t.Errorf("%s read and wrote %d bytes during third-party copies of %d bytes", n, moved, 2*big)
		}
	}
	if got := gb.Read(t, "big/tpc.dat"); len(got) != big || !bytes.Equal(got[:8], []byte("gridftp!")) {
		t.Errorf("GridFTP third-party copy: %d bytes", len(got))
	}
	if got := xb.Read(t, "big/tpc.dat"); len(got) != big || !bytes.Equal(got[:8], []byte("xrootd!!")) {
		t.Errorf("XRootD third-party copy: %d bytes", len(got))
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Error(err)
	}
	return b
}

// TestServiceS3AndWebDAVJob: one job mixes schemes against real
// servers: an agent's file to S3 (versitygw; the agent uploads the
// object whole, a multipart upload with parallel parts), an object from
// S3 to XRootD (the via agent relays: they cannot copy between
// themselves), one from S3 into an agent, and a WebDAV file to another
// WebDAV server by HTTP third-party copy (two XRootD HTTPS servers: the
// destination pulls from the source, and neither the server nor an
// agent reads or writes its bytes); every copy is its source's bytes.
func TestServiceS3AndWebDAVJob(t *testing.T) {
	if err := storagetest.XRootDAvailable(); err != nil {
		t.Skip(err)
	}
	if err := storagetest.XRootDHTTPAvailable(true); err != nil {
		t.Skip(err)
	}
	ca := storagetest.NewTestCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// The service trusts the test's authority as a site trusts its own.
	c := newClusterEnv(t, []string{"SSL_CERT_FILE=" + caFile}, 2)
	s3 := storagetest.S3(t, storagetest.S3Options{})
	x := storagetest.XRootD(t, storagetest.XRootDOptions{})
	da := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	db := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	davs := func(s *storagetest.XRootDHTTPServer) string { return "davs://" + strings.TrimPrefix(s.URL, "https://") }
	ctx := context.Background()
	for name, in := range map[string]wire.StorageEndpointIn{
		"s3": {URL: "s3+http://" + s3.Endpoint, Via: "a1", Credential: &wire.CredentialIn{Username: s3.AccessKey, Password: s3.SecretKey}},
		"x":  {URL: "root://" + x.Addr},
		"da": {URL: davs(da)},
		"db": {URL: davs(db)},
	} {
		if _, err := c.admin.PutStorageEndpoint(ctx, name, in); err != nil {
			t.Fatalf("registering %s: %v", name, err)
		}
	}
	const size = 70<<20 + 5 // above the default part size: a multipart upload
	c.file("a1", "up/big.dat", size, 11)
	obj := make([]byte, 3<<20+1)
	for i := range obj {
		obj[i] = byte(i * 13)
	}
	local := func(key string) string { return filepath.Join(s3.Dir, s3.Bucket, filepath.FromSlash(key)) }
	if err := os.MkdirAll(filepath.Dir(local("in/obj.dat")), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local("in/obj.dat"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	tpc := make([]byte, 24<<20+3)
	for i := range tpc {
		tpc[i] = byte(i*7 + i>>16)
	}
	da.Put(t, "in/tpc.dat", tpc)
	j, _, err := c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{
		{Source: "sluice://a1/up/big.dat", Destination: s3.URL("out/big.dat")},
		{Source: da.URL + "/in/tpc.dat", Destination: davs(db) + "/out/tpc.dat"},
		{Source: s3.URL("in/obj.dat"), Destination: x.URL("fromS3/obj.dat")},
		{Source: "sluice://s3/" + s3.Bucket + "/in/obj.dat", Destination: "sluice://a2/fromS3/obj.dat"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 3*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("job %s: %+v", jj.State, fs)
	}
	want, _ := os.ReadFile(c.path("a1", "up/big.dat"))
	for _, chk := range []struct {
		what      string
		got, want []byte
	}{
		{"agent to S3", readFile(t, local("out/big.dat")), want},
		{"S3 to XRootD via an agent", x.Read(t, "fromS3/obj.dat"), obj},
		{"S3 to an agent", readFile(t, c.path("a2", "fromS3/obj.dat")), obj},
		{"WebDAV to WebDAV by HTTP third-party copy", db.Read(t, "out/tpc.dat"), tpc},
	} {
		if !bytes.Equal(chk.got, chk.want) {
			t.Errorf("%s: %d bytes differ from the source's %d", chk.what, len(chk.got), len(chk.want))
		}
	}
	if strings.Contains(c.server.output(), s3.SecretKey) || strings.Contains(c.agents["a1"].output(), s3.SecretKey) {
		t.Error("the S3 secret was logged")
	}

	// An HTTP third-party copy alone: its bytes pass through neither
	// the server nor an agent.
	const big = 64 << 20
	da.Put(t, "in/big.dat", bytes.Repeat([]byte("webdav!!"), big/8))
	pids := map[string]int{"server": c.server.cmd.Process.Pid, "a1": c.agents["a1"].cmd.Process.Pid, "a2": c.agents["a2"].cmd.Process.Pid}
	before := map[string]int64{}
	for n, pid := range pids {
		before[n] = procIO(t, pid)
	}
	j, _, err = c.admin.Submit(ctx, api.JobIn{Files: []api.FileIn{{Source: "sluice://da/in/big.dat", Destination: "sluice://db/big/tpc.dat"}}})
	if err != nil {
		t.Fatal(err)
	}
	if jj := c.waitJob(c.admin, j.ID, 3*time.Minute); jj.State != store.StateDone {
		fs, _ := c.admin.Files(ctx, j.ID, 0, 10)
		t.Fatalf("HTTP third-party job %s: %+v", jj.State, fs)
	}
	for n, pid := range pids {
		moved := procIO(t, pid) - before[n]
		t.Logf("%s read and wrote %d bytes while an HTTP third-party copy moved %d", n, moved, big)
		if moved > big/4 {
			t.Errorf("%s read and wrote %d bytes during an HTTP third-party copy of %d", n, moved, big)
		}
	}
	if got := db.Read(t, "big/tpc.dat"); len(got) != big || !bytes.Equal(got[:8], []byte("webdav!!")) {
		t.Errorf("HTTP third-party copy: %d bytes", len(got))
	}
}
