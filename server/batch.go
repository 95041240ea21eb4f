package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/store"
)

// Small files move in pull batches (the flexible-client paper's
// pipelining: Yildirim, "A Flexible GridFTP Client For Implementation of
// Intelligent Cloud Data Scheduling Services"): the runs the scheduler starts
// in one cycle for small files of one job between the same two directories of
// the same two endpoints are grouped, and each group is fetched by the
// destination agent from the source agent in one batch GET (POST
// /v1/pullbatch), checked against the source's checksums sent with the bytes,
// made durable with one sync, and put in place with one rename request
// (POST /v1/renames) after this server's claim check. A 1 MiB file moved
// alone costs about ten requests (stats, allocation, pull, sync, two
// checksums, rename); in a batch of eight it costs a quarter of one.
//
// A batch carries about pp = 1 + BDP / mean file size files (the paper's
// Optimal_PP), with BDP one connection's bandwidth-delay product
// (Config.BatchBDP): files that fill a connection's pipe on their own go
// one per batch, and each still saves the per-file requests; only files
// well under the BDP share a batch.
//
// Each file is still a task with its own state, cancellation and
// retries, and the scheduler decides which jobs get connections and how
// many: a batch is one connection, and only its first member (a file
// the scheduler started) counts as one at the endpoints and against the
// VO's streams. The others ride on it (task.rider): queued files of the
// same job and directories (fillBatches), pp-1 per started file. The
// scheduler does not see them, and they count no streams. Batches made
// of the scheduler's starts alone shrink to a file or two each: every
// batch that ends frees one connection and the scheduler starts one file
// on it; grouping the files of one cycle instead leaves connections the
// scheduler gave unused. A path with a 50 ms round trip then carried 32
// files (2 MiB of 64 KiB files) per round trip, 15% of a 1 Gb/s link.

// maxBatchFiles bounds the files of one batch (the paper's max pp).
const maxBatchFiles = 64

// batchAttempts and batchBackoff: how often, and how far apart (growing
// linearly), a failed pull batch request is sent again.
const (
	batchAttempts = 3
	batchBackoff  = 250 * time.Millisecond
)

// batchMax is the size up to which a file may go in a batch (0: none).
func (s *Server) batchMax() int64 {
	switch {
	case s.cfg.BatchMax < 0:
		return 0
	case s.cfg.BatchMax > 0:
		return s.cfg.BatchMax
	}
	return s.chunkMin()
}

func (s *Server) chunkMin() int64 {
	if s.cfg.ChunkMin > 0 {
		return s.cfg.ChunkMin
	}
	return engine.DefaultChunkMin
}

// DefaultBatchBDP is Config.BatchBDP's default: one TCP connection's
// bandwidth-delay product on a typical research WAN path (about 100 Mb/s
// per stream over a 20 ms round trip).
const DefaultBatchBDP = 256 << 10

func (s *Server) batchBDP() int64 {
	if s.cfg.BatchBDP > 0 {
		return s.cfg.BatchBDP
	}
	return DefaultBatchBDP
}

// batchable reports whether t's run can go in a batch: a small file from
// one source, nothing of it moved yet (a partly copied file resumes from
// its checkpoint through the engine).
//
// A batch's read token covers the source's directory, not the file: a
// file of a user held to access rules batches only if a rule grants
// that directory (else it runs alone, with a token for the file).
func (w *world) batchable(t *task) bool {
	if !(t.Size >= 0 && t.Size <= w.s.batchMax() && t.Done == 0 && len(t.Replicas) == 0 &&
		t.srcEp != nil && t.dstEp != nil && t.srcEp.URL != "" && t.dstEp.URL != "" &&
		!t.srcEp.Storage() && !t.dstEp.Storage()) { // batches are agents' (POST /v1/pullbatch)
		return false
	}
	acc, err := w.jobAccess(t.job)
	if err != nil {
		return false // it runs alone, which waits for the rules
	}
	return acc.Admin() || acc.LinkBase(t.SrcEndpoint, path.Dir(urlPath(t.Src)), AccessRead) != ""
}

