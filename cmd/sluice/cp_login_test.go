package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/server"
	"github.com/sluice-dtn/sluice/wire"
)

// TestCpLogin: after `sluice login`, `sluice cp` takes the service's
// endpoint names (sluice://ENDPOINT/path) and asks the server for the
// data tokens, which the user's access rules bound as they bound a job's
// files. Before, cp refused such a name ("no port") and took only data
// tokens minted with an agent's key.
func TestCpLogin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	ctx := context.Background()
	if _, err := c.admin.SetAccess(ctx, server.AccessConfig{Rules: []server.AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: server.AccessWrite}}}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.admin.CreateToken(ctx, api.TokenIn{User: "alice", VO: "cms"})
	if err != nil {
		t.Fatal(err)
	}
	in := c.file("a1", "home/alice/in", 3<<20, 1)
	secret := c.file("a1", "home/bob/secret", 1000, 2)
	for i, name := range []string{"d/x", "d/y", "d/sub/z"} {
		c.file("a1", "home/alice/"+name, int64(1000*(i+1)), uint64(10+i))
	}
	if err := os.Symlink(secret, c.path("a1", "home/alice/link")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{"SLUICE_CONFIG=" + filepath.Join(dir, "client.json"), "XDG_STATE_HOME=" + filepath.Join(dir, "state"),
		"SLUICE_SERVER=", "SLUICE_TOKEN=", "SLUICE_DATA_TOKEN=", "SLUICE_CA="}
	sluice := func(args ...string) (string, int) {
		t.Helper()
		return runSluiceEnv(t, time.Minute, env, args...)
	}
	if out, code := sluice("cp", "sluice://a1/home/alice/in", filepath.Join(dir, "before")); code == 0 || !strings.Contains(out, "sluice login") {
		t.Fatalf("cp of an endpoint name before login: exit %d, want a failure naming sluice login:\n%s", code, out)
	}
	if out, code := sluice("login", "--server", "http://"+c.addr, "--token", tok.Token); code != 0 {
		t.Fatalf("login: exit %d\n%s", code, out)
	}
	local := filepath.Join(dir, "local")
	for _, tc := range []struct {
		name string
		args []string
		want string // the file that must equal in, "" for none
	}{
		{"agent to agent", []string{"sluice://a1/home/alice/in", "sluice://a2/home/alice/out"}, c.path("a2", "home/alice/out")},
		{"agent to local", []string{"sluice://a1/home/alice/in", local}, local},
		{"local to agent", []string{in, "sluice://a2/home/alice/up"}, c.path("a2", "home/alice/up")},
		{"into a directory", []string{"sluice://a1/home/alice/in", "sluice://a2/home/alice/into/"}, c.path("a2", "home/alice/into/in")},
		{"a directory", []string{"-r", "sluice://a1/home/alice/d", "sluice://a2/home/alice/d2"}, ""},
	} {
		out, code := sluice(append([]string{"cp"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", tc.name, code, out)
		}
		if tc.want != "" {
			sameFile(t, in, tc.want)
		}
	}
	for _, name := range []string{"x", "y", "sub/z"} {
		sameFile(t, c.path("a1", "home/alice/d/"+name), c.path("a2", "home/alice/d2/"+name))
	}

	// Refused: what her rules do not allow, and what a link of hers
	// leads to; nothing is written.
	stolen := filepath.Join(dir, "stolen")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"another user's file", []string{"sluice://a1/home/bob/secret", stolen}, "no access rule allows it"},
		{"over another user's file", []string{in, "sluice://a1/home/bob/secret"}, "no access rule allows it"},
		{"her home itself", []string{in, "sluice://a2/home/alice"}, "no access rule allows it"},
		{"a link out of her home", []string{"sluice://a1/home/alice/link", stolen}, "link"},
		{"a storage-less address with her API token", []string{"--token", tok.Token, "sluice://" + c.addrs["a1"] + "/home/alice/in", stolen}, "not a data token"},
		{"no such endpoint", []string{"sluice://nowhere/home/alice/in", stolen}, "no endpoint"},
	} {
		out, code := sluice(append([]string{"cp"}, tc.args...)...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want a failure saying %q:\n%s", tc.name, code, tc.want, out)
		}
	}
	if _, err := os.Stat(stolen); !os.IsNotExist(err) {
		t.Errorf("a refused copy left %s (%v)", stolen, err)
	}
	if b, err := os.ReadFile(secret); err != nil || len(b) != 1000 {
		t.Errorf("bob's file changed: %d bytes, %v", len(b), err)
	}
}

// sameFile fails the test unless files a and b hold the same bytes.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s differs from %s (%d and %d bytes)", b, a, len(y), len(x))
	}
}

