package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

func TestCopySizes(t *testing.T) {
	e := newEnv(t)
	const chunk = 64 << 10 // = spec ChunkMin; several-chunk files use chunkSize anyway
	sizes := []int64{0, 1, chunk - 1, chunk, chunk + 1, 5*chunk + 12345}
	algos := append([]string{"none"}, backend.Algorithms...)
	ctx := context.Background()
	i := 0
	for _, size := range sizes {
		for cc := 1; cc <= 8; cc++ {
			i++
			algo := algos[i%len(algos)]
			name := fmt.Sprintf("f%d-cc%d", size, cc)
			t.Run(name+"-"+algo, func(t *testing.T) {
				data := e.put(t, name, size, uint64(i))
				s := e.spec(name, size)
				s.CC, s.Checksum = cc, algo
				s.Durable = cc == 3 // the durable path must copy the same
				res, err := Run(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				e.checkFinal(t, s, data)
				if algo != "none" && res.Checksum != sum(t, data, algo) {
					t.Errorf("result checksum %s, want %s", res.Checksum, sum(t, data, algo))
				}
				if res.Size != size || res.Bytes != size || res.Resent != 0 || res.Retries != 0 {
					t.Errorf("result %+v", res)
				}
			})
		}
	}
}

func TestReplacesExistingAndExpected(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 300<<10, 7)
	s := e.spec("f", int64(len(data)))
	s.Checksum, s.Expected = "sha256", strings.ToUpper(sum(t, data, "sha256"))
	if err := os.MkdirAll(e.local("out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.local(s.DstPath), []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
}

func TestSpecValidation(t *testing.T) {
	e := newEnv(t)
	ok := e.spec("f", 10)
	cases := []struct {
		name string
		edit func(*Spec)
	}{
		{"no source", func(s *Spec) { s.Src = nil }},
		{"no path", func(s *Spec) { s.DstPath = "" }},
		{"dst is dir", func(s *Spec) { s.DstPath = "out/" }},
		{"no journal", func(s *Spec) { s.Journal = "" }},
		{"negative cc", func(s *Spec) { s.CC = -1 }},
		{"bad size", func(s *Spec) { s.Size = -2 }},
		{"bad algo", func(s *Spec) { s.Checksum = "crc64" }},
		{"expected not hex", func(s *Spec) { s.Expected = "xyz" }},
		{"expected wrong length", func(s *Spec) { s.Expected = "0011" }},
		{"expected without algo", func(s *Spec) { s.Checksum, s.Expected = "none", "00000001" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.edit(&s)
			if _, err := Start(context.Background(), s); !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("Start: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := ok.normalize(); err != nil {
		t.Errorf("valid spec refused: %v", err)
	}
}

func TestPermanentErrorsFailFast(t *testing.T) {
	cases := []struct {
		name  string
		setup func(e *env, s *Spec, src, dst *fault)
		want  error
		kept  bool // the temporary file and journal must remain for a rerun
	}{
		{"no space on 3rd write", func(e *env, s *Spec, src, dst *fault) {
			dst.failWrite = func(call int) error {
				if call == 3 {
					return fmt.Errorf("%w: disk full", backend.ErrNoSpace)
				}
				return nil
			}
		}, backend.ErrNoSpace, true},
		{"permission on source read", func(e *env, s *Spec, src, dst *fault) {
			src.Backend = denyOpen{src.Backend}
		}, backend.ErrPermission, true},
		{"source missing", func(e *env, s *Spec, src, dst *fault) { s.SrcPath = "nope" }, backend.ErrNotFound, false},
		{"destination is a directory", func(e *env, s *Spec, src, dst *fault) {
			os.MkdirAll(e.local(s.DstPath), 0o755)
		}, backend.ErrInvalid, false},
		{"size differs from caller's stat", func(e *env, s *Spec, src, dst *fault) { s.Size++ }, ErrSourceChanged, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.put(t, "f", 1<<20, 3)
			s := e.spec("f", 1<<20)
			s.CC = 4
			s.Retry.Base, s.Retry.Max = time.Second, time.Second // a retry would show in the time taken
			src, dst := &fault{Backend: e.src}, &fault{Backend: e.dst}
			s.Src, s.Dst = src, dst
			c.setup(e, &s, src, dst)
			t0 := time.Now()
			res, err := Run(context.Background(), s)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			t.Logf("error: %v", err)
			if el := time.Since(t0); el > 500*time.Millisecond || res.Retries != 0 {
				t.Errorf("took %v with %d retries: not fast", el, res.Retries)
			}
			if fi, err := os.Stat(e.local(s.DstPath)); err == nil && !fi.IsDir() {
				t.Errorf("final path exists after a failure")
			}
			if got := exists(e.local(TempName(s.DstPath))) && exists(s.Journal); got != c.kept {
				t.Errorf("temporary file and journal kept: %v, want %v", got, c.kept)
			}
		})
	}
}

type denyOpen struct{ backend.Backend }

func (d denyOpen) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: %s", backend.ErrPermission, p)
}

func TestTransientErrorsRetried(t *testing.T) {
	reset := errors.New("connection reset by peer")
	cases := []struct {
		name        string
		setup       func(src, dst *fault)
		wantRetries int // exact, or -1: at least one
		fail        bool
	}{
		{"2nd and 5th write fail", func(src, dst *fault) {
			dst.failWrite = func(call int) error {
				if call == 2 || call == 5 {
					return reset
				}
				return nil
			}
		}, 2, false},
		{"short read on 1st open", func(src, dst *fault) {
			src.shortOpen = func(call int) int64 {
				if call == 1 {
					return 1000
				}
				return -1
			}
		}, 1, false},
		{"every write fails", func(src, dst *fault) {
			dst.failWrite = func(int) error { return reset }
		}, -1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", 1<<20, 4)
			s := e.spec("f", 1<<20)
			s.CC = 1 // call numbers then say which sub-write fails
			src, dst := &fault{Backend: e.src}, &fault{Backend: e.dst}
			s.Src, s.Dst = src, dst
			c.setup(src, dst)
			res, err := Run(context.Background(), s)
			if c.fail {
				if err == nil || backend.Permanent(err) || !errors.Is(err, reset) || !strings.Contains(err.Error(), "attempts") {
					t.Fatalf("error %v, want the transient error after the attempts", err)
				}
				if exists(e.local(s.DstPath)) {
					t.Errorf("final path exists after a failure")
				}
				if res.Retries != s.Retry.Attempts-1 {
					t.Errorf("retries %d, want %d", res.Retries, s.Retry.Attempts-1)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.checkFinal(t, s, data)
			if c.wantRetries >= 0 && res.Retries != c.wantRetries {
				t.Errorf("retries %d, want %d", res.Retries, c.wantRetries)
			}
		})
	}
}

func TestChecksumMismatch(t *testing.T) {
	cases := []struct {
		name    string
		corrupt int
		ok      bool
	}{
		{"corrupted once: second pass succeeds", 1, true},
		{"corrupted always: fails", -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", 512<<10, 5)
			s := e.spec("f", int64(len(data)))
			dst := &fault{Backend: e.dst, corrupt: c.corrupt}
			s.Dst = dst
			res, err := Run(context.Background(), s)
			if c.ok {
				if err != nil {
					t.Fatal(err)
				}
				e.checkFinal(t, s, data)
				if !strings.Contains(res.Note, "checksum mismatch") || res.Resent < int64(len(data)) {
					t.Errorf("note %q, resent %d: the first pass should be reported and counted", res.Note, res.Resent)
				}
				return
			}
			want := sum(t, data, "adler32")
			if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "source "+want) || !strings.Contains(err.Error(), "destination ") {
				t.Fatalf("error %v: want ErrChecksum naming source %s and the destination's sum", err, want)
			}
			t.Logf("error: %v", err)
			for _, p := range []string{e.local(s.DstPath), e.local(TempName(s.DstPath)), s.Journal} {
				if exists(p) {
					t.Errorf("%s exists after a checksum failure", p)
				}
			}
		})
	}
}

func TestExpectedChecksumDiffers(t *testing.T) {
	e := newEnv(t)
	e.put(t, "f", 1000, 6)
	s := e.spec("f", 1000)
	s.Expected = "0badf00d"
	_, err := Run(context.Background(), s)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "0badf00d") {
		t.Fatalf("error %v", err)
	}
	if exists(e.local(s.DstPath)) {
		t.Errorf("final path exists")
	}
}

// TestSourceShrinks truncates the source after the first destination write.
func TestSourceShrinks(t *testing.T) {
	e := newEnv(t)
	e.put(t, "f", 2<<20, 8)
	s := e.spec("f", 2<<20)
	dst := &fault{Backend: e.dst, failWrite: func(call int) error {
		if call == 1 {
			return os.Truncate(e.srcDir+"/f", 1<<20)
		}
		return nil
	}}
	s.Dst = dst
	_, err := Run(context.Background(), s)
	if !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("error %v, want ErrSourceChanged", err)
	}
	if exists(e.local(s.DstPath)) {
		t.Errorf("final path exists")
	}
}

