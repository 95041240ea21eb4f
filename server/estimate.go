package server

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/estimate"
	"github.com/sluice-dtn/sluice/store"
)

// Estimation (package estimate samples and answers; the server decides
// who may sample what, mints the samples' tokens, keeps the answers and
// takes the cluster's lease on sampling a pair).

// agentCallTimeout bounds each call of an estimate to an agent other than
// a sample transfer (a stat, making the sample file): a frozen agent keeps
// its connections open, and before the heartbeats mark it down the
// estimate (and the pair's sampling lock) would wait on it for ever.
// Server.agentCallTimeout, set from it, is shortened by tests.
const agentCallTimeout = 30 * time.Second

// sampleLeaseTTL is how long a pair's sampling lease lasts unrenewed: a
// server that dies while sampling blocks the pair's other samplers this
// long at most.
const sampleLeaseTTL = 30 * time.Second

// sampleLease names the lease of the sampling of src -> dst. Endpoint
// names have no ':' (wire.ValidName), so it never names a scheduling
// partition.
func sampleLease(src, dst string) string { return "sample:" + src + ">" + dst }

// lockSampling takes the store's lease on sampling the pair, so that
// servers sharing a database never sample one path at once either
// (pairLocks does it within this server, and is held first: the lease is
// this server's whichever of its requests holds it). It waits while
// another server holds the lease, renews it while held, and returns its
// release.
func (s *Server) lockSampling(ctx context.Context, src, dst string) (func(), error) {
	name := sampleLease(src, dst)
	for {
		l, ok, err := s.st.AcquireLease(ctx, name, s.cfg.ServerID, sampleLeaseTTL)
		if err != nil {
			return nil, err
		}
		if ok {
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(sampleLeaseTTL / 3)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						if _, err := s.st.RenewLeases(context.WithoutCancel(ctx), s.cfg.ServerID, map[string]int64{name: l.Term}, sampleLeaseTTL); err != nil {
							s.log.Warn("estimate: renewing the sampling lease", "pair", src+" -> "+dst, "err", err)
						}
					}
				}
			}()
			return func() {
				close(stop)
				<-done
				if err := s.st.ReleaseLease(context.WithoutCancel(ctx), name, s.cfg.ServerID, l.Term); err != nil {
					s.log.Warn("estimate: releasing the sampling lease", "pair", src+" -> "+dst, "err", err)
				}
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Estimate answers an estimation request: from the pair's stored
// optimisation when use_history allows, else by sampling the path
// (Algorithm 2 of Yin, Yildirim et al.) and fitting the parallel-stream model.
// Requests for different pairs run in parallel.
func (s *Server) Estimate(ctx context.Context, c Caller, req estimate.Request) (estimate.Estimate, error) {
	if err := req.Check(); err != nil {
		return estimate.Estimate{}, err
	}
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return estimate.Estimate{}, err
	}
	src, srcPath, err := parseFileURL(idx, req.Source)
	if err != nil {
		return estimate.Estimate{}, fmt.Errorf("%w: source: %w", ErrInvalid, err)
	}
	dst, dstPath, err := parseFileURL(idx, req.Destination)
	if err != nil {
		return estimate.Estimate{}, fmt.Errorf("%w: destination: %w", ErrInvalid, err)
	}
	if src.Storage() || dst.Storage() {
		return estimate.Estimate{}, fmt.Errorf("%w: estimates sample between agents only; a storage endpoint's rate is learned from what it moves", ErrInvalid)
	}
	// Sampling reads the source and writes beside the destination: the
	// caller needs the access a job of the same file would.
	acc, err := s.accessFor(ctx, c)
	if err != nil {
		return estimate.Estimate{}, err
	}
	if err := acc.Allow(src.Name, srcPath, AccessRead); err != nil {
		return estimate.Estimate{}, err
	}
	if err := acc.Allow(dst.Name, dstPath, AccessWrite); err != nil {
		return estimate.Estimate{}, err
	}
	if src.Name == dst.Name && srcPath == dstPath {
		// A transfer of it would be refused (Submit): nothing to predict.
		return estimate.Estimate{}, fmt.Errorf("%w: source and destination are the same file %s", ErrInvalid, req.Source)
	}
	// pairMax is the pair's own limit; a request may ask for another.
	pairMax := estimate.DefaultMaxStreams
	for _, e := range []store.Endpoint{src, dst} {
		if e.MaxCC > 0 {
			pairMax = min(pairMax, e.MaxCC)
		}
	}
	maxStreams := req.MaxStreams
	if maxStreams == 0 {
		maxStreams = pairMax
	}
	fresh := func() (store.Optimization, bool, error) {
		o, err := s.st.LatestOptimization(ctx, src.Name, dst.Name)
		if errors.Is(err, store.ErrNotFound) {
			return o, false, nil
		}
		if err != nil {
			return o, false, err
		}
		return o, s.now().Sub(o.At) < s.cfg.HistoryTTL && o.Streams <= maxStreams, nil
	}
	if req.UseHistory {
		if o, ok, err := fresh(); err != nil || ok {
			return estimate.Answer(o, req.Size, true), err
		}
	}
	unlock, err := s.estimating.Lock(ctx, src.Name, dst.Name)
	if err != nil {
		return estimate.Estimate{}, fmt.Errorf("estimating %s -> %s: %w", src.Name, dst.Name, err)
	}
	defer unlock()
	release, err := s.lockSampling(ctx, src.Name, dst.Name)
	if err != nil {
		return estimate.Estimate{}, fmt.Errorf("estimating %s -> %s: %w", src.Name, dst.Name, err)
	}
	defer release()
	if req.UseHistory {
		// Someone may have sampled the pair while this request waited.
		if o, ok, err := fresh(); err != nil || ok {
			return estimate.Answer(o, req.Size, true), err
		}
	}
	// A destination ending in "/" names the directory the transfer
	// goes into (sluice://dtn2/archive/): the samples go there too, not
	// in its parent.
	dstDir := path.Dir(dstPath)
	if strings.HasSuffix(req.Destination, "/") {
		dstDir = dstPath
	}
	o, err := s.sample(ctx, c, acc, src, srcPath, dst, dstDir, req.SampleBytes, maxStreams, req.Growth)
	if err != nil {
		return estimate.Estimate{}, err
	}
	if maxStreams < pairMax {
		// An answer to "at most maxStreams" is not the pair's: stored,
		// it would answer use_history requests and optimization jobs
		// with at most that many streams for the history TTL.
		return estimate.Answer(o, req.Size, false), nil
	}
	if err := s.st.AddOptimization(ctx, &o); err != nil {
		return estimate.Estimate{}, err
	}
	return estimate.Answer(o, req.Size, false), nil
}

