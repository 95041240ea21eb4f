package copyjob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/linkmon"
)

// TestRunMultiUnmeasured: when the links could not be measured, the copy
// is not refused: equal parts, and replicas that finish take over from
// the others; the file arrives whole.
func TestRunMultiUnmeasured(t *testing.T) {
	a, b, dst := t.TempDir(), t.TempDir(), t.TempDir()
	data := writeRandom(t, filepath.Join(a, "f"), 3<<20)
	if err := os.WriteFile(filepath.Join(b, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srcs := []Endpoint{localEP(t, filepath.Join(a, "f")), localEP(t, filepath.Join(b, "f"))}
	var links []linkmon.Link
	for _, s := range srcs {
		links = append(links, linkmon.Link{Name: s.URL, Backend: s.Backend, Path: s.Path, Size: int64(len(data))})
	}
	mon := linkmon.New(links, linkmon.Options{}) // never run: no samples
	rep, err := RunMulti(context.Background(), srcs, localEP(t, dst+"/"), MultiOptions{Split: "tcs", Monitor: mon, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dst, "f"), data)
	if !strings.Contains(rep.Split, "equal parts with stealing") || rep.Links[0].Planned+rep.Links[1].Planned != int64(len(data)) {
		t.Errorf("report %+v", rep)
	}
}
