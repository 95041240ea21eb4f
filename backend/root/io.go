package root

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto/query"

	"github.com/sluice-dtn/sluice/backend"
)

// Open options. kXR_force because XRootD otherwise refuses a second writer,
// or a reader while a writer has the file open, and the engine's workers
// write one file through several handles at once. XRootD has no "create
// unless it exists" open: kXR_new fails on an existing file, kXR_open_updt
// on a missing one, and kXR_delete truncates; so writers try the one, then
// the other (see openWrite).
const (
	optRead   = xrdfs.OpenOptionsOpenRead | xrdfs.OpenOptionsForce
	optUpdate = xrdfs.OpenOptionsOpenUpdate | xrdfs.OpenOptionsForce
	optCreate = optUpdate | xrdfs.OpenOptionsNew
)

// open opens a server path; a file opened after ctx ended is closed.
func (c *conn) open(ctx context.Context, sp string, mode xrdfs.OpenMode, opts xrdfs.OpenOptions) (xrdfs.File, error) {
	return await(ctx, c, func(ctx context.Context) (xrdfs.File, error) {
		return c.fs.Open(ctx, sp, mode, opts)
	}, func(f xrdfs.File, err error) {
		if err == nil {
			f.Close(context.Background())
		}
	})
}

// closeFile closes f, waiting for the server unless ctx has ended already
// (a cancelled worker should not wait for its handle to go away).
func closeFile(ctx context.Context, c *conn, f xrdfs.File) error {
	if ctx.Err() != nil || c.dead.Load() {
		go f.Close(context.Background())
		return nil
	}
	return await0(ctx, c, f.Close)
}

// openWrite opens a file for writing without truncating it, creating it
// and its parent directories if needed. Parents are made with an explicit
// mkdir -p rather than kXR_mkpath, because go-hep's server gives the new
// directories the file's mode (0644), which nobody can enter.
func (b *Backend) openWrite(ctx context.Context, c *conn, name, sp string) (xrdfs.File, error) {
	f, err := c.open(ctx, sp, 0, optUpdate)
	if err == nil || !errors.Is(classify("open", name, err), backend.ErrNotFound) {
		return f, classify("open", name, err)
	}
	if err := c.mkdirAll(ctx, path.Dir(sp)); err != nil {
		return nil, classify("mkdir", path.Dir(name), err)
	}
	f, err = c.open(ctx, sp, fileMode, optCreate)
	if err != nil && errors.Is(classify("create", name, err), backend.ErrExist) {
		// Another worker created it in between.
		f, err = c.open(ctx, sp, 0, optUpdate)
	}
	return f, classify("create", name, err)
}

// OpenRange implements backend.Backend. The reader fetches BlockSize bytes
// per kXR_read through its own handle, with the context given here; it
// stops early (io.EOF) where the file ends.
func (b *Backend) OpenRange(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	name, sp, err := b.paths(p)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("root: read %s: %w: negative offset %d", name, backend.ErrInvalid, off)
	}
	c, err := b.conn(ctx)
	if err != nil {
		return nil, err
	}
	f, err := c.open(ctx, sp, 0, optRead)
	if err != nil {
		return nil, classify("open", name, err)
	}
	end := int64(-1)
	if n >= 0 {
		end = off + n
	}
	return &reader{b: b, c: c, f: f, ctx: ctx, name: name, off: off, end: end}, nil
}

// reader streams a range of a file, one block per request.
type reader struct {
	b    *Backend
	c    *conn
	f    xrdfs.File
	ctx  context.Context
	name string
	off  int64 // next byte to fetch
	end  int64 // where the range ends, -1 at the end of the file

	buf    *[]byte // from b.bufs; nil once given away
	data   []byte  // fetched and not yet returned
	err    error   // sticky
	closed bool
}

