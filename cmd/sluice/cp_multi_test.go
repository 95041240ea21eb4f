package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/engine"
)

// replicaAgents serves the same file from three in-process agents, each
// emulating a link of its own speed (bytes/s), and returns their URLs of
// the file.
func replicaAgents(t *testing.T, work string, k []byte, size int64, rates []float64, mw func(i int, h http.Handler) http.Handler) ([]string, string) {
	t.Helper()
	orig := filepath.Join(work, "orig.bin")
	fastRandom(t, orig, size, 11)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i, r := range rates {
		root := filepath.Join(work, "rep"+string(rune('a'+i)))
		os.MkdirAll(filepath.Join(root, "d"), 0o755)
		if err := os.WriteFile(filepath.Join(root, "d", "f.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{Name: "rep" + string(rune('a'+i)), Root: root, Key: k, Emulation: &emul.Config{CapacityBps: r}})
		if err != nil {
			t.Fatal(err)
		}
		var h http.Handler = a.Handler()
		if mw != nil {
			h = mw(i, h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(func() { srv.Close(); a.Close() })
		urls = append(urls, "sluice://"+strings.TrimPrefix(srv.URL, "http://")+"/d/f.bin")
	}
	return urls, orig
}

// TestCpMultiSource: `sluice cp --sources` assembles one file from three
// replicas of different speeds, byte-identical, splitting it as the plan
// says; refuses replicas of different sizes; carries on without an
// unreachable replica.
func TestCpMultiSource(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	const size = 24 << 20
	urls, orig := replicaAgents(t, work, k, size, []float64{4e6, 16e6, 8e6}, nil)
	out := filepath.Join(work, "out")
	res, err := run(t, "cp", "--token-key", keyFile, "--sources", strings.Join(urls, ","), out+"/", "--split", "tcs", "--probe", "600ms", "--json")
	if err != nil {
		t.Fatalf("cp --sources: %v\n%s", err, res)
	}
	var rep struct {
		Bytes int64 `json:"bytes"`
		Links []struct {
			Mean    float64 `json:"mean_bps"`
			Planned int64   `json:"planned_bytes"`
		} `json:"links"`
		Checksum string `json:"checksum"`
	}
	if err := json.Unmarshal([]byte(res[strings.Index(res, "{"):]), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, res)
	}
	if !sameContent(t, orig, filepath.Join(out, "f.bin")) {
		t.Fatal("the assembled file differs from the original")
	}
	var planned int64
	for _, l := range rep.Links {
		planned += l.Planned
	}
	if rep.Bytes != size || planned != size || len(rep.Links) != 3 || rep.Checksum == "" {
		t.Fatalf("report %s", res)
	}
	// The fastest link (16 MB/s) is planned the most, the slowest the least.
	if !(rep.Links[1].Planned > rep.Links[2].Planned && rep.Links[2].Planned > rep.Links[0].Planned) {
		t.Errorf("plan %+v: want more bytes from faster links", rep.Links)
	}
	t.Logf("plan: %+v", rep.Links)

	// A replica that is not a copy of the others' file: two of three
	// agree, so the odd one is left out (and said so) and the file is
	// theirs; with two replicas that differ, no majority says which is
	// right, and the copy is refused.
	bad := filepath.Join(work, "repb", "d", "f.bin")
	if err := os.Truncate(bad, size-1); err != nil {
		t.Fatal(err)
	}
	res, err = run(t, "cp", "--token-key", keyFile, "--sources", strings.Join(urls, ","), filepath.Join(work, "out2")+"/")
	if err != nil || !strings.Contains(res, urls[1]+" not used: its size is") {
		t.Errorf("one replica of another size among three: %v\n%s", err, res)
	} else if !sameContent(t, orig, filepath.Join(work, "out2", "f.bin")) {
		t.Error("the file differs from the majority's")
	}
	res, err = run(t, "cp", "--token-key", keyFile, "--sources", strings.Join(urls[:2], ","), filepath.Join(work, "out2b")+"/")
	if err == nil || !strings.Contains(err.Error(), "no majority agrees") {
		t.Errorf("two replicas of different sizes: %v\n%s", err, res)
	}
	if _, err := os.Stat(filepath.Join(work, "out2b")); !os.IsNotExist(err) {
		t.Errorf("a refused copy created its destination (%v)", err)
	}

	// An unreachable replica: the others carry the file.
	dead := "sluice://" + freeAddr(t) + "/d/f.bin"
	res, err = run(t, "cp", "--token-key", keyFile, "--sources", strings.Join([]string{urls[0], dead, urls[2]}, ","), filepath.Join(work, "out3")+"/", "--probe", "300ms", "-v")
	if err != nil {
		t.Fatalf("with an unreachable replica: %v\n%s", err, res)
	}
	if !sameContent(t, orig, filepath.Join(work, "out3", "f.bin")) || !strings.Contains(res, "dropped") {
		t.Errorf("with an unreachable replica:\n%s", res)
	}
}

// TestCpMultiSourceKill: kill -9 of a multi-source cp in the middle; the
// same command run again resumes from the journal and the file is
// byte-identical.
func TestCpMultiSourceKill(t *testing.T) {
	work := t.TempDir()
	keyFile, k := testKey(t, work)
	const size = 48 << 20
	urls, orig := replicaAgents(t, work, k, size, []float64{6e6, 12e6, 8e6}, nil)
	jd := filepath.Join(work, "journal")
	out := filepath.Join(work, "out") + "/"
	args := []string{"cp", "--token-key", keyFile, "--sources", strings.Join(urls, ","), out, "--probe", "300ms", "--journal-dir", jd, "--no-replica-check"}
	cmd, log := startSluice(t, args)
	// Kill once the journal records between a fifth and four fifths.
	done := waitJournaled(jd, size/5)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if done < size/5 || done >= size*4/5 {
		t.Fatalf("killed with %d of %d bytes journaled\n%s", done, size, log.String())
	}
	if _, err := os.Stat(filepath.Join(out, "f.bin")); !os.IsNotExist(err) {
		t.Fatal("the destination path exists after a kill in the middle")
	}
	res, err := run(t, append(args[:len(args):len(args)], "--json")...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, res)
	}
	if !sameContent(t, orig, filepath.Join(out, "f.bin")) {
		t.Fatal("the resumed file differs from the original")
	}
	if !strings.Contains(res, "resumed with") {
		t.Errorf("the second run did not resume:\n%s", res)
	}
	t.Logf("killed at %d of %d bytes; %s", done, size, res[strings.LastIndex(res, "\"note\""):])
}

// flipper damages every ranged GET body a replica sends: a replica that
// returns wrong bytes.
type flipper struct{ http.ResponseWriter }

func (f flipper) Write(b []byte) (int, error) {
	if len(b) > 0 {
		c := append([]byte(nil), b...)
		c[0] ^= 0xff
		return f.ResponseWriter.Write(c)
	}
	return f.ResponseWriter.Write(b)
}

// TestCpMultiSourceWrongBytes: a replica that sends damaged bytes is found
// by range checksums, dropped, and its ranges fetched from the others; the
// file is byte-identical and the message says which replica was dropped.
func TestCpMultiSourceWrongBytes(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	const size = 12 << 20
	urls, orig := replicaAgents(t, work, k, size, []float64{20e6, 20e6, 20e6}, func(i int, h http.Handler) http.Handler {
		if i != 1 {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
				w = flipper{w}
			}
			h.ServeHTTP(w, r)
		})
	})
	out := filepath.Join(work, "out")
	res, err := run(t, "cp", "--token-key", keyFile, "--sources", strings.Join(urls, ","), out+"/", "--split", "eas", "--probe", "300ms", "--no-replica-check")
	if err != nil {
		t.Fatalf("cp --sources with a replica sending wrong bytes: %v\n%s", err, res)
	}
	if !sameContent(t, orig, filepath.Join(out, "f.bin")) {
		t.Fatal("the file differs from the original")
	}
	if !strings.Contains(res, urls[1]+" dropped") || !strings.Contains(res, "differ from those most replicas hold") {
		t.Errorf("the message does not say which replica sent wrong bytes:\n%s", res)
	}
}

