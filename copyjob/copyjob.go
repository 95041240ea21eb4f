// Package copyjob owns copying a set of files and directories from one
// place to another with the transfer engine: it resolves what to copy (see
// plan: a directory's contents go to the destination whether or not it
// exists, so that a rerun lands where the first run did), sends large
// files through the engine with concurrency and a resumable journal, moves
// small files back to back on a pool of workers, uses third-party copy
// when both ends are sluice agents, skips what an earlier run already
// delivered, leaves a destination file that differs from its source as it
// is unless asked to replace it (Options.Overwrite), and reports progress.
// `sluice cp` is a thin command on top.
//
// Run copies with fixed settings. A Dataset (PrepareDataset) is the same
// copy offered to the planners of package dataset: its Perform moves any
// chunk of the files with the pipelining (batch GETs), parallelism and
// concurrency a planner chooses, and RunDataset drives it (`sluice cp -r`).
// RunAdaptive drives it as the Policy Service's adaptive client (`sluice
// cp --policy-server`), and RunMulti downloads one file from several
// replicas at once (`sluice cp --sources`).
package copyjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/dataset"
	"github.com/sluice-dtn/sluice/engine"
)

// Endpoint is one end of a copy: a backend and a path in it.
type Endpoint struct {
	Backend backend.Backend
	Path    string
	// URL names the endpoint for journals and messages (and, for a
	// third-party copy, is what the destination pulls from).
	URL string
	// Puller, set on a destination that can fetch ranges from another
	// agent itself, enables third-party copy.
	Puller Puller
	// Token, on a source on an agent, is what a destination presents to
	// it when it pulls (third-party copy). Tokens, if set, gives it
	// instead, fresh for each pull: a copy may outlive one token.
	Token  string
	Tokens func() (string, error)
}

// Open opens location loc through reg as one end of a copy (o.Write:
// the destination). A destination whose backend can pull from another
// agent is the copy's Puller; a source that presents tokens passes them
// on, for the destination to pull with. close releases the backend.
func Open(ctx context.Context, reg *backend.Registry, loc string, o backend.OpenOptions) (e Endpoint, close func() error, err error) {
	op, err := reg.Open(ctx, loc, o)
	if err != nil {
		return Endpoint{}, nil, err
	}
	close = op.Close
	if close == nil {
		close = func() error { return nil }
	}
	e = Endpoint{Backend: op.Backend, Path: op.Path, URL: op.URL}
	if p, ok := op.Backend.(Puller); ok && o.Write {
		e.Puller = p
	} else if !o.Write && op.Tokens != nil {
		e.Tokens = op.Tokens
	}
	return e, close, nil
}

// pullToken is the token a destination presents to e when it pulls.
func (e Endpoint) pullToken() (string, error) {
	if e.Tokens == nil {
		return e.Token, nil
	}
	tok, err := e.Tokens()
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", e.URL, err)
	}
	return tok, nil
}

// Puller is implemented by backends that can copy a range from a remote
// source themselves (backend/sluice), reporting the bytes written as they
// land if progress is not nil.
type Puller interface {
	PullProgress(ctx context.Context, source, sourceToken, dst string, off, n int64, progress func(written int64)) error
}

// Options tunes a copy.
type Options struct {
	// CC is the concurrency (partial transfers at once) for large files
	// (default 4).
	CC int
	// Files is how many small files move at once (default 8).
	Files int
	// Checksum is one of backend.Algorithms or "none" (default adler32).
	Checksum string
	// Recursive allows directories as sources.
	Recursive bool
	// JournalDir holds the engine's checkpoint journals (required).
	JournalDir string
	// ChunkMin and SubWrite are passed to the engine (0: its defaults).
	ChunkMin, SubWrite int64
	// NoThirdParty moves data through this process even when the
	// destination could pull it.
	NoThirdParty bool
	// PartMin is the smallest partial transfer when a file smaller than
	// 2·ChunkMin is split for parallelism (Dataset.Perform with p > 1);
	// default DefaultPartMin.
	PartMin int64
	// Overwrite replaces a destination file that differs from its
	// source. Without it such a file is left as it is and given up
	// (ErrExists); the rest of the copy goes on. A file already in place
	// (same size and checksum) is skipped either way. Without it, too,
	// every file is put in place with a rename that refuses to replace
	// anything (backend.NoReplaceRenamer, sluice.RenamePair.Replace,
	// engine.Spec.NoReplace): a file that appears at the destination
	// after the check before the copy is kept as well (see
	// takenMeanwhile). A destination that has no such rename (GridFTP,
	// XRootD) has only the check, and a file made there between the
	// check and the rename is replaced.
	Overwrite bool
	// Sync, if set (one of backend.SyncLevels: Globus's sync_level),
	// keeps a file already at its destination that matches its source
	// by the level's test (counted as skipped) and copies any other over
	// the one there (Overwrite, for the files that differ).
	Sync string
	// PreserveModTime gives each file its source's modification time
	// (as listed when the copy planned), set on the verified temporary
	// file before it is put in place, where the destination can set
	// one (backend.ModTimeSetter); GridFTP and XRootD destinations keep
	// the time of the copy.
	PreserveModTime bool
	// Tune, if set, tunes each large file's partial transfers while it
	// runs (CC is where it starts): see LiveOptions. Its Tuner, if
	// given, is used for one file only; nil gives each file its own.
	Tune *LiveOptions
}

