package copyjob

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/policy"
)

// Allocator is one allocation of streams from a Policy Service (Chervenak
// et al., "Adaptation and Policy-Based Resource Allocation for Efficient Bulk
// Data Transfers in High Performance Computing Environments"), as an adaptive
// client holds it: requested once, updated (which
// also renews its lease) and released. Update's want is the total number
// of streams the client can use; a Policy Service never grants more. The
// expiry says when the lease ends unless renewed (zero: never).
//
// client.Allocator implements it over the sluice server's /v1/allocations.
type Allocator interface {
	Request(ctx context.Context, want int) (streams int, expires time.Time, err error)
	Update(ctx context.Context, want int) (streams int, expires time.Time, err error)
	Release(ctx context.Context) error
}

// AdaptiveOptions tunes RunAdaptive.
type AdaptiveOptions struct {
	// Params are the client's (the paper's Table II). P is the partial
	// transfers of each file, the streams a file uses.
	Params policy.AdaptiveParams
	// PP is the pipelining of each batch (default 1).
	PP int
	// Wait is how long the client waits before asking again while its
	// allocation is too small to move a file (default 1 s).
	Wait time.Duration
	// Yield is how long a client whose allocation stays below p (too
	// few streams to move one file, and the pair has none to add) gives
	// its streams back before it asks again, a random part of it more
	// (default DefaultYield): clients that share a full pair below p
	// each would otherwise wait for the others' streams for good.
	Yield time.Duration
	// OnChange, if not nil, is called with every point of the
	// adaptation timeline as it happens.
	OnChange func(AdaptPoint)
	// MaxOutage is how long past the end of its lease the client goes on
	// asking a Policy Service that does not answer before the copy fails
	// (default DefaultMaxOutage).
	MaxOutage time.Duration
}

// AdaptPoint is the adaptive client's state from At (seconds since the
// copy started) on: Concurrency files in flight, each with P streams, so
// Streams = Concurrency × P in use, within Allocated streams granted;
// Rate is what the last adaptation measured (bytes/s, 0 before any).
// The last point of a finished copy has Concurrency 0, and Allocated 0
// once the allocation is released.
type AdaptPoint struct {
	At          float64 `json:"at"`
	Concurrency int     `json:"concurrency"`
	Streams     int     `json:"streams"`
	Allocated   int     `json:"allocated"`
	Rate        float64 `json:"rate_bps"`
}

