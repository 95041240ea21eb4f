package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sluice-dtn/sluice/access"
	"math"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Estimation service defaults (Yin, Yildirim et al., "A Data Throughput
// Prediction and Optimization Service for Widely Distributed Many-Task
// Computing": Stork samples 20 MB by
// default; Algorithm 2 grows the streams from 1, by model.DefaultGrowth).
const (
	// DefaultSampleBytes is wire.DefaultSampleBytes: the API's default
	// lives in package wire.
	DefaultSampleBytes = wire.DefaultSampleBytes
	// MaxSampleBytes bounds one sample transfer: sampling is meant to
	// be a small fraction of the transfer it tunes.
	MaxSampleBytes = 1 << 30
	// minSampleBytes is the smallest sample, and the smallest source
	// that can be sampled.
	minSampleBytes = 64 << 10
	// DefaultHistoryTTL is how long a stored optimisation answers
	// use_history requests for its pair (paths change over hours).
	DefaultHistoryTTL = time.Hour
	// DefaultMaxStreams caps the streams sampled and chosen when the
	// endpoints declare no --max-cc (SGData's largest level).
	DefaultMaxStreams = 32
	// MaxStreams bounds any stream count a request or job asks for.
	MaxStreams = 1024
	// MaxGrowth bounds a request's Growth: at 16, three samples already
	// span 1-256 streams, so a larger factor is more likely a typo.
	MaxGrowth = 16
)

// EstimateRequest asks how a transfer between two endpoints should run:
// how many streams (concurrent partial transfers), at what throughput, in
// how long.
type EstimateRequest struct {
	// Source is a sluice://endpoint/path URL of a file to sample from
	// (its first SampleBytes). Destination is a sluice://endpoint/path
	// URL whose directory the samples are written to (under a hidden
	// temporary name, removed afterwards): its parent, or itself if it
	// ends in "/".
	Source, Destination string
	// Size is the transfer to predict, in bytes (> 0).
	Size int64
	// SampleBytes is the size of each sample transfer (default
	// DefaultSampleBytes; at most MaxSampleBytes; a smaller source file
	// is sampled whole).
	SampleBytes int64
	// UseHistory answers from the pair's newest stored optimisation if
	// it is younger than the history TTL, without sampling. (An answer
	// sampled under a MaxStreams below the pair's own limit is not
	// stored.)
	UseHistory bool
	// MaxStreams caps the streams (0: the endpoints' limits, or
	// DefaultMaxStreams).
	MaxStreams int
	// Growth is Algorithm 2's factor from one sampled stream count to
	// the next (0: model.DefaultGrowth; 2 is the paper's doubling; at
	// most MaxGrowth).
	Growth int
}

// EstimateSample is wire.EstimateSample: the API documents live in package wire.
type EstimateSample = wire.EstimateSample

// Estimate is the answer.
type Estimate struct {
	Source, Destination string // endpoint names
	Streams             int
	Throughput          float64 // predicted bytes/s at Streams
	Seconds             float64 // predicted time for the request's Size
	// Fitted is the fitted curve's bytes/s at Streams and Uncertainty its
	// relative half-width (model.Bounded): Throughput is Fitted unless the
	// curve rose above every sample by more than that, when it is
	// Clamped to what the samples support; Note says why the answer is
	// not simply the curve's ("" when it is).
	Fitted      float64
	Uncertainty float64
	Clamped     bool
	Note        string
	Size        int64
	SampleBytes int64
	Samples     []EstimateSample
	// Model says how Streams was chosen (the fitted model, or why it
	// fell back to the best sample).
	Model string
	// Cost is what sampling took (zero when answered from history):
	// wall-clock seconds and bytes moved.
	Cost      float64
	CostBytes int64
	// FromHistory is set when a stored optimisation answered; At is when
	// it (or this) was measured.
	FromHistory bool
	At          time.Time
}

// pairLocks serialises sampling per endpoint pair, so that two requests
// never sample one path at once (they would measure each other); the
// second then finds the first's answer in the store.
type pairLocks struct {
	mu sync.Mutex
	m  map[[2]string]chan struct{} // a token in the channel: locked
}

// lock waits for the pair's lock, or until ctx ends (the request was
// given up: it must not wait for another's sampling to finish), and
// returns its release.
func (p *pairLocks) lock(ctx context.Context, src, dst string) (func(), error) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[[2]string]chan struct{}{}
	}
	l := p.m[[2]string{src, dst}]
	if l == nil {
		l = make(chan struct{}, 1)
		p.m[[2]string{src, dst}] = l
	}
	p.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

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
func (s *Server) Estimate(ctx context.Context, c Caller, req EstimateRequest) (Estimate, error) {
	if req.Size <= 0 {
		return Estimate{}, fmt.Errorf("%w: size must be positive (got %d)", ErrInvalid, req.Size)
	}
	if req.SampleBytes == 0 {
		req.SampleBytes = DefaultSampleBytes
	}
	if req.SampleBytes < minSampleBytes || req.SampleBytes > MaxSampleBytes {
		return Estimate{}, fmt.Errorf("%w: sample size %d bytes is outside [64 KiB, %d MiB]", ErrInvalid, req.SampleBytes, MaxSampleBytes>>20)
	}
	if req.MaxStreams < 0 || req.MaxStreams > MaxStreams {
		return Estimate{}, fmt.Errorf("%w: max streams %d is outside [0, %d]", ErrInvalid, req.MaxStreams, MaxStreams)
	}
	if req.Growth != 0 && (req.Growth < 2 || req.Growth > MaxGrowth) {
		return Estimate{}, fmt.Errorf("%w: growth %d is outside [2, %d] (the factor from one sampled stream count to the next; 0 for the default, %d)", ErrInvalid, req.Growth, MaxGrowth, model.DefaultGrowth)
	}
	idx, err := s.endpointIndex(ctx)
	if err != nil {
		return Estimate{}, err
	}
	src, srcPath, err := parseFileURL(idx, req.Source)
	if err != nil {
		return Estimate{}, fmt.Errorf("%w: source: %w", ErrInvalid, err)
	}
	dst, dstPath, err := parseFileURL(idx, req.Destination)
	if err != nil {
		return Estimate{}, fmt.Errorf("%w: destination: %w", ErrInvalid, err)
	}
	// Sampling reads the source and writes beside the destination: the
	// caller needs the access a job of the same file would.
	acc, err := s.accessFor(ctx, c)
	if err != nil {
		return Estimate{}, err
	}
	if err := acc.Allow(src.Name, srcPath, AccessRead); err != nil {
		return Estimate{}, err
	}
	if err := acc.Allow(dst.Name, dstPath, AccessWrite); err != nil {
		return Estimate{}, err
	}
	if src.Name == dst.Name && srcPath == dstPath {
		// A transfer of it would be refused (Submit): nothing to predict.
		return Estimate{}, fmt.Errorf("%w: source and destination are the same file %s", ErrInvalid, req.Source)
	}
	// pairMax is the pair's own limit; a request may ask for another.
	pairMax := DefaultMaxStreams
	for _, e := range []store.Endpoint{src, dst} {
		if e.MaxCC > 0 {
			pairMax = min(pairMax, e.MaxCC)
		}
	}
	maxStreams := req.MaxStreams
	if maxStreams == 0 {
		maxStreams = pairMax
	}
	answer := func(o store.Optimization, fromHistory bool) Estimate {
		e := Estimate{
			Source: o.Src, Destination: o.Dst, Streams: o.Streams, Throughput: o.Throughput,
			Fitted: o.Fitted, Uncertainty: o.Uncertainty, Clamped: o.Clamped, Note: o.Note,
			Size: req.Size, SampleBytes: o.SampleBytes, Model: o.Model, FromHistory: fromHistory, At: o.At,
		}
		if !fromHistory {
			e.Cost, e.CostBytes = o.Cost, o.CostBytes
		}
		_ = json.Unmarshal([]byte(o.Samples), &e.Samples)
		if o.Throughput > 0 {
			e.Seconds = float64(req.Size) / o.Throughput
		}
		return e
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
			return answer(o, true), err
		}
	}
	unlock, err := s.estimating.lock(ctx, src.Name, dst.Name)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimating %s -> %s: %w", src.Name, dst.Name, err)
	}
	defer unlock()
	release, err := s.lockSampling(ctx, src.Name, dst.Name)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimating %s -> %s: %w", src.Name, dst.Name, err)
	}
	defer release()
	if req.UseHistory {
		// Someone may have sampled the pair while this request waited.
		if o, ok, err := fresh(); err != nil || ok {
			return answer(o, true), err
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
		return Estimate{}, err
	}
	if maxStreams < pairMax {
		// An answer to "at most maxStreams" is not the pair's: stored,
		// it would answer use_history requests and optimization jobs
		// with at most that many streams for the history TTL.
		return answer(o, false), nil
	}
	if err := s.st.AddOptimization(ctx, &o); err != nil {
		return Estimate{}, err
	}
	return answer(o, false), nil
}

