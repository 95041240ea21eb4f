package auth

import (
	"bytes"
	"testing"
	"time"
)

// TestMinter: the same token until a quarter of its life is left, then a
// fresh one, each with the claims asked for and an expiry a lifetime
// ahead.
func TestMinter(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	now := time.Unix(1_000_000, 0)
	m := &Minter{Key: key, Claims: Claims{Sub: "sluice-cp", Scope: ScopeRead, Prefix: "/data", Aud: AnyAudience}, TTL: time.Hour, Now: func() time.Time { return now }}
	first, err := m.Token()
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(44 * time.Minute)
	if tok, _ := m.Token(); tok != first {
		t.Errorf("a new token with 16 minutes of the last one's hour left")
	}
	now = now.Add(2 * time.Minute) // 14 minutes left
	second, _ := m.Token()
	if second == first {
		t.Fatalf("the same token with 14 minutes of its hour left")
	}
	c, err := Verify(key, second, now, "any-agent")
	if err != nil {
		t.Fatal(err)
	}
	if c.Scope != ScopeRead || c.Prefix != "/data" || time.Unix(c.Exp, 0).Sub(now) != time.Hour {
		t.Errorf("fresh token's claims: %+v", c)
	}
}
