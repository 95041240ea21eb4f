package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/store"
)

// TestHeartbeatCannotTakeName: a heartbeat, like a registration, cannot
// move a live agent's name to another URL on a server that has not heard
// from that agent itself: another server of a cluster, or this one
// restarted. Before, only registrations asked the store, so anyone with
// the join token could heartbeat a live agent's name with their own URL
// to such a server, which stored it: every server then sent the agent's
// transfers there (as a destination, with read tokens for the sources).
// The agent itself still fails over to that server with its own URL, and
// a name nobody holds still heartbeats there.
func TestHeartbeatCannotTakeName(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	servers := make([]*Server, 2)
	for i, id := range []string{"s1", "s2"} {
		if servers[i], err = New(ctx, Config{Store: st, ServerID: id, Scheduler: "basecc1", DataDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
	}
	s1, s2 := servers[0], servers[1]
	b, err := os.ReadFile(s1.JoinTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	join := strings.TrimSpace(string(b))
	const real = "http://127.0.0.1:1000"
	if _, err := s1.Register(ctx, join, AgentInfo{Name: "dtn1", URL: real}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a    AgentInfo
		ok   bool
	}{
		{"the live agent's name from another URL", AgentInfo{Name: "dtn1", URL: "http://127.0.0.1:2"}, false},
		{"the live agent failing over", AgentInfo{Name: "dtn1", URL: real}, true},
		{"a name nobody holds", AgentInfo{Name: "dtn2", URL: "http://127.0.0.1:3"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s2.Heartbeat(ctx, join, tc.a)
			switch {
			case tc.ok && err != nil:
				t.Fatal(err)
			case !tc.ok && !errors.Is(err, ErrConflict):
				t.Fatalf("heartbeat %+v to another server: %v, want ErrConflict", tc.a, err)
			}
			eps, err := st.Endpoints(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range eps {
				if e.Name == "dtn1" && e.URL != real {
					t.Errorf("dtn1 moved to %s", e.URL)
				}
			}
		})
	}
}