// ErrExists is the error of a file whose destination path holds another
// file (or a directory): the copy does not replace it unasked.
var ErrExists = errors.New("exists and differs")

// DefaultPartMin is the default Options.PartMin: 1 MiB, several times what
// one connection has in flight on a WAN path (10 MB/s × 20 ms = 200 kB),
// so a part is not mostly waiting for its first byte.
const DefaultPartMin = 1 << 20

// Progress is a snapshot of a running copy.
type Progress struct {
	Files, FilesDone int
	Bytes, Done      int64
	Rate             float64 // bytes/s, moving average
	Retries          int
	Current          string
}

// Summary is what a finished copy reports (the JSON of `sluice cp --json`).
type Summary struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"`
	Files   int     `json:"files"`
	// Dirs is how many empty directories were made (files make their
	// own parents).
	Dirs int `json:"dirs,omitempty"`
	// Skipped files were already in place (same size and checksum) and
	// were not moved; they are counted in Files and Bytes, and their
	// bytes, SkippedBytes, are not in MBps.
	Skipped      int   `json:"skipped"`
	SkippedBytes int64 `json:"skipped_bytes"`
	// Failures are the files given up, each for a reason of its own;
	// the copy went on with the others and then failed, naming them.
	Failures []FileFailure `json:"failures,omitempty"`
	Retries  int           `json:"retries"`
	Checksum string        `json:"checksum"`
	// Resent is how many bytes were sent more than once (retries,
	// resumed chunks).
	Resent int64 `json:"resent"`
	// PartialBytes are the bytes of files not finished (an interrupted
	// or failed copy) that their checkpoint journals keep: the same copy
	// run again resumes from them instead of sending them again.
	// PartialFiles is how many such files there are.
	PartialBytes int64 `json:"partial_bytes,omitempty"`
	PartialFiles int   `json:"partial_files,omitempty"`
	// Steps are the chunks of a copy run by RunDataset, each with its
	// files, pipelining, parallelism, concurrency and throughput.
	Steps []dataset.StepReport `json:"steps,omitempty"`
	// Tuning is the timeline of a live-tuned copy (RunLive, or one large
	// file with Options.Tune): each window's level and throughput.
	Tuning []TunePoint `json:"tuning,omitempty"`
}

// item is one file to copy.
type item struct {
	from     int // index of the source endpoint
	src, dst string
	size     int64
	mtime    time.Time
	// root is where its source lands at the destination: dst itself for
	// a file, the directory it is below for a directory's files.
	root string
}

func (o *Options) defaults() error {
	if o.CC <= 0 {
		o.CC = 4
	}
	if o.Files <= 0 {
		o.Files = 8
	}
	if o.Checksum == "" {
		o.Checksum = engine.DefaultChecksum
	}
	if o.Checksum != "none" {
		if _, err := backend.NewHash(o.Checksum); err != nil {
			return err
		}
	}
	if o.JournalDir == "" {
		return errors.New("copyjob: no journal directory")
	}
	if o.Sync != "" {
		if !backend.ValidSyncLevel(o.Sync) {
			return fmt.Errorf("copyjob: sync level %q: want one of %s", o.Sync, strings.Join(backend.SyncLevels(), ", "))
		}
		o.Overwrite = true // what differs by the level's test is replaced
	}
	if o.ChunkMin <= 0 {
		o.ChunkMin = engine.DefaultChunkMin
	}
	if o.PartMin <= 0 {
		o.PartMin = DefaultPartMin
	}
	return nil
}

// plan resolves sources and destination into files. A file goes as cp
// copies it: onto dst, or below it under its own name when dst is an
// existing directory, ends in "/", or several sources are given. A
// directory (only with Recursive) goes as rsync's "src/" and rclone copy
// take it: its contents are copied to dst, which is the tree's new name
// (made if missing), unless dst ends in "/" or several sources are given,
// when it goes below dst under its own name. Unlike cp's rule, the target
// does not depend on whether dst exists: cp -r src dst goes into dst/src
// once dst exists, so running the same copy again (a resume, or an update
// after the source changed) would nest a second copy in dst/src. dirs are
// the destination directories no file will be written below (empty
// directories of the sources, or a source directory with no file at
// all), which the copy must make itself, as cp -r does.
func plan(ctx context.Context, srcs []Endpoint, dst Endpoint, o Options) (items []item, dirs []string, bad []badEntry, err error) {
	if len(srcs) == 0 {
		return nil, nil, nil, errors.New("nothing to copy")
	}
	intoDir := strings.HasSuffix(dst.Path, "/") || len(srcs) > 1
	fi, err := dst.Backend.Stat(ctx, dst.Path)
	switch {
	case err != nil && !errors.Is(err, backend.ErrNotFound):
		return nil, nil, nil, fmt.Errorf("destination %s: %w", dst.URL, err)
	case err == nil && !fi.IsDir && intoDir:
		// Refused before anything is copied; cp fails on each file.
		return nil, nil, nil, fmt.Errorf("destination %s is a file, not a directory", dst.URL)
	}
	return planItems(ctx, srcs, dst, intoDir, o.Recursive, err == nil && fi.IsDir, err == nil && !fi.IsDir)
}

