package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// TestKillAndResume interrupts one 64 MiB copy 20 times at seeded random
// points and resumes it each time from the same journal.
//
// The bound asserted per interruption: a worker holds at most one sub-write
// that is not recorded, so
//
//	re-sent ≤ CC·SubWrite                                 (cancellation: the journal is written on exit)
//	re-sent ≤ CC·SubWrite + (Done − Journaled at exit)     (kill -9: no exit journal)
//
// where "re-sent" is measured outside the engine: bytes the destination
// received during the run minus the growth of the done bytes in the journal
// on disk. Done − Journaled is what completed since the last checkpoint,
// at most CheckpointEvery's worth of bytes.
func TestKillAndResume(t *testing.T) {
	const (
		size     = 64 << 20
		cc       = 4
		subWrite = 256 << 10
		rounds   = 20
	)
	e := newEnv(t)
	data := e.put(t, "big", size, 9)
	base := e.spec("big", size)
	base.CC, base.ChunkMin, base.SubWrite = cc, 1<<20, subWrite
	base.CheckpointEvery = 5 * time.Millisecond
	rng := rand.New(rand.NewPCG(42, 0))
	var totalSent, totalResent int64
	var worst [2]int64 // largest re-sent of a cancelled and of a killed round
	for i := range rounds {
		crash := i%2 == 1
		before := journalDone(t, base.Journal)
		ctx, cancel := context.WithCancel(context.Background())
		dst := &fault{Backend: e.dst, cancel: cancel}
		// Each run stops after 256 KiB..3 MiB: 20 runs cannot finish 64 MiB.
		dst.cancelAt = 256<<10 + rng.Int64N(3<<20-256<<10)
		s := base
		s.Dst = dst
		tr, err := start(ctx, s, hooks{noExitJournal: crash})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Wait()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: error %v, want the cancellation", i, err)
		}
		p := tr.Progress()
		after := journalDone(t, base.Journal)
		sent := dst.sent.Load()
		resent := sent - (after - before)
		bound := int64(cc * subWrite)
		if crash {
			bound += p.Done - after
		} else if after != p.Done {
			t.Errorf("round %d: exit journal records %d bytes, %d are done", i, after, p.Done)
		}
		if resent < 0 || resent > bound || res.Resent > int64(cc*subWrite) {
			t.Errorf("round %d (crash %v): re-sent %d (engine says %d), bound %d", i, crash, resent, res.Resent, bound)
		}
		if !exists(e.local(TempName(s.DstPath))) || exists(e.local(s.DstPath)) {
			t.Fatalf("round %d: want the temporary file and no final file", i)
		}
		totalSent += sent
		totalResent += resent
		if k := map[bool]int{false: 0, true: 1}[crash]; resent > worst[k] {
			worst[k] = resent
		}
	}
	s := base
	dst := &fault{Backend: e.dst}
	s.Dst = dst
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if !strings.Contains(res.Note, "resumed") {
		t.Errorf("note %q: want the resumption reported", res.Note)
	}
	totalSent += dst.sent.Load()
	t.Logf("%d interruptions: %d bytes sent for %d (%d re-sent, %.0f KiB per interruption; worst %d KiB cancelled, %d KiB killed; CC·SubWrite = %d KiB)",
		rounds, totalSent, size, totalSent-size, float64(totalResent)/rounds/1024, worst[0]>>10, worst[1]>>10, cc*subWrite>>10)
	if totalSent-size != totalResent {
		t.Errorf("re-sent bytes do not add up: %d sent in all, %d counted per round", totalSent-size, totalResent)
	}
}

// TestResumeOrStartOver prepares a journal and temporary file in various
// states and checks that the engine resumes only from a trustworthy pair.
func TestResumeOrStartOver(t *testing.T) {
	const size = 1 << 20
	cases := []struct {
		name   string
		mutate func(t *testing.T, e *env, s Spec, j *journal) // before j is written
		raw    string                                         // if set, written as the journal instead of j
		resume bool
		why    string
	}{
		{"valid", nil, "", true, ""},
		{"corrupt journal", nil, `{"version":1,"src":"f","dst`, false, "corrupt"},
		{"journal of another size", func(t *testing.T, e *env, s Spec, j *journal) { j.Size = size + 1 }, "", false, "size changed"},
		{"journal of another file", func(t *testing.T, e *env, s Spec, j *journal) { j.Src = "other" }, "", false, "journal"},
		{"source modified", func(t *testing.T, e *env, s Spec, j *journal) { j.ModTime = j.ModTime.Add(-time.Second) }, "", false, "modified"},
		{"temporary file missing", func(t *testing.T, e *env, s Spec, j *journal) {
			os.Remove(e.local(TempName(s.DstPath)))
		}, "", false, "missing"},
		{"temporary file short", func(t *testing.T, e *env, s Spec, j *journal) {
			os.Truncate(e.local(TempName(s.DstPath)), size/2)
		}, "", false, "bytes, expected"},
		{"ranges out of bounds", func(t *testing.T, e *env, s Spec, j *journal) { j.Done = [][2]int64{{0, size + 1}} }, "", false, "inconsistent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", size, 10)
			s := e.spec("f", size)
			fi, err := e.src.Stat(context.Background(), "f")
			if err != nil {
				t.Fatal(err)
			}
			// The temporary file holds the first half, plus garbage in
			// the second: resuming from a wrong journal would show as
			// a checksum mismatch in the note.
			tmp := e.local(TempName(s.DstPath))
			os.MkdirAll(e.local("out"), 0o755)
			garbage := make([]byte, size)
			copy(garbage, data[:size/2])
			if err := os.WriteFile(tmp, garbage, 0o644); err != nil {
				t.Fatal(err)
			}
			j := newJournal(s.SrcPath, s.DstPath, size, fi.ModTime, ranges{{0, size / 2}})
			if c.mutate != nil {
				c.mutate(t, e, s, &j)
			}
			if err := writeJournal(s.Journal, j); err != nil {
				t.Fatal(err)
			}
			if c.raw != "" {
				if err := os.WriteFile(s.Journal, []byte(c.raw), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dst := &fault{Backend: e.dst}
			s.Dst = dst
			res, err := Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			e.checkFinal(t, s, data)
			if strings.Contains(res.Note, "mismatch") {
				t.Fatalf("resumed from an untrustworthy journal: %s", res.Note)
			}
			wantSent := int64(size)
			if c.resume {
				wantSent = size / 2
			}
			if got := dst.sent.Load(); got != wantSent {
				t.Errorf("sent %d bytes, want %d (note %q)", got, wantSent, res.Note)
			}
			if !c.resume && (!strings.Contains(res.Note, "started over") || !strings.Contains(res.Note, c.why)) {
				t.Errorf("note %q: want it to say it started over because %q", res.Note, c.why)
			}
		})
	}
}
