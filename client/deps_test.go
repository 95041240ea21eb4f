package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeanDependencies: the API client and the agent build on package
// wire, not on the server: a program that submits jobs or serves a
// directory does not pull in the server, its store, the engine, the
// scheduler or the database drivers (before, `client` imported `api` and
// `server` for their documents, and with them all of those).
func TestLeanDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/sluice-dtn/sluice/client", "github.com/sluice-dtn/sluice/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/sluice-dtn/sluice/server", "github.com/sluice-dtn/sluice/store", "github.com/sluice-dtn/sluice/engine",
		"github.com/sluice-dtn/sluice/api", "github.com/sluice-dtn/sluice/sched",
		"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/pressly/goose",
		"go.starlark.net", // the Policy Service's Starlark policies are the server's
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("client or agent depends on %s", dep)
			}
		}
	}
}