// sample mints the tokens of a sampling of src -> dst, finds the
// directory its samples go in (dstDir, or its deepest existing
// ancestor), and runs it (estimate.Sampler) while both endpoints are up.
func (s *Server) sample(ctx context.Context, c Caller, acc *access.Check, src store.Endpoint, srcPath string, dst store.Endpoint, dstDir string, sampleBytes int64, maxStreams, growth int) (store.Optimization, error) {
	if !src.Up || !dst.Up {
		return store.Optimization{}, fmt.Errorf("%w: cannot sample %s -> %s: an endpoint is down", ErrInvalid, src.Name, dst.Name)
	}
	exp := s.now().Add(10 * time.Minute).Unix()
	sub := "estimate by " + c.User.Name
	// The tokens carry the link base a job's would (auth.Claims.Base):
	// rules are checked by name, and without it a link the caller made
	// in a granted directory (as the source, or as the samples'
	// directory) would have the agents read or write through it into
	// another user's files.
	srcBase := baseFor(acc.LinkBase(src.Name, srcPath, AccessRead), srcPath)
	srcTok, err := auth.Mint(s.agentKey(src.Name), auth.Claims{Sub: sub, Scope: "read", Prefix: srcPath, Base: srcBase, Aud: src.Name, Exp: exp})
	if err != nil {
		return store.Optimization{}, err
	}
	dir, err := s.existingDir(ctx, dst, dstDir, acc.LinkBase(dst.Name, dstDir, AccessWrite), sub, exp)
	if err != nil {
		return store.Optimization{}, err
	}
	if err := acc.AllowWriteIn(dst.Name, dir); err != nil {
		// The samples go in the deepest directory that exists, which
		// may be above what the caller may write.
		return store.Optimization{}, fmt.Errorf("the samples would be written in %s, the deepest directory of the destination that exists (create the destination's directory first): %w", dir, err)
	}
	dstBase := baseFor(acc.LinkBase(dst.Name, dir, AccessWrite), dir)
	dstTok, err := auth.Mint(s.agentKey(dst.Name), auth.Claims{Sub: sub, Scope: "rw", Prefix: dir, Base: dstBase, Aud: dst.Name, Exp: exp})
	if err != nil {
		return store.Optimization{}, err
	}
	sb, err := s.agent(ctx, src.URL, backend.StaticToken(srcTok))
	if err != nil {
		return store.Optimization{}, err
	}
	db, err := s.agent(ctx, dst.URL, backend.StaticToken(dstTok))
	if err != nil {
		return store.Optimization{}, err
	}
	// A sample transfer waits for the destination agent, which answers
	// when its pull is done: one that freezes mid-sample would hold the
	// estimate (and the pair's sampling lock) for ever. The heartbeats
	// mark it down; sampling stops then.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go s.watchSampling(ctx, stop, src.Name, dst.Name)
	smp := estimate.Sampler{Now: s.now, CallTimeout: s.agentCallTimeout, Log: s.log}
	return smp.Run(ctx, estimate.Path{
		Src: src.Name, Dst: dst.Name, Source: sb, SrcPath: srcPath, Dest: db, Dir: dir,
		PullFrom: pullBase(src.URL), PullToken: srcTok,
	}, sampleBytes, maxStreams, growth)
}

