package gridftp

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

// TestEngine copies a 64 MiB file through the transfer engine, local file
// → GridFTP and back, and between two directories of the server as a
// third-party transfer (Spec.Pull), with partial transfers in flight at
// once.
func TestEngine(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const size = 64 << 20
	data := randomBytes(size, 64)
	localDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(localDir, "src.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fb, err := file.New(localDir)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	gb := newBackend(t, s, Options{})
	jdir := t.TempDir()
	want := sumOf(t, data, "adler32")

	run := func(name string, spec engine.Spec) {
		t.Helper()
		spec.Size, spec.CC = -1, 4
		spec.Journal = filepath.Join(jdir, name+".journal")
		start := time.Now()
		res, err := engine.Run(ctx, spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Size != size || res.Checksum != want {
			t.Errorf("%s: result %+v, want size %d, adler32 %s", name, res, size, want)
		}
		t.Logf("%s: %d MiB in %v", name, size>>20, time.Since(start).Round(time.Millisecond))
	}

	run("up", engine.Spec{Src: fb, SrcPath: "src.bin", Dst: gb, DstPath: "in/up.bin"})
	if got := s.readLocal(t, "in/up.bin"); !bytes.Equal(got, data) {
		t.Fatalf("uploaded file: %s", firstDiff(got, data))
	}
	run("down", engine.Spec{Src: gb, SrcPath: "in/up.bin", Dst: fb, DstPath: "out/down.bin"})
	if got, err := os.ReadFile(filepath.Join(localDir, "out", "down.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file: %v", err)
	}
	// Parallel streams: WriteAt with -p from stdin, OpenRange spooled.
	g4 := newBackend(t, s, Options{Parallelism: 4})
	run("up-p4", engine.Spec{Src: fb, SrcPath: "src.bin", Dst: g4, DstPath: "in4/up.bin"})
	run("down-p4", engine.Spec{Src: g4, SrcPath: "in4/up.bin", Dst: fb, DstPath: "out/down4.bin"})
	if got, err := os.ReadFile(filepath.Join(localDir, "out", "down4.bin")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file (p=4): %v", err)
	}
	run("third-party", engine.Spec{Src: gb, SrcPath: "in/up.bin", Dst: gb, DstPath: "tp/copy.bin", Pull: gb.PullFrom(gb)})
	if got := s.readLocal(t, "tp/copy.bin"); !bytes.Equal(got, data) {
		t.Fatalf("third-party copy: %s", firstDiff(got, data))
	}
	// No temporary file is left next to the results.
	for _, p := range []string{"in", "in4", "tp"} {
		fis, err := gb.List(ctx, p, false)
		if err != nil || len(fis) != 1 {
			t.Errorf("%s holds %v, %v; want only the copy", p, fis, err)
		}
	}
	var _ backend.Backend = gb
}