// batchKey groups runs that may share a batch: one job (one owner, one
// token subject), one pair of agents and directories (the tokens are
// scoped to the two directories), one checksum algorithm.
type batchKey struct {
	job              int64
	src, dst         string
	srcDir, dstDir   string
	checksum         string
	expectedChecksum bool
}

// batchKeyOf is the batch key of t's run planned as p.
func batchKeyOf(t *task, p plan) batchKey {
	return batchKey{job: t.JobID, src: t.SrcEndpoint, dst: t.DstEndpoint,
		srcDir: path.Dir(p.srcPath), dstDir: path.Dir(p.dstPath), checksum: p.checksum, expectedChecksum: p.expected != ""}
}

// batchPP is how many files of mean size one batch carries.
func batchPP(bdp, mean int64) int {
	return int(min(1+bdp/max(mean, 1), maxBatchFiles))
}

// riderScan bounds the queued tasks fillBatches looks at for one group
// beyond the files it takes: a job's files that cannot ride (too large,
// another directory) must not make a cycle walk the whole job.
const riderScan = 256

// fillBatches gives each batchable start of this cycle pp-1 riders and
// returns starts and audit with the riders' starts added (they are
// written with the cycle's other starts). Each start the scheduler made
// is one connection, which leads a batch; the rest of the batch is
// queued files of the same job that would go in the same batch, taken
// in ID order after the group's last started file (then before it).
// waiting is the cycle's snapshot of queued tasks, in ID order.
// Adaptive jobs get no riders: their concurrency of files in flight is
// the adaptive client's to set.
func (w *world) fillBatches(starts []*task, audit []store.AuditEntry, waiting []*sched.Task, now time.Time) ([]*task, []store.AuditEntry) {
	type group struct {
		n     int
		total int64
		last  int64
	}
	groups := map[batchKey]*group{}
	var keys []batchKey
	for _, t := range starts {
		if t.State != store.StateRunning || t.cancel != nil || t.job.Adaptive != "" || !w.batchable(t) {
			continue
		}
		p := w.plan(t)
		if p.denied != nil {
			continue
		}
		k := batchKeyOf(t, p)
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.total += t.Size
		g.last = max(g.last, t.ID)
	}
	bdp := w.s.batchBDP()
	for _, k := range keys {
		g := groups[k]
		pp := batchPP(bdp, g.total/int64(g.n))
		need := g.n * (pp - 1)
		if need == 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(waiting, sched.TaskID(g.last), func(st *sched.Task, id sched.TaskID) int { return cmp.Compare(st.ID, id) })
		looked := 0
		// take looks at the queued task st; false: stop this direction.
		take := func(st *sched.Task) bool {
			t := w.tasks.get(int64(st.ID))
			if t == nil || t.JobID != k.job {
				return false // a job's files have consecutive IDs
			}
			if looked++; looked > riderScan+need {
				return false
			}
			// At most one connection's BDP: a larger file fills a
			// connection on its own.
			if t.State != store.StateQueued || t.Size > bdp || !w.batchable(t) {
				return true
			}
			p := w.plan(t)
			if p.denied != nil || batchKeyOf(t, p) != k {
				return true
			}
			audit = append(audit, w.start(t, 1, now))
			w.ride(t)
			starts = append(starts, t)
			need--
			return need > 0
		}
		for i := at; i < len(waiting) && take(waiting[i]); i++ {
		}
		looked = 0
		for i := at - 1; need > 0 && i >= 0 && take(waiting[i]); i-- {
		}
	}
	return starts, audit
}

// member is one run of a batch.
type member struct {
	p   plan
	run int
	ctx context.Context // the run's own: canceled when the loop stops it
}

