package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend/file"
	"github.com/sluice-dtn/sluice/backend/gridftp"
	"github.com/sluice-dtn/sluice/backend/root"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/copyjob"
)

type cpFlags struct {
	recursive    bool
	cc, p, pp    int
	checksum     string
	token        string
	tokenKey     string
	jsonOut      bool
	journalDir   string
	noThirdParty bool
	chunkMin     int64
	subWrite     int64
	closers      []func() error // backends to close when the copy ends
}

func newCpCmd() *cobra.Command {
	var f cpFlags
	cmd := &cobra.Command{
		Use:   "cp [flags] SRC... DST",
		Short: "Copy files and directories between local paths and sluice agents",
		Long: `Copies files with concurrency (partial transfers of one file at once), verifies an
end-to-end checksum, and writes every file under a temporary name that is renamed
only after verification: the destination never holds a partial file.

SRC and DST are local paths (or file:///abs/path), agent URLs
(sluice://host:port/path, sluices:// for TLS), GridFTP URLs (ftp://, gsiftp://,
through globus-url-copy; --p sets its streams) or XRootD URLs (root://host//path). Between two agents the destination
pulls the data from the source itself (third-party copy). Interrupted and run again,
cp resumes large files from their checkpoint journal and skips files already copied.

Tokens: --token (or SLUICE_TOKEN) is sent as is; --token-key FILE mints short-lived
tokens from the key the agents were started with.`,
		Example: `  sluice cp --token-key ~/.sluice/key big.h5 sluice://dtn1:7000/data/
  sluice cp -r --cc 8 sluice://dtn1:7000/run7 sluice://dtn2:7000/archive/ --json`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runCp(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.recursive, "recursive", "r", false, "copy directories recursively")
	fl.IntVar(&f.cc, "cc", 4, "concurrency: partial transfers of one large file at once")
	fl.IntVar(&f.p, "p", 1, "parallel streams per partial transfer (GridFTP; the sluice agent uses one stream per partial transfer)")
	fl.IntVar(&f.pp, "pp", 8, "small files in flight at once (pipelining)")
	fl.StringVar(&f.checksum, "checksum", "adler32", "adler32, md5, sha256, crc32c or none")
	fl.StringVar(&f.token, "token", os.Getenv("SLUICE_TOKEN"), "bearer token for agents (default $SLUICE_TOKEN)")
	fl.StringVar(&f.tokenKey, "token-key", "", "mint short-lived tokens from this key file")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON summary")
	fl.StringVar(&f.journalDir, "journal-dir", "", "where checkpoint journals live (default: the user's state directory)")
	fl.BoolVar(&f.noThirdParty, "no-third-party", false, "move data through this process even between two agents")
	fl.Int64Var(&f.chunkMin, "chunk-min", 0, "smallest partial transfer in bytes (default 8 MiB)")
	fl.Int64Var(&f.subWrite, "sub-write", 0, "bytes per checkpointed write (default 4 MiB locally, 16 MiB to an agent)")
	return cmd
}

// endpoint turns a command-line location into a copyjob endpoint.
func (f *cpFlags) endpoint(ctx context.Context, loc string, write bool, client *http.Client) (copyjob.Endpoint, error) {
	if strings.HasPrefix(loc, "sluice://") || strings.HasPrefix(loc, "sluices://") {
		base, p, err := sluice.ParseURL(loc)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		tok, err := f.tokenFor(p, write)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		b, err := sluice.New(base, tok, client)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		ep := copyjob.Endpoint{Backend: b, Path: p, URL: loc}
		if write {
			ep.Puller = b
		} else {
			ep.Token = tok // shown by a destination agent that pulls from here
		}
		return ep, nil
	}
	if strings.HasPrefix(loc, "ftp://") || strings.HasPrefix(loc, "gsiftp://") {
		base, p, err := gridftp.ParseURL(loc)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		b, err := gridftp.New(base, gridftp.Options{Parallelism: f.p})
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		f.closers = append(f.closers, b.Close)
		return copyjob.Endpoint{Backend: b, Path: p, URL: loc}, nil
	}
	if strings.HasPrefix(loc, "root://") || strings.HasPrefix(loc, "xroot://") {
		addr, p, err := root.ParseURL(loc)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		b, err := root.New(ctx, addr, root.Options{})
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		f.closers = append(f.closers, b.Close)
		return copyjob.Endpoint{Backend: b, Path: p, URL: loc}, nil
	}
	p := strings.TrimPrefix(loc, "file://")
	if strings.Contains(p, "://") {
		return copyjob.Endpoint{}, fmt.Errorf("%s: unsupported URL scheme (local paths, file://, sluice://, sluices://, ftp://, gsiftp://, root://)", loc)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return copyjob.Endpoint{}, err
	}
	if strings.HasSuffix(p, "/") {
		abs += "/"
	}
	b, err := file.New("/")
	if err != nil {
		return copyjob.Endpoint{}, err
	}
	return copyjob.Endpoint{Backend: b, Path: abs, URL: "file://" + abs}, nil
}

// tokenFor returns the token for one agent path: the given one, or one
// minted for an hour with the least scope the copy needs (read below the
// source; read and write in the destination's directory, where the
// temporary file goes).
func (f *cpFlags) tokenFor(p string, write bool) (string, error) {
	if f.tokenKey == "" {
		if f.token == "" {
			return "", errors.New("an agent URL needs --token, $SLUICE_TOKEN or --token-key")
		}
		return f.token, nil
	}
	key, err := auth.LoadKey(f.tokenKey)
	if err != nil {
		return "", err
	}
	c := auth.Claims{Sub: "sluice-cp", Scope: auth.ScopeRead, Prefix: cleanPrefix(p), Aud: auth.AnyAudience, Exp: time.Now().Add(time.Hour).Unix()}
	if write {
		c.Scope = auth.ScopeRW
		c.Prefix = cleanPrefix(filepath.Dir(strings.TrimSuffix(p, "/")))
		if strings.HasSuffix(p, "/") {
			c.Prefix = cleanPrefix(p)
		}
	}
	return auth.Mint(key, c)
}

func cleanPrefix(p string) string {
	p = "/" + strings.Trim(filepath.ToSlash(filepath.Clean("/"+p)), "/")
	return p
}

func defaultJournalDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sluice", "journal"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for journals (use --journal-dir): %w", err)
	}
	return filepath.Join(home, ".local", "state", "sluice", "journal"), nil
}

