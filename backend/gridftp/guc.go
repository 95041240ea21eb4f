package gridftp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file runs globus-url-copy, which moves the bytes: the Globus client
// library speaks GridFTP's data protocols (stream mode, and MODE E with
// parallel streams) and, for gsiftp://, GSI security, none of which this
// package reimplements.

// maxStderr bounds what is kept of globus-url-copy's stderr.
const maxStderr = 64 << 10

// waitDelay is how long a killed globus-url-copy may take to release its
// pipes before Wait gives up on them.
const waitDelay = 2 * time.Second

// stderrBuf keeps the first maxStderr bytes written to it, and the
// run's stall timeout, to explain the message it ends with.
type stderrBuf struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	stall time.Duration // the -stall-timeout this package gave (0: none)
}

func (b *stderrBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxStderr - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *stderrBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// command prepares a globus-url-copy run with args (after the options
// every run gets) that is killed if ctx ends.
func (b *Backend) command(ctx context.Context, args ...string) (*exec.Cmd, *stderrBuf) {
	full := append([]string{}, b.opts.Args...)
	stderr := &stderrBuf{}
	if b.opts.Stall > 0 && !slices.Contains(full, "-st") && !slices.Contains(full, "-stall-timeout") {
		// globus-url-copy aborts a run that moves no data for this
		// long: a frozen server keeps its connections open, and the
		// run (and the caller, if its context has no deadline) would
		// wait for ever. It covers connecting and logging in too.
		secs := max(1, int((b.opts.Stall+time.Second-1)/time.Second))
		full = append(full, "-st", strconv.Itoa(secs))
		stderr.stall = time.Duration(secs) * time.Second
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, b.bin, full...)
	cmd.Env = append(os.Environ(), b.opts.Env...)
	cmd.WaitDelay = waitDelay
	cmd.Stderr = stderr
	return cmd, stderr
}

// runErr turns the outcome of a finished run into the error to return:
// ctx's if ctx killed it, a *ToolError if it failed on its own.
func runErr(ctx context.Context, cmd *exec.Cmd, stderr *stderrBuf, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		te := &ToolError{Args: cmd.Args[1:], Status: ee.ProcessState.String(), Stderr: condense(stderr.String(), 4000)}
		if stderr.stall > 0 && strings.Contains(te.Stderr, "operation was aborted") {
			// Its only words for the stall timeout.
			te.Stderr += fmt.Sprintf(" (no data moved for %v: the server stopped answering, or the source stalled)", stderr.stall)
		}
		return te
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil // it exited 0 but left a pipe open (a child): the data is complete
	}
	return fmt.Errorf("running globus-url-copy: %w", err)
}

// run runs globus-url-copy to completion.
func (b *Backend) run(ctx context.Context, args ...string) error {
	cmd, stderr := b.command(ctx, args...)
	return runErr(ctx, cmd, stderr, cmd.Run())
}

// partial is the -off/-len options of a partial transfer; n < 0 reads to
// the end. -off 0 is given explicitly: with either option present
// globus-url-copy makes a partial transfer (GridFTP ERET/ESTO), which
// never truncates the destination.
func partial(off, n int64) []string {
	a := []string{"-off", strconv.FormatInt(off, 10)}
	if n >= 0 {
		a = append(a, "-len", strconv.FormatInt(n, 10))
	}
	return a
}

// parallel is the -p option for Options.Parallelism.
func (b *Backend) parallel() []string {
	if b.opts.Parallelism > 1 {
		return []string{"-p", strconv.Itoa(b.opts.Parallelism)}
	}
	return nil
}

// procReader streams globus-url-copy's stdout: the bytes of a range, then
// (at the end) the run's outcome.
type procReader struct {
	ctx    context.Context
	cmd    *exec.Cmd
	stderr *stderrBuf
	out    io.ReadCloser
	left   int64 // bytes still wanted; -1: to the end
	what   string

	once sync.Once
	err  error // the run's outcome, set by finish
	done bool
}

// finish waits for the process (killing it first if kill) and records
// its outcome.
func (r *procReader) finish(kill bool) error {
	r.once.Do(func() {
		if kill {
			r.cmd.Process.Kill()
		}
		err := r.cmd.Wait()
		if kill {
			err = nil // we killed it: not its failure
		}
		r.err = runErr(r.ctx, r.cmd, r.stderr, err)
		if r.err != nil {
			r.err = fmt.Errorf("gridftp: read %s: %w", r.what, r.err)
		}
		r.done = true
	})
	return r.err
}

func (r *procReader) Read(p []byte) (int, error) {
	if r.done {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	if r.left == 0 {
		// All asked for has arrived: the outcome decides whether it
		// was the whole story (globus-url-copy may still fail).
		io.Copy(io.Discard, r.out)
		if err := r.finish(false); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	k, err := r.out.Read(p)
	if r.left > 0 {
		r.left -= int64(k)
	}
	if err == io.EOF {
		// The process closed stdout: it has ended or is ending. Its
		// exit status says whether the bytes so far are all there is
		// (the range ran past the end of the file) or it failed.
		if ferr := r.finish(false); ferr != nil {
			return k, ferr
		}
		return k, io.EOF
	}
	if err != nil {
		r.finish(true)
		if cerr := r.ctx.Err(); cerr != nil {
			err = cerr
		}
		r.err = fmt.Errorf("gridftp: read %s: %w", r.what, err)
		return k, r.err
	}
	return k, nil
}

// Close waits for globus-url-copy, killing it if the range was not read
// to the end (the caller gave up on it: that is not a failure), and
// reports its failure if it failed on its own.
func (r *procReader) Close() error {
	if r.done {
		return r.err
	}
	if r.left == 0 {
		io.Copy(io.Discard, r.out)
		return r.finish(false)
	}
	r.finish(true)
	return nil
}

// spooled is a range that globus-url-copy wrote into an unlinked
// temporary file.
type spooled struct {
	*io.SectionReader
	f *os.File
}

func (s spooled) Close() error { return s.f.Close() }
