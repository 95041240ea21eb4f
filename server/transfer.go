package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// plan is everything a transfer goroutine needs, copied out of the loop.
type plan struct {
	task           store.Task
	srcURL, dstURL string // agents' http(s)://host:port
	srcAud, dstAud string // endpoint names (token audiences)
	srcPath        string
	dstPath        string
	// srcBase and dstBase are the data tokens' link bases
	// (auth.Claims.Base; "": their prefixes).
	srcBase, dstBase string
	// restricted: the job's owner is held to access rules (not an
	// admin), so every data token must have a link base.
	restricted bool
	checksum   string // algorithm
	expected   string // hex, or ""
	// overwrite is the job's Overwrite: what to do with a file already
	// at the destination (checkDestination).
	overwrite string
	// preserveMtime: the job gives each file its source's modification
	// time.
	preserveMtime bool
	// replicas are the file's other copies; shares the part of it each
	// source (the first, then these) is planned to send; steal the
	// dynamic mode (see multisource.go).
	replicas []replicaPlan
	shares   []float64
	rates    []float64 // the plan's predicted rate per replica (0: none)
	steal    bool
	split    string // how the shares were chosen, for the audit
	// checkpointEvery is the journal interval (world.checkpointEvery).
	checkpointEvery time.Duration
	// srcStorage and dstStorage are the ends on storage endpoints (nil:
	// an agent).
	srcStorage, dstStorage *storageEnd
	// denied is why the job's owner may no longer read the source or
	// write the destination (the access rules changed since the job
	// was submitted): the run fails with it at once, nothing moved.
	denied error
}

func journalKey(id int64) string { return fmt.Sprintf("task/%d", id) }

// storeJournals keeps the engine's checkpoint journals in the store, so
// that a restarted server (or another one) resumes where a run stopped.
// With a fence (owner non-empty), saves are written only while the task
// is still claimed under term by owner (store.PutCheckpointFenced).
type storeJournals struct {
	st    store.Store
	owner string
	task  int64
	term  int64
}

func (j storeJournals) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := j.st.Checkpoint(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("checkpoint %s: %w", key, fs.ErrNotExist)
	}
	return b, err
}

func (j storeJournals) Save(ctx context.Context, key string, data []byte) error {
	if j.owner != "" {
		err := j.st.PutCheckpointFenced(ctx, key, data, j.owner, j.task, j.term)
		if errors.Is(err, store.ErrStaleTerm) {
			// Stop the run: another server owns the task now.
			err = fmt.Errorf("%w: %w", engine.ErrFenced, err)
		}
		return err
	}
	return j.st.PutCheckpoint(ctx, key, data)
}

func (j storeJournals) Delete(ctx context.Context, key string) error {
	return j.st.DeleteCheckpoint(ctx, key)
}

// plan copies what a run of t needs.
func (w *world) plan(t *task) plan {
	p := plan{task: t.Task, checksum: t.job.Checksum, overwrite: t.job.Overwrite, preserveMtime: t.job.PreserveModTime, checkpointEvery: w.checkpointEvery()}
	if e := w.eps[t.SrcEndpoint]; e != nil && !e.removed {
		p.srcURL, p.srcAud = e.URL, e.Name
		p.srcStorage = storageOf(e.Endpoint)
	}
	if e := w.eps[t.DstEndpoint]; e != nil && !e.removed {
		p.dstURL, p.dstAud = e.URL, e.Name
		p.dstStorage = storageOf(e.Endpoint)
	}
	p.srcPath, p.dstPath = urlPath(t.Src), urlPath(t.Dst)
	acc, err := w.jobAccess(t.job)
	if err != nil {
		// Not started, and not counted as an attempt: it waits for the
		// rules (see stopNoRules).
		t.stop = stopNoRules
		p.denied = err
		return p
	}
	// The destination's token covers the directory the run writes in:
	// its link base is the rule that grants that directory.
	dstDir := path.Dir(p.dstPath)
	p.restricted = !acc.Admin()
	p.srcBase = acc.LinkBase(t.SrcEndpoint, p.srcPath, AccessRead)
	p.dstBase = acc.LinkBase(t.DstEndpoint, dstDir, AccessWrite)
	// Checked again now, not only at submission: access taken away
	// from a user stops their queued files too (and a file stored
	// before the submission checked the destination's directory
	// stops here). Tokens without a rule to bound their links would
	// be weaker than the submission's.
	if err := errors.Join(acc.Allow(t.SrcEndpoint, p.srcPath, AccessRead), acc.AllowWriteIn(t.DstEndpoint, dstDir)); err != nil {
		p.denied = fmt.Errorf("%w: access changed since the job was submitted: %w", backend.ErrPermission, err)
	}
	if algo, hex, ok := strings.Cut(t.Expected, ":"); ok && hex != "" {
		// The user's checksum decides the algorithm for this file.
		p.checksum, p.expected = algo, hex
	}
	if !t.job.VerifyChecksum && p.expected == "" {
		p.checksum = "none"
	}
	if len(t.Replicas) > 0 {
		// A file from several replicas is verified whatever the job
		// says: only checksums (the final one, then the replicas'
		// vote on range checksums) find replicas of one size that
		// differ, which would otherwise land as one file mixed of
		// both, recorded done.
		switch {
		case p.checksum != "none":
		case t.job.Checksum != "none":
			p.checksum = t.job.Checksum
		default:
			p.checksum = engine.DefaultChecksum
		}
		w.planReplicas(t, &p, acc)
	}
	return p
}

