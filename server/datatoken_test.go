package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
)

// TestDataToken: the data tokens a user gets for `sluice cp` are scoped
// as a job's would be: the path to read, the directory to write in, the
// rule's link base, the named agent only, an hour; what the user's rules
// do not grant, storage endpoints and agents named by address are
// refused.
func TestDataToken(t *testing.T) {
	s, admin := submitter(t)
	alice := grantAlice(t, s)
	ctx := context.Background()
	if _, err := s.PutStorageEndpoint(ctx, admin, "xrd", StorageSpec{URL: "root://xrd1:1094"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url           string
		write         bool
		scope, prefix string
		err           error
		errText       string
	}{
		{url: "sluice://a1/home/alice/d/f", scope: auth.ScopeRead, prefix: "/home/alice/d/f"},
		{url: "sluice://a1/home/alice/d/f", write: true, scope: auth.ScopeRW, prefix: "/home/alice/d"},
		{url: "sluice://a1/home/alice/d/", write: true, scope: auth.ScopeRW, prefix: "/home/alice/d"},
		{url: "sluice://a1/home/alice/x/../f", err: ErrInvalid, errText: "'..'"},
		{url: "sluice://a1/home/bob/f", err: ErrForbidden, errText: "no access rule allows it"},
		{url: "sluice://a1/home/alice", write: true, err: ErrForbidden, errText: "written in their directory"},
		{url: "sluice://xrd/store/f", err: ErrInvalid, errText: "storage endpoint"},
		{url: "sluice://127.0.0.1:1000/home/alice/f", err: ErrInvalid, errText: "name the endpoint"},
		{url: "sluice://nowhere/home/alice/f", err: ErrInvalid, errText: "no endpoint"},
		{url: "root://xrd1:1094/store/f", err: ErrInvalid, errText: "want sluice://"},
	} {
		got, err := s.DataToken(ctx, alice, DataTokenRequest{URL: tc.url, Write: tc.write})
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: %v, want %v saying %q", tc.url, err, tc.err, tc.errText)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		c, err := auth.Verify(s.agentKey("a1"), got.Token, s.now(), "a1")
		if err != nil {
			t.Errorf("%s: the agent refuses the token: %v", tc.url, err)
			continue
		}
		if c.Scope != tc.scope || c.Prefix != tc.prefix || c.Base != "/home/alice" || got.Agent != "sluice://127.0.0.1:1000" {
			t.Errorf("%s: scope %q prefix %q base %q agent %q; want %q, %q, /home/alice, sluice://127.0.0.1:1000", tc.url, c.Scope, c.Prefix, c.Base, got.Agent, tc.scope, tc.prefix)
		}
		if life := time.Unix(c.Exp, 0).Sub(s.now()); life > DataTokenLife || life < DataTokenLife-2*time.Second {
			t.Errorf("%s: lasts %v, want %v", tc.url, life, DataTokenLife)
		}
		if _, err := auth.Verify(s.agentKey("a2"), got.Token, s.now(), "a2"); err == nil {
			t.Errorf("%s: another agent accepts the token", tc.url)
		}
	}
}