// lostRename renames but reports a transient error the first time, as
// when the destination dies between doing the rename and answering.
type lostRename struct {
	backend.Backend
	lost bool
}

func (l *lostRename) Rename(ctx context.Context, from, to string) error {
	if err := l.Backend.Rename(ctx, from, to); err != nil {
		return err
	}
	if !l.lost {
		l.lost = true
		return errors.New("connection reset by peer")
	}
	return nil
}

// TestRenameAnswerLost: a retried rename that finds its source gone
// because the first attempt did it succeeds, but only if the file in place
// is the verified one.
func TestRenameAnswerLost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := e.put(t, "r", 300<<10, 9)
	s := e.spec("r", int64(len(data)))
	s.Dst = &lostRename{Backend: e.dst}
	if _, err := Run(ctx, s); err != nil {
		t.Fatalf("rename whose answer was lost: %v", err)
	}
	e.checkFinal(t, s, data)

	// The same, but something else replaced the file in between: the
	// transfer must fail, not claim success.
	data2 := e.put(t, "r2", 300<<10, 10)
	s2 := e.spec("r2", int64(len(data2)))
	s2.Dst = &replacedAfterRename{lostRename{Backend: e.dst}, e.local("out/r2")}
	if _, err := Run(ctx, s2); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("rename answer lost and file replaced: err %v, want not found", err)
	}
}