// urlPath is the path of a sluice://endpoint/path URL.
func urlPath(u string) string {
	rest := u[strings.Index(u, "://")+3:]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[i:]
	}
	return "/"
}

// backends returns clients for the two agents, with data tokens scoped to
// the file being read and to the destination's directory (the engine
// writes a temporary file beside the destination and renames it).
func (s *Server) backends(ctx context.Context, p plan) (src, dst *sluice.Backend, srcTok sluice.TokenSource, err error) {
	srcTok, dstTok, err := s.dataTokens(p, fmt.Sprintf("job %d file %d", p.task.JobID, p.task.Index), p.srcPath)
	if err != nil {
		return nil, nil, nil, err
	}
	if src, err = s.agent(ctx, p.srcURL, srcTok); err != nil {
		return nil, nil, nil, err
	}
	if dst, err = s.agent(ctx, p.dstURL, dstTok); err != nil {
		return nil, nil, nil, err
	}
	return src, dst, srcTok, nil
}

// dataTokens returns the two data tokens of a run: read on the source
// below srcPrefix, and read-write in the destination's directory (the
// temporary file is written beside the destination and renamed over it).
// Each is minted afresh when the last has a quarter of its life
// (Config.DataTokenTTL) left, so a run that outlives one keeps going.
func (s *Server) dataTokens(p plan, sub, srcPrefix string) (srcTok, dstTok sluice.TokenSource, err error) {
	if p.srcURL == "" || p.dstURL == "" {
		return nil, nil, fmt.Errorf("%w: endpoint not registered", backend.ErrInvalid)
	}
	dstDir := path.Dir(p.dstPath)
	srcBase, dstBase := baseFor(p.srcBase, srcPrefix), baseFor(p.dstBase, dstDir)
	if p.restricted {
		// A user held to access rules gets no token for a directory
		// above the rule that grants it (plan and batchable see to
		// it; this is the last line).
		for _, c := range []struct{ prefix, base string }{{srcPrefix, srcBase}, {dstDir, dstBase}} {
			if c.base == "" {
				return nil, nil, fmt.Errorf("%w: a data token for %s would cover more than the access rules grant", backend.ErrPermission, c.prefix)
			}
		}
	}
	srcTok, err = s.dataTokenSource(auth.Claims{Sub: sub, Scope: "read", Prefix: srcPrefix, Base: srcBase, Aud: p.srcAud})
	if err != nil {
		return nil, nil, err
	}
	dstTok, err = s.dataTokenSource(auth.Claims{Sub: sub, Scope: "rw", Prefix: dstDir, Base: dstBase, Aud: p.dstAud})
	if err != nil {
		return nil, nil, err
	}
	return srcTok, dstTok, nil
}

// dataTokenSource returns the tokens of claims c for agent c.Aud, the
// first minted now (so that claims a token cannot carry fail here).
func (s *Server) dataTokenSource(c auth.Claims) (sluice.TokenSource, error) {
	ttl := s.cfg.DataTokenTTL
	if ttl <= 0 {
		ttl = DefaultDataTokenTTL
	}
	m := &auth.Minter{Key: s.agentKey(c.Aud), Claims: c, TTL: ttl}
	if _, err := m.Token(); err != nil {
		return nil, err
	}
	return m.Token, nil
}

// baseFor is the link base of a token for prefix: base when prefix is at
// or below it, else none (the prefix alone bounds the links: a batch's
// token covers a directory a rule for its files may lie below).
func baseFor(base, prefix string) string {
	if base == "" || !access.Under(path.Clean(prefix), base) {
		return ""
	}
	return base
}

// pullBase turns an agent's http(s)://host[:port][/] into the
// sluice(s)://host:port form agents pull from and the backend registry
// opens. An agent registered without a port gets its scheme's (80, 443):
// a sluice URL has no default port.
func pullBase(agentURL string) string {
	u, err := url.Parse(agentURL)
	if err != nil || u.Host == "" {
		return agentURL // refused where it is opened, with its name
	}
	scheme, port := "sluice", "80"
	if u.Scheme == "https" {
		scheme, port = "sluices", "443"
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), port)
	}
	return scheme + "://" + host
}

