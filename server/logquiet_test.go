package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// fullStore refuses task writes, as a store whose disk is full does.
type fullStore struct{ store.Store }

func (fullStore) UpdateTasksFenced(context.Context, string, []store.Task, []store.AuditEntry) ([]int64, error) {
	return nil, errors.New("commit: database or disk is full (13)")
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStoreFailuresLogQuietly: while the store refuses every write, the
// loop's retries, many a second, log their failure once per logQuiet, and
// the next message says how many were left out. Before, a full disk under
// the database logged some 850 lines a second (8,429 in ten seconds),
// enough to fill the disk the log is on.
func TestStoreFailuresLogQuietly(t *testing.T) {
	st := testStore(t)
	var logs lockedBuffer
	w := loadedWorld(t, Config{Store: fullStore{st}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	tk := &task{Task: store.Task{ID: 1, SrcEndpoint: "a", DstEndpoint: "b"}, job: &jobState{}}
	for range 1000 {
		if w.persist([]*task{tk}, nil) {
			t.Fatal("a refused write reported written")
		}
	}
	if n := strings.Count(logs.String(), "writing task state"); n != 1 {
		t.Fatalf("1,000 refused writes logged %d times, want once", n)
	}
	// A logQuiet later, the next failure is logged with the count.
	w.quiet["writing task state"].at = time.Now().Add(-logQuiet)
	w.persist([]*task{tk}, nil)
	if out := logs.String(); strings.Count(out, "writing task state") != 2 || !strings.Contains(out, "repeats_not_logged=999") {
		t.Errorf("after %v: %s", logQuiet, out)
	}
}
