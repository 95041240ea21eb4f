package copyjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/linkmon"
)

// twoReplicas writes size random bytes as file f in two local source
// directories and returns them as replicas, an empty destination
// directory, the data, and a monitor of both links that has never run (no
// samples).
func twoReplicas(t *testing.T, size int) ([]Endpoint, string, []byte, *linkmon.Monitor) {
	t.Helper()
	a, b, dst := t.TempDir(), t.TempDir(), t.TempDir()
	data := writeRandom(t, filepath.Join(a, "f"), size)
	if err := os.WriteFile(filepath.Join(b, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srcs := []Endpoint{localEP(t, filepath.Join(a, "f")), localEP(t, filepath.Join(b, "f"))}
	var links []linkmon.Link
	for _, s := range srcs {
		links = append(links, linkmon.Link{Name: s.URL, Backend: s.Backend, Path: s.Path, Size: int64(len(data))})
	}
	return srcs, dst, data, linkmon.New(links, linkmon.Options{})
}

// TestRunMultiUnmeasured: when the links could not be measured, the copy
// is not refused: equal parts, and replicas that finish take over from
// the others; the file arrives whole.
func TestRunMultiUnmeasured(t *testing.T) {
	srcs, dst, data, mon := twoReplicas(t, 3<<20)
	rep, err := RunMulti(context.Background(), srcs, localEP(t, dst+"/"), MultiOptions{Split: "tcs", Monitor: mon, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	if !strings.Contains(rep.Split, "equal parts with stealing") || rep.Links[0].Planned+rep.Links[1].Planned != int64(len(data)) {
		t.Errorf("report %+v", rep)
	}
}

// fixedHistory is a frozen link history for tests.
type fixedHistory [][]float64

func (h fixedHistory) Series(i int) []float64 { return h[i] }
func (h fixedHistory) Latency(int) float64    { return 0 }
func (h fixedHistory) Hz() float64            { return 4 }

// TestRunMultiHistory: given a History, the plan is made from it, not
// from the monitor's own (here empty) series: a link predicted nine
// times as fast gets nine tenths of the file.
func TestRunMultiHistory(t *testing.T) {
	srcs, dst, data, mon := twoReplicas(t, 4<<20)
	fast, slow := make([]float64, 40), make([]float64, 40)
	for i := range fast {
		fast[i], slow[i] = 9e6, 1e6
	}
	rep, err := RunMulti(context.Background(), srcs, localEP(t, dst+"/"), MultiOptions{Split: "ms", Monitor: mon, History: fixedHistory{fast, slow}, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	if rep.Links[0].Mean != 9e6 || rep.Links[1].Mean != 1e6 {
		t.Fatalf("planned from means %v and %v, want the history's 9e6 and 1e6", rep.Links[0].Mean, rep.Links[1].Mean)
	}
	if share := float64(rep.Links[0].Planned) / float64(len(data)); share < 0.85 || share > 0.95 {
		t.Errorf("the link predicted nine times as fast got %.0f%% of the file, want about 90%%", 100*share)
	}
	if rep.Replicas != 2 {
		t.Errorf("the report says the file came from %d replicas, want 2", rep.Replicas)
	}
	// The best single source plans nothing for the other replica: the
	// file comes from one.
	dst2 := t.TempDir()
	rep, err = RunMulti(context.Background(), srcs, localEP(t, dst2+"/"), MultiOptions{Split: "bos", Monitor: mon, History: fixedHistory{fast, slow}, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst2, "f"), data)
	if rep.Replicas != 1 {
		t.Errorf("bos: the report says the file came from %d replicas, want 1", rep.Replicas)
	}
}

// TestRunMultiOddReplica: with the replica check on, a replica whose
// bytes differ from the others' (same size) is left out when the others
// agree, the note says so and the file is theirs, even when the odd one
// is listed first; two replicas that differ are refused before anything
// is written, as no majority says which is right.
func TestRunMultiOddReplica(t *testing.T) {
	srcs, dst, data, _ := twoReplicas(t, 3<<20)
	c := t.TempDir()
	if err := os.WriteFile(filepath.Join(c, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	odd := append([]byte(nil), data...)
	odd[len(odd)/2] ^= 1
	if err := os.WriteFile(srcs[0].Path, odd, 0o644); err != nil {
		t.Fatal(err)
	}
	three := append(srcs, localEP(t, filepath.Join(c, "f")))
	ctx := context.Background()
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}
	rep, err := RunMulti(ctx, three, localEP(t, dst+"/"), MultiOptions{Split: "tcs", History: hist, Monitor: nil, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	if !strings.Contains(rep.Note, three[0].URL+" not used") || rep.Links[0].Planned != 0 {
		t.Errorf("note %q, plan %+v: want the first replica left out", rep.Note, rep.Links)
	}
	if rep.Replicas != 2 {
		t.Errorf("the report says the file came from %d replicas, want the 2 that were used", rep.Replicas)
	}
	dst2 := t.TempDir()
	_, err = RunMulti(ctx, srcs, localEP(t, dst2+"/"), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: true})
	if err == nil || !strings.Contains(err.Error(), "no majority agrees") {
		t.Errorf("two replicas that differ: %v", err)
	}
	if ents, _ := os.ReadDir(dst2); len(ents) != 0 {
		t.Errorf("a refused copy wrote %d entries", len(ents))
	}
}

// TestRunMultiDestinations: an existing directory given without a
// trailing slash receives the file (as from one source), and a replica
// named twice is refused (it would agree with itself when replicas vote).
func TestRunMultiDestinations(t *testing.T) {
	srcs, dst, data, _ := twoReplicas(t, 1<<20)
	ctx := context.Background()
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}}
	if _, err := RunMulti(ctx, srcs, localEP(t, dst), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	_, err := RunMulti(ctx, []Endpoint{srcs[0], srcs[0]}, localEP(t, t.TempDir()+"/"), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("one replica named twice: %v", err)
	}
}

// TestRunMultiSameReplicaSpelledTwice: one replica named in two spellings
// of its URL (host in capitals, an empty or "." path element, a
// percent-encoded letter: one file to the agent) is refused like one
// named twice in the same spelling. Before, it was taken for two
// replicas: with a third that differs, the file's two names outvoted it,
// and the copy took their bytes.
func TestRunMultiSameReplicaSpelledTwice(t *testing.T) {
	srcs, dst, _, _ := twoReplicas(t, 1<<20)
	dir, name := filepath.Split(srcs[0].Path)
	ctx := context.Background()
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}
	for _, other := range []Endpoint{
		{Backend: srcs[0].Backend, Path: dir + "/" + name, URL: "file://" + dir + "/" + name},
		{Backend: srcs[0].Backend, Path: dir + "./" + name, URL: "file://" + dir + "./" + name},
		{Backend: srcs[0].Backend, Path: dir + name, URL: "FILE://" + dir + "%" + fmt.Sprintf("%02X", name[0]) + name[1:]},
	} {
		three := []Endpoint{srcs[0], other, srcs[1]}
		_, err := RunMulti(ctx, three, localEP(t, dst+"/"), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "named twice") {
			t.Errorf("%s and %s: %v, want the replica refused as named twice", srcs[0].URL, other.URL, err)
		}
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("a refused copy wrote %d entries", len(ents))
	}
}

// TestRunMultiOneReplica: a file with a single replica (a replica list
// of one) is copied from it with every split, without probing a link
// that there is nothing to split across. Before, it was refused: "a
// multi-source copy needs at least two replicas".
func TestRunMultiOneReplica(t *testing.T) {
	srcs, _, data, _ := twoReplicas(t, 1<<20)
	for _, split := range SplitNames() {
		dst := t.TempDir()
		rep, err := RunMulti(context.Background(), srcs[:1], localEP(t, dst+"/"), MultiOptions{Split: split, JournalDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", split, err)
		}
		sameFile(t, filepath.Join(dst, "f"), data)
		if rep.Replicas != 1 || len(rep.Links) != 1 || rep.Links[0].Planned != int64(len(data)) {
			t.Errorf("%s: report %+v, want the one replica planned every byte", split, rep)
		}
		if rep.PlanS >= 1 {
			t.Errorf("%s: planning took %.1f s: the one link was probed (2 s by default)", split, rep.PlanS)
		}
	}
}

// TestRunMultiSameAgentTwoHostNames: one agent's file named through two
// host names (localhost and 127.0.0.1 reach the same agent) is one
// replica, refused like one named twice. Before, it was taken for two:
// with a third replica that differs, the file's two names outvoted it
// and the copy took their bytes, where two replicas that differ must
// fail the copy. Agents of one name (both "t" here) at two addresses
// stay two replicas.
func TestRunMultiSameAgentTwoHostNames(t *testing.T) {
	key := make([]byte, 32)
	dirA, dirB, dst := t.TempDir(), t.TempDir(), t.TempDir()
	writeRandom(t, filepath.Join(dirA, "f"), 1<<20)
	writeRandom(t, filepath.Join(dirB, "f"), 1<<20)
	urlA, a, tokA := testAgent(t, dirA, key)
	urlB, b, _ := testAgent(t, dirB, key)
	ctx := context.Background()
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}
	o := func() MultiOptions {
		return MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: true}
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(urlA, "sluice://"), ":")
	alias, err := sluice.New("http://localhost:"+port, tokA, nil)
	if err != nil {
		t.Fatal(err)
	}
	three := []Endpoint{
		{Backend: a, Path: "/f", URL: urlA + "/f"},
		{Backend: alias, Path: "/f", URL: "sluice://localhost:" + port + "/f"},
		{Backend: b, Path: "/f", URL: urlB + "/f"},
	}
	_, err = RunMulti(ctx, three, localEP(t, dst+"/"), o())
	if err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("%s and %s: %v, want the replica refused as named twice", three[0].URL, three[1].URL, err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("a refused copy wrote %d entries", len(ents))
	}
	// Two agents that share a name are still two replicas: here they
	// differ, so the copy fails for want of a majority, not as a
	// replica named twice.
	_, err = RunMulti(ctx, []Endpoint{three[0], three[2]}, localEP(t, dst+"/"), o())
	if err == nil || strings.Contains(err.Error(), "named twice") || !strings.Contains(err.Error(), "no majority") {
		t.Errorf("two agents of one name: %v, want the copy refused for want of a majority", err)
	}
}

// frozen is a replica whose agent stopped answering: a stopped process or
// a black-holed host keeps the connection open, and every call waits for
// its context.
type frozen struct{ backend.Backend }

func (frozen) Stat(ctx context.Context, _ string) (backend.FileInfo, error) {
	<-ctx.Done()
	return backend.FileInfo{}, ctx.Err()
}

func (frozen) Checksum(ctx context.Context, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// TestRunMultiFrozenReplica: a replica that never answers, named among
// others that do, is left out and the others carry the file, with or
// without the comparison of checksums. Before, the stat of the replicas
// (and their checksums) had no bound: sluice cp --sources with one agent
// stopped waited for ever before copying anything.
func TestRunMultiFrozenReplica(t *testing.T) {
	defer func(d time.Duration) { replicaAnswerTimeout = d }(replicaAnswerTimeout)
	replicaAnswerTimeout = 200 * time.Millisecond
	for _, check := range []bool{false, true} {
		t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
			srcs, dst, data, _ := twoReplicas(t, 1<<20)
			stuck := Endpoint{Backend: frozen{srcs[0].Backend}, Path: srcs[0].Path, URL: "sluice://stopped:1/f"}
			three := []Endpoint{stuck, srcs[0], srcs[1]}
			hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rep, err := RunMulti(ctx, three, localEP(t, dst+"/"), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: check})
			if err != nil {
				t.Fatalf("%v (note %q)", err, rep.Note)
			}
			sameFile(t, filepath.Join(dst, "f"), data)
			if rep.Replicas != 2 || !strings.Contains(rep.Note, "sluice://stopped:1/f not used: no answer") {
				t.Errorf("report %+v: want the stopped replica left out, saying why", rep)
			}
		})
	}
}

// TestRunMultiNoChecksumStillComparesReplicas: --checksum none turns off
// the copy's verification, not the comparison of the replicas (that is
// --no-replica-check): replicas that differ are still found before the
// copy, with the default checksum. Before, checksum none skipped the
// comparison too, and two replicas of one size that differ landed as a
// file mixed of both, reported copied.
func TestRunMultiNoChecksumStillComparesReplicas(t *testing.T) {
	srcs, _, data, _ := twoReplicas(t, 3<<20)
	odd := append([]byte(nil), data...)
	odd[len(odd)*3/4] ^= 1
	if err := os.WriteFile(srcs[1].Path, odd, 0o644); err != nil {
		t.Fatal(err)
	}
	c := t.TempDir()
	if err := os.WriteFile(filepath.Join(c, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}
	o := func() MultiOptions {
		return MultiOptions{Split: "eas", History: hist, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: true, Checksum: "none"}
	}
	dst := t.TempDir()
	_, err := RunMulti(ctx, srcs, localEP(t, dst+"/"), o())
	if err == nil || !strings.Contains(err.Error(), "no majority agrees") {
		t.Errorf("two replicas that differ, checksum none: %v, want the copy refused", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("a refused copy wrote %d entries", len(ents))
	}
	// With a third replica the majority's bytes are copied, unverified
	// as asked, and the odd one is left out.
	three := append(srcs, localEP(t, filepath.Join(c, "f")))
	rep, err := RunMulti(ctx, three, localEP(t, dst+"/"), o())
	if err != nil {
		t.Fatalf("%v (note %q)", err, rep.Note)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	if !strings.Contains(rep.Note, three[1].URL+" not used") {
		t.Errorf("note %q: want the odd replica left out", rep.Note)
	}
}

// TestRunMultiOntoReplica: a destination that is one of the replicas
// (named as the replica, or as its directory) is refused before anything
// is written, as a copy of one source onto itself is. Before, the file
// was copied and renamed over the replica it was being read from: with
// replicas that differ only in what the checks cannot see (checksums
// off), that replica was replaced by a mix.
func TestRunMultiOntoReplica(t *testing.T) {
	srcs, _, _, _ := twoReplicas(t, 1<<20)
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}}
	fi0, err := os.Stat(srcs[1].Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{srcs[1].Path, filepath.Dir(srcs[1].Path) + "/", filepath.Dir(srcs[1].Path) + "/./f"} {
		_, err := RunMulti(context.Background(), srcs, localEP(t, dst), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1, JournalDir: t.TempDir(), CheckReplicas: true})
		if err == nil || !strings.Contains(err.Error(), "onto itself") {
			t.Errorf("destination %s: %v, want the copy refused", dst, err)
		}
	}
	if fi, err := os.Stat(srcs[1].Path); err != nil || !fi.ModTime().Equal(fi0.ModTime()) {
		t.Errorf("the replica was replaced (%v)", err)
	}
}

// TestRunMultiExistingDestination: a multi-source copy onto a file that
// differs fails before the links are probed, naming it and leaving it as
// it was, unless Overwrite; onto the file itself (a rerun) it copies
// nothing and says so; with checksum none, the same size is taken for in
// place, with or without the replicas compared.
func TestRunMultiExistingDestination(t *testing.T) {
	srcs, _, data, _ := twoReplicas(t, 1<<20)
	other := bytes.Repeat([]byte{'x'}, len(data))
	hist := fixedHistory{{1e6, 1e6}, {1e6, 1e6}}
	for _, tc := range []struct {
		name      string
		there     []byte // nil: a directory is there
		checksum  string
		noCompare bool // CheckReplicas off
		overwrite bool
		want      string // "" for a copy that ends with data there
		skipped   bool
	}{
		{"same bytes", data, "", false, false, "", true},
		{"same bytes, replicas not compared", data, "", true, false, "", true},
		{"other bytes, same size", other, "", false, false, "exists and differs; use --overwrite", false},
		{"other bytes, replicas not compared", other, "", true, false, "exists and differs; use --overwrite", false},
		{"another size", data[:100], "", false, false, "exists and differs; use --overwrite", false},
		{"other bytes with Overwrite", other, "", false, true, "", false},
		{"another size with checksum none", data[:100], "none", false, false, "exists and differs", false},
		{"same size with checksum none", other, "none", false, false, "", true},
		{"a directory", nil, "", false, true, "a directory is there", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "f")
			if tc.there == nil {
				// dst is a directory, which receives the file as f:
				// a directory is there too.
				os.MkdirAll(filepath.Join(dst, "f", "sub"), 0o755)
			} else if err := os.WriteFile(dst, tc.there, 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := RunMulti(context.Background(), srcs, localEP(t, dst), MultiOptions{Split: "tcs", History: hist, ProbeTime: 1,
				JournalDir: t.TempDir(), Checksum: tc.checksum, CheckReplicas: !tc.noCompare, Overwrite: tc.overwrite})
			if tc.want != "" {
				if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want ErrExists saying %q", err, tc.want)
				}
				if tc.there != nil {
					sameFile(t, dst, tc.there)
				}
				if len(rep.Links) > 0 {
					t.Error("the links were planned for a copy refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Skipped != tc.skipped {
				t.Errorf("skipped %v, want %v (%+v)", rep.Skipped, tc.skipped, rep)
			}
			if tc.skipped {
				sameFile(t, dst, tc.there)
			} else {
				sameFile(t, dst, data)
			}
		})
	}
}
