package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/client"
)

// joiner registers an agent with a server and keeps it alive there. With
// several servers (on one database), it talks to one at a time and moves
// to the next when that one stops answering: any of them accepts the
// registration and heartbeats, which reach the others through the store.
type joiner struct {
	servers []string
	token   string
	info    api.AgentIn
	log     *slog.Logger
	cur     int // index of the server in use
	// health, once set, says whether the agent can serve: heartbeats
	// stop while it cannot.
	health atomic.Pointer[func() error]
}

// parseServers splits --server's comma-separated list, and checks every
// URL now: join stops at the first server that answers, and a bad URL
// found later by heartbeats (failing over to it) would end them, leaving
// the agent up but silent, marked down by the servers.
func parseServers(v string) ([]string, error) {
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

func (j *joiner) server() string { return j.servers[j.cur%len(j.servers)] }

// next moves to the next server in the list.
func (j *joiner) next() { j.cur = (j.cur + 1) % len(j.servers) }

// join registers, retrying while no server is reachable (agents often
// start before their servers) or while its name is held by a live agent
// elsewhere (409); any other refusal (bad join token, bad name) is final.
func (j *joiner) join(ctx context.Context) (api.JoinedOut, error) {
	wait := 500 * time.Millisecond
	for {
		for range j.servers {
			c, err := client.New(j.server(), j.token, &http.Client{Timeout: 10 * time.Second})
			if err != nil {
				return api.JoinedOut{}, fmt.Errorf("agent: %w", err)
			}
			out, err := c.Register(ctx, j.info)
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
				j.log.Warn("the server holds this agent's name for a live agent; retrying", "server", j.server(), "err", err)
				break
			}
			if errors.As(err, &e) && e.Status < 500 {
				return out, fmt.Errorf("agent: the server refused the registration: %w", err)
			}
			j.log.Warn("cannot reach the server; trying the next", "server", j.server(), "err", err)
			j.next()
		}
		j.log.Warn("no server reachable yet; retrying", "servers", strings.Join(j.servers, ","), "in", wait)
		select {
		case <-ctx.Done():
			return api.JoinedOut{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// heartbeats tells a server every period that the agent is alive, until
// ctx ends, moving to the next server when one fails.
func (j *joiner) heartbeats(ctx context.Context, period time.Duration) {
	if period <= 0 {
		period = 2 * time.Second
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	t := time.NewTicker(period)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h := j.health.Load(); h != nil {
			if err := (*h)(); err != nil {
				if !failing {
					j.log.Error("not sending heartbeats: this agent cannot serve (restart it once its root is back)", "err", err)
					failing = true
				}
				continue
			}
		}
		var err error
		// One pass over the list per period: a dead server costs at
		// most its timeout before the next is tried.
		for range j.servers {
			var c *client.Client
			if c, err = client.New(j.server(), j.token, hc); err != nil {
				j.log.Error("heartbeats", "err", err)
				return
			}
			if err = c.Heartbeat(ctx, j.info); err == nil || ctx.Err() != nil {
				break
			}
			var e *client.Error
			if errors.As(err, &e) && e.Status < 500 {
				break // refused, not unreachable: another server says the same
			}
			j.log.Warn("heartbeat failed; trying the next server", "server", j.server(), "err", err)
			j.next()
		}
		switch {
		case err != nil && !failing:
			j.log.Warn("heartbeats fail on every server", "err", err)
			failing = true
		case err == nil && failing:
			j.log.Info("heartbeats reach a server again", "server", j.server())
			failing = false
		}
	}
}

// advertiseURL is the agent's URL for others: --advertise, or the
// listening address (a wildcard host replaced by this host's name).
func advertiseURL(flag string, addr net.Addr, tls bool) string {
	if flag != "" {
		return flag
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// secretArg returns a flag's value, or the content of FILE for "@FILE".
func secretArg(v string) (string, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return v, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
