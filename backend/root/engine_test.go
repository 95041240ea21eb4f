package root

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/engine"
)

// TestEngineCopy moves a 64 MiB file through the transfer engine from a
// local directory to the XRootD server and back, with four workers.
func TestEngineCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB copies")
	}
	data := random(64<<20+4321, 6)
	want, err := backend.Sum(bytes.NewReader(data), engine.DefaultChecksum)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			local := t.TempDir()
			if err := os.WriteFile(filepath.Join(local, "src.bin"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			fb, err := file.New(local)
			if err != nil {
				t.Fatal(err)
			}
			defer fb.Close()
			rb := open(t, tg, Options{})

			for _, dir := range []struct {
				name         string
				src, dst     backend.Backend
				from, to     string
				readBack     func() []byte
				serverSumsAt int64
			}{
				{"up", fb, rb, "/src.bin", "/up/copy.bin", func() []byte { return readLocal(t, tg, "up/copy.bin") }, 0},
				{"down", rb, fb, "/up/copy.bin", "/down/copy.bin", func() []byte {
					b, err := os.ReadFile(filepath.Join(local, "down", "copy.bin"))
					if err != nil {
						t.Fatal(err)
					}
					return b
				}, 0},
			} {
				start := time.Now()
				res, err := engine.Run(ctx, engine.Spec{
					Src: dir.src, SrcPath: dir.from, Dst: dir.dst, DstPath: dir.to,
					Size: -1, CC: 4, Journal: filepath.Join(t.TempDir(), "j"),
				})
				if err != nil {
					t.Fatalf("%s: %v", dir.name, err)
				}
				t.Logf("%s: %d bytes in %v (%d retries), %s %s", dir.name, res.Size, time.Since(start).Round(time.Millisecond), res.Retries, res.Algo, res.Checksum)
				if res.Size != int64(len(data)) || res.Checksum != want {
					t.Errorf("%s: result %+v, want size %d and %s %s", dir.name, res, len(data), res.Algo, want)
				}
				if got := dir.readBack(); !bytes.Equal(got, data) {
					t.Fatalf("%s: the copy (%d bytes) differs from the source", dir.name, len(got))
				}
			}
			if tg.native && rb.serverSums.Load() == 0 {
				t.Error("XRootD computed no checksum; the engine's were all read back")
			}
		})
	}
}
