package root

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// TestOpenCredential: a credential's user name is the one the client
// logs in with, and the one it presents to a server that requires unix
// authentication; a credential holding what the backend cannot present
// is refused, saying what, before any server is reached.
func TestOpenCredential(t *testing.T) {
	srv := storagetest.XRootD(t, storagetest.XRootDOptions{Config: []string{
		"xrootd.seclib libXrdSec.so",
		"sec.protocol unix",
		"sec.protbind * only unix",
	}})
	srv.Put(t, "f", []byte("hello"))
	for _, tc := range []struct {
		name string
		cred *backend.Credential
		says []string // in the error; nil: Open succeeds
	}{
		{name: "none", cred: nil},
		{name: "user", cred: &backend.Credential{Username: "alice"}},
		{name: "password", cred: &backend.Credential{Username: "alice", Password: "s3cr3t-pw"}, says: []string{"password"}},
		{name: "token", cred: &backend.Credential{Token: "s3cr3t-tok"}, says: []string{"token"}},
		{name: "proxy", cred: &backend.Credential{X509Proxy: "-----BEGIN CERTIFICATE-----"}, says: []string{"X.509 proxy"}},
		{name: "all", cred: &backend.Credential{Password: "s3cr3t-pw", Token: "s3cr3t-tok", X509Proxy: "s3cr3t-pem"}, says: []string{"password", "token", "X.509 proxy"}},
		{name: "bad user", cred: &backend.Credential{Username: "a b"}, says: []string{"user name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			o, err := Open(ctx, srv.URL("f"), backend.OpenOptions{Credential: tc.cred})
			if tc.says != nil {
				if err == nil {
					o.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, backend.ErrInvalid) {
					t.Errorf("error %v is not ErrInvalid", err)
				}
				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q shows a secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if _, err := o.Backend.Stat(ctx, o.Path); err != nil {
				t.Fatal(err)
			}
			// XRootD logs "user.pid:fd@host ... login as name":
			// the login name, then the one unix authentication
			// presented.
			if tc.cred != nil {
				u := tc.cred.Username
				if log := srv.Log(); !strings.Contains(log, "XrootdXeq: "+u+".") || !strings.Contains(log, "login as "+u+"\n") {
					t.Errorf("the server's log has no login of %s as %s:\n%s", u, u, log)
				}
			}
		})
	}
}
