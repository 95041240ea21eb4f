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
	"time"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/client"
)

// joiner registers an agent with a server and keeps it alive there.
type joiner struct {
	server, token string
	info          api.AgentIn
	log           *slog.Logger
}

// join registers, retrying while the server is unreachable (agents often
// start before their server); a refusal (bad join token, bad name) is
// final.
func (j joiner) join(ctx context.Context) (api.JoinedOut, error) {
	c, err := client.New(j.server, j.token, nil)
	if err != nil {
		return api.JoinedOut{}, fmt.Errorf("agent: %w", err)
	}
	wait := 500 * time.Millisecond
	for {
		out, err := c.Register(ctx, j.info)
		if err == nil {
			if len(out.Key) < 32 {
				return out, errors.New("agent: the server sent no usable data-token key")
			}
			return out, nil
		}
		var e *client.Error
		if errors.As(err, &e) && e.Status < 500 {
			return out, fmt.Errorf("agent: the server refused the registration: %w", err)
		}
		j.log.Warn("cannot reach the server yet; retrying", "server", j.server, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// heartbeats tells the server every period that the agent is alive, until
// ctx ends.
func (j joiner) heartbeats(ctx context.Context, period time.Duration) {
	if period <= 0 {
		period = 2 * time.Second
	}
	c, err := client.New(j.server, j.token, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		j.log.Error("heartbeats", "err", err)
		return
	}
	t := time.NewTicker(period)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.Heartbeat(ctx, j.info)
		switch {
		case err != nil && !failing:
			j.log.Warn("heartbeat failed", "server", j.server, "err", err)
			failing = true
		case err == nil && failing:
			j.log.Info("heartbeats reach the server again", "server", j.server)
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
