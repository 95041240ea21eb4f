package gridftp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dtn/sluice/backend"
)

// FilePair is one whole-file copy of a multi-file operation: Path on the
// server, Local a file on this machine.
type FilePair struct {
	Path  string
	Local string
}

// Download copies whole files from the server to local files, creating
// local directories as needed, in one globus-url-copy run over a -f list:
// Options.Concurrency files at once (-cc), with pipelining (-pp) if set.
// This is the way to move many small files, where one run per file
// would spend its time logging in. The run stops at the first failure.
func (b *Backend) Download(ctx context.Context, files []FilePair) error {
	return b.multi(ctx, "download", files, true)
}

// Upload copies whole local files to the server (replacing what is
// there, creating directories as needed), like Download the other way.
func (b *Backend) Upload(ctx context.Context, files []FilePair) error {
	return b.multi(ctx, "upload", files, false)
}

func (b *Backend) multi(ctx context.Context, op string, files []FilePair, down bool) error {
	what := fmt.Sprintf("(%d files)", len(files))
	if len(files) == 0 {
		return nil
	}
	pairs := make([]pair, 0, len(files))
	for _, f := range files {
		sp, err := b.serverPath(f.Path)
		if err != nil {
			return wrap(op, f.Path, err)
		}
		if sp == b.root || strings.HasSuffix(f.Path, "/") {
			return wrap(op, f.Path, fmt.Errorf("%w: not a file name", backend.ErrInvalid))
		}
		local, err := filepath.Abs(f.Local)
		if err != nil || strings.ContainsRune(local, 0) {
			return wrap(op, f.Path, fmt.Errorf("%w: local path %q", backend.ErrInvalid, f.Local))
		}
		from, to := b.loginURL(sp), fileURL(local)
		if !down {
			from, to = to, from
		}
		pairs = append(pairs, pair{from, to})
	}
	args := append([]string{"-cd"}, b.parallel()...)
	if b.opts.Concurrency > 1 {
		args = append(args, "-cc", strconv.Itoa(b.opts.Concurrency))
	}
	if b.opts.Pipelining {
		args = append(args, "-pp")
	}
	// Several files are a list (-f) that transfer feeds through a
	// pipe: no file on disk holds it, nor the password its URLs carry.
	r, err := b.transfer(ctx, args, pairs, b.pass)
	if err != nil {
		return wrap(op, what, err)
	}
	return wrap(op, what, runErr(ctx, r.Cmd, r.stderr, r.Run()))
}

