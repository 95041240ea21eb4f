package webdav

import (
	"bytes"
	"context"
	"errors"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// random is n reproducible pseudo-random bytes.
func random(n int, seed uint64) []byte {
	b := make([]byte, n)
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	mrand.NewChaCha8(key).Read(b)
	return b
}

// ctxFor is a context bounded far beyond what one test step takes.
func ctxFor(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// closedURL is an https:// URL where nothing listens.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "https://" + addr
}

// TestCopyFileFrom runs HTTP third-party copies between two XRootD
// servers (XrdHttpTPC): pulled by the destination, or pushed by the
// source; the bytes are the source's and went between the servers, the
// progress increases to the size; a missing source is ErrNotFound, one
// the destination cannot reach an error that says so.
func TestCopyFileFrom(t *testing.T) {
	ca := storagetest.NewTestCA(t)
	srv := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	dsrv := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	open := func(t *testing.T, url string, push bool) *Backend {
		b, err := New(url, Options{Client: ca.Client(), Push: push})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	src := open(t, srv.URL, false)
	// nginx cannot copy, but it can be the source a destination pulls
	// from; this one wants a token, which the destination must present
	// (TransferHeaderAuthorization).
	nginx := storagetest.WebDAV(t, storagetest.WebDAVOptions{TLS: true, CA: ca, Token: "src-token"})
	withToken := func(t *testing.T, tok string) *Backend {
		b, err := New(nginx.URL, Options{Client: ca.Client(), Token: backend.StaticToken(tok)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	for _, tc := range []struct {
		name     string
		size     int
		existing []byte // at the destination before the copy
		push     bool
		src      *Backend // nil: src
		noSource bool     // the source file is not made
		onNginx  bool     // the source file is on nginx
		want     error    // a sentinel the error must wrap
		wantText string   // what the error must say
	}{
		{name: "pull", size: 6<<20 + 17},
		{name: "pull replaces a longer file", size: 1 << 20, existing: random(3<<20, 9)},
		{name: "pull empty", size: 0, existing: []byte("old")},
		{name: "push", size: 5 << 20, push: true},
		{name: "missing source", noSource: true, want: backend.ErrNotFound},
		{name: "unreachable source", size: 10, src: open(t, closedURL(t), false), wantText: "could not reach the other server"},
		{name: "pull from nginx with a token", size: 3<<20 + 1, src: withToken(t, "src-token"), onNginx: true},
		{name: "pull from nginx with a wrong token", size: 10, src: withToken(t, "wrong"), onNginx: true, want: backend.ErrPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			sp, dp := "src/"+name+".dat", "dst/deeper/"+name+".dat"
			data := random(tc.size, uint64(tc.size))
			switch {
			case tc.onNginx:
				nginx.Put(t, sp, data)
			case !tc.noSource:
				srv.Put(t, sp, data)
			}
			if tc.existing != nil {
				dsrv.Put(t, dp, tc.existing)
			}
			s := src
			if tc.src != nil {
				s = tc.src
			}
			var mu sync.Mutex
			var seen []int64
			err := open(t, dsrv.URL, tc.push).CopyFileFrom(ctxFor(t), s, sp, dp, func(n int64) {
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			})
			if tc.want != nil || tc.wantText != "" {
				if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("CopyFileFrom: %v; want an error wrapping %v, saying %q", err, tc.want, tc.wantText)
				}
				t.Logf("as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := dsrv.Read(t, dp); !bytes.Equal(got, data) {
				t.Fatalf("destination has %d bytes, want the source's %d", len(got), len(data))
			}
			for i := 1; i < len(seen); i++ {
				if seen[i] < seen[i-1] {
					t.Errorf("progress went back: %v", seen)
				}
			}
			if len(seen) == 0 || seen[len(seen)-1] != int64(tc.size) {
				t.Errorf("progress %v, want it to end with %d", seen, tc.size)
			}
			// The server doing the copy logged it (tpc.trace info):
			// the bytes went between the servers.
			doer := dsrv
			if tc.push {
				doer = srv
			}
			if log := doer.Log(); !strings.Contains(log, name+".dat") || !strings.Contains(log, "TRANSFER_SUCCESS") {
				t.Errorf("the server doing the copy logged no successful transfer of %s:\n%s", name, log)
			}
		})
	}
}

// TestXRootDHTTP checks what the conformance suite cannot run on XRootD
// (see servers): writes, reads, listings and the checksums its Digest
// header gives (adler32, md5, crc32c) or, for sha256, computed here.
func TestXRootDHTTP(t *testing.T) {
	srv := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{})
	b, err := New(srv.URL, Options{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := ctxFor(t)
	data := random(3<<20+5, 1)
	if err := b.WriteAt(c, "/a/b/f", 0, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := srv.Read(t, "a/b/f"); !bytes.Equal(got, data) {
		t.Fatalf("the server has %d bytes, want %d", len(got), len(data))
	}
	if fi, err := b.Stat(c, "/a/b/f"); err != nil || fi.Size != int64(len(data)) || fi.IsDir {
		t.Errorf("Stat: %+v, %v", fi, err)
	}
	if fis, err := b.List(c, "/a", true); err != nil || len(fis) != 2 {
		t.Errorf("List(/a, recursive): %+v, %v; want b and b/f", fis, err)
	}
	for _, r := range [][2]int64{{0, -1}, {1000, 5000}, {int64(len(data)) - 1, 1}, {int64(len(data)), -1}} {
		rc, err := b.OpenRange(c, "/a/b/f", r[0], r[1])
		if err != nil {
			t.Fatalf("OpenRange(%d, %d): %v", r[0], r[1], err)
		}
		var got bytes.Buffer
		_, err = got.ReadFrom(rc)
		rc.Close()
		end := int64(len(data))
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		if err != nil || !bytes.Equal(got.Bytes(), data[r[0]:end]) {
			t.Errorf("OpenRange(%d, %d): %d bytes, %v", r[0], r[1], got.Len(), err)
		}
	}
	for _, algo := range backend.Algorithms {
		want, err := backend.Sum(bytes.NewReader(data), algo)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := b.Checksum(c, "/a/b/f", algo); err != nil || got != want {
			t.Errorf("Checksum(%s) = %q, %v; want %q", algo, got, err, want)
		}
		if algo != "sha256" {
			sum, err := b.serverDigest(c, "/a/b/f", algo)
			if err != nil || sum != want {
				t.Errorf("the server's Digest for %s: %q, %v; want %q", algo, sum, err, want)
			}
		}
	}
	if _, err := b.Stat(c, "/missing"); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Stat of a missing file: %v", err)
	}
	if err := b.Rename(c, "/a/b/f", "/a/g"); err != nil {
		t.Fatal(err)
	}
	if err := b.Remove(c, "/a/g"); err != nil {
		t.Fatal(err)
	}
}

// TestCopyFileFromSlow pulls from an nginx that sends at 4 MB/s, so
// that the copy runs long enough for performance markers: the progress
// shows bytes before the end; and a copy cancelled while it runs returns
// at once, with the context's error.
func TestCopyFileFromSlow(t *testing.T) {
	ca := storagetest.NewTestCA(t)
	nginx := storagetest.WebDAV(t, storagetest.WebDAVOptions{TLS: true, CA: ca, Config: []string{"limit_rate 4m;"}})
	dsrv := storagetest.XRootDHTTP(t, storagetest.XRootDHTTPOptions{CA: ca, TPC: true})
	src, err := New(nginx.URL, Options{Client: ca.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := New(dsrv.URL, Options{Client: ca.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	const size = 28 << 20 // 7 s at 4 MB/s: a marker or more on the way
	data := random(size, 5)
	nginx.Put(t, "slow.dat", data)

	t.Run("progress", func(t *testing.T) {
		var seen []int64
		if err := dst.CopyFileFrom(ctxFor(t), src, "slow.dat", "slow.dat", func(n int64) { seen = append(seen, n) }); err != nil {
			t.Fatal(err)
		}
		if got := dsrv.Read(t, "slow.dat"); !bytes.Equal(got, data) {
			t.Fatalf("destination has %d bytes, want %d", len(got), size)
		}
		if len(seen) < 2 || seen[0] <= 0 || seen[0] >= size || seen[len(seen)-1] != size {
			t.Errorf("progress %v: want some bytes before the end, then %d", seen, size)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] <= seen[i-1] {
				t.Errorf("progress did not increase: %v", seen)
			}
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxFor(t))
		defer cancel()
		var cancelledAt time.Time
		err := dst.CopyFileFrom(ctx, src, "slow.dat", "cancelled.dat", func(n int64) {
			if cancelledAt.IsZero() {
				cancelledAt = time.Now()
				cancel()
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("CopyFileFrom cancelled: %v, want context.Canceled", err)
		}
		if cancelledAt.IsZero() {
			t.Fatal("no progress before the end")
		}
		if d := time.Since(cancelledAt); d > 2*time.Second {
			t.Errorf("CopyFileFrom returned %s after its context ended", d)
		}
	})
}