// agent opens the agent at agentURL (http(s)://host:port) through the
// backend registry, as a client that presents tokens. Every endpoint the
// service manages is an agent today, and the service uses what only
// agents offer (pulls, batches, stats of many files), so another kind of
// backend is refused here with the endpoint's URL.
func (s *Server) agent(ctx context.Context, agentURL string, tokens sluice.TokenSource) (*sluice.Backend, error) {
	o, err := s.cfg.Backends.Open(ctx, pullBase(agentURL)+"/", backend.OpenOptions{
		HTTPClient: s.client,
		Tokens:     func(string, bool) (backend.TokenSource, error) { return tokens, nil },
	})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", agentURL, err)
	}
	b, ok := o.Backend.(*sluice.Backend)
	if !ok {
		if o.Close != nil {
			_ = o.Close()
		}
		return nil, fmt.Errorf("%w: endpoint %s is not a Sluice agent", backend.ErrInvalid, agentURL)
	}
	return b, nil
}

// runTransfer runs one run of a task and reports to the loop. It is the
// only place the service moves bytes: the destination agent pulls each
// range from the source agent (engine.Spec.Pull).
func (s *Server) runTransfer(ctx context.Context, p plan, run int) {
	id := p.task.ID
	report := func(res engine.Result, err error) {
		s.post(func(w *world) { w.finished(id, run, res, err) })
	}
	if p.denied != nil {
		report(engine.Result{}, p.denied)
		return
	}
	ends, err := s.openEnds(ctx, p)
	if err != nil {
		report(engine.Result{}, err)
		return
	}
	defer ends.close()
	src, dst := ends.src, ends.dst
	// The run's checkpoints are fenced like its start and its rename: a
	// server that lost the partition while the run went on must not
	// overwrite the journal of the new owner's run.
	js := storeJournals{st: s.st, owner: s.cfg.ServerID, task: id, term: p.task.Term}
	key := journalKey(id)
	// A complete checkpoint means an earlier run verified and (perhaps)
	// renamed the file, and the server died before recording it: check
	// the destination instead of copying the file a second time.
	cp, ok, err := engine.ReadCheckpoint(ctx, js, key)
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("unreadable checkpoint; the engine starts over", "task", id, "err", err)
	}
	if err == nil && ok && cp.Complete() && cp.Size == p.task.Size {
		res, done, err := s.alreadyDone(ctx, src, dst, p)
		if err != nil {
			// Cannot tell now (an agent restarting, say): copying
			// again could put the file in place twice. Try later.
			report(engine.Result{}, fmt.Errorf("checking whether %s is already complete: %w", p.task.Dst, err))
			return
		}
		if done {
			report(res, nil)
			return
		}
	}
	if res, done, err := s.checkDestination(ctx, src, dst, p); err != nil || done {
		report(res, err)
		return
	}
	claimed := func(ctx context.Context) error {
		return s.st.CheckClaim(ctx, s.cfg.ServerID, id, p.task.Term)
	}
	spec := engine.Spec{
		Src: src, SrcPath: p.srcPath, Dst: dst, DstPath: p.dstPath,
		Size: p.task.Size, CC: max(p.task.CC, 1),
		ChunkMin: s.cfg.ChunkMin, SubWrite: s.cfg.SubWrite,
		Checksum: p.checksum, Expected: p.expected,
		Journal: key, Journals: js, KeepJournal: true, CheckpointEvery: p.checkpointEvery,
		Tag: tempTag(p.task),
		// The fence, checked before the run touches the temporary file
		// or the journal and again before the rename: another server
		// may have taken the partition over (engine.Spec.Begin, Commit).
		Begin: claimed, Commit: claimed,
		// The rename itself refuses to replace a file that appeared
		// at the destination since checkDestination looked.
		NoReplace:       !store.Replaces(p.overwrite),
		PreserveModTime: p.preserveMtime,
	}
	// The bytes never pass through the server: the destination agent
	// pulls them, an agent reads or writes a storage server, or two
	// servers copy between themselves (openEnds).
	spec.Pull, spec.WholePull = ends.pull, ends.whole
	if ends.subWrite > 0 {
		spec.SubWrite, spec.PullMin = max(spec.SubWrite, ends.subWrite), ends.subWrite
	}
	if len(p.replicas) > 0 {
		if err := s.multiSources(ctx, &spec, p, ends.agentSrc, ends.srcTok, ends.agentDst); err != nil {
			report(engine.Result{}, err)
			return
		}
	}
	// Every write, rename and removal at the destination carries the
	// task's fence: the agent refuses them once a newer owner of the
	// partition has written the file (the check before the rename and the
	// rename are then one step, at the agent).
	x, err := engine.Start(backend.WithFence(ctx, taskFence(p.task)), spec)
	if err != nil {
		report(engine.Result{}, err)
		return
	}
	s.post(func(w *world) { w.started(id, run, x) })
	select {
	case <-x.Moving():
		s.post(func(w *world) { w.moving(id, run) })
	case <-x.Done():
	}
	res, err := x.Wait()
	report(res, err)
}