// launchBatches starts the batches of this cycle's batchable runs, each
// run with its own context (t.cancel stops it, as any run).
func (w *world) launchBatches(ts []*task) {
	groups := map[batchKey][]member{}
	tasks := map[batchKey][]*task{}
	var keys []batchKey
	for _, t := range ts {
		ctx, cancel := context.WithCancel(w.ctx)
		t.cancel = cancel
		t.batched = true
		if t.stop != "" {
			cancel()
		}
		w.inflight++
		p := w.plan(t)
		if p.denied != nil {
			// Not in a batch: it fails on its own, as a run does.
			id, run, err := t.ID, t.run, p.denied
			go w.s.post(func(w *world) { w.finished(id, run, engine.Result{}, err) })
			continue
		}
		k := batchKeyOf(t, p)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], member{p: p, run: t.run, ctx: ctx})
		tasks[k] = append(tasks[k], t)
	}
	bdp := w.s.batchBDP()
	for _, k := range keys {
		ms := groups[k]
		var total int64
		for _, m := range ms {
			total += m.p.task.Size
		}
		var leads, riders []member
		for i, m := range ms {
			if tasks[k][i].rider {
				riders = append(riders, m)
			} else {
				leads = append(leads, m)
			}
		}
		if len(riders) > 0 && len(leads) > 0 {
			// Each started file leads a batch, the riders share out.
			for i, m := range leads {
				lo, hi := i*len(riders)/len(leads), (i+1)*len(riders)/len(leads)
				ms := append([]member{m}, riders[lo:hi]...)
				w.s.async(func() { w.s.runBatch(w.ctx, ms) })
			}
			continue
		}
		// No riders (an adaptive job's files; the last of a job): the
		// starts share ceil(n/pp) batches of pp = 1 + BDP / mean (at
		// most maxBatchFiles) in equal shares, and all but the first
		// of each ride on its connection.
		pp := batchPP(bdp, total/int64(len(ms)))
		n := (len(ms) + pp - 1) / pp
		for i := range n {
			lo, hi := i*len(ms)/n, (i+1)*len(ms)/n
			for _, t := range tasks[k][lo+1 : hi] {
				w.ride(t)
			}
			b := ms[lo:hi]
			w.s.async(func() { w.s.runBatch(w.ctx, b) })
		}
	}
}

// ride makes t's run a rider (see task.rider): the connection start
// counted for it at its endpoints is given back.
func (w *world) ride(t *task) {
	if t.rider {
		return
	}
	t.rider = true
	w.addConns(t, -t.CC)
}

