package s3

import (
	"testing"

	"github.com/sluice-dtn/sluice/backend/backendtest"
	"github.com/sluice-dtn/sluice/internal/storagetest"
)

// TestConformance runs the backend conformance suite against a real S3
// server (versitygw on a temporary directory, each object a file there),
// the backend rooted at the endpoint and the suite in the server's
// bucket. With directory markers: without them an empty directory does
// not exist, which the suite has no declaration for yet (TestNoMarkers
// checks that behaviour).
func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Fixture{
		New: func(t *testing.T) backendtest.Env {
			srv := storagetest.S3(t, storagetest.S3Options{})
			b := newBackend(t, srv, Options{DirMarkers: true})
			return backendtest.Env{B: b, Dir: "/" + srv.Bucket, Local: srv.Dir}
		},
		Lacks: backendtest.Lacks{
			RangeChecksummer: "S3 computes no checksum of a byte range",
			ExistingWriter:   "objects are written whole (backend.WholeWriter)",
			NoReplaceRenamer: "a rename is a copy, and a conditional copy (If-None-Match) is not offered by every server",
			ModTimeSetter:    "an object's time is its upload's; S3 cannot set it",
			Permissions:      "not tested here: it needs a second account and a bucket policy; TestErrors checks that refusals are ErrPermission",
		},
	})
}

// newBackend is a backend of srv with its root credentials, closed by the
// test's cleanup.
func newBackend(t testing.TB, srv *storagetest.S3Server, o Options) *Backend {
	t.Helper()
	o.Endpoint, o.AccessKey, o.SecretKey, o.PathStyle = srv.Endpoint, srv.AccessKey, srv.SecretKey, true
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