// taskFence is the fence of t's runs: its partition (the source endpoint)
// and the lease term it was claimed under.
func taskFence(t store.Task) backend.Fence {
	return backend.Fence{Partition: t.SrcEndpoint, Term: t.Term}
}

// alreadyDone reports whether dst already holds the verified file. An
// error means it could not tell.
func (s *Server) alreadyDone(ctx context.Context, src, dst backend.Backend, p plan) (engine.Result, bool, error) {
	fi, err := dst.Stat(ctx, p.dstPath)
	if errors.Is(err, backend.ErrNotFound) {
		return engine.Result{}, false, nil
	}
	if err != nil {
		return engine.Result{}, false, err
	}
	if fi.IsDir || fi.Size != p.task.Size {
		return engine.Result{}, false, nil
	}
	algo := p.checksum
	if algo == "none" {
		algo = engine.DefaultChecksum
	}
	a, err := src.Checksum(ctx, p.srcPath, algo)
	if err != nil {
		return engine.Result{}, false, err
	}
	b, err := dst.Checksum(ctx, p.dstPath, algo)
	if err != nil {
		return engine.Result{}, false, err
	}
	if a != b || (p.expected != "" && a != p.expected) {
		return engine.Result{}, false, nil
	}
	s.log.Info("destination already complete and verified; not copied again", "task", p.task.ID, "dst", p.task.Dst)
	return engine.Result{Size: fi.Size, Checksum: a, Algo: algo, Note: "already complete"}, true, nil
}

// checkDestination looks at the destination before a run moves any byte:
// nothing there, or a job that replaces (store.OverwriteReplace), and
// the run goes on. A directory there fails the file at once (retrying
// cannot make it a file). A file there fails it too, unless the job
// keeps files (store.OverwriteKeep, Sluice's default) and that one is
// the source's (same size, then the same checksum): then the file is
// done, not copied (store.NoteInPlace), so that a job submitted again
// moves only what is missing. A job with a sync level keeps a file that
// matches by the level's test and replaces any other (inSync). An error
// that is not a refusal means it could not tell (an agent restarting):
// the run is tried again later.
func (s *Server) checkDestination(ctx context.Context, src, dst backend.Backend, p plan) (engine.Result, bool, error) {
	fi, err := dst.Stat(ctx, p.dstPath)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return engine.Result{}, false, nil
	case err != nil:
		return engine.Result{}, false, fmt.Errorf("checking the destination %s: %w", p.task.Dst, err)
	case fi.IsDir:
		return engine.Result{}, false, fmt.Errorf("%w: destination %s is an existing directory; a file cannot be put in its place (name the file's full path)", backend.ErrInvalid, p.task.Dst)
	}
	if level := store.SyncLevel(p.overwrite); level != "" {
		return s.inSync(ctx, src, dst, p, fi, level)
	}
	switch p.overwrite {
	case store.OverwriteReplace:
		return engine.Result{}, false, nil
	case store.OverwriteFail:
		// FTS3's words for it.
		return engine.Result{}, false, fmt.Errorf("%s: %w; overwrite is not enabled", p.task.Dst, engine.ErrDestinationExists)
	}
	differs := func(why string) error {
		return fmt.Errorf("%s: %w and differs from the source (%s); not replaced: submit the job with overwrite to replace it", p.task.Dst, engine.ErrDestinationExists, why)
	}
	if fi.Size != p.task.Size {
		return engine.Result{}, false, differs(fmt.Sprintf("%d bytes, the source %d", fi.Size, p.task.Size))
	}
	res, same, err := s.alreadyDone(ctx, src, dst, p)
	if err != nil {
		return engine.Result{}, false, fmt.Errorf("comparing the destination %s with the source: %w", p.task.Dst, err)
	}
	if !same {
		return engine.Result{}, false, differs("same size, different checksum")
	}
	res.Note = store.NoteInPlace
	return res, true, nil
}