// errEndpointDown ends a sampling whose endpoint the heartbeats marked
// down (watchSampling).
var errEndpointDown = errors.New("endpoint went down while sampling")

// endpointPoll is how often watchSampling reads the endpoints' state
// (Server.endpointPoll, set from it, is shortened by tests).
const endpointPoll = 2 * time.Second

// watchSampling ends ctx, through stop, when src or dst is marked down.
func (s *Server) watchSampling(ctx context.Context, stop context.CancelCauseFunc, src, dst string) {
	t := time.NewTicker(s.endpointPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		eps, err := s.st.Endpoints(ctx)
		if err != nil {
			continue // the store's trouble is not the path's
		}
		for _, e := range eps {
			if (e.Name == src || e.Name == dst) && !e.Up {
				stop(fmt.Errorf("%w: %s (no heartbeat)", errEndpointDown, e.Name))
				return
			}
		}
	}
}

// existingDir is the deepest directory of dir's path that exists at the
// endpoint: the samples are written there, on the file system the
// transfer will write to, without making directories that the sampling
// would leave behind (an estimate changes nothing at the destination).
// base is the link base of the caller's rule for dir ("" for none, an
// admin): the look-ups stay below it and follow no link out of it, so that
// a link the caller made cannot tell them what is in another user's tree.
func (s *Server) existingDir(ctx context.Context, e store.Endpoint, dir, base, sub string, exp int64) (string, error) {
	prefix := base
	if prefix == "" {
		prefix = "/"
	}
	tok, err := auth.Mint(s.agentKey(e.Name), auth.Claims{Sub: sub, Scope: "read", Prefix: prefix, Base: base, Aud: e.Name, Exp: exp})
	if err != nil {
		return "", err
	}
	b, err := s.agent(ctx, e.URL, backend.StaticToken(tok))
	if err != nil {
		return "", err
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, s.agentCallTimeout)
		fi, err := b.Stat(sctx, dir)
		cancel()
		switch {
		case err == nil && fi.IsDir:
			return dir, nil
		case err == nil:
			return "", fmt.Errorf("%w: destination %s: %s is a file, not a directory", ErrInvalid, e.Name, dir)
		case !errors.Is(err, backend.ErrNotFound) && !backend.Permanent(err):
			return "", fmt.Errorf("%w: destination %s did not answer: %w", ErrUnavailable, e.Name, err)
		case !errors.Is(err, backend.ErrNotFound):
			return "", fmt.Errorf("%w: destination %s: %w", ErrInvalid, e.Name, err)
		case dir == "/" || dir == "." || dir == "":
			return "/", nil
		}
		dir = path.Dir(dir)
	}
}

