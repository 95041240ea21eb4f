package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url      string
		endpoint string
		tls      bool
		path     string
		region   string
		pathOK   bool // path-style addressing
		bad      bool
	}{
		{url: "s3://store.example.org/bucket/a/key", endpoint: "store.example.org:443", tls: true, path: "/bucket/a/key", pathOK: true},
		{url: "s3://store.example.org:9000/bucket/key", endpoint: "store.example.org:9000", tls: true, path: "/bucket/key", pathOK: true},
		{url: "s3+http://127.0.0.1:7070/b/k", endpoint: "127.0.0.1:7070", path: "/b/k", pathOK: true},
		{url: "s3+http://[::1]/b", endpoint: "[::1]:80", path: "/b", pathOK: true},
		{url: "s3://store.example.org:9000", endpoint: "store.example.org:9000", tls: true, path: "/", pathOK: true},
		{url: "s3://s3.eu-west-1.amazonaws.com/bucket/key?region=eu-west-1", endpoint: "s3.eu-west-1.amazonaws.com:443", tls: true, path: "/bucket/key", region: "eu-west-1"},
		{url: "s3:///bucket/key", bad: true},
		{url: "s3://user:secret@host/bucket/key", bad: true},
		{url: "s3://host/bucket/key?versionId=1", bad: true},
		{url: "s3://host/bucket/key#frag", bad: true},
		{url: "https://host/bucket/key", bad: true},
	} {
		o, p, err := ParseURL(tc.url)
		if tc.bad {
			if !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("ParseURL(%q) = %+v, %q, %v; want ErrInvalid", tc.url, o, p, err)
			}
			continue
		}
		if err != nil || o.Endpoint != tc.endpoint || o.TLS != tc.tls || p != tc.path || o.Region != tc.region || o.PathStyle != tc.pathOK {
			t.Errorf("ParseURL(%q) = %+v, %q, %v; want endpoint %s, TLS %v, path %q, region %q, path style %v",
				tc.url, o, p, err, tc.endpoint, tc.tls, tc.path, tc.region, tc.pathOK)
		}
	}
}