// inSync is checkDestination for a job with a sync level (Globus's
// sync_level): the file found at the destination (fi) matches the source
// by the level's test (backend.InSync), and the file is done with no byte
// moved (store.NoteInPlace), or it does not, and the run replaces it.
// Each level asks only what its test needs: exists and size what the
// destination's stat said, mtime one stat of the source, checksum the
// two checksums, which the agents compute where the files are.
func (s *Server) inSync(ctx context.Context, src, dst backend.Backend, p plan, fi backend.FileInfo, level string) (engine.Result, bool, error) {
	si := backend.FileInfo{Size: p.task.Size}
	if level == "mtime" {
		var err error
		if si, err = src.Stat(ctx, p.srcPath); err != nil {
			return engine.Result{}, false, fmt.Errorf("sync level mtime: the source %s: %w", p.task.Src, err)
		}
	}
	if same, decided := backend.InSync(level, si, fi); decided {
		if !same {
			return engine.Result{}, false, nil
		}
		return engine.Result{Size: fi.Size, Note: store.NoteInPlace}, true, nil
	}
	res, same, err := s.alreadyDone(ctx, src, dst, p)
	if err != nil {
		return engine.Result{}, false, fmt.Errorf("sync level %s: comparing the destination %s with the source: %w", level, p.task.Dst, err)
	}
	if same {
		res.Note = store.NoteInPlace
	}
	return res, same, nil
}

// tempTag names a task's temporary file apart from those of other tasks
// writing the same destination path (engine.TempNameFor): two jobs may
// name one destination, and must not write into one file.
func tempTag(t store.Task) string { return "t" + strconv.FormatInt(t.ID, 10) }

// cleanup removes the partial file and checkpoint of a task that will not
// run again (canceled, or failed for good), in the background.
func (s *Server) cleanup(t store.Task) {
	s.async(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.removePartial(ctx, t, true)
	})
}

// removePartial removes t's partial file at its destination, then its
// checkpoint. When the destination cannot be reached (its agent down or
// unknown), the checkpoint stays, or a marker is written in its place:
// sweepPartials finds it and tries again, so the space of a partial file
// is not held for good because an agent was down at the wrong moment.
// twice repeats the removal after two seconds: a request of the run that
// the cancellation abandoned (the allocation of the file, say) may still
// be running at the agent and create the file again just after the first
// removal. It reports whether the file is gone.
func (s *Server) removePartial(ctx context.Context, t store.Task, twice bool) bool {
	gone := false
	s.mu.Lock()
	a := s.agents[t.DstEndpoint]
	s.mu.Unlock()
	if se, err := s.storageEndpoint(ctx, t.DstEndpoint); err == nil {
		// On a storage endpoint: the server removes it there itself.
		if b, closer, err := s.openStorage(ctx, storageOf(se), true); err == nil {
			err = b.Remove(ctx, engine.TempNameFor(urlPath(t.Dst), tempTag(t)))
			closer()
			gone = err == nil || errors.Is(err, backend.ErrNotFound)
			if !gone {
				s.log.Warn("removing partial file of a canceled or failed task; will retry", "task", t.ID, "err", err)
			}
		}
	} else if a != nil {
		p := plan{task: t, dstURL: a.ep.URL, dstAud: a.ep.Name, srcURL: a.ep.URL, srcAud: a.ep.Name, srcPath: "/", dstPath: urlPath(t.Dst)}
		if _, dst, _, err := s.backends(ctx, p); err == nil {
			gone = true
			passes := 1
			if twice {
				passes = 2
			}
			for pass := range passes {
				if pass > 0 {
					select {
					case <-time.After(2 * time.Second):
					case <-ctx.Done():
					}
				}
				if err := dst.Remove(ctx, engine.TempNameFor(p.dstPath, tempTag(t))); err != nil && !errors.Is(err, backend.ErrNotFound) {
					s.log.Warn("removing partial file of a canceled or failed task; will retry", "task", t.ID, "err", err)
					gone = false
				}
			}
		}
	}
	key := journalKey(t.ID)
	if !gone {
		if _, err := s.st.Checkpoint(ctx, key); errors.Is(err, store.ErrNotFound) {
			if err := s.st.PutCheckpoint(ctx, key, []byte(ownedMarker)); err != nil {
				s.log.Warn("recording a partial file to remove later", "task", t.ID, "err", err)
			}
		}
		return false
	}
	if err := s.st.DeleteCheckpoint(ctx, key); err != nil {
		s.log.Warn("deleting checkpoint of a canceled task", "task", t.ID, "err", err)
	}
	return true
}

// heardFrom reports whether the agent named has beaten to this server
// within the heartbeat timeout.
func (s *Server) heardFrom(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[name]
	return a != nil && s.now().Sub(a.last) < s.cfg.HeartbeatTimeout
}

// ownedMarker is the checkpoint of an ended task whose partial file is
// still to be removed, when it had no journal of its own.
const ownedMarker = "sluice: partial file to remove"

