// Package s3 is the backend of S3 object stores (AWS S3, Ceph's radosgw,
// MinIO, versitygw, ...), through minio-go.
//
// A backend is rooted at one S3 endpoint (host:port): its paths are
// /bucket/key, "/" lists the buckets and "/bucket" is a bucket's top. S3
// has objects, not files in directories, and the backend maps one onto
// the other as most S3 tools do:
//
//   - A file is an object; its key is the path below the bucket.
//   - A directory is a key prefix ending in "/" that has objects below
//     it: it exists while they do, and only then. Mkdir makes nothing
//     (there is nothing to make: a later object makes its directories),
//     it only checks that no object is where the directory would be;
//     Remove of a directory fails while objects are below it and is
//     ErrNotFound otherwise, as Stat says. So an empty directory is not
//     copied to S3. An object whose key ends in "/" (a "directory
//     marker", as the AWS console's folders and rclone make) stands for
//     its directory and is never listed as a file; with
//     Options.DirMarkers, Mkdir makes them, so that empty directories
//     exist (and the backend behaves as a file system would), at one
//     empty object per directory.
//   - Objects are written whole (backend.WholeWriter): WriteAt takes
//     offset 0 and every byte, and uploads them as one object, in
//     parallel parts (a multipart upload) when it is larger than a part.
//     An object appears only once its upload is complete, so Sync has
//     nothing to do, and a failed upload leaves the old object, if any.
//   - Rename is a server-side copy (a multipart copy for objects over
//     5 GiB) and a delete of the source: not atomic, and for files only.
//
// Paths are cleaned as rooted paths first ("/../x" is "/x"), so that no
// path names something above the endpoint's root.
package s3

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/sluice-dtn/sluice/backend"
)

// Defaults of Options, for a 10 Gb/s DTN: 8 parts of 64 MiB in flight
// keep a 1.25 GB/s link busy over a WAN whose single TCP streams reach a
// few hundred MB/s each, at 512 MiB of buffers for one upload; a 1 TiB
// object is 16,384 such parts, more than S3's 10,000, so the part size
// grows with the object (partSize).
const (
	DefaultPartSize = 64 << 20
	DefaultThreads  = 8
)

// S3's limits on multipart uploads.
const (
	minPartSize = 5 << 20
	maxPartSize = 5 << 30
	maxParts    = 10_000
	// maxCopy is the largest object one CopyObject copies; larger ones
	// are copied part by part (UploadPartCopy).
	maxCopy = 5 << 30
)

// Options configure a backend.
type Options struct {
	// Endpoint is the server's host:port.
	Endpoint string
	// TLS: reach the server by HTTPS (else plain HTTP).
	TLS bool
	// Region is the buckets' region ("": asked of the server per bucket,
	// which is "us-east-1" on most servers outside AWS).
	Region string
	// AccessKey and SecretKey sign the requests (both empty: anonymous);
	// SessionToken, with them, is a temporary credential's token.
	AccessKey, SecretKey, SessionToken string
	// PathStyle addresses buckets in the path (http://host/bucket/key)
	// rather than in the host name (http://bucket.host/key), which
	// servers reached by IP address or without wildcard DNS need. Off:
	// minio-go's choice (virtual hosts on AWS, paths elsewhere).
	PathStyle bool
	// PartSize is the size of a multipart upload's parts (0:
	// DefaultPartSize); objects up to it are uploaded in one PUT. It
	// grows for objects that would have more than S3's 10,000 parts.
	PartSize int64
	// Threads is how many parts of one upload are in flight at once
	// (0: DefaultThreads). An upload holds Threads parts in memory.
	Threads int
	// DirMarkers makes Mkdir put a directory marker (an empty object
	// named dir/) for the directory and each parent that has no object
	// below it, so that empty directories exist. Off: Mkdir makes
	// nothing, and an empty directory does not exist.
	DirMarkers bool
	// Transport carries the requests (nil: minio-go's default, tuned for
	// many parallel transfers).
	Transport http.RoundTripper
}

