package s3

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// Schemes: s3:// reaches the endpoint by HTTPS (port 443 by default),
// s3+http:// by plain HTTP (port 80 by default), for a store inside a
// site or a test server.
const (
	Scheme     = "s3"
	SchemeHTTP = "s3+http"
)

// ParseURL splits an S3 URL, s3://host[:port]/bucket/key or
// s3+http://host[:port]/bucket/key, into the Options of its endpoint
// (host:port, TLS, path-style addressing but on AWS) and the backend
// path /bucket/key. The URL's host is always the endpoint, never a
// bucket: a storage server is registered by scheme://host:port, and
// every path below it is a bucket and a key (on AWS:
// s3://s3.eu-west-1.amazonaws.com/bucket/key). A URL may carry the
// region as ?region=NAME; no other query, nor a user (credentials come
// from backend.OpenOptions.Credential).
func ParseURL(raw string) (Options, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Options{}, "", fmt.Errorf("%w: s3 URL %q: %w", backend.ErrInvalid, raw, err)
	}
	var o Options
	port := "443"
	switch u.Scheme {
	case Scheme:
		o.TLS = true
	case SchemeHTTP:
		port = "80"
	default:
		return Options{}, "", fmt.Errorf("%w: %q is not an s3:// or s3+http:// URL", backend.ErrInvalid, raw)
	}
	switch {
	case u.Hostname() == "":
		return Options{}, "", fmt.Errorf("%w: s3 URL %q names no endpoint (want %s://host[:port]/bucket/key)", backend.ErrInvalid, raw, u.Scheme)
	case u.User != nil:
		return Options{}, "", fmt.Errorf("%w: s3 URL %q carries a user: give the access key as the credential", backend.ErrInvalid, raw)
	case u.Fragment != "":
		return Options{}, "", fmt.Errorf("%w: s3 URL %q has a fragment", backend.ErrInvalid, raw)
	}
	for k, v := range u.Query() {
		if k != "region" || len(v) != 1 {
			return Options{}, "", fmt.Errorf("%w: s3 URL %q: unknown query parameter %q (only region=)", backend.ErrInvalid, raw, k)
		}
		o.Region = v[0]
	}
	if u.Port() != "" {
		port = u.Port()
	}
	o.Endpoint = net.JoinHostPort(u.Hostname(), port)
	// Virtual-host addressing needs a DNS name per bucket, which only
	// AWS is sure to have.
	o.PathStyle = !strings.HasSuffix(strings.ToLower(u.Hostname()), ".amazonaws.com")
	p := u.Path
	if p == "" {
		p = "/"
	}
	return o, p, nil
}

// Open implements backend.OpenFunc for s3:// and s3+http:// URLs (see
// ParseURL). A credential's Username is the access key ID, its Password
// the secret key and its Token a session token; an X.509 proxy cannot be
// presented (ErrInvalid). Without a credential requests are anonymous.
// The backend is rooted at the endpoint: Opened.Path is /bucket/key.
func Open(ctx context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
	opts, p, err := ParseURL(loc)
	if err != nil {
		return backend.Opened{}, err
	}
	if c := o.Credential; !c.Empty() {
		if c.X509Proxy != "" {
			return backend.Opened{}, fmt.Errorf("s3: %s: %w: S3 takes an access key and secret key (and a session token), not an X.509 proxy", loc, backend.ErrInvalid)
		}
		if c.Username == "" || c.Password == "" {
			return backend.Opened{}, fmt.Errorf("s3: %s: %w: the credential needs both the access key ID (username) and the secret key (password)", loc, backend.ErrInvalid)
		}
		opts.AccessKey, opts.SecretKey, opts.SessionToken = c.Username, c.Password, c.Token
	}
	if o.HTTPClient != nil {
		opts.Transport = o.HTTPClient.Transport
	}
	b, err := New(opts)
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Close: b.Close}, nil
}
