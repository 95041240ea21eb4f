package gridftp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is a minimal FTP control-channel client (RFC 959 with the
// RFC 3659 MLST/MLSD listings and the GridFTP extensions MLSC and CKSM)
// for the metadata operations, which globus-url-copy cannot do. It logs
// in anonymously or with a user name and password (USER, PASS: in clear
// text, as FTP has it), and only opens a data connection for MLSD, on
// servers without MLSC.

// maxIdle is how many logged-in control connections a Backend keeps.
const maxIdle = 4

// probeAfter is how long a connection may sit idle before it is checked
// with a NOOP before reuse. Servers close idle control connections
// (globus-gridftp-server after 600 s by default); checking first means a
// command such as RNTO is never sent twice. (pool.probeAfter, which
// tests set, overrides it.)
const probeAfter = 15 * time.Second

// conn is one logged-in control connection.
type conn struct {
	nc    net.Conn
	tp    *textproto.Reader
	w     *bufio.Writer
	feat  map[string]string // FEAT lines: upper-case keyword -> rest
	host  string            // host of the control address, for MLSD data connections
	idle  time.Time         // when it was returned to the pool
	stop  func() bool       // context.AfterFunc's stop of the current operation
	dirty bool              // an operation failed mid-way: do not reuse

	// stall bounds the wait for each reply (Options.Stall; 0: none).
	// patience, if set, replaces it for a reply the server sends only
	// after long work (a checksum of a whole file); negative: no bound.
	// ctx is the current operation's context, whose deadline and
	// cancellation still apply.
	stall    time.Duration
	patience time.Duration
	ctx      context.Context
}

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads
// and writes fail at once, which is how a cancelled context interrupts a
// control connection.
var aLongTimeAgo = time.Unix(1, 0)

// bind makes ctx govern c until release: its deadline becomes the
// connection's, and cancelling it interrupts whatever c is blocked in.
func (c *conn) bind(ctx context.Context) {
	d, _ := ctx.Deadline()
	c.nc.SetDeadline(d) // zero: none
	c.ctx = ctx
	c.stop = context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
}

// arm sets the deadline of the next exchange: stall from now, or the
// operation's context's deadline if that comes first. A server frozen
// with its connections open would otherwise hold an operation whose
// context has no deadline for ever.
func (c *conn) arm() {
	if c.stall <= 0 || c.ctx == nil {
		return
	}
	d, ok := c.ctx.Deadline()
	if b := c.bound(); b > 0 {
		if s := time.Now().Add(b); !ok || s.Before(d) {
			d, ok = s, true
		}
	}
	if !ok {
		d = time.Time{}
	}
	c.nc.SetDeadline(d)
	if c.ctx.Err() != nil {
		// Cancelled in between: the AfterFunc's deadline was just
		// overwritten.
		c.nc.SetDeadline(aLongTimeAgo)
	}
}

// bound is how long the next reply may take: stall, or the patience
// set for it (negative: no bound).
func (c *conn) bound() time.Duration {
	if c.patience != 0 {
		return c.patience
	}
	return c.stall
}

// release ends bind. It reports an error from ctx if ctx ended the
// operation, which is then the error to return rather than the I/O
// error it caused.
func (c *conn) release(ctx context.Context, err error) error {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	c.ctx = nil
	if err == nil {
		return nil
	}
	if cerr := ctxErr(ctx, err); cerr != nil {
		c.dirty = true
		return cerr
	}
	var re *ReplyError
	if !errors.As(err, &re) {
		c.dirty = true // an I/O or protocol error: the stream is out of step
	}
	return err
}

// ctxErr is ctx's error if ctx ended the operation that failed with err.
// The connection's deadline is ctx's, and may fire a moment before ctx's
// own timer: an I/O timeout at or after the deadline is ctx's doing.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) &&
		(errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) {
		return context.DeadlineExceeded
	}
	return nil
}

// login is who a control connection logs in as: anonymous if user is "".
type login struct {
	user, pass string
}

// dial connects and logs in, waiting at most stall (if > 0) for each
// reply.
func dial(ctx context.Context, addr string, stall time.Duration, who login) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	c := &conn{
		nc:    nc,
		tp:    textproto.NewReader(bufio.NewReader(nc)),
		w:     bufio.NewWriter(nc),
		host:  host,
		stall: stall,
	}
	c.bind(ctx)
	err = c.login(who)
	if err = c.release(ctx, err); err != nil {
		nc.Close()
		return nil, fmt.Errorf("logging in to %s: %w", addr, err)
	}
	return c, nil
}