// Backend is one S3 endpoint. It is safe for concurrent use.
type Backend struct {
	c *minio.Client
	o Options
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.WholeWriter = (*Backend)(nil)
)

// New returns the backend of the endpoint o names. It does not reach the
// server: the first request does.
func New(o Options) (*Backend, error) {
	if o.Endpoint == "" {
		return nil, fmt.Errorf("%w: s3: no endpoint", backend.ErrInvalid)
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Threads == 0 {
		o.Threads = DefaultThreads
	}
	if o.PartSize < minPartSize || o.PartSize > maxPartSize || o.Threads < 1 {
		return nil, fmt.Errorf("%w: s3: part size %d (want 5 MiB to 5 GiB) or threads %d (want 1 or more)", backend.ErrInvalid, o.PartSize, o.Threads)
	}
	if (o.AccessKey == "") != (o.SecretKey == "") || (o.SessionToken != "" && o.AccessKey == "") {
		return nil, fmt.Errorf("%w: s3: an access key needs its secret key (and a session token both)", backend.ErrInvalid)
	}
	if o.Transport == nil {
		// Our own, so that Close can release its connections.
		t, err := minio.DefaultTransport(o.TLS)
		if err != nil {
			return nil, fmt.Errorf("s3: %w", err)
		}
		o.Transport = t
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(o.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken),
		Secure:       o.TLS,
		Region:       o.Region,
		BucketLookup: lookup,
		Transport:    o.Transport,
		// The engine retries what fails; minio-go's own retries of a
		// whole request would only hide a server that stopped.
		MaxRetries: 1,
		// Checksums sent after the body (aws-chunked trailers): what
		// lets a multipart upload declare, when it starts, the
		// full-object CRC-32C it ends with.
		TrailingHeaders: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3: endpoint %s: %w", backend.ErrInvalid, o.Endpoint, err)
	}
	return &Backend{c: c, o: o}, nil
}

// Close releases the backend's idle connections.
func (b *Backend) Close() error {
	if t, ok := b.o.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// WritesWhole marks the backend as a backend.WholeWriter.
func (b *Backend) WritesWhole() {}

// loc is a backend path split into its bucket and key ("" and "" for the
// root, bucket and "" for a bucket's top).
type loc struct{ bucket, key string }

// split cleans p as a rooted path and splits it.
func split(p string) (loc, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	bucket, key, _ := strings.Cut(c, "/")
	if bucket != "" {
		if err := s3utils.CheckValidBucketNameStrict(bucket); err != nil {
			return loc{}, fmt.Errorf("%w: %q: bucket %q: %v", backend.ErrInvalid, p, bucket, err)
		}
	}
	return loc{bucket, key}, nil
}

// path is l as a backend path.
func (l loc) path() string {
	if l.key == "" {
		return "/" + l.bucket
	}
	return "/" + l.bucket + "/" + l.key
}

// prefix is the key prefix of what is below l, a directory.
func (l loc) prefix() string {
	if l.key == "" {
		return ""
	}
	return l.key + "/"
}

// object splits p and checks that it names an object: below a bucket.
func object(p string) (loc, error) {
	l, err := split(p)
	if err != nil {
		return l, err
	}
	if l.key == "" {
		return l, fmt.Errorf("%w: %q is the root or a bucket, not an object", backend.ErrInvalid, p)
	}
	return l, nil
}

// fail wraps err of op on l, classified with backend's sentinels.
func fail(op string, l loc, err error) error {
	return fmt.Errorf("s3: %s %s: %w", op, l.path(), classify(err))
}

// classify maps an S3 error to backend's sentinel errors, keeping the
// server's code and message.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	r := minio.ToErrorResponse(err)
	var kind error
	switch r.Code {
	case "NoSuchKey", "NoSuchBucket", "NotFound", "NoSuchUpload":
		kind = backend.ErrNotFound
	case "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"InvalidToken", "ExpiredToken", "AccountProblem", "InvalidSecurity",
		// versitygw's answer (404) to an access key it does not know: a
		// refused credential, not a missing object.
		"XAdminUserNotFound":
		kind = backend.ErrPermission
	case "InvalidRange", "InvalidArgument", "InvalidBucketName", "KeyTooLongError", "InvalidObjectName",
		"XMinioInvalidObjectName", "EntityTooLarge", "EntityTooSmall", "InvalidPart", "MetadataTooLarge",
		"MethodNotAllowed", "ObjectParentIsFile", "ExistingObjectIsDirectory", "DirectoryObjectContainsData",
		"DirectoryNotEmpty", "InvalidDigest", "BadDigest", "XAmzContentChecksumMismatch":
		kind = backend.ErrInvalid
	case "BucketAlreadyExists", "BucketAlreadyOwnedByYou":
		kind = backend.ErrExist
	case "QuotaExceeded", "XMinioStorageFull", "StorageFull", "XMinioAdminBucketQuotaExceeded":
		kind = backend.ErrNoSpace
	default:
		switch r.StatusCode {
		case http.StatusNotFound:
			kind = backend.ErrNotFound
		case http.StatusForbidden, http.StatusUnauthorized:
			kind = backend.ErrPermission
		case http.StatusRequestedRangeNotSatisfiable, http.StatusMethodNotAllowed, http.StatusLengthRequired:
			kind = backend.ErrInvalid
		}
	}
	if kind == nil {
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// Stat describes a path: an object, or a directory if objects are below
// it (a bucket, or the root, always is one).
func (b *Backend) Stat(ctx context.Context, p string) (backend.FileInfo, error) {
	l, err := split(p)
	if err != nil {
		return backend.FileInfo{}, err
	}
	switch {
	case l.bucket == "":
		return backend.FileInfo{Path: "/", IsDir: true}, nil
	case l.key == "":
		ok, err := b.c.BucketExists(ctx, l.bucket)
		if err != nil {
			return backend.FileInfo{}, fail("stat", l, err)
		}
		if !ok {
			return backend.FileInfo{}, fmt.Errorf("s3: stat %s: %w: no such bucket", l.path(), backend.ErrNotFound)
		}
		return backend.FileInfo{Path: l.path(), IsDir: true}, nil
	}
	oi, err := b.c.StatObject(ctx, l.bucket, l.key, minio.StatObjectOptions{})
	if err == nil {
		return backend.FileInfo{Path: l.path(), Size: oi.Size, ModTime: oi.LastModified}, nil
	}
	if err = classify(err); !errors.Is(err, backend.ErrNotFound) {
		return backend.FileInfo{}, fail("stat", l, err)
	}
	dir, err := b.hasBelow(ctx, l)
	if err != nil {
		return backend.FileInfo{}, fail("stat", l, err)
	}
	if !dir {
		return backend.FileInfo{}, fmt.Errorf("s3: stat %s: %w", l.path(), backend.ErrNotFound)
	}
	return backend.FileInfo{Path: l.path(), IsDir: true}, nil
}

// hasBelow reports whether any object's key starts with l's prefix:
// whether l is a directory.
func (b *Backend) hasBelow(ctx context.Context, l loc) (bool, error) {
	ctx, cancel := context.WithCancel(ctx) // ends the listing after its first object
	defer cancel()
	for oi := range b.c.ListObjects(ctx, l.bucket, minio.ListObjectsOptions{Prefix: l.prefix(), Recursive: true, MaxKeys: 1}) {
		if oi.Err != nil {
			return false, oi.Err
		}
		return true, nil
	}
	return false, nil
}

// isObject reports whether an object is at l.
func (b *Backend) isObject(ctx context.Context, l loc) (bool, error) {
	_, err := b.c.StatObject(ctx, l.bucket, l.key, minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if err = classify(err); errors.Is(err, backend.ErrNotFound) {
		return false, nil
	}
	return false, err
}

// List lists a directory: the buckets at the root, else the objects
// below a prefix, one level (with "/" as the delimiter: the prefixes
// one level down are the directories) or all of them (each directory
// between the prefix and an object listed once).
func (b *Backend) List(ctx context.Context, p string, recursive bool) ([]backend.FileInfo, error) {
	l, err := split(p)
	if err != nil {
		return nil, err
	}
	if l.bucket == "" {
		return b.listBuckets(ctx, recursive)
	}
	out, err := b.list(ctx, l, recursive)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 && l.key != "" {
		// Nothing below: a file, or nothing at all (a directory
		// without objects does not exist).
		fi, err := b.Stat(ctx, p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir {
			return nil, fmt.Errorf("s3: list %s: %w: a file, not a directory", l.path(), backend.ErrInvalid)
		}
	}
	if len(out) == 0 && l.key == "" {
		if _, err := b.Stat(ctx, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *Backend) listBuckets(ctx context.Context, recursive bool) ([]backend.FileInfo, error) {
	bs, err := b.c.ListBuckets(ctx)
	if err != nil {
		return nil, fail("list", loc{}, err)
	}
	var out []backend.FileInfo
	for _, bi := range bs {
		l := loc{bucket: bi.Name}
		out = append(out, backend.FileInfo{Path: l.path(), IsDir: true})
		if recursive {
			below, err := b.list(ctx, l, true)
			if err != nil {
				return nil, err
			}
			out = append(out, below...)
		}
	}
	return out, nil
}

// list lists what is below l (nothing if l is a file or missing).
func (b *Backend) list(ctx context.Context, l loc, recursive bool) ([]backend.FileInfo, error) {
	prefix := l.prefix()
	var out []backend.FileInfo
	dirs := map[string]bool{}
	addDir := func(key string) {
		if key != "" && !dirs[key] {
			dirs[key] = true
			out = append(out, backend.FileInfo{Path: loc{l.bucket, key}.path(), IsDir: true})
		}
	}
	for oi := range b.c.ListObjects(ctx, l.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: recursive}) {
		if oi.Err != nil {
			return nil, fail("list", l, oi.Err)
		}
		rel := strings.TrimPrefix(oi.Key, prefix)
		if rel == "" {
			continue // l's own directory marker
		}
		if recursive {
			// Every directory between the prefix and the object.
			for i := range len(rel) {
				if rel[i] == '/' {
					addDir(prefix + rel[:i])
				}
			}
		}
		if strings.HasSuffix(rel, "/") {
			// A common prefix (one level) or a directory marker.
			addDir(prefix + strings.TrimSuffix(rel, "/"))
			continue
		}
		out = append(out, backend.FileInfo{Path: loc{l.bucket, oi.Key}.path(), Size: oi.Size, ModTime: oi.LastModified})
	}
	return out, nil
}

// OpenRange reads n bytes at off (n < 0: to the end) by a ranged GET.
func (b *Backend) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	l, err := object(p)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("s3: read %s: %w: offset %d", l.path(), backend.ErrInvalid, off)
	}
	if n == 0 || (n < 0 && off > 0) {
		// Nothing to read, or a range to the end that may start at it:
		// S3 refuses an empty range, so the size decides.
		oi, err := b.c.StatObject(ctx, l.bucket, l.key, minio.StatObjectOptions{})
		if err != nil {
			return nil, fail("read", l, err)
		}
		if off > oi.Size {
			return nil, fmt.Errorf("s3: read %s: %w: offset %d past the end (%d bytes)", l.path(), backend.ErrInvalid, off, oi.Size)
		}
		if n == 0 || off == oi.Size {
			return io.NopCloser(strings.NewReader("")), nil
		}
	}
	var opts minio.GetObjectOptions
	switch {
	case n > 0:
		err = opts.SetRange(off, off+n-1)
	case off > 0:
		err = opts.SetRange(off, 0) // bytes=off-
	}
	if err != nil {
		return nil, fmt.Errorf("s3: read %s: %w: %w", l.path(), backend.ErrInvalid, err)
	}
	obj, err := b.c.GetObject(ctx, l.bucket, l.key, opts)
	if err != nil {
		return nil, fail("read", l, err)
	}
	// GetObject sends its request on first use: Stat sends it now, so
	// that a missing object is this call's error.
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		return nil, fail("read", l, err)
	}
	return obj, nil
}

// partSize is the part size of an upload of n bytes: o.PartSize, or
// larger if n would need more than S3's 10,000 parts (rounded up to a
// MiB).
func (b *Backend) partSize(n int64) int64 {
	ps := b.o.PartSize
	if need := (n + maxParts - 1) / maxParts; need > ps {
		ps = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return min(ps, maxPartSize)
}

// WriteAt uploads the object at p whole: off must be 0 and r must give
// all n bytes (backend.WholeWriter). Objects larger than a part are sent
// as a multipart upload with Threads parts in flight; each carries its
// CRC-32C, and the object gets the full-object CRC-32C the parts
// combine into, so that Checksum need not read it back.
func (b *Backend) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	l, err := object(p)
	if err != nil {
		return err
	}
	if off != 0 || n < 0 {
		return fmt.Errorf("s3: write %s: %w: %d bytes at offset %d; S3 objects are written whole, from offset 0", l.path(), backend.ErrInvalid, n, off)
	}
	if err := b.notDir(ctx, l, "write"); err != nil {
		return err
	}
	ps := b.partSize(n)
	opts := minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    uint64(ps),
		NumThreads:  uint(b.o.Threads),
		// Parts are read from r one after the other into Threads
		// buffers and uploaded in parallel: r need not be an
		// io.ReaderAt, and is read once.
		ConcurrentStreamParts: true,
		AutoChecksum:          minio.ChecksumFullObjectCRC32C,
		// Each part's CRC-32C already lets the server check its bytes;
		// a SHA-256 of every part for the signature as well (what
		// minio-go does over plain HTTP) would take a core of its own
		// at 10 Gb/s.
		DisableContentSha256: true,
	}
	if n <= ps {
		opts.ConcurrentStreamParts = false
	}
	_, err = b.c.PutObject(ctx, l.bucket, l.key, &exact{r: r, left: n}, n, opts)
	if err != nil {
		return fail("write", l, err)
	}
	return nil
}

// errShort: the reader of a write ended before its n bytes.
var errShort = errors.New("the reader ended before the object's last byte")

// exact reads exactly n bytes of r: fewer are errShort, so that an
// upload of a short reader fails (and is aborted) instead of storing a
// short object. Not io.ErrUnexpectedEOF: minio-go's parallel uploader
// takes that (from io.ReadFull) for the end of the last part.
type exact struct {
	r    io.Reader
	left int64
}

func (e *exact) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF {
		if e.left > 0 {
			return n, errShort
		}
		err = nil
	}
	return n, err
}

// notDir fails with ErrInvalid if l is a directory (objects are below
// it): S3 would store an object beside them, which no file system
// could copy back.
func (b *Backend) notDir(ctx context.Context, l loc, op string) error {
	dir, err := b.hasBelow(ctx, l)
	if err != nil {
		return fail(op, l, err)
	}
	if dir {
		return fmt.Errorf("s3: %s %s: %w: a directory (objects are below it)", op, l.path(), backend.ErrInvalid)
	}
	return nil
}

// Truncate creates an empty object (size 0); any other size is
// ErrInvalid, since objects are written whole (the engine never
// allocates a backend.WholeWriter's files).
func (b *Backend) Truncate(ctx context.Context, p string, size int64) error {
	l, err := object(p)
	if err != nil {
		return err
	}
	if size != 0 {
		return fmt.Errorf("s3: truncate %s: %w: size %d; S3 objects are written whole, only an empty one can be made", l.path(), backend.ErrInvalid, size)
	}
	return b.WriteAt(ctx, p, 0, strings.NewReader(""), 0)
}

// Sync does nothing: an object exists only once its upload completed,
// and then durably (as the server's PUT promises).
func (b *Backend) Sync(ctx context.Context, p string) error {
	_, err := object(p)
	return err
}

// Rename copies from to to on the server (CopyObject, or for objects
// over 5 GiB ComposeObject's part-by-part copy), then deletes from. It
// renames objects only: a directory would be a copy of every object
// below it, neither quick nor atomic.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	fl, err := object(from)
	if err != nil {
		return err
	}
	tl, err := object(to)
	if err != nil {
		return err
	}
	oi, err := b.c.StatObject(ctx, fl.bucket, fl.key, minio.StatObjectOptions{})
	if err != nil {
		err = classify(err)
		if errors.Is(err, backend.ErrNotFound) {
			if dir, derr := b.hasBelow(ctx, fl); derr == nil && dir {
				return fmt.Errorf("s3: rename %s: %w: a directory; only objects are renamed", fl.path(), backend.ErrInvalid)
			}
		}
		return fail("rename", fl, err)
	}
	if fl == tl {
		return nil
	}
	if err := b.notDir(ctx, tl, "rename onto"); err != nil {
		return err
	}
	src := minio.CopySrcOptions{Bucket: fl.bucket, Object: fl.key, MatchETag: oi.ETag}
	dst := minio.CopyDestOptions{Bucket: tl.bucket, Object: tl.key}
	if oi.Size > maxCopy {
		_, err = b.c.ComposeObject(ctx, dst, src)
	} else {
		_, err = b.c.CopyObject(ctx, dst, src)
	}
	if err != nil {
		return fmt.Errorf("s3: rename %s to %s: copy: %w", fl.path(), tl.path(), classify(err))
	}
	if err := b.c.RemoveObject(ctx, fl.bucket, fl.key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("s3: rename %s to %s: copied, but removing the source: %w", fl.path(), tl.path(), classify(err))
	}
	return nil
}