// sweepPartials retries the cleanups that could not be done: every
// ended task with a checkpoint left (store.EndedWithCheckpoint). A done
// task's file was renamed into place, so only its checkpoint goes. A
// canceled task with a complete checkpoint may have been put in place
// too (settleCanceled); otherwise its partial file goes. Tasks whose
// runs are still live in this server's loop (live: a canceled run left
// to finish its verification) are left for a later sweep. It runs in the
// background, at start and then every minute (world.tick), and returns
// how many removals are still owed.
func (s *Server) sweepPartials(ctx context.Context, live map[int64]bool) (owed int) {
	ts, err := s.st.EndedWithCheckpoint(ctx)
	if err != nil {
		s.log.Warn("listing partial files to remove", "err", err)
		return 1
	}
	removed := 0
	for _, t := range ts {
		if ctx.Err() != nil {
			return 0
		}
		if live[t.ID] {
			continue
		}
		if t.State == store.StateDone {
			if err := s.st.DeleteCheckpoint(ctx, journalKey(t.ID)); err != nil {
				s.log.Warn("deleting checkpoint of a done task", "task", t.ID, "err", err)
			}
			continue
		}
		if !s.heardFrom(t.DstEndpoint) && !s.isStorage(ctx, t.DstEndpoint) {
			owed++ // down (or beating to another server): not now
			continue
		}
		if t.State == store.StateCanceled {
			done, err := s.settleCanceled(ctx, t)
			if err != nil {
				s.log.Warn("checking whether a canceled task's file is in place; will retry", "task", t.ID, "err", err)
				owed++
				continue
			}
			if done {
				continue
			}
		}
		if s.removePartial(ctx, t, false) {
			removed++
		} else {
			owed++
		}
	}
	if removed > 0 {
		s.log.Info("removed partial files of canceled or failed tasks", "files", removed)
	}
	return owed
}

// settleCanceled records as done a canceled task whose complete
// checkpoint says its run verified the file and may have renamed it
// (the server stopped, or lost the partition, between the rename and
// the done write), if the destination holds the file and its checksum
// matches the source's. It reports whether the task is done now. A
// source that cannot be reached leaves the task canceled (the sweep
// then removes any partial file): the sweep would otherwise wait for
// it for ever.
func (s *Server) settleCanceled(ctx context.Context, t store.Task) (bool, error) {
	key := journalKey(t.ID)
	cp, ok, err := engine.ReadCheckpoint(ctx, storeJournals{st: s.st}, key)
	if err != nil || !ok || !cp.Complete() || cp.Size != t.Size || t.Size < 0 {
		return false, nil // a marker, a partial journal: nothing was put in place
	}
	if len(t.Replicas) > 0 {
		return false, nil
	}
	p := plan{task: t, srcPath: urlPath(t.Src), dstPath: urlPath(t.Dst)}
	for _, end := range []struct {
		name      string
		url, aud  *string
		storage   **storageEnd
		mustHeard bool
	}{{t.SrcEndpoint, &p.srcURL, &p.srcAud, &p.srcStorage, true}, {t.DstEndpoint, &p.dstURL, &p.dstAud, &p.dstStorage, false}} {
		if se, err := s.storageEndpoint(ctx, end.name); err == nil {
			*end.url, *end.aud, *end.storage = se.URL, se.Name, storageOf(se)
			continue
		}
		s.mu.Lock()
		a := s.agents[end.name]
		s.mu.Unlock()
		if a == nil || (end.mustHeard && !s.heardFrom(end.name)) {
			return false, nil
		}
		*end.url, *end.aud = a.ep.URL, a.ep.Name
	}
	j, err := s.st.Job(ctx, t.JobID)
	if err != nil {
		return false, fmt.Errorf("loading job %d: %w", t.JobID, err)
	}
	p.checksum = j.Checksum
	if algo, hex, ok := strings.Cut(t.Expected, ":"); ok && hex != "" {
		p.checksum, p.expected = algo, hex
	}
	ends, err := s.openEnds(ctx, p)
	if err != nil {
		return false, err
	}
	defer ends.close()
	res, done, err := s.alreadyDone(ctx, ends.src, ends.dst, p)
	if err != nil && backend.Permanent(err) {
		// The source is gone or unreadable now: nothing can show the
		// file in place is the source's.
		return false, nil
	}
	if err != nil || !done {
		return false, err
	}
	sum := res.Algo + ":" + res.Checksum
	moved, err := s.st.DoneAfterCancel(ctx, t.ID, sum, s.now(), "scheduler@"+s.cfg.ServerID)
	if err != nil {
		return false, err
	}
	if moved {
		s.log.Info("canceled task's file was in place and verified: recorded done", "task", t.ID, "job", t.JobID, "dst", t.Dst)
		s.events.publish(Event{Type: "task", Job: t.JobID, Owner: j.OwnerID, Task: t.ID, State: store.StateDone})
	}
	// The file in place may also be an identical one that was there
	// before, the rename never made: the temporary file goes too (with
	// the checkpoint).
	s.removePartial(ctx, t, false)
	return true, nil
}

func backendPermanent(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the loop's own stops carry a reason; others are transient
	}
	return backend.Permanent(err)
}