// planItems is plan once it is known whether the sources go below dst,
// and whether dst is a directory or a file now.
func planItems(ctx context.Context, srcs []Endpoint, dst Endpoint, intoDir, recursive, dstDir, dstFile bool) (items []item, dirs []string, bad []badEntry, err error) {
	for from, s := range srcs {
		fi, err := s.Backend.Stat(ctx, s.Path)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("source %s: %w", s.URL, err)
		}
		base := path.Base(strings.TrimSuffix(s.Path, "/"))
		target := dst.Path
		if intoDir || !fi.IsDir && dstDir {
			target = path.Join(dst.Path, base)
		}
		same := sourceBase(s) == sourceBase(dst)
		srcClean, dstClean := path.Clean("/"+s.Path), path.Clean("/"+target)
		if !fi.IsDir {
			if same && srcClean == dstClean {
				return nil, nil, nil, fmt.Errorf("%s and %s are the same file", s.URL, dst.URL)
			}
			items = append(items, item{from: from, src: s.Path, dst: target, size: fi.Size, mtime: fi.ModTime, root: target})
			continue
		}
		if !recursive {
			return nil, nil, nil, fmt.Errorf("source %s is a directory (use -r)", s.URL)
		}
		if dstFile && !intoDir {
			return nil, nil, nil, fmt.Errorf("cannot copy directory %s onto %s, which is a file", s.URL, dst.URL)
		}
		if same && (dstClean == srcClean || strings.HasPrefix(dstClean, strings.TrimSuffix(srcClean, "/")+"/")) {
			// A copy into itself would copy its own copies on a rerun.
			return nil, nil, nil, fmt.Errorf("cannot copy directory %s into itself (%s)", s.URL, dstClean)
		}
		list, err := s.Backend.List(ctx, s.Path, true)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("listing %s: %w", s.URL, err)
		}
		root := strings.TrimSuffix(fi.Path, "/")
		dirs = append(dirs, target)
		for _, f := range list {
			rel := strings.TrimPrefix(strings.TrimPrefix(f.Path, root), "/")
			if f.Err != "" {
				// Not copied, and said so at the end; the rest of the
				// tree is copied.
				bad = append(bad, badEntry{from: from, src: path.Join(s.Path, rel), dst: path.Join(target, rel),
					err: fmt.Errorf("%s: %w: %s", path.Join(s.Path, rel), backend.ErrInvalid, f.Err)})
				continue
			}
			if f.IsDir {
				dirs = append(dirs, path.Join(target, rel))
				continue
			}
			items = append(items, item{from: from, src: path.Join(s.Path, rel), dst: path.Join(target, rel), size: f.Size, mtime: f.ModTime, root: target})
		}
	}
	if items, err = distinctTargets(srcs, items); err != nil {
		return nil, nil, nil, err
	}
	dirs = emptyDirs(dirs, items)
	// Large files first: they set the copy's length; small ones fill in.
	sort.SliceStable(items, func(i, j int) bool { return items[i].size > items[j].size })
	return items, dirs, bad, nil
}

// badEntry is an entry of a source's listing that cannot be copied
// (backend.FileInfo.Err): the copy gives it up from the start.
type badEntry struct {
	from     int
	src, dst string
	err      error
}

// distinctTargets drops the repeats of a file named more than once (the
// same source given twice, as cp copies it once) and refuses two sources
// whose files would land on one destination path, or a file on a path
// another source's file is to be below (cp -r a/x b/x dst): one would
// overwrite the other, the second copy's temporary file being the first's,
// and both be counted as copied.
func distinctTargets(srcs []Endpoint, items []item) ([]item, error) {
	if len(srcs) < 2 {
		return items, nil // one source cannot collide with itself
	}
	name := func(it item) string { return sourceBase(srcs[it.from]) + it.src }
	by := make(map[string]item, len(items))
	out := items[:0]
	for _, it := range items {
		if had, ok := by[it.dst]; ok {
			if name(had) == name(it) {
				continue
			}
			return nil, fmt.Errorf("%s and %s would both be copied to %s", name(had), name(it), it.dst)
		}
		by[it.dst] = it
		out = append(out, it)
	}
	for _, it := range out {
		for d := path.Dir(it.dst); d != "." && d != "/"; d = path.Dir(d) {
			if had, ok := by[d]; ok {
				return nil, fmt.Errorf("%s would be copied to %s, where %s is to be copied below it", name(had), d, name(it))
			}
		}
	}
	return out, nil
}

