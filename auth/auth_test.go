package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	testKey  = bytes.Repeat([]byte("k"), 32)
	otherKey = bytes.Repeat([]byte("o"), 32)
	now      = time.Unix(1_700_000_000, 0)
)

func claims() Claims {
	return Claims{Sub: "alice", Scope: ScopeRW, Prefix: "/data/run7", Exp: now.Unix() + 3600, Aud: "dtn1"}
}

func mint(t *testing.T, key []byte, c Claims) string {
	t.Helper()
	tok, err := Mint(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	for _, aud := range []string{"dtn1", "*"} {
		c := claims()
		c.Aud = aud
		got, err := Verify(testKey, mint(t, testKey, c), now, "dtn1")
		if err != nil {
			t.Fatalf("aud %q: %v", aud, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("claims %+v, want %+v", got, c)
		}
	}
}

// The token's format is the documented one, so other tools can mint tokens.
func TestFormat(t *testing.T) {
	tok := mint(t, testKey, claims())
	payload, sig, _ := strings.Cut(tok, ".")
	if strings.ContainsAny(tok, "=+/") {
		t.Errorf("token %q is not unpadded base64url", tok)
	}
	js, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sub", "scope", "prefix", "exp", "aud"} {
		if _, ok := m[k]; !ok {
			t.Errorf("payload %s lacks %q", js, k)
		}
	}
	if want := base64.RawURLEncoding.EncodeToString(mac(testKey, payload)); sig != want {
		t.Errorf("signature %q, want HMAC-SHA256 of the encoded payload %q", sig, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	good := mint(t, testKey, claims())
	payload, sig, _ := strings.Cut(good, ".")
	flipped := []byte(sig)
	flipped[3] ^= 'A' ^ 'B'
	if flipped[3] == sig[3] {
		t.Fatal("flip did nothing")
	}
	expired := claims()
	expired.Exp = now.Unix()
	// A payload changed after signing (scope widened) with the old MAC.
	widened := claims()
	widened.Prefix = "/"
	js, _ := json.Marshal(widened)
	tampered := base64.RawURLEncoding.EncodeToString(js) + "." + sig
	// Correctly signed but not claims, or claims of the wrong shape.
	signed := func(js string) string {
		p := base64.RawURLEncoding.EncodeToString([]byte(js))
		return p + "." + base64.RawURLEncoding.EncodeToString(mac(testKey, p))
	}
	for _, tc := range []struct {
		name  string
		token string
		aud   string
		want  error
	}{
		{"other key", mint(t, otherKey, claims()), "dtn1", ErrBadSignature},
		{"flipped MAC byte", payload + "." + string(flipped), "dtn1", ErrBadSignature},
		{"tampered payload", tampered, "dtn1", ErrBadSignature},
		{"expired", mint(t, testKey, expired), "dtn1", ErrExpired},
		{"wrong audience", good, "dtn2", ErrAudience},
		{"empty", "", "dtn1", ErrMalformed},
		{"no dot", payload, "dtn1", ErrMalformed},
		{"two dots", good + ".x", "dtn1", ErrMalformed},
		{"empty payload", "." + sig, "dtn1", ErrMalformed},
		{"short MAC", payload + "." + sig[:10], "dtn1", ErrMalformed},
		{"MAC not base64", payload + ".!!!!", "dtn1", ErrMalformed},
		{"padded MAC", good + "=", "dtn1", ErrMalformed},
		{"huge", strings.Repeat("a", 10000) + "." + sig, "dtn1", ErrMalformed},
		{"signed non-JSON", signed("hello"), "dtn1", ErrMalformed},
		{"signed bad scope", signed(`{"scope":"all","prefix":"/","exp":1800000000,"aud":"*"}`), "dtn1", ErrMalformed},
		{"signed no exp", signed(`{"scope":"rw","prefix":"/","aud":"*"}`), "dtn1", ErrMalformed},
		{"signed no aud", signed(`{"scope":"rw","prefix":"/","exp":1800000000}`), "dtn1", ErrMalformed},
		{"signed relative prefix", signed(`{"scope":"rw","prefix":"data","exp":1800000000,"aud":"*"}`), "dtn1", ErrMalformed},
		{"signed dotdot prefix", signed(`{"scope":"rw","prefix":"/a/../..","exp":1800000000,"aud":"*"}`), "dtn1", ErrMalformed},
		{"signed exp as string", signed(`{"scope":"rw","prefix":"/","exp":"1800000000","aud":"*"}`), "dtn1", ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(testKey, tc.token, now, tc.aud)
			if !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Verify(testKey[:31], good, now, "dtn1"); err == nil {
		t.Error("a short verifier key accepted a token")
	}
}

func TestMintRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		edit func(*Claims)
	}{
		{"short key", testKey[:31], func(*Claims) {}},
		{"no exp", testKey, func(c *Claims) { c.Exp = 0 }},
		{"bad scope", testKey, func(c *Claims) { c.Scope = "admin" }},
		{"no aud", testKey, func(c *Claims) { c.Aud = "" }},
		{"relative prefix", testKey, func(c *Claims) { c.Prefix = "data" }},
		{"dotdot prefix", testKey, func(c *Claims) { c.Prefix = "/data/../etc" }},
		{"relative base", testKey, func(c *Claims) { c.Base = "data" }},
		{"dotdot base", testKey, func(c *Claims) { c.Base = "/data/.." }},
		{"prefix not below its base", testKey, func(c *Claims) { c.Prefix, c.Base = "/data/x", "/other" }},
		{"prefix beside its base", testKey, func(c *Claims) { c.Prefix, c.Base = "/datax", "/data" }},
		{"remote scope without remotes", testKey, func(c *Claims) { c.Scope = ScopeRemote }},
		{"remote without port", testKey, func(c *Claims) { c.Remotes = []string{"root://xrd1"} }},
		{"remote with path", testKey, func(c *Claims) { c.Remotes = []string{"root://xrd1:1094/data"} }},
		{"remote with user", testKey, func(c *Claims) { c.Remotes = []string{"ftp://u:p@ftp1:21"} }},
		{"remote without scheme", testKey, func(c *Claims) { c.Remotes = []string{"xrd1:1094"} }},
	} {
		c := claims()
		tc.edit(&c)
		if tok, err := Mint(tc.key, c); err == nil {
			t.Errorf("%s: minted %q", tc.name, tok)
		}
	}
}

func TestAllows(t *testing.T) {
	for _, tc := range []struct {
		scope, prefix string
		op            Op
		path          string
		want          error
	}{
		{"rw", "/a/b", Read, "/a/b", nil},
		{"rw", "/a/b", Read, "a/b", nil},
		{"rw", "/a/b", Write, "/a/b/c", nil},
		{"rw", "/a/b", Read, "/a/b/c/d/e", nil},
		{"rw", "/a/b/", Read, "/a/b/c", nil},
		{"rw", "/a/b", Read, "/a/b/", nil},
		{"rw", "/a/b", Read, "/a/bc", ErrPrefix},
		{"rw", "/a/b", Read, "/a", ErrPrefix},
		{"rw", "/a/b", Read, "/", ErrPrefix},
		{"rw", "/a/b", Read, "", ErrPrefix},
		{"rw", "/a/b", Read, "/b/a", ErrPrefix},
		{"rw", "/a/b", Read, "/a/b/../c", ErrPrefix},
		{"rw", "/a/b", Read, "/a/b/../../etc", ErrPrefix},
		{"rw", "/a/b", Read, "/a/b/\x00", ErrPrefix},
		{"rw", "/", Read, "/anything/at/all", nil},
		{"rw", "/", Write, "", nil},
		{"rw", "/", Read, "/x/../../y", ErrPrefix},
		{"read", "/", Read, "/x", nil},
		{"read", "/", Write, "/x", ErrScope},
		{"write", "/", Write, "/x", nil},
		{"write", "/", Read, "/x", ErrScope},
		{"rw", "/", Op(7), "/x", ErrScope},
		{"remote", "/", Read, "/x", ErrScope},
		{"remote", "/", Write, "/x", ErrScope},
	} {
		c := Claims{Scope: tc.scope, Prefix: tc.prefix, Exp: 1, Aud: "*"}
		err := c.Allows(tc.op, tc.path)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("scope %s prefix %q %s %q: %v, want %v", tc.scope, tc.prefix, tc.op, tc.path, err, tc.want)
		}
	}
}

// TestAllowsRemote: a token reaches exactly the storage servers it
// names, and a token that names none (every token a user can get)
// reaches none.
func TestAllowsRemote(t *testing.T) {
	c := Claims{Scope: ScopeRemote, Prefix: "/", Exp: 1, Aud: "*", Remotes: []string{"root://xrd1:1094", "gsiftp://ftp1:2811"}}
	tok, err := Mint(testKey, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(testKey, tok, time.Unix(0, 0), "dtn1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base string
		ok   bool
	}{
		{"root://xrd1:1094", true}, {"gsiftp://ftp1:2811", true},
		{"root://xrd1:1095", false}, {"ftp://ftp1:2811", false}, {"root://xrd2:1094", false}, {"", false},
	} {
		if err := got.AllowsRemote(tc.base); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want allowed %v", tc.base, err, tc.ok)
		}
	}
	if err := (Claims{Scope: ScopeRW, Prefix: "/"}).AllowsRemote("root://xrd1:1094"); err == nil {
		t.Error("a token without remotes reaches a storage server")
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "key")
	key, err := GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v, want 0600", fi.Mode(), err)
	}
	got, err := LoadKey(name)
	if err != nil || !bytes.Equal(got, key) || len(key) < MinKeySize {
		t.Fatalf("LoadKey %x %v, want %x", got, err, key)
	}
	if _, err := GenerateKey(name); err == nil {
		t.Error("GenerateKey replaced an existing key")
	}
	if again, _ := LoadKey(name); !bytes.Equal(again, key) {
		t.Error("the existing key changed")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".key.tmp*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}

	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode) // WriteFile's mode is subject to the umask
		return p
	}
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"group readable", write("g", b64(32), 0o640), "group or others"},
		{"world readable", write("w", b64(32), 0o604), "group or others"},
		{"too short", write("s", b64(31), 0o600), "need at least"},
		{"not base64", write("n", "not base64 at all!", 0o600), "not base64"},
		{"too large", write("l", strings.Repeat("A", 5000), 0o600), "larger than"},
		{"directory", dir, "not a regular file"},
	} {
		if tc.name == "directory" {
			os.Chmod(dir, 0o700)
		}
		_, err := LoadKey(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	// Unpadded base64 with a trailing newline is a valid key too.
	raw := strings.TrimRight(b64(40), "=") + "\n"
	if k, err := LoadKey(write("raw", raw, 0o400)); err != nil || len(k) != 40 {
		t.Errorf("unpadded key: %d bytes, %v", len(k), err)
	}
	if os.Getuid() != 0 {
		unreadable := write("u", b64(32), 0o000)
		if _, err := LoadKey(unreadable); err == nil {
			t.Error("unreadable key file loaded")
		}
	}
}

func FuzzVerify(f *testing.F) {
	good, _ := Mint(testKey, claims())
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("a.b")
	f.Add(good + "x")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(testKey, tok, now, "dtn1")
		if err == nil {
			// Only a genuine token verifies: re-minting gives it back.
			if again, _ := Mint(testKey, c); again == "" {
				t.Errorf("verified claims %+v cannot be minted", c)
			}
			if c.validate() != nil {
				t.Errorf("verified invalid claims %+v", c)
			}
		}
	})
}

// TestLinkBase: a token's link base (where the agent bounds symbolic
// links) is its Base when set, its Prefix otherwise, and Base survives
// minting and verifying.
func TestLinkBase(t *testing.T) {
	c := claims()
	if c.LinkBase() != c.Prefix {
		t.Errorf("without a base: %q, want the prefix %q", c.LinkBase(), c.Prefix)
	}
	c.Prefix, c.Base = "/home/alice/x", "/home/alice"
	tok, err := Mint(testKey, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(testKey, tok, time.Unix(c.Exp-10, 0), c.Aud)
	if err != nil || got.LinkBase() != "/home/alice" {
		t.Errorf("verified: %+v, %v; want the link base /home/alice", got, err)
	}
}