// resolve stats the sources of tasks whose size is unknown, a few
// requests at a time, and queues them. Files of one job in one source
// directory are stat'ed together, up to statGroup in one request (see
// statGroupable): one stat each, 16 at a time, over a 50 ms path learnt
// 320 sizes a second, and a job of 64 KiB files could not be scheduled
// faster than 20 MB/s.
func (w *world) resolve() {
	const parallel = 16
	now := w.now()
	// ready pops the queue's head if it can be stat'ed now; tasks whose
	// source is down go to the back and wait for a later call.
	ready := func() *task {
		t := w.toResolve[0]
		w.toResolve[0] = nil
		w.toResolve = w.toResolve[1:]
		t.resolveQueued = false
		if w.tasks.get(t.ID) != t || t.State != store.StateResolving || t.pending {
			return nil
		}
		if !w.sourceUp(t) { // a file with replicas is stat'ed at those up
			if note := w.downTooLong(now, w.eps[t.SrcEndpoint]); note != "" {
				w.gone = append(w.gone, goneTask{t, note})
				return nil
			}
			w.waitNote(t, fmt.Sprintf("%ssource endpoint %s is down; its size is not known yet", waitPrefix, t.SrcEndpoint))
			w.needResolve(t)
			return nil
		}
		if now.Before(t.notBefore) {
			w.needResolve(t) // a failed stat waits before the next
			return nil
		}
		return t
	}
	// One pass over the queue at most, while there are requests to send:
	// each file alone, or in its group (one job, one source directory)
	// of up to statGroup files.
	type group struct{ ps []plan }
	groups := map[statKey]*group{}
	var sends []*group
	slots := parallel - w.resolving
	for n := len(w.toResolve); n > 0; n-- {
		h := w.toResolve[0]
		k := statKey{h.JobID, h.SrcEndpoint, path.Dir(urlPath(h.Src))}
		g := groups[k]
		if slots == 0 && (g == nil || len(g.ps) >= statGroup) {
			break // the rest waits for a request to come back
		}
		t := ready()
		if t == nil {
			continue
		}
		p := w.plan(t)
		if !w.statGroupable(t, p) {
			if slots == 0 {
				w.needResolve(t)
				continue
			}
			slots--
			sends = append(sends, &group{ps: []plan{p}})
		} else {
			if g == nil || len(g.ps) >= statGroup {
				g = &group{}
				groups[k] = g
				sends = append(sends, g)
				slots--
			}
			g.ps = append(g.ps, p)
		}
		t.pending = true
	}
	for _, g := range sends {
		w.resolving++
		ps := g.ps
		w.s.async(func() {
			sizes, errs := w.s.runner().stat(w.ctx, ps)
			ids := make([]int64, len(ps))
			for i, q := range ps {
				ids[i] = q.task.ID
			}
			w.s.post(func(w *world) { w.resolved(ids, sizes, errs) })
		})
	}
	w.giveUp(now)
}

// statGroup bounds the files stat'ed in one request.
const statGroup = 1024

// statKey groups the files whose sources may be stat'ed in one request.
type statKey struct {
	job      int64
	src, dir string
}

// statGroupable reports whether t's source may be stat'ed with others of
// its directory: the request's read token covers the directory, so a
// user held to access rules needs a rule that grants it (as for a pull
// batch); a file with replicas is stat'ed at each.
func (w *world) statGroupable(t *task, p plan) bool {
	if len(t.Replicas) > 0 || p.denied != nil || p.srcURL == "" || p.srcStorage != nil {
		return false // one POST /v1/stats is an agent's
	}
	acc, err := w.jobAccess(t.job)
	if err != nil {
		return false
	}
	return acc.Admin() || acc.LinkBase(t.SrcEndpoint, path.Dir(p.srcPath), AccessRead) != ""
}

// statSources stats the sources of ps, files of one job in one source
// directory, in one request, with a read token for the directory, and
// gives their sizes.
func (s *Server) statSources(ctx context.Context, ps []plan) ([]int64, []error) {
	infos, errs := s.statSourceInfos(ctx, ps)
	sizes := make([]int64, len(ps))
	for i, fi := range infos {
		sizes[i] = fi.Size
	}
	return sizes, errs
}