// fixedCC returns the concurrency a task's job imposes: its streams, or
// its pair's estimate for an optimize job (0: the scheduler's choice; -1:
// not startable yet, the estimate is being made).
func (w *world) fixedCC(t *task) int {
	switch {
	case t.job.Streams > 0:
		return t.job.Streams
	case t.job.Optimize:
		return w.optimalFor(t)
	}
	return 0
}

// ownerOf is the caller a job's own requests (its optimize estimate) act
// as: its owner as the store has them now, so that an admin's job is not
// held to the access rules; as the job says when that cannot be read.
func (s *Server) ownerOf(ctx context.Context, owner store.User) Caller {
	c := Caller{User: owner}
	if u, err := s.st.UserByName(ctx, owner.Name); err == nil && u.ID == owner.ID {
		c.User = u
	}
	return c
}

// optimalFor returns the streams an optimize job's task runs with on its
// endpoint pair: > 0 once estimated, 0 if estimation failed (the
// scheduler then chooses, as for any job), -1 while the estimate is
// being made. The first call for a pair (and the first after the history
// TTL, so a long-running service follows the path) starts the estimate, sampling
// from this task's file when history has no fresh answer.
func (w *world) optimalFor(t *task) int {
	pair := [2]string{t.SrcEndpoint, t.DstEndpoint}
	if o, ok := w.optimal[pair]; ok && (o.streams < 0 || w.now().Sub(o.at) < w.s.cfg.HistoryTTL) {
		return o.streams
	}
	if t.Size < estimate.MinSampleBytes {
		// Too small to sample the path from (Estimate refuses it), and
		// sent whole on one stream anyway: run it as the scheduler
		// chooses, and leave the sampling to a larger file of the pair.
		// Started from this one, the estimate would fail, and fail
		// again every minute while only small files asked.
		return 0
	}
	w.optimal[pair] = optimum{streams: -1}
	// The task holds names as they are; the request, URLs.
	req := estimate.Request{Source: sluice.EncodeURL(t.Src), Destination: sluice.EncodeURL(t.Dst), Size: max(t.Size, 1), UseHistory: true}
	owner := store.User{ID: t.job.OwnerID, Name: t.job.Owner, VO: t.job.VO}
	w.s.async(func() {
		ctx, cancel := context.WithTimeout(w.ctx, 10*time.Minute)
		defer cancel()
		e, err := w.s.Estimate(ctx, w.s.ownerOf(ctx, owner), req)
		w.s.post(func(w *world) {
			if err != nil {
				w.s.log.Warn("estimate for optimization failed; the scheduler chooses the concurrency",
					"src", pair[0], "dst", pair[1], "err", err)
				// Try again in a minute rather than after the
				// whole history TTL: the failure may be passing.
				w.optimal[pair] = optimum{streams: 0, at: w.now().Add(time.Minute - w.s.cfg.HistoryTTL)}
			} else {
				w.optimal[pair] = optimum{streams: e.Streams, at: w.now()}
			}
			w.want = true
		})
	})
	return -1
}
