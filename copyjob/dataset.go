package copyjob

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/dataset"
	"github.com/sluice-dtn/sluice/engine"
)

// Batcher is implemented by backends that send many whole files in one
// response (backend/sluice's batch GET): the way a Dataset pipelines.
type Batcher interface {
	Batch(ctx context.Context, paths []string) (*sluice.BatchReader, error)
	// BatchSums is Batch with the source's checksum of each file,
	// computed from the bytes as they leave and sent after them.
	BatchSums(ctx context.Context, paths []string, algo string) (*sluice.BatchReader, error)
}

// Attempts and backoff for the files a Dataset sends without the engine
// (whole or split, not journaled): as copyWhole, five tries 100 ms, 200
// ms, ... apart. Re-sending such a file costs less than journaling it.
const (
	lightAttempts = 5
	lightBackoff  = 100 * time.Millisecond
	// maxSumsInFlight bounds the source checksums one batch asks for at
	// once (one request each; see sourceSums).
	maxSumsInFlight = 32
)

// Dataset is a copy of many files prepared for the planners of package
// dataset: Files lists what is to be copied, and Perform, the paper's
// perform_transfer, moves any part of it with the pipelining (pp),
// parallelism (p) and concurrency (cc) a planner asks for, and measures
// the throughput. RunDataset drives it with a planner.
//
// What pp, p and cc mean here:
//
//   - cc is the number of channels: files (or groups of files) moved at
//     once, each channel one request after another on its own
//     connection. Connections stay open between calls (the backends'
//     HTTP transport keeps them), so a planner's samples do not each pay
//     a start-up.
//   - pp is how many files a channel asks for in one request: a batch GET
//     (POST /v1/batch) of pp files, sent back to back in one response,
//     paying one round trip rather than pp. This needs a source that is a
//     sluice agent (a Batcher). Agent to agent (a third-party copy), the
//     destination agent makes that batch GET itself (POST /v1/pullbatch,
//     a PullBatcher) and the files are renamed in one request. With any
//     other source, files go one request each and pp has no effect.
//   - p is the number of partial transfers (byte ranges moving at once)
//     of one file. A file of at least 2·ChunkMin goes through the engine,
//     as copyjob.Run sends big files (journal, resume), with p partial
//     transfers. A smaller file of at least 2·PartMin is split into
//     min(p, size/PartMin) ranges without a journal: the engine's
//     per-file costs (two stats, a journal written and synced, an fsync
//     of the file: several round trips before the first byte on a WAN)
//     would outweigh what the ranges save. Smaller files go whole.
//
// Every file lands as copyjob.Run lands it: written under engine.TempName,
// verified (the source's checksum, asked of the source, against the
// destination's checksum of what was written), then renamed over its
// destination path; nothing is ever written at the destination path
// itself. A file already at the destination with the same size and
// checksum is skipped; a different one is given up, not replaced, unless
// Options.Overwrite. Transient errors are retried per file; the first
// permanent one (or one still failing after the retries) ends Perform with
// an error naming the file.
//
// Perform may be called from one goroutine at a time; Progress and
// Summary from any.
type Dataset struct {
	st    *state
	start time.Time
	files []dataset.File
	items map[string]item // by dataset.File.Src
	// have is what the destination held when the copy was prepared (path
	// to size, -1 for a directory, unknownEntry), from one listing per source's target;
	// nil if it could not be listed, and then every file is checked with
	// a Stat.
	have map[string]int64
}

