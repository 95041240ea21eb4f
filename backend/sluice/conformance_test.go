package sluice_test

import (
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/backendtest"
)

// TestConformance runs the backend conformance suite against an agent on
// loopback, through a token for one directory of it, as the service
// issues them: paths are still named from the agent's root.
func TestConformance(t *testing.T) {
	var a *testAgent
	const dir = "/conformance"
	backendtest.Run(t, backendtest.Fixture{
		New: func(t *testing.T) backendtest.Env {
			a = newAgent(t, "dtn1")
			if err := os.Mkdir(filepath.Join(a.root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			b := a.client(t, a.token(t, auth.ScopeRW, dir, time.Hour))
			return backendtest.Env{B: b, Dir: dir, Local: a.root}
		},
		// How an agent takes rights away: a token whose prefix does
		// not cover the directory (file permissions would not do: the
		// agent runs in this process, as root in CI).
		Deny: func(t *testing.T, p string) (backend.Backend, string) {
			return a.client(t, a.token(t, auth.ScopeRW, path.Join(path.Dir(p), "other"), time.Hour)), ""
		},
	})
}
