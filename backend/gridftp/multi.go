package gridftp

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	var list strings.Builder
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
		// Both URLs are percent-encoded: no space, quote or newline
		// can break the list's lines.
		from, to := b.url(sp), fileURL(local)
		if !down {
			from, to = to, from
		}
		fmt.Fprintf(&list, "\"%s\" \"%s\"\n", from, to)
	}
	lf, err := os.CreateTemp(b.opts.TempDir, "sluice-gridftp-list-")
	if err != nil {
		return wrap(op, what, err)
	}
	defer os.Remove(lf.Name())
	_, err = io.WriteString(lf, list.String())
	if cerr := lf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wrap(op, what, err)
	}
	args := append([]string{"-cd"}, b.parallel()...)
	if b.opts.Concurrency > 1 {
		args = append(args, "-cc", strconv.Itoa(b.opts.Concurrency))
	}
	if b.opts.Pipelining {
		args = append(args, "-pp")
	}
	args = append(args, "-f", lf.Name())
	return wrap(op, what, b.run(ctx, args...))
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
// environment) are b's. globus-url-copy says nothing of its progress, so
// progress is never called.
func (b *Backend) PullFrom(src *Backend) func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
	return func(ctx context.Context, srcPath, dstPath string, off, n int64, _ func(int64)) error {
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
		args := append(append(append(mk, b.parallel()...), partial(off, n)...), src.url(ssp), b.url(dsp))
		return wrap("pull", what, b.run(ctx, args...))
	}
}