// RunAdaptive copies d's files as the paper's Adaptive Transfer Client
// (Fig. 3, AdaptTransferClient): it requests an allocation from alloc
// (nil: no Policy Service, as if every request were granted c_max × p
// streams), starts at min(c_i, ⌊streams/p⌋) files in flight, and moves the
// files in batches of the current concurrency c, each file with p partial
// transfers, waiting for each batch to finish (lines 13-14). Every d
// completed files it updates the allocation and adapts: c moves by Δ when
// the rate since the last adaptation changed by more than T, never above
// what the allocation allows. While a batch runs the lease is renewed at
// a third of its length. The allocation is released when the copy ends,
// also on an error.
//
// Batches are the paper's: a batch of files of unequal sizes ends with
// fewer than c in flight. The non-adaptive client of the paper's Table
// VIII is alloc nil with Delta 0 and Ci = Cmax.
func RunAdaptive(ctx context.Context, d *Dataset, alloc Allocator, o AdaptiveOptions, progress func(Progress)) (Summary, []AdaptPoint, error) {
	cl, err := policy.NewAdaptive(o.Params)
	if err != nil {
		return Summary{}, nil, err
	}
	if o.PP < 1 {
		o.PP = 1
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	if o.MaxOutage <= 0 {
		o.MaxOutage = DefaultMaxOutage
	}
	if o.Yield <= 0 {
		o.Yield = DefaultYield
	}
	if alloc == nil {
		alloc = unlimited{}
	}
	stop := sync.OnceFunc(d.st.tick(progress))
	defer stop()
	start := time.Now()
	r := &adaptRun{d: d, cl: cl, al: &lockedAlloc{a: alloc}, o: o, start: start}
	err = r.run(ctx)
	// Released however the copy ended: the streams are the pair's, not
	// this client's, once it stops moving files.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The last point is stamped before the release, so that in a
	// timeline of several clients nobody is granted these streams before
	// this client is seen to give them up.
	end := time.Now()
	if r.granted {
		// One the service already ended (its lease ran out) holds
		// nothing to give back.
		if rerr := r.al.Release(rctx); rerr != nil && !errors.Is(rerr, policy.ErrNotFound) {
			if err == nil {
				err = fmt.Errorf("copyjob: releasing the allocation: %w", rerr)
			}
		} else {
			r.streams = 0
		}
	}
	r.pointAt(end, 0)
	stop()
	if f := d.st.failed(); f != nil && (err == nil || fileLevel(err)) {
		err = f
	}
	return d.Summary(), r.points, err
}

type adaptRun struct {
	d       *Dataset
	cl      *policy.Adaptive
	al      *lockedAlloc
	o       AdaptiveOptions
	start   time.Time
	granted bool
	streams int // the allocation's, as last heard
	rate    float64
	points  []AdaptPoint
	failing time.Time // when updates began to fail (zero: they answer)
}

func (r *adaptRun) run(ctx context.Context) error {
	p := r.o.Params.P
	streams, exp, err := r.al.Request(ctx, r.cl.Want())
	if err != nil {
		return fmt.Errorf("copyjob: requesting an allocation: %w", err)
	}
	r.granted = true
	r.streams = streams
	r.al.setExpiry(exp)
	if err := r.checkLimit(); err != nil {
		return err
	}
	c := r.cl.Start(streams)
	r.point(c)
	files := slices.Clone(r.d.Files())
	var moved int64        // bytes of the files done since the last adaptation
	measured := time.Now() // when that measurement began
	for len(files) > 0 {
		if r.cl.Due() {
			streams, st, err := r.update(ctx)
			if err != nil {
				return err
			}
			switch {
			case st == answered:
				if err := r.checkLimit(); err != nil {
					return err
				}
				r.streams = streams
				el := time.Since(measured).Seconds()
				r.rate = 0
				if el > 0 {
					r.rate = float64(moved) / el
				}
				c = r.cl.Adapt(streams, r.rate)
				moved, measured = 0, time.Now()
				r.point(c)
			case st == lost:
				// No allocation: no streams to run until one is
				// granted again.
				r.streams, c = 0, 0
				r.point(0)
			}
			if c == 0 && st == answered && r.streams > 0 && r.streams < p {
				// Streams it cannot use, and the pair gave no more:
				// give them back for a while (the paper's client
				// would renew them, running min(c_i, streams/p) = 0
				// files, and so would every other client below p).
				if c, err = r.yield(ctx); err != nil {
					return err
				}
				moved, measured = 0, time.Now()
				continue
			}
			if c == 0 {
				// Nothing to move with: ask again after a while
				// (Due stays true), and measure from the restart.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(r.o.Wait):
				}
				continue
			}
		}
		if held := r.al.heldStreams(); c*p > held {
			// The lease renewal heard of a shrink while the last
			// batch ran: the next one runs within what is left,
			// not only from the next adaptation on, d files later.
			c = r.cl.Renew(held)
			r.streams = held
			r.point(c)
			if c == 0 {
				// Due now: ask again after a while.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(r.o.Wait):
				}
				continue
			}
		}
		batch := files[:min(c, len(files))]
		files = files[len(batch):]
		var size int64
		for _, f := range batch {
			size += f.Size
		}
		renewDone := r.al.keepAlive(ctx)
		_, err := r.d.Perform(ctx, batch, r.o.PP, p, c)
		renewDone()
		if err != nil {
			return err
		}
		moved += size
		r.cl.Completed(len(batch))
	}
	return nil
}