// PrepareDataset resolves srcs and dst as Run does (o.Recursive allows
// directories), lists what the destination already holds, and returns the
// copy, ready to Perform. Each file's dataset.File.Src is its source's URL
// (as in sluice://host:port/dir/file, file:///dir/file), Dst its
// destination path.
func PrepareDataset(ctx context.Context, srcs []Endpoint, dst Endpoint, o Options) (*Dataset, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	items, dirs, bad, err := plan(ctx, srcs, dst, o)
	if err != nil {
		return nil, err
	}
	// Empty directories are made now: no file will make them, and an
	// empty directory is never a half-written file.
	if err := makeDirs(ctx, dst, dirs); err != nil {
		return nil, err
	}
	d := &Dataset{st: &state{o: o, srcs: srcs, dst: dst, dirs: len(dirs)}, start: start, items: make(map[string]item, len(items))}
	for _, it := range items {
		key := sourceBase(srcs[it.from]) + it.src
		if _, dup := d.items[key]; dup {
			continue // the same source named twice: copy it once
		}
		d.items[key] = it
		d.files = append(d.files, dataset.File{Src: key, Dst: it.dst, Size: it.size})
		d.st.total += it.size
		d.st.files++
	}
	d.st.listedBad(bad)
	d.have = d.listDestination(ctx, items)
	d.files = d.leaveOutPresent(ctx, d.files)
	return d, nil
}

// leaveOutPresent checks now, several at a time, the files whose
// destination path the listing shows taken (an earlier run's files, when
// a copy resumes), and leaves out those in place (inPlace, which counts
// them skipped) and those it must not replace (another file there,
// without Overwrite: given up, and listed when the copy ends), so that the
// planners sample only files that move. Checked as
// the copy went, a present file's bytes counted as moved in its chunk's
// throughput, and a resumed copy chose its settings from throughputs it
// never had (218 MB/s measured at cc 1 where 102 moved).
func (d *Dataset) leaveOutPresent(ctx context.Context, files []dataset.File) []dataset.File {
	if d.have == nil {
		return files // checked one by one as the copy goes
	}
	// out: in place (skipped) or given up.
	out, checked := make([]bool, len(files)), make([]bool, len(files))
	sem := make(chan struct{}, presentChecks)
	var wg sync.WaitGroup
	for i, f := range files {
		it := d.items[f.Src]
		size, ok := d.have[it.dst]
		switch {
		case !ok:
			continue
		case size >= 0 && size != it.size && d.st.o.Sync == "exists":
			// Kept whatever its size: checked below, and counted.
		case size >= 0 && size != it.size && d.st.o.Overwrite:
			checked[i] = true // to be replaced: no checksum to compare
			continue
		case size >= 0 && size != it.size:
			// The listing tells: no request needed.
			out[i], checked[i] = true, true
			d.st.refuse(it, differs(it))
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			var there bool
			var err error
			switch size {
			case unknownEntry:
				there, err = d.st.inPlace(ctx, it)
			case -1:
				there, err = d.st.inPlaceStat(ctx, it, backend.FileInfo{IsDir: true})
			default:
				there, err = d.st.inPlaceStat(ctx, it, backend.FileInfo{Size: size})
			}
			out[i], checked[i] = there || err != nil, true
		})
	}
	wg.Wait()
	keep := make([]dataset.File, 0, len(files))
	for i, f := range files {
		if !out[i] {
			keep = append(keep, f)
		}
		if checked[i] && !out[i] {
			// To be copied over what is there (Overwrite): there
			// need not check it (a stat and two checksums) again.
			delete(d.have, d.items[f.Src].dst)
		}
	}
	return keep
}

// presentChecks is how many files leaveOutPresent checks at once: each
// is a stat and two checksums, at two agents.
const presentChecks = 8

// SetPartMin sets the smallest part of a file split for parallelism (see
// Options.PartMin), for a caller that learns the path's bandwidth-delay
// product after preparing the copy: a part smaller than that cannot fill
// the path, as the engine keeps its chunks above it (engine.DefaultChunkMin).
// Values below 1 are ignored. Not while Perform runs.
func (d *Dataset) SetPartMin(n int64) {
	if n >= 1 {
		d.st.o.PartMin = n
	}
}

// Files is what the copy moves, large files first. The slice is the
// Dataset's own: planners copy what they keep.
func (d *Dataset) Files() []dataset.File { return d.files }

// Progress is a snapshot of the copy.
func (d *Dataset) Progress() Progress { return d.st.progress() }