// fileURL is the file:// URL of an absolute local path, percent-encoded
// like Backend.url.
func fileURL(local string) string {
	var sb strings.Builder
	sb.WriteString("file://")
	p := filepath.ToSlash(local)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/-._~", c) >= 0 {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// PullFrom returns a function for engine.Spec.Pull that makes each
// sub-write a partial third-party transfer from src to b: globus-url-copy
// -off -len src-URL dst-URL, in which the bytes go from server to server
// (they must reach each other) and land at the same offset of the
// destination, which is not truncated. Options (parallelism, binary,
// environment) are b's; each side logs in with its own credential
// (src's X.509 proxy as -src-cred). The run is always in MODE E (-p, one
// stream or more). Progress comes from the destination server's
// performance markers (FTP reply 112, "Stripe Bytes Transferred"), which
// it sends only in MODE E and globus-url-copy shows whole only with -dbg
// (its -vb line is printed at most once a second, so never for a short
// transfer): the Globus server sends one when the transfer starts, one
// every 5 seconds, and one with the total before it confirms the
// transfer. So progress is called with the bytes moved so far every 5
// seconds, and with the total before the function returns; a server
// that sends no markers gets no progress calls.
func (b *Backend) PullFrom(src *Backend) func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
	return func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
		what := src.scheme + "://" + src.host + " " + srcPath + " -> " + dstPath
		ssp, err := src.serverPath(srcPath)
		if err != nil {
			return wrap("pull", what, err)
		}
		dsp, err := b.serverPath(dstPath)
		if err != nil {
			return wrap("pull", what, err)
		}
		if off < 0 || n < 0 || off > (1<<63-1)-n {
			return wrap("pull", what, fmt.Errorf("%w: range %d+%d", backend.ErrInvalid, off, n))
		}
		mk, err := b.parents(ctx, dsp)
		if err != nil {
			return wrap("pull", what, err)
		}
		// -p even for one stream: it makes the run MODE E, in which
		// the destination sends performance markers (in stream mode
		// the Globus server sends none). Both servers must be GridFTP
		// servers, as for any -p.
		par := strconv.Itoa(max(b.opts.Parallelism, 1))
		args := append(append(mk, "-p", par), partial(off, n)...)
		args = append(args, "-dbg")
		if src.proxy != "" {
			args = append(args, "-src-cred", src.proxy)
		}
		run, err := b.transfer(ctx, args, []pair{{src.loginURL(ssp), b.loginURL(dsp)}}, b.pass, src.pass)
		if err != nil {
			return wrap("pull", what, err)
		}
		markers := &markerWriter{out: run.stderr, moved: make(chan struct{}, 1)}
		run.Stderr = markers
		if err := run.Start(); err != nil {
			return wrap("pull", what, fmt.Errorf("starting globus-url-copy: %w", err))
		}
		done := make(chan error, 1)
		go func() { done <- run.Wait() }()
		// progress is called here, on the caller's goroutine, as
		// PullFunc wants; never after the function has returned.
		var reported int64
		report := func() {
			if m := min(markers.total(), n); m > reported && progress != nil {
				reported = m
				progress(m)
			}
		}
		for {
			select {
			case <-markers.moved:
				report()
			case err := <-done:
				// Wait has waited for the copying of stderr: every
				// marker is in.
				if err = runErr(ctx, run.Cmd, run.stderr, err); err == nil {
					report()
				}
				return wrap("pull", what, err)
			}
		}
	}
}

// markerWriter is globus-url-copy's stderr in a -dbg run: it reads the
// performance markers out of the debug output (a line "debug: ..." opens
// a block of it, which an empty line ends) and passes the rest, the
// tool's own messages, to out. The debug output also holds the URLs,
// passwords included, and every command: none of it is kept.
type markerWriter struct {
	out     io.Writer
	partial []byte // a line not yet ended

	debug   bool          // in a debug block
	stripe  int           // the stripe the marker being read is about
	stripes map[int]int64 // bytes per stripe, from the latest markers
	mu      sync.Mutex    // guards moved's value
	bytes   int64         // the total of the latest complete marker
	moved   chan struct{} // signalled when bytes grows
}

func (w *markerWriter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i+1]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > maxStderr {
		// A line this long is no marker: pass it on, unless debug.
		if !w.debug {
			w.out.Write(w.partial)
		}
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// line handles one line, with its newline.
func (w *markerWriter) line(l string) {
	t := strings.TrimSpace(l)
	switch {
	case strings.HasPrefix(t, "debug:"):
		w.debug = true
		return
	case t == "":
		if w.debug {
			w.debug = false
			return
		}
	case !w.debug:
	case strings.HasPrefix(t, "112-"):
		w.stripe = 0
	case strings.HasPrefix(t, "Stripe Index:"):
		w.stripe, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(t, "Stripe Index:")))
	case strings.HasPrefix(t, "Stripe Bytes Transferred:"):
		v, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(t, "Stripe Bytes Transferred:")), 10, 64)
		if err == nil {
			if w.stripes == nil {
				w.stripes = map[int]int64{}
			}
			w.stripes[w.stripe] = v
		}
	case strings.HasPrefix(t, "112 "):
		// The marker's end: a striped server's stripes add up.
		var sum int64
		for _, v := range w.stripes {
			sum += v
		}
		w.mu.Lock()
		grew := sum > w.bytes
		if grew {
			w.bytes = sum
		}
		w.mu.Unlock()
		if grew {
			select {
			case w.moved <- struct{}{}:
			default: // a signal is pending already
			}
		}
	}
	if !w.debug {
		io.WriteString(w.out, l)
	}
}

// total is the bytes the latest marker reported moved.
func (w *markerWriter) total() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}