func runCp(ctx context.Context, stdout, stderr io.Writer, f cpFlags, args []string) error {
	if f.cc < 1 || f.pp < 1 || f.p < 1 {
		return errors.New("--cc, --p and --pp must be at least 1")
	}
	client := &http.Client{Transport: sluice.NewTransport()}
	defer func() {
		for _, c := range f.closers {
			c()
		}
	}()
	var srcs []copyjob.Endpoint
	for _, a := range args[:len(args)-1] {
		ep, err := f.endpoint(ctx, a, false, client)
		if err != nil {
			return err
		}
		srcs = append(srcs, ep)
	}
	dst, err := f.endpoint(ctx, args[len(args)-1], true, client)
	if err != nil {
		return err
	}
	jd := f.journalDir
	if jd == "" {
		if jd, err = defaultJournalDir(); err != nil {
			return err
		}
	}
	sub := f.subWrite
	if sub == 0 && strings.HasPrefix(dst.URL, "sluice") {
		sub = 16 << 20 // one request per sub-write: fewer, larger writes to an agent
	}
	opt := copyjob.Options{CC: f.cc, Files: f.pp, Checksum: f.checksum, Recursive: f.recursive, JournalDir: jd,
		ChunkMin: f.chunkMin, SubWrite: sub, NoThirdParty: f.noThirdParty}
	show := newProgressView(stderr)
	sum, err := copyjob.Run(ctx, srcs, dst, opt, show.update)
	show.finish()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted: run the same command again to resume")
		}
		return err
	}
	if f.jsonOut {
		return printJSON(stdout, sum)
	}
	fmt.Fprintf(stderr, "copied %d files, %.1f MB in %.1f s (%.1f MB/s), %d retries, checksum %s\n",
		sum.Files, float64(sum.Bytes)/1e6, sum.Seconds, sum.MBps, sum.Retries, sum.Checksum)
	return nil
}

// progressView shows progress: a bar on a terminal, a line every two
// seconds otherwise.
type progressView struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	cur   copyjob.Progress
	p     *mpb.Progress
	bar   *mpb.Bar
	last  time.Time
	total int64
}

func newProgressView(w io.Writer) *progressView {
	v := &progressView{w: w, last: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			v.tty = true
		}
	}
	return v
}

func (v *progressView) update(p copyjob.Progress) {
	v.mu.Lock()
	v.cur = p
	v.mu.Unlock()
	if v.tty {
		if v.p == nil {
			v.p = mpb.New(mpb.WithOutput(v.w), mpb.WithWidth(40))
			v.bar = v.p.New(p.Bytes, mpb.BarStyle(),
				mpb.PrependDecorators(decor.Name("copy "), decor.CountersKibiByte("% .1f / % .1f")),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
					v.mu.Lock()
					c := v.cur
					v.mu.Unlock()
					return fmt.Sprintf(" %.1f MB/s  %d/%d files", c.Rate/1e6, c.FilesDone, c.Files)
				})))
			v.total = p.Bytes
		}
		v.bar.SetCurrent(p.Done)
		return
	}
	if time.Since(v.last) < 2*time.Second {
		return
	}
	v.last = time.Now()
	pct := 100.0
	if p.Bytes > 0 {
		pct = 100 * float64(p.Done) / float64(p.Bytes)
	}
	fmt.Fprintf(v.w, "%5.1f%%  %.1f / %.1f MB  %.1f MB/s  %d/%d files  %d retries\n",
		pct, float64(p.Done)/1e6, float64(p.Bytes)/1e6, p.Rate/1e6, p.FilesDone, p.Files, p.Retries)
}

func (v *progressView) finish() {
	if v.p != nil {
		if !v.bar.Completed() {
			v.bar.SetTotal(v.total, true)
		}
		v.p.Wait()
	}
}