func (c *conn) login(who login) error {
	code, msg, err := c.read()
	if err != nil {
		return err
	}
	if code != 220 {
		return &ReplyError{Cmd: "greeting", Code: code, Msg: msg}
	}
	user, pass, what := who.user, who.pass, "login as "+who.user
	if user == "" {
		// Any password will do: by convention, who is asking.
		user, pass, what = "anonymous", "sluice@", "anonymous login"
	}
	// New refused CR, LF and NUL in both: they would end the command.
	code, msg, err = c.cmd("USER " + user)
	if err != nil {
		return err
	}
	if code == 331 {
		// Sent even when empty: the server says whether it will do
		// (a missing password is a refused login, 530).
		// (cmd's errors name the verb only, never the password.)
		code, msg, err = c.cmd("PASS " + pass)
		if err != nil {
			return err
		}
	}
	if code != 230 {
		return &ReplyError{Cmd: what, Code: code, Msg: msg}
	}
	c.feat = map[string]string{}
	code, msg, err = c.cmd("FEAT")
	if err != nil {
		return err
	}
	if code == 211 {
		for _, l := range strings.Split(msg, "\n") {
			l = strings.TrimSpace(l)
			k, v, _ := strings.Cut(l, " ")
			if k != "" && !strings.HasPrefix(strings.ToLower(l), "extensions") && k != "End." {
				c.feat[strings.ToUpper(k)] = v
			}
		}
	}
	// Binary type for the MLSD data connection (listings are sent as
	// is either way on Unix servers; some servers refuse data in A).
	if code, msg, err = c.cmd("TYPE I"); err != nil {
		return err
	} else if code != 200 {
		return &ReplyError{Cmd: "TYPE I", Code: code, Msg: msg}
	}
	return nil
}

// read reads one reply; a multi-line reply's lines are joined with "\n",
// the code prefixes of its continuation lines removed.
func (c *conn) read() (int, string, error) {
	c.arm()
	code, msg, err := c.tp.ReadResponse(0)
	if err != nil {
		var te *textproto.Error
		if errors.As(err, &te) {
			return te.Code, te.Msg, nil
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && c.bound() > 0 && c.ctx != nil && ctxErr(c.ctx, err) == nil {
			return 0, "", fmt.Errorf("no reply from the server within %v: %w", c.bound(), err)
		}
		return 0, "", fmt.Errorf("reading reply: %w", err)
	}
	return code, msg, nil
}

// send writes one command line.
func (c *conn) send(line string) error {
	c.arm()
	if _, err := c.w.WriteString(line + "\r\n"); err != nil {
		return err
	}
	return c.w.Flush()
}

// cmd sends a command and reads its final reply, skipping preliminary
// (1xx) ones such as progress markers.
func (c *conn) cmd(line string) (int, string, error) {
	if err := c.send(line); err != nil {
		return 0, "", fmt.Errorf("sending %s: %w", verb(line), err)
	}
	for {
		code, msg, err := c.read()
		if err != nil || code >= 200 {
			return code, msg, err
		}
	}
}

// expect runs a command and turns a reply other than want into a
// *ReplyError.
func (c *conn) expect(want int, line string) (string, error) {
	code, msg, err := c.cmd(line)
	if err != nil {
		return "", err
	}
	if code != want {
		return "", &ReplyError{Cmd: verb(line), Code: code, Msg: condense(msg, 2000)}
	}
	return msg, nil
}

// verb is the command word of a line, for error messages (the path is in
// the caller's context already).
func verb(line string) string {
	v, _, _ := strings.Cut(line, " ")
	return v
}

// pool keeps idle logged-in control connections to one server: the Globus
// server forks and setuids a process per login, which costs more than
// the commands themselves.
type pool struct {
	addr  string
	who   login
	stall time.Duration // Options.Stall for each connection; 0: none
	// probeAfter overrides the package's probeAfter where positive;
	// negative: probe before every reuse.
	probeAfter time.Duration
	mu         sync.Mutex
	idle       []*conn
	dials      atomic.Int64 // logins made (for tests)
}

// get returns a logged-in connection bound to ctx.
func (p *pool) get(ctx context.Context) (*conn, error) {
	for {
		p.mu.Lock()
		var c *conn
		if n := len(p.idle); n > 0 {
			c, p.idle = p.idle[n-1], p.idle[:n-1]
		}
		p.mu.Unlock()
		if c == nil {
			break
		}
		c.bind(ctx)
		after := probeAfter
		if p.probeAfter != 0 {
			after = max(p.probeAfter, 0)
		}
		if time.Since(c.idle) < after {
			return c, nil
		}
		_, err := c.expect(200, "NOOP")
		if err = c.release(ctx, err); err == nil {
			c.bind(ctx)
			return c, nil
		}
		c.nc.Close()
		if cerr := ctxErr(ctx, err); cerr != nil {
			return nil, cerr
		}
	}
	c, err := dial(ctx, p.addr, p.stall, p.who)
	if err != nil {
		return nil, err
	}
	p.dials.Add(1)
	c.bind(ctx)
	return c, nil
}

// put ends c's operation, with err its outcome, and keeps c for reuse
// unless the operation left it unusable. It returns the error to report
// (ctx's, if ctx ended the operation).
func (p *pool) put(ctx context.Context, c *conn, err error) error {
	err = c.release(ctx, err)
	if c.dirty {
		c.nc.Close()
		return err
	}
	c.nc.SetDeadline(time.Time{})
	c.idle = time.Now()
	p.mu.Lock()
	if len(p.idle) < maxIdle {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.quit()
	}
	return err
}

// close closes the idle connections.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.quit()
	}
}

