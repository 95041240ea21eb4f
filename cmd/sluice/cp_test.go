package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/agent"
	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/emul"
	"github.com/sluice-dtn/sluice/server"
)

// cpAgent serves root as an in-process agent with the key in keyFile
// (emulating emu, if not nil) and returns its sluice:// base URL.
func cpAgent(t *testing.T, name, root string, k []byte, emu *emul.Config) string {
	t.Helper()
	a, err := agent.New(agent.Config{Name: name, Root: root, Key: k, Emulation: emu})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	return "sluice://" + strings.TrimPrefix(srv.URL, "http://")
}

// cpDataset writes n files of random sizes up to max bytes (seeded) under
// dir and returns their contents by path below dir.
func cpDataset(t *testing.T, dir string, n, max int) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[string][]byte{}
	for i := range n {
		rel := fmt.Sprintf("sub%d/f%03d", i%3, i)
		data := make([]byte, rng.IntN(max+1))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out[rel] = data
	}
	return out
}

func cpSameTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	n := 0
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	if n != len(want) {
		t.Errorf("%s holds %d files, want %d", dir, n, len(want))
	}
	for rel, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || string(got) != string(data) {
			t.Errorf("%s: %d bytes, %v; want the source's %d", rel, len(got), err, len(data))
		}
	}
}

