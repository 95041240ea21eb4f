// Package estimate answers how a transfer between two endpoints should
// run: how many streams, at what throughput, in how long. It samples the
// path with growing numbers of streams (Algorithm 2 of Yin, Yildirim et
// al., "A Data Throughput Prediction and Optimization Service for Widely
// Distributed Many-Task Computing"), fits the parallel-stream model of
// package model, and turns a stored optimisation into an answer.
//
// It owns the requests' bounds, the sampling itself (sample sizes grown
// past the path's set-up, the sample file made and removed at the
// destination) and the per-pair lock of one process. The server owns the
// rest: which user may sample which paths (package access), the tokens
// the samples carry, the store's history and the lease that keeps servers
// sharing a database from sampling one path at once.
package estimate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/store"
	"github.com/sluice-dtn/sluice/wire"
)

// Defaults and bounds (Stork samples 20 MB by default; Algorithm 2 grows
// the streams from 1, by model.DefaultGrowth).
const (
	// DefaultSampleBytes is wire.DefaultSampleBytes: the API's default
	// lives in package wire.
	DefaultSampleBytes = wire.DefaultSampleBytes
	// MaxSampleBytes bounds one sample transfer: sampling is meant to
	// be a small fraction of the transfer it tunes.
	MaxSampleBytes = 1 << 30
	// MinSampleBytes is the smallest sample, and the smallest source
	// that can be sampled: a few bytes move in the time of the round
	// trips alone.
	MinSampleBytes = 64 << 10
	// DefaultHistoryTTL is how long a stored optimisation answers
	// use_history requests for its pair (paths change over hours).
	DefaultHistoryTTL = time.Hour
	// DefaultMaxStreams caps the streams sampled and chosen when the
	// endpoints declare no --max-cc (SGData's largest level).
	DefaultMaxStreams = 32
	// MaxStreams is wire.MaxStreams: the most streams any request or
	// job may ask for.
	MaxStreams = wire.MaxStreams
	// MaxGrowth bounds a request's Growth: at 16, three samples already
	// span 1-256 streams, so a larger factor is more likely a typo.
	MaxGrowth = 16
)

