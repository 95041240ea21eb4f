package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
)

// replica is a source backend as one replica of a multi-source transfer:
// it counts what it serves and can be slow, unreachable, fail after some
// bytes, or damage what it sends.
type replica struct {
	backend.Backend
	served   atomic.Int64
	rate     float64 // bytes/s per read stream (0: no limit)
	burst    int64   // the first bytes served at once (a token bucket's or socket buffers' burst)
	down     bool    // every call fails (transiently)
	failFrom int64   // reads fail once this many bytes were served (0: never)
	slowFrom int64   // reads slow to slowRate once this many bytes were served (0: never)
	slowRate float64
	corrupt  bool // flip a byte of every read
	// mtime, if set, is the modification time Stat reports: replicas on
	// other hosts were written at other moments.
	mtime time.Time
	// frozen makes Stat wait for its context, as a stopped agent (or a
	// black-holed host) keeps the connection open and never answers;
	// frozenFrom does so once this many bytes were served, and reads then
	// fail, as the sluice backend's watchdog ends a silent read.
	frozen     bool
	frozenFrom int64
	// frozenSum makes Checksum wait for its context (an agent that
	// stops while it reads its file for a checksum).
	frozenSum bool
}

func (r *replica) Checksum(ctx context.Context, p, algo string) (string, error) {
	if r.isFrozen() || r.frozenSum {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return r.Backend.Checksum(ctx, p, algo)
}

func (r *replica) isFrozen() bool {
	return r.frozen || (r.frozenFrom > 0 && r.served.Load() >= r.frozenFrom)
}

var errDown = errors.New("replica unreachable")

func (r *replica) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	if r.isFrozen() {
		<-ctx.Done()
		return backend.FileInfo{}, ctx.Err()
	}
	if r.down {
		return backend.FileInfo{}, errDown
	}
	fi, err := r.Backend.Stat(ctx, p)
	if err == nil && !r.mtime.IsZero() {
		fi.ModTime = r.mtime
	}
	return fi, err
}

func (r *replica) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if r.down || (r.failFrom > 0 && r.served.Load() >= r.failFrom) || r.isFrozen() {
		return nil, errDown
	}
	rc, err := r.Backend.OpenRange(ctx, p, off, n)
	if err != nil {
		return nil, err
	}
	return &replicaReader{r: r, rc: rc}, nil
}

type replicaReader struct {
	r  *replica
	rc io.ReadCloser
}

func (x *replicaReader) Read(b []byte) (int, error) {
	if x.r.failFrom > 0 && x.r.served.Load() >= x.r.failFrom || x.r.isFrozen() {
		return 0, errDown
	}
	if (x.r.rate > 0 || x.r.slowFrom > 0) && len(b) > 16<<10 {
		b = b[:16<<10]
	}
	n, err := x.rc.Read(b)
	if n > 0 && x.r.corrupt {
		b[0] ^= 0xff
	}
	x.r.served.Add(int64(n))
	rate := x.r.rate
	if x.r.slowFrom > 0 && x.r.served.Load() >= x.r.slowFrom {
		rate = x.r.slowRate
	}
	if rate > 0 && n > 0 && x.r.served.Load() > x.r.burst {
		time.Sleep(time.Duration(float64(n) / rate * float64(time.Second)))
	}
	return n, err
}

func (x *replicaReader) Close() error { return x.rc.Close() }