// TestCpRecursiveAuto copies a small dataset with `sluice cp -r` between
// two in-process agents, the source emulating a WAN round trip: tuned live
// by default (third-party: the destination pulls), then to a local
// directory (batch GETs) with --sample and --json, then with fixed
// settings.
func TestCpRecursiveAuto(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	srcRoot, dstRoot := filepath.Join(work, "a"), filepath.Join(work, "b")
	os.MkdirAll(dstRoot, 0o755)
	want := cpDataset(t, filepath.Join(srcRoot, "run7"), 60, 300_000)
	src := cpAgent(t, "a", srcRoot, k, &emul.Config{RTTMs: 5, ConnBps: 40e6})
	dst := cpAgent(t, "b", dstRoot, k, nil)

	// Agent to agent, tuned live by default.
	out, err := run(t, "cp", "-r", "--json", "--token-key", keyFile, src+"/run7", dst+"/archive/")
	if err != nil {
		t.Fatalf("cp -r: %v\n%s", err, out)
	}
	var live struct {
		Files int `json:"files"`
		Auto  *struct {
			Mode  string  `json:"mode"`
			RTTms float64 `json:"rtt_ms"`
		} `json:"auto"`
	}
	if err := json.Unmarshal([]byte(out), &live); err != nil || live.Files != 60 || live.Auto == nil || live.Auto.Mode != "live" || live.Auto.RTTms < 5 {
		t.Errorf("cp -r --json (%v):\n%s", err, out)
	}
	cpSameTree(t, filepath.Join(dstRoot, "archive/run7"), want)

	// To a local directory, where the small files come in batches, with
	// the sampling planner: steps printed with -v, and in --json.
	local := filepath.Join(work, "local")
	out, err = run(t, "cp", "-r", "--sample", "-v", "--token-key", keyFile, src+"/run7", local+"/")
	if err != nil {
		t.Fatalf("cp -r --sample -v: %v\n%s", err, out)
	}
	if !strings.Contains(out, "step 1") || !strings.Contains(out, "auto: rtt") || !strings.Contains(out, "copied 60 files") {
		t.Errorf("cp -r --sample -v printed:\n%s", out)
	}
	cpSameTree(t, filepath.Join(local, "run7"), want)
	local = filepath.Join(work, "local2")
	out, err = run(t, "cp", "-r", "--sample", "--json", "--token-key", keyFile, src+"/run7", local+"/")
	if err != nil {
		t.Fatalf("cp -r --sample --json: %v\n%s", err, out)
	}
	var rep struct {
		Files int `json:"files"`
		Steps []struct {
			Phase         string `json:"phase"`
			Files         int    `json:"files"`
			PP, P, CC     int
			BytesPerSecPS float64 `json:"bytes_per_s"`
		} `json:"steps"`
		Auto *struct {
			Mode  string  `json:"mode"`
			RTTms float64 `json:"rtt_ms"`
			BDP   int64   `json:"bdp"`
			From  string  `json:"bandwidth_from"`
		} `json:"auto"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	files := 0
	for _, s := range rep.Steps {
		files += s.Files
	}
	if rep.Files != 60 || files != 60 || rep.Auto == nil || rep.Auto.Mode != "sample" || rep.Auto.RTTms < 5 || rep.Auto.From != "probe" {
		t.Errorf("--json: %s", out)
	}
	cpSameTree(t, filepath.Join(local, "run7"), want)

	// Fixed settings: one step with them; a second run skips everything.
	fixed := filepath.Join(work, "fixed")
	for run1 := range 2 {
		out, err = run(t, "cp", "-r", "--json", "--pp", "8", "--cc", "4", "--token-key", keyFile, src+"/run7", fixed+"/")
		if err != nil {
			t.Fatalf("cp -r --pp 8 --cc 4: %v\n%s", err, out)
		}
		var fx struct {
			Skipped int `json:"skipped"`
			Steps   []struct {
				PP, P, CC int
			} `json:"steps"`
			Auto any `json:"auto"`
		}
		json.Unmarshal([]byte(out), &fx)
		// The second run finds every file in place before it plans:
		// no step at all.
		steps := len(fx.Steps) == 1 && fx.Steps[0].PP == 8 && fx.Steps[0].CC == 4 && fx.Steps[0].P == 4
		if run1 == 1 {
			steps = len(fx.Steps) == 0
		}
		if !steps || fx.Auto != nil || fx.Skipped != 60*run1 {
			t.Errorf("run %d with fixed settings: %s", run1+1, out)
		}
	}
	cpSameTree(t, filepath.Join(fixed, "run7"), want)
}

func TestCpFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cp", "-r", "--auto", "--cc", "4", "a", "b"}, "either --auto or the settings"},
		{[]string{"cp", "--sample", "a", "b"}, "use it with -r"},
		{[]string{"cp", "-r", "--sample", "--p", "2", "a", "b"}, "use it with -r"},
		{[]string{"cp", "-r", "--bandwidth", "100", "a", "b"}, "give --sample too"},
		{[]string{"cp", "-r", "--pp", "0", "a", "b"}, "at least 1"},
		{[]string{"cp", "-r", "--sample", "--bandwidth", "-1", "a", "b"}, "--bandwidth"},
		{[]string{"cp", "-r", "--ci", "4", "a", "b"}, "give --policy-server too"},
		{[]string{"cp", "-r", "--policy-server", "http://x", "--cc", "4", "a", "b"}, "--cc does not apply"},
		{[]string{"cp", "-r", "--policy-server", "http://x", "--policy-pair", "a1", "a", "b"}, "SRC:DST"},
		{[]string{"cp", "-r", "--policy-server", "http://x", "--auto", "a", "b"}, "--auto does not apply"},
		{[]string{"cp", "--chunk-min", "-1", "a", "b"}, "--chunk-min -1"},
		{[]string{"cp", "--sub-write", "1", "a", "b"}, "--sub-write 1"},
		{[]string{"cp", "--sync", "sometimes", "a", "b"}, `--sync "sometimes": want one of exists, size, mtime, checksum`},
		{[]string{"cp", "--sync", "size", "--overwrite=false", "a", "b"}, "give one"},
		{[]string{"cp", "--sync", "size", "--sources", "a,b", "c"}, "are not taken with --sources"},
		{[]string{"agent", "--root", ".", "--max-cc", "-1"}, "--max-cc -1"},
		{[]string{"agent", "--root", ".", "--max-mbps", "-5"}, "--max-mbps -5"},
	} {
		out, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v (%s), want an error about %q", c.args, err, out, c.want)
		}
	}
}

// TestCpPolicyServer: `sluice cp --policy-server` is the Policy Service's
// adaptive client: it copies everything, never runs more streams than its
// allocation, releases it at the end, and is refused with a clear error,
// writing nothing, on a pair the service does not know.
func TestCpPolicyServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newClusterSerial(t, 2)
	ctx := context.Background()
	if _, err := c.admin.SetPolicy(ctx, server.PolicyConfig{Policy: "greedy",
		Defaults: server.PolicyParams{Initial: 16, Update: 4, PairMax: 128, ClientMax: 32, LeaseSeconds: 60},
		Pairs: []server.PairPolicy{{Source: "a1", Destination: "a2",
			Params: server.PolicyParams{Initial: 4, Update: 2, PairMax: 8, ClientMax: 8, LeaseSeconds: 60}}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.CreateToken(ctx, api.TokenIn{User: "alice", VO: "cms"})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	srcRoot, dstRoot := filepath.Join(work, "src"), filepath.Join(work, "dst")
	os.MkdirAll(dstRoot, 0o755)
	want := cpDataset(t, filepath.Join(srcRoot, "run7"), 30, 300_000)
	// Agents with the names the server knows, so that cp finds the pair
	// by asking them.
	src := cpAgent(t, "a1", srcRoot, k, &emul.Config{ConnBps: 20e6})
	dst := cpAgent(t, "a2", dstRoot, k, nil)

	out, err := run(t, "cp", "-r", "--json", "--token-key", keyFile, "--policy-server", "http://"+c.addr, "--policy-token", tok.Token,
		"--p", "2", "--ci", "1", "--cmax", "4", "--adapt-every", "2", "--threshold", "0", src+"/run7", dst+"/archive/")
	if err != nil {
		t.Fatalf("cp --policy-server: %v\n%s", err, out)
	}
	var rep struct {
		Files      int                  `json:"files"`
		Adaptation []copyjob.AdaptPoint `json:"adaptation"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	cpSameTree(t, filepath.Join(dstRoot, "archive/run7"), want)
	if rep.Files != 30 || len(rep.Adaptation) < 2 {
		t.Fatalf("report: %s", out)
	}
	t.Logf("adaptation: %+v", rep.Adaptation)
	grew := false
	for _, pt := range rep.Adaptation {
		if pt.Streams > pt.Allocated || pt.Allocated > 8 {
			t.Errorf("at %.2f s: %d streams in use, %d allocated (pair max 8)", pt.At, pt.Streams, pt.Allocated)
		}
		grew = grew || pt.Allocated > 4
	}
	if first := rep.Adaptation[0]; first.Allocated != 4 || first.Concurrency != 1 {
		t.Errorf("first point %+v: want the initial 4 streams, concurrency min(c_i 1, 4/2)", first)
	}
	if !grew {
		t.Errorf("allocation never grew past s_i: %+v", rep.Adaptation)
	}
	if as, err := c.admin.Allocations(ctx); err != nil || len(as) != 0 {
		t.Errorf("allocations left after the copy: %+v (%v)", as, err)
	}

	// A pair the service does not know: refused before anything moves.
	out, err = run(t, "cp", "-r", "--token-key", keyFile, "--policy-server", "http://"+c.addr, "--policy-token", tok.Token,
		"--policy-pair", "a1:nowhere", src+"/run7", dst+"/refused/")
	if err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("unknown pair: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dstRoot, "refused")); !os.IsNotExist(err) {
		t.Errorf("a refused copy created its destination (%v)", err)
	}
}

// TestAutoChecksum: --checksum auto picks crc32c between local files and
// agents, adler32 as soon as a GridFTP or XRootD server is an end.
func TestAutoChecksum(t *testing.T) {
	for _, tc := range []struct {
		urls []string
		want string
	}{
		{[]string{"/data/a", "/tmp/b"}, "crc32c"},
		{[]string{"sluice://dtn1:7000/a", "sluices://dtn2:7000/b"}, "crc32c"},
		{[]string{"ftp://gridftp:2811/a", "/tmp/b"}, "adler32"},
		{[]string{"sluice://dtn1:7000/a", "gsiftp://dtn2/b"}, "adler32"},
		{[]string{"root://eos//a", "/tmp/b"}, "adler32"},
		{[]string{"xroot://eos//a", "sluice://dtn1:7000/b"}, "adler32"},
	} {
		var eps []copyjob.Endpoint
		for _, u := range tc.urls {
			eps = append(eps, copyjob.Endpoint{URL: u})
		}
		if got := autoChecksum(eps...); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.urls, got, tc.want)
		}
	}
}

