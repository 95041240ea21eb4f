package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"io"
	mrand "math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// largeSize is over 5 GiB, S3's limit of one PUT and of one CopyObject,
// and not a multiple of a part.
const largeSize = 5<<30 + 1<<20 + 7

// TestLarge copies a 5 GiB object to S3 by a multipart upload with the
// default parts and threads, verifies it by the server's full-object
// CRC-32C and by reading it back (SHA-256), renames it (a multipart
// copy, since it is over 5 GiB) and verifies the copy. It writes 10 GiB
// to the server's disk and reads 5, a minute or so: not under -short.
func TestLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10 GiB: not under -short")
	}
	// Run on request: its 10 GiB of writes go on being flushed after it
	// ends, and the timing tests that follow in make test (the emulated
	// WAN's validation) felt it.
	if os.Getenv("SLUICE_TEST_LARGE") == "" {
		t.Skip("writes 10 GiB: run with SLUICE_TEST_LARGE=1")
	}
	// The server keeps the object and its renamed copy on this machine's
	// disk: 10 GiB, with room left for the rest of the suite.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &fs); err == nil {
		if free := fs.Bavail * uint64(fs.Bsize); free < 16<<30 {
			t.Skipf("writes 10 GiB and %s has %d GiB free: needs 16", os.TempDir(), free>>30)
		}
	}
	srv := storagetest.S3(t, storagetest.S3Options{})
	b := newBackend(t, srv, Options{})
	ctx := t.Context()
	src := &prng{r: mrand.NewChaCha8([32]byte{'5', 'g'}), left: largeSize}
	sha, crc := sha256.New(), crc32.New(crc32.MakeTable(crc32.Castagnoli))
	f := "/" + srv.Bucket + "/large/f"
	start := time.Now()
	if err := b.WriteAt(ctx, f, 0, io.TeeReader(src, io.MultiWriter(sha, crc)), largeSize); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("uploaded %d bytes in %v: %.0f MB/s (%d MiB parts, %d in flight)", int64(largeSize), d.Round(time.Millisecond),
		float64(largeSize)/d.Seconds()/1e6, b.partSize(largeSize)>>20, b.o.Threads)
	wantSHA, wantCRC := hex.EncodeToString(sha.Sum(nil)), hex.EncodeToString(crc.Sum(nil))

	check := func(p string) {
		t.Helper()
		fi, err := b.Stat(ctx, p)
		if err != nil || fi.Size != largeSize {
			t.Fatalf("Stat(%s) = %+v, %v; want %d bytes", p, fi, err, int64(largeSize))
		}
		for _, c := range []struct{ algo, want string }{{"crc32c", wantCRC}, {"sha256", wantSHA}} {
			start := time.Now()
			got, err := b.Checksum(ctx, p, c.algo)
			if err != nil || got != c.want {
				t.Errorf("Checksum(%s, %s) = %q, %v; want %q", p, c.algo, got, err, c.want)
			}
			t.Logf("Checksum(%s, %s) in %v", p, c.algo, time.Since(start).Round(time.Millisecond))
		}
	}
	check(f)
	moved := "/" + srv.Bucket + "/large/moved"
	start = time.Now()
	if err := b.Rename(ctx, f, moved); err != nil {
		t.Fatal(err)
	}
	t.Logf("renamed (a multipart copy) in %v", time.Since(start).Round(time.Millisecond))
	if _, err := b.Stat(ctx, f); err == nil || !backend.Permanent(err) {
		t.Errorf("Stat of the renamed object's old name: %v, want not found", err)
	}
	check(moved)
}

// prng is left pseudo-random bytes, made as they are read (5 GiB need
// not be in memory).
type prng struct {
	r    *mrand.ChaCha8
	left int64
}

func (p *prng) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, _ := p.r.Read(b)
	p.left -= int64(n)
	return n, nil
}
