package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
)

// TestPullBase: an agent's registered URL becomes the sluice URL agents
// pull from and the registry opens, with the scheme's port when the agent
// gave none (a sluice URL has no default port, so an agent registered as
// https://host failed every pull).
func TestPullBase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://dtn1:7000", "sluice://dtn1:7000"},
		{"https://dtn1:7000", "sluices://dtn1:7000"},
		{"http://dtn1:7000/", "sluice://dtn1:7000"},
		{"https://dtn1.example.org", "sluices://dtn1.example.org:443"},
		{"http://dtn1.example.org/", "sluice://dtn1.example.org:80"},
		{"http://[::1]:7000", "sluice://[::1]:7000"},
		{"https://[2001:db8::1]", "sluices://[2001:db8::1]:443"},
	} {
		if got := pullBase(c.in); got != c.want {
			t.Errorf("pullBase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestAgentThroughRegistry: the service opens agents through its backend
// registry; an agent's URL opens as a Sluice agent that presents the
// run's tokens, and a registry whose "sluice" scheme opens something else
// is refused with the endpoint's URL, not used as an agent.
func TestAgentThroughRegistry(t *testing.T) {
	ctx := context.Background()
	tok := backend.StaticToken("T")

	s := newPolicyTestServer(t, testStore(t))
	b, err := s.agent(ctx, "https://dtn1.example.org", tok)
	if err != nil || b == nil {
		t.Fatalf("agent: %v, %v", b, err)
	}

	other := backend.NewRegistry()
	other.Register(func(ctx context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
		return file.Open(ctx, t.TempDir(), o)
	}, "sluice", "sluices")
	s.cfg.Backends = other
	_, err = s.agent(ctx, "http://dtn1:7000", tok)
	if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "http://dtn1:7000 is not a Sluice agent") {
		t.Errorf("a backend that is not an agent: %v", err)
	}

	s.cfg.Backends = backend.NewRegistry()
	if _, err = s.agent(ctx, "http://dtn1:7000", tok); err == nil || !strings.Contains(err.Error(), "agent http://dtn1:7000") {
		t.Errorf("no backend for the scheme: %v", err)
	}
}
