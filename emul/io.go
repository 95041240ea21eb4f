package emul

import (
	"context"
	"io"
	"sync"
)

// maxEmptyReads is how many (0, nil) reads in a row a Reader tolerates
// from its source while filling a chunk before it gives up with
// io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// Reader returns r shaped as one stream of s, with waits of at most
// MaxChunk bytes. The stream opens at the first Read, so a request that
// moves no data (a HEAD, a 304) never counts towards the open streams,
// and ends at Close, which does not close r. Waits end when ctx does.
//
// Each Read fills min(len(p), MaxChunk) bytes from r (or stops at r's
// error or EOF) before it waits for them: streams that share the
// endpoint's bucket queue on it one reservation at a time, so equal
// reservations give equal shares, whatever sizes the source's reads come
// in (a socket's depend on its segments). A Read therefore blocks until
// that much has arrived, which suits bulk bodies, not chatty protocols.
//
// With a nil s, Reader returns io.NopCloser(r).
func (s *Shaper) Reader(ctx context.Context, r io.Reader) io.ReadCloser {
	if s == nil {
		return io.NopCloser(r)
	}
	return &reader{lazy: lazy{s: s}, ctx: ctx, r: r}
}

// Writer returns w shaped as one stream of s: each Write waits, chunk by
// chunk, before it writes. Like Reader's, the stream opens at the first
// Write and ends at Close, which does not close w. A Write waits for what
// it writes, so streams share the endpoint equally when they write in
// pieces of about the same size (io.Copy's 32 KiB, say); one that writes
// a few bytes at a time gets less.
//
// With a nil s, Writer returns w with a Close that does nothing (and
// keeps w's ReadFrom, if it has one).
func (s *Shaper) Writer(ctx context.Context, w io.Writer) io.WriteCloser {
	if s == nil {
		if rf, ok := w.(io.ReaderFrom); ok {
			return nopWriteCloserReaderFrom{nopWriteCloser{w}, rf}
		}
		return nopWriteCloser{w}
	}
	return &writer{lazy: lazy{s: s}, ctx: ctx, w: w}
}

// lazy is a stream opened on first use.
type lazy struct {
	s      *Shaper
	mu     sync.Mutex
	st     *Stream
	closed bool
}

func (l *lazy) stream() (*Stream, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	if l.st == nil {
		l.st = l.s.Stream()
	}
	return l.st, nil
}

// Close ends the stream, if it started.
func (l *lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.st.Close()
}

type reader struct {
	lazy
	ctx context.Context
	r   io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	st, err := r.stream()
	if err != nil {
		return 0, err
	}
	if len(p) > MaxChunk {
		p = p[:MaxChunk]
	}
	n, empty := 0, 0
	for n < len(p) && err == nil {
		var k int
		k, err = r.r.Read(p[n:])
		n += k
		if k > 0 {
			empty = 0
		} else if empty++; empty >= maxEmptyReads && err == nil {
			err = io.ErrNoProgress
		}
	}
	if n > 0 {
		// Paid after the read: the data sits in p until the endpoint
		// lets it through, as it would sit in a socket buffer. A request
		// abandoned here drops it.
		if werr := st.Wait(r.ctx, n); werr != nil {
			return 0, werr
		}
	}
	return n, err
}

type writer struct {
	lazy
	ctx context.Context
	w   io.Writer
}

func (w *writer) Write(p []byte) (int, error) {
	st, err := w.stream()
	if err != nil {
		return 0, err
	}
	done := 0
	for len(p) > 0 {
		k := min(len(p), MaxChunk)
		if err := st.Wait(w.ctx, k); err != nil {
			return done, err
		}
		n, err := w.w.Write(p[:k])
		done += n
		if err != nil {
			return done, err
		}
		if n < k {
			return done, io.ErrShortWrite
		}
		p = p[k:]
	}
	return done, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

type nopWriteCloserReaderFrom struct {
	nopWriteCloser
	rf io.ReaderFrom
}

func (w nopWriteCloserReaderFrom) ReadFrom(r io.Reader) (int64, error) { return w.rf.ReadFrom(r) }