// DefaultYield is AdaptiveOptions.Yield's default: long enough for the
// clients that take the streams given back to start files, short next to
// a transfer (the service's adaptive jobs wait as long).
const DefaultYield = 10 * time.Second

// yield gives back an allocation that cannot carry one file
// (AdaptiveOptions.Yield), waits, and asks again as a first request
// (Fig. 3 lines 2-5). It returns the concurrency to go on with (0: the
// client is Due, and asks again).
func (r *adaptRun) yield(ctx context.Context) (int, error) {
	if err := r.al.Release(ctx); err != nil && !errors.Is(err, policy.ErrNotFound) {
		return 0, fmt.Errorf("copyjob: giving back an allocation below p: %w", err)
	}
	r.granted, r.streams = false, 0
	r.point(0)
	// A random part more: clients that gave back together ask again
	// apart, and one of them finds the streams of the others.
	wait := r.o.Yield + rand.N(r.o.Yield)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(wait):
	}
	streams, exp, err := r.al.Request(ctx, r.cl.Want())
	if err != nil {
		return 0, fmt.Errorf("copyjob: requesting an allocation again: %w", err)
	}
	r.granted, r.streams = true, streams
	r.al.setExpiry(exp)
	c := r.cl.Start(streams)
	r.point(c)
	return c, nil
}

// DefaultMaxOutage is how long past the end of its lease an adaptive
// client goes on asking a Policy Service that does not answer before it
// gives up: a server restart takes seconds.
const DefaultMaxOutage = time.Minute

// updateState is what became of an update (adaptRun.update).
type updateState int

const (
	answered updateState = iota // streams is the new grant
	holding                     // no answer; the streams held are still ours until the lease ends
	lost                        // no allocation: the lease ended or the service ended it
)

// update asks for an updated allocation. A Policy Service that does not
// answer (restarting, a network blip) does not end the copy: the client
// goes on with the streams it holds while their lease lasts, asking again
// after each batch. Once the lease is over, or the allocation is gone
// (policy.ErrNotFound), it requests a new one; the copy fails only when
// nothing has answered for AdaptiveOptions.MaxOutage past the lease.
func (r *adaptRun) update(ctx context.Context) (int, updateState, error) {
	streams, exp, err := r.al.Update(ctx, r.cl.Want())
	if err == nil {
		r.failing = time.Time{}
		r.al.setExpiry(exp)
		return streams, answered, nil
	}
	if ctx.Err() != nil {
		return 0, lost, ctx.Err()
	}
	now := time.Now()
	if r.failing.IsZero() {
		r.failing = now
	}
	lease := r.al.expiry()
	if !errors.Is(err, policy.ErrNotFound) && (lease.IsZero() || now.Before(lease)) {
		return 0, holding, nil
	}
	streams, exp, rerr := r.al.Request(ctx, r.cl.Want())
	if rerr == nil {
		r.failing = time.Time{}
		r.al.setExpiry(exp)
		return streams, answered, nil
	}
	if ctx.Err() != nil {
		return 0, lost, ctx.Err()
	}
	since := r.failing
	if lease.After(since) {
		since = lease
	}
	if now.Sub(since) > r.o.MaxOutage {
		return 0, lost, fmt.Errorf("copyjob: no allocation from the policy service for %s: %w", now.Sub(since).Round(time.Second), errors.Join(err, rerr))
	}
	return 0, lost, nil
}

// maxStreamer is an Allocator that knows the most streams its allocation
// can hold (client.Allocator: the pair's per-client limit).
type maxStreamer interface{ MaxStreams() int }

// checkLimit refuses a p that no allocation on the pair can carry: the
// client would wait at concurrency 0 for ever, holding what it was
// granted.
func (r *adaptRun) checkLimit() error {
	m, ok := r.al.a.(maxStreamer)
	if !ok {
		return nil
	}
	if most := m.MaxStreams(); most > 0 && r.o.Params.P > most {
		return fmt.Errorf("copyjob: %w: %d streams per file, but an allocation on this pair holds at most %d (the policy's per-client limit): use at most %d", policy.ErrInvalid, r.o.Params.P, most, most)
	}
	return nil
}

