package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/wire"
)

// Joiner registers an agent with a server and keeps it alive there. With
// several servers (on one database), it talks to one at a time and moves
// to the next when that one stops answering: any of them accepts the
// registration and heartbeats, which reach the others through the store.
type Joiner struct {
	Servers []string     // the servers' URLs (see ParseServers)
	Token   string       // the join token
	Info    wire.AgentIn // what the agent reports
	Log     *slog.Logger
	// Transport carries the requests to the servers (nil:
	// http.DefaultTransport); a site's own certificate authority goes
	// in its TLS configuration.
	Transport http.RoundTripper
	cur       int // index of the server in use
	// health, once set, says whether the agent can serve: heartbeats
	// stop while it cannot.
	health atomic.Pointer[func() error]
}

// SetHealth makes heartbeats stop while f fails (Server.Check: the agent
// cannot serve), so that the servers mark the agent down.
func (j *Joiner) SetHealth(f func() error) { j.health.Store(&f) }

// ParseServers splits --server's comma-separated list, and checks every
// URL now: join stops at the first server that answers, and a bad URL
// found later by heartbeats (failing over to it) would end them, leaving
// the agent up but silent, marked down by the servers.
func ParseServers(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, err := client.New(s, "", nil); err != nil {
				return nil, fmt.Errorf("agent: --server: %w", err)
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("agent: --server: no server URL")
	}
	return out, nil
}

// Server is the URL of the server in use.
func (j *Joiner) Server() string { return j.Servers[j.cur%len(j.Servers)] }

// next moves to the next server in the list.
func (j *Joiner) next() { j.cur = (j.cur + 1) % len(j.Servers) }

// Join registers, retrying while no server is reachable (agents often
// start before their servers) or while its name is held by a live agent
// elsewhere (409); any other refusal (bad join token, bad name) is
// final, and so is a round in which every server's certificate failed
// verification (the token never goes to such a server; waiting will not
// change its certificate).
func (j *Joiner) Join(ctx context.Context) (wire.JoinedOut, error) {
	wait := 500 * time.Millisecond
	for {
		var certErr error
		untrusted := 0
		for range j.Servers {
			c, err := client.New(j.Server(), j.Token, &http.Client{Timeout: 10 * time.Second, Transport: j.Transport})
			if err != nil {
				return wire.JoinedOut{}, fmt.Errorf("agent: %w", err)
			}
			out, err := c.Register(ctx, j.Info)
			if err == nil {
				if len(out.Key) < 32 {
					return out, errors.New("agent: the server sent no usable data-token key")
				}
				return out, nil
			}
			var e *client.Error
			if errors.As(err, &e) && e.Status == http.StatusConflict {
				// The name is held by a live agent elsewhere (this
				// agent's previous run at another address, say): it is
				// free once that one has been silent for the heartbeat
				// timeout.
				j.Log.Warn("the server holds this agent's name for a live agent; retrying", "server", j.Server(), "err", err)
				break
			}
			if errors.As(err, &e) && e.Status < 500 {
				return out, fmt.Errorf("agent: the server refused the registration: %w", err)
			}
			if certRefused(err) {
				// Another name's certificate, or an unknown authority's:
				// the next server may have a good one.
				untrusted++
				certErr = fmt.Errorf("agent: the server %s: %w", j.Server(), err)
			}
			j.Log.Warn("cannot reach the server; trying the next", "server", j.Server(), "err", err)
			j.next()
		}
		if untrusted == len(j.Servers) {
			return wire.JoinedOut{}, certErr
		}
		j.Log.Warn("no server reachable yet; retrying", "servers", strings.Join(j.Servers, ","), "in", wait)
		select {
		case <-ctx.Done():
			return wire.JoinedOut{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// Heartbeats tells a server every period that the agent is alive, until
// ctx ends, moving to the next server when one fails (Beat). It logs when
// beats start failing everywhere and when they reach a server again.
func (j *Joiner) Heartbeats(ctx context.Context, period time.Duration) {
	if period <= 0 {
		period = 2 * time.Second
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: j.Transport}
	t := time.NewTicker(period)
	defer t.Stop()
	var failing error
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := j.Beat(ctx, hc)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrUnhealthy) && !errors.Is(failing, ErrUnhealthy):
			j.Log.Error("not sending heartbeats: this agent cannot serve (restart it once its root is back)", "err", err)
		case err != nil && failing == nil:
			j.Log.Warn("heartbeats fail on every server", "err", err)
		case err == nil && failing != nil && !errors.Is(failing, ErrUnhealthy):
			j.Log.Info("heartbeats reach a server again", "server", j.Server())
		}
		failing = err
	}
}

// ErrUnhealthy: the agent cannot serve (SetHealth), so it sends no
// heartbeat, and the servers mark it down.
var ErrUnhealthy = errors.New("agent: cannot serve")

// Beat sends one heartbeat: to the server in use, and on to the next
// while a server cannot be reached or answers with a server error (one
// pass over the list at most: a dead server costs one timeout of hc). It
// stays with a server that refuses the beat (4xx): another would say the
// same. It sends none, and returns an error wrapping ErrUnhealthy, while
// the agent cannot serve.
func (j *Joiner) Beat(ctx context.Context, hc *http.Client) error {
	if h := j.health.Load(); h != nil {
		if err := (*h)(); err != nil {
			return fmt.Errorf("%w: %w", ErrUnhealthy, err)
		}
	}
	var err error
	for range j.Servers {
		var c *client.Client
		if c, err = client.New(j.Server(), j.Token, hc); err != nil {
			return fmt.Errorf("agent: heartbeat: %w", err)
		}
		if err = c.Heartbeat(ctx, j.Info); err == nil || ctx.Err() != nil {
			return err
		}
		var e *client.Error
		if errors.As(err, &e) && e.Status < 500 {
			return err // refused, not unreachable: another server says the same
		}
		j.Log.Warn("heartbeat failed; trying the next server", "server", j.Server(), "err", err)
		j.next()
	}
	return err
}

// certRefused reports whether err is a server certificate that failed
// verification: for another name, by an unknown authority, or invalid.
func certRefused(err error) bool {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}
