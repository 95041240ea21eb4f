package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/backendtest"
)

// TestConformance runs the backend conformance suite on a temporary
// directory.
func TestConformance(t *testing.T) {
	var env backendtest.Env
	backendtest.Run(t, backendtest.Fixture{
		New: func(t *testing.T) backendtest.Env {
			b, dir := newTest(t)
			env = backendtest.Env{B: b, Dir: "/", Local: dir}
			return env
		},
		Deny: func(t *testing.T, dir string) (backend.Backend, string) {
			if os.Geteuid() == 0 {
				return nil, "running as root, whom file permissions do not stop"
			}
			local := filepath.Join(env.Local, filepath.FromSlash(dir))
			if err := os.Chmod(local, 0); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(local, 0o755) })
			return env.B, ""
		},
	})
}