type replacedAfterRename struct {
	lostRename
	local string
}

func (r *replacedAfterRename) Rename(ctx context.Context, from, to string) error {
	err := r.lostRename.Rename(ctx, from, to)
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		os.WriteFile(r.local, make([]byte, 300<<10), 0o644) // same size, other bytes
	}
	return err
}

// TestBeginRefused: a Begin hook that refuses stops the transfer before it
// touches the destination: an existing temporary file (another run's) and
// journal stay as they were, and nothing is put in place.
func TestBeginRefused(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 200<<10, 3)
	s := e.spec("f", int64(len(data)))
	if err := os.MkdirAll(e.local("out"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := e.local(TempName(s.DstPath))
	if err := os.WriteFile(tmp, []byte("another run's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Journal, []byte("another run's journal"), 0o644); err != nil {
		t.Fatal(err)
	}
	errLost := errors.New("lost the claim")
	began := 0
	s.Begin = func(context.Context) error { began++; return errLost }
	if _, err := Run(context.Background(), s); !errors.Is(err, errLost) {
		t.Fatalf("Run = %v, want the Begin error", err)
	}
	if began != 1 {
		t.Fatalf("Begin called %d times, want 1", began)
	}
	if b, err := os.ReadFile(tmp); err != nil || string(b) != "another run's bytes" {
		t.Fatalf("temporary file after a refused Begin: %q, %v", b, err)
	}
	if b, err := os.ReadFile(s.Journal); err != nil || string(b) != "another run's journal" {
		t.Fatalf("journal after a refused Begin: %q, %v", b, err)
	}
	if exists(e.local(s.DstPath)) {
		t.Fatal("the destination was created")
	}
	// Allowed, the same transfer completes.
	s.Begin = func(context.Context) error { return nil }
	if _, err := Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
}

// fencedJournals refuses every save after the first few with ErrFenced,
// as the service's store does once another server owns the task.
type fencedJournals struct {
	FileJournals
	mu    sync.Mutex
	saves int
	allow int
}

func (j *fencedJournals) Save(ctx context.Context, key string, data []byte) error {
	j.mu.Lock()
	j.saves++
	refuse := j.saves > j.allow
	j.mu.Unlock()
	if refuse {
		return fmt.Errorf("store says: %w", ErrFenced)
	}
	return j.FileJournals.Save(ctx, key, data)
}

// TestFencedJournalStops: a checkpoint refused with ErrFenced stops the
// transfer with that error (a run that lost its claim stops moving bytes
// at its next checkpoint) and nothing is put in place.
func TestFencedJournalStops(t *testing.T) { synctest.Test(t, testFencedJournalStops) }

// testFencedJournalStops runs in a synctest bubble: "went on for a
// second" is the transfer's time (its throttle's), not the machine's.
func testFencedJournalStops(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 4<<20, 5)
	s := e.spec("f", int64(len(data)))
	// 4 MiB at 2 MB/s: two seconds, a hundred checkpoint intervals.
	s.Dst = &fault{Backend: e.dst, rate: 2e6}
	j := &fencedJournals{allow: 3}
	s.Journals = j
	start := time.Now()
	_, err := Run(context.Background(), s)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Run = %v, want ErrFenced", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("the fenced transfer went on for %s", el)
	}
	if exists(e.local(s.DstPath)) {
		t.Error("a fenced transfer put its file in place")
	}
}