// emptyDirs returns the directories of dirs that no item is written
// below and that hold no other such directory: making those makes every
// empty directory of the tree, and writing the items makes the rest.
func emptyDirs(dirs []string, items []item) []string {
	busy := map[string]bool{}
	mark := func(p string) {
		for d := path.Dir(p); !busy[d]; d = path.Dir(d) {
			busy[d] = true
			if d == "." || d == "/" {
				break
			}
		}
	}
	for _, it := range items {
		mark(it.dst)
	}
	for _, d := range dirs {
		mark(d)
	}
	var out []string
	for _, d := range dirs {
		if !busy[d] {
			busy[d] = true // once, however often it was listed
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// makeDirs makes the directories plan found empty at the destination.
func makeDirs(ctx context.Context, dst Endpoint, dirs []string) error {
	for _, d := range dirs {
		if err := dst.Backend.Mkdir(ctx, d); err != nil {
			return fmt.Errorf("making directory %s at %s: %w", d, dst.URL, err)
		}
	}
	return nil
}

// journalFor names the journal of one file's copy.
func journalFor(dir, srcURL, dstURL string) string {
	h := sha256.Sum256([]byte(srcURL + "\x00" + dstURL))
	return filepath.Join(dir, hex.EncodeToString(h[:12])+".journal")
}

// Run copies srcs to dst (one source must be given; several go into a
// directory). progress, if not nil, is called about every 200 ms.
func Run(ctx context.Context, srcs []Endpoint, dst Endpoint, o Options, progress func(Progress)) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	startAt := time.Now()
	items, dirs, bad, err := plan(ctx, srcs, dst, o)
	if err != nil {
		return Summary{}, err
	}
	if err := makeDirs(ctx, dst, dirs); err != nil {
		return Summary{}, err
	}
	st := &state{o: o, srcs: srcs, dst: dst, dirs: len(dirs)}
	for _, it := range items {
		st.total += it.size
	}
	st.files = len(items)
	st.listedBad(bad)
	var big, small []item
	for _, it := range items {
		if it.size >= 2*o.ChunkMin {
			big = append(big, it)
		} else {
			small = append(small, it)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopTicker := st.tick(progress)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- st.runBig(ctx, big) }()
	go func() { defer wg.Done(); errs <- st.runSmall(ctx, small) }()
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one failure stops the rest; journals keep their work
		}
	}
	wg.Wait()
	stopTicker()
	if f := st.failed(); f != nil && (first == nil || fileLevel(first)) {
		first = f // every file given up, not only the last
	}
	return st.summary(time.Since(startAt)), first
}

// tick calls progress about every 200 ms until the returned stop is
// called, which reports once more, so the last call shows the end.
func (st *state) tick(progress func(Progress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress(st.progress())
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		progress(st.progress())
	}
}

// summary is what the copy did in elapsed.
func (st *state) summary(elapsed time.Duration) Summary {
	sec := elapsed.Seconds()
	sum := Summary{
		Bytes: st.done.Load(), Seconds: sec, Files: int(st.filesDone.Load()), Skipped: int(st.skipped.Load()),
		SkippedBytes: st.skippedBytes.Load(),
		Retries:      int(st.retries.Load()), Checksum: st.o.Checksum, Resent: st.resent.Load(), Dirs: st.dirs,
		PartialBytes: st.partial.Load(), PartialFiles: int(st.partialFiles.Load()),
	}
	if sec > 0 {
		sum.MBps = float64(sum.Bytes-sum.SkippedBytes) / sec / 1e6 // what moved
	}
	st.mu.Lock()
	sum.Failures = slices.Clone(st.failures)
	sum.Tuning = slices.Clone(st.tuning)
	st.mu.Unlock()
	return sum
}

// state is a running copy.
type state struct {
	o     Options
	srcs  []Endpoint
	dst   Endpoint
	total int64
	files int
	dirs  int // empty directories made

	done         atomic.Int64 // bytes of finished files
	filesDone    atomic.Int64
	skipped      atomic.Int64
	skippedBytes atomic.Int64
	retries      atomic.Int64
	resent       atomic.Int64
	moving       atomic.Int64 // bytes of small files in flight
	partial      atomic.Int64 // bytes journaled of large files that did not finish
	partialFiles atomic.Int64
	tuning       []TunePoint // a tuned large file's windows (Options.Tune)

	committer committer // lands files copied whole, in groups

	mu       sync.Mutex
	active   map[*engine.Transfer]string
	rate     rateMeter
	current  string
	failures []FileFailure // files given up for reasons of their own (fileLevel)
	errs     []error       // their errors, for errors.Is on the copy's
	// listed: how many of them were given up before the copy tried
	// them (listedBad, refuse), which do not count towards
	// MaxFileFailures: they say nothing of how the copy goes.
	listed int
}

// FileFailure is a file a copy gave up for a reason of its own (see
// MaxFileFailures); the copy went on with the others.
type FileFailure struct {
	Src   string `json:"source"`
	Dst   string `json:"destination"`
	Error string `json:"error"`
}

// MaxFileFailures is how many files a copy gives up, each for a reason of
// its own (unreadable, gone, changed while it was copied), before it
// stops: as cp and rsync do, one bad file does not stop a tree; a hundred
// say that something is wrong with the whole.
const MaxFileFailures = 100

// fileLevel reports whether err is about one file rather than the copy:
// retrying will not help, and the other files may well go.
func fileLevel(err error) bool {
	return errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrNotFound) ||
		errors.Is(err, engine.ErrSourceChanged) || errors.Is(err, engine.ErrChecksum)
}

// giveUp records that it failed with err, if err is about it alone, and
// reports whether the copy goes on without it.
func (st *state) giveUp(it item, err error) bool {
	if !fileLevel(err) || errors.Is(err, context.Canceled) {
		return false
	}
	// Its partial copy and journal, if it went through the engine, would
	// only hold space: nothing will resume it.
	src := st.srcs[it.from]
	st.dst.Backend.Remove(context.Background(), engine.TempName(it.dst))
	os.Remove(journalFor(st.o.JournalDir, src.URL+it.src, st.dst.URL+it.dst))
	st.mu.Lock()
	defer st.mu.Unlock()
	st.failures = append(st.failures, FileFailure{Src: sourceBase(src) + it.src, Dst: sourceBase(st.dst) + it.dst, Error: err.Error()})
	st.errs = append(st.errs, err)
	return len(st.failures)-st.listed < MaxFileFailures
}

