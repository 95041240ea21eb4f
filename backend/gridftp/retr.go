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

// nativeMax is the largest range OpenRange reads (PASV, RETR) or WriteAt
// writes (PASV, ESTO) over a pooled control connection rather than
// through a globus-url-copy run. Starting the tool costs some ten
// milliseconds a file, which for a dataset of small files was most of its
// time (300 files of up to 64 kB: 2.7 s, against 0.07 s for one
// globus-url-copy -pp run); above this size the tool's own data path is
// worth its start.
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
	dc, err := c.dataConn(ctx)
	if err != nil {
		return nil, err
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
		r.r = &stallConn{ctx: ctx, c: dc, stall: c.stall}
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

// writeNative writes n bytes of r at off (at most nativeMax) over a
// pooled control connection: ESTO A off (the GridFTP store at an offset,
// which leaves the rest of the file as it is) on a passive data
// connection. ok is false when the write is not one it makes (an ftp://
// server only; the caller then runs the tool).
func (b *Backend) writeNative(ctx context.Context, sp string, off int64, r io.Reader, n int64) (ok bool, err error) {
	if b.ctl == nil || b.opts.Parallelism > 1 || len(b.opts.Args) > 0 || n > nativeMax {
		return false, nil
	}
	c, err := b.ctl.get(ctx)
	if err != nil {
		if cerr := ctxErr(ctx, err); cerr != nil {
			return true, cerr
		}
		return true, err
	}
	b.nativeWrites.Add(1)
	copied, err := c.esto(ctx, sp, off, r, n)
	if err = b.ctl.put(ctx, c, err); err != nil {
		return true, err
	}
	if copied < n {
		return true, fmt.Errorf("%w: source ended after %d of %d bytes", backend.ErrInvalid, copied, n)
	}
	return true, nil
}

// esto stores n bytes of r at off of server path sp and returns how many
// it sent. A source that fails is the error (the server keeps what it
// got, as for the tool's runs); one that ends early is not (the caller
// compares the count).
func (c *conn) esto(ctx context.Context, sp string, off int64, r io.Reader, n int64) (int64, error) {
	dc, err := c.dataConn(ctx)
	if err != nil {
		return 0, err
	}
	defer dc.Close()
	stop := context.AfterFunc(ctx, func() { dc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if err := c.send("ESTO A " + strconv.FormatInt(off, 10) + " " + sp); err != nil {
		return 0, err
	}
	code, msg, err := c.read()
	if err != nil {
		return 0, err
	}
	if code != 150 && code != 125 {
		return 0, &ReplyError{Cmd: "ESTO", Code: code, Msg: condense(msg, 2000)}
	}
	var w io.Writer = dc
	if c.stall > 0 {
		w = &stallConn{ctx: ctx, c: dc, stall: c.stall}
	}
	// The copy runs on its own: a source that blocks in Read (for as
	// long as it likes) must not hold a cancelled write, which returns
	// at once; the copier is then left to end when its source does.
	src := &counter{r: io.LimitReader(r, n)}
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, src)
		copied <- err
	}()
	var werr error
	select {
	case werr = <-copied:
		if src.err != nil {
			werr = fmt.Errorf("reading the source: %w", src.err)
		}
	case <-ctx.Done():
		c.dirty = true
		return 0, ctx.Err()
	}
	if werr != nil {
		// The server is told nothing of the failure but an early end
		// of the data; its stream is no longer in step with ours.
		c.dirty = true
		if cerr := ctxErr(ctx, werr); cerr != nil {
			return src.n, cerr
		}
		return src.n, werr
	}
	if err := dc.Close(); err != nil {
		c.dirty = true
		return src.n, fmt.Errorf("closing the ESTO data connection: %w", err)
	}
	code, msg, err = c.read()
	if err != nil {
		return src.n, err
	}
	if code != 226 && code != 250 {
		return src.n, &ReplyError{Cmd: "ESTO", Code: code, Msg: condense(msg, 2000)}
	}
	return src.n, nil
}
