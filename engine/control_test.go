package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// slow returns a spec whose destination writes each stream at rate bytes/s,
// so that a test has time to act on the running transfer, and the faults
// wrapping its destination and source.
func slow(e *env, name string, size int64, rate float64) (Spec, *fault, *fault) {
	s := e.spec(name, size)
	s.ChunkMin, s.SubWrite = 128<<10, 32<<10
	dst, src := &fault{Backend: e.dst, rate: rate}, &fault{Backend: e.src}
	s.Dst, s.Src = dst, src
	return s, dst, src
}

// The tests of a running transfer's controls run in a synctest bubble:
// the throttled destination's sleeps, the engine's checkpoint ticks and
// its meter read the bubble's clock, which moves only when every
// goroutine of the test waits. "Within 60 ms" then means 60 ms of the
// transfer's time, whatever the machine's load.

func TestPauseResume(t *testing.T) { synctest.Test(t, testPauseResume) }

func testPauseResume(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 4<<20, 11)
	s, dst, _ := slow(e, "f", 4<<20, 8<<20) // 2 streams: about 0.25 s of copying
	ctx := context.Background()
	tr, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	<-tr.Moving()
	// Checkpoints are written while bytes move, not only at the end.
	waitFor(t, "a checkpoint", time.Second, func() bool { return tr.Progress().Journaled > 0 })
	if err := tr.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	p := tr.Progress()
	if p.State != StatePaused || p.Workers != 0 || dst.inflight.Load() != 0 {
		t.Fatalf("after Pause: %+v, %d writes in flight", p, dst.inflight.Load())
	}
	if p.Journaled != p.Done || journalDone(t, s.Journal) != p.Done || p.Done == 0 || p.Done == p.Size {
		t.Fatalf("after Pause: done %d, journaled %d, on disk %d: want equal, strictly between 0 and %d",
			p.Done, p.Journaled, journalDone(t, s.Journal), p.Size)
	}
	sent := dst.sent.Load()
	time.Sleep(50 * time.Millisecond)
	if q := tr.Progress(); q.Done != p.Done || dst.sent.Load() != sent {
		t.Fatalf("bytes moved while paused: done %d → %d", p.Done, q.Done)
	}
	if err := tr.Pause(ctx); err != nil { // pausing twice is harmless
		t.Fatal(err)
	}
	tr.Resume()
	res, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if res.Resent != 0 {
		t.Errorf("a pause re-sent %d bytes; it should stop at sub-write boundaries", res.Resent)
	}
	if err := tr.Pause(ctx); !errors.Is(err, ErrFinished) {
		t.Errorf("Pause after the end: %v, want ErrFinished", err)
	}
}

func TestSetCC(t *testing.T) {
	t.Run("up: new workers steal", func(t *testing.T) { synctest.Test(t, testSetCCUp) })
	t.Run("down: workers stop after their sub-write", func(t *testing.T) { synctest.Test(t, testSetCCDown) })
}

func testSetCCUp(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 6<<20, 12)
	s, dst, _ := slow(e, "f", 6<<20, 16<<20)
	s.CC = 1
	tr, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.SetCC(0); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("SetCC(0): %v", err)
	}
	<-tr.Moving()
	if m := dst.maxInflight.Load(); m != 1 {
		t.Fatalf("%d writes in flight with CC 1", m)
	}
	// At CC 1 the file is four chunks, one in flight; eight writes
	// in flight are only possible if new workers steal halves of
	// chunks.
	if err := tr.SetCC(8); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "8 writes in flight", time.Second, func() bool { return dst.maxInflight.Load() == 8 })
	if p := tr.Progress(); p.CC != 8 || p.Workers != 8 {
		t.Errorf("after SetCC(8): %+v", p)
	}
	res, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if res.Resent != 0 || res.Seconds <= 0 || tr.Progress().Rate <= 0 {
		t.Errorf("result %+v, rate %g", res, tr.Progress().Rate)
	}
}

