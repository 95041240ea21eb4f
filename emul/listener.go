package emul

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener returns ln with connection start-up latency: no Read on an
// accepted connection returns before StartupMs after it was accepted.
// The server reads a request as soon as it accepts the connection, so
// the first request on each connection (and a TLS handshake layered
// above) pays the delay once, and later requests on the same connection
// do not: the cost of connecting and authenticating to a remote DTN that
// connection reuse saves. The delay ignores read deadlines (it is meant
// to be short) but ends early if the connection is closed.
//
// With a nil s or no StartupMs, Listener returns ln.
func (s *Shaper) Listener(ln net.Listener) net.Listener {
	if s == nil || s.cfg.StartupMs <= 0 {
		return ln
	}
	return &startupListener{Listener: ln, delay: time.Duration(s.cfg.StartupMs * float64(time.Millisecond))}
}

type startupListener struct {
	net.Listener
	delay time.Duration
}

func (l *startupListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &startupConn{Conn: c, ready: time.Now().Add(l.delay), closed: make(chan struct{})}, nil
}

type startupConn struct {
	net.Conn
	ready     time.Time
	started   atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *startupConn) Read(p []byte) (int, error) {
	if !c.started.Load() {
		if d := time.Until(c.ready); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.closed:
				t.Stop()
				return 0, net.ErrClosed
			}
		}
		c.started.Store(true)
	}
	return c.Conn.Read(p)
}

func (c *startupConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
