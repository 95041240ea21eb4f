package engine

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestPull: with a Pull hook the engine never reads the source itself;
// every range goes through the hook (the destination fetching it), and the
// result is verified and renamed as usual.
func TestPull(t *testing.T) {
	e := newEnv(t)
	data := e.put(t, "p.bin", 1<<20+777, 9)
	src := &fault{Backend: e.src}
	s := e.spec("p.bin", int64(len(data)))
	s.Src = src
	var pulled atomic.Int64
	s.Pull = func(ctx context.Context, srcPath, dstPath string, off, n int64) error {
		rc, err := e.src.OpenRange(ctx, srcPath, off, n) // the "remote" agent reading its own file
		if err != nil {
			return err
		}
		defer rc.Close()
		pulled.Add(n)
		return e.dst.WriteAt(ctx, dstPath, off, rc, n)
	}
	res, err := Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.checkFinal(t, s, data)
	if src.opens != 0 {
		t.Errorf("the engine opened the source %d times itself", src.opens)
	}
	if pulled.Load() != int64(len(data)) || res.Bytes != int64(len(data)) {
		t.Errorf("pulled %d, result %d bytes, want %d", pulled.Load(), res.Bytes, len(data))
	}
}
