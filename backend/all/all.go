// Package all knows every storage backend Sluice has: Registry returns
// them registered by URL scheme. Adding a backend is a folder under
// backend/ with an Open function, and one line here.
package all

import (
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/gridftp"
	"github.com/sluice-dtn/sluice/backend/root"
	"github.com/sluice-dtn/sluice/backend/s3"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/backend/webdav"
)

// Registry returns a registry of every backend.
func Registry() *backend.Registry {
	r := backend.NewRegistry()
	r.Register(file.Open, "file")
	r.Register(sluice.Open, "sluice", "sluices")
	r.Register(gridftp.Open, "ftp", "gsiftp")
	r.Register(root.Open, "root", "xroot")
	r.Register(s3.Open, s3.Scheme, s3.SchemeHTTP)
	r.Register(webdav.Open, "davs", "https", "dav", "http")
	return r
}

// Storage returns a registry of the backends of storage servers only
// (GridFTP, XRootD, S3, WebDAV): what an agent may open for the service. Local
// files and other agents are not in it, so no request can make an agent
// open a path outside its root or another agent through it.
func Storage() *backend.Registry {
	r := backend.NewRegistry()
	r.Register(gridftp.Open, "ftp", "gsiftp")
	r.Register(root.Open, "root", "xroot")
	r.Register(s3.Open, s3.Scheme, s3.SchemeHTTP)
	r.Register(webdav.Open, "davs", "https", "dav", "http")
	return r
}