// startSluice runs sluice with args in a child process (the test binary,
// see TestMain), its output going to the returned builder.
func startSluice(t *testing.T, args []string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_RUN="+strings.Join(args, "\x1f"))
	log := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, log
}

// waitJournaled waits (at most 30 s) until a checkpoint journal in jd
// records at least min bytes done, and returns what it records.
func waitJournaled(jd string, min int64) int64 {
	deadline := time.Now().Add(30 * time.Second)
	var done int64
	for time.Now().Before(deadline) && done < min {
		time.Sleep(50 * time.Millisecond)
		js, _ := filepath.Glob(filepath.Join(jd, "*.journal"))
		for _, j := range js {
			if c, ok, err := engine.ReadCheckpoint(context.Background(), engine.FileJournals{}, j); err == nil && ok {
				done = c.Done
			}
		}
	}
	return done
}

// TestCpMultiSourceOneReplica: `sluice cp --sources A DST` with a replica
// list of one copies the file from it (before: "give at least two
// replicas").
func TestCpMultiSourceOneReplica(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	orig := filepath.Join(work, "f.bin")
	fastRandom(t, orig, 1<<20, 3)
	out := filepath.Join(work, "out")
	res, err := run(t, "cp", "--sources", orig, out+"/", "--split", "tcs")
	if err != nil {
		t.Fatalf("cp --sources with one replica: %v\n%s", err, res)
	}
	if !sameContent(t, orig, filepath.Join(out, "f.bin")) || !strings.Contains(res, "from 1 replica ") {
		t.Errorf("cp --sources with one replica:\n%s", res)
	}
}

// TestCpMultiSourceEmptyEntry: an empty entry in --sources (a trailing
// comma, two commas in a row) is refused, naming it. Before, it was
// taken for the current directory and the copy failed with "replica
// file:///... is a directory", or, for two, "named twice", neither of
// which says what was wrong.
func TestCpMultiSourceEmptyEntry(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	orig := filepath.Join(work, "f.bin")
	fastRandom(t, orig, 1<<10, 3)
	for _, sources := range []string{orig + ",", orig + ",,", "," + orig, orig + ", "} {
		res, err := run(t, "cp", "--sources", sources, filepath.Join(work, "out"))
		if err == nil || !strings.Contains(err.Error(), "--sources: entry") || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("--sources %q: %v, want the empty entry refused\n%s", sources, err, res)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "out")); !os.IsNotExist(err) {
		t.Errorf("a refused copy wrote its destination (%v)", err)
	}
}
