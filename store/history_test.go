package store

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The history's samples come back summed per server, bucket and link;
// an owner's or a VO's selection keeps the servers' marks (which tell
// an idle time from an unknown one); pruning drops every server's old
// rows and nothing newer.
func TestSamples(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		t0 := ts(0, 0)
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		// Each mark covers the time since the server's previous one: 10 s
		// for s1, 20 s for s2.
		mark := func(server string, sec int) Sample {
			if server == "s1" {
				return Sample{Server: server, At: at(sec), Seconds: 10}
			}
			return Sample{Server: server, At: at(sec), Seconds: 20}
		}
		var rows []Sample
		// s1 samples every 10 s from 0 to 50, s2 at 5, 25 and 45.
		for sec := 0; sec <= 50; sec += 10 {
			rows = append(rows, mark("s1", sec))
		}
		for _, sec := range []int{5, 25, 45} {
			rows = append(rows, mark("s2", sec))
		}
		rows = append(rows,
			// s1: a->b for alice (7) then bob (8, another VO), b->c.
			Sample{Server: "s1", At: at(0), Src: "a", Dst: "b", OwnerID: 7, VO: "phys", Bytes: 100, Queued: 4, Running: 2},
			Sample{Server: "s1", At: at(10), Src: "a", Dst: "b", OwnerID: 7, VO: "phys", Bytes: 300, Queued: 2, Running: 2, Done: 2},
			Sample{Server: "s1", At: at(10), Src: "a", Dst: "b", OwnerID: 8, VO: "chem", Bytes: 50, Running: 1, Failed: 1},
			Sample{Server: "s1", At: at(40), Src: "b", Dst: "c", OwnerID: 7, VO: "phys", Bytes: 1000, Running: 1},
			// s2: its own partition, c->a.
			Sample{Server: "s2", At: at(25), Src: "c", Dst: "a", OwnerID: 8, VO: "chem", Bytes: 70, Queued: 9},
		)
		if err := s.AddSamples(ctx, rows, time.Time{}); err != nil {
			t.Fatal(err)
		}
		sum := func(server string, bucket int, src, dst string, bytes, queued, running, done, failed int64, n int) SampleSum {
			h := SampleSum{Server: server, Bucket: bucket, Src: src, Dst: dst, Bytes: bytes, Queued: queued, Running: running, Done: done, Failed: failed, Samples: n}
			if src == "" {
				h.Seconds = 10 * float64(n)
				if server == "s2" {
					h.Seconds = 20 * float64(n)
				}
			}
			return h
		}
		for _, tc := range []struct {
			name string
			q    SampleQuery
			want []SampleSum
		}{
			{"everything in 20 s buckets", SampleQuery{From: at(0), To: at(60), Step: 20 * time.Second}, []SampleSum{
				sum("s1", 0, "", "", 0, 0, 0, 0, 0, 2),
				sum("s1", 0, "a", "b", 450, 6, 5, 2, 1, 3),
				sum("s1", 1, "", "", 0, 0, 0, 0, 0, 2),
				sum("s1", 2, "", "", 0, 0, 0, 0, 0, 2),
				sum("s1", 2, "b", "c", 1000, 0, 1, 0, 0, 1),
				sum("s2", 0, "", "", 0, 0, 0, 0, 0, 1),
				sum("s2", 1, "", "", 0, 0, 0, 0, 0, 1),
				sum("s2", 1, "c", "a", 70, 9, 0, 0, 0, 1),
				sum("s2", 2, "", "", 0, 0, 0, 0, 0, 1),
			}},
			{"owner 8 from 10 s, to 30 s", SampleQuery{From: at(10), To: at(30), Step: 10 * time.Second, OwnerID: 8}, []SampleSum{
				sum("s1", 0, "", "", 0, 0, 0, 0, 0, 1),
				sum("s1", 0, "a", "b", 50, 0, 1, 0, 1, 1),
				sum("s1", 1, "", "", 0, 0, 0, 0, 0, 1),
				sum("s2", 1, "", "", 0, 0, 0, 0, 0, 1),
				sum("s2", 1, "c", "a", 70, 9, 0, 0, 0, 1),
			}},
			{"VO phys, one bucket", SampleQuery{From: at(0), To: at(60), Step: time.Minute, VO: "phys"}, []SampleSum{
				sum("s1", 0, "", "", 0, 0, 0, 0, 0, 6),
				sum("s1", 0, "a", "b", 400, 6, 4, 2, 0, 2),
				sum("s1", 0, "b", "c", 1000, 0, 1, 0, 0, 1),
				sum("s2", 0, "", "", 0, 0, 0, 0, 0, 3),
			}},
			{"an owner with nothing: the marks", SampleQuery{From: at(40), To: at(50), Step: time.Minute, OwnerID: 99}, []SampleSum{
				sum("s1", 0, "", "", 0, 0, 0, 0, 0, 1),
				sum("s2", 0, "", "", 0, 0, 0, 0, 0, 1),
			}},
			{"before any sample", SampleQuery{From: at(-60), To: at(0), Step: time.Minute}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Samples(ctx, tc.q)
				if err != nil {
					t.Fatal(err)
				}
				same(t, "samples", got, tc.want)
			})
		}
		if _, err := s.Samples(ctx, SampleQuery{From: at(0), To: at(60)}); err == nil {
			t.Error("a query without a step: no error")
		}

		// A later write prunes what is older than 25 s, of both servers.
		if err := s.AddSamples(ctx, []Sample{mark("s2", 65)}, at(25)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Samples(ctx, SampleQuery{From: at(0), To: at(70), Step: 70 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		same(t, "after pruning", got, []SampleSum{
			sum("s1", 0, "", "", 0, 0, 0, 0, 0, 3),
			sum("s1", 0, "b", "c", 1000, 0, 1, 0, 0, 1),
			sum("s2", 0, "", "", 0, 0, 0, 0, 0, 3),
			sum("s2", 0, "c", "a", 70, 9, 0, 0, 0, 1),
		})
	})
}