// Remove deletes an object. A directory is removed only if empty, and an
// empty directory does not exist in S3: the only objects it can hold are
// its own directory marker, which goes; any other is ErrExist.
func (b *Backend) Remove(ctx context.Context, p string) error {
	l, err := object(p)
	if err != nil {
		return err
	}
	ok, err := b.isObject(ctx, l)
	if err != nil {
		return fail("remove", l, err)
	}
	if ok {
		if err := b.c.RemoveObject(ctx, l.bucket, l.key, minio.RemoveObjectOptions{}); err != nil {
			return fail("remove", l, err)
		}
		return nil
	}
	var below []string
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for oi := range b.c.ListObjects(lctx, l.bucket, minio.ListObjectsOptions{Prefix: l.prefix(), Recursive: true, MaxKeys: 2}) {
		if oi.Err != nil {
			return fail("remove", l, oi.Err)
		}
		if below = append(below, oi.Key); len(below) == 2 {
			break
		}
	}
	switch {
	case len(below) == 0:
		return fmt.Errorf("s3: remove %s: %w", l.path(), backend.ErrNotFound)
	case slices.Equal(below, []string{l.prefix()}):
		if err := b.c.RemoveObject(ctx, l.bucket, l.prefix(), minio.RemoveObjectOptions{}); err != nil {
			return fail("remove", l, err)
		}
		return nil
	}
	return fmt.Errorf("s3: remove %s: %w: a directory that is not empty", l.path(), backend.ErrExist)
}