// ChecksumRange forwards to the file backend (as a real replica sums its
// own disk).
func (r *replica) ChecksumRange(ctx context.Context, p, algo string, off, n int64) (string, error) {
	if r.isFrozen() || r.frozenSum {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return r.Backend.(backend.RangeChecksummer).ChecksumRange(ctx, p, algo, off, n)
}

// replicas returns n replicas of the env's source directory and a spec
// reading name from all of them with the given shares.
func (e *env) replicas(n int, name string, size int64, shares ...float64) ([]*replica, Spec) {
	s := e.spec(name, size)
	s.Src, s.SrcPath = nil, ""
	s.CC = 1 // one stream per replica, as the paper's experiments
	reps := make([]*replica, n)
	for i := range n {
		reps[i] = &replica{Backend: e.src}
		sh := 1.0
		if i < len(shares) {
			sh = shares[i]
		}
		s.Sources = append(s.Sources, Source{Name: fmt.Sprintf("r%d", i), Backend: reps[i], Path: name, Share: sh})
	}
	return reps, s
}

// TestMultiSourceShares: three replicas send contiguous parts of the file
// in proportion to their shares; the file is byte-identical.
// The multi-source tests whose replicas are throttled by sleeps run in
// synctest bubbles: the sleeps, the engine's timers and its rate
// measurements follow the bubble's clock, so that which replica is slow
// is what the test says, not what the machine's load makes it.

func TestMultiSourceShares(t *testing.T) { synctest.Test(t, testMultiSourceShares) }

func testMultiSourceShares(t *testing.T) {
	e := newEnv(t)
	const size = 1 << 20
	data := e.put(t, "f", size, 1)
	reps, s := e.replicas(3, "f", size, 0.5, 0.3, 0.2)
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	for i, want := range []float64{0.5, 0.3, 0.2} {
		got := float64(reps[i].served.Load()) / size
		if got < want-0.01 || got > want+0.01 {
			t.Errorf("replica %d sent %.3f of the file, want its share %.1f", i, got, want)
		}
	}
	if res.Checksum != sum(t, data, "adler32") {
		t.Errorf("checksum %s", res.Checksum)
	}
}

// TestMultiSourceFaults: a replica that cannot be reached, one that fails
// in the middle, one that sends wrong bytes: the others carry the file,
// byte-identical, and the note says which was dropped and why; replicas of
// different sizes are refused before anything is written.
func TestMultiSourceFaults(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name   string
		break_ func(r *replica)
		note   string
	}{
		{"unreachable", func(r *replica) { r.down = true }, "unreachable"},
		{"fails midway", func(r *replica) { r.failFrom = 100 << 10 }, "unreachable"},
		{"wrong bytes", func(r *replica) { r.corrupt = true }, "differ from those most replicas hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", size, 2)
			reps, s := e.replicas(3, "f", size)
			tc.break_(reps[1])
			res, err := Run(context.Background(), s)
			if err != nil {
				t.Fatalf("%v (note %q)", err, res.Note)
			}
			e.checkFinal(t, s, data)
			if !strings.Contains(res.Note, "source r1 dropped") || !strings.Contains(res.Note, tc.note) {
				t.Errorf("note %q: want r1 dropped (%s)", res.Note, tc.note)
			}
			if res.Sources != 2 {
				t.Errorf("the file came from %d replicas by the result, want the 2 not dropped", res.Sources)
			}
		})
	}
	// A replica whose file itself differs (same size, a few bytes
	// changed where another replica sends the file's bytes) must not be
	// the one the file is judged by because it is listed first: the
	// replicas vote range by range, the odd one is dropped, and the file
	// is the majority's. Two replicas that disagree leave no majority:
	// the copy fails saying so rather than trusting either.
	// odd is a replica holding data with 8 bytes changed from offset at.
	odd := func(t *testing.T, data []byte, at int) backend.Backend {
		t.Helper()
		bad := append([]byte(nil), data...)
		for i := range 8 {
			bad[at+i] ^= 0xff
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "f"), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		ob, err := file.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return ob
	}
	t.Run("first replica differs at rest", func(t *testing.T) {
		e := newEnv(t)
		data := e.put(t, "f", size, 4)
		_, s := e.replicas(3, "f", size)
		s.Sources[0].Backend = odd(t, data, size*2/3+10)
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%v (note %q)", err, res.Note)
		}
		e.checkFinal(t, s, data)
		if !strings.Contains(res.Note, "source r0 dropped") || strings.Contains(res.Note, "source r1 dropped") || strings.Contains(res.Note, "source r2 dropped") {
			t.Errorf("note %q: want r0, and only r0, dropped", res.Note)
		}
	})
	// The first replica differs where it sends the bytes itself: the
	// file then agrees with it, and only Expected (the checksum the
	// replicas' majority holds, as cp --sources passes it) shows the
	// file is wrong. Before, the copy ended "verified" with r0's bytes.
	t.Run("first replica sends its own wrong bytes", func(t *testing.T) {
		e := newEnv(t)
		data := e.put(t, "f", size, 5)
		_, s := e.replicas(3, "f", size)
		s.Sources[0].Backend = odd(t, data, 1000) // in r0's share (the first third)
		s.Expected = sum(t, data, "adler32")
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%v (note %q)", err, res.Note)
		}
		e.checkFinal(t, s, data)
		if !strings.Contains(res.Note, "source r0 dropped") {
			t.Errorf("note %q: want r0 dropped", res.Note)
		}
	})
	// The same without Expected (the service compares no replica
	// checksums before the copy): Witness has a second replica summed at
	// verification, it disagrees with r0, and the vote drops r0. Before,
	// the service's copy ended "verified" with r0's bytes.
	t.Run("first replica sends its own wrong bytes, witness", func(t *testing.T) {
		e := newEnv(t)
		data := e.put(t, "f", size, 5)
		_, s := e.replicas(3, "f", size)
		s.Sources[0].Backend = odd(t, data, 1000)
		s.Witness = true
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%v (note %q)", err, res.Note)
		}
		e.checkFinal(t, s, data)
		if !strings.Contains(res.Note, "source r0 dropped") {
			t.Errorf("note %q: want r0 dropped", res.Note)
		}
	})
	t.Run("two replicas disagree, witness", func(t *testing.T) {
		e := newEnv(t)
		data := e.put(t, "f", size, 5)
		_, s := e.replicas(2, "f", size)
		s.Sources[0].Backend = odd(t, data, 1000)
		s.Witness = true
		_, err := Run(context.Background(), s)
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "no majority") {
			t.Errorf("two replicas with different bytes: %v, want a checksum error saying no majority agrees", err)
		}
		if exists(e.local(s.DstPath)) {
			t.Error("a file was put in place")
		}
	})
	t.Run("two replicas disagree", func(t *testing.T) {
		e := newEnv(t)
		data := e.put(t, "f", size, 5)
		_, s := e.replicas(2, "f", size)
		s.Sources[0].Backend = odd(t, data, size*2/3+10)
		_, err := Run(context.Background(), s)
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "no majority") {
			t.Errorf("two replicas with different bytes: %v, want a checksum error saying no majority agrees", err)
		}
		if exists(e.local(s.DstPath)) {
			t.Error("a file was put in place")
		}
	})
	t.Run("sizes differ", func(t *testing.T) {
		e := newEnv(t)
		e.put(t, "f", size, 3)
		other := t.TempDir()
		if err := os.WriteFile(filepath.Join(other, "f"), make([]byte, size-1), 0o644); err != nil {
			t.Fatal(err)
		}
		ob, err := file.New(other)
		if err != nil {
			t.Fatal(err)
		}
		_, s := e.replicas(2, "f", size)
		s.Sources[1].Backend = ob
		_, err = Run(context.Background(), s)
		if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "not copies of one file") {
			t.Errorf("replicas of different sizes: %v", err)
		}
		if exists(e.local("out/f")) || exists(e.local("out/.f.sluice-part")) {
			t.Error("a refused transfer wrote at the destination")
		}
	})
	t.Run("all down", func(t *testing.T) {
		e := newEnv(t)
		e.put(t, "f", size, 4)
		reps, s := e.replicas(2, "f", size)
		reps[0].down, reps[1].down = true, true
		if _, err := Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "no replica") {
			t.Errorf("every replica down: %v", err)
		}
	})
}

