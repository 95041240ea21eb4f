package webdav

import (
	"context"
	"fmt"
	"net/url"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for davs://, https://, dav:// and
// http:// URLs: davs://host[:port]/path (port 443 by default), dav:// the
// same over plain HTTP (port 80); davs and dav are gfal2's and davix's
// names for https and http. The backend is rooted at the server's
// root; the location's path is Opened.Path. Nothing is sent until the
// first request.
//
// A credential's Token is presented as a bearer token; a Username with a
// Password logs in by HTTP basic authentication, over TLS only (a
// plain-HTTP URL with a password is refused with backend.ErrInvalid,
// rather than the password sent in the clear). An X.509 proxy, or a user
// name without a password, is refused with backend.ErrInvalid too: this
// backend cannot present them.
func Open(ctx context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return backend.Opened{}, fmt.Errorf("webdav: %w: %v", backend.ErrInvalid, err)
	}
	opts := Options{Client: o.HTTPClient}
	if c := o.Credential; !c.Empty() {
		switch {
		case c.X509Proxy != "":
			return backend.Opened{}, fmt.Errorf("webdav: %s: %w: the HTTP backend cannot present an X.509 proxy (use a token)", loc, backend.ErrInvalid)
		case c.Token != "" && (c.Username != "" || c.Password != ""):
			return backend.Opened{}, fmt.Errorf("webdav: %s: %w: a credential with both a token and a login", loc, backend.ErrInvalid)
		case c.Token != "":
			opts.Token = backend.StaticToken(c.Token)
		case c.Username == "" || c.Password == "":
			return backend.Opened{}, fmt.Errorf("webdav: %s: %w: HTTP basic authentication needs a user name and a password", loc, backend.ErrInvalid)
		default:
			opts.Username, opts.Password = c.Username, c.Password
		}
	}
	root := *u
	root.Path, root.RawPath = "", ""
	b, err := New(root.String(), opts)
	if err != nil {
		return backend.Opened{}, err
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Tokens: opts.Token, Close: b.Close}, nil
}