// Failed files come newest first, with their job's owner, VO and label,
// selected by owner, VO and a search of their URLs, error and label, a
// page at a time; files in other states never.
func TestFailedTasks(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		job := func(owner User, label string, n int) (Job, []Task) {
			j := Job{OwnerID: owner.ID, VO: owner.VO, Label: label, Class: ClassBatch, Checksum: "adler32", Created: ts(0, 0)}
			tasks := makeTasks(n)
			if _, err := s.CreateJob(ctx, &j, tasks); err != nil {
				t.Fatal(err)
			}
			return j, tasks
		}
		ja, ta := job(alice, "Run42 raw", 4)
		jb, tb := job(bob, "calib", 3)
		fail := func(tasks []Task, i int, sec int64, why string) {
			tasks[i].State, tasks[i].Error, tasks[i].Finished = StateFailed, why, ts(sec, 0)
		}
		fail(ta, 0, 10, "checksum mismatch")
		fail(ta, 2, 30, "no space left on device")
		ta[1].State, ta[1].Finished = StateDone, ts(40, 0)
		ta[3].State, ta[3].Error = StateQueued, "retry: connection reset" // not failed
		fail(tb, 1, 20, "permission denied")
		fail(tb, 2, 30, "NO SPACE on dst")
		for _, ts := range [][]Task{ta, tb} {
			if err := s.UpdateTasks(ctx, ts, nil); err != nil {
				t.Fatal(err)
			}
		}
		type key struct {
			job   int64
			index int
		}
		a0, a2, b1, b2 := key{ja.ID, 0}, key{ja.ID, 2}, key{jb.ID, 1}, key{jb.ID, 2}
		for _, tc := range []struct {
			name string
			f    FailureFilter
			want []key
		}{
			// At 30 s both: the larger task id first.
			{"all", FailureFilter{}, []key{b2, a2, b1, a0}},
			{"alice", FailureFilter{OwnerID: alice.ID}, []key{a2, a0}},
			{"bob's VO", FailureFilter{VO: bob.VO}, []key{b2, b1}},
			{"search the error, any case", FailureFilter{Search: "No Space"}, []key{b2, a2}},
			{"search the label", FailureFilter{Search: "run42"}, []key{a2, a0}},
			{"search a URL", FailureFilter{Search: "file0000001.root"}, []key{b1}},
			{"a LIKE wildcard is literal", FailureFilter{Search: "%"}, nil},
			{"first page", FailureFilter{Limit: 2}, []key{b2, a2}},
			{"next page", FailureFilter{Limit: 2, Before: ts(30, 0), BeforeID: tasksOf(t, s, ja.ID)[2].ID}, []key{b1, a0}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.FailedTasks(ctx, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				var keys []key
				for _, f := range got {
					keys = append(keys, key{f.JobID, f.Index})
				}
				same(t, "failures", keys, tc.want)
			})
		}
		got, err := s.FailedTasks(ctx, FailureFilter{OwnerID: alice.ID, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		f := got[0]
		if f.Owner != "alice" || f.VO != alice.VO || f.Label != "Run42 raw" || f.Error != "no space left on device" ||
			f.State != StateFailed || !f.Finished.Equal(ts(30, 0)) || f.Src != ta[2].Src || f.Dst != ta[2].Dst || f.SrcEndpoint != "src" {
			t.Errorf("failure: %+v", f)
		}
	})
}

func tasksOf(t *testing.T, s Store, job int64) []Task {
	t.Helper()
	ts, err := s.Tasks(ctx, job, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// Jobs can be selected by VO and by a search of their labels.
func TestJobsVOAndSearch(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice, bob := mustUser(t, s, "alice"), mustUser(t, s, "bob")
		var ids []int64
		for i, x := range []struct {
			owner User
			label string
		}{{alice, "Run42 raw"}, {bob, "run42 calib"}, {alice, "50%_done"}, {bob, ""}} {
			j := Job{OwnerID: x.owner.ID, VO: x.owner.VO, Label: x.label, Class: ClassBatch, Checksum: "adler32", Created: ts(int64(i), 0)}
			if _, err := s.CreateJob(ctx, &j, makeTasks(1)); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for _, tc := range []struct {
			name string
			f    JobFilter
			want []int // indices into ids, newest first
		}{
			{"bob's VO", JobFilter{VO: bob.VO}, []int{3, 1}},
			{"run42, any case", JobFilter{Search: "RUN42"}, []int{1, 0}},
			{"run42 in alice's VO", JobFilter{Search: "run42", VO: alice.VO}, []int{0}},
			{"a literal %", JobFilter{Search: "0%_"}, []int{2}},
			{"a literal _", JobFilter{Search: "_d"}, []int{2}},
			{"no such label", JobFilter{Search: "zzz"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				js, err := s.Jobs(ctx, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				var got []int
				for _, j := range js {
					got = append(got, slices.Index(ids, j.ID))
				}
				same(t, fmt.Sprintf("jobs %+v", tc.f), got, tc.want)
			})
		}
	})
}
