package server

import (
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// TestPlanMultiSourceAlwaysVerified: a file with several sources is
// verified by checksum even in a job that turns verification off (or
// names checksum none): its bytes come from several replicas, and only
// checksums (the final one, and the replicas' vote on range checksums
// when it fails) find replicas of one size that differ. Before, such a
// job landed a file mixed of both replicas and recorded it done. A file
// with one source keeps the job's choice.
func TestPlanMultiSourceAlwaysVerified(t *testing.T) {
	for _, tc := range []struct {
		name     string
		algo     string
		verify   bool
		replicas []string
		want     string
	}{
		{"verified", "adler32", true, []string{"sluice://b/f"}, "adler32"},
		{"verification off", "adler32", false, []string{"sluice://b/f"}, "adler32"},
		{"checksum none", "none", false, []string{"sluice://b/f"}, engine.DefaultChecksum},
		{"one source, verification off", "adler32", false, nil, "none"},
		{"one source, checksum none", "none", false, nil, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{JournalWrites: 500}}
			w := &world{s: s, eps: map[string]*endpoint{}, accessAt: time.Now()}
			j := &jobState{Job: store.Job{ID: 1, Owner: "alice", Checksum: tc.algo, VerifyChecksum: tc.verify}}
			w.access = map[string]*access.Check{"alice": access.NewCheck(access.User{Name: "alice", Admin: true}, nil)}
			tk := &task{Task: store.Task{ID: 1, JobID: 1, Src: "sluice://a/f", Dst: "sluice://c/f", SrcEndpoint: "a", DstEndpoint: "c",
				Size: 1 << 20, Replicas: tc.replicas}, job: j}
			if p := w.plan(tk); p.checksum != tc.want {
				t.Errorf("checksum %q, want %q", p.checksum, tc.want)
			}
		})
	}
}

// TestReplicaSourceDown: a file with several sources waits, or is stopped,
// for a down endpoint only when it cannot go on without it: its
// destination, or every one of its sources. Before, the first source
// counted as the file's only one: with its agent down the file waited
// (up to --down-give-up, 24 h) while its other replicas were up, and a
// run was stopped and sent back to wait when the first source's agent
// went down mid-copy, though the engine carries a file on without a
// replica that fails. A file of one source still waits for it.
func TestReplicaSourceDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas []string
		down     []string
		up       bool // the file can run
	}{
		{"one source up", nil, nil, true},
		{"one source down", nil, []string{"a"}, false},
		{"destination down", []string{"sluice://b/f"}, []string{"c"}, false},
		{"first source down", []string{"sluice://b/f"}, []string{"a"}, true},
		{"a replica down", []string{"sluice://b/f", "sluice://d/f"}, []string{"b"}, true},
		{"all but one source down", []string{"sluice://b/f", "sluice://d/f"}, []string{"a", "b"}, true},
		{"every source down", []string{"sluice://b/f", "sluice://d/f"}, []string{"a", "b", "d"}, false},
		{"a replica not registered", []string{"sluice://x/f"}, []string{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{eps: map[string]*endpoint{}, tasks: newTaskTable()}
			for _, n := range []string{"a", "b", "c", "d"} {
				w.eps[n] = &endpoint{Endpoint: store.Endpoint{Name: n, Up: true}}
			}
			tk := &task{Task: store.Task{ID: 1, JobID: 1, Src: "sluice://a/f", Dst: "sluice://c/f", SrcEndpoint: "a", DstEndpoint: "c",
				Size: 1 << 20, Replicas: tc.replicas, State: store.StateRunning}, job: &jobState{}}
			w.tasks.add(tk)
			stopped := false
			tk.cancel = func() { stopped = true }
			for _, n := range tc.down {
				w.eps[n].Up = false
				w.stopDownRuns(n)
			}
			if got := w.taskUp(tk); got != tc.up {
				t.Errorf("taskUp = %v, want %v", got, tc.up)
			}
			// A file whose size is not known yet is stat'ed at the
			// sources that are up (resolve).
			if got, want := w.sourceUp(tk), tc.up || tc.name == "destination down"; got != want {
				t.Errorf("sourceUp = %v, want %v", got, want)
			}
			if stopped != !tc.up {
				t.Errorf("run stopped: %v, want %v (stop %q)", stopped, !tc.up, tk.stop)
			}
		})
	}
}
