package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/auth"
)

// TestDataToken: `sluice data-token` mints a data token agents accept,
// with the claims asked for; the old spelling `sluice token` still mints
// one (stdout holds only the token) and says on stderr what to use.
func TestDataToken(t *testing.T) {
	keyFile, key := testKey(t, t.TempDir())
	for _, tc := range []struct {
		name      string
		args      []string
		claims    auth.Claims
		asJSON    bool
		deprecate string
	}{
		{"defaults", []string{"data-token", "--token-key", keyFile, "--sub", "ann"},
			auth.Claims{Sub: "ann", Scope: "rw", Prefix: "/", Aud: "*"}, false, ""},
		{"scoped", []string{"data-token", "--token-key", keyFile, "--sub", "ann", "--scope", "read", "--prefix", "/data/run7", "--aud", "dtn1", "--ttl", "30m"},
			auth.Claims{Sub: "ann", Scope: "read", Prefix: "/data/run7", Aud: "dtn1"}, false, ""},
		{"json", []string{"data-token", "--token-key", keyFile, "--sub", "ann", "--scope", "write", "--json"},
			auth.Claims{Sub: "ann", Scope: "write", Prefix: "/", Aud: "*"}, true, ""},
		{"old spelling", []string{"token", "--token-key", keyFile, "--sub", "ann", "--prefix", "/p"},
			auth.Claims{Sub: "ann", Scope: "rw", Prefix: "/p", Aud: "*"}, false, "sluice data-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			out, errs, err := runSplit(t, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tc.args, err, errs)
			}
			tok := strings.TrimSpace(out)
			if tc.asJSON {
				var j dataTokenOut
				if err := json.Unmarshal([]byte(out), &j); err != nil {
					t.Fatalf("--json printed %q: %v", out, err)
				}
				if j.Scope != tc.claims.Scope || j.Prefix != tc.claims.Prefix || j.Aud != tc.claims.Aud || !j.Expires.After(before) {
					t.Errorf("--json says %+v, want the claims %+v", j, tc.claims)
				}
				tok = j.Token
			}
			c, err := auth.Verify(key, tok, time.Now(), "dtn1")
			if err != nil {
				t.Fatalf("the token %q does not verify: %v", tok, err)
			}
			if c.Sub != tc.claims.Sub || c.Scope != tc.claims.Scope || c.Prefix != tc.claims.Prefix || c.Aud != tc.claims.Aud {
				t.Errorf("claims %+v, want %+v", c, tc.claims)
			}
			if tc.deprecate == "" && errs != "" {
				t.Errorf("stderr %q, want nothing", errs)
			}
			if tc.deprecate != "" && (!strings.Contains(errs, "deprecated") || !strings.Contains(errs, tc.deprecate)) {
				t.Errorf("stderr %q, want a deprecation naming %q", errs, tc.deprecate)
			}
		})
	}
}

// TestTokenCommandNames: API tokens are `sluice api-token`'s, data tokens
// `sluice data-token`'s; the old `sluice token create|list|revoke` still
// reach the API token commands (the error below comes from them) and say
// what to use, and `sluice token` is no longer listed.
func TestTokenCommandNames(t *testing.T) {
	t.Setenv("SLUICE_SERVER", "")
	t.Setenv("SLUICE_TOKEN", "")
	t.Setenv("SLUICE_CONFIG", "/nonexistent/client.json")
	for _, sub := range []string{"create", "list", "revoke"} {
		args := []string{"token", sub}
		if sub == "revoke" {
			args = append(args, "3f9a0c12b4e7")
		}
		_, errs, err := runSplit(t, args...)
		if err == nil || !strings.HasPrefix(err.Error(), "api-token "+sub+": no server") {
			t.Errorf("%v: %v, want the api-token %s command's error", args, err, sub)
		}
		if want := "sluice api-token " + sub; !strings.Contains(errs, "deprecated") || !strings.Contains(errs, want) {
			t.Errorf("%v: stderr %q, want a deprecation naming %q", args, errs, want)
		}
	}
	help, _, err := runSplit(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api-token", "data-token"} {
		if !strings.Contains(help, "\n  "+name+" ") {
			t.Errorf("sluice --help does not list %s:\n%s", name, help)
		}
	}
	if strings.Contains(help, "\n  token ") {
		t.Errorf("sluice --help lists the old token command:\n%s", help)
	}
}