// statSourceInfos is statSources, giving what the stats said.
func (s *Server) statSourceInfos(ctx context.Context, ps []plan) ([]backend.FileInfo, []error) {
	infos, errs := make([]backend.FileInfo, len(ps)), make([]error, len(ps))
	fail := func(err error) ([]backend.FileInfo, []error) {
		for i := range errs {
			errs[i] = err
		}
		return infos, errs
	}
	dir := path.Dir(ps[0].srcPath)
	srcToks, _, err := s.dataTokens(ps[0], fmt.Sprintf("job %d stat of %d files", ps[0].task.JobID, len(ps)), dir)
	if err != nil {
		return fail(err)
	}
	src, err := s.agent(ctx, ps[0].srcURL, srcToks)
	if err != nil {
		return fail(err)
	}
	paths := make([]string, len(ps))
	for i, p := range ps {
		paths[i] = p.srcPath
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rs, err := src.StatMany(ctx, paths)
	if err != nil {
		return fail(err)
	}
	for i, r := range rs {
		switch {
		case r.Err() != nil:
			errs[i] = fmt.Errorf("stat %s: %w", ps[i].srcPath, r.Err())
		case r.IsDir:
			errs[i] = fmt.Errorf("%w: %s is a directory", backend.ErrInvalid, ps[i].task.Src)
		default:
			infos[i] = r.Info()
		}
	}
	return infos, errs
}

// waitPrefix begins the notes of waitNote, which a start clears.
const waitPrefix = "waiting: "

// waitNote records why t waits, as its error: a user listing the files
// of a job that does not move sees the reason, not an empty field. It is
// written at the end of the turn, and only when it changes (a source down
// for hours costs one write per file, not one per pass).
func (w *world) waitNote(t *task, note string) {
	if t.Error == note {
		return
	}
	t.Error = note
	w.pw.tasks = append(w.pw.tasks, t)
}

// needResolve queues t for a stat of its source. The queue spares
// resolve a walk over every task for each stat that comes back (a job
// of a million files without sizes made that quadratic).
func (w *world) needResolve(t *task) {
	if !t.resolveQueued {
		t.resolveQueued = true
		w.toResolve = append(w.toResolve, t)
	}
}

func (s *Server) statSource(ctx context.Context, p plan) (int64, error) {
	if len(p.replicas) > 0 {
		return s.statReplicas(ctx, p)
	}
	ends, err := s.openEnds(ctx, p)
	if err != nil {
		return 0, err
	}
	defer ends.close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fi, err := ends.src.Stat(ctx, p.srcPath)
	if err != nil {
		return 0, err
	}
	if fi.IsDir {
		return 0, fmt.Errorf("%w: %s is a directory", backend.ErrInvalid, p.task.Src)
	}
	return fi.Size, nil
}

// resolved takes the answers of one stat request (one file, or a group
// of statSources) and asks for more.
func (w *world) resolved(ids, sizes []int64, errs []error) {
	w.resolving--
	defer w.resolve() // keep the stats flowing
	for i, id := range ids {
		w.sized(id, sizes[i], errs[i])
	}
}

// sized records what the stat of task id's source answered.
func (w *world) sized(id int64, size int64, err error) {
	t := w.tasks.get(id)
	if t == nil || t.State != store.StateResolving {
		return
	}
	t.pending = false
	now := w.now()
	switch {
	case err == nil && (size < 0 || size > store.MaxSize):
		// No run could write it (the agents' backends take at most
		// store.MaxSize bytes), and the job's sums must stay bounded.
		t.Error = fmt.Sprintf("the source has %d bytes; the service moves files of at most %d bytes (1 EiB)", size, int64(store.MaxSize))
		a := w.setState(t, store.StateFailed, t.Error, now)
		t.Finished = now
		w.endFailed(t, a, reasonInvalid)
	case err == nil && t.Size >= 0 && size != t.Size:
		// The submission said how big the file is (and only replicas
		// made the service stat it): the replicas are something else.
		t.Error = fmt.Sprintf("the sources have %d bytes, the submission said %d", size, t.Size)
		a := w.setState(t, store.StateFailed, t.Error, now)
		t.Finished = now
		w.endFailed(t, a, reasonInvalid)
	case err == nil:
		if t.Size < 0 {
			t.job.Bytes = store.AddBytes(t.job.Bytes, size)
		}
		t.Size = size
		t.Error = "" // a note of the wait, if any
		t.notBefore = time.Time{}
		a := w.setState(t, store.StateQueued, fmt.Sprintf("size %d", size), now)
		t.since = t.Arrival // the stat was part of the wait
		// Written with the turn's other changes (flush), before the
		// cycle that may start it.
		w.pw.tasks = append(w.pw.tasks, t)
		w.pw.audit = append(w.pw.audit, a)
		w.arrival()
	case permanent(err):
		t.Error = err.Error()
		a := w.setState(t, store.StateFailed, t.Error, now)
		t.Finished = now
		w.endFailed(t, a, failReason(err))
	default:
		w.s.log.Warn("stat of source failed; will retry", "task", id, "err", err)
		w.waitNote(t, "stat of the source failed, will retry: "+err.Error())
		// Not at once: resolve runs again as this returns, and a source
		// that refuses connections would be asked in a tight loop.
		t.notBefore = now.Add(5 * time.Second)
		w.needResolve(t)
	}
}
