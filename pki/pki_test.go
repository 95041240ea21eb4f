package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveTLS accepts TLS connections on loopback with r's certificate and
// completes each handshake.
func serveTLS(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with addr as name, trusting caFile ("" : the system's
// roots), and returns the server's certificate.
func dial(t *testing.T, addr, name, caFile string) (*x509.Certificate, error) {
	t.Helper()
	cfg, err := ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = name
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, Explain(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// TestSiteCA: a certificate the site's authority issued is trusted by a
// client given the authority and by no other; one for another name is
// refused saying how to fix it; a renewed certificate is served without
// a restart; nothing is replaced unasked.
func TestSiteCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if err := InitCA(dir, "", now); err != nil {
		t.Fatal(err)
	}
	if err := InitCA(dir, "", now); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second ca init: %v, want a refusal", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, CAKey)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the authority's key: %v, %v; want mode 0600", fi.Mode(), err)
	}
	certFile, keyFile, err := Issue(dir, []string{"127.0.0.1", "localhost"}, filepath.Join(dir, "server"), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Issue(dir, []string{"127.0.0.1"}, filepath.Join(dir, "server"), now); err == nil {
		t.Error("issuing over existing files succeeded")
	}
	r, err := NewReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	clock := now
	r.now = func() time.Time { return clock }
	addr := serveTLS(t, r)
	caFile := filepath.Join(dir, CACert)

	first, err := dial(t, addr, "127.0.0.1", caFile)
	if err != nil {
		t.Fatalf("with the site's authority: %v", err)
	}
	if _, err := dial(t, addr, "localhost", caFile); err != nil {
		t.Errorf("by its other name: %v", err)
	}
	var ua x509.UnknownAuthorityError
	if _, err := dial(t, addr, "127.0.0.1", ""); !errors.As(err, &ua) || !strings.Contains(err.Error(), "--ca FILE") {
		t.Errorf("without the authority: %v, want an unknown authority naming --ca", err)
	}
	var he x509.HostnameError
	if _, err := dial(t, addr, "dtn9.example.org", caFile); !errors.As(err, &he) || !strings.Contains(err.Error(), "sluice ca issue") {
		t.Errorf("by a name it is not for: %v, want a hostname error naming the fix", err)
	}

	// Renewed in place: the next handshake a second later gets it.
	c2, k2, err := Issue(dir, []string{"127.0.0.1"}, filepath.Join(dir, "renewed"), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{c2, certFile}, {k2, keyFile}} {
		if err := os.Rename(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	clock = clock.Add(2 * time.Second)
	second, err := dial(t, addr, "127.0.0.1", caFile)
	if err != nil {
		t.Fatal(err)
	}
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Error("the renewed certificate was not served")
	}
	// A broken pair keeps the last good one in use, and says why.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	if got, err := dial(t, addr, "127.0.0.1", caFile); err != nil || got.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Errorf("after a broken renewal: %v; want the last good certificate", err)
	}
	if r.Err() == nil {
		t.Error("a broken renewal was not reported")
	}
}