// runBatch moves one batch and reports every member's run to the loop,
// exactly once each.
func (s *Server) runBatch(parent context.Context, ms []member) {
	start := time.Now()
	reported := make([]bool, len(ms))
	report := func(i int, res engine.Result, err error) {
		if reported[i] {
			return
		}
		reported[i] = true
		id, run := ms[i].p.task.ID, ms[i].run
		s.post(func(w *world) { w.finished(id, run, res, err) })
	}
	defer func() {
		for i := range ms {
			report(i, engine.Result{}, errors.New("batch ended without an answer for this file"))
		}
	}()
	// The batch's requests stop when every member has been stopped.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(ms)))
	for _, m := range ms {
		stop := context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	journals := func(m member) storeJournals {
		return storeJournals{st: s.st, owner: s.cfg.ServerID, task: m.p.task.ID, term: m.p.task.Term}
	}
	// The destination agent's client, with a token for the batch's
	// destination directory (and a read token for the source's, which
	// the destination agent pulls with).
	batchDst, srcTok, err := s.batchBackends(ctx, ms[0].p, len(ms))
	if err != nil {
		for i := range ms {
			report(i, engine.Result{}, err)
		}
		return
	}
	// What is at each destination, looked at for all members at once:
	// one by one, a batch of small files paid a round trip per file
	// before its first byte moved.
	dests := s.checkDestinations(ctx, ms, batchDst)
	// live: the members still going, by index.
	live := make([]int, 0, len(ms))
	for i, m := range ms {
		if err := m.ctx.Err(); err != nil {
			report(i, engine.Result{}, err)
			continue
		}
		// An earlier run (on this server or another that died) may have
		// put the file in place without recording it: check it rather
		// than put it in place a second time, as runTransfer does.
		if cp, ok, err := engine.ReadCheckpoint(ctx, journals(m), journalKey(m.p.task.ID)); err == nil && ok && cp.Complete() && cp.Size == m.p.task.Size {
			res, done, err := s.checkInPlace(ctx, m.p)
			switch {
			case err != nil:
				report(i, engine.Result{}, fmt.Errorf("checking whether %s is already complete: %w", m.p.task.Dst, err))
				continue
			case done:
				report(i, res, nil)
				continue
			}
		}
		// What is at the destination, before any byte moves (as
		// runTransfer): a directory or a file the job keeps fails the
		// file at once, an identical one is done.
		if d := dests[i]; d.err != nil || d.done {
			report(i, d.res, d.err)
			continue
		}
		// The fence, as the engine's Spec.Begin: another server may own
		// the partition now.
		if err := s.st.CheckClaim(ctx, s.cfg.ServerID, m.p.task.ID, m.p.task.Term); err != nil {
			report(i, engine.Result{}, fmt.Errorf("engine: not starting %s: %w", m.p.dstPath, err))
			continue
		}
		live = append(live, i)
	}
	if len(live) == 0 {
		return
	}
	first := ms[live[0]].p
	dst := batchDst
	for _, i := range live {
		id, run := ms[i].p.task.ID, ms[i].run
		s.post(func(w *world) { w.moving(id, run) })
	}
	// A job that preserves modification times learns its sources' in
	// one more request, and the agent gives each file its time before
	// the rename (RenamePair.ModTime).
	var mtimes []time.Time
	if first.preserveMtime {
		ps := make([]plan, len(live))
		for j, i := range live {
			ps[j] = ms[i].p
		}
		infos, _ := s.statSourceInfos(ctx, ps) // a source that fails it fails the pull too
		mtimes = make([]time.Time, len(live))
		for j, fi := range infos {
			mtimes[j] = fi.ModTime
		}
	}
	files := make([]sluice.PullBatchFile, len(live))
	for j, i := range live {
		p := ms[i].p
		files[j] = sluice.PullBatchFile{Src: p.srcPath, Dst: engine.TempNameFor(p.dstPath, tempTag(p.task)), Size: p.task.Size, Fence: taskFence(p.task).String()}
	}
	s.met.batches.Inc()
	s.met.batchFiles.Add(float64(len(files)))
	// A pull batch only writes temporary names, so a failed request is
	// simply sent again, a few times, as the engine retries a failed
	// range: an agent restarting should not cost every file an attempt.
	var results []sluice.PullBatchResult
	for attempt := 1; ; attempt++ {
		results, err = dst.PullBatch(ctx, pullBase(first.srcURL), srcTok, first.checksum, files)
		if err == nil || backend.Permanent(err) || ctx.Err() != nil || attempt == batchAttempts {
			break
		}
		select {
		case <-time.After(time.Duration(attempt) * batchBackoff):
		case <-ctx.Done():
		}
	}
	if err != nil {
		for _, i := range live {
			report(i, engine.Result{}, err)
		}
		return
	}
	// Check each file, then the claims (the fence before anything is
	// put in place, with the record that the file may be in place from
	// now on: one transaction for the batch), then rename what passed,
	// in one request.
	var checked []int // indexes into live
	for j, i := range live {
		m, r := ms[i], results[j]
		if err := r.Err(); err != nil {
			// The pull of one file failed: at the source (reading) or
			// at the destination (writing); the agent's message says
			// which path, so both ends are named.
			report(i, engine.Result{}, fmt.Errorf("%s -> %s: %w", m.p.task.Src, m.p.task.Dst, err))
			continue
		}
		if m.p.expected != "" && r.SourceChecksum != m.p.expected {
			dst.Remove(context.WithoutCancel(ctx), files[j].Dst)
			report(i, engine.Result{}, fmt.Errorf("engine: %w: source %s has %s %s, expected %s", engine.ErrChecksum, m.p.srcPath, m.p.checksum, r.SourceChecksum, m.p.expected))
			continue
		}
		if err := m.ctx.Err(); err != nil {
			report(i, engine.Result{}, err)
			continue
		}
		checked = append(checked, j)
	}
	saveErrs := s.saveComplete(ctx, ms, live, checked)
	var pairs []sluice.RenamePair
	var pass []int
	for k, j := range checked {
		i := live[j]
		m := ms[i]
		if err := saveErrs[k]; err != nil {
			report(i, engine.Result{}, fmt.Errorf("engine: not putting %s in place: %w", m.p.dstPath, err))
			continue
		}
		pair := sluice.RenamePair{From: files[j].Dst, To: m.p.dstPath, Fence: files[j].Fence}
		if mtimes != nil && !mtimes[j].IsZero() {
			pair.ModTime = &mtimes[j]
		}
		if !store.Replaces(m.p.overwrite) {
			// Nor a file that appeared since checkDestinationOf.
			pair.Replace = new(bool)
		}
		pairs = append(pairs, pair)
		pass = append(pass, j)
	}
	if len(pairs) == 0 {
		return
	}
	// The renames run even if every member was stopped meanwhile: the
	// files are verified and the claims checked, so putting them in place
	// is what a stopped engine run past its checks does too.
	rres, err := dst.Renames(context.WithoutCancel(ctx), pairs)
	if err != nil {
		for _, j := range pass {
			report(live[j], engine.Result{}, err)
		}
		return
	}
	secs := time.Since(start).Seconds()
	for k, j := range pass {
		i, r := live[j], results[j]
		if err := rres[k].Err(); err != nil {
			if pairs[k].Replace != nil && errors.Is(err, backend.ErrExist) {
				// Final, as the engine's refused rename: the file
				// there is kept, and a retry would move the bytes
				// again only to be refused again.
				err = fmt.Errorf("%s: %w: it appeared during the transfer; not replaced (%w)", ms[i].p.task.Dst, engine.ErrDestinationExists, err)
			} else {
				err = fmt.Errorf("renaming %s: %w", pairs[k].From, err)
			}
			report(i, engine.Result{}, err)
			continue
		}
		algo, sum := ms[i].p.checksum, r.SourceChecksum
		if algo == "none" {
			algo, sum = "", ""
		}
		// No Note: the loop logs a line for every run with one, and
		// batches are for files by the thousand (the metrics count them).
		report(i, engine.Result{Size: r.Bytes, Bytes: r.Bytes, Seconds: secs, Checksum: sum, Algo: algo}, nil)
	}
}

// saveComplete records, for the members live[j] of each j in checked, a
// complete checkpoint (engine.SaveComplete's) in one fenced store
// transaction, and returns each one's error in checked's order: a
// member whose claim is gone gets engine.ErrFenced, as a single run's
// save would.
func (s *Server) saveComplete(ctx context.Context, ms []member, live, checked []int) []error {
	errs := make([]error, len(checked))
	puts := make([]store.CheckpointPut, 0, len(checked))
	at := make([]int, 0, len(checked)) // puts[x] is checked[at[x]]
	for k, j := range checked {
		p := ms[live[j]].p
		b, err := engine.CompleteJournal(p.srcPath, p.dstPath, p.task.Size)
		if err != nil {
			errs[k] = err
			continue
		}
		puts = append(puts, store.CheckpointPut{Key: journalKey(p.task.ID), Data: b, Task: p.task.ID, Term: p.task.Term})
		at = append(at, k)
	}
	perPut, err := s.st.PutCheckpointsFenced(ctx, s.cfg.ServerID, puts)
	for x, k := range at {
		e := err
		if e == nil {
			e = perPut[x]
		}
		if errors.Is(e, store.ErrStaleTerm) {
			e = fmt.Errorf("%w: %w", engine.ErrFenced, e)
		}
		if e != nil {
			e = fmt.Errorf("writing journal %s: %w", puts[x].Key, e)
		}
		errs[k] = e
	}
	return errs
}

// destCheck is checkDestination's answer for one member of a batch.
type destCheck struct {
	res  engine.Result
	done bool
	err  error
}

// destChecksAtOnce bounds the destination look-ups of one batch in flight.
const destChecksAtOnce = 16

// checkDestinations runs checkDestinationOf for every member of a batch
// and returns the answers in members' order. The destinations are
// stat'ed in one request (dst's token covers their directory); only
// those where something is found are looked at one by one (what is
// there, the overwrite rule, a checksum), destChecksAtOnce at a time.
func (s *Server) checkDestinations(ctx context.Context, ms []member, dst *sluice.Backend) []destCheck {
	out := make([]destCheck, len(ms))
	paths := make([]string, len(ms))
	for i, m := range ms {
		paths[i] = m.p.dstPath
	}
	todo := make([]bool, len(ms))
	if rs, err := dst.StatMany(ctx, paths); err != nil {
		for i := range todo {
			todo[i] = true // each on its own, which says what failed
		}
	} else {
		for i, r := range rs {
			todo[i] = !errors.Is(r.Err(), backend.ErrNotFound)
			if todo[i] && r.Err() == nil && !r.IsDir {
				// A sync level whose test needs only this stat (exists,
				// size; checksum for files of another size) is decided
				// here, with no call per file.
				// (mtime needs the source's stat: one by one.)
				level := store.SyncLevel(ms[i].p.overwrite)
				if same, ok := backend.InSync(level, backend.FileInfo{Size: ms[i].p.task.Size}, r.Info()); ok && level != "mtime" {
					if same {
						out[i] = destCheck{res: engine.Result{Size: r.Size, Note: store.NoteInPlace}, done: true}
					}
					todo[i] = false // else replaced: the batch writes it
				}
			}
		}
	}
	sem := make(chan struct{}, destChecksAtOnce)
	var wg sync.WaitGroup
	for i, m := range ms {
		if !todo[i] {
			continue // nothing there: the file goes in place
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d := &out[i]
			d.res, d.done, d.err = s.checkDestinationOf(ctx, m.p)
		})
	}
	wg.Wait()
	return out
}