// otherRun is a destination where another run of the same file acts once,
// just before this run's first call of the method named by at: it puts
// the temporary file in place, or removes it, or puts other bytes in
// place (a file of the same size) and removes it.
type otherRun struct {
	backend.Backend
	at, act string
	local   string // the destination's local path, for "other bytes"
	done    bool
}

func (o *otherRun) before(ctx context.Context, method, tmp, dst string) {
	if o.done || method != o.at {
		return
	}
	o.done = true
	switch o.act {
	case "renamed":
		o.Backend.Rename(ctx, tmp, dst)
	case "removed":
		o.Backend.Remove(ctx, tmp)
	case "other bytes":
		fi, _ := o.Backend.Stat(ctx, tmp)
		os.WriteFile(o.local, make([]byte, fi.Size), 0o644)
		o.Backend.Remove(ctx, tmp)
	}
}

func (o *otherRun) Sync(ctx context.Context, p string) error {
	o.before(ctx, "sync", p, "out/"+strings.TrimSuffix(strings.TrimPrefix(path.Base(p), "."), ".sluice-part"))
	return o.Backend.Sync(ctx, p)
}

func (o *otherRun) Rename(ctx context.Context, from, to string) error {
	o.before(ctx, "rename", from, to)
	return o.Backend.Rename(ctx, from, to)
}

// TestPlacedByAnotherRun: when the temporary file vanishes after every
// byte is in it, because another run of the file (a server killed just
// after sending its rename, which the agent still carried out) put it in
// place, the transfer succeeds if the file in place is the verified one,
// whether it vanished before the sync or before the rename; a temporary
// file removed, or other bytes in place, is still an error. Before, the
// transfer failed for good with "not found" (a CI run of the service
// crash test lost four files of 96 so).
func TestPlacedByAnotherRun(t *testing.T) {
	for _, tc := range []struct {
		at, act string
		ok      bool
	}{
		{"sync", "renamed", true},
		{"rename", "renamed", true},
		{"sync", "removed", false},
		{"sync", "other bytes", false},
		{"rename", "other bytes", false},
	} {
		t.Run(tc.at+" "+tc.act, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "p", 300<<10, 11)
			s := e.spec("p", int64(len(data)))
			s.Checksum = "adler32"
			o := &otherRun{Backend: e.dst, at: tc.at, act: tc.act, local: e.local("out/p")}
			s.Dst = o
			res, err := Run(context.Background(), s)
			if !o.done {
				t.Fatalf("the other run never acted (%s)", tc.at)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("succeeded, but the file in place is not the verified one")
				}
				return
			}
			if err != nil {
				t.Fatalf("%v (note %q)", err, res.Note)
			}
			e.checkFinal(t, s, data)
		})
	}
}

