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
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sys/unix"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/all"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/client"
	"github.com/sluice-dtn/sluice/copyjob"
	"github.com/sluice-dtn/sluice/dataset"
)

type cpFlags struct {
	recursive    bool
	cc, p, pp    int
	auto         bool
	sample       bool    // with auto and -r: sample chunks (dataset.Auto) instead of tuning live
	fixed        bool    // --cc, --p or --pp given: the settings are the user's
	bandwidth    float64 // MB/s for --auto; 0: probe
	verbose      bool
	checksum     string
	token        string
	tokenKey     string
	jsonOut      bool
	journalDir   string
	noThirdParty bool
	overwrite    bool
	syncLevel    string
	preserve     bool // --preserve-mtime
	chunkMin     int64
	subWrite     int64
	closers      []func() error // backends to close when the copy ends
	// tokenTTL is how long minted tokens last (tokenLife unless set by
	// a test).
	tokenTTL time.Duration
	pol      cpPolicyFlags
	multi    cpMultiFlags
	// svc is the login that sluice://NAME/path locations (the service's
	// endpoint names) are resolved with; svcClient its client, once
	// made.
	svc       clientConfig
	svcClient *client.Client
}

func newCpCmd() *cobra.Command {
	var f cpFlags
	cmd := &cobra.Command{
		Use:   "cp [flags] SRC... DST",
		Short: "Copy files and directories between local paths and sluice agents",
		Long: `cp copies files and trees between local paths, the service's endpoints after
sluice login (sluice://ENDPOINT/path), agents by address (sluice://host:port/path),
GridFTP (ftp://) and XRootD (root://) servers: checksummed, renamed into place,
tuned while it runs, resumed by running it again. See docs/cp.md.`,
		Example: `  sluice cp -r sluice://dtn1/run42 /data/run42      # after sluice login
  sluice cp --token-key ~/.sluice/key big.h5 sluice://dtn1:7000/data/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && len(cmd.Flags().Lookup("sources").Value.(pflag.SliceValue).GetSlice()) > 0 {
				return nil // sluice cp --sources A,B DST
			}
			return cobra.MinimumNArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fl := cmd.Flags()
			if c := f.checksum; c != "auto" && c != "none" && !slices.Contains(backend.Algorithms, c) {
				return fmt.Errorf("--checksum %q: want auto, %s or none", c, strings.Join(backend.Algorithms, ", "))
			}
			if len(f.multi.sources) > 0 {
				if f.syncLevel != "" || f.preserve {
					return errors.New("--sync and --preserve-mtime are not taken with --sources yet (one file from several replicas)")
				}
				return runMultiCp(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args)
			}
			if err := f.multi.check(fl); err != nil {
				return err
			}
			f.fixed = fl.Changed("cc") || fl.Changed("p") || fl.Changed("pp")
			if err := f.pol.check(fl); err != nil {
				return err
			}
			if f.pol.server != "" {
				if fl.Changed("auto") && f.auto {
					return errors.New("--policy-server: the adaptive client chooses the concurrency; --auto does not apply")
				}
				f.auto = false
			}
			switch {
			case fl.Changed("auto") && f.auto && f.fixed:
				return errors.New("--auto chooses --cc, --p and --pp itself: give either --auto or the settings")
			case f.sample && (!f.recursive || f.fixed || !f.auto):
				return errors.New("--sample is a way of --auto to plan a directory's copy: use it with -r and without --cc, --p, --pp or --auto=false")
			case !(f.bandwidth >= 0 && f.bandwidth <= 1e7):
				return fmt.Errorf("--bandwidth %v: want MB/s from 0 (probe) to 1e7 (10 TB/s)", f.bandwidth)
			case fl.Changed("bandwidth") && !f.sample:
				return errors.New("--bandwidth is what --sample plans from: give --sample too (the live tuning measures the path)")
			case f.syncLevel != "" && !backend.ValidSyncLevel(f.syncLevel):
				return fmt.Errorf("--sync %q: want one of %s", f.syncLevel, strings.Join(backend.SyncLevels(), ", "))
			case f.syncLevel != "" && fl.Changed("overwrite") && !f.overwrite:
				return errors.New("--sync replaces the files that differ, --overwrite=false says to replace nothing: give one")
			}
			f.auto = f.auto && !f.fixed
			return runCp(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&f.recursive, "recursive", "r", false, "copy directories recursively")
	fl.IntVar(&f.cc, "cc", 8, "concurrency: files in flight at once")
	fl.IntVar(&f.p, "p", 4, "parallelism: partial transfers of one large file at once")
	fl.IntVar(&f.pp, "pp", 1, "pipelining: files asked for in one request (batch GET from an agent, with -r)")
	fl.BoolVar(&f.auto, "auto", true, "tune the number of streams while the copy runs (off when --cc, --p or --pp is given)")
	fl.BoolVar(&f.sample, "sample", false, "with -r: plan by sampling chunks (Yildirim's SC'13 client) instead of tuning live")
	fl.Float64Var(&f.bandwidth, "bandwidth", 0, "the path's bandwidth in MB/s for --sample (default: a short probe)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print each tuning window (with --sample, each chunk's settings and throughput)")
	fl.StringVar(&f.checksum, "checksum", "auto", "adler32, md5, sha256, crc32c, none, or auto: crc32c between local files and sluice agents, adler32 when a GridFTP or XRootD server is one end")
	fl.StringVar(&f.token, "token", defaultDataToken(), "data token for agents named by host:port (default $SLUICE_DATA_TOKEN)")
	fl.StringVar(&f.svc.Server, "server", "", "the service that sluice://ENDPOINT/path names (default $SLUICE_SERVER, then what sluice login saved)")
	fl.StringVar(&f.svc.Token, "api-token", "", "API token or @FILE for --server (default $SLUICE_TOKEN, then what sluice login saved)")
	fl.StringVar(&f.svc.CA, "ca", "", "the site's CA certificate (PEM) for https:// servers and sluices:// agents (default $SLUICE_CA, then what sluice login saved)")
	_ = fl.SetAnnotation("token", envAnnotation, []string{"SLUICE_DATA_TOKEN"})
	_ = fl.SetAnnotation("api-token", envAnnotation, []string{"SLUICE_TOKEN"})
	fl.StringVar(&f.tokenKey, "token-key", "", "mint short-lived tokens from this key file")
	fl.DurationVar(&f.tokenTTL, "token-ttl", tokenLife, "lifetime of each token minted with --token-key (a longer copy mints fresh ones as it goes)")
	fl.BoolVar(&f.jsonOut, "json", false, "print a JSON summary")
	fl.StringVar(&f.journalDir, "journal-dir", "", "where checkpoint journals live (default: the user's state directory)")
	fl.BoolVar(&f.noThirdParty, "no-third-party", false, "move data through this process even between two agents")
	fl.BoolVar(&f.overwrite, "overwrite", false, "replace destination files that differ from their source")
	fl.BoolVar(&f.preserve, "preserve-mtime", false, "give each file its source's modification time (not on GridFTP or XRootD destinations)")
	fl.StringVar(&f.syncLevel, "sync", "", "copy only what is missing or differs by this test, replacing what differs: "+strings.Join(backend.SyncLevels(), ", "))
	fl.Int64Var(&f.chunkMin, "chunk-min", 0, "smallest partial transfer in bytes (default 8 MiB)")
	fl.Int64Var(&f.subWrite, "sub-write", 0, "bytes per checkpointed write (default 4 MiB locally, 16 MiB to an agent)")
	f.pol.register(fl)
	f.multi.register(fl)
	moreFlags(cmd, "docs/cp.md", "server", "api-token", "ca", "pp", "verbose", "sample", "bandwidth", "chunk-min", "sub-write", "journal-dir", "no-third-party",
		"preserve-mtime", "token-ttl", "sources", "split", "probe", "no-replica-check", "policy-server", "policy-token",
		"policy-pair", "policy-client", "ci", "cmax", "delta", "adapt-every", "threshold", "follow-allocation")
	return cmd
}

// autoChecksum is --checksum auto. crc32c where every end computes it
// itself (local files, sluice agents): Go computes it in hardware, about
// 25 GB/s on this machine against adler32's 3.5 GB/s, and it is the
// stronger check (adler32 is weak on short inputs). adler32 where a
// GridFTP or XRootD server is an end: those servers compute it themselves
// (the Globus server offers no CRC32C), so nothing is read back through
// this process to check it.
func autoChecksum(eps ...copyjob.Endpoint) string {
	for _, e := range eps {
		for _, scheme := range []string{"ftp://", "gsiftp://", "root://", "xroot://"} {
			if strings.HasPrefix(e.URL, scheme) {
				return "adler32"
			}
		}
	}
	return "crc32c"
}

// endpoint turns a command-line location into a copyjob endpoint,
// through the registry of backends (backend/all).
// sluice://NAME/path (no port) names one of the service's endpoints:
// the server says where that agent is and gives the tokens, with the
// user's access rules.
func (f *cpFlags) endpoint(ctx context.Context, loc string, write bool, client *http.Client) (copyjob.Endpoint, error) {
	tokens := f.tokensFor
	if name, rest, ok := serviceName(loc); ok {
		agent, src, err := f.serviceAgent(ctx, loc, name, rest, write)
		if err != nil {
			return copyjob.Endpoint{}, err
		}
		loc = agent
		tokens = func(string, bool) (sluice.TokenSource, error) { return src, nil }
	}
	ep, closeEp, err := copyjob.Open(ctx, all.Registry(), loc, backend.OpenOptions{Write: write, HTTPClient: client, Tokens: tokens})
	if err != nil {
		return copyjob.Endpoint{}, err
	}
	f.closers = append(f.closers, closeEp)
	return ep, nil
}

// tokenLife is how long the tokens cp mints last. A copy that runs longer
// gets fresh ones as it goes (auth.Minter): a stolen token is good for an
// hour at most.
const tokenLife = time.Hour

// tokensFor returns the tokens for one agent path: the given one, or
// tokens minted for an hour with the least scope the copy needs (read
// below the source; read and write in the destination's directory, where
// the temporary file goes), a new one whenever the last has less than a
// quarter of its life left.
func (f *cpFlags) tokensFor(p string, write bool) (sluice.TokenSource, error) {
	if f.tokenKey == "" {
		if f.token == "" {
			return nil, errors.New("an agent named by host:port needs --token, $SLUICE_DATA_TOKEN or --token-key (or name it as the service does, sluice://ENDPOINT/path, after `sluice login`)")
		}
		if strings.HasPrefix(f.token, "sk_") || strings.HasPrefix(f.token, "sj_") {
			return nil, errors.New("--token is not a data token (API tokens start sk_): agents take data tokens (`sluice data-token`), or name the endpoint as the service does, sluice://ENDPOINT/path, to use your login")
		}
		return backend.StaticToken(f.token), nil
	}
	key, err := auth.LoadKey(f.tokenKey)
	if err != nil {
		return nil, err
	}
	c := auth.Claims{Sub: "sluice-cp", Scope: auth.ScopeRead, Prefix: cleanPrefix(p), Aud: auth.AnyAudience}
	if write {
		c.Scope = auth.ScopeRW
		c.Prefix = cleanPrefix(filepath.Dir(strings.TrimSuffix(p, "/")))
		if strings.HasSuffix(p, "/") {
			c.Prefix = cleanPrefix(p)
		}
	}
	ttl := f.tokenTTL
	switch {
	case ttl == 0:
		ttl = tokenLife
	case ttl < time.Second:
		return nil, fmt.Errorf("--token-ttl %v: want at least 1s", ttl)
	}
	m := &auth.Minter{Key: key, Claims: c, TTL: ttl}
	return m.Token, nil
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

// cpError is what cp reports for err: an interruption says how to resume.
func cpError(err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: run the same command again to resume", errInterrupted)
	}
	return err
}

// newCpTransport is the transport of a copy: one for the whole copy, so
// that connections opened by one chunk serve the next and no sample of
// --auto pays a start-up; enough idle connections per agent for cc
// channels, each with a batch and the checksums asked for beside it.
func newCpTransport() *http.Transport {
	tr := sluice.NewTransport()
	tr.MaxIdleConnsPerHost = 1024
	return tr
}

// resolve turns the command line's locations into endpoints on one HTTP
// client, and finds the journal directory; done closes what the endpoints
// opened.
func (f *cpFlags) resolve(ctx context.Context, srcArgs []string, dstArg string) (srcs []copyjob.Endpoint, dst copyjob.Endpoint, journalDir string, done func(), err error) {
	tr, err := f.agentTransport()
	if err != nil {
		return nil, dst, "", nil, err
	}
	client := &http.Client{Transport: tr}
	release := func() {}
	closeAll := func() {
		release()
		client.CloseIdleConnections()
		for _, c := range f.closers {
			c()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	for _, a := range srcArgs {
		ep, err := f.endpoint(ctx, strings.TrimSpace(a), false, client)
		if err != nil {
			return nil, dst, "", nil, err
		}
		srcs = append(srcs, ep)
	}
	if dst, err = f.endpoint(ctx, dstArg, true, client); err != nil {
		return nil, dst, "", nil, err
	}
	if f.checksum == "auto" {
		f.checksum = autoChecksum(append(srcs, dst)...)
	}
	journalDir = f.journalDir
	if journalDir == "" {
		if journalDir, err = defaultJournalDir(); err != nil {
			return nil, dst, "", nil, err
		}
	}
	// One run of a copy at a time: a second would share its temporary
	// files and journals.
	if release, err = copyjob.Lock(journalDir, srcs, dst); err != nil {
		release = func() {}
		return nil, dst, "", nil, err
	}
	return srcs, dst, journalDir, closeAll, nil
}

func runCp(ctx context.Context, stdout, stderr io.Writer, f cpFlags, args []string) error {
	if f.cc < 1 || f.pp < 1 || f.p < 1 {
		return errors.New("--cc, --p and --pp must be at least 1")
	}
	// Zero keeps the defaults; smaller pieces than these only multiply
	// requests and checkpoints (a 1-byte sub-write moves 0.1 MB/s).
	if f.chunkMin != 0 && f.chunkMin < 64<<10 {
		return fmt.Errorf("--chunk-min %d: want at least 65536 bytes (0: the default, 8 MiB)", f.chunkMin)
	}
	if f.subWrite != 0 && f.subWrite < 64<<10 {
		return fmt.Errorf("--sub-write %d: want at least 65536 bytes (0: the default)", f.subWrite)
	}
	if !(f.bandwidth >= 0 && f.bandwidth <= 1e7) {
		return fmt.Errorf("--bandwidth %v: want MB/s from 0 (probe) to 1e7 (10 TB/s)", f.bandwidth)
	}
	srcs, dst, jd, done, err := f.resolve(ctx, args[:len(args)-1], args[len(args)-1])
	if err != nil {
		return err
	}
	defer done()
	// Live tuning (the default) starts from the round trip to the
	// agents: it sets the tuner's windows, where it starts, and the size
	// of a sub-write to an agent.
	var live *autoPath
	if f.auto && !f.sample && f.pol.server == "" {
		if live, err = measureRTT(ctx, append(slices.Clone(srcs), dst)); err != nil {
			return err
		}
	}
	sub := f.subWrite
	if sub == 0 && strings.HasPrefix(dst.URL, "sluice") {
		// One request per sub-write: fewer, larger writes to an agent.
		sub = 16 << 20
		if live != nil {
			sub = copyjob.SubWriteFor(live.rtt())
		}
	}
	opt := copyjob.Options{CC: f.p, Files: f.cc, Checksum: f.checksum, Recursive: f.recursive, JournalDir: jd,
		ChunkMin: f.chunkMin, SubWrite: sub, NoThirdParty: f.noThirdParty, Overwrite: f.overwrite, Sync: f.syncLevel, PreserveModTime: f.preserve}
	show := newProgressView(stderr)
	var rep cpReport
	if f.pol.server != "" {
		rep, err = runPolicyCp(ctx, stderr, f, srcs, dst, opt, show)
	} else if f.recursive {
		rep, err = runDatasetCp(ctx, stderr, f, srcs, dst, opt, show, live)
	} else {
		if live != nil {
			rep.Auto = live
			opt.Tune = &copyjob.LiveOptions{Window: copyjob.WindowFor(live.rtt()), Start: copyjob.StartFor(live.rtt(), true), OnWindow: verboseWindow(f.verbose, stderr)}
		}
		rep.Summary, err = copyjob.Run(ctx, srcs, dst, opt, show.update)
		show.finish()
	}
	if f.jsonOut {
		// Also when the copy failed: a script learns what was done
		// (the error is in the report too, and in the exit status).
		if err != nil {
			rep.Error = cpError(err).Error()
		}
		if jerr := printJSON(stdout, rep); jerr != nil && err == nil {
			return jerr
		}
	}
	if err != nil && !f.jsonOut && errors.Is(err, context.Canceled) {
		// Ctrl-C: say what is kept before saying how to resume.
		fmt.Fprintln(stderr, keptLine(rep.Summary, show.latest()))
	}
	var given *copyjob.FilesError
	if err != nil && (f.jsonOut || !errors.As(err, &given)) {
		return cpError(err)
	}
	if f.jsonOut {
		return nil
	}
	sum := rep.Summary
	dirs := ""
	if sum.Dirs > 0 {
		dirs = fmt.Sprintf(" (and %d empty directories)", sum.Dirs)
	}
	fmt.Fprintf(stderr, "copied %d files%s, %.1f MB in %.1f s (%.1f MB/s), %d retries, checksum %s\n",
		sum.Files-sum.Skipped, dirs, float64(sum.Bytes-sum.SkippedBytes)/1e6, sum.Seconds, sum.MBps, sum.Retries, sum.Checksum)
	if sum.Skipped > 0 {
		fmt.Fprintf(stderr, "skipped %d files (%.1f MB) already in place: same size and checksum\n", sum.Skipped, float64(sum.SkippedBytes)/1e6)
	}
	if given != nil {
		// The others were copied: say which were not, and why, and
		// fail.
		for i, fl := range sum.Failures {
			if i == 20 {
				fmt.Fprintf(stderr, "not copied: %d more (--json lists them all)\n", len(sum.Failures)-20)
				break
			}
			fmt.Fprintf(stderr, "not copied: %s: %s\n", fl.Src, fl.Error)
		}
		if given.Stopped {
			return fmt.Errorf("%d files could not be copied, and the copy stopped there", given.Failed)
		}
		return fmt.Errorf("%d files could not be copied (the others were)", given.Failed)
	}
	if a := rep.Auto; a != nil && len(sum.Tuning) > 0 {
		lo, hi := sum.Tuning[0].Level, sum.Tuning[0].Level
		for _, w := range sum.Tuning {
			lo, hi = min(lo, w.Level), max(hi, w.Level)
		}
		fmt.Fprintf(stderr, "auto: rtt %.1f ms; %d windows of %.1f s, %d to %d streams, the last %d\n",
			a.RTTms, len(sum.Tuning), copyjob.WindowFor(a.rtt()).Seconds(), lo, hi, sum.Tuning[len(sum.Tuning)-1].Level)
	}
	if a := rep.Auto; a != nil && len(sum.Steps) > 0 {
		last := sum.Steps[len(sum.Steps)-1]
		fmt.Fprintf(stderr, "auto: rtt %.1f ms, bandwidth %.1f MB/s (%s), BDP %.2f MB; %d steps, the last with pp %d, p %d, cc %d\n",
			a.RTTms, a.Bandwidth/1e6, a.BandwidthFrom, float64(a.BDP)/1e6, len(sum.Steps), last.PP, last.P, last.CC)
	}
	return nil
}

// keptLine says what an interrupted copy leaves for the same command run
// again: the files put in place whole, and the bytes of unfinished ones
// that their checkpoint journals keep (bytes in flight since the last
// checkpoint are sent again). p is the copy's last progress, for the
// totals.
func keptLine(sum copyjob.Summary, p copyjob.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "interrupted: %d of %d files copied (%s", sum.Files, p.Files, siBytes(sum.Bytes))
	if sum.Skipped > 0 {
		fmt.Fprintf(&b, ", %d of them already in place", sum.Skipped)
	}
	b.WriteString(")")
	if sum.PartialFiles > 0 {
		noun := "files"
		if sum.PartialFiles == 1 {
			noun = "file"
		}
		fmt.Fprintf(&b, "; %s of %d unfinished %s kept to resume from", siBytes(sum.PartialBytes), sum.PartialFiles, noun)
	}
	fmt.Fprintf(&b, "; %s of %s kept in all", siBytes(sum.Bytes+sum.PartialBytes), siBytes(p.Bytes))
	return b.String()
}

// cpReport is what `sluice cp --json` prints: the copy's summary and, for
// --auto, what it measured of the path.
type cpReport struct {
	copyjob.Summary
	// Error is why the copy stopped, if it did; the rest says what was
	// done before.
	Error string    `json:"error,omitempty"`
	Auto  *autoPath `json:"auto,omitempty"`
	// Adaptation is the adaptive client's timeline (--policy-server).
	Adaptation []copyjob.AdaptPoint `json:"adaptation,omitempty"`
}

// autoPath is the path as --auto saw it before planning. Live tuning
// measures only the round trip; --sample also the bandwidth.
type autoPath struct {
	Mode          string  `json:"mode"` // "live" or "sample"
	RTTms         float64 `json:"rtt_ms"`
	Bandwidth     float64 `json:"bandwidth_bps,omitempty"`
	BandwidthFrom string  `json:"bandwidth_from,omitempty"` // "flag", "probe" or "default"
	BDP           int64   `json:"bdp,omitempty"`            // what pipelining and parallelism were planned for
}

func (a *autoPath) rtt() time.Duration { return time.Duration(a.RTTms * float64(time.Millisecond)) }

// measureRTT is what live tuning knows of the path before it starts: the
// round trip to the agents (0 between local files), which sets the length
// of its windows.
func measureRTT(ctx context.Context, eps []copyjob.Endpoint) (*autoPath, error) {
	rtt, err := copyjob.MeasureRTT(ctx, eps, rttRequests)
	if err != nil {
		return nil, err
	}
	return &autoPath{Mode: "live", RTTms: float64(rtt) / float64(time.Millisecond)}, nil
}

// verboseWindow prints each tuning window with -v.
func verboseWindow(on bool, w io.Writer) func(copyjob.TunePoint) {
	if !on {
		return nil
	}
	return func(p copyjob.TunePoint) {
		fmt.Fprintf(w, "window %6.1f s  %3d streams  %8.1f MB/s\n", p.At, p.Level, p.Rate/1e6)
	}
}

// Measuring the path for --auto: two stats for the round trip (the first
// also opens the connection, the second is one round trip; each more would
// delay the copy by one), and a probe of parallel reads for the bandwidth,
// kept short (it moves bytes that are dropped) but with enough streams to
// see past one connection's window.
const (
	rttRequests      = 2
	probeStreams     = 8
	probeTime        = 300 * time.Millisecond
	probeShare       = 20    // the probe reads at most 1/probeShare of the dataset's bytes
	defaultBandwidth = 125e6 // 1 Gb/s: what --auto assumes when it cannot measure
)

// runDatasetCp copies a directory tree through copyjob's Dataset: with
// --auto as dataset.Auto plans it from the measured path, otherwise in
// one chunk with the given settings.
func runDatasetCp(ctx context.Context, stderr io.Writer, f cpFlags, srcs []copyjob.Endpoint, dst copyjob.Endpoint,
	opt copyjob.Options, show *progressView, live *autoPath) (cpReport, error) {
	var rep cpReport
	d, err := copyjob.PrepareDataset(ctx, srcs, dst, opt)
	if err != nil {
		return rep, err
	}
	if a := live; a != nil {
		rep.Auto = a
		rep.Summary, err = copyjob.RunLive(ctx, d, copyjob.LiveOptions{Window: copyjob.WindowFor(a.rtt()), Start: copyjob.StartFor(a.rtt(), false), OnWindow: verboseWindow(f.verbose, stderr)}, show.update)
		show.finish()
		return rep, err
	}
	var pl dataset.Planner = copyjob.Fixed(d.Files(), f.pp, f.p, f.cc)
	if f.auto {
		a, err := measurePath(ctx, d, f.bandwidth)
		if err != nil {
			return rep, err
		}
		rep.Auto = a
		// A part of a split file is a transfer of its own: below the
		// BDP it cannot fill the path (the paper's reason not to split
		// files smaller than the BDP at all).
		d.SetPartMin(max(copyjob.DefaultPartMin, a.BDP))
		rtt := time.Duration(a.RTTms * float64(time.Millisecond))
		if pl, err = dataset.Auto(d.Files(), rtt, a.Bandwidth); err != nil {
			return rep, err
		}
		if f.verbose {
			fmt.Fprintf(stderr, "auto: rtt %.1f ms, bandwidth %.1f MB/s (%s): BDP %.2f MB\n", a.RTTms, a.Bandwidth/1e6, a.BandwidthFrom, float64(a.BDP)/1e6)
		}
	}
	if f.verbose {
		pl = &verbosePlanner{Planner: pl, w: stderr}
	}
	rep.Summary, err = copyjob.RunDataset(ctx, d, pl, show.update)
	show.finish()
	return rep, err
}

// measurePath is what --auto knows of the path before it plans: the round
// trip to the agents, and the bandwidth from --bandwidth, else a probe of
// the source (when the path has a round trip to speak of), else a default.
func measurePath(ctx context.Context, d *copyjob.Dataset, flagMBps float64) (*autoPath, error) {
	rtt, err := d.MeasureRTT(ctx, rttRequests)
	if err != nil {
		return nil, err
	}
	a := &autoPath{Mode: "sample", RTTms: float64(rtt) / float64(time.Millisecond), Bandwidth: defaultBandwidth, BandwidthFrom: "default"}
	switch {
	case flagMBps > 0:
		a.Bandwidth, a.BandwidthFrom = flagMBps*1e6, "flag"
	case rtt > 0:
		// With no round trip (local files) the BDP is its floor whatever
		// the bandwidth: nothing to probe.
		if bw, err := d.ProbeBandwidth(ctx, probeStreams, probeTime, d.Progress().Bytes/probeShare); err == nil && bw > 0 {
			a.Bandwidth, a.BandwidthFrom = bw, "probe"
		}
	}
	a.BDP = dataset.AutoParams(rtt, a.Bandwidth).BDP
	return a, nil
}

// verbosePlanner prints each step of the planner it wraps when its
// throughput is known.
type verbosePlanner struct {
	dataset.Planner
	w    io.Writer
	cur  dataset.Step
	step int
}

func (v *verbosePlanner) Next() (dataset.Step, bool) {
	st, ok := v.Planner.Next()
	v.cur = st
	return st, ok
}

func (v *verbosePlanner) Observe(bytesPerSec float64) {
	v.step++
	c := v.cur.Chunk
	fmt.Fprintf(v.w, "step %d %-9s %5d files %9.1f MB  pp %2d  p %2d  cc %2d  %8.1f MB/s\n",
		v.step, v.cur.Phase, c.Len(), float64(c.Size())/1e6, c.PP, c.P, c.CC, bytesPerSec/1e6)
	v.Planner.Observe(bytesPerSec)
}

// progressView shows progress: a bar on a terminal, a line every two
// seconds otherwise, each with the rate and an ETA, sizes and rates in
// decimal units.
type progressView struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	cur   copyjob.Progress
	p     *mpb.Progress
	bar   *mpb.Bar
	last  time.Time
	total int64
	// shown is the most bytes the bar has shown of total. The bar does
	// not go back: a copy stopped by Ctrl-C counts only its finished
	// files at the end (the bytes of the one in flight are in its
	// journal), which redrew the bar at 0.0 b of 2.0 GiB.
	shown int64
	// refresh draws the bar on a writer that is not a terminal (tests).
	refresh bool
}

func newProgressView(w io.Writer) *progressView {
	v := &progressView{w: w, last: time.Now()}
	if f, ok := w.(*os.File); ok {
		// A terminal, not any character device: /dev/null is one too.
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
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
			v.p = mpb.New(mpb.WithOutput(v.w), mpb.ContainerOptional(mpb.WithAutoRefresh(), v.refresh))
			// Made without a total, since mpb takes one (SetTotal)
			// only for such a bar: a job watched from its submission
			// has no size until the server has stated its files.
			v.bar = v.p.New(0, mpb.BarStyle(), mpb.BarWidth(30),
				mpb.PrependDecorators(decor.CountersKiloByte("% .1f / % .1f")),
				mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
					v.mu.Lock()
					c := v.cur
					v.mu.Unlock()
					// Short enough for the bar to fit in 80 columns.
					s := fmt.Sprintf(" %s %d/%d files", siRate(c.Rate), c.FilesDone, c.Files)
					if e := etaText(eta(c.Bytes, c.Done, c.Rate)); e != "" {
						s += " " + e
					}
					return s
				})))
		}
		if p.Bytes != v.total {
			v.bar.SetTotal(p.Bytes, false)
			v.total, v.shown = p.Bytes, 0
		}
		v.shown = max(v.shown, barCurrent(p))
		v.bar.SetCurrent(v.shown)
		if p.Files > 0 && p.FilesDone >= p.Files {
			// The bar ends at its total, and takes no other after.
			v.bar.EnableTriggerComplete()
		}
		return
	}
	if time.Since(v.last) < 2*time.Second {
		return
	}
	v.last = time.Now()
	e := etaText(eta(p.Bytes, p.Done, p.Rate))
	if e != "" {
		e = "  " + e
	}
	fmt.Fprintf(v.w, "%5.1f%%  %s / %s  %s  %d/%d files  %d retries%s\n",
		percent(p), siBytes(p.Done), siBytes(p.Bytes), siRate(p.Rate), p.FilesDone, p.Files, p.Retries, e)
}

// percent is how far a copy is, by bytes: never 100 while files remain,
// since the last bytes of a tree can arrive long before its last files
// are done (thousands of empty or tiny files, checksums, renames).
func percent(p copyjob.Progress) float64 {
	pct := 100.0
	if p.Bytes > 0 {
		pct = 100 * float64(p.Done) / float64(p.Bytes)
	}
	if p.FilesDone < p.Files {
		pct = min(pct, 99.9)
	}
	return pct
}

// barCurrent is the bar's position for p: the bytes done, held one short
// of the total while files remain, because a bar that reaches its total
// ends and stops showing the files still to do.
func barCurrent(p copyjob.Progress) int64 {
	if p.FilesDone < p.Files && p.Bytes > 0 && p.Done >= p.Bytes {
		return p.Bytes - 1
	}
	return p.Done
}

// latest is the last progress shown.
func (v *progressView) latest() copyjob.Progress {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur
}

func (v *progressView) finish() {
	if v.p != nil {
		if !v.bar.Completed() {
			// Interrupted or failed (a bar with a total completes
			// only at it, and SetTotal no longer ends it): without
			// this, Wait blocks for ever, and Ctrl-C with it.
			v.bar.Abort(false)
		}
		v.p.Wait()
	}
}