// listedBad gives up, from the start, the entries of the sources'
// listings that cannot be copied.
func (st *state) listedBad(bad []badEntry) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.files += len(bad)
	for _, b := range bad {
		st.failures = append(st.failures, FileFailure{Src: sourceBase(st.srcs[b.from]) + b.src, Dst: sourceBase(st.dst) + b.dst, Error: b.err.Error()})
		st.errs = append(st.errs, b.err)
	}
	st.listed += len(bad)
}

// refuse gives it up before any of its bytes moved, for err (ErrExists:
// its destination holds another file). What an earlier run left of it (a
// temporary file, a journal) is kept: with Overwrite, a rerun resumes it.
func (st *state) refuse(it item, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.failures = append(st.failures, FileFailure{Src: sourceBase(st.srcs[it.from]) + it.src, Dst: sourceBase(st.dst) + it.dst, Error: err.Error()})
	st.errs = append(st.errs, err)
	st.listed++
}

// failed is the error of a copy that gave files up: nil if none.
func (st *state) failed() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case len(st.errs) == 0:
		return nil
	case len(st.errs) == 1 && st.files <= 1:
		return st.errs[0] // the copy of one file: its error
	}
	return &FilesError{Failed: len(st.errs), Errs: slices.Clone(st.errs), Stopped: len(st.errs)-st.listed >= MaxFileFailures}
}

// FilesError is the error of a copy that gave files up (Summary.Failures
// has them all); errors.Is and As see each file's error.
type FilesError struct {
	Failed  int
	Errs    []error
	Stopped bool // at MaxFileFailures: the files not tried yet were not copied either
}

func (e *FilesError) Error() string {
	var b strings.Builder
	if e.Stopped {
		fmt.Fprintf(&b, "copyjob: %d files could not be copied, and the copy stopped there: ", e.Failed)
	} else {
		fmt.Fprintf(&b, "copyjob: %d files could not be copied (the others were): ", e.Failed)
	}
	for i, err := range e.Errs {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Errs)-3)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *FilesError) Unwrap() []error { return e.Errs }

func (st *state) progress() Progress {
	st.mu.Lock()
	defer st.mu.Unlock()
	p := Progress{Files: st.files, FilesDone: int(st.filesDone.Load()), Bytes: st.total, Retries: int(st.retries.Load()), Current: st.current}
	p.Done = st.done.Load() + st.moving.Load()
	for t := range st.active {
		tp := t.Progress()
		p.Done += tp.Done
		p.Retries += tp.Retries
	}
	p.Rate = st.rate.observe(time.Now(), p.Done)
	return p
}

// runBig sends large files one after another through the engine, each
// with the copy's concurrency.
func (st *state) runBig(ctx context.Context, items []item) error {
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		if there, err := st.inPlace(ctx, it); there || err != nil {
			continue
		}
		if err := st.copyBig(ctx, it, st.o.CC, st.o.ChunkMin, st.o.Tune); err != nil && !st.giveUp(it, err) {
			return err
		}
	}
	return nil
}

// copyBig sends one file through the engine with cc partial transfers at
// once, none smaller than chunkMin (but the last), with a checkpoint
// journal so that an interrupted copy resumes.
func (st *state) copyBig(ctx context.Context, it item, cc int, chunkMin int64, tune *LiveOptions) error {
	src := st.srcs[it.from]
	if tune != nil {
		// Tuned, the transfer starts at the tuner's first level, not
		// at cc: the tuner only moves it once a window has been judged.
		cc = min(max(cc, tune.Start), MaxLevel)
	}
	spec := engine.Spec{
		Src: src.Backend, SrcPath: it.src, Dst: st.dst.Backend, DstPath: it.dst,
		Size: it.size, CC: cc, ChunkMin: chunkMin, SubWrite: st.o.SubWrite,
		Checksum: st.o.Checksum, Journal: journalFor(st.o.JournalDir, src.URL+it.src, st.dst.URL+it.dst),
		// Never over a file that appeared since inPlace looked.
		NoReplace:       !st.o.Overwrite,
		PreserveModTime: st.o.PreserveModTime,
	}
	if pull := st.puller(src); pull != nil {
		spec.Pull = pull
	}
	t, err := engine.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("%s: %w", it.src, err)
	}
	st.mu.Lock()
	if st.active == nil {
		st.active = map[*engine.Transfer]string{}
	}
	st.active[t] = it.src
	st.current = it.src
	st.mu.Unlock()
	if tune != nil {
		st.tuneTransfer(ctx, t, *tune, cc)
	}
	res, err := t.Wait()
	st.mu.Lock()
	delete(st.active, t)
	st.mu.Unlock()
	st.retries.Add(int64(res.Retries))
	st.resent.Add(res.Resent)
	if err != nil && st.refusedAtRename(err) {
		// Something appeared at it.dst during the copy (or since
		// inPlace looked) and was kept. The verified temporary file
		// and the journal are kept too, as inPlace keeps what an
		// earlier run left of a file it refuses: a later run with
		// Overwrite puts it in place without sending it again.
		if st.takenMeanwhile(ctx, it) {
			st.dst.Backend.Remove(context.WithoutCancel(ctx), engine.TempName(it.dst))
			os.Remove(spec.Journal)
		}
		return nil
	}
	if err != nil {
		if errors.Is(err, backend.ErrNoSpace) {
			// Keeping a partial copy for a resume would only hold on
			// to the space that ran out: give it back.
			st.dst.Backend.Remove(context.WithoutCancel(ctx), engine.TempName(it.dst))
			os.Remove(spec.Journal)
		} else if c, ok, _ := engine.ReadCheckpoint(context.WithoutCancel(ctx), engine.FileJournals{}, spec.Journal); ok && c.Done > 0 {
			// What the journal on disk keeps (the engine writes it on
			// the way out): what the same copy run again resumes from.
			st.partial.Add(c.Done)
			st.partialFiles.Add(1)
		}
		return fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
	}
	st.done.Add(it.size)
	st.filesDone.Add(1)
	return nil
}

