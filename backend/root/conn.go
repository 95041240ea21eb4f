package root

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go-hep.org/x/hep/xrootd"
	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto/auth/unix"
)

// This file works around three properties of go-hep's client (v0.38.1)
// that would otherwise make it unfit for a long-running transfer service:
//
//  1. A request whose context is cancelled returns at once but leaves its
//     stream claimed; when the server's answer arrives, the client's reader
//     goroutine blocks forever handing it over, holding the multiplexer's
//     lock, and every later request (and Client.Close) hangs. So go-hep
//     never sees a cancellable context here: await runs each request on
//     context.Background and stops waiting, not the request, when the
//     caller's context ends.
//  2. When the server hangs up (restart, network failure, idle timeout),
//     the client's reader goroutine panics, which kills the whole process.
//     It does not once the client's context is cancelled. So go-hep never
//     talks to the server directly: it talks to a relay on a loopback port,
//     and the relay, when the server's side fails, cancels that context
//     before anything can reach go-hep as a read error. The conn is then
//     dead: requests waiting on it fail at once with an unclassified
//     (transient) error that the engine retries, and the next operation
//     dials a new conn.
//  3. go-hep knows neither deferred answers (kXR_waitresp, then the answer
//     wrapped in kXR_attn/kXR_asynresp) nor unsolicited messages (kXR_attn
//     on stream 0): an answer on a stream nobody waits on panics too. XRootD
//     defers checksum queries, for one. The relay reads the server's
//     responses frame by frame and hands go-hep the unwrapped answer
//     instead, dropping the rest.

// relayBuffer is the copy buffer of each relay direction.
const relayBuffer = 1 << 20

// conn is one go-hep client and its relay. It is created dialing; ready is
// closed when dialing ended, after which err or cli is set.
type conn struct {
	upstream string
	timeout  time.Duration
	stall    time.Duration // Options.Stall; 0: no bound
	// heard is when the server last sent anything (UnixNano), for the
	// stall bound.
	heard atomic.Int64

	ready chan struct{}
	err   error // why dialing failed, unwrapped; valid once ready is closed

	dead   atomic.Bool   // set once the conn must not be used any more
	failed chan struct{} // closed when it dies

	mu       sync.Mutex
	ln       net.Listener
	cancel   context.CancelFunc // ends the client's lifetime context
	cli      *xrootd.Client
	fs       xrdfs.FileSystem
	main     net.Conn // go-hep's side of its session's connection
	accepted int
	closed   bool
	cause    error // first failure of the server's side
}

// dialConn starts connecting to addr, logging in as user and, if unixUser
// is not empty, presenting that name to servers that require unix
// authentication (else go-hep's default: this process's user); wait on
// ready.
func dialConn(addr, user, unixUser string, timeout, stall time.Duration) *conn {
	c := &conn{upstream: addr, timeout: timeout, stall: stall, ready: make(chan struct{}), failed: make(chan struct{})}
	go c.dial(user, unixUser)
	return c
}

func (c *conn) dial(user, unixUser string) {
	defer close(c.ready)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln, err = net.Listen("tcp", "[::1]:0")
	}
	if err != nil {
		c.err = fmt.Errorf("relay: %w", err)
		c.close()
		return
	}
	// The client's lifetime context, parent of its sessions' contexts:
	// once it is cancelled, go-hep takes a broken connection for a
	// shutdown instead of panicking.
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.ln, c.cancel = ln, cancel
	c.mu.Unlock()
	go c.serve()

	// NewClient runs apart: cancelled during its handshake, go-hep's
	// client can wedge for good (see the top of this file), and dialing
	// must end anyway.
	var opts []xrootd.Option
	if unixUser != "" {
		// The group stays this process's: a credential has none.
		a := &unix.Auth{User: unixUser}
		if d, ok := unix.Default.(*unix.Auth); ok {
			a.Group = d.Group
		}
		opts = append(opts, xrootd.WithAuth(a))
	}
	done := make(chan dialed, 1)
	go func() {
		cli, err := xrootd.NewClient(ctx, ln.Addr().String(), user, opts...)
		done <- dialed{cli, err}
	}()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case d := <-done:
		if d.err == nil {
			c.mu.Lock()
			closed := c.closed
			if !closed {
				c.cli, c.fs = d.cli, d.cli.FS()
			}
			c.mu.Unlock()
			if !closed {
				return
			}
			go d.cli.Close()
		}
		c.fail(d.err)
	case <-timer.C:
		c.fail(fmt.Errorf("no answer within %v", c.timeout))
		go closeLate(done)
	case <-c.failed:
		go closeLate(done)
	}
	c.err = c.lost()
}