// TestProgressViewFinishes: the progress bar of a copy that stops short
// (interrupted, failed) lets the command end. Before, finish waited for
// ever for a bar that could not complete, on a terminal only, so Ctrl-C
// and every failed copy hung there until kill -9.
func TestProgressViewFinishes(t *testing.T) {
	for _, tc := range []struct {
		name string
		done int64
	}{{"stopped short", 10 << 20}, {"complete", 100 << 20}, {"nothing moved", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			v := &progressView{w: &out, last: time.Now(), tty: true}
			v.update(copyjob.Progress{Bytes: 100 << 20, Done: tc.done, Files: 3})
			ended := make(chan struct{})
			go func() { v.finish(); close(ended) }()
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("finish did not return")
			}
		})
	}
	// /dev/null is a character device, not a terminal: plain lines, no bar.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if newProgressView(null).tty {
		t.Error("/dev/null taken for a terminal")
	}
}

// TestProgressViewLearnsTotal: the bar of `sluice watch` (and submit
// --watch) takes the job's size when the server learns it. A job read
// right after its submission has no size yet; before, the bar kept that
// first total of 0 and showed "352.0 MiB / 0.0 b" with an empty bar for
// the whole job (make run), and never completed. Sizes are in decimal
// units, as the rate beside them (MB and MB/s), with an ETA.
func TestProgressViewLearnsTotal(t *testing.T) {
	var out bytes.Buffer
	v := &progressView{w: &out, last: time.Now(), tty: true, refresh: true}
	v.update(copyjob.Progress{Files: 2})
	v.update(copyjob.Progress{Bytes: 100e6, Done: 50e6, Files: 2, FilesDone: 1, Rate: 10e6})
	time.Sleep(300 * time.Millisecond) // a frame at half way
	v.update(copyjob.Progress{Bytes: 100e6, Done: 100e6, Files: 2, FilesDone: 2, Rate: 10e6})
	v.finish()
	if !v.bar.Completed() {
		t.Error("the bar of a finished job did not complete")
	}
	s := out.String()
	if !strings.Contains(s, "50.0 MB / 100.0 MB") || !strings.Contains(s, "100.0 MB / 100.0 MB") {
		t.Errorf("the bar does not show the job's size in MB:\n%s", s)
	}
	if !strings.Contains(s, "10 MB/s 1/2 files ETA 5s") {
		t.Errorf("the bar does not show the rate and ETA:\n%s", s)
	}
	if strings.Contains(s, "MiB") {
		t.Errorf("the bar mixes binary units with MB/s:\n%s", s)
	}
}