// pastEOF refuses a range that starts at or past the end of the file as
// an agent does (400, invalid request), instead of a short read.
type pastEOF struct{ backend.Backend }

func (b pastEOF) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if fi, err := b.Stat(ctx, p); err == nil && off >= fi.Size {
		return nil, fmt.Errorf("%w: offset %d is beyond the end of the file", backend.ErrInvalid, off)
	}
	return b.Backend.OpenRange(ctx, p, off, n)
}

// TestSourceTruncatedBeforeRange truncates the source, mid-copy, below
// ranges not yet copied, at a source that refuses such ranges as invalid
// (a sluice agent) rather than ending them early: the copy fails with
// ErrSourceChanged, naming the new size, through this process and as a
// third-party pull alike; not as an invalid request, which says nothing
// of what happened and is not a reason to give the file up alone.
func TestSourceTruncatedBeforeRange(t *testing.T) {
	for _, pull := range []bool{false, true} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			e := newEnv(t)
			e.put(t, "f", 2<<20, 8)
			s := e.spec("f", 2<<20)
			s.CC = 1
			var once sync.Once
			truncate := func() {
				once.Do(func() {
					// At a chunk's end: the next chunk's range starts
					// past the new end.
					if err := os.Truncate(e.srcDir+"/f", 512<<10); err != nil {
						t.Error(err)
					}
				})
			}
			src := pastEOF{e.src}
			s.Src = src
			if pull {
				s.Pull = func(ctx context.Context, sp, dp string, off, n int64, _ func(int64)) error {
					rc, err := src.OpenRange(ctx, sp, off, n)
					if err != nil {
						return err
					}
					defer rc.Close()
					err = e.dst.WriteAt(ctx, dp, off, rc, n)
					truncate()
					return err
				}
			} else {
				s.Dst = &fault{Backend: e.dst, failWrite: func(call int) error {
					if call == 512/16 { // the last sub-write of the first chunk
						truncate()
					}
					return nil
				}}
			}
			_, err := Run(context.Background(), s)
			if !errors.Is(err, ErrSourceChanged) {
				t.Fatalf("error %v, want ErrSourceChanged", err)
			}
			if !strings.Contains(err.Error(), "524288") {
				t.Errorf("error %q does not give the new size", err)
			}
			if exists(e.local(s.DstPath)) {
				t.Errorf("final path exists")
			}
		})
	}
}

// TestTempRemovedMidCopy removes the temporary file (its directory, as
// a user removing the destination would) while the copy runs, with
// checksums off: the writes that follow must not make a new file of the
// ranges still to come, holes where the others were, and put it in
// place as the copy; the copy fails, saying the file is gone.
func TestTempRemovedMidCopy(t *testing.T) {
	e := newEnv(t)
	e.put(t, "f", 2<<20, 9)
	s := e.spec("f", 2<<20)
	s.Checksum = "none"
	s.Dst = &fault{Backend: e.dst, failWrite: func(call int) error {
		if call == 40 {
			return os.RemoveAll(e.local("out"))
		}
		return nil
	}}
	_, err := Run(context.Background(), s)
	if err == nil {
		got, _ := os.ReadFile(e.local(s.DstPath))
		t.Fatalf("copy succeeded with the temporary file removed midway (%d bytes in place)", len(got))
	}
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("error %v, want not found", err)
	}
	if exists(e.local(s.DstPath)) {
		t.Errorf("final path exists")
	}
}