// dialed is NewClient's outcome.
type dialed struct {
	cli *xrootd.Client
	err error
}

// closeLate closes a client that connected after dialing gave up on it. If
// NewClient wedged, this waits forever: a goroutine lost per such dial.
func closeLate(done <-chan dialed) {
	if d := <-done; d.cli != nil {
		d.cli.Close()
	}
}

// lost is why the conn died: the server's side failing, or Close.
func (c *conn) lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil {
		return c.cause
	}
	return net.ErrClosed
}

// fail records why the conn broke (err may be nil) and closes it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.cause == nil && !c.closed {
		c.cause = err
	}
	c.mu.Unlock()
	c.close()
}

// close ends the conn. Everything waiting on it returns at once (see
// await), whatever go-hep does. The client's context is cancelled first;
// then its session's connection can be closed without go-hep panicking.
// The data connections go-hep binds get contexts of their own, so the
// relay leaves them to go-hep's Close, which is not waited for: it can
// wedge.
func (c *conn) close() {
	c.dead.Store(true)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.failed)
	cli, cancel, ln, main := c.cli, c.cancel, c.ln, c.main
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if ln != nil {
		ln.Close()
	}
	if main != nil {
		main.Close()
	}
	if cli != nil {
		go cli.Close()
	}
}

// serve accepts go-hep's connections: first its session's, then up to
// eight data connections it binds to it (kXR_bind) on servers that allow
// that.
func (c *conn) serve() {
	for {
		local, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.accepted++
		first, closed := c.accepted == 1, c.closed
		if first {
			c.main = local
		}
		c.mu.Unlock()
		switch {
		case closed && first:
			local.Close() // the context is cancelled already
		case closed:
			go drain(local)
		default:
			go c.pipe(local)
		}
	}
}

// drain waits for go-hep to close a connection the relay will not serve.
func drain(local net.Conn) {
	io.Copy(io.Discard, local)
	local.Close()
}

// pipe relays one connection. Apart from the session's connection, which
// close ends, it never closes go-hep's side before go-hep has: a read error
// there while the client's context is alive is the panic this relay exists
// to prevent. A failure of the server's side closes the conn instead.
func (c *conn) pipe(local net.Conn) {
	d := net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second}
	up, err := d.Dial("tcp", c.upstream)
	if err != nil {
		c.fail(err)
		drain(local)
		return
	}
	defer local.Close()
	defer up.Close()
	var localGone atomic.Bool
	go func() {
		err := relayResponses(local, heardReader{up, &c.heard})
		var le localError
		if errors.As(err, &le) {
			return // go-hep hung up; the other direction sees it too
		}
		if !localGone.Load() {
			if errors.Is(err, io.EOF) {
				err = errors.New("server closed the connection")
			}
			c.fail(err)
		}
	}()
	buf := make([]byte, relayBuffer)
	upOK := true
	for {
		n, err := local.Read(buf)
		if n > 0 && upOK {
			if _, werr := up.Write(buf[:n]); werr != nil {
				upOK = false
				c.fail(werr)
			}
		}
		if err != nil {
			// go-hep closed its end: a normal close, or the
			// aftermath of a failure. Only now may up close.
			localGone.Store(true)
			return
		}
	}
}

// heardReader notes the time of every read that brings bytes.
type heardReader struct {
	r     io.Reader
	heard *atomic.Int64
}

func (h heardReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		h.heard.Store(time.Now().UnixNano())
	}
	return n, err
}

// result carries one outcome of an asynchronous request.
type result[T any] struct {
	v   T
	err error
}

// await runs op on a context go-hep never sees cancelled (see the top of
// this file) and returns when op does, when ctx ends or when the conn dies,
// whichever comes first; and if op waits for c.stall while the server
// sends nothing on the connection, the server is taken for frozen and the
// conn fails (a frozen server keeps its connection open, and nothing else
// would end the wait of a caller whose context has no deadline). When it
// returns before op, op goes on in the background and orphan, if set,
// gets its outcome: to close a file opened too late, or to give back a
// buffer op was still reading into or writing from.
func await[T any](ctx context.Context, c *conn, op func(context.Context) (T, error), orphan func(T, error)) (T, error) {
	return awaitStall(ctx, c, c.stall, op, orphan)
}