// checkDestinationOf is checkDestination for one file of a batch.
func (s *Server) checkDestinationOf(ctx context.Context, p plan) (engine.Result, bool, error) {
	src, dst, _, err := s.backends(ctx, p)
	if err != nil {
		return engine.Result{}, false, err
	}
	return s.checkDestination(ctx, src, dst, p)
}

// checkInPlace is alreadyDone for one file of a batch.
func (s *Server) checkInPlace(ctx context.Context, p plan) (engine.Result, bool, error) {
	src, dst, _, err := s.backends(ctx, p)
	if err != nil {
		return engine.Result{}, false, err
	}
	return s.alreadyDone(ctx, src, dst, p)
}

// batchBackends returns the client for a batch's destination agent, with
// a token for the destination directory, and a read token for the source
// directory that the destination agent fetches the files with.
func (s *Server) batchBackends(ctx context.Context, p plan, n int) (dst *sluice.Backend, srcTok string, err error) {
	srcToks, dstToks, err := s.dataTokens(p, fmt.Sprintf("job %d batch of %d files", p.task.JobID, n), path.Dir(p.srcPath))
	if err != nil {
		return nil, "", err
	}
	if dst, err = s.agent(ctx, p.dstURL, dstToks); err != nil {
		return nil, "", err
	}
	// One token for the source: the batch is one request to it.
	if srcTok, err = srcToks(); err != nil {
		return nil, "", err
	}
	return dst, srcTok, nil
}
