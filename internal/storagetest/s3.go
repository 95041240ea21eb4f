package storagetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configure a server S3 starts.
type S3Options struct {
	// Bucket is the bucket made on the new server (default
	// "sluice-test").
	Bucket string
	// Args are further command-line options of versitygw, put before
	// the posix subcommand (global options, such as --log-level debug).
	Args []string
	// TLS serves HTTPS, with a certificate for 127.0.0.1 made for the
	// server (S3Server.HTTPClient trusts it): the s3:// scheme, which
	// storage endpoints use.
	TLS bool
}

// S3Server is a Versity S3 Gateway (versitygw) serving a temporary
// directory through its posix backend: each bucket is a directory of
// Dir, and each object the file at its key below it (key a/b/c of bucket
// x is Dir/x/a/b/c), so that a test can look at what a client stored as
// plain files.
type S3Server struct {
	// Endpoint is the server's address, 127.0.0.1:port.
	Endpoint string
	// TLS: the server speaks HTTPS (S3Options.TLS).
	TLS bool
	// AccessKey and SecretKey are the credentials of the server's root
	// account, random for each server.
	AccessKey, SecretKey string
	// Bucket is the bucket made at start, empty.
	Bucket string
	// Dir is the local directory the gateway serves: Dir/Bucket holds
	// the bucket's objects.
	Dir string

	log   string         // the gateway's output
	roots *x509.CertPool // with TLS, the server's certificate
}

// URL is the URL of key in the bucket: s3+http://host:port/bucket/key,
// or s3://host:port/bucket/key with TLS.
func (s *S3Server) URL(key string) string {
	scheme := "s3+http"
	if s.TLS {
		scheme = "s3"
	}
	u := url.URL{Scheme: scheme, Host: s.Endpoint, Path: "/" + s.Bucket + "/" + strings.TrimPrefix(key, "/")}
	return u.String()
}

// HTTPClient is a client that trusts the server's certificate (with
// TLS), for backend.OpenOptions.HTTPClient.
func (s *S3Server) HTTPClient() *http.Client {
	return &http.Client{Transport: s.transport()}
}

func (s *S3Server) transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if s.roots != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: s.roots}
	}
	return t
}

// VersityGW is where the tests look for versitygw: $SLUICE_VERSITYGW,
// else the one scripts/ci-deps.sh installs, else the PATH.
func VersityGW() (string, error) {
	if p := os.Getenv("SLUICE_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SLUICE_VERSITYGW: %w", err)
		}
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "sluice", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return "", errors.New("versitygw is not installed (bash scripts/ci-deps.sh builds it: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	}
	return p, nil
}

// S3 starts versitygw on a free loopback port, serving a new temporary
// directory, with random root credentials and one empty bucket, and
// returns once the bucket is made through the S3 API (which also shows
// that the server answers). The test's cleanup stops it. The test is
// skipped if versitygw is not installed.
func S3(t testing.TB, o S3Options) *S3Server {
	t.Helper()
	bin, err := VersityGW()
	if err != nil {
		t.Skipf("no S3 server for this test: %v", err)
	}
	if o.Bucket == "" {
		o.Bucket = "sluice-test"
	}
	base := t.TempDir()
	s := &S3Server{
		AccessKey: "SLUICE" + strings.ToUpper(randomHex(7)),
		SecretKey: randomHex(20),
		Bucket:    o.Bucket,
		Dir:       filepath.Join(base, "gw"),
		log:       filepath.Join(base, "versitygw.log"),
	}
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if o.TLS {
		s.TLS = true
		// A certificate of a test authority that only this
		// server's clients trust.
		ca := NewTestCA(t)
		cert, key, _ := ca.issue(t, base)
		s.roots = ca.Pool()
		o.Args = append([]string{"--cert", cert, "--key", key}, o.Args...)
	}
	// The port is free when chosen, but another test may take it before
	// the gateway binds it: then it exits, and is started again on
	// another.
	const attempts = 3
	for i := 1; ; i++ {
		err := s.start(t, bin, o.Args)
		if err == nil {
			return s
		}
		if !errors.Is(err, errS3Exited) || i == attempts {
			s.dumpLog(t)
			t.Fatal(err)
		}
		t.Logf("%v; starting it again on another port", err)
	}
}

// errS3Exited: the gateway exited before it answered.
var errS3Exited = errors.New("versitygw exited at start")

// start runs the gateway on a free port and makes the bucket.
func (s *S3Server) start(t testing.TB, bin string, extra []string) error {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{"--port", s.Endpoint, "--quiet"}, extra...)
	args = append(args, "posix", s.Dir)
	logf, err := os.Create(s.log)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	// The credentials by environment, not arguments, so that no process
	// listing shows the secret.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting versitygw: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	t.Logf("started %s %s", bin, strings.Join(args, " "))
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			s.dumpLog(t)
		}
	})

	cl, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1",
		Secure: s.TLS, Transport: s.transport()})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = cl.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%w on port %d", errS3Exited, port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw on %s did not make bucket %s: %w", s.Endpoint, s.Bucket, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dumpLog writes the gateway's output to the test's log.
func (s *S3Server) dumpLog(t testing.TB) {
	t.Helper()
	if b, err := os.ReadFile(s.log); err == nil && len(b) > 0 {
		t.Logf("versitygw's output:\n%s", b)
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