// TestGrantTokensRenew: a copy named through the service keeps its token
// until three quarters of its life have passed, then asks the server for
// a new one, so that a copy may outlive any one token.
func TestGrantTokensRenew(t *testing.T) {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var now atomic.Pointer[time.Time] // the clock of the server and of cp
	now.Store(&start)
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in wire.DataTokenIn
		if r.URL.Path != "/v1/data-tokens" || json.NewDecoder(r.Body).Decode(&in) != nil || in.URL != "sluice://dtn1/home/alice/f" || !in.Write {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		n := asked.Add(1)
		json.NewEncoder(w).Encode(wire.DataTokenOut{Token: "tok" + string(rune('0'+n)), Agent: "sluice://127.0.0.1:1", Expires: now.Load().Add(time.Hour)})
	}))
	defer srv.Close()
	cl, err := client.New(srv.URL, "sk_test", nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &grantTokens{ctx: context.Background(), cl: cl, url: "sluice://dtn1/home/alice/f", write: true, now: func() time.Time { return *now.Load() }}
	if _, err := g.fetch(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Duration // since the first token
		want string
	}{
		{0, "tok1"},
		{44 * time.Minute, "tok1"},
		{46 * time.Minute, "tok2"}, // the second lasts until +106m
		{80 * time.Minute, "tok2"},
		{100 * time.Minute, "tok3"},
	} {
		at := start.Add(tc.at)
		now.Store(&at)
		got, err := g.Token()
		if err != nil || got != tc.want {
			t.Errorf("at +%v: %q, %v; want %q", tc.at, got, err, tc.want)
		}
	}
}

// TestServiceName: a sluice URL without a port names an endpoint of the
// service; with one, an agent's address.
func TestServiceName(t *testing.T) {
	for _, tc := range []struct {
		loc, name, rest string
		ok              bool
	}{
		{"sluice://dtn1/run42/raw/r00.h5", "dtn1", "/run42/raw/r00.h5", true},
		{"sluices://dtn1/d/", "dtn1", "/d/", true},
		{"sluice://dtn1", "dtn1", "/", true},
		{"sluice://dtn1:7000/run42", "", "", false},
		{"sluice://[::1]:7000/x", "", "", false},
		{"sluice://user@dtn1/x", "", "", false},
		{"root://dtn1//x", "", "", false},
		{"/local/path", "", "", false},
		{"sluice:///x", "", "", false},
	} {
		name, rest, ok := serviceName(tc.loc)
		if name != tc.name || rest != tc.rest || ok != tc.ok {
			t.Errorf("serviceName(%q) = %q, %q, %v; want %q, %q, %v", tc.loc, name, rest, ok, tc.name, tc.rest, tc.ok)
		}
	}
}

// TestCpTokenVariables: cp's --token takes data tokens from
// SLUICE_DATA_TOKEN, and SLUICE_TOKEN, the service commands' API token,
// sets its --api-token instead: before, a logged-in shell's SLUICE_TOKEN
// was sent to agents named by host:port as if it were a data token.
func TestCpTokenVariables(t *testing.T) {
	for _, tc := range []struct {
		env             map[string]string
		token, apiToken string
	}{
		{map[string]string{"SLUICE_TOKEN": "sk_api"}, "", "sk_api"},
		{map[string]string{"SLUICE_DATA_TOKEN": "p.s", "SLUICE_TOKEN": "sk_api"}, "p.s", "sk_api"},
		{map[string]string{}, "", ""},
	} {
		root := newRoot()
		cmd, _, err := root.Find([]string{"cp"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		getenv := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		if err := configure(cmd, getenv, os.DevNull); err != nil {
			t.Fatal(err)
		}
		tok, _ := cmd.Flags().GetString("token")
		api, _ := cmd.Flags().GetString("api-token")
		if tok != tc.token || api != tc.apiToken {
			t.Errorf("%v: --token %q --api-token %q; want %q and %q", tc.env, tok, api, tc.token, tc.apiToken)
		}
	}
}

// TestCpBrokenLogin: a login file that cannot be read stops a copy that
// names the service's endpoints, saying which file, and no other copy.
func TestCpBrokenLogin(t *testing.T) {
	dir := t.TempDir()
	login := filepath.Join(dir, "client.json")
	if err := os.WriteFile(login, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLUICE_CONFIG=" + login, "XDG_STATE_HOME=" + filepath.Join(dir, "state"), "SLUICE_SERVER=", "SLUICE_TOKEN=", "SLUICE_CA="}
	if out, code := runSluiceEnv(t, time.Minute, env, "cp", src, filepath.Join(dir, "dst")); code != 0 {
		t.Fatalf("a local copy with a broken login file: exit %d\n%s", code, out)
	}
	sameFile(t, src, filepath.Join(dir, "dst"))
	if out, code := runSluiceEnv(t, time.Minute, env, "cp", "sluice://dtn1/x", filepath.Join(dir, "y")); code == 0 || !strings.Contains(out, login) {
		t.Fatalf("a copy of an endpoint name with a broken login file: exit %d, want a failure naming %s:\n%s", code, login, out)
	}
}