// sample runs Algorithm 2 on the path: sample transfers with 1, 4, 16, ...
// streams (model.DefaultGrowth; the paper doubles) until throughput stops
// rising fast enough, then fits the model.
// The samples are written in dstDir, or its deepest existing ancestor.
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
	sb, err := sluice.New(src.URL, srcTok, s.client)
	if err != nil {
		return store.Optimization{}, err
	}
	db, err := sluice.New(dst.URL, dstTok, s.client)
	if err != nil {
		return store.Optimization{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, s.agentCallTimeout)
	fi, err := sb.Stat(sctx, srcPath)
	cancel()
	if err != nil && !backend.Permanent(err) {
		return store.Optimization{}, fmt.Errorf("%w: source %s did not answer: %w", ErrUnavailable, src.Name, err)
	}
	if err != nil {
		return store.Optimization{}, fmt.Errorf("%w: source to sample: %w", ErrInvalid, err)
	}
	if fi.IsDir || fi.Size == 0 {
		return store.Optimization{}, fmt.Errorf("%w: source %s is not a non-empty file to sample", ErrInvalid, srcPath)
	}
	if fi.Size < minSampleBytes {
		// A few bytes move in the time of the round trips alone: the
		// throughput "measured" would say nothing of the path.
		return store.Optimization{}, fmt.Errorf("%w: source %s has %d bytes, too few to sample the path (at least %d); name a larger file", ErrInvalid, srcPath, fi.Size, minSampleBytes)
	}
	n := min(sampleBytes, fi.Size)
	tmp := path.Join(dir, fmt.Sprintf(".sluice-sample-%x", randomBytes(6)))
	base := pullBase(src.URL)
	// A sample transfer waits for the destination agent, which answers
	// when its pull is done: one that freezes mid-sample would hold the
	// estimate (and the pair's sampling lock) for ever. The heartbeats
	// mark it down; sampling stops then.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go s.watchSampling(ctx, stop, src.Name, dst.Name)
	start := time.Now()
	var samples []EstimateSample
	var moved int64
	// What one request costs before data flows at speed on this path:
	// a pull of the smallest sample, which fits in TCP's initial window
	// (connection, request and reply: two or three round trips). Samples
	// shorter than sampleSetups of it are grown (grownSample).
	setup, err := s.sampleOnce(ctx, db, base, srcPath, srcTok, tmp, minSampleBytes, 1)
	moved += minSampleBytes
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errEndpointDown) {
		err = cause
	}
	if err != nil && !backend.Permanent(err) {
		return store.Optimization{}, fmt.Errorf("%w: sampling %s -> %s: %w", ErrUnavailable, src.Name, dst.Name, err)
	}
	if err != nil {
		return store.Optimization{}, fmt.Errorf("sampling %s -> %s: %w", src.Name, dst.Name, err)
	}
	limit := min(int64(MaxSampleBytes), fi.Size)
	// Algorithm 2: grow the streams (x4: samples spread over the range, so
	// the fit interpolates) until the gain per added stream falls below a
	// tenth of one stream's throughput, or throughput falls.
	sp := &model.Sampler{Max: maxStreams, Growth: growth}
	for {
		streams, ok := sp.Next()
		if !ok {
			break
		}
		sec, err := s.sampleOnce(ctx, db, base, srcPath, srcTok, tmp, n, streams)
		moved += n
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, errEndpointDown) {
			err = cause
		}
		if err != nil && !backend.Permanent(err) {
			return store.Optimization{}, fmt.Errorf("%w: sampling %s -> %s with %d streams: %w", ErrUnavailable, src.Name, dst.Name, streams, err)
		}
		if err != nil {
			return store.Optimization{}, fmt.Errorf("sampling %s -> %s with %d streams: %w", src.Name, dst.Name, streams, err)
		}
		if next, again := grownSample(n, limit, sec, setup); again {
			// Mostly set-up and slow start: sample this level again,
			// larger (and the next levels at that size).
			n = next
			continue
		}
		th := float64(n) / sec
		samples = append(samples, EstimateSample{Streams: streams, Bytes: n, Throughput: th, Seconds: sec})
		if err := sp.Add(streams, th); err != nil {
			return store.Optimization{}, fmt.Errorf("sampling %s -> %s: %w", src.Name, dst.Name, err)
		}
	}
	cost := time.Since(start).Seconds()
	ns, ths := sp.Samples()
	pred, err := model.Predict(ns, ths, model.PredictOptions{Lo: 1, Hi: maxStreams})
	if err != nil {
		return store.Optimization{}, fmt.Errorf("estimating %s -> %s: %w", src.Name, dst.Name, err)
	}
	streams := pred.Optimum()
	// The curve's value there, held to what the samples support: a fit
	// of three samples can peak far above all of them.
	b := pred.Bound(streams)
	how := pred.Reason + "; sampling stopped: " + sp.Stopped()
	js, err := json.Marshal(samples)
	if err != nil {
		return store.Optimization{}, err
	}
	s.log.Info("estimated", "src", src.Name, "dst", dst.Name, "streams", streams, "mbps", b.Throughput/1e6,
		"fitted_mbps", b.Fitted/1e6, "uncertainty", b.Uncertainty, "clamped", b.Clamped, "note", b.Note,
		"samples", len(samples), "cost_s", cost, "model", how)
	return store.Optimization{
		Src: src.Name, Dst: dst.Name, Streams: streams, Throughput: b.Throughput,
		Fitted: b.Fitted, Uncertainty: b.Uncertainty, Clamped: b.Clamped, Note: b.Note,
		SampleBytes: n, Samples: string(js), Model: how, Cost: cost, CostBytes: moved, At: s.now(),
	}, nil
}

