package policyserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// newTestHost starts a Policy Service on st with --policy flag, logging
// to log.
func newTestHost(t *testing.T, st store.Store, flag string, log io.Writer) *Host {
	t.Helper()
	h, err := New(context.Background(), Config{Store: st, Policy: flag, Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSetConfigInitialZero: greedy and weighted-shares start every
// allocation at initial (the paper's s_i) and grow it only from there,
// so an open pair with initial 0 would never give any client a stream:
// the loop's VOs and every adaptive client would wait for ever without
// an error. Such a configuration is refused; a closed pair (pair_max or
// client_max 0) may say initial 0.
func TestSetConfigInitialZero(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := newTestHost(t, st, "", io.Discard)
	admin := store.User{Name: "admin", VO: "admin", Admin: true}
	open := wire.PolicyParams{Initial: 0, Update: 4, PairMax: 128, ClientMax: 32, LeaseSeconds: 60}
	closed := wire.PolicyParams{Initial: 0, Update: 0, PairMax: 0, ClientMax: 32, LeaseSeconds: 60}
	fine := wire.PolicyParams{Initial: 16, Update: 4, PairMax: 128, ClientMax: 32, LeaseSeconds: 60}
	for _, tt := range []struct {
		name string
		cfg  wire.PolicyConfig
		ok   bool
	}{
		{"greedy defaults", wire.PolicyConfig{Policy: "greedy", Defaults: open}, false},
		{"weighted-shares defaults", wire.PolicyConfig{Policy: "weighted-shares", Defaults: open}, false},
		{"a pair", wire.PolicyConfig{Policy: "greedy", Defaults: fine, Pairs: []wire.PairPolicy{{Source: "a", Destination: "b", Params: open}}}, false},
		{"closed pair", wire.PolicyConfig{Policy: "greedy", Defaults: fine, Pairs: []wire.PairPolicy{{Source: "a", Destination: "b", Params: closed}}}, true},
		{"no client streams", wire.PolicyConfig{Policy: "greedy", Defaults: wire.PolicyParams{PairMax: 128, LeaseSeconds: 60}}, true},
	} {
		_, err := s.SetConfig(ctx, admin, tt.cfg)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !tt.ok && (!errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), "initial 0")):
			t.Errorf("%s: %v, want ErrInvalid about initial 0", tt.name, err)
		}
	}
}

// TestPolicyFlagOverrideWarning: serve --policy warns that it overrides
// the policy stored through the API only when one was stored. Before,
// every start with --policy weighted-shares on a fresh store warned
// "--policy overrides the policy stored through the API ... stored=greedy"
// although nothing had been stored: greedy was only the default.
func TestPolicyFlagOverrideWarning(t *testing.T) {
	ctx := context.Background()
	admin := store.User{Name: "admin", VO: "admin", Admin: true}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := func(flag string) string {
		var log strings.Builder
		newTestHost(t, st, flag, &log)
		return log.String()
	}
	if log := start("weighted-shares"); strings.Contains(log, "overrides") {
		t.Errorf("a fresh store, nothing stored: %s", log)
	}
	s := newTestHost(t, st, "", io.Discard)
	cfg := s.Config()
	cfg.Policy = "greedy"
	if _, err := s.SetConfig(ctx, admin, cfg); err != nil {
		t.Fatal(err)
	}
	if log := start("weighted-shares"); !strings.Contains(log, "overrides") {
		t.Errorf("greedy stored through the API, --policy weighted-shares: no warning in %q", log)
	}
}