func TestOpenCredential(t *testing.T) {
	for _, tc := range []struct {
		name string
		cred *backend.Credential
		ok   bool
	}{
		{"anonymous", nil, true},
		{"keys", &backend.Credential{Username: "AKID", Password: "secret"}, true},
		{"keys and session token", &backend.Credential{Username: "AKID", Password: "secret", Token: "tok"}, true},
		{"access key alone", &backend.Credential{Username: "AKID"}, false},
		{"token alone", &backend.Credential{Token: "tok"}, false},
		{"X.509 proxy", &backend.Credential{X509Proxy: "-----BEGIN CERTIFICATE-----"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Open(t.Context(), "s3://store.example.org/b/k", backend.OpenOptions{Credential: tc.cred})
			if tc.ok {
				if err != nil || o.Path != "/b/k" {
					t.Fatalf("Open: %+v, %v", o, err)
				}
				o.Close()
				return
			}
			if !errors.Is(err, backend.ErrInvalid) {
				t.Fatalf("Open: %v, want ErrInvalid", err)
			}
			if tc.cred.Password != "" && strings.Contains(err.Error(), tc.cred.Password) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestRegistryURL opens a location on a real server by its URL, as the
// service and cp do: s3+http://, and s3:// (HTTPS).
func TestRegistryURL(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("TLS %v", tls), func(t *testing.T) { testRegistryURL(t, tls) })
	}
}

func testRegistryURL(t *testing.T, tls bool) {
	srv := storagetest.S3(t, storagetest.S3Options{TLS: tls})
	ctx := t.Context()
	u := srv.URL("dir/f")
	if want := map[bool]string{false: "s3+http://", true: "s3://"}[tls]; !strings.HasPrefix(u, want) {
		t.Fatalf("URL %s, want %s...", u, want)
	}
	o, err := Open(ctx, u, backend.OpenOptions{HTTPClient: srv.HTTPClient(), Credential: &backend.Credential{Username: srv.AccessKey, Password: srv.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if want := "/" + srv.Bucket + "/dir/f"; o.Path != want {
		t.Fatalf("Opened.Path = %q, want %q", o.Path, want)
	}
	if err := o.Backend.WriteAt(ctx, o.Path, 0, strings.NewReader("hello"), 5); err != nil {
		t.Fatal(err)
	}
	fis, err := o.Backend.List(ctx, "/", true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fi := range fis {
		got = append(got, fi.Path)
	}
	if want := []string{"/" + srv.Bucket, "/" + srv.Bucket + "/dir", "/" + srv.Bucket + "/dir/f"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("List(/, recursive) = %q, want %q", got, want)
	}
}

// TestNoMarkers checks the default behaviour: S3 has no directories, so
// Mkdir makes nothing, and a directory exists while objects are below it.
func TestNoMarkers(t *testing.T) {
	srv := storagetest.S3(t, storagetest.S3Options{})
	b := newBackend(t, srv, Options{})
	ctx := t.Context()
	d := "/" + srv.Bucket + "/d"
	for _, step := range []struct {
		name string
		do   func() error
		want error
	}{
		{"Mkdir makes nothing", func() error { return b.Mkdir(ctx, d+"/e") }, nil},
		{"so the directory is not there", func() error { _, err := b.Stat(ctx, d+"/e"); return err }, backend.ErrNotFound},
		{"nor can it be removed", func() error { return b.Remove(ctx, d+"/e") }, backend.ErrNotFound},
		{"an object makes its directories", func() error { return b.WriteAt(ctx, d+"/e/f", 0, strings.NewReader("x"), 1) }, nil},
		{"the parent is a directory", func() error { return wantDir(b.Stat(ctx, d)) }, nil},
		{"which is not empty", func() error { return b.Remove(ctx, d+"/e") }, backend.ErrExist},
		{"nor written", func() error { return b.WriteAt(ctx, d+"/e", 0, strings.NewReader("x"), 1) }, backend.ErrInvalid},
		{"nor renamed", func() error { return b.Rename(ctx, d+"/e", d+"/g") }, backend.ErrInvalid},
		{"Mkdir where the object is", func() error { return b.Mkdir(ctx, d+"/e/f/g") }, backend.ErrExist},
		{"Mkdir of a missing bucket", func() error { return b.Mkdir(ctx, "/no-such-bucket/x") }, backend.ErrNotFound},
		{"the object goes", func() error { return b.Remove(ctx, d+"/e/f") }, nil},
		{"and its directories with it", func() error { _, err := b.Stat(ctx, d); return err }, backend.ErrNotFound},
		{"a write at an offset", func() error { return b.WriteAt(ctx, d+"/x", 1, strings.NewReader("x"), 1) }, backend.ErrInvalid},
		{"a truncate to a size", func() error { return b.Truncate(ctx, d+"/x", 1) }, backend.ErrInvalid},
		{"a write of a bucket", func() error { return b.WriteAt(ctx, "/"+srv.Bucket, 0, strings.NewReader("x"), 1) }, backend.ErrInvalid},
		{"a bucket name S3 refuses", func() error { _, err := b.Stat(ctx, "/Not_A_Bucket/x"); return err }, backend.ErrInvalid},
	} {
		if err := step.do(); (step.want == nil && err != nil) || !errors.Is(err, step.want) {
			t.Fatalf("%s: %v, want %v", step.name, err, step.want)
		}
	}
}

func wantDir(fi backend.FileInfo, err error) error {
	if err == nil && !fi.IsDir {
		return errors.New("a file, want a directory")
	}
	return err
}

// TestErrors checks that the server's refusals reach callers as the
// backend's sentinel errors.
func TestErrors(t *testing.T) {
	srv := storagetest.S3(t, storagetest.S3Options{})
	good := newBackend(t, srv, Options{})
	ctx := t.Context()
	f := "/" + srv.Bucket + "/f"
	if err := good.WriteAt(ctx, f, 0, strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	wrong := newBackend(t, &storagetest.S3Server{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: "not the secret"}, Options{})
	unknown := newBackend(t, &storagetest.S3Server{Endpoint: srv.Endpoint, AccessKey: "NOSUCHKEY", SecretKey: srv.SecretKey}, Options{})
	anon, err := New(Options{Endpoint: srv.Endpoint, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    *Backend
		p    string
		want error
	}{
		{"wrong secret", wrong, f, backend.ErrPermission},
		{"unknown access key", unknown, f, backend.ErrPermission},
		{"anonymous", anon, f, backend.ErrPermission},
		{"missing object", good, f + "x", backend.ErrNotFound},
		{"missing bucket", good, "/no-such-bucket/f", backend.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(ctx, tc.b, tc.p)
			if !errors.Is(err, tc.want) {
				t.Errorf("read: %v, want %v", err, tc.want)
			}
			if tc.want == backend.ErrPermission {
				err := tc.b.WriteAt(ctx, f, 0, strings.NewReader("y"), 1)
				if !errors.Is(err, tc.want) {
					t.Errorf("write: %v, want %v", err, tc.want)
				}
			}
		})
	}
}

func readAll(ctx context.Context, b backend.Backend, p string) ([]byte, error) {
	rc, err := b.OpenRange(ctx, p, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// partGate is a RoundTripper that counts a multipart upload's part
// uploads in flight, holding each until want are in flight at once (or
// a bound passes): so that the test sees whether parts go in parallel,
// however fast each would be.
type partGate struct {
	next   http.RoundTripper
	want   int
	bound  time.Duration
	mu     sync.Mutex
	cur    int
	max    int
	parts  atomic.Int64
	open   chan struct{}
	opened bool
}

func (g *partGate) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method != http.MethodPut || !q.Has("partNumber") || !q.Has("uploadId") {
		return g.next.RoundTrip(r)
	}
	g.parts.Add(1)
	g.mu.Lock()
	g.cur++
	g.max = max(g.max, g.cur)
	if g.cur >= g.want && !g.opened {
		g.opened = true
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-time.After(g.bound):
	case <-r.Context().Done():
	}
	resp, err := g.next.RoundTrip(r)
	g.mu.Lock()
	g.cur--
	g.mu.Unlock()
	return resp, err
}

// TestMultipartParallel uploads 64 MiB in 5 MiB parts, 4 at a time, and
// checks that 4 parts were in flight at once, that the object is whole,
// and that its CRC-32C comes from the server's full-object checksum.
func TestMultipartParallel(t *testing.T) {
	srv := storagetest.S3(t, storagetest.S3Options{})
	tr, err := minio.DefaultTransport(false)
	if err != nil {
		t.Fatal(err)
	}
	const threads = 4
	gate := &partGate{next: tr, want: threads, bound: 10 * time.Second, open: make(chan struct{})}
	b := newBackend(t, srv, Options{PartSize: 5 << 20, Threads: threads, Transport: gate})
	ctx := t.Context()
	const size = 64 << 20
	data := make([]byte, size)
	mrand.NewChaCha8([32]byte{'m', 'p'}).Read(data)
	f := "/" + srv.Bucket + "/big/f"
	// A plain reader, not a bytes.Reader: the engine's readers are
	// streams, without ReadAt or Seek.
	if err := b.WriteAt(ctx, f, 0, io.MultiReader(bytes.NewReader(data)), size); err != nil {
		t.Fatal(err)
	}
	if n := gate.parts.Load(); n != 13 {
		t.Errorf("%d parts uploaded, want 13 (64 MiB in 5 MiB parts)", n)
	}
	if gate.max < threads {
		t.Errorf("at most %d parts in flight at once, want %d", gate.max, threads)
	}
	t.Logf("%d parts, at most %d in flight", gate.parts.Load(), gate.max)
	sum := sha256.Sum256(data)
	if got, err := b.Checksum(ctx, f, "sha256"); err != nil || got != hex.EncodeToString(sum[:]) {
		t.Errorf("Checksum(sha256) = %q, %v; want %x", got, err, sum)
	}
	// CRC-32C from the server's HEAD: the object's bytes are not read.
	var so minio.StatObjectOptions
	so.Checksum = true
	oi, err := b.c.StatObject(ctx, srv.Bucket, "big/f", so)
	if err != nil {
		t.Fatal(err)
	}
	crc, ok := fullObjectCRC32C(oi)
	if want := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); !ok || crc != hex.EncodeToString([]byte{byte(want >> 24), byte(want >> 16), byte(want >> 8), byte(want)}) {
		t.Errorf("server's full-object CRC-32C %q (type %q), found %v; want %08x", oi.ChecksumCRC32C, oi.ChecksumMode, ok, want)
	}
	if got, err := b.Checksum(ctx, f, "crc32c"); err != nil || got != crc {
		t.Errorf("Checksum(crc32c) = %q, %v; want %q", got, err, crc)
	}
	// A reader that ends early fails the upload and leaves the object.
	err = b.WriteAt(ctx, f, 0, io.MultiReader(bytes.NewReader(data[:30<<20])), size)
	if err == nil {
		t.Error("an upload from a reader 34 MiB short succeeded")
	}
	if fi, err := b.Stat(ctx, f); err != nil || fi.Size != size {
		t.Errorf("after a failed upload: %+v, %v; want the old %d bytes", fi, err, size)
	}
}