// TestProgressViewHoldsOnStop: the bar of a copy stopped by Ctrl-C keeps
// what it showed; the copy's last progress counts only finished files
// (the bytes of the one in flight are in its journal), and the bar was
// redrawn at "0.0 b / 2.0 GiB".
func TestProgressViewHoldsOnStop(t *testing.T) {
	v := &progressView{w: io.Discard, last: time.Now(), tty: true}
	v.update(copyjob.Progress{Bytes: 2e9, Done: 1.2e9, Files: 1, Rate: 100e6})
	v.update(copyjob.Progress{Bytes: 2e9, Done: 0, Files: 1})
	if got := v.bar.Current(); got != 1.2e9 {
		t.Errorf("bar at %d after the stop, want 1.2e9", got)
	}
	v.update(copyjob.Progress{Bytes: 3e9, Done: 0, Files: 2}) // a new total starts over
	if got := v.bar.Current(); got != 0 {
		t.Errorf("bar at %d of a new total, want 0", got)
	}
	v.finish()
}

// TestProgressLine: off a terminal, progress is a line with sizes and
// rate in one system and an ETA once the rate is known.
func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		p    copyjob.Progress
		want string
	}{
		{copyjob.Progress{Bytes: 2e9, Done: 1.2e9, Rate: 100e6, Files: 10, FilesDone: 6}, " 60.0%  1.2 GB / 2.0 GB  100 MB/s  6/10 files  0 retries  ETA 8s\n"},
		{copyjob.Progress{Bytes: 2e9, Done: 0, Files: 10}, "  0.0%  0 B / 2.0 GB  0 B/s  0/10 files  0 retries\n"},
		{copyjob.Progress{Bytes: 5e12, Done: 1e12, Rate: 250e6, Files: 1}, " 20.0%  1.0 TB / 5.0 TB  250 MB/s  0/1 files  0 retries  ETA 4h27m\n"},
	} {
		var out bytes.Buffer
		v := &progressView{w: &out}
		v.update(tc.p)
		if out.String() != tc.want {
			t.Errorf("line %q, want %q", out.String(), tc.want)
		}
	}
}

