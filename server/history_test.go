package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// progressXfer is a run whose bytes written the test sets.
type progressXfer struct{ done int64 }

func (x *progressXfer) Progress() engine.Progress   { return engine.Progress{Done: x.done} }
func (x *progressXfer) SetCC(int) error             { return nil }
func (x *progressXfer) Pause(context.Context) error { return nil }

// The loop samples what it schedules every SampleEvery of its clock, and
// History gives it back per bucket: the bytes runs wrote (a finished
// file's last bytes included, once), files queued, running, done and
// failed; to a user their own transfers only, to an admin everyone's or
// one user's or VO's. Two servers on one store each sample their own
// partition and History sums them. Samples older than SampleKeep go.
func TestHistory(t *testing.T) {
	for dialect, url := range testStores(t) {
		t.Run(dialect, func(t *testing.T) { testHistory(t, openWith(t, url, "a", "b", "c")) })
	}
}

// openWith opens the store at url, closed when the test ends, with the
// named endpoints registered and up.
func openWith(t *testing.T, url string, endpoints ...string) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, e := range endpoints {
		if err := st.UpsertEndpoint(ctx, store.Endpoint{Name: e, URL: "http://" + e + ".invalid:7000", Up: true}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func testHistory(t *testing.T, st store.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	const every = 10 * time.Second
	w := loadedWorld(t, Config{Store: st, Clock: clk, SampleEvery: every, SampleKeep: 3 * time.Hour})
	s := w.s
	alice, err := st.EnsureUser(ctx, "alice", "phys", false)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := st.EnsureUser(ctx, "bob", "chem", false)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := st.UserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	newJob := func(u store.User, src, dst string, n int) store.Job {
		j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassBatch, Checksum: "adler32", Created: t0, Retry: 0}
		var ts []store.Task
		for i := range n {
			ts = append(ts, store.Task{Index: i, Src: fmt.Sprintf("sluice://%s/f%d", src, i), Dst: fmt.Sprintf("sluice://%s/f%d", dst, i),
				SrcEndpoint: src, DstEndpoint: dst, Size: 1000, State: store.StateQueued})
		}
		if _, err := st.CreateJob(ctx, &j, ts); err != nil {
			t.Fatal(err)
		}
		return j
	}
	ja := newJob(alice, "a", "b", 3) // alice: a->b, three files
	jb := newJob(bob, "a", "c", 2)   // bob: a->c, two files
	claimPartitions(t, w, st, "local", 5, "a")
	file := func(j store.Job, i int) *task {
		for x := range w.tasks.all() {
			if x.JobID == j.ID && x.Index == i {
				return x
			}
		}
		t.Fatalf("no task %d of job %d", i, j.ID)
		return nil
	}
	// alice's first file runs, resumed from 100 bytes, at 400 now.
	a0 := file(ja, 0)
	x := &progressXfer{done: 400}
	a0.State, a0.xfer, a0.run, a0.runDone, a0.runStart, a0.Done, a0.CC = store.StateRunning, x, 1, 100, t0, 100, 1

	w.sample(clk.Now()) // t0: 300 bytes of a->b
	clk.Advance(5 * time.Second)
	x.done = 500
	w.sample(clk.Now()) // not due (the same 10 s window): nothing written
	clk.Advance(5 * time.Second)
	x.done = 700
	w.sample(clk.Now()) // t0+10: 300 more (400 to 700)
	clk.Advance(2 * time.Second)
	// It finishes (its last 300 bytes), and one of bob's fails.
	w.complete(a0, engine.Result{}, clk.Now())
	b1 := file(jb, 1)
	b1.Error = "no space left on device"
	w.endFailed(b1, w.setState(b1, store.StateFailed, b1.Error, clk.Now()), reasonNoSpace)
	w.flush()
	clk.Advance(8 * time.Second)
	w.sample(clk.Now()) // t0+20

	f := func(v float64) *float64 { return &v }
	hq := HistoryQuery{From: t0, To: t0.Add(30 * time.Second), Step: every}
	for _, tc := range []struct {
		name    string
		c       Caller
		q       HistoryQuery
		total   wire.HistorySeries
		links   []string
		servers int
	}{
		{"admin: everyone", Caller{User: admin}, hq, wire.HistorySeries{
			Throughput: []*float64{f(30), f(30), f(30)},
			Queued:     []*float64{f(4), f(4), f(3)}, // a1, a2, b0, b1; then b1 failed
			Running:    []*float64{f(1), f(1), f(0)},
			Done:       []*float64{f(0), f(0), f(1)},
			Failed:     []*float64{f(0), f(0), f(1)},
			Bytes:      900, FilesDone: 1, Failures: 1,
		}, []string{"a>b", "a>c"}, 1},
		{"alice: her own", Caller{User: alice}, hq, wire.HistorySeries{
			Throughput: []*float64{f(30), f(30), f(30)},
			Queued:     []*float64{f(2), f(2), f(2)},
			Running:    []*float64{f(1), f(1), f(0)},
			Done:       []*float64{f(0), f(0), f(1)},
			Failed:     []*float64{f(0), f(0), f(0)},
			Bytes:      900, FilesDone: 1,
		}, []string{"a>b"}, 1},
		{"admin: VO chem", Caller{User: admin}, HistoryQuery{From: t0, To: t0.Add(30 * time.Second), Step: every, VO: "chem"}, wire.HistorySeries{
			Throughput: []*float64{f(0), f(0), f(0)},
			Queued:     []*float64{f(2), f(2), f(1)},
			Running:    []*float64{f(0), f(0), f(0)},
			Done:       []*float64{f(0), f(0), f(0)},
			Failed:     []*float64{f(0), f(0), f(1)},
			Failures:   1,
		}, []string{"a>c"}, 1},
		{"admin: user bob, one bucket", Caller{User: admin}, HistoryQuery{From: t0, To: t0.Add(30 * time.Second), Step: 30 * time.Second, User: "bob"}, wire.HistorySeries{
			Throughput: []*float64{f(0)},
			Queued:     []*float64{f(5.0 / 3)},
			Running:    []*float64{f(0)},
			Done:       []*float64{f(0)},
			Failed:     []*float64{f(1)},
			Failures:   1,
		}, []string{"a>c"}, 1},
		{"before the first sample: unknown", Caller{User: admin}, HistoryQuery{From: t0.Add(-20 * time.Second), To: t0, Step: every}, wire.HistorySeries{
			Throughput: []*float64{nil, nil}, Queued: []*float64{nil, nil}, Running: []*float64{nil, nil}, Done: []*float64{nil, nil}, Failed: []*float64{nil, nil},
		}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := s.History(ctx, tc.c, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			sameSeries(t, "total", h.Total, tc.total)
			var links []string
			for _, l := range h.Links {
				links = append(links, l.Source+">"+l.Destination)
			}
			if fmt.Sprint(links) != fmt.Sprint(tc.links) || len(h.Servers) != tc.servers {
				t.Errorf("links %v, servers %v; want %v, %d servers", links, h.Servers, tc.links, tc.servers)
			}
			if len(h.Times) != len(tc.total.Throughput) || (len(h.Times) > 0 && h.Times[0] != tc.q.From.Unix()) {
				t.Errorf("times %v from %v", h.Times, tc.q.From)
			}
		})
	}
	if _, err := s.History(ctx, Caller{User: alice}, HistoryQuery{User: "bob"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("alice asks for bob's history: %v, want forbidden", err)
	}
	if _, err := s.History(ctx, Caller{User: admin}, HistoryQuery{User: "nobody"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an admin asks for an unknown user's history: %v, want not found", err)
	}
	if _, err := s.History(ctx, Caller{User: admin}, HistoryQuery{From: t0.Add(-3 * time.Hour), To: t0.Add(time.Minute), Step: every}); !errors.Is(err, ErrInvalid) {
		t.Errorf("1080 points: %v, want invalid", err)
	}
	if _, err := s.History(ctx, Caller{User: admin}, HistoryQuery{From: t0.Add(-5 * time.Hour), To: t0.Add(-4 * time.Hour)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a range older than SampleKeep: %v, want invalid", err)
	}
	// Without a step: whole sampling intervals, at most a few hundred
	// points; a day asked for is cut to the 3 hours kept.
	day, err := s.History(ctx, Caller{User: admin}, HistoryQuery{From: t0.Add(-24 * time.Hour), To: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(day.Times); n < 100 || n > defaultHistoryPoints+2 || int64(day.Step)%10 != 0 || day.From.Before(t0.Add(-3*time.Hour-time.Duration(day.Step)*time.Second)) {
		t.Errorf("a day: %d points of %v s from %v", n, day.Step, day.From)
	}

	// Failures: alice sees none of hers, an admin bob's.
	for _, tc := range []struct {
		c    Caller
		want int
	}{{Caller{User: alice}, 0}, {Caller{User: bob}, 1}, {Caller{User: admin}, 1}} {
		fs, err := s.Failures(ctx, tc.c, FailureQuery{})
		if err != nil || len(fs) != tc.want {
			t.Errorf("%s's failures: %d, %v; want %d", tc.c.User.Name, len(fs), err, tc.want)
		}
	}

	// A second server on the same database samples its own partition, c:
	// the history sums the two.
	w2 := loadedWorld(t, Config{Store: st, Clock: clk, SampleEvery: every, ServerID: "s2"})
	newJob(bob, "c", "a", 1)
	claimPartitions(t, w2, st, "s2", 1, "c")
	for x := range w2.tasks.all() {
		x.State, x.xfer, x.run, x.runStart = store.StateRunning, &progressXfer{done: 250}, 1, clk.Now()
	}
	w2.sample(clk.Now().Add(5 * time.Second)) // t0+25: 250 bytes over the 5 s since its loop began
	clk.Advance(10 * time.Second)
	w.sample(clk.Now()) // t0+30: nothing moved on a
	h, err := s.History(ctx, Caller{User: admin}, HistoryQuery{From: t0.Add(20 * time.Second), To: t0.Add(40 * time.Second), Step: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h.Servers) != "[local s2]" {
		t.Errorf("servers %v", h.Servers)
	}
	// local: 300 bytes over its 20 s of samples, 3 files queued at both
	// (a1, a2, b0); s2: 250 bytes over 5 s, one running.
	sameSeries(t, "two servers", h.Total, wire.HistorySeries{
		Throughput: []*float64{f(15 + 50)},
		Queued:     []*float64{f(3)},
		Running:    []*float64{f(1)},
		Done:       []*float64{f(1)},
		Failed:     []*float64{f(1)},
		Bytes:      550, FilesDone: 1, Failures: 1,
	})
	var eps []string
	for _, e := range h.Endpoints {
		eps = append(eps, fmt.Sprintf("%s:%.0f", e.Name, *e.Throughput[0]))
	}
	if fmt.Sprint(eps) != "[a:65 b:15 c:50]" {
		t.Errorf("endpoints' throughput %v, want a (its three links) 65, b 15, c 50", eps)
	}

	// Past SampleKeep, a sample prunes the old rows (of both servers).
	clk.Advance(4 * time.Hour)
	w.sample(clk.Now())
	old, err := st.Samples(ctx, store.SampleQuery{From: t0, To: clk.Now(), Step: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 0 {
		t.Errorf("after 4 hours, samples from before are still there: %+v", old)
	}
}

func sameSeries(t *testing.T, what string, got, want wire.HistorySeries) {
	t.Helper()
	str := func(s wire.HistorySeries) string {
		v := func(xs []*float64) string {
			out := "["
			for i, x := range xs {
				if i > 0 {
					out += " "
				}
				if x == nil {
					out += "null"
				} else {
					out += fmt.Sprintf("%.3f", *x)
				}
			}
			return out + "]"
		}
		return fmt.Sprintf("throughput %s queued %s running %s done %s failed %s; bytes %d done %d failed %d",
			v(s.Throughput), v(s.Queued), v(s.Running), v(s.Done), v(s.Failed), s.Bytes, s.FilesDone, s.Failures)
	}
	if g, w := str(got), str(want); g != w {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// The loop samples once in each window of SampleEvery, aligned as
// History's buckets are, however its ticks fall: a sample due every
// SampleEvery after the last one drifts by up to a cycle each time, and
// then a bucket now and then held no sample and charted as unknown.
func TestSampleWindows(t *testing.T) {
	st := testStore(t, "a")
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	w := loadedWorld(t, Config{Store: st, Clock: clk, SampleEvery: time.Second})
	// Ticks every 0.7 s (a cycle that does not divide the interval).
	for i := range 30 {
		w.sample(t0.Add(time.Duration(i) * 700 * time.Millisecond))
	}
	sums, err := st.Samples(context.Background(), store.SampleQuery{From: t0, To: t0.Add(21 * time.Second), Step: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]int, 21)
	for _, s := range sums {
		got[s.Bucket] += s.Samples
	}
	for b, n := range got {
		if n != 1 {
			t.Errorf("second %d holds %d samples, want 1: %v", b, n, got)
			break
		}
	}
}

// The bytes of a run that ends between two samples (here preempted) are
// counted at the next one, and a new run of the file counts from where
// it resumed.
func TestHistoryCountsEndedRuns(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, "a", "b")
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	w := loadedWorld(t, Config{Store: st, Clock: clk, SampleEvery: 10 * time.Second})
	u, err := st.EnsureUser(ctx, "alice", "phys", false)
	if err != nil {
		t.Fatal(err)
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassBatch, Checksum: "adler32", Created: t0}
	if _, err := st.CreateJob(ctx, &j, []store.Task{{Src: "sluice://a/f", Dst: "sluice://b/f", SrcEndpoint: "a", DstEndpoint: "b", Size: 1000, State: store.StateQueued}}); err != nil {
		t.Fatal(err)
	}
	claimed, _ := claimPartitions(t, w, st, "local", 1, "a")
	f := w.tasks.get(claimed[0].ID)
	run := func(n int, from, done int64) *progressXfer {
		x := &progressXfer{done: done}
		f.State, f.xfer, f.run, f.runDone, f.Done, f.CC = store.StateRunning, x, n, from, from, 1
		w.inflight++
		return x
	}
	bytesAt := func(at time.Time) int64 {
		t.Helper()
		sums, err := st.Samples(ctx, store.SampleQuery{From: at, To: at.Add(time.Second), Step: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var b int64
		for _, s := range sums {
			b += s.Bytes
		}
		return b
	}
	x := run(1, 0, 100)
	w.sample(t0) // 100
	clk.Advance(3 * time.Second)
	x.done = 400
	f.stop = stopPreempted
	w.finished(f.ID, 1, engine.Result{}, context.Canceled) // 300 more, before the next sample
	if f.State != store.StateQueued {
		t.Fatalf("the preempted file is %s", f.State)
	}
	clk.Advance(7 * time.Second)
	w.sample(clk.Now())
	run(2, 250, 600) // resumed from its checkpoint at 250
	clk.Advance(10 * time.Second)
	w.sample(clk.Now())
	got := []int64{bytesAt(t0), bytesAt(t0.Add(10 * time.Second)), bytesAt(t0.Add(20 * time.Second))}
	if fmt.Sprint(got) != "[100 300 350]" {
		t.Errorf("bytes per sample %v, want [100 300 350]", got)
	}
}
