package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// flakyStore fails task writes while fail is set, as a store on a full
// disk does.
type flakyStore struct {
	store.Store
	fail atomic.Bool
}

func (f *flakyStore) UpdateTasksFenced(ctx context.Context, server string, ts []store.Task, audit []store.AuditEntry) ([]int64, error) {
	if f.fail.Load() {
		return nil, errors.New("disk I/O error: database or disk is full")
	}
	return f.Store.UpdateTasksFenced(ctx, server, ts, audit)
}

// TestCompletionWriteRetried: a finished file whose end state the store
// could not take (a full disk under the SQLite file, say) is written
// again at a later turn, and its job ends once it is: a file done, and a
// file failed for good alike. Before, the loop counted it and forgot it:
// the store kept it running with no run behind it, and its job stayed
// active until the server restarted.
func TestCompletionWriteRetried(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       func(w *world, tk *task)
		state     string // the file's and the job's
		checksum  string
		done, bad int
	}{
		{"done", func(w *world, tk *task) {
			w.complete(tk, engine.Result{Algo: "adler32", Checksum: "01020304"}, time.Now())
		}, store.StateDone, "adler32:01020304", 1, 0},
		{"failed", func(w *world, tk *task) {
			tk.run, w.inflight = 1, 1
			w.finished(tk.ID, 1, engine.Result{}, fmt.Errorf("after 3 passes: %w", engine.ErrChecksum))
		}, store.StateFailed, "", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			u, err := st.EnsureUser(ctx, "alice", "vo", false)
			if err != nil {
				t.Fatal(err)
			}
			j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
			tasks := []store.Task{{Src: "sluice://a/f", Dst: "sluice://d/f", SrcEndpoint: "a", DstEndpoint: "d", Size: 1 << 20}}
			if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
				t.Fatal(err)
			}
			fs := &flakyStore{Store: st}
			w := loadedWorld(t, Config{Store: fs})
			claimed, _ := claimPartitions(t, w, st, "local", 1, "a")
			tk := w.tasks.get(claimed[0].ID)
			// Its run started (written), then ended while the store fails.
			tk.State, tk.runStart = store.StateRunning, time.Now()
			if !w.persist([]*task{tk}, nil) {
				t.Fatal("writing the start")
			}
			fs.fail.Store(true)
			tc.end(w, tk)
			w.flush()
			if got, err := st.Job(ctx, j.ID); err != nil || got.State != store.StateActive {
				t.Errorf("job while its file's end is not written: %s, %v; want active", got.State, err)
			}
			fs.fail.Store(false)
			w.flush() // the next turn
			rows, err := st.Tasks(ctx, j.ID, 0, 0)
			if err != nil || len(rows) != 1 || rows[0].State != tc.state || rows[0].Checksum != tc.checksum {
				t.Fatalf("task in the store: %+v, %v (want %s, checksum %q)", rows, err, tc.state, tc.checksum)
			}
			if got, err := st.Job(ctx, j.ID); err != nil || got.State != tc.state || got.FilesDone != tc.done || got.FilesFailed != tc.bad {
				t.Errorf("job: %s with %d done and %d failed, %v; want %s with %d and %d", got.State, got.FilesDone, got.FilesFailed, err, tc.state, tc.done, tc.bad)
			}
		})
	}
}