// puller returns the engine's third-party hook, or nil when data must
// pass through this process.
func (st *state) puller(src Endpoint) engine.PullFunc {
	if st.o.NoThirdParty {
		return nil
	}
	return pullerFor(src, st.dst)
}

// pullerFor is the engine's third-party hook for a copy from src to dst:
// dst's agent fetches the ranges from src's; nil unless both are agents.
func pullerFor(src, dst Endpoint) engine.PullFunc {
	if dst.Puller == nil || !strings.HasPrefix(src.URL, "sluice") {
		return nil
	}
	base := sourceBase(src)
	return func(ctx context.Context, srcPath, dstPath string, off, n int64, progress func(int64)) error {
		tok, err := src.pullToken()
		if err != nil {
			return err
		}
		return dst.Puller.PullProgress(ctx, sluice.FileURL(base, srcPath), tok, dstPath, off, n, progress)
	}
}

// sourceBase is the sluice://host:port prefix of the source's URL.
func sourceBase(e Endpoint) string {
	u := e.URL
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.Index(u[i+3:], "/"); j >= 0 {
			return u[:i+3+j]
		}
	}
	return u
}

// inPlace looks at it's destination path before any of its bytes move.
// It reports true if an earlier run already delivered it: a file of the
// same size whose checksum matches the source's (with checksums off, the
// same size is taken for in place), counted as skipped. Another file
// there is not replaced unless Options.Overwrite: it is given up (refuse)
// and the error, ErrExists, is returned. Otherwise (nothing there, or a
// stat or checksum that fails, which the copy itself will meet) the file
// is to be copied: false and nil. A stat that fails for another reason
// than absence gives the file up too, unless Overwrite.
func (st *state) inPlace(ctx context.Context, it item) (bool, error) {
	fi, err := st.dst.Backend.Stat(ctx, it.dst)
	switch {
	case err == nil:
		return st.inPlaceStat(ctx, it, fi)
	case errors.Is(err, backend.ErrNotFound) || ctx.Err() != nil || st.o.Overwrite:
		return false, nil
	}
	// Whatever is there, if anything, is not replaced unseen.
	err = fmt.Errorf("%s: cannot tell whether another file is there: %w", it.dst, err)
	st.refuse(it, err)
	return false, err
}

// differs is the error of a file whose destination holds another file.
func differs(it item) error {
	return fmt.Errorf("%s %w; use --overwrite to replace it", it.dst, ErrExists)
}

// refusedAtRename reports whether err is the destination refusing to put
// a file in place without Overwrite because something is at its path
// (backend.ErrExist from a no-replace rename, or the engine's
// ErrDestinationExists, which wraps it): something appeared there after
// inPlace looked.
func (st *state) refusedAtRename(err error) bool {
	return !st.o.Overwrite && errors.Is(err, backend.ErrExist)
}

// takenMeanwhile handles a file whose no-replace rename was refused
// (refusedAtRename): it looks at the destination path again as inPlace
// does before the copy, and reports true if what appeared there is the
// file itself (another run of the same copy put it there, say), counted
// as skipped. Otherwise the file is given up as inPlace gives it up,
// with the same error (ErrExists: "PATH exists and differs; use
// --overwrite to replace it"), and the copy goes on with the others.
// The caller deals with the verified temporary file.
func (st *state) takenMeanwhile(ctx context.Context, it item) bool {
	there, err := st.inPlace(ctx, it)
	if !there && err == nil {
		// Gone again, or not comparable now: still not replaced.
		st.refuse(it, differs(it))
	}
	return there
}

// noReplace is the Replace of a sluice.RenamePair: false (never over a
// file at the destination) unless Overwrite, when unset replaces.
func (st *state) noReplace() *bool {
	if st.o.Overwrite {
		return nil
	}
	no := false
	return &no
}

// noReplaceManyer is a destination that renames without replacing and
// whose renames can share one sync of their directories (the file
// backend).
type noReplaceManyer interface {
	RenameNoReplaceNoSync(ctx context.Context, from, to string) error
	SyncDirs(ctx context.Context, paths []string)
}