// quit says goodbye (briefly: the server's answer does not matter) and
// closes.
func (c *conn) quit() {
	c.nc.SetDeadline(time.Now().Add(time.Second))
	c.send("QUIT")
	c.nc.Close()
}

// entry is one MLST/MLSD line: its facts and the name it is about.
type entry struct {
	name  string
	typ   string // lower-case Type fact: file, dir, cdir, pdir, OS.unix=...
	size  int64
	mtime time.Time
	slink string // UNIX.slink: the entry is a symbolic link to this
}

// parseFacts parses an RFC 3659 entry, "fact=value;fact=value; name".
// Facts are read one by one up to the space that ends them, rather than
// by splitting at the first space, because values such as UNIX.slink (a
// link's target) may contain spaces.
func parseFacts(line string) (entry, error) {
	var e entry
	s := strings.TrimLeft(line, " ")
	e.size = -1
	for {
		if s == "" {
			return e, fmt.Errorf("malformed listing line %q", line)
		}
		if s[0] == ' ' {
			e.name = s[1:]
			break
		}
		semi := strings.IndexByte(s, ';')
		if semi < 0 {
			return e, fmt.Errorf("malformed listing line %q", line)
		}
		k, v, _ := strings.Cut(s[:semi], "=")
		s = s[semi+1:]
		switch strings.ToLower(k) {
		case "type":
			e.typ = strings.ToLower(v)
		case "size":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				e.size = n
			}
		case "modify":
			e.mtime = parseTime(v)
		case "unix.slink":
			e.slink = v
		}
	}
	if e.name == "" {
		return e, fmt.Errorf("listing line %q names nothing", line)
	}
	return e, nil
}

// parseTime parses an RFC 3659 time-val, YYYYMMDDHHMMSS[.sss] in UTC.
func parseTime(v string) time.Time {
	layout := "20060102150405"
	if i := strings.IndexByte(v, '.'); i >= 0 {
		layout += "." + strings.Repeat("9", len(v)-i-1)
	}
	t, err := time.ParseInLocation(layout, v, time.UTC)
	if err != nil {
		return time.Time{}
	}
	return t
}

// mlst describes one server path.
func (c *conn) mlst(spath string) (entry, error) {
	msg, err := c.expect(250, "MLST "+spath)
	if err != nil {
		return entry{}, err
	}
	// 250-status of /x, then " facts; /x", then 250 End.
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(l, " ") {
			return parseFacts(l)
		}
	}
	return entry{}, fmt.Errorf("MLST %s: no facts in the reply %q", spath, condense(msg, 500))
}

