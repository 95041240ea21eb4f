package server

import (
	"testing"
	"time"

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
			w.access = map[string]*accessCheck{"alice": {admin: true}}
			tk := &task{Task: store.Task{ID: 1, JobID: 1, Src: "sluice://a/f", Dst: "sluice://c/f", SrcEndpoint: "a", DstEndpoint: "c",
				Size: 1 << 20, Replicas: tc.replicas}, job: j}
			if p := w.plan(tk); p.checksum != tc.want {
				t.Errorf("checksum %q, want %q", p.checksum, tc.want)
			}
		})
	}
}