// placer returns how files are renamed one by one into place at the
// destination, and, if not nil, what makes a group of new names durable
// once they are all renamed (the renames then do not each sync their
// directory). Without Overwrite the rename never replaces a file where
// the destination can refuse to (an ErrExist, see refusedAtRename);
// where it cannot (GridFTP, XRootD), only inPlace's check before the
// copy protects a file at the destination.
func (st *state) placer() (rename func(ctx context.Context, from, to string) error, syncDirs func(ctx context.Context, paths []string)) {
	dst := st.dst.Backend
	if !st.o.Overwrite {
		if nm, ok := dst.(noReplaceManyer); ok {
			return nm.RenameNoReplaceNoSync, nm.SyncDirs
		}
		if nr, ok := dst.(backend.NoReplaceRenamer); ok {
			return nr.RenameNoReplace, nil
		}
	}
	if rm, ok := dst.(renameManyer); ok {
		return rm.RenameNoSync, rm.SyncDirs
	}
	return dst.Rename, nil
}

// inPlaceStat is inPlace given the destination path's stat.
func (st *state) inPlaceStat(ctx context.Context, it item, fi backend.FileInfo) (bool, error) {
	if fi.IsDir {
		// Not replaced even with Overwrite: a directory is not a
		// file's older copy.
		err := fmt.Errorf("%s: %w: a directory is there", it.dst, ErrExists)
		st.refuse(it, err)
		return false, err
	}
	algo := st.o.Checksum
	if st.o.Sync != "" {
		same, decided := st.inSync(ctx, it, fi)
		if decided {
			if !same {
				return false, nil // copied over the one there
			}
			return st.skip(it), nil
		}
		if algo == "none" {
			algo = engine.DefaultChecksum // the checksum level compares them anyway
		}
	}
	same := fi.Size == it.size
	if same && algo != "none" {
		a, err := st.srcs[it.from].Backend.Checksum(ctx, it.src, algo)
		if err != nil {
			return false, nil // the copy will fail to read it too, and say why
		}
		b, err := st.dst.Backend.Checksum(ctx, it.dst, algo)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, nil // the copy is stopping
		case err != nil && !st.o.Overwrite:
			// It may be the same file: it is not replaced, in case
			// it is not.
			err = fmt.Errorf("%s exists and cannot be compared with its source (%w); use --overwrite to replace it", it.dst, err)
			st.refuse(it, err)
			return false, err
		}
		same = err == nil && a == b
	}
	if !same {
		if st.o.Overwrite {
			return false, nil
		}
		err := differs(it)
		st.refuse(it, err)
		return false, err
	}
	return st.skip(it), nil
}

// modTime is the time a file copied whole (not by the engine) is given
// before its rename (sluice.RenamePair.ModTime), nil when the copy does
// not preserve times or the listing gave none.
func (st *state) modTime(it item) *time.Time {
	if !st.o.PreserveModTime || it.mtime.IsZero() {
		return nil
	}
	t := it.mtime
	return &t
}

// setModTime gives a file copied whole its source's time before its
// rename, on a destination that renames one at a time.
func (st *state) setModTime(ctx context.Context, tmp string, it item) error {
	mt := st.modTime(it)
	if mt == nil {
		return nil
	}
	ms, ok := st.dst.Backend.(backend.ModTimeSetter)
	if !ok {
		return nil // GridFTP, XRootD: the time of the copy (Options.PreserveModTime)
	}
	return ms.SetModTime(ctx, tmp, *mt)
}

// skip counts a file found in place, not copied.
func (st *state) skip(it item) bool {
	st.skipped.Add(1)
	st.skippedBytes.Add(it.size)
	st.filesDone.Add(1)
	st.done.Add(it.size)
	return true
}

// inSync is Options.Sync's test of fi, found at it's destination, as far
// as stats decide it (backend.InSync): the mtime level uses the source's
// time the plan listed, and stats the destination when what gave fi (a
// listing of sizes) has no time; a stat that fails leaves the file to be
// copied, which meets the same error and says it.
func (st *state) inSync(ctx context.Context, it item, fi backend.FileInfo) (same, decided bool) {
	si := backend.FileInfo{Size: it.size, ModTime: it.mtime}
	if st.o.Sync == "mtime" {
		var err error
		if si.ModTime.IsZero() {
			if si, err = st.srcs[it.from].Backend.Stat(ctx, it.src); err != nil {
				return false, true
			}
		}
		if fi.ModTime.IsZero() {
			if fi, err = st.dst.Backend.Stat(ctx, it.dst); err != nil {
				return false, true
			}
		}
	}
	return backend.InSync(st.o.Sync, si, fi)
}

// runSmall moves small files on a pool of workers, each file whole: write
// to a temporary name, compare checksums, rename. Per-file journals and
// fsyncs would cost more than re-sending a small file, so an interrupted
// small file is simply sent again.
func (st *state) runSmall(ctx context.Context, items []item) error {
	work := make(chan item)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(st.o.Files, max(len(items), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := st.copySmall(ctx, it); err != nil && !st.giveUp(it, fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)) {
					once.Do(func() { first = fmt.Errorf("%s -> %s: %w", it.src, it.dst, err); cancel() })
				}
			}
		}()
	}
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	// The files verified are landed (or given up) before the copy ends.
	if err := st.flush(); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (st *state) copySmall(ctx context.Context, it item) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if there, err := st.inPlace(ctx, it); there || err != nil {
		return nil // skipped, or given up (refuse)
	}
	return st.copyWhole(ctx, it)
}