// mlsd lists a server directory: over the control channel with the
// GridFTP extension MLSC where the server offers it, otherwise with
// MLSD over a passive data connection.
func (c *conn) mlsd(ctx context.Context, spath string) ([]entry, error) {
	var lines []string
	if _, ok := c.feat["MLSC"]; ok && !forceMLSD {
		// Not expect: the Globus server sends a long listing in
		// pieces, preliminary 150 replies of about a thousand
		// entries each and then the final 250 with the rest, and cmd
		// drops preliminary replies. Every reply's entries count.
		if err := c.send("MLSC " + spath); err != nil {
			return nil, fmt.Errorf("sending MLSC: %w", err)
		}
		for {
			code, msg, err := c.read()
			if err != nil {
				return nil, err
			}
			if code >= 200 && code != 250 {
				return nil, &ReplyError{Cmd: "MLSC", Code: code, Msg: condense(msg, 2000)}
			}
			for _, l := range strings.Split(msg, "\n") {
				if strings.HasPrefix(l, " ") {
					lines = append(lines, l[1:])
				}
			}
			if code >= 200 {
				break
			}
		}
	} else {
		data, err := c.retrieve(ctx, "MLSD "+spath)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimRight(l, "\r"); l != "" {
				lines = append(lines, l)
			}
		}
	}
	var out []entry
	for _, l := range lines {
		e, err := parseFacts(l)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// forceMLSD makes mlsd ignore MLSC, so tests reach the data-connection
// path against a server that has MLSC.
var forceMLSD = false

// maxListing bounds an MLSD listing read into memory.
const maxListing = 256 << 20

// retrieve runs a command whose answer comes over a passive data
// connection (MLSD) and returns that data.
func (c *conn) retrieve(ctx context.Context, line string) ([]byte, error) {
	dc, err := c.dataConn(ctx)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	stop := context.AfterFunc(ctx, func() { dc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		dc.SetDeadline(d)
	}
	if err := c.send(line); err != nil {
		return nil, err
	}
	code, msg, err := c.read()
	if err != nil {
		return nil, err
	}
	if code != 150 && code != 125 {
		return nil, &ReplyError{Cmd: verb(line), Code: code, Msg: condense(msg, 2000)}
	}
	var r io.Reader = dc
	if c.stall > 0 {
		r = &stallConn{ctx: ctx, c: dc, stall: c.stall}
	}
	data, err := io.ReadAll(io.LimitReader(r, maxListing+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s data: %w", verb(line), err)
	}
	if len(data) > maxListing {
		return nil, fmt.Errorf("%s: listing larger than %d bytes", verb(line), maxListing)
	}
	code, msg, err = c.read()
	if err != nil {
		return nil, err
	}
	if code != 226 && code != 250 {
		return nil, &ReplyError{Cmd: verb(line), Code: code, Msg: condense(msg, 2000)}
	}
	return data, nil
}

// passive asks for a data port: PASV (its address may differ from the
// control connection's when the server has a separate data interface),
// or EPSV where PASV is refused (IPv6).
func (c *conn) passive() (string, error) {
	code, msg, err := c.cmd("PASV")
	if err != nil {
		return "", err
	}
	if code == 227 {
		// 227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)
		i, j := strings.IndexByte(msg, '('), strings.IndexByte(msg, ')')
		if i >= 0 && j > i {
			f := strings.Split(msg[i+1:j], ",")
			if len(f) == 6 {
				p1, e1 := strconv.Atoi(strings.TrimSpace(f[4]))
				p2, e2 := strconv.Atoi(strings.TrimSpace(f[5]))
				if e1 == nil && e2 == nil {
					ip := strings.Join(f[:4], ".")
					return net.JoinHostPort(ip, strconv.Itoa(p1<<8|p2)), nil
				}
			}
		}
		return "", fmt.Errorf("PASV: cannot parse %q", msg)
	}
	code, msg, err = c.cmd("EPSV")
	if err != nil {
		return "", err
	}
	if code != 229 {
		return "", &ReplyError{Cmd: "EPSV", Code: code, Msg: condense(msg, 2000)}
	}
	// 229 Entering Extended Passive Mode (|||port|)
	i, j := strings.Index(msg, "(|||"), strings.LastIndex(msg, "|)")
	if i < 0 || j < i+4 {
		return "", fmt.Errorf("EPSV: cannot parse %q", msg)
	}
	port, err := strconv.Atoi(msg[i+4 : j])
	if err != nil {
		return "", fmt.Errorf("EPSV: cannot parse %q", msg)
	}
	return net.JoinHostPort(c.host, strconv.Itoa(port)), nil
}

// dataConn opens a passive data connection (PASV, or EPSV) for the
// next transfer command. If it cannot be dialled, c is marked dirty: the
// server is left waiting for it.
func (c *conn) dataConn(ctx context.Context) (net.Conn, error) {
	addr, err := c.passive()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	dc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		c.dirty = true
		return nil, fmt.Errorf("data connection to %s: %w", addr, err)
	}
	return dc, nil
}

// stallConn reads or writes a data connection, failing when no byte
// moves for stall (or ctx's deadline passes, or ctx is cancelled).
type stallConn struct {
	ctx   context.Context
	c     net.Conn
	stall time.Duration
}

// arm sets the deadline of the next read or write.
func (s *stallConn) arm() {
	d := time.Now().Add(s.stall)
	if cd, ok := s.ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	s.c.SetDeadline(d)
	if s.ctx.Err() != nil {
		s.c.SetDeadline(aLongTimeAgo) // the AfterFunc's was overwritten
	}
}

// stalled says so of a deadline that was the stall bound's, not ctx's.
func (s *stallConn) stalled(err error, what string) error {
	if errors.Is(err, os.ErrDeadlineExceeded) && ctxErr(s.ctx, err) == nil {
		return fmt.Errorf("%s within %v: %w", what, s.stall, err)
	}
	return err
}

func (s *stallConn) Read(p []byte) (int, error) {
	s.arm()
	n, err := s.c.Read(p)
	return n, s.stalled(err, "no data from the server")
}

func (s *stallConn) Write(p []byte) (int, error) {
	s.arm()
	n, err := s.c.Write(p)
	return n, s.stalled(err, "the server took no data")
}