// TestNoReplace: with Spec.NoReplace a file at the destination is kept:
// one there at the start fails the transfer before any byte moves; one
// that appears during the transfer makes the final rename fail, at once
// and without replacing it, with or without an atomic no-replace rename
// at the destination. Without NoReplace the rename replaces it.
func TestNoReplace(t *testing.T) {
	cases := []struct {
		name      string
		noReplace bool
		atStart   bool // the file is there before the transfer
		plain     bool // the destination offers no RenameNoReplace
		wantErr   bool
	}{
		{name: "there at the start", noReplace: true, atStart: true, wantErr: true},
		{name: "appears meanwhile", noReplace: true, wantErr: true},
		{name: "appears meanwhile, no atomic rename", noReplace: true, plain: true, wantErr: true},
		{name: "free name", noReplace: true},
		{name: "free name, no atomic rename", noReplace: true, plain: true},
		{name: "replace asked: appears meanwhile", noReplace: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", 300<<10, 9)
			s := e.spec("f", int64(len(data)))
			s.NoReplace = c.noReplace
			if c.plain {
				s.Dst = &fault{Backend: e.dst}
			}
			theirs := []byte("someone else's file")
			place := func() {
				if err := os.MkdirAll(e.local("out"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(e.local(s.DstPath), theirs, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantTheirs := c.wantErr
			if c.atStart {
				place()
			} else if c.wantErr || !c.noReplace {
				s.Commit = func(context.Context) error { place(); return nil }
			}
			res, err := Run(context.Background(), s)
			if c.wantErr {
				if !errors.Is(err, ErrDestinationExists) || !errors.Is(err, backend.ErrExist) {
					t.Fatalf("err %v, want ErrDestinationExists", err)
				}
				if res.Retries != 0 {
					t.Errorf("%d retries of a destination that exists", res.Retries)
				}
				if c.atStart && res.Bytes != 0 {
					t.Errorf("%d bytes moved to a destination that was there at the start", res.Bytes)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(e.local(s.DstPath))
			if err != nil {
				t.Fatal(err)
			}
			if wantTheirs != bytes.Equal(got, theirs) {
				t.Errorf("destination holds %d bytes (theirs: %v), want theirs kept: %v", len(got), bytes.Equal(got, theirs), wantTheirs)
			}
			if !wantTheirs && !bytes.Equal(got, data) {
				t.Errorf("destination is not the source's file")
			}
		})
	}
}

// TestPreserveModTime: with PreserveModTime the file appears at its
// destination with the source's modification time; without it, with the
// time of its copy; on a destination that cannot set one, the copy
// succeeds and its notes say the time was not preserved.
func TestPreserveModTime(t *testing.T) {
	at := time.Date(2019, 7, 1, 8, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		preserve  bool
		noSetter  bool
		wantAt    bool
		wantNoted bool
	}{
		{"preserved", true, false, true, false},
		{"not asked", false, false, false, false},
		{"destination cannot", true, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", 300<<10, 3)
			if err := os.Chtimes(filepath.Join(e.srcDir, "f"), at, at); err != nil {
				t.Fatal(err)
			}
			s := e.spec("f", int64(len(data)))
			s.PreserveModTime = tc.preserve
			if tc.noSetter {
				s.Dst = struct{ backend.Backend }{e.dst} // hides SetModTime
			}
			res, err := Run(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			e.checkFinal(t, s, data)
			fi, err := os.Stat(e.local(s.DstPath))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.ModTime().Equal(at); got != tc.wantAt {
				t.Errorf("destination modified at %s; the source's (%s): %v, want %v", fi.ModTime(), at, got, tc.wantAt)
			}
			noted := strings.Contains(res.Note, "modification time not preserved")
			if noted != tc.wantNoted {
				t.Errorf("note %q: the time not preserved noted %v, want %v", res.Note, noted, tc.wantNoted)
			}
		})
	}
}
