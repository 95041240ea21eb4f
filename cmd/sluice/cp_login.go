package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/pki"
	"github.com/sluice-dtn/sluice/wire"
)

// serviceName reports whether loc names an endpoint of the service,
// sluice://NAME/path, and returns NAME and the path as written. An agent's
// own address always has a port (sluice://host:port/path: agents have no
// default port), so a sluice URL without one can only be a name.
func serviceName(loc string) (name, rest string, ok bool) {
	scheme, after, found := strings.Cut(loc, "://")
	if !found || (scheme != "sluice" && scheme != "sluices") {
		return "", "", false
	}
	name, p, _ := strings.Cut(after, "/")
	if name == "" || strings.ContainsAny(name, ":[]@") {
		return "", "", false
	}
	return name, "/" + p, true
}

// service is the server `sluice cp` asks for data tokens when a location
// names one of its endpoints: the login's server and API token (flags,
// then SLUICE_SERVER and SLUICE_TOKEN, then what `sluice login` saved).
func (f *cpFlags) service() (*client.Client, error) {
	if f.svcClient != nil {
		return f.svcClient, nil
	}
	cfg, err := f.svc.resolve()
	if err != nil {
		return nil, err
	}
	if cfg.Server == "" || cfg.Token == "" {
		return nil, errors.New("no login: run `sluice login` (or set SLUICE_SERVER and SLUICE_TOKEN, or give --server and --api-token)")
	}
	tok, err := secretArg(cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("--api-token: %w", err)
	}
	if isDataToken(tok) {
		return nil, errors.New("the API token is a data token (an agent's, from `sluice data-token`): endpoint names need your API token (`sluice login`); give data tokens with --token, for agents named by host:port")
	}
	hc, err := httpClient(cfg.CA)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	if f.svcClient, err = client.New(cfg.Server, tok, hc); err != nil {
		return nil, err
	}
	return f.svcClient, nil
}

// isDataToken tells a data token (PAYLOAD.SIGNATURE, minted with an
// agent's key) from an API token (sk_..., from the server).
func isDataToken(tok string) bool {
	return strings.Contains(tok, ".") && !strings.HasPrefix(tok, "sk_") && !strings.HasPrefix(tok, "sj_")
}

// defaultDataToken is cp's --token when none is given: $SLUICE_DATA_TOKEN,
// or $SLUICE_TOKEN when it holds a data token (as it did before the
// service's commands used it for the API token).
func defaultDataToken() string {
	if t := os.Getenv("SLUICE_DATA_TOKEN"); t != "" {
		return t
	}
	if t := os.Getenv("SLUICE_TOKEN"); isDataToken(t) {
		return t
	}
	return ""
}

// serviceAgent resolves sluice://NAME/path through the service: it asks
// for a data token for the path (checked against the user's access rules
// as a job's file would be) and returns the agent's own address for the
// path, and the token source, which asks again when a quarter of the
// token's life is left.
func (f *cpFlags) serviceAgent(ctx context.Context, loc, name, rest string, write bool) (string, backend.TokenSource, error) {
	cl, err := f.service()
	if err != nil {
		return "", nil, fmt.Errorf("%s names the service's endpoint %q: %w", loc, name, err)
	}
	g := &grantTokens{ctx: ctx, cl: cl, url: "sluice://" + name + rest, write: write, now: time.Now}
	t, err := g.fetch()
	if err != nil {
		return "", nil, err
	}
	return t.Agent + rest, g.Token, nil
}

// grantTokens is the data tokens of one location named through the
// service.
type grantTokens struct {
	ctx   context.Context
	cl    *client.Client
	url   string
	write bool
	now   func() time.Time

	mu       sync.Mutex
	tok      string
	got, exp time.Time
}

// fetch asks the server for a fresh token.
func (g *grantTokens) fetch() (wire.DataTokenOut, error) {
	ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
	defer cancel()
	t, err := g.cl.DataToken(ctx, g.url, g.write)
	if err != nil {
		verb := "read"
		if g.write {
			verb = "write"
		}
		return t, fmt.Errorf("asking the server for a token to %s %s: %w", verb, g.url, err)
	}
	g.tok, g.got, g.exp = t.Token, g.now(), t.Expires
	return t, nil
}

// Token is a backend.TokenSource: the token held, or a new one once
// three quarters of its life have passed.
func (g *grantTokens) Token() (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); g.tok == "" || now.After(g.exp.Add(-g.exp.Sub(g.got)/4)) {
		if _, err := g.fetch(); err != nil {
			return "", err
		}
	}
	return g.tok, nil
}

// agentTransport is cp's transport to agents: TLS verified against the
// system's roots and the site's authority, if one is given (--ca,
// SLUICE_CA, or what `sluice login` saved).
func (f *cpFlags) agentTransport() (*http.Transport, error) {
	// A login file that cannot be read stops only the copies that need
	// the login (service): a copy without one goes on, with the CA of
	// --ca or SLUICE_CA.
	cfg, err := f.svc.resolve()
	if err != nil {
		cfg = f.svc
		if cfg.CA == "" {
			cfg.CA = os.Getenv("SLUICE_CA")
		}
	}
	tr := newCpTransport()
	if cfg.CA == "" {
		return tr, nil
	}
	tlsCfg, err := pki.ClientTLS(cfg.CA)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	tr.TLSClientConfig = tlsCfg
	return tr, nil
}
