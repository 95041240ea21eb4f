package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
)

// storageIdle is how long an opened storage server stays open unused: a
// run's ranges come a few seconds apart at most, and each open is a login
// of several round trips (and, for GridFTP, a pool of logged-in control
// connections the next range reuses).
const storageIdle = 2 * time.Minute

// storageCache keeps the storage servers the agent has opened, one per
// server, access mode and credential, so that the ranges of a run do not
// each log in anew.
type storageCache struct {
	mu sync.Mutex
	m  map[string]*openStorage
}

type openStorage struct {
	o     backend.Opened
	users int
	last  time.Time
}

// get opens (or reuses) the server of raw, a storage URL, and returns the
// backend, the path raw names on it, and the release to call when done.
func (c *storageCache) get(ctx context.Context, reg *backend.Registry, raw string, write bool, cred *backend.Credential) (backend.Backend, string, func(), error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: storage URL %q: %w", backend.ErrInvalid, raw, err)
	}
	base := u.Scheme + "://" + u.Host
	p := "/" + strings.TrimLeft(u.Path, "/")
	h := sha256.New()
	json.NewEncoder(h).Encode(cred) // never kept: only its digest names the entry
	key := fmt.Sprintf("%s %v %s", base, write, hex.EncodeToString(h.Sum(nil)))
	now := time.Now()
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*openStorage{}
	}
	for k, e := range c.m {
		if e.users == 0 && now.Sub(e.last) > storageIdle {
			delete(c.m, k)
			if e.o.Close != nil {
				go e.o.Close()
			}
		}
	}
	e := c.m[key]
	if e != nil {
		e.users++
		c.mu.Unlock()
		return e.o.Backend, p, c.release(e), nil
	}
	c.mu.Unlock()
	o, err := reg.Open(ctx, base+"/", backend.OpenOptions{Write: write, Credential: cred})
	if err != nil {
		return nil, "", nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		// Opened meanwhile by another request: use that one.
		if o.Close != nil {
			go o.Close()
		}
		e.users++
		return e.o.Backend, p, c.release(e), nil
	}
	e = &openStorage{o: o, users: 1}
	c.m[key] = e
	return o.Backend, p, c.release(e), nil
}

func (c *storageCache) release(e *openStorage) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			e.users--
			e.last = time.Now()
			c.mu.Unlock()
		})
	}
}

// closeAll closes every server opened.
func (c *storageCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		delete(c.m, k)
		if e.o.Close != nil {
			e.o.Close()
		}
	}
}
