package gridftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/sluice-dtn/sluice/backend"
)

// nativeMax is the largest range OpenRange reads over a pooled control
// connection (PASV and RETR) rather than through a globus-url-copy run.
// Starting the tool costs some ten milliseconds a file, which for a
// dataset of small files is most of its time (300 files of up to 64 kB:
// 2.7 s, against 0.07 s for one globus-url-copy -pp run); above this size
// the tool's own data path is worth its start.
const nativeMax = 64 << 20

// openNative reads a range that ends at the end of the file (of at most
// nativeMax bytes) over a pooled control connection: MLST for the size,
// then RETR (after REST for an offset) on a passive data connection. ok is
// false when the range is not one it reads (an ftp:// server only; the
// caller then runs the tool); errors are the operation's.
func (b *Backend) openNative(ctx context.Context, p, sp string, off, n int64) (rc io.ReadCloser, ok bool, err error) {
	if b.ctl == nil || b.opts.Parallelism > 1 || len(b.opts.Args) > 0 {
		return nil, false, nil
	}
	c, err := b.ctl.get(ctx)
	if err != nil {
		if cerr := ctxErr(ctx, err); cerr != nil {
			return nil, true, cerr
		}
		return nil, true, err
	}
	e, err := c.mlst(sp)
	if err == nil && isDir(e.typ) {
		err = fmt.Errorf("%w: is a directory", backend.ErrInvalid)
	}
	if err != nil {
		return nil, true, b.ctl.put(ctx, c, err)
	}
	size := max(e.size, 0)
	end := size
	if n >= 0 {
		end = min(size, off+n)
	}
	switch {
	case off >= size || n == 0:
		// Nothing to read; the file is there.
		return io.NopCloser(strings.NewReader("")), true, b.ctl.put(ctx, c, nil)
	case end < size || end-off > nativeMax:
		// A range that stops short of the end would need the transfer
		// aborted part-way; a large one is the tool's.
		return nil, false, b.ctl.put(ctx, c, nil)
	}
	// To the end means to the end MLST saw: a file that grows meanwhile
	// is read as it was (and the reader can tell the end of the data).
	r, err := c.retr(ctx, sp, off, end-off)
	if err != nil {
		return nil, true, b.ctl.put(ctx, c, err)
	}
	r.b = b
	b.nativeReads.Add(1)
	return r, true, nil
}

// retrReader is a RETR's data connection. Its control connection stays
// out of the pool until the transfer's final reply has been read (at the
// end of the data) or the transfer abandoned (Close before the end, which
// discards the connection: the server is still sending).
type retrReader struct {
	b    *Backend
	ctx  context.Context
	c    *conn
	dc   net.Conn
	r    io.Reader
	stop func() bool
	left int64 // bytes of the range still to read
	err  error // the outcome, once known
	done bool  // c went back to the pool (or was discarded)
}

// retr starts "RETR sp" from off, for want bytes.
func (c *conn) retr(ctx context.Context, sp string, off, want int64) (*retrReader, error) {
	addr, err := c.passive()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	dc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		c.dirty = true // the server waits for a data connection
		return nil, fmt.Errorf("data connection to %s: %w", addr, err)
	}
	fail := func(err error) (*retrReader, error) {
		dc.Close()
		return nil, err
	}
	if off > 0 {
		if _, err := c.expect(350, "REST "+strconv.FormatInt(off, 10)); err != nil {
			return fail(err)
		}
	}
	if err := c.send("RETR " + sp); err != nil {
		return fail(err)
	}
	code, msg, err := c.read()
	if err != nil {
		return fail(err)
	}
	if code != 150 && code != 125 {
		return fail(&ReplyError{Cmd: "RETR", Code: code, Msg: condense(msg, 2000)})
	}
	r := &retrReader{ctx: ctx, c: c, dc: dc, r: dc, left: want}
	r.stop = context.AfterFunc(ctx, func() { dc.SetDeadline(aLongTimeAgo) })
	if c.stall > 0 {
		r.r = &stallReader{ctx: ctx, c: dc, stall: c.stall}
	} else if d, ok := ctx.Deadline(); ok {
		dc.SetDeadline(d)
	}
	return r, nil
}

func (r *retrReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		// Everything asked for is here: the data connection should be
		// at its end. Bytes past it (a file grown since MLST) are not
		// the range's: the transfer is abandoned.
		var one [1]byte
		k, err := r.r.Read(one[:])
		if k > 0 || (err != nil && !errors.Is(err, io.EOF)) {
			r.abandon(errAbandoned)
			r.err = io.EOF
			return 0, io.EOF
		}
		if err == nil {
			return 0, nil
		}
		return 0, r.end(io.EOF)
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	k, err := r.r.Read(p)
	r.left -= int64(k)
	switch {
	case errors.Is(err, io.EOF):
		return k, r.end(io.EOF)
	case err != nil:
		if cerr := ctxErr(r.ctx, err); cerr != nil {
			err = cerr
		} else {
			err = fmt.Errorf("reading RETR data: %w", err)
		}
		r.err = err
		r.abandon(err)
		return k, err
	}
	return k, nil
}

// end reads the transfer's final reply at the end of the data and gives
// the control connection back; it returns eof, or the transfer's error
// in the server's words.
func (r *retrReader) end(eof error) error {
	r.stop()
	r.dc.Close()
	code, msg, err := r.c.read()
	switch {
	case err != nil:
	case code != 226 && code != 250:
		err = &ReplyError{Cmd: "RETR", Code: code, Msg: condense(msg, 2000)}
	}
	r.done = true
	if err = r.b.ctl.put(r.ctx, r.c, err); err != nil {
		r.err = err
		return err
	}
	r.err = eof
	return eof
}

// abandon discards the control connection of an unfinished transfer:
// the server may still be sending.
func (r *retrReader) abandon(err error) {
	if r.done {
		return
	}
	r.stop()
	r.dc.Close()
	r.c.dirty = true
	r.done = true
	r.b.ctl.put(r.ctx, r.c, err)
}

// Close ends the read. A caller that read the whole range (and stopped
// there, as a reader of exactly n bytes does) leaves the transfer at its
// end: its final reply is read so that the connection serves again.
// Before that the transfer is abandoned, which is not an error (as for
// the tool's runs).
func (r *retrReader) Close() error {
	if !r.done && r.err == nil && r.left == 0 {
		r.Read(nil)
	}
	r.abandon(errAbandoned)
	return nil
}

var errAbandoned = errors.New("transfer abandoned")