// awaitStall is await with the stall bound given (0: none).
func awaitStall[T any](ctx context.Context, c *conn, stall time.Duration, op func(context.Context) (T, error), orphan func(T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if c.dead.Load() {
		return zero, c.lostErr()
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := op(context.Background())
		ch <- result[T]{v, err}
	}()
	start := time.Now()
	var timer *time.Timer
	var tick <-chan time.Time // nil without a bound: never fires
	if stall > 0 {
		timer = time.NewTimer(stall)
		defer timer.Stop()
		tick = timer.C
	}
	var err error
wait:
	for {
		select {
		case r := <-ch:
			return r.v, r.err
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-c.failed:
			err = c.lostErr()
			break wait
		case <-tick:
			// Silent since op began, or since the last bytes?
			last := start
			if h := time.Unix(0, c.heard.Load()); h.After(last) {
				last = h
			}
			if left := stall - time.Since(last); left > 0 {
				timer.Reset(left)
				continue
			}
			c.fail(fmt.Errorf("the server sent nothing for %v", stall))
			err = c.lostErr()
			break wait
		}
	}
	if orphan != nil {
		go func() {
			r := <-ch
			orphan(r.v, r.err)
		}()
	}
	return zero, err
}

// await0 is await for operations without a result.
func await0(ctx context.Context, c *conn, op func(context.Context) error) error {
	_, err := await(ctx, c, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	}, nil)
	return err
}

// lostErr is the error of operations cut by the conn's end: unclassified,
// so the engine retries them, on a new conn.
func (c *conn) lostErr() error {
	return fmt.Errorf("connection to %s lost: %w", c.upstream, c.lost())
}

// Response framing (XProtocol.hh): every server response starts with
// streamid[2] status[2] dlen[4], big-endian, followed by dlen bytes.
const (
	statusAttn     = 4001 // kXR_attn: unsolicited; body actnum[4] ...
	statusWaitResp = 4006 // kXR_waitresp: the answer comes as kXR_attn later
	attnAsyncAb    = 5000 // kXR_asyncab: the server aborts the session
	attnAsyncDi    = 5001 // kXR_asyncdi: the server asks to disconnect
	attnAsynResp   = 5008 // kXR_asynresp: reserved[4], then a whole response
	headerLen      = 8
)

// localError is a failure to write to go-hep's side of the relay.
type localError struct{ error }

// relayResponses copies the server's responses to go-hep: kXR_waitresp is
// dropped (go-hep goes on waiting), the response inside kXR_attn
// kXR_asynresp is passed on as if it had come directly, other kXR_attn
// messages are dropped, and kXR_asyncab or kXR_asyncdi end the relay as a
// server failure. It returns the error that ended it: a localError if
// go-hep's side failed.
func relayResponses(local io.Writer, up io.Reader) error {
	br := bufio.NewReaderSize(up, 64<<10)
	buf := make([]byte, relayBuffer)
	hdr := buf[:headerLen]
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			return err
		}
		status := binary.BigEndian.Uint16(hdr[2:4])
		dlen := int64(int32(binary.BigEndian.Uint32(hdr[4:8])))
		if dlen < 0 {
			return fmt.Errorf("server sent a response of length %d", dlen)
		}
		switch status {
		case statusWaitResp:
			if _, err := io.CopyN(io.Discard, br, dlen); err != nil {
				return err
			}
			continue
		case statusAttn:
			var act [8]byte // actnum, and reserved for kXR_asynresp
			if dlen < 4 {
				if _, err := io.CopyN(io.Discard, br, dlen); err != nil {
					return err
				}
				continue
			}
			if _, err := io.ReadFull(br, act[:4]); err != nil {
				return err
			}
			dlen -= 4
			switch actnum := binary.BigEndian.Uint32(act[:4]); {
			case actnum == attnAsyncAb || actnum == attnAsyncDi:
				return fmt.Errorf("server ended the session (kXR_attn %d)", actnum)
			case actnum != attnAsynResp || dlen < 4+headerLen:
				if _, err := io.CopyN(io.Discard, br, dlen); err != nil {
					return err
				}
				continue
			}
			if _, err := io.ReadFull(br, act[4:]); err != nil {
				return err
			}
			if _, err := io.ReadFull(br, hdr); err != nil {
				return err
			}
			dlen -= 4 + headerLen
			// The inner length should be dlen; trust the frame.
			binary.BigEndian.PutUint32(hdr[4:8], uint32(dlen))
		}
		// Pass the response on: header and body, in pieces of buf.
		n := headerLen
		for {
			m := min(int64(len(buf)-n), dlen)
			if _, err := io.ReadFull(br, buf[n:n+int(m)]); err != nil {
				return err
			}
			if _, err := local.Write(buf[:n+int(m)]); err != nil {
				return localError{err}
			}
			if dlen -= m; dlen == 0 {
				break
			}
			n = 0
		}
	}
}
