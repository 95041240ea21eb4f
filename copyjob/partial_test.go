package copyjob

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/engine"
)

// stallingReads is a local source that serves the bytes before stall
// and then waits, as a slow path would, until the copy is stopped.
type stallingReads struct {
	backend.Backend
	stall int64
}

func (s stallingReads) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if off >= s.stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Backend.OpenRange(ctx, p, off, min(n, s.stall-off))
}

// TestInterruptedKeepsPartial: a copy stopped part way (Ctrl-C) reports
// what its journals keep, the bytes a rerun does not send again: as many
// as the journal on disk records, and the rerun completes the file.
func TestInterruptedKeepsPartial(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	data := writeRandom(t, filepath.Join(src, "big"), 8<<20)
	se := localEP(t, filepath.Join(src, "big"))
	se.Backend = stallingReads{se.Backend, 3 << 20}
	o := opts(t)
	o.CC = 1 // one chunk after the other: the first 3 MiB arrive, then nothing
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sum, err := Run(ctx, []Endpoint{se}, localEP(t, filepath.Join(out, "big")), o, func(p Progress) {
		if p.Done >= 3<<20 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted copy: %v, want context.Canceled", err)
	}
	js, _ := filepath.Glob(filepath.Join(o.JournalDir, "*.journal"))
	if len(js) != 1 {
		t.Fatalf("journals %v, want one", js)
	}
	c, ok, err := engine.ReadCheckpoint(context.Background(), engine.FileJournals{}, js[0])
	if err != nil || !ok {
		t.Fatalf("journal: %v %v", ok, err)
	}
	if sum.PartialFiles != 1 || sum.PartialBytes != c.Done || c.Done == 0 {
		t.Errorf("summary keeps %d bytes of %d files; the journal records %d", sum.PartialBytes, sum.PartialFiles, c.Done)
	}
	if sum.Files != 0 {
		t.Errorf("summary counts %d files done, want 0", sum.Files)
	}
	sum, err = Run(context.Background(), []Endpoint{localEP(t, filepath.Join(src, "big"))}, localEP(t, filepath.Join(out, "big")), o, nil)
	if err != nil || sum.PartialBytes != 0 || sum.PartialFiles != 0 {
		t.Fatalf("rerun: %v, %+v", err, sum)
	}
	sameFile(t, filepath.Join(out, "big"), data)
	if _, err := os.Stat(js[0]); !os.IsNotExist(err) {
		t.Errorf("journal left after the rerun: %v", err)
	}
}