// sampleSetups is how many times the set-up of one request (the time of
// a pull that fits in TCP's initial window: two or three round trips) a
// sample must last. Below that it mostly measures connection set-up and
// slow start: on a 50 ms path a 20 MiB sample with 16 streams lasts about
// 0.3 s, six round trips, and read 64 MB/s where the path carries 84-93
// (bench/estimate-wan.sh). Slow start reaches a 2 MB window from the
// initial ten segments in about five round trips, and moves about half
// of what the full window would meanwhile; with set-up that is some four
// round trips lost per sample, a tenth of a sample of 20 set-ups (40 to 60
// round trips). Longer costs more sampling for a few percent.
const sampleSetups = 20

// grownSample says whether a sample of n bytes that took sec seconds, on
// a path where one request's set-up takes setup seconds, was too short to
// measure the path (shorter than sampleSetups set-ups) and can grow (n
// below limit, the largest sample allowed), and the size to sample it
// with again: four times n, or what the set-up rule asks for from the
// rate seen (the rate is under-read, so that undershoots, and the rule
// applies again), at most limit.
func grownSample(n, limit int64, sec, setup float64) (int64, bool) {
	want := sampleSetups * setup
	if sec >= want || n >= limit || !(sec > 0) {
		return n, false
	}
	next := max(4*n, int64(math.Ceil(float64(n)*want/sec)))
	return min(next, limit), true
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
	b, err := sluice.New(e.URL, tok, s.client)
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

// sampleOnce moves the first n bytes of srcPath into tmp at the
// destination with the given number of concurrent partial transfers, the
// way the engine moves a file (the destination agent pulls each range),
// and returns the seconds it took. tmp is removed afterwards.
func (s *Server) sampleOnce(ctx context.Context, dst *sluice.Backend, base, srcPath, srcTok, tmp string, n int64, streams int) (float64, error) {
	tctx, cancel := context.WithTimeout(ctx, s.agentCallTimeout)
	err := dst.Truncate(tctx, tmp, n)
	cancel()
	if err != nil {
		return 0, err
	}
	defer func() {
		// A fresh context: the sample file must go even if ctx ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = dst.Remove(rctx, tmp)
	}()
	part := int64(math.Ceil(float64(n) / float64(streams)))
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for off := int64(0); off < n; off += part {
		l := min(part, n-off)
		g.Go(func() error { return dst.Pull(gctx, sluice.FileURL(base, srcPath), srcTok, tmp, off, l) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return max(time.Since(start).Seconds(), 1e-6), nil
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
	if t.Size < minSampleBytes {
		// Too small to sample the path from (Estimate refuses it), and
		// sent whole on one stream anyway: run it as the scheduler
		// chooses, and leave the sampling to a larger file of the pair.
		// Started from this one, the estimate would fail, and fail
		// again every minute while only small files asked.
		return 0
	}
	w.optimal[pair] = optimum{streams: -1}
	// The task holds names as they are; the request, URLs.
	req := EstimateRequest{Source: sluice.EncodeURL(t.Src), Destination: sluice.EncodeURL(t.Dst), Size: max(t.Size, 1), UseHistory: true}
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