// TestMultiSourceAllFail: every replica fails in the middle, one after
// the other: the error says that every replica failed, naming each with
// its reason, and nothing is put at the destination path. Before, it gave
// only the last replica's error, as if one source had failed.
func TestMultiSourceAllFail(t *testing.T) {
	e := newEnv(t)
	const size = 1 << 20
	e.put(t, "f", size, 7)
	reps, s := e.replicas(3, "f", size)
	for i, r := range reps {
		r.failFrom = int64(i+1) * 64 << 10
	}
	res, err := Run(context.Background(), s)
	if err == nil {
		t.Fatal("every replica failed, and the transfer succeeded")
	}
	for _, want := range []string{"every replica failed", "r0", "r1", "r2", errDown.Error()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q (note %q): want it to say %q", err, res.Note, want)
		}
	}
	if exists(e.local(s.DstPath)) {
		t.Error("a file was put at the destination path")
	}
}

// TestMultiSourceSteal: with equal shares and one replica a hundred times
// slower, the static plan waits for it to send its whole third; with
// Steal the fast replicas take its tail and it sends a small part.
func TestMultiSourceSteal(t *testing.T) { synctest.Test(t, testMultiSourceSteal) }

func testMultiSourceSteal(t *testing.T) {
	const size = 2 << 20
	for _, steal := range []bool{false, true} {
		e := newEnv(t)
		data := e.put(t, "f", size, 5)
		reps, s := e.replicas(3, "f", size)
		reps[2].rate = 1 << 20 // 1 MiB/s: its third takes 0.7 s alone
		s.Steal = steal
		res, took := e.runTimed(t, s, data)
		part := float64(reps[2].served.Load()) / size
		t.Logf("steal %v: slow replica sent %.3f of the file in %v; note %q", steal, part, took, res.Note)
		switch {
		case !steal && (part < 0.33 || part > 0.34):
			t.Errorf("static plan: slow replica sent %.3f, want its third", part)
		case steal && part > 0.2:
			t.Errorf("with steal the slow replica still sent %.3f of the file", part)
		}
	}
}