func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("root: read %s: %w", r.name, io.ErrClosedPipe)
	}
	if len(r.data) == 0 {
		if r.err == nil {
			r.err = r.fill()
		}
		if r.err != nil {
			return 0, r.err
		}
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// fill fetches the next block into r.data.
func (r *reader) fill() error {
	if r.buf == nil {
		r.buf = r.b.bufs.Get().(*[]byte)
	}
	want := int64(len(*r.buf))
	if r.end >= 0 {
		if r.off >= r.end {
			return io.EOF
		}
		want = min(want, r.end-r.off)
	}
	bufp, buf, off := r.buf, (*r.buf)[:want], r.off
	n, err := await(r.ctx, r.c, func(ctx context.Context) (int, error) {
		return r.f.ReadAtContext(ctx, buf, off)
	}, func(int, error) {
		r.b.bufs.Put(bufp) // the abandoned read is done with it
	})
	if err != nil {
		if r.ctx.Err() != nil || r.c.dead.Load() {
			r.buf = nil // a read may still land in it
		}
		return classify("read", r.name, err)
	}
	if n == 0 {
		return io.EOF
	}
	r.off += int64(n)
	r.data = buf[:n]
	return nil
}

// Close releases the handle (see closeFile).
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.buf != nil {
		r.b.bufs.Put(r.buf)
		r.buf, r.data = nil, nil
	}
	return classify("close", r.name, closeFile(r.ctx, r.c, r.f))
}

// WriteAt implements backend.Backend. It writes through its own handle in
// kXR_writes of BlockSize bytes, reading each block from r before sending
// it.
func (b *Backend) WriteAt(ctx context.Context, p string, off int64, r io.Reader, n int64) error {
	name, sp, err := b.paths(p)
	if err != nil {
		return err
	}
	if off < 0 || n < 0 {
		return fmt.Errorf("root: write %s: %w: range %d+%d", name, backend.ErrInvalid, off, n)
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	f, err := b.openWrite(ctx, c, name, sp)
	if err != nil {
		return err
	}
	bufp := b.bufs.Get().(*[]byte)
	var written int64
	for written < n && err == nil {
		k, rerr := io.ReadFull(r, (*bufp)[:min(int64(len(*bufp)), n-written)])
		if k > 0 {
			chunk, at, held := (*bufp)[:k], off+written, bufp
			_, err = await(ctx, c, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, f.WriteAtContext(ctx, chunk, at)
			}, func(struct{}, error) {
				b.bufs.Put(held) // the abandoned write is done with it
			})
			if err != nil && (ctx.Err() != nil || c.dead.Load()) {
				bufp = nil // the write may still be sending it
			}
			if err != nil {
				err = classify("write", name, err)
				break
			}
			written += int64(k)
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF), errors.Is(rerr, io.ErrUnexpectedEOF):
			err = fmt.Errorf("root: write %s: %w: body ended after %d of %d bytes", name, backend.ErrInvalid, written, n)
		default:
			err = fmt.Errorf("root: write %s: reading the data: %w", name, rerr)
		}
	}
	if bufp != nil {
		b.bufs.Put(bufp)
	}
	cerr := closeFile(ctx, c, f)
	if err != nil {
		return err
	}
	return classify("close", name, cerr)
}

// Truncate implements backend.Backend.
func (b *Backend) Truncate(ctx context.Context, p string, size int64) error {
	name, sp, err := b.paths(p)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("root: truncate %s: %w: size %d", name, backend.ErrInvalid, size)
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	f, err := b.openWrite(ctx, c, name, sp)
	if err != nil {
		return err
	}
	err = await0(ctx, c, func(ctx context.Context) error { return f.Truncate(ctx, size) })
	cerr := closeFile(ctx, c, f)
	if err != nil {
		return classify("truncate", name, err)
	}
	return classify("close", name, cerr)
}

// Sync implements backend.Backend: kXR_sync through a handle of its own,
// which flushes the file whichever handle wrote it.
func (b *Backend) Sync(ctx context.Context, p string) error {
	name, sp, err := b.paths(p)
	if err != nil {
		return err
	}
	c, err := b.conn(ctx)
	if err != nil {
		return err
	}
	f, err := c.open(ctx, sp, 0, optUpdate)
	if err != nil {
		return classify("sync", name, err)
	}
	err = await0(ctx, c, f.Sync)
	cerr := closeFile(ctx, c, f)
	if err != nil {
		return classify("sync", name, err)
	}
	return classify("close", name, cerr)
}

