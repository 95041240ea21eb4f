package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/policy"
	"github.com/sluice-dtn/sluice/wire"
)

// Allocator is one allocation of streams on a pair from the server's
// Policy Service, as a transfer client holds it: Request once, Update
// every few files (which renews the lease), Release at the end. It
// implements copyjob.Allocator, the adaptive client's view (`sluice cp
// --policy-server`).
type Allocator struct {
	c        *Client
	src, dst string
	name     string

	mu  sync.Mutex
	id  string
	max int // the pair's per-client limit, as last heard (0: not said)
}

// NewAllocator returns an allocator for transfers from src to dst
// (endpoint names, as `sluice endpoints` lists them) under the client name
// name, which tells the allocations of one user's clients apart.
func (c *Client) NewAllocator(src, dst, name string) *Allocator {
	return &Allocator{c: c, src: src, dst: dst, name: name}
}

// ID is the allocation's ID ("" before Request).
func (a *Allocator) ID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.id
}

// Request asks for a new allocation of at most want streams (0: as many
// as the policy gives). The answer may be 0 streams when the pair's pool
// is exhausted; Update asks again.
func (a *Allocator) Request(ctx context.Context, want int) (int, time.Time, error) {
	out, err := a.c.RequestAllocation(ctx, wire.AllocationIn{Source: a.src, Destination: a.dst, Client: a.name, Streams: want})
	if err != nil {
		return 0, time.Time{}, err
	}
	a.mu.Lock()
	a.id, a.max = out.ID, out.MaxStreams
	a.mu.Unlock()
	return out.Streams, out.Expires, nil
}

// MaxStreams is the most streams the allocation can hold (the pair's
// per-client limit) as the last answer said; 0 if none said.
func (a *Allocator) MaxStreams() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.max
}

// Update renews the allocation and asks for up to want streams in total.
func (a *Allocator) Update(ctx context.Context, want int) (int, time.Time, error) {
	id := a.ID()
	if id == "" {
		return 0, time.Time{}, errors.New("allocator: update before request")
	}
	out, err := a.c.UpdateAllocation(ctx, id, wire.AllocationUpdateIn{Streams: want, Client: a.name})
	if err != nil {
		// Gone (the lease ran out in a long outage, or an
		// administrator ended it): the caller asks for a new one.
		return 0, time.Time{}, gone(err)
	}
	a.mu.Lock()
	a.max = out.MaxStreams
	a.mu.Unlock()
	return out.Streams, out.Expires, nil
}

// Release gives the streams back; releasing twice, or before Request,
// does nothing.
func (a *Allocator) Release(ctx context.Context) error {
	a.mu.Lock()
	id := a.id
	a.id = ""
	a.mu.Unlock()
	if id == "" {
		return nil
	}
	return gone(a.c.ReleaseAllocation(ctx, id, a.name))
}

// gone marks the server's 404 for an allocation as policy.ErrNotFound,
// which the adaptive client acts on (copyjob.Allocator).
func gone(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", policy.ErrNotFound, err)
	}
	return err
}