// point records the client's state now.
func (r *adaptRun) point(c int) { r.pointAt(time.Now(), c) }

// pointAt records the client's state from at on.
func (r *adaptRun) pointAt(at time.Time, c int) {
	pt := AdaptPoint{At: at.Sub(r.start).Seconds(), Concurrency: c, Streams: c * r.o.Params.P, Allocated: r.streams, Rate: r.rate}
	if n := len(r.points); n > 0 {
		last := r.points[n-1]
		if last.Concurrency == pt.Concurrency && last.Allocated == pt.Allocated && last.Rate == pt.Rate {
			return
		}
	}
	r.points = append(r.points, pt)
	if r.o.OnChange != nil {
		r.o.OnChange(pt)
	}
}

// lockedAlloc serialises the client's calls to its Allocator (the batch
// loop and the lease renewal) and renews the lease while a batch runs.
type lockedAlloc struct {
	mu      sync.Mutex
	a       Allocator
	expires time.Time
	held    int // the streams granted, which a renewal asks to keep
}

func (l *lockedAlloc) Request(ctx context.Context, want int) (int, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, exp, err := l.a.Request(ctx, want)
	l.held = s
	return s, exp, err
}

func (l *lockedAlloc) Update(ctx context.Context, want int) (int, time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, exp, err := l.a.Update(ctx, want)
	if err == nil {
		l.held = s
	}
	return s, exp, err
}

func (l *lockedAlloc) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.a.Release(ctx)
}

// heldStreams is what the allocation holds as last heard, by an update,
// a request or a lease renewal.
func (l *lockedAlloc) heldStreams() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func (l *lockedAlloc) expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expires
}

func (l *lockedAlloc) setExpiry(t time.Time) {
	l.mu.Lock()
	l.expires = t
	l.mu.Unlock()
}

// keepAlive renews the lease at a third of what is left of it until the
// returned function is called. A renewal asks to keep what is held, not
// for more: growing the allocation is the adaptation's business, every d
// files. A shrink it hears of applies from the next batch on (the batch
// loop reads what is held before each one).
func (l *lockedAlloc) keepAlive(ctx context.Context) (done func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		failed := false
		for {
			l.mu.Lock()
			exp, held := l.expires, l.held
			l.mu.Unlock()
			if exp.IsZero() || held < 1 {
				return
			}
			wait := max(time.Until(exp)/3, 100*time.Millisecond)
			if failed {
				// Past the lease a third of the rest is nothing:
				// do not ask a failing service ten times a second.
				wait = max(wait, time.Second)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			l.mu.Lock()
			// A failed renewal is tried again a third of the rest
			// later; the next update reports it if it persists.
			s, exp, err := l.a.Update(ctx, l.held)
			if errors.Is(err, policy.ErrNotFound) {
				// The service ended the allocation (its lease ran
				// out while the service was down, or an
				// administrator released it) while this batch still
				// runs its streams: ask for them again now, so that
				// they count against the pair again, rather than run
				// uncounted until the next adaptation, d files on.
				s, exp, err = l.a.Request(ctx, l.held)
			}
			switch {
			case err == nil:
				l.held, l.expires = s, exp
			case errors.Is(err, context.Canceled):
				l.mu.Unlock()
				return
			}
			failed = err != nil
			l.mu.Unlock()
		}
	})
	return func() { cancel(); wg.Wait() }
}

// unlimited is the allocator of a client without a Policy Service: it
// grants whatever is wanted, forever.
type unlimited struct{}

func (unlimited) Request(_ context.Context, want int) (int, time.Time, error) {
	return want, time.Time{}, nil
}
func (unlimited) Update(_ context.Context, want int) (int, time.Time, error) {
	return want, time.Time{}, nil
}
func (unlimited) Release(context.Context) error { return nil }