// TestMultiSourceResume: a multi-source copy cancelled in the middle
// resumes from its journal and completes byte-identical.
func TestMultiSourceResume(t *testing.T) {
	e := newEnv(t)
	const size = 4 << 20
	data := e.put(t, "f", size, 6)
	reps, s := e.replicas(3, "f", size, 0.2, 0.5, 0.3)
	for _, r := range reps {
		r.rate = 8 << 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	dst := &fault{Backend: e.dst, cancelAt: size / 2, cancel: cancel}
	s.Dst = dst
	if _, err := Run(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	done := journalDone(t, s.Journal)
	if done <= 0 || done >= size {
		t.Fatalf("journal records %d of %d bytes", done, size)
	}
	s.Dst = e.dst
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if !strings.Contains(res.Note, "resumed") || res.Bytes > size-done+int64(len(reps))*s.SubWrite {
		t.Errorf("resume sent %d bytes after %d were journaled (note %q)", res.Bytes, done, res.Note)
	}
}

// TestMultiSourceResumeFirstReplicaDown: replicas on different hosts have
// different modification times. A copy interrupted in the middle, rerun
// while the first replica cannot be reached, resumes from its journal
// rather than starting over: before, the journal held only the first
// replica's time, the rerun compared it with the second's, took the file
// for modified and sent it all again. A replica that was modified since
// still makes the rerun start over.
func TestMultiSourceResumeFirstReplicaDown(t *testing.T) {
	const size = 4 << 20
	for _, modified := range []bool{false, true} {
		e := newEnv(t)
		data := e.put(t, "f", size, 9)
		reps, s := e.replicas(3, "f", size)
		base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for i, r := range reps {
			r.rate = 8 << 20
			r.mtime = base.Add(time.Duration(i) * time.Second)
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.Dst = &fault{Backend: e.dst, cancelAt: size / 2, cancel: cancel}
		if _, err := Run(ctx, s); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run: %v", err)
		}
		done := journalDone(t, s.Journal)
		if done <= 0 || done >= size {
			t.Fatalf("journal records %d of %d bytes", done, size)
		}
		s.Dst = e.dst
		reps[0].down = true
		if modified {
			reps[2].mtime = reps[2].mtime.Add(time.Minute)
		}
		for _, r := range reps {
			r.served.Store(0)
		}
		res, err := Run(context.Background(), s)
		if err != nil {
			t.Fatalf("rerun: %v (note %q)", err, res.Note)
		}
		e.checkFinal(t, s, data)
		sent := reps[1].served.Load() + reps[2].served.Load()
		switch {
		case !modified && (!strings.Contains(res.Note, "resumed") || sent > size-done+3*s.SubWrite):
			t.Errorf("rerun without the first replica sent %d bytes after %d of %d were journaled (note %q): want a resume", sent, done, size, res.Note)
		case modified && !strings.Contains(res.Note, "started over"):
			t.Errorf("a replica modified since the journal was written: note %q, want a start over", res.Note)
		}
	}
}

// TestMultiSourceCollapse: a replica that collapses in the middle of its
// part (from full speed to 256 kB/s) holds a static plan back until it has
// sent all of it; with Steal the others take its tail and the copy ends
// several times sooner.
func TestMultiSourceCollapse(t *testing.T) {
	const size = 3 << 20
	var took [2]time.Duration
	for k, steal := range []bool{false, true} {
		e := newEnv(t)
		data := e.put(t, "f", size, 8)
		reps, s := e.replicas(3, "f", size)
		for _, r := range reps {
			r.rate = 16 << 20
		}
		reps[0].slowFrom, reps[0].slowRate = 256<<10, 256<<10
		s.Steal = steal
		res, d := e.runTimed(t, s, data)
		took[k] = d
		t.Logf("steal %v: %v, collapsed replica sent %d bytes; note %q", steal, took[k], reps[0].served.Load(), res.Note)
	}
	if took[1]*3 > took[0] {
		t.Errorf("with steal %v, without %v: want at least 3x sooner", took[1], took[0])
	}
}

// TestStealUnmeasuredReplica: a slow replica the plan gave no bytes
// finishes its (empty) work first and may steal. Counted at the plan's
// predicted rate (Source.Rate) it takes no more than it can finish in
// time. Before Rate, an unmeasured replica counted as fast as the others
// and took half of the fast replica's remaining bytes, a sub-write of
// which it then held for seconds (this test took 4.0 s instead of 0.6 s;
// seen in the multi-source evaluation, fig5).
func TestStealUnmeasuredReplica(t *testing.T) { synctest.Test(t, testStealUnmeasuredReplica) }

func testStealUnmeasuredReplica(t *testing.T) {
	const size = 4 << 20
	// Sub-writes as large as the service's in proportion to the file:
	// bytes in flight are never stolen back, so a slow replica's
	// sub-write is what it holds the file back by.
	const subWrite = 512 << 10
	run := func(slow bool) (Result, time.Duration, int64) {
		e := newEnv(t)
		data := e.put(t, "f", size, 9)
		n, shares := 1, []float64{1}
		if slow {
			n, shares = 2, []float64{1, 0}
		}
		reps, s := e.replicas(n, "f", size, shares...)
		reps[0].rate, s.Sources[0].Rate = 8<<20, 8<<20
		if slow {
			reps[1].rate, s.Sources[1].Rate = 256<<10, 256<<10 // 32 times slower
			s.Steal = true
		}
		s.SubWrite = subWrite
		res, took := e.runTimed(t, s, data)
		return res, took, reps[n-1].served.Load()
	}
	// The bound is relative to the fast replica alone, timed in the same
	// attempt, and the better of two attempts decides: on a busy machine
	// (CI, once) the copy took 1.9 s with the slow replica sending
	// nothing, against the 0.5 s the fast one alone needs when idle.
	// Taking half the fast replica's bytes took 8 times as long.
	var took, alone time.Duration
	for attempt := 1; attempt <= 2; attempt++ {
		var res Result
		var sent int64
		res, took, sent = run(true)
		_, alone, _ = run(false)
		t.Logf("attempt %d: %v (the fast replica alone: %v), slow replica sent %d bytes; note %q", attempt, took, alone, sent, res.Note)
		if took <= alone*18/10+100*time.Millisecond {
			return
		}
	}
	t.Errorf("with the predicted rates: %v, want under 1.8 times the fast replica alone (%v)", took, alone)
}

// TestStealBurstyThief: a slow replica whose small part arrives at once
// (the burst a token bucket or socket buffers let through) looks fast by
// what it delivered; taking over a fast replica's tail at that rate would
// hold the file back by seconds. A thief is trusted no faster than the
// plan predicted it, so it takes over nothing here.
//
// The fast replicas' speed is this machine's: under a heavy load they may
// really be slow, and then taking over from them is right. So a run that
// steals is tried again, up to five times; the fault this test guards
// against (the thief trusted at its burst's rate) steals in every run.
// (Three were too few for make test, which runs two packages at once: on
// 2026-11-28 three runs in a row there had their fast replicas slowed.)
func TestStealBurstyThief(t *testing.T) { synctest.Test(t, testStealBurstyThief) }

func testStealBurstyThief(t *testing.T) {
	const size = 8 << 20
	const attempts = 5
	for attempt := 1; ; attempt++ {
		e := newEnv(t)
		data := e.put(t, "f", size, 11)
		fast, slow := 8.0*(1<<20), 256.0*(1<<10)
		reps, s := e.replicas(3, "f", size, fast, fast, slow) // time-balanced shares
		for i, r := range []float64{fast, fast, slow} {
			reps[i].rate, s.Sources[i].Rate = r, r
		}
		reps[2].burst = 128 << 10 // its whole part (about 126 KiB)
		s.Steal = true
		s.SubWrite = 256 << 10
		res, took := e.runTimed(t, s, data)
		t.Logf("attempt %d: %v; slow replica sent %d bytes; note %q", attempt, took, reps[2].served.Load(), res.Note)
		// The plan finishes in about 0.5 s; 256 KiB more from the slow
		// replica alone would take a second.
		if took <= 800*time.Millisecond && reps[2].served.Load() <= 200<<10 {
			return
		}
		if attempt == attempts {
			t.Errorf("in %d runs of %d, the slow replica took over work at the rate of its burst (the last: %v, %d bytes from it)", attempts, attempts, took, reps[2].served.Load())
			return
		}
	}
}

// runTimed runs s, fails the test on an error, checks the file against
// data, and returns the result and how long the run took.
func (e *env) runTimed(t *testing.T, s Spec, data []byte) (Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	e.checkFinal(t, s, data)
	return res, took
}

// TestReplicaDiesDroppedSoon: a replica that dies in the middle of a copy
// is dropped after a few failures while others are still used, not after
// the whole retry budget, with the service's backoff (200 ms doubling):
// its queued pieces wait for it until then. Before, the copy waited 10 to
// 12 s for it; the last replica left still gets every attempt.
func TestReplicaDiesDroppedSoon(t *testing.T) { synctest.Test(t, testReplicaDiesDroppedSoon) }

func testReplicaDiesDroppedSoon(t *testing.T) {
	const size = 2 << 20
	e := newEnv(t)
	data := e.put(t, "f", size, 12)
	reps, s := e.replicas(3, "f", size)
	s.Retry = RetryPolicy{Attempts: 8, Base: 200 * time.Millisecond, Max: 10 * time.Second, Seed: 1}
	reps[1].failFrom = 256 << 10
	start := time.Now()
	res, err := Run(context.Background(), s)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v (note %q)", err, res.Note)
	}
	e.checkFinal(t, s, data)
	if !strings.Contains(res.Note, "source r1 dropped") || !strings.Contains(res.Note, "3 attempts in a row") {
		t.Errorf("note %q: want r1 dropped after 3 attempts", res.Note)
	}
	if took > 4*time.Second {
		t.Errorf("the copy took %v: a dead replica held it back", took)
	}
}

// TestReplicaFrozen: a replica whose agent stops answering (a stopped
// process, a black-holed host: connections stay open, nothing comes back)
// is dropped and the others carry the file, whether it froze before the
// copy or in the middle of it; the copy neither hangs nor has holes. Its
// reads end by the backend's watchdog (here: fail at once), but its stats
// and checksums had no bound: before, the stat of the replicas at the
// start, the stat that asks whether a failing replica shrank, and the
// stat and checksum of the replica the file is verified against (the
// first, frozen once it sent its part, or while it sums its file) waited
// for ever. A witness that does not answer is not waited for either.
func TestReplicaFrozen(t *testing.T) {
	const size = 2 << 20
	for _, tc := range []struct {
		name   string
		i      int // the replica that freezes: 0 is the one the file is verified against, 1 the witness
		freeze func(r *replica)
		note   string
	}{
		{"before the copy", 0, func(r *replica) { r.frozen = true }, "source r0 dropped"},
		{"mid-copy", 0, func(r *replica) { r.frozenFrom = 256 << 10 }, "source r0 dropped"},
		{"after its part", 0, func(r *replica) { r.frozenFrom = size / 4 }, "source r0 dropped"}, // equal parts of 4
		{"in its checksum", 0, func(r *replica) { r.frozenSum = true }, "source r0 dropped"},
		{"the witness in its checksum", 1, func(r *replica) { r.frozenSum = true }, "replica r1 not compared"},
		// r3 sends wrong bytes: the replicas vote on range checksums,
		// and r1 does not answer its (before, the vote waited for ever).
		{"a voter, in its range checksums", 1, func(r *replica) { r.frozenSum = true }, "source r1 dropped: engine: checksum of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			data := e.put(t, "f", size, 13)
			reps, s := e.replicas(4, "f", size)
			s.Retry = RetryPolicy{Attempts: 8, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Seed: 1}
			s.Witness = true
			tc.freeze(reps[tc.i])
			if strings.HasPrefix(tc.name, "a voter") {
				reps[3].corrupt = true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			began := time.Now()
			tr, err := start(ctx, s, hooks{statTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.Wait()
			if err != nil {
				t.Fatalf("%v (note %q)", err, res.Note)
			}
			if took := time.Since(began); took > 10*time.Second {
				t.Errorf("the copy took %v: it waited for the frozen replica", took)
			}
			e.checkFinal(t, s, data)
			if !strings.Contains(res.Note, tc.note) {
				t.Errorf("note %q: want %q", res.Note, tc.note)
			}
			if p := tr.Progress(); p.Done != size {
				t.Errorf("progress says %d bytes done, want %d", p.Done, size)
			}
		})
	}
}