// Summary is what the copy has done since it was prepared.
func (d *Dataset) Summary() Summary { return d.st.summary(time.Since(d.start)) }

// listDestination lists each source's target once, so that a fresh copy
// of many files does not ask the destination about each of them (one
// round trip per file on a WAN). It returns nil if a listing fails for
// any reason but absence.
func (d *Dataset) listDestination(ctx context.Context, items []item) map[string]int64 {
	have := map[string]int64{}
	seen := map[string]bool{}
	b := d.st.dst.Backend
	for _, it := range items {
		if seen[it.root] {
			continue
		}
		seen[it.root] = true
		fi, err := b.Stat(ctx, it.root)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			continue
		case err != nil:
			return nil
		case !fi.IsDir:
			have[it.root] = fi.Size
			continue
		}
		list, err := b.List(ctx, it.root, true)
		if err != nil {
			return nil
		}
		// Entries are named like Stat named the root: what follows the
		// root's path is the path below it (plan's rule).
		base := strings.TrimSuffix(fi.Path, "/")
		for _, e := range list {
			p := path.Join(it.root, strings.TrimPrefix(strings.TrimPrefix(e.Path, base), "/"))
			switch {
			case e.IsDir:
				have[p] = -1 // in the way of a file of that name
			case e.Err == "":
				have[p] = e.Size
			default:
				have[p] = unknownEntry // stat it when its file comes
			}
		}
	}
	return have
}

// unknownEntry is what Dataset.have holds for an entry that the
// destination's listing could not tell (FileInfo.Err): a stat tells.
const unknownEntry = -2

// there is inPlace for a file about to move: a path the listing showed
// free needs no request (one round trip per file on a WAN), and the
// others were checked by leaveOutPresent or are checked now. The listing
// may be hours old in a long copy: a file put at a free path since is
// kept by the rename that puts the copy in place, which never replaces
// one without Overwrite (see state.placer, takenMeanwhile), except on a
// destination that cannot rename so (GridFTP, XRootD), where it is
// replaced.
func (d *Dataset) there(ctx context.Context, it item) (bool, error) {
	if d.have != nil {
		if _, ok := d.have[it.dst]; !ok {
			return false, nil
		}
	}
	return d.st.inPlace(ctx, it)
}

// unitKind is how a unit of work moves.
type unitKind int

const (
	unitWhole unitKind = iota // one file, one request (copyWhole)
	unitBatch                 // up to pp files of one source, one batch GET
	unitSplit                 // one file in parts, without a journal
	unitBig                   // one file through the engine
)

// unit is what one channel moves at a time.
type unit struct {
	kind  unitKind
	items []item
	parts int
}

