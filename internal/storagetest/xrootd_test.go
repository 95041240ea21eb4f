package storagetest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestXRootD: a server serves what Put writes and its files are written
// by it where Read finds them; xrdcp (when installed) reads and writes
// through it.
func TestXRootD(t *testing.T) {
	s := XRootD(t, XRootDOptions{})
	if got, want := s.URL("a/b"), "root://"+s.Addr+"//a/b"; got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
	s.Put(t, "dir/in.dat", []byte("hello"))
	if got := string(s.Read(t, "dir/in.dat")); got != "hello" {
		t.Errorf("Read = %q", got)
	}
	if _, err := exec.LookPath("xrdcp"); err != nil {
		t.Skip("xrdcp is not installed (apt-get install xrootd-client): the server is not tested through a client")
	}
	local := t.TempDir()
	out, err := exec.Command("xrdcp", "--nopbar", s.URL("dir/in.dat"), local+"/got").CombinedOutput()
	if err != nil {
		t.Fatalf("xrdcp from the server: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(local + "/got"); string(b) != "hello" {
		t.Errorf("xrdcp read %q", b)
	}
	// Over a file Put made: the server may write there.
	if err := os.WriteFile(local+"/new", []byte("replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("xrdcp", "--nopbar", "--force", local+"/new", s.URL("dir/in.dat")).CombinedOutput()
	if err != nil {
		t.Fatalf("xrdcp to the server: %v\n%s", err, out)
	}
	if got := string(s.Read(t, "dir/in.dat")); got != "replaced" {
		t.Errorf("after xrdcp --force, Read = %q", got)
	}
	if log := s.Log(); !strings.Contains(log, "initialization completed") {
		t.Errorf("Log has no start-up lines:\n%s", log)
	}
}

// TestXRootDTPCByXrdcp: two servers started with TPC copy a file from one
// to the other when xrdcp asks for a third-party copy only (no byte
// through the client): the harness's ofs.tpc settings work.
func TestXRootDTPCByXrdcp(t *testing.T) {
	src := XRootD(t, XRootDOptions{TPC: true})
	dst := XRootD(t, XRootDOptions{TPC: true})
	data := bytes.Repeat([]byte("sluice "), 100000)
	src.Put(t, "a/in.dat", data)
	out, err := exec.Command("xrdcp", "--tpc", "only", "--nopbar", src.URL("a/in.dat"), dst.URL("b/out.dat")).CombinedOutput()
	if err != nil {
		t.Fatalf("xrdcp --tpc only: %v\n%s", err, out)
	}
	if got := dst.Read(t, "b/out.dat"); !bytes.Equal(got, data) {
		t.Fatalf("copied %d bytes, want %d equal ones", len(got), len(data))
	}
	if log := src.Log(); !strings.Contains(log, "granted tpc access") {
		t.Errorf("the source logged no third-party copy:\n%s", log)
	}
}