// errAnswer: the server answered a checksum query with something else
// than "<algo> <hex>" for the algorithm asked.
var errAnswer = errors.New("unexpected checksum answer")

// Checksum implements backend.Backend. It asks the server first
// (kXR_query kXR_Qcksum with cks.type=algo), which computes it without the
// data crossing the network. XRootD servers compute only the algorithms
// they are configured with (xrootd.chksum) and answer for their default
// one otherwise; go-hep's server answers no query at all. Then, and for
// any other failure but a missing file, the file is read through
// OpenRange and hashed here. An algorithm the server refused is not asked
// for again.
//
// XRootD may answer from a checksum it stored with the file, which it
// recomputes when the file's modification time changes; writes within the
// same second as an earlier checksum request could go unnoticed. Set
// Options.NoServerChecksum where files are rewritten in place.
func (b *Backend) Checksum(ctx context.Context, p, algo string) (string, error) {
	h, err := backend.NewHash(algo)
	if err != nil {
		return "", fmt.Errorf("root: checksum %s: %w", p, err)
	}
	name, sp, err := b.paths(p)
	if err != nil {
		return "", err
	}
	if _, refused := b.noQuery.Load(algo); !b.opts.NoServerChecksum && !refused {
		c, err := b.conn(ctx)
		if err != nil {
			return "", err
		}
		// The server reads the whole file before it answers, so the
		// wait grows with the file: learn its size first.
		var bound time.Duration // 0: none
		if rate := b.checksumRate(); rate > 0 && b.opts.Stall > 0 {
			es, err := c.stat(ctx, sp)
			if err != nil {
				return "", classify("checksum", name, err)
			}
			bound = backend.ReadWait(b.opts.Stall, es.EntrySize, rate)
		}
		sum, err := c.queryChecksum(ctx, sp, algo, h.Size(), bound)
		switch {
		case err == nil:
			b.serverSums.Add(1)
			return sum, nil
		case ctx.Err() != nil, code(err) == kNotFound:
			return "", classify("checksum", name, err)
		case errors.Is(err, errAnswer), code(err) == kUnsupported, code(err) == kInvalidRequest,
			code(err) == kArgInvalid:
			// Unconfigured: kXR_Unsupported; configured for
			// another algorithm: its answer; go-hep's server:
			// kXR_InvalidRequest. None will change.
			b.noQuery.Store(algo, struct{}{})
		}
	}
	rc, err := b.OpenRange(ctx, p, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if _, err := io.Copy(h, rc); err != nil {
		return "", err // already "root: read ..."
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checksumRate is Options.ChecksumRate with its default (negative: none).
func (b *Backend) checksumRate() float64 {
	if b.opts.ChecksumRate == 0 {
		return DefaultChecksumRate
	}
	return b.opts.ChecksumRate
}

// queryChecksum asks the server for a file's checksum (a digest of size
// bytes), waiting at most bound while the server sends nothing (0: no
// bound). Not Stall: the server answers once it has read the whole file, which takes
// as long as the file is large.
func (c *conn) queryChecksum(ctx context.Context, sp, algo string, size int, bound time.Duration) (string, error) {
	req := &query.Request{Query: query.Checksum, Args: []byte(sp + "?cks.type=" + algo)}
	data, err := awaitStall(ctx, c, bound, func(ctx context.Context) ([]byte, error) {
		var resp query.Response
		_, err := c.cli.Send(ctx, &resp, req)
		return resp.Data, err
	}, nil)
	if err != nil {
		return "", err
	}
	f := strings.Fields(strings.TrimRight(string(data), "\x00"))
	if len(f) != 2 || !strings.EqualFold(f[0], algo) {
		return "", fmt.Errorf("%w: %q", errAnswer, data)
	}
	v := strings.ToLower(f[1])
	if len(v) < 2*size {
		v = strings.Repeat("0", 2*size-len(v)) + v // in case leading zeros were dropped
	}
	if raw, err := hex.DecodeString(v); err != nil || len(raw) != size {
		return "", fmt.Errorf("%w: %q", errAnswer, data)
	}
	return v, nil
}
