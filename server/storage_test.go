package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/store"
)

// TestStorageCredentials: a storage endpoint's credential is described
// without its secrets, refreshed by its command before it expires (and
// the fresh one kept), and an expired one that cannot be refreshed fails
// the run's login with a permission error instead of logging in as
// nobody. Only admins register endpoints.
func TestStorageCredentials(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	clk := clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	w := loadedWorld(t, Config{Store: st, Clock: clk})
	s := w.s
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	alice := Caller{User: store.User{Name: "alice", VO: "cms"}}
	if _, err := s.PutStorageEndpoint(ctx, alice, "x", StorageSpec{URL: "root://xrd1"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a user registered a storage endpoint: %v", err)
	}
	fresh := clk.Now().Add(12 * time.Hour).Format(time.RFC3339)
	cred := &Credential{
		Credential: backend.Credential{Username: "svc", Token: "old-secret", Expires: clk.Now().Add(time.Hour)},
		Refresh:    []string{"/bin/sh", "-c", fmt.Sprintf(`echo '{"username":"svc","token":"new-secret","expires":"%s"}'`, fresh)},
	}
	e, err := s.PutStorageEndpoint(ctx, admin, "x", StorageSpec{URL: "root://xrd1", Credential: cred})
	if err != nil {
		t.Fatal(err)
	}
	if e.URL != "root://xrd1:1094" {
		t.Errorf("URL %q, want the default port made explicit", e.URL)
	}
	info := s.StorageCredentialInfo(ctx, "x")
	if strings.Contains(info, "secret") || !strings.Contains(info, "token") || !strings.Contains(info, "sh") {
		t.Errorf("credential described as %q", info)
	}
	// An hour of a three-hour-old... of a one-hour life left: no refresh
	// yet at the start (more than a quarter left), then one.
	got, err := s.credential(ctx, "x")
	if err != nil || got.Token != "old-secret" {
		t.Fatalf("credential %v, %v; want the stored one", got, err)
	}
	clk.Advance(50 * time.Minute) // 10 minutes left
	got, err = s.credential(ctx, "x")
	if err != nil || got.Token != "new-secret" {
		t.Fatalf("credential near its end %v, %v; want the refreshed one", got, err)
	}
	if c, err := s.loadCredential(ctx, "x"); err != nil || c.Token != "new-secret" || len(c.Refresh) == 0 {
		t.Errorf("the refreshed credential was not kept: %v %v", c, err)
	}
	// Expired, and its refresh fails: a permission error.
	bad := &Credential{Credential: backend.Credential{Username: "svc", Expires: clk.Now().Add(time.Minute)}, Refresh: []string{"/bin/false"}}
	if _, err := s.PutStorageEndpoint(ctx, admin, "x", StorageSpec{URL: "root://xrd1", Credential: bad}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := s.credential(ctx, "x"); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("expired credential: %v, want a permission error", err)
	}
	// Changing the endpoint without a credential keeps it; {} removes it.
	if _, err := s.PutStorageEndpoint(ctx, admin, "x", StorageSpec{URL: "root://xrd1", MaxCC: 4}); err != nil {
		t.Fatal(err)
	}
	if s.StorageCredentialInfo(ctx, "x") == "" {
		t.Error("a change without a credential removed it")
	}
	if _, err := s.PutStorageEndpoint(ctx, admin, "x", StorageSpec{URL: "root://xrd1", Credential: &Credential{}}); err != nil {
		t.Fatal(err)
	}
	if info := s.StorageCredentialInfo(ctx, "x"); info != "" {
		t.Errorf("an empty credential kept %q", info)
	}
}

// TestStorageURLs: the storage URLs jobs name resolve to their
// endpoints, whatever the port's spelling; others are refused saying why.
func TestStorageURLs(t *testing.T) {
	idx := map[string]store.Endpoint{
		"root://xrd1:1094":   {Name: "x", URL: "root://xrd1:1094"},
		"gsiftp://gsi1:2811": {Name: "g", URL: "gsiftp://gsi1:2811"},
		"x":                  {Name: "x", URL: "root://xrd1:1094"},
		"g":                  {Name: "g", URL: "gsiftp://gsi1:2811"},
		"davs://dav1:8443":   {Name: "w", URL: "davs://dav1:8443"},
		"s3://minio1:9000":   {Name: "s", URL: "s3://minio1:9000"},
		"w":                  {Name: "w", URL: "davs://dav1:8443"},
		"s":                  {Name: "s", URL: "s3://minio1:9000"},
	}
	for _, tc := range []struct {
		url, ep, path, err string
	}{
		{"root://xrd1/data/f", "x", "/data/f", ""},
		{"root://xrd1:1094/data/../f", "", "", "'..'"},
		{"root://xrd1:1094//data/f", "x", "/data/f", ""},
		{"gsiftp://gsi1/a%20b", "g", "/a b", ""},
		{"sluice://x/data/f", "x", "/data/f", ""},
		{"gsiftp://gsi2/f", "", "", "no storage endpoint is registered for gsiftp://gsi2:2811"},
		{"ftp://gsi1/f", "", "", "no storage endpoint"},
		{"root://u@xrd1/f", "", "", "user"},
		{"https://xrd1/f", "", "", "no storage endpoint is registered for davs://xrd1:443"},
		{"https://dav1:8443/a/f", "w", "/a/f", ""},
		{"davs://dav1:8443/a/f", "w", "/a/f", ""},
		{"s3://minio1:9000/bucket/key", "s", "/bucket/key", ""},
		{"gopher://x/f", "", "", "want sluice://"},
	} {
		e, p, err := parseFileURL(idx, tc.url)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.url, err, tc.err)
		case tc.err == "" && (err != nil || e.Name != tc.ep || p != tc.path):
			t.Errorf("%s: %s %q %v, want %s %q", tc.url, e.Name, p, err, tc.ep, tc.path)
		}
	}
}