// Mkdir makes nothing: S3 has no directories, an object's key makes
// them. It checks only that the bucket exists and that no object is
// where the directory or one of its parents would be (ErrExist), as a
// file system would refuse.
func (b *Backend) Mkdir(ctx context.Context, p string) error {
	l, err := split(p)
	if err != nil {
		return err
	}
	if l.bucket == "" {
		return nil
	}
	ok, err := b.c.BucketExists(ctx, l.bucket)
	if err != nil {
		return fail("mkdir", l, err)
	}
	if !ok {
		return fmt.Errorf("s3: mkdir %s: %w: no bucket %s (buckets are made by the store's administrators)", l.path(), backend.ErrNotFound, l.bucket)
	}
	var levels []loc // the directory and its parents, the bucket's top last
	for k := l.key; k != "" && k != "."; k = path.Dir(k) {
		at := loc{l.bucket, k}
		ok, err := b.isObject(ctx, at)
		if err != nil {
			return fail("mkdir", l, err)
		}
		if ok {
			return fmt.Errorf("s3: mkdir %s: %w: %s is an object", l.path(), backend.ErrExist, at.path())
		}
		levels = append(levels, at)
	}
	if !b.o.DirMarkers {
		return nil
	}
	// From the top down, so that a directory exists only once its
	// parents do.
	for _, at := range slices.Backward(levels) {
		dir, err := b.hasBelow(ctx, at)
		if err != nil {
			return fail("mkdir", at, err)
		}
		if dir {
			continue
		}
		// An empty marker may be put again: one more try after a
		// transport failure (versitygw was seen to drop such a PUT's
		// connection now and then, "unexpected EOF").
		for try := 0; try < 2; try++ {
			if _, err = b.c.PutObject(ctx, at.bucket, at.prefix(), strings.NewReader(""), 0, minio.PutObjectOptions{ContentType: "application/x-directory"}); err == nil || ctx.Err() != nil {
				break
			}
			var re minio.ErrorResponse
			if errors.As(err, &re) && re.StatusCode > 0 && re.StatusCode < 500 {
				break // the server answered: a refusal, not a dropped connection
			}
		}
		if err != nil {
			return fail("mkdir", at, err)
		}
	}
	return nil
}