// copyWhole sends one file whole (retrying transient errors), verifies it,
// makes it durable and renames it into place.
func (st *state) copyWhole(ctx context.Context, it item) error {
	tmp := engine.TempName(it.dst)
	var sum string
	var err error
	for attempt := 0; ; attempt++ {
		sum, err = st.sendSmall(ctx, it, tmp)
		if err == nil || backend.Permanent(err) || attempt >= 4 || ctx.Err() != nil {
			break
		}
		st.retries.Add(1)
		st.resent.Add(it.size)
		select {
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err != nil {
		st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
		if cerr := st.sourceChanged(ctx, it); cerr != nil {
			return cerr // a clearer cause than a short read
		}
		return err
	}
	if st.puller(st.srcs[it.from]) == nil {
		// The bytes streamed were the first it.size of the file as it
		// is now, and their checksum is theirs: a file that grew (or
		// was rewritten) since it was listed would pass the check
		// truncated. (Pulled, the source's checksum is of the whole
		// file, and the comparison below catches it.)
		if cerr := st.sourceChanged(ctx, it); cerr != nil {
			st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
			return cerr
		}
	}
	if st.o.Checksum != "none" {
		got, err := st.dst.Backend.Checksum(ctx, tmp, st.o.Checksum)
		if err != nil {
			// Canceled while summed, say: a small file is sent
			// again whole, so its bytes are of no use to a rerun.
			st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
			return fmt.Errorf("checksum at the destination: %w", err)
		}
		if got != sum {
			st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
			return fmt.Errorf("%w: source %s %s, destination %s", engine.ErrChecksum, st.o.Checksum, sum, got)
		}
	}
	// Made durable and renamed in a group, behind this worker's back
	// (see committer): counted copied once it is in place.
	if err := st.queue(ctx, it, tmp); err != nil {
		st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
		return err
	}
	return nil
}

// sourceChanged reports whether it's source is no longer the file that was
// listed: another size or another modification time (see sameMtime).
func (st *state) sourceChanged(ctx context.Context, it item) error {
	fi, err := st.srcs[it.from].Backend.Stat(ctx, it.src)
	switch {
	case err != nil:
		return nil // the copy's own error says more
	case fi.Size != it.size:
		return fmt.Errorf("%w: %s is now %d bytes, was %d when listed", engine.ErrSourceChanged, it.src, fi.Size, it.size)
	case !sameMtime(it.mtime, fi.ModTime):
		return fmt.Errorf("%w: %s was modified at %s, after it was listed", engine.ErrSourceChanged, it.src, fi.ModTime.Format(time.RFC3339))
	}
	return nil
}

// sameMtime reports whether two modification times of a file, from its
// listing and a later stat, are the same. Some backends give whole
// seconds in one and finer times in the other (GridFTP's listings, say):
// a time with nothing below the second is compared to the second.
// Otherwise to the nanosecond: a file rewritten within the second it was
// listed in is a change too (the bytes sent may mix both versions).
// An unknown (zero) time matches any.
func sameMtime(a, b time.Time) bool {
	switch {
	case a.IsZero() || b.IsZero():
		return true
	case a.Nanosecond() == 0 || b.Nanosecond() == 0:
		return a.Truncate(time.Second).Equal(b.Truncate(time.Second))
	}
	return a.Equal(b)
}

// sendSmall writes one small file to tmp and returns the source's
// checksum: computed from the bytes as they pass through, or asked of the
// source when the destination pulled them itself.
func (st *state) sendSmall(ctx context.Context, it item, tmp string) (string, error) {
	src := st.srcs[it.from]
	if pull := st.puller(src); pull != nil {
		if err := st.dst.Backend.Truncate(ctx, tmp, it.size); err != nil {
			return "", err
		}
		if it.size > 0 {
			if err := pull(ctx, it.src, tmp, 0, it.size, nil); err != nil {
				return "", err
			}
		}
		if st.o.Checksum == "none" {
			return "", nil
		}
		return src.Backend.Checksum(ctx, it.src, st.o.Checksum)
	}
	rc, err := src.Backend.OpenRange(ctx, it.src, 0, it.size)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	var r io.Reader = rc
	var h interface {
		io.Writer
		Sum([]byte) []byte
	}
	if st.o.Checksum != "none" {
		hh, _ := backend.NewHash(st.o.Checksum)
		h = hh
		r = io.TeeReader(rc, hh)
	}
	cr := &countReader{r: r, n: &st.moving}
	err = st.dst.Backend.WriteAt(ctx, tmp, 0, cr, it.size)
	st.moving.Add(-cr.read)
	if err != nil {
		return "", err
	}
	if h == nil {
		return "", nil
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type countReader struct {
	r    io.Reader
	n    *atomic.Int64
	read int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	c.n.Add(int64(n))
	return n, err
}

// rateMeter is a moving average of throughput over about five seconds.
type rateMeter struct {
	t    []time.Time
	done []int64
}

func (m *rateMeter) observe(now time.Time, done int64) float64 {
	m.t = append(m.t, now)
	m.done = append(m.done, done)
	for len(m.t) > 2 && now.Sub(m.t[1]) >= 5*time.Second {
		m.t, m.done = m.t[1:], m.done[1:]
	}
	dt := now.Sub(m.t[0]).Seconds()
	if dt <= 0 {
		return 0
	}
	// Done falls when bytes in flight are given up (a retry, an
	// interruption): the rate is then zero, not negative.
	return max(float64(done-m.done[0])/dt, 0)
}
