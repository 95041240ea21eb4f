package root

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// Open implements backend.OpenFunc for root:// and xroot:// URLs: it
// logs in to the server before returning. A credential's Username is the
// name the client logs in with and presents to a server that requires
// unix authentication (Options.Username, UnixAuth); a credential that also
// holds what this backend cannot present (a password, a token, an X.509
// proxy) is refused with backend.ErrInvalid rather than the server being
// reached without it.
func Open(ctx context.Context, loc string, o backend.OpenOptions) (backend.Opened, error) {
	addr, p, err := ParseURL(loc)
	if err != nil {
		return backend.Opened{}, err
	}
	opts, err := credentialOptions(o.Credential)
	if err != nil {
		return backend.Opened{}, fmt.Errorf("root: %s: %w", loc, err)
	}
	b, err := New(ctx, addr, opts)
	if err != nil {
		return backend.Opened{}, err
	}
	return backend.Opened{Backend: b, Path: p, URL: loc, Close: b.Close}, nil
}

// credentialOptions turns a credential into Options: its user name, and
// an error wrapping ErrInvalid that names every part of it this backend
// cannot present.
func credentialOptions(c *backend.Credential) (Options, error) {
	if c.Empty() {
		return Options{}, nil
	}
	var cannot []string
	if c.Password != "" {
		cannot = append(cannot, "a password (XRootD's unix authentication has none)")
	}
	if c.Token != "" {
		cannot = append(cannot, "a token (neither ztn authentication nor authz opaque data is implemented)")
	}
	if c.X509Proxy != "" {
		cannot = append(cannot, "an X.509 proxy (go-hep's client has no GSI authentication)")
	}
	if len(cannot) > 0 {
		return Options{}, fmt.Errorf("%w: the XRootD backend presents only a user name, not %s", backend.ErrInvalid, strings.Join(cannot, ", nor "))
	}
	if strings.ContainsAny(c.Username, " \x00\n") {
		return Options{}, fmt.Errorf("%w: user name %q holds a space, NUL or newline", backend.ErrInvalid, c.Username)
	}
	if c.Username == "" {
		return Options{}, nil
	}
	return Options{Username: c.Username, UnixAuth: true}, nil
}
