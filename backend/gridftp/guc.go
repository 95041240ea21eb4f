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
	// secrets are strings String never shows (the passwords of the
	// run's URLs, as given and percent-encoded): the tool may quote a
	// URL in a message, and the message becomes an error.
	secrets []string
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
	return redact(b.buf.String(), b.secrets)
}

// redact replaces every secret in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return s
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
	if b.proxy != "" {
		// After Options.Env: the credential's proxy wins (exec keeps
		// the last value of a variable).
		cmd.Env = append(cmd.Env, "X509_USER_PROXY="+b.proxy)
	}
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

// runPair runs globus-url-copy with opts and one transfer, src to dst, to
// completion (see transfer).
func (b *Backend) runPair(ctx context.Context, opts []string, src, dst string) error {
	r, err := b.transfer(ctx, opts, []pair{{src, dst}}, b.pass)
	if err != nil {
		return err
	}
	return runErr(ctx, r.Cmd, r.stderr, r.Run())
}

// pair is one transfer of a globus-url-copy run: source and destination
// URLs (loginURL, fileURL, or a special one such as "-").
type pair struct{ src, dst string }

// listFD is the descriptor number globus-url-copy reads its transfer
// list from (-f /dev/fd/3): the first of exec.Cmd.ExtraFiles.
const listFD = 3

// gucRun is a prepared globus-url-copy run whose transfers may be in a
// list it reads from a pipe. Start (and Run) close this process's copy
// of the pipe's read end once the child has its own.
type gucRun struct {
	*exec.Cmd
	stderr *stderrBuf
	list   *os.File // read end of the list's pipe; nil without a list
	wlist  *os.File // its write end, until the feeder has it
	lines  string   // the list
}

// Start starts the run and the goroutine that feeds it its list.
func (r *gucRun) Start() error {
	err := r.Cmd.Start()
	if r.list == nil {
		return err
	}
	r.list.Close()
	if err != nil {
		r.wlist.Close()
		return err
	}
	w, lines := r.wlist, r.lines
	go func() {
		// Fails (EPIPE) rather than blocks if the child exits first:
		// no other process holds the read end. The child's failure
		// tells what went wrong.
		io.WriteString(w, lines)
		w.Close()
	}()
	return nil
}

// discard releases the list's pipe of a run that will not be started.
func (r *gucRun) discard() {
	if r.list != nil {
		r.list.Close()
		r.wlist.Close()
	}
}

// Run starts the run and waits for it.
func (r *gucRun) Run() error {
	if err := r.Start(); err != nil {
		return err
	}
	return r.Wait()
}

// transfer prepares a globus-url-copy run of opts and the transfers in
// pairs. URLs that carry a user name and password (loginURL) never go on
// the command line, where every local user can read them (ps,
// /proc/PID/cmdline): globus-url-copy takes URLs only as arguments or
// in a list file (-f), and reads no password from its environment or
// from a prompt, so such URLs are written to a pipe that it reads as its
// list (-f /dev/fd/3). A transfer without a secret keeps its URLs on the
// command line, where they help whoever looks at a failing run. secrets
// are kept out of the run's error messages.
func (b *Backend) transfer(ctx context.Context, opts []string, pairs []pair, secrets ...string) (*gucRun, error) {
	hidden := len(pairs) != 1
	for _, p := range pairs {
		// A URL of this package has '@' only in its user part:
		// paths are percent-encoded.
		if strings.Contains(p.src, "@") || strings.Contains(p.dst, "@") {
			hidden = true
		}
	}
	args := append([]string{}, opts...)
	if !hidden {
		args = append(args, pairs[0].src, pairs[0].dst)
	} else {
		args = append(args, "-f", "/dev/fd/"+strconv.Itoa(listFD))
	}
	cmd, stderr := b.command(ctx, args...)
	for _, s := range secrets {
		if s != "" {
			stderr.secrets = append(stderr.secrets, s, escape(s))
		}
	}
	r := &gucRun{Cmd: cmd, stderr: stderr}
	if !hidden {
		return r, nil
	}
	var list strings.Builder
	for _, p := range pairs {
		// Percent-encoded URLs: no quote, space or newline can break
		// a line. "-" and file:///dev/stdin mean stdout and stdin in
		// a list as on the command line.
		fmt.Fprintf(&list, "\"%s\" \"%s\"\n", p.src, p.dst)
	}
	rp, wp, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("transfer list: %w", err)
	}
	cmd.ExtraFiles = []*os.File{rp}
	r.list, r.wlist, r.lines = rp, wp, list.String()
	return r, nil
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