// Perform moves files (from Files) with pipelining pp, parallelism p and
// concurrency cc, as the type's comment describes, and returns their
// bytes over the wall time it took. It implements dataset.Performer.
func (d *Dataset) Perform(ctx context.Context, files []dataset.File, pp, p, cc int) (float64, error) {
	if pp < 1 || p < 1 || cc < 1 {
		return 0, fmt.Errorf("copyjob: %w: pp %d, p %d and cc %d must be at least 1", backend.ErrInvalid, pp, p, cc)
	}
	units, size, err := d.units(files, pp, p)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan unit)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(cc, len(units)) {
		wg.Go(func() {
			for u := range work {
				if err := d.do(ctx, u); err != nil && !d.isolate(ctx, u, err) {
					// A failure of the copy (not of a file of its
					// own) stops the chunk: cp reports the first.
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for _, u := range units {
		select {
		case work <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	// Files copied whole are landed before the chunk counts as done (and
	// its time includes their sync).
	if err := d.st.flush(); err != nil && first == nil {
		first = err
	}
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	el := time.Since(start).Seconds()
	if el <= 0 {
		return 0, nil
	}
	return float64(size) / el, nil
}

// units cuts files into what the channels take, in order: each file of at
// least 2·ChunkMin alone (engine), each to be split alone, the rest in
// groups of pp files of one source when it can batch them, else alone.
func (d *Dataset) units(files []dataset.File, pp, p int) ([]unit, int64, error) {
	o := d.st.o
	var out []unit
	var size int64
	var group []item
	flush := func() {
		if len(group) > 0 {
			out = append(out, unit{kind: unitBatch, items: group})
			group = nil
		}
	}
	for _, f := range files {
		it, ok := d.items[f.Src]
		if !ok {
			return nil, 0, fmt.Errorf("copyjob: %w: %s is not a file of this copy", backend.ErrInvalid, f.Src)
		}
		size += it.size
		switch {
		case it.size >= 2*o.ChunkMin:
			out = append(out, unit{kind: unitBig, items: []item{it}, parts: p})
		case p > 1 && it.size >= 2*o.PartMin:
			out = append(out, unit{kind: unitSplit, items: []item{it}, parts: int(min(int64(p), it.size/o.PartMin))})
		case d.canBatch(it.from):
			if len(group) > 0 && group[0].from != it.from {
				flush()
			}
			group = append(group, it)
			if len(group) >= pp {
				flush()
			}
		default:
			out = append(out, unit{kind: unitWhole, items: []item{it}})
		}
	}
	flush()
	return out, size, nil
}

// batcher is the source's Batcher if its files can be batched to this
// process; nil if the source cannot batch or the destination pulls.
func (d *Dataset) batcher(from int) Batcher {
	src := d.st.srcs[from]
	b, ok := src.Backend.(Batcher)
	if !ok || d.st.puller(src) != nil {
		return nil
	}
	return b
}

// PullBatcher is implemented by destinations that fetch many whole files
// from a source agent in one request and rename many in one
// (backend/sluice: POST /v1/pullbatch, /v1/renames): pipelining for a
// third-party copy.
type PullBatcher interface {
	PullBatch(ctx context.Context, source, sourceToken, algo string, files []sluice.PullBatchFile) ([]sluice.PullBatchResult, error)
	Renames(ctx context.Context, pairs []sluice.RenamePair) ([]sluice.PullBatchResult, error)
}

// pullBatcher is the destination's PullBatcher when files of source from
// go agent to agent (the destination pulls them); nil otherwise.
func (d *Dataset) pullBatcher(from int) PullBatcher {
	src := d.st.srcs[from]
	if d.st.puller(src) == nil {
		return nil
	}
	pb, _ := d.st.dst.Backend.(PullBatcher)
	return pb
}

// canBatch reports whether files of source from can go in batches, one
// way or the other.
func (d *Dataset) canBatch(from int) bool {
	return d.batcher(from) != nil || d.pullBatcher(from) != nil
}

// do moves one unit.
func (d *Dataset) do(ctx context.Context, u unit) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u.kind == unitBatch {
		return d.copyBatch(ctx, u.items)
	}
	it := u.items[0]
	if there, err := d.there(ctx, it); there || err != nil {
		return nil // skipped, or given up (refuse)
	}
	switch u.kind {
	case unitBig:
		// Parts of about size/p, so that p ranges move at once, but
		// never below PartMin nor above ChunkMin (the engine then cuts
		// more chunks than workers and balances them).
		chunk := min(d.st.o.ChunkMin, max(d.st.o.PartMin, ceilDiv(it.size, int64(u.parts))))
		return d.st.copyBig(ctx, it, u.parts, chunk, nil)
	case unitSplit:
		return d.copySplit(ctx, it, u.parts)
	default:
		if err := d.st.copyWhole(ctx, it); err != nil {
			return fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
		}
		return nil
	}
}

// isolate handles a unit that failed with err for a reason of one file
// (fileLevel): that file is given up and the copy goes on. A batch is
// then moved file by file, so that the bad one is found and the others
// go. It reports whether the copy goes on.
func (d *Dataset) isolate(ctx context.Context, u unit, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if u.kind != unitBatch {
		return d.st.giveUp(u.items[0], err)
	}
	if !fileLevel(err) {
		return false
	}
	var be *batchError
	if !errors.As(err, &be) {
		return false
	}
	for _, it := range be.left { // those the batch did not land
		if ctx.Err() != nil {
			return false
		}
		if err := d.st.copyWhole(ctx, it); err != nil && !d.st.giveUp(it, fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)) {
			return false
		}
	}
	return true
}

// batchError is a batch's failure, with the files it did not land.
type batchError struct {
	left []item
	err  error
}

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// retryable reports whether sending a file again may succeed.
func retryable(err error) bool {
	return !backend.Permanent(err) && !errors.Is(err, engine.ErrSourceChanged)
}

// pause waits before retry number fails (1-based), or until ctx ends.
func pause(ctx context.Context, fails int) {
	t := time.NewTimer(lightBackoff << (fails - 1))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// copyBatch moves a group of files of one source in one batch GET, and
// what a failure leaves in further batches, retrying while they make
// progress (at most lightAttempts tries in a row without any).
func (d *Dataset) copyBatch(ctx context.Context, items []item) error {
	var todo []item
	for _, it := range items {
		if there, err := d.there(ctx, it); !there && err == nil {
			todo = append(todo, it)
		}
	}
	for fails := 0; len(todo) > 0; {
		left, err := d.batchOnce(ctx, todo)
		if err == nil {
			return nil
		}
		if len(left) < len(todo) {
			fails = 0
		}
		fails++
		if !retryable(err) || fails >= lightAttempts || ctx.Err() != nil {
			return &batchError{left: left, err: err}
		}
		d.st.retries.Add(1)
		pause(ctx, fails)
		todo = left
	}
	return nil
}

// batchOnce asks the source for items in one batch and lands each file as
// it arrives. It returns the items not delivered, and why (the first
// permanent error if there is one: no retry will help those).
func (d *Dataset) batchOnce(ctx context.Context, items []item) ([]item, error) {
	if pb := d.pullBatcher(items[0].from); pb != nil {
		return d.pullBatchOnce(ctx, pb, items)
	}
	st := d.st
	src := st.srcs[items[0].from]
	paths := make([]string, len(items))
	for i, it := range items {
		paths[i] = it.src
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The source's checksum of each file comes in the stream, after its
	// bytes, and the destination's is taken from the bytes as they are
	// written: no request per file for its checksum, and no second read
	// of what was written. (Asking each checksum apart cost a request
	// per file and, with every landing reading its file back at once,
	// 1.8 GB for 50,000 empty files.)
	algo := st.o.Checksum
	var br *sluice.BatchReader
	var err error
	if algo != "none" {
		br, err = d.batcher(items[0].from).BatchSums(ctx, paths, algo)
	} else {
		br, err = d.batcher(items[0].from).Batch(ctx, paths)
	}
	if err != nil {
		return items, fmt.Errorf("batch of %d files from %s: %w", len(items), src.URL, err)
	}
	defer br.Close()
	errs := make([]error, len(items))
	// settled: in place, or given up for good (landMany).
	settled := make([]bool, len(items))
	var ready []int  // verified, in their temporary files
	var broken error // the stream itself failed: the files after it are lost
	for i, it := range items {
		name, size, r, err := br.Next()
		switch {
		case err != nil && name != "":
			// An error frame: this file could not be sent; the batch
			// goes on.
			errs[i] = fmt.Errorf("%s: %w", it.src, err)
			continue
		case errors.Is(err, io.EOF):
			broken = fmt.Errorf("batch from %s ended after %d of %d files: %w", src.URL, i, len(items), io.ErrUnexpectedEOF)
		case err != nil:
			broken = fmt.Errorf("batch from %s, at %s: %w", src.URL, it.src, err)
		case name != it.src:
			broken = fmt.Errorf("batch from %s: %w: sent %q where %q was due", src.URL, errBatchOrder, name, it.src)
		case size != it.size:
			errs[i] = fmt.Errorf("%s: %w: %d bytes, %d when listed", it.src, engine.ErrSourceChanged, size, it.size)
			continue
		}
		if broken != nil {
			break
		}
		tmp := engine.TempName(it.dst)
		var h hash.Hash
		if algo != "none" {
			h, _ = backend.NewHash(algo) // checked with the options
			r = io.TeeReader(r, h)
		}
		cr := &countReader{r: r, n: &st.moving}
		err = st.dst.Backend.WriteAt(ctx, tmp, 0, cr, size)
		st.moving.Add(-cr.read)
		if err != nil {
			st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
			// Where the stream stands is unknown now: give up on it.
			broken = fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
			break
		}
		if h != nil {
			want, err := br.Checksum()
			if err != nil && br.Err() == nil {
				// This file alone: it changed while the source read it.
				st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
				errs[i] = fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
				continue
			}
			if err != nil {
				st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
				broken = fmt.Errorf("batch from %s, checksum of %s: %w", src.URL, it.src, err)
				break
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				st.dst.Backend.Remove(context.WithoutCancel(ctx), tmp)
				errs[i] = fmt.Errorf("%s -> %s: %w (%s): source %s, destination %s", it.src, it.dst, engine.ErrChecksum, algo, want, got)
				continue
			}
		}
		ready = append(ready, i)
	}
	d.landMany(ctx, items, ready, errs, settled)
	left, err := undelivered(items, settled, errs)
	if broken != nil && (err == nil || retryable(err)) {
		return left, broken
	}
	return left, err
}

// syncManyer is a destination that makes many files durable at once
// (the file backend: one syncfs(2)).
type syncManyer interface {
	SyncMany(ctx context.Context, paths []string) error
}

// renameManyer is a destination whose renames can share one sync of
// their directories (the file backend).
type renameManyer interface {
	RenameNoSync(ctx context.Context, from, to string) error
	SyncDirs(ctx context.Context, paths []string)
}

// landMany puts the verified files items[ready] in place: their bytes are
// made durable first, together where the destination can (one sync for
// the batch, not one per file, which makes small files crawl), then each
// is renamed, and the new names are made durable. A file renamed before
// its bytes were synced could be found empty after a crash, under its
// final name, as done. settled[i] is set for each file in place, and for
// each whose rename was refused because a file appeared at its path
// (refusedAtRename): that one is given up or skipped (takenMeanwhile),
// not sent again.
func (d *Dataset) landMany(ctx context.Context, items []item, ready []int, errs []error, settled []bool) {
	if len(ready) == 0 {
		return
	}
	st := d.st
	dst := st.dst.Backend
	tmps := make([]string, len(ready))
	for k, i := range ready {
		tmps[k] = engine.TempName(items[i].dst)
	}
	fail := func(k int, err error) {
		i := ready[k]
		dst.Remove(context.WithoutCancel(ctx), tmps[k])
		errs[i] = fmt.Errorf("%s -> %s: %w", items[i].src, items[i].dst, err)
	}
	if sm, ok := dst.(syncManyer); ok {
		if err := sm.SyncMany(ctx, tmps); err != nil {
			for k := range ready {
				fail(k, fmt.Errorf("sync: %w", err))
			}
			return
		}
	} else {
		for k := range ready {
			if err := dst.Sync(ctx, tmps[k]); err != nil {
				fail(k, fmt.Errorf("sync: %w", err))
			}
		}
	}
	rename, syncDirs := st.placer()
	var placed []string
	for k, i := range ready {
		if errs[i] != nil {
			continue // its sync failed
		}
		it := items[i]
		if err := st.setModTime(ctx, tmps[k], it); err != nil {
			fail(k, err)
			continue
		}
		if err := rename(ctx, tmps[k], it.dst); st.refusedAtRename(err) {
			dst.Remove(context.WithoutCancel(ctx), tmps[k])
			st.takenMeanwhile(ctx, it)
			settled[i] = true
			continue
		} else if err != nil {
			fail(k, err)
			continue
		}
		placed = append(placed, it.dst)
		settled[i] = true
		st.done.Add(it.size)
		st.filesDone.Add(1)
	}
	if syncDirs != nil {
		syncDirs(context.WithoutCancel(ctx), placed)
	}
}

// undelivered is what a batch attempt returns: all the items not
// delivered, and the first permanent error among theirs (nothing will
// deliver that file, so the batch is not retried), else the first error.
// Every undelivered item is returned, also those after a permanent error:
// the caller copies them one by one or gives them up, and an item left
// out would be neither copied nor reported.
func undelivered(items []item, delivered []bool, errs []error) ([]item, error) {
	var left []item
	var first, permanent error
	for i, it := range items {
		if delivered[i] {
			continue
		}
		left = append(left, it)
		switch e := errs[i]; {
		case e != nil && !retryable(e) && permanent == nil:
			permanent = e
		case e != nil && first == nil:
			first = e
		}
	}
	if permanent != nil {
		return left, permanent
	}
	return left, first
}

// pullBatchOnce is batchOnce agent to agent: the destination fetches the
// items in one pull batch (each verified there against the checksum the
// source sent with its bytes, and synced), then they are renamed in one
// request. It returns the items not delivered and why, as batchOnce.
func (d *Dataset) pullBatchOnce(ctx context.Context, pb PullBatcher, items []item) ([]item, error) {
	st := d.st
	src := st.srcs[items[0].from]
	files := make([]sluice.PullBatchFile, len(items))
	for i, it := range items {
		files[i] = sluice.PullBatchFile{Src: it.src, Dst: engine.TempName(it.dst), Size: it.size}
	}
	tok, err := src.pullToken()
	if err != nil {
		return items, err
	}
	res, err := pb.PullBatch(ctx, sourceBase(src), tok, st.o.Checksum, files)
	if err != nil {
		return items, fmt.Errorf("pull batch of %d files from %s: %w", len(items), src.URL, err)
	}
	errs := make([]error, len(items))
	delivered := make([]bool, len(items))
	var pairs []sluice.RenamePair
	var pass []int
	for i, it := range items {
		if err := res[i].Err(); err != nil {
			errs[i] = fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
			continue
		}
		pairs = append(pairs, sluice.RenamePair{From: files[i].Dst, To: it.dst, Replace: st.noReplace(), ModTime: st.modTime(it)})
		pass = append(pass, i)
	}
	if len(pairs) > 0 {
		rr, err := pb.Renames(ctx, pairs)
		if err != nil {
			for _, i := range pass {
				errs[i] = fmt.Errorf("%s -> %s: %w", items[i].src, items[i].dst, err)
			}
		} else {
			for k, i := range pass {
				if err := rr[k].Err(); st.refusedAtRename(err) {
					// A file appeared at its path and was kept
					// (kind "exist"): as in landMany.
					st.dst.Backend.Remove(context.WithoutCancel(ctx), files[i].Dst)
					st.takenMeanwhile(ctx, items[i])
					delivered[i] = true // settled: not sent again
					continue
				} else if err != nil {
					errs[i] = fmt.Errorf("%s -> %s: %w", items[i].src, items[i].dst, err)
					continue
				}
				st.done.Add(items[i].size)
				st.filesDone.Add(1)
				delivered[i] = true
			}
		}
	}
	return undelivered(items, delivered, errs)
}

// errBatchOrder is an agent answering a batch out of order: a broken
// stream, since the bytes cannot be matched to their files.
var errBatchOrder = errors.New("batch answer out of order")

// sumSet is the source's checksums of a group of files, asked for at once.
type sumSet struct {
	sums []string
	errs []error
	done []chan struct{}
}

// sum returns a function that waits for the checksum of file i.
func (s *sumSet) sum(i int) func() (string, error) {
	return func() (string, error) {
		if s == nil {
			return "", nil
		}
		<-s.done[i]
		return s.sums[i], s.errs[i]
	}
}

// sourceSums asks the source for the checksum of every item at once, at
// most maxSumsInFlight at a time, while their bytes move: the source's
// own checksum of its file is what the destination's must equal, and on a
// WAN each request is a round trip, so asking them one after another
// would cost what pipelining saves. Stop them early by cancelling ctx.
// It returns nil when checksums are off.
func (d *Dataset) sourceSums(ctx context.Context, src Endpoint, items []item) *sumSet {
	algo := d.st.o.Checksum
	if algo == "none" {
		return nil
	}
	s := &sumSet{sums: make([]string, len(items)), errs: make([]error, len(items)), done: make([]chan struct{}, len(items))}
	for i := range items {
		s.done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, maxSumsInFlight)
	for i, it := range items {
		go func() {
			defer close(s.done[i])
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				s.errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			s.sums[i], s.errs[i] = src.Backend.Checksum(ctx, it.src, algo)
		}()
	}
	return s
}

// land verifies a file written to tmp, the source's checksum (want)
// against the destination's, and queues it to be made durable and renamed
// over its destination path. On any failure tmp is removed and nothing is
// renamed.
func (d *Dataset) land(ctx context.Context, it item, tmp string, want func() (string, error)) error {
	st := d.st
	dst := st.dst.Backend
	fail := func(err error) error {
		dst.Remove(context.WithoutCancel(ctx), tmp)
		return err
	}
	if algo := st.o.Checksum; algo != "none" {
		got, err := dst.Checksum(ctx, tmp, algo)
		if err != nil {
			return fail(fmt.Errorf("checksum at the destination: %w", err))
		}
		w, err := want()
		if err != nil {
			return fail(fmt.Errorf("checksum at the source: %w", err))
		}
		if got != w {
			return fail(fmt.Errorf("%w (%s): source %s, destination %s", engine.ErrChecksum, algo, w, got))
		}
	}
	// Made durable and renamed in a group with the files other workers
	// verified, behind this one's back (see committer); counted copied
	// once it is in place.
	if err := st.queue(ctx, it, tmp); err != nil {
		return fail(err)
	}
	return nil
}

// copySplit moves one file as parts byte ranges at once into its
// temporary name, then lands it; the whole file is sent again on a
// transient error (at most lightAttempts tries).
func (d *Dataset) copySplit(ctx context.Context, it item, parts int) error {
	for fails := 0; ; {
		err := d.splitOnce(ctx, it, parts)
		if err == nil {
			return nil
		}
		fails++
		if !retryable(err) || fails >= lightAttempts || ctx.Err() != nil {
			return fmt.Errorf("%s -> %s: %w", it.src, it.dst, err)
		}
		d.st.retries.Add(1)
		d.st.resent.Add(it.size)
		pause(ctx, fails)
	}
}

func (d *Dataset) splitOnce(ctx context.Context, it item, parts int) error {
	st := d.st
	src := st.srcs[it.from]
	dst := st.dst.Backend
	tmp := engine.TempName(it.dst)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sums := d.sourceSums(ctx, src, []item{it})
	// Allocated first: the ranges land in any order, and a pull writes
	// only into a file that exists.
	if err := dst.Truncate(ctx, tmp, it.size); err != nil {
		return err
	}
	pull := st.puller(src)
	// Into the file just allocated, never a new one: one removed
	// meanwhile would come back holding only the later parts.
	write := dst.WriteAt
	if ew, ok := dst.(backend.ExistingWriter); ok {
		write = ew.WriteAtExisting
	}
	part := ceilDiv(it.size, int64(parts))
	g, gctx := errgroup.WithContext(ctx)
	for off := int64(0); off < it.size; off += part {
		n := min(part, it.size-off)
		g.Go(func() error {
			if pull != nil {
				return pull(gctx, it.src, tmp, off, n, nil)
			}
			rc, err := src.Backend.OpenRange(gctx, it.src, off, n)
			if err != nil {
				return err
			}
			defer rc.Close()
			cr := &countReader{r: rc, n: &st.moving}
			err = write(gctx, tmp, off, cr, n)
			st.moving.Add(-cr.read)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		dst.Remove(context.WithoutCancel(ctx), tmp)
		return err
	}
	return d.land(ctx, it, tmp, sums.sum(0))
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}