func testSetCCDown(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "f", 4<<20, 16)
	// Four chunks of 1 MiB, too small to steal from: a chunk
	// takes 125 ms, a sub-write 4 ms. A worker that waited for the
	// end of its chunk would take far longer than the 60 ms allowed.
	s, dst, _ := slow(e, "f", 4<<20, 8<<20)
	s.CC, s.ChunkMin = 4, 1<<20
	tr, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "4 writes in flight", time.Second, func() bool { return dst.maxInflight.Load() == 4 })
	if err := tr.SetCC(1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one worker", 60*time.Millisecond, func() bool { return tr.Progress().Workers == 1 })
	waitFor(t, "one write in flight", 20*time.Millisecond, func() bool { return dst.inflight.Load() <= 1 })
	dst.maxInflight.Store(0)
	time.Sleep(30 * time.Millisecond)
	if m := dst.maxInflight.Load(); m > 1 {
		t.Errorf("%d writes in flight after SetCC(1)", m)
	}
	if err := tr.SetCC(4); err != nil { // the stopped chunks' rests were requeued
		t.Fatal(err)
	}
	res, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if res.Resent != 0 {
		t.Errorf("SetCC re-sent %d bytes", res.Resent)
	}
}

func TestHandover(t *testing.T) { synctest.Test(t, testHandover) }

func testHandover(t *testing.T) {
	e := newEnv(t)
	oldData := e.put(t, "old", 4<<20, 13)
	newData := e.put(t, "new", 1<<20, 14)
	ctx := context.Background()
	so, _, _ := slow(e, "old", 4<<20, 4<<20) // 2 streams: ~0.5 s
	sn, _, nsrc := slow(e, "new", 1<<20, 8<<20)
	nsrc.openDelay = 100 * time.Millisecond // the replacement's start-up
	old, err := Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	<-old.Moving()
	next, err := Start(ctx, sn)
	if err != nil {
		t.Fatal(err)
	}
	before := old.Progress().Done
	t0 := time.Now()
	if err := Handover(ctx, old, next); err != nil {
		t.Fatal(err)
	}
	po, pn := old.Progress(), next.Progress()
	if pn.Done == 0 {
		t.Errorf("old paused before the replacement moved bytes")
	}
	if el := time.Since(t0); el < nsrc.openDelay {
		t.Errorf("handover took %v, less than the replacement's start-up %v", el, nsrc.openDelay)
	}
	// At 2×4 MiB/s, 100 ms of start-up is ~800 KiB: old must have kept
	// going for most of it.
	if po.Done-before < 256<<10 {
		t.Errorf("old stopped during the replacement's start-up: done %d → %d", before, po.Done)
	}
	if po.State != StatePaused || po.Workers != 0 {
		t.Errorf("old after handover: %+v", po)
	}
	if _, err := next.Wait(); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, sn, newData)
	old.Resume()
	if _, err := old.Wait(); err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, so, oldData)
}

func TestHandoverFailures(t *testing.T) {
	e := newEnv(t)
	e.put(t, "old", 4<<20, 15)
	so, _, _ := slow(e, "old", 4<<20, 8<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old, err := Start(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		next func() *Transfer
		ctx  func() context.Context
		want error
	}{
		{"replacement fails", func() *Transfer {
			s := e.spec("missing", -1)
			n, err := Start(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}, context.Background, backend.ErrNotFound},
		{"context ends first", func() *Transfer {
			s, _, src := slow(e, "old", 4<<20, 8<<20)
			s.DstPath, s.Journal = "other", s.Journal+"2"
			src.openDelay = time.Minute
			n, err := Start(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}, func() context.Context {
			c, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
			t.Cleanup(stop)
			return c
		}, context.DeadlineExceeded},
		{"nil transfer", func() *Transfer { return nil }, context.Background, backend.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Handover(c.ctx(), old, c.next())
			if !errors.Is(err, c.want) {
				t.Fatalf("Handover: %v, want %v", err, c.want)
			}
			if p := old.Progress(); p.State == StatePaused {
				t.Errorf("old was paused although the handover failed")
			}
		})
	}
	cancel()
	old.Wait()
}
