package copyjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/policy"
)

// Allocator is one allocation of streams from a Policy Service (seed paper
// 001), as an adaptive client holds it: requested once, updated (which
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
	// OnChange, if not nil, is called with every point of the
	// adaptation timeline as it happens.
	OnChange func(AdaptPoint)
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
		if rerr := r.al.Release(rctx); rerr != nil {
			if err == nil {
				err = fmt.Errorf("copyjob: releasing the allocation: %w", rerr)
			}
		} else {
			r.streams = 0
		}
	}
	r.pointAt(end, 0)
	stop()
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
	c := r.cl.Start(streams)
	r.point(c)
	files := slices.Clone(r.d.Files())
	var moved int64        // bytes of the files done since the last adaptation
	measured := time.Now() // when that measurement began
	for len(files) > 0 {
		if r.cl.Due() {
			streams, exp, err := r.al.Update(ctx, r.cl.Want())
			if err != nil {
				return fmt.Errorf("copyjob: updating the allocation: %w", err)
			}
			r.streams = streams
			r.al.setExpiry(exp)
			el := time.Since(measured).Seconds()
			r.rate = 0
			if el > 0 {
				r.rate = float64(moved) / el
			}
			c = r.cl.Adapt(streams, r.rate)
			moved, measured = 0, time.Now()
			r.point(c)
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

func (l *lockedAlloc) setExpiry(t time.Time) {
	l.mu.Lock()
	l.expires = t
	l.mu.Unlock()
}

// keepAlive renews the lease at a third of what is left of it until the
// returned function is called. A renewal asks to keep what is held, not
// for more: growing the allocation is the adaptation's business, every d
// files. A shrink it hears of applies at the next batch, when the
// client's next update hears of it again.
func (l *lockedAlloc) keepAlive(ctx context.Context) (done func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			l.mu.Lock()
			exp, held := l.expires, l.held
			l.mu.Unlock()
			if exp.IsZero() || held < 1 {
				return
			}
			wait := max(time.Until(exp)/3, 100*time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			l.mu.Lock()
			// A failed renewal is tried again a third of the rest
			// later; the next update reports it if it persists.
			if s, exp, err := l.a.Update(ctx, l.held); err == nil {
				l.held, l.expires = s, exp
			} else if errors.Is(err, context.Canceled) {
				l.mu.Unlock()
				return
			}
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
