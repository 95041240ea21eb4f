// Package pki owns the site's own certificates: a small certificate
// authority for sites without one (`sluice ca init`, `sluice ca issue`),
// the server's certificate reloaded from its files without a restart,
// and the client side's trust (the system's roots plus the site's
// authority) with errors that name the fix. Servers and agents verify
// each other with it; nothing here ever turns verification off.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Files of a CA directory.
const (
	CACert = "ca.pem"
	CAKey  = "ca.key"
)

// Lifetimes: the authority's, and a certificate's (397 days, the most
// browsers take).
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	CertLifetime = 397 * 24 * time.Hour
)

// InitCA makes a certificate authority in dir (created if needed): its
// certificate (ca.pem, to give every client and agent) and key (ca.key,
// mode 0600, to keep on the machine that issues). It refuses to replace
// an authority already there: the certificates it issued would stop
// being trusted.
func InitCA(dir, name string, now time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	for _, f := range []string{CACert, CAKey} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("ca init: %s exists already: an authority is there (the certificates it issued trust it; remove it yourself to start over)", filepath.Join(dir, f))
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	if name == "" {
		name = "Sluice site CA"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CALifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	if err := writeKey(filepath.Join(dir, CAKey), key); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	if err := writeNew(filepath.Join(dir, CACert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	return nil
}

// Issue signs, with the authority in dir, a certificate for hosts (names
// or IP addresses; the first is its common name) good for serving and
// for client authentication, and writes it (with the authority's
// certificate after it) to out.pem and its key to out.key (0600). It
// refuses to replace files already there.
func Issue(dir string, hosts []string, out string, now time.Time) (certFile, keyFile string, err error) {
	if len(hosts) == 0 {
		return "", "", errors.New("ca issue: name at least one host (a DNS name or an IP address)")
	}
	caCert, caKey, caPEM, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("ca issue: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("ca issue: %w", err)
	}
	certFile, keyFile = out+".pem", out+".key"
	if err := writeKey(keyFile, key); err != nil {
		return "", "", fmt.Errorf("ca issue: %w", err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...)
	if err := writeNew(certFile, chain, 0o644); err != nil {
		os.Remove(keyFile)
		return "", "", fmt.Errorf("ca issue: %w", err)
	}
	return certFile, keyFile, nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACert))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ca issue: no authority in %s (sluice ca init --dir %s makes one): %w", dir, dir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ca issue: the authority's key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, nil, fmt.Errorf("ca issue: %s or %s is not PEM", CACert, CAKey)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ca issue: %s: %w", CACert, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("ca issue: %s: %w", CAKey, err)
	}
	return cert, key, certPEM, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) // never fails (crypto/rand)
	return n
}

func writeKey(p string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writeNew(p, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// writeNew writes a file that must not exist yet (O_EXCL): nothing is
// replaced unasked.
func writeNew(p string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	return f.Close()
}

// Reloader serves a certificate from its files and reads them again when
// they change (checked at most once a second, at a handshake), so that a
// renewed certificate is served without a restart. A pair that cannot be
// loaded leaves the last good one in use, and Err says why.
type Reloader struct {
	certFile, keyFile string
	now               func() time.Time // time.Now; a test's clock

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // the files' sizes and times when cert was read
	checked time.Time // when the files were last looked at
	err     error     // the last failure to reload, or nil
}

// NewReloader loads the pair once (an error if it cannot be).
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) fileStamp() (string, error) {
	var s string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d.%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

func (r *Reloader) load() error {
	stamp, err := r.fileStamp()
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s, key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.stamp = &c, stamp
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= time.Second {
		r.checked = now
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			r.err = r.load()
		}
	}
	return r.cert, nil
}

// Err is why the last reload failed (nil if it did not).
func (r *Reloader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// ClientTLS is the TLS configuration of a client (the command line, an
// agent joining its servers, a server reaching agents): the system's
// roots, plus the site's authority in caFile if given.
func ClientTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	}
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("site authority: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("site authority %s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Explain adds to a TLS verification error what to do about it: the
// errors say what failed, not that the fix is to trust the site's
// authority or to issue a certificate for the name used.
func Explain(err error) error {
	var done explained
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case err == nil || errors.As(err, &done):
		return err // explained already
	case errors.As(err, &ua):
		return explained{fmt.Errorf("%w (trust the site's authority: --ca FILE or SLUICE_CA, its ca.pem from `sluice ca init`)", err)}
	case errors.As(err, &he):
		names := "other names"
		if c := he.Certificate; c != nil {
			var all []string
			all = append(all, c.DNSNames...)
			for _, ip := range c.IPAddresses {
				all = append(all, ip.String())
			}
			if len(all) > 0 {
				names = strings.Join(all, ", ")
			}
		}
		return explained{fmt.Errorf("%w (the certificate is for %s: connect by one of them, or issue one for %s: sluice ca issue %s)", err, names, he.Host, he.Host)}
	}
	return err
}

// explained is an error Explain has added its advice to.
type explained struct{ error }

func (e explained) Unwrap() error { return e.error }