// TestETAText: an ETA reads as a person would say it.
func TestETAText(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, ""}, {-time.Second, ""}, {400 * time.Millisecond, ""}, {42 * time.Second, "ETA 42s"},
		{59600 * time.Millisecond, "ETA 1m00s"}, {185 * time.Second, "ETA 3m05s"}, {2*time.Hour + 14*time.Minute + 10*time.Second, "ETA 2h14m"},
	} {
		if got := etaText(tc.d); got != tc.want {
			t.Errorf("etaText(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := eta(100, 100, 5); got != 0 {
		t.Errorf("eta of a finished copy: %v", got)
	}
	if got := eta(100, 0, 0); got != 0 {
		t.Errorf("eta without a rate: %v", got)
	}
}

// TestCpJSONOnFailure: with --json, a copy that fails still prints its
// report (what was done, and the error) for the script that reads it,
// and exits non-zero.
func TestCpJSONOnFailure(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")) // not there yet
	out, err := run(t, "cp", "--json", filepath.Join(dir, "missing"), filepath.Join(dir, "dst"))
	if err == nil {
		t.Fatal("a copy of a missing source succeeded")
	}
	var rep struct {
		Files int    `json:"files"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || !strings.Contains(rep.Error, "missing") {
		t.Errorf("report %q (%v): want JSON naming the error", out, jerr)
	}
}

// TestCpInterrupt: Ctrl-C (SIGINT) in the middle of a copy stops it with
// status 130 and a message saying how to resume, leaves nothing at the
// destination path, and the same command run again resumes and ends
// with the original bytes.
func TestCpInterrupt(t *testing.T) {
	work := t.TempDir()
	keyFile, k := testKey(t, work)
	srcRoot := filepath.Join(work, "src")
	if err := os.MkdirAll(srcRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 24 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(srcRoot, "f.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := cpAgent(t, "slow", srcRoot, k, &emul.Config{CapacityBps: 8e6}) // about 3 s
	jd := filepath.Join(work, "journal")
	dst := filepath.Join(work, "out.bin")
	args := []string{"cp", "--token-key", keyFile, "--journal-dir", jd, src + "/f.bin", dst}
	cmd, log := startSluice(t, args)
	// Interrupt once the journal records some of the file.
	done := waitJournaled(jd, 1)
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted cp: %v, want exit status 130\n%s", err, log.String())
	}
	if done == 0 || done >= size {
		t.Fatalf("interrupted with %d of %d bytes journaled\n%s", done, size, log.String())
	}
	if !strings.Contains(log.String(), "run the same command again to resume") {
		t.Errorf("the message does not say how to resume:\n%s", log.String())
	}
	// And what is kept: the file's checkpointed bytes, not "0.0 b".
	if s := log.String(); !strings.Contains(s, "interrupted: 0 of 1 files copied (0 B); ") ||
		!strings.Contains(s, " of 1 unfinished file kept to resume from; ") || !strings.Contains(s, " of 25 MB kept in all") {
		t.Errorf("the message does not say what was kept:\n%s", s)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatal("the destination path exists after an interrupted copy")
	}
	res, err := run(t, args[:len(args):len(args)]...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, res)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the resumed copy differs from the original (%v)", err)
	}
}

// TestProgressFilesRemain: when the bytes are all there but files are
// not done yet (a tree of empty files, the last checksums and renames),
// progress says so: not 100%, and the bar does not end.
func TestProgressFilesRemain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       copyjob.Progress
		pct     string
		barDone bool
	}{
		{"bytes done, files remain", copyjob.Progress{Bytes: 100, Done: 100, Files: 5000, FilesDone: 3}, " 99.9%", false},
		{"empty files remain", copyjob.Progress{Bytes: 0, Done: 0, Files: 10, FilesDone: 4}, " 99.9%", false},
		{"all done", copyjob.Progress{Bytes: 100, Done: 100, Files: 5000, FilesDone: 5000}, "100.0%", true},
		{"half way", copyjob.Progress{Bytes: 100, Done: 50, Files: 2, FilesDone: 1}, " 50.0%", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			v := &progressView{w: &out}
			v.update(tc.p)
			if !strings.HasPrefix(out.String(), tc.pct) {
				t.Errorf("line %q, want it to start with %q", out.String(), tc.pct)
			}
			if got := barCurrent(tc.p) >= tc.p.Bytes && tc.p.Bytes > 0; got != tc.barDone {
				t.Errorf("bar at %d of %d: ended %v, want %v", barCurrent(tc.p), tc.p.Bytes, got, tc.barDone)
			}
		})
	}
}

// TestCpOutlivesItsTokens: a copy that runs longer than the tokens it
// mints (--token-ttl 2s, a copy of about 3 s from a slow agent) mints
// fresh ones as it goes and finishes; it failed when its one token
// expired (the agent refuses an expired token, which no retry fixes).
func TestCpOutlivesItsTokens(t *testing.T) {
	work := t.TempDir()
	keyFile, k := testKey(t, work)
	srcRoot := filepath.Join(work, "src")
	dstRoot := filepath.Join(work, "dst")
	for _, d := range []string{srcRoot, dstRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 24<<20)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(srcRoot, "f.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := cpAgent(t, "slow", srcRoot, k, &emul.Config{CapacityBps: 8e6})
	dst := cpAgent(t, "dst", dstRoot, k, nil)
	start := time.Now()
	res, err := run(t, "cp", "--token-key", keyFile, "--token-ttl", "2s", "--journal-dir", filepath.Join(work, "j"), src+"/f.bin", dst+"/out.bin")
	if err != nil {
		t.Fatalf("cp: %v\n%s", err, res)
	}
	if took := time.Since(start); took < 2500*time.Millisecond {
		t.Logf("the copy took %v: shorter than the tokens it outlives, so this run tests nothing", took)
	}
	if got, err := os.ReadFile(filepath.Join(dstRoot, "out.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the copy differs from the original (%v)", err)
	}
	if _, err := run(t, "cp", "--token-key", keyFile, "--token-ttl", "100ms", src+"/f.bin", filepath.Join(work, "x")); err == nil || !strings.Contains(err.Error(), "--token-ttl") {
		t.Errorf("--token-ttl 100ms: %v, want an error naming it", err)
	}
}

// TestCpChecksumFlag: an unknown --checksum is refused before anything
// is opened, naming every value the flag takes. Before, the copy started
// and failed with "invalid request: checksum "bogus" (want one of
// [adler32 md5 sha256 crc32c])", which left out auto (the default) and
// none, both taken.
func TestCpChecksumFlag(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "f")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, "cp", "--checksum", "bogus", "--journal-dir", filepath.Join(dir, "j"), src, filepath.Join(dir, "g"))
	if err == nil || !strings.Contains(err.Error(), "--checksum") || !strings.Contains(err.Error(), "auto") || !strings.Contains(err.Error(), "none") {
		t.Errorf("cp --checksum bogus: %v, want an error naming the flag and its values, auto and none among them", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "g")); !os.IsNotExist(err) {
		t.Errorf("cp --checksum bogus made the destination: %v", err)
	}
	for _, c := range []string{"auto", "none", "md5"} {
		if out, err := run(t, "cp", "--checksum", c, "--journal-dir", filepath.Join(dir, "j"), src, filepath.Join(dir, c)); err != nil {
			t.Errorf("cp --checksum %s: %v\n%s", c, err, out)
		}
	}
}

// TestCpRerunAndOverwrite: `sluice cp -r SRC DST` run again, local to
// local and agent to agent, lands where the first run did (DST, never
// DST/SRC), and after a source file changed it copies the rest, fails
// naming the file that differs, and leaves it as it was, until a run with
// --overwrite replaces it. A single file and a --sources copy onto a file
// that differs fail likewise; copied again onto the same file, both skip
// it.
func TestCpRerunAndOverwrite(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	srcRoot, dstRoot := filepath.Join(work, "a"), filepath.Join(work, "b")
	os.MkdirAll(dstRoot, 0o755)
	cpDataset(t, filepath.Join(srcRoot, "run7"), 12, 20_000)
	src, dst := cpAgent(t, "a", srcRoot, k, nil), cpAgent(t, "b", dstRoot, k, nil)
	for _, tc := range []struct {
		name, from, to string
		local          string // where the tree lands
	}{
		{"local", filepath.Join(srcRoot, "run7"), filepath.Join(work, "copy"), filepath.Join(work, "copy")},
		{"local into DST/", filepath.Join(srcRoot, "run7"), filepath.Join(work, "into") + "/", filepath.Join(work, "into", "run7")},
		{"agents", src + "/run7", dst + "/copy", filepath.Join(dstRoot, "copy")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := filepath.Join(srcRoot, "run7", "sub1", "f001")
			orig, _ := os.ReadFile(changed)
			defer os.WriteFile(changed, orig, 0o644)
			cp := func(args ...string) (string, error) {
				return run(t, append([]string{"cp", "-r", "--token-key", keyFile}, append(args, tc.from, tc.to)...)...)
			}
			if out, err := cp(); err != nil {
				t.Fatalf("first run: %v\n%s", err, out)
			}
			if out, err := cp(); err != nil || !strings.Contains(out, "copied 0 files") || !strings.Contains(out, "skipped 12 files") {
				t.Fatalf("rerun: %v\n%s", err, out)
			}
			os.WriteFile(changed, []byte("changed"), 0o644)
			out, err := cp()
			if err == nil || !strings.Contains(out, "f001") || !strings.Contains(out, "exists and differs; use --overwrite to replace it") {
				t.Fatalf("rerun after a change: %v, want a failure naming f001\n%s", err, out)
			}
			if got, _ := os.ReadFile(filepath.Join(tc.local, "sub1", "f001")); !bytes.Equal(got, orig) {
				t.Error("the file that differs was replaced without --overwrite")
			}
			if out, err := cp("--overwrite"); err != nil || !strings.Contains(out, "copied 1 files") {
				t.Fatalf("--overwrite: %v\n%s", err, out)
			}
			// Sync levels: a source changed to another size is copied
			// over its old copy by --sync size, the rest kept; then
			// --sync checksum finds every file in sync.
			os.WriteFile(changed, []byte("changed again"), 0o644)
			if out, err := cp("--sync", "size"); err != nil || !strings.Contains(out, "copied 1 files") || !strings.Contains(out, "skipped 11 files") {
				t.Fatalf("--sync size after a change: %v\n%s", err, out)
			}
			if out, err := cp("--sync", "checksum"); err != nil || !strings.Contains(out, "copied 0 files") || !strings.Contains(out, "skipped 12 files") {
				t.Fatalf("--sync checksum: %v\n%s", err, out)
			}
			want := map[string][]byte{}
			filepath.Walk(filepath.Join(srcRoot, "run7"), func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					rel, _ := filepath.Rel(filepath.Join(srcRoot, "run7"), p)
					want[rel], _ = os.ReadFile(p)
				}
				return nil
			})
			cpSameTree(t, tc.local, want) // and nothing nested below
		})
	}

	// One file, and one file from replicas, onto a file that differs.
	one := filepath.Join(srcRoot, "run7", "sub0", "f000")
	data, _ := os.ReadFile(one)
	replica := filepath.Join(work, "replica")
	os.WriteFile(replica, data, 0o644)
	for _, args := range [][]string{{one}, {"--sources", one + "," + replica, "--probe", "100ms"}} {
		target := filepath.Join(t.TempDir(), "f")
		os.WriteFile(target, []byte("mine"), 0o644)
		cp := func(more ...string) (string, error) {
			return run(t, append(append(append([]string{"cp"}, more...), args...), target)...)
		}
		out, err := cp()
		if err == nil || !strings.Contains(out+err.Error(), "exists and differs; use --overwrite to replace it") {
			t.Errorf("cp %v onto a file that differs: %v\n%s", args, err, out)
		}
		if got, _ := os.ReadFile(target); string(got) != "mine" {
			t.Errorf("cp %v replaced the file without --overwrite", args)
		}
		if out, err := cp("--overwrite"); err != nil {
			t.Errorf("cp --overwrite %v: %v\n%s", args, err, out)
		}
		if got, _ := os.ReadFile(target); !bytes.Equal(got, data) {
			t.Errorf("cp --overwrite %v: not the source's bytes", args)
		}
		if out, err := cp(); err != nil || !strings.Contains(out, "skipped") {
			t.Errorf("cp %v again: %v, want the file skipped\n%s", args, err, out)
		}
	}
}

// TestCpSmallFilesFewRoundTrips: `sluice cp -r` with no flags moves a tree
// of small files over a 50 ms path in fewer requests than files, at both
// agents: the files go in batches (the destination pulls many in one
// request and renames many in one), so a round trip is paid per batch, not
// per file.
func TestCpSmallFilesFewRoundTrips(t *testing.T) {
	work := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
	keyFile, k := testKey(t, work)
	srcRoot, dstRoot := filepath.Join(work, "a"), filepath.Join(work, "b")
	os.MkdirAll(dstRoot, 0o755)
	const files = 300
	want := cpDataset(t, filepath.Join(srcRoot, "run"), files, 16<<10)
	var counts [2]atomic.Int64
	agentCounted := func(i int, name, root string, emu *emul.Config) string {
		a, err := agent.New(agent.Config{Name: name, Root: root, Key: k, Emulation: emu})
		if err != nil {
			t.Fatal(err)
		}
		h := a.Handler()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			counts[i].Add(1)
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { srv.Close(); a.Close() })
		return "sluice://" + strings.TrimPrefix(srv.URL, "http://")
	}
	src := agentCounted(0, "a", srcRoot, &emul.Config{RTTMs: 50})
	dst := agentCounted(1, "b", dstRoot, nil)
	out, err := run(t, "cp", "-r", "--json", "--token-key", keyFile, src+"/run", dst+"/copy")
	if err != nil {
		t.Fatalf("cp -r: %v\n%s", err, out)
	}
	cpSameTree(t, filepath.Join(dstRoot, "copy"), want)
	srcReq, dstReq := counts[0].Load(), counts[1].Load()
	t.Logf("%d files: %d requests at the source agent, %d at the destination", files, srcReq, dstReq)
	for _, c := range []struct {
		who string
		n   int64
	}{{"source", srcReq}, {"destination", dstReq}} {
		if c.n >= files/4 {
			t.Errorf("%s agent served %d requests for %d files: want batches (< %d)", c.who, c.n, files, files/4)
		}
	}
}