// Checksum is the object's checksum with algo. A CRC-32C the server
// keeps for the whole object (a full-object checksum, which this backend
// asks for on every upload) is taken from a HEAD; everything else is
// computed by reading the object. An ETag is never taken for an MD5: a
// multipart upload's is not one, nor is an encrypted object's.
func (b *Backend) Checksum(ctx context.Context, p, algo string) (string, error) {
	l, err := object(p)
	if err != nil {
		return "", err
	}
	h, err := backend.NewHash(algo)
	if err != nil {
		return "", fmt.Errorf("s3: checksum %s: %w", l.path(), err)
	}
	if algo == "crc32c" {
		var so minio.StatObjectOptions
		so.Checksum = true
		oi, err := b.c.StatObject(ctx, l.bucket, l.key, so)
		if err != nil {
			return "", fail("checksum", l, err)
		}
		if sum, ok := fullObjectCRC32C(oi); ok {
			return sum, nil
		}
	}
	rc, err := b.OpenRange(ctx, p, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if _, err := io.Copy(h, rc); err != nil {
		return "", fmt.Errorf("s3: checksum %s: reading: %w", l.path(), classify(err))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fullObjectCRC32C is the object's CRC-32C as lowercase hex, if the
// server gave one of the whole object (not a composite of its parts').
func fullObjectCRC32C(oi minio.ObjectInfo) (string, bool) {
	if oi.ChecksumCRC32C == "" || !strings.EqualFold(oi.ChecksumMode, "FULL_OBJECT") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(oi.ChecksumCRC32C)
	if err != nil || len(raw) != 4 {
		return "", false
	}
	return hex.EncodeToString(raw), true
}