// Request asks how a transfer between two endpoints should run.
type Request struct {
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

// Check checks a request's numbers and fills in SampleBytes's default.
// Its errors wrap wire.ErrInvalid.
func (r *Request) Check() error {
	if r.Size <= 0 {
		return fmt.Errorf("%w: size must be positive (got %d)", wire.ErrInvalid, r.Size)
	}
	if r.SampleBytes == 0 {
		r.SampleBytes = DefaultSampleBytes
	}
	if r.SampleBytes < MinSampleBytes || r.SampleBytes > MaxSampleBytes {
		return fmt.Errorf("%w: sample size %d bytes is outside [64 KiB, %d MiB]", wire.ErrInvalid, r.SampleBytes, MaxSampleBytes>>20)
	}
	if r.MaxStreams < 0 || r.MaxStreams > MaxStreams {
		return fmt.Errorf("%w: max streams %d is outside [0, %d]", wire.ErrInvalid, r.MaxStreams, MaxStreams)
	}
	if r.Growth != 0 && (r.Growth < 2 || r.Growth > MaxGrowth) {
		return fmt.Errorf("%w: growth %d is outside [2, %d] (the factor from one sampled stream count to the next; 0 for the default, %d)", wire.ErrInvalid, r.Growth, MaxGrowth, model.DefaultGrowth)
	}
	return nil
}

// Sample is wire.EstimateSample: the API documents live in package wire.
type Sample = wire.EstimateSample

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
	Samples     []Sample
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

// Answer is the answer an optimisation o gives to a request for size
// bytes; fromHistory says it was stored before the request (what it cost
// then is not this request's cost).
func Answer(o store.Optimization, size int64, fromHistory bool) Estimate {
	e := Estimate{
		Source: o.Src, Destination: o.Dst, Streams: o.Streams, Throughput: o.Throughput,
		Fitted: o.Fitted, Uncertainty: o.Uncertainty, Clamped: o.Clamped, Note: o.Note,
		Size: size, SampleBytes: o.SampleBytes, Model: o.Model, FromHistory: fromHistory, At: o.At,
	}
	if !fromHistory {
		e.Cost, e.CostBytes = o.Cost, o.CostBytes
	}
	_ = json.Unmarshal([]byte(o.Samples), &e.Samples)
	if o.Throughput > 0 {
		e.Seconds = float64(size) / o.Throughput
	}
	return e
}

// PairLocks serialises sampling per endpoint pair within one process, so
// that two requests never sample one path at once (they would measure
// each other); the second then finds the first's answer in the store.
// The zero value is ready to use.
type PairLocks struct {
	mu sync.Mutex
	m  map[[2]string]chan struct{} // a token in the channel: locked
}

// Lock waits for the pair's lock, or until ctx ends (the request was
// given up: it must not wait for another's sampling to finish), and
// returns its release.
func (p *PairLocks) Lock(ctx context.Context, src, dst string) (func(), error) {
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

// Path is what one sampling reads and writes.
type Path struct {
	// Src and Dst name the endpoints (in errors and in the answer).
	Src, Dst string
	// Source reads SrcPath (a read token for it); Dest writes in Dir,
	// an existing directory at the destination (a read-write token for
	// it), where the sample file is made and removed.
	Source  *sluice.Backend
	SrcPath string
	Dest    *sluice.Backend
	Dir     string
	// PullFrom is the source agent as the destination pulls from it
	// (sluice(s)://host:port), with PullToken, the token it shows.
	PullFrom, PullToken string
}

// Sampler runs samplings.
type Sampler struct {
	// Now is when the answer is measured (the caller's clock).
	Now func() time.Time
	// CallTimeout bounds each call to an agent other than a sample
	// transfer (a stat, making the sample file): a frozen agent keeps
	// its connections open, and without it the sampling (and the
	// pair's lock) would wait on it for ever.
	CallTimeout time.Duration
	Log         *slog.Logger
}

// Run samples the path with 1, 4, 16, ... streams (model.DefaultGrowth;
// the paper doubles) until throughput stops rising fast enough, then fits
// the model, capped at maxStreams. Samples are sampleBytes long, or the
// whole source if smaller, and grown where they are too short to measure
// the path (grownSample). Errors wrap wire.ErrInvalid when the request
// cannot be sampled (a directory, too small a source) and
// wire.ErrUnavailable when an agent did not answer; when ctx was ended
// with a cause (an endpoint marked down), that cause is returned.
func (s Sampler) Run(ctx context.Context, p Path, sampleBytes int64, maxStreams, growth int) (store.Optimization, error) {
	sctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
	fi, err := p.Source.Stat(sctx, p.SrcPath)
	cancel()
	if err != nil && !backend.Permanent(err) {
		return store.Optimization{}, fmt.Errorf("%w: source %s did not answer: %w", wire.ErrUnavailable, p.Src, err)
	}
	if err != nil {
		return store.Optimization{}, fmt.Errorf("%w: source to sample: %w", wire.ErrInvalid, err)
	}
	if fi.IsDir || fi.Size == 0 {
		return store.Optimization{}, fmt.Errorf("%w: source %s is not a non-empty file to sample", wire.ErrInvalid, p.SrcPath)
	}
	if fi.Size < MinSampleBytes {
		// A few bytes move in the time of the round trips alone: the
		// throughput "measured" would say nothing of the path.
		return store.Optimization{}, fmt.Errorf("%w: source %s has %d bytes, too few to sample the path (at least %d); name a larger file", wire.ErrInvalid, p.SrcPath, fi.Size, MinSampleBytes)
	}
	n := min(sampleBytes, fi.Size)
	tmp := path.Join(p.Dir, ".sluice-sample-"+rand.Text()[:12])
	// cause prefers the reason ctx was ended with (an endpoint went
	// down) to the error it caused.
	cause := func(err error) error {
		if c := context.Cause(ctx); err != nil && c != nil && !errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
			return c
		}
		return err
	}
	start := time.Now() // what sampling costs in wall time, not the clock's
	var samples []Sample
	var moved int64
	// What one request costs before data flows at speed on this path:
	// a pull of the smallest sample, which fits in TCP's initial window
	// (connection, request and reply: two or three round trips). Samples
	// shorter than sampleSetups of it are grown (grownSample).
	setup, err := s.once(ctx, p, tmp, MinSampleBytes, 1)
	moved += MinSampleBytes
	err = cause(err)
	if err != nil && !backend.Permanent(err) {
		return store.Optimization{}, fmt.Errorf("%w: sampling %s -> %s: %w", wire.ErrUnavailable, p.Src, p.Dst, err)
	}
	if err != nil {
		return store.Optimization{}, fmt.Errorf("sampling %s -> %s: %w", p.Src, p.Dst, err)
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
		sec, err := s.once(ctx, p, tmp, n, streams)
		moved += n
		err = cause(err)
		if err != nil && !backend.Permanent(err) {
			return store.Optimization{}, fmt.Errorf("%w: sampling %s -> %s with %d streams: %w", wire.ErrUnavailable, p.Src, p.Dst, streams, err)
		}
		if err != nil {
			return store.Optimization{}, fmt.Errorf("sampling %s -> %s with %d streams: %w", p.Src, p.Dst, streams, err)
		}
		if next, again := grownSample(n, limit, sec, setup); again {
			// Mostly set-up and slow start: sample this level again,
			// larger (and the next levels at that size).
			n = next
			continue
		}
		th := float64(n) / sec
		samples = append(samples, Sample{Streams: streams, Bytes: n, Throughput: th, Seconds: sec})
		if err := sp.Add(streams, th); err != nil {
			return store.Optimization{}, fmt.Errorf("sampling %s -> %s: %w", p.Src, p.Dst, err)
		}
	}
	cost := time.Since(start).Seconds()
	ns, ths := sp.Samples()
	pred, err := model.Predict(ns, ths, model.PredictOptions{Lo: 1, Hi: maxStreams})
	if err != nil {
		return store.Optimization{}, fmt.Errorf("estimating %s -> %s: %w", p.Src, p.Dst, err)
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
	if s.Log != nil {
		s.Log.Info("estimated", "src", p.Src, "dst", p.Dst, "streams", streams, "mbps", b.Throughput/1e6,
			"fitted_mbps", b.Fitted/1e6, "uncertainty", b.Uncertainty, "clamped", b.Clamped, "note", b.Note,
			"samples", len(samples), "cost_s", cost, "model", how)
	}
	return store.Optimization{
		Src: p.Src, Dst: p.Dst, Streams: streams, Throughput: b.Throughput,
		Fitted: b.Fitted, Uncertainty: b.Uncertainty, Clamped: b.Clamped, Note: b.Note,
		SampleBytes: n, Samples: string(js), Model: how, Cost: cost, CostBytes: moved, At: s.Now(),
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

// once moves the first n bytes of the source into tmp at the destination
// with the given number of concurrent partial transfers, the way the
// engine moves a file (the destination agent pulls each range), and
// returns the seconds it took. tmp is removed afterwards.
func (s Sampler) once(ctx context.Context, p Path, tmp string, n int64, streams int) (float64, error) {
	tctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
	err := p.Dest.Truncate(tctx, tmp, n)
	cancel()
	if err != nil {
		return 0, err
	}
	defer func() {
		// A fresh context: the sample file must go even if ctx ended.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = p.Dest.Remove(rctx, tmp)
	}()
	part := int64(math.Ceil(float64(n) / float64(streams)))
	start := time.Now() // a measurement: wall time, not the clock's
	g, gctx := errgroup.WithContext(ctx)
	for off := int64(0); off < n; off += part {
		l := min(part, n-off)
		g.Go(func() error {
			return p.Dest.Pull(gctx, sluice.FileURL(p.PullFrom, p.SrcPath), p.PullToken, tmp, off, l)
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return max(time.Since(start).Seconds(), 1e-6), nil
}
