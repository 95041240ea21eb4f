package copyjob

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/dataset"
	"github.com/sluice-dtn/sluice/engine"
)

// Live tuning: the copy runs without pause while a dataset.Tuner moves the
// number of channels (files or batches in flight; for one large file, its
// partial transfers) from the throughput of each window. It replaces
// sampling chunk by chunk where the path has a round trip: each of those
// samples pays TCP's ramp-up and a drained tail, which on a 50 ms path is
// most of a dataset that lasts seconds.

// LiveOptions configures RunLive and Options.Tune.
type LiveOptions struct {
	// Tuner decides the level; nil: a dataset.Hill with its defaults,
	// starting at Start (default 4) with Max MaxLevel.
	Tuner dataset.Tuner
	Start int
	// Window is how long each measurement lasts (default WindowFor(0)).
	Window time.Duration
	// BatchBytes is how many bytes of small files go in one batch (one
	// request), at most MaxPP files (default 256). A batch is one round
	// trip however many files it holds, so it is sized by bytes: long
	// enough that the round trip is a small part of its time, short
	// enough that a small dataset still makes batches for every channel.
	// Default: 1/64 of the dataset's bytes, within 1-8 MiB.
	BatchBytes int64
	MaxPP      int
	// P is the number of partial transfers of a file large enough for
	// the engine (default 4); files smaller than that go whole.
	P int
	// OnWindow, if set, is called with each window as it ends (from
	// the tuning goroutine; it must not block).
	OnWindow func(TunePoint)
}

// MaxLevel is the most channels the default tuner opens.
const MaxLevel = 64

// TunePoint is one window of a live-tuned copy: when it ended (seconds
// since the start), the level it ran at and the throughput measured.
type TunePoint struct {
	At    float64 `json:"t"`
	Level int     `json:"level"`
	Rate  float64 `json:"bytes_per_s"`
}

// WindowFor is the default measurement window for a path with round trip
// rtt: twenty round trips (new connections are out of slow start in about
// seven), and at least a second, so that a window holds enough finished
// requests to measure (a third-party copy sees bytes only when a request
// of up to 16 MiB ends); at most 3 s, so that a change of the path is seen
// soon.
func WindowFor(rtt time.Duration) time.Duration {
	return min(3*time.Second, max(time.Second, 20*rtt))
}

// StartFor is the level live tuning starts at on a path with round trip
// rtt: 16 streams where there is a round trip to speak of, 4 otherwise (8
// for one large file, whose partial transfers are all the streams the
// copy has). Hill only climbs from its start, and each doubling costs two
// windows (2 s at 50 ms, 6 s at 150 ms), which a dataset of a few seconds
// never gets to spend: on the emulated 1 Gb/s, 50 ms path with 2 MB
// buffers, trees started at 16 rather than 8 moved 64 KiB files at 67
// MB/s against 53, 1 MiB files at 105 against 86, and 1 B-10 MiB files at
// 111 against 96 (medians of 3, interleaved); one 629 MB file started at
// 16 was as fast as at 32, and globus-url-copy moved the same at -p 8 and
// -p 16. More streams than the path needs cost little there: each is
// one more connection sharing the same bottleneck.
func StartFor(rtt time.Duration, oneFile bool) int {
	switch {
	case rtt >= 5*time.Millisecond:
		return 16
	case oneFile:
		return 8
	}
	return 4
}

// SubWriteFor is the sub-write (one request, one journal record) for a
// live-tuned copy to an agent on a path with round trip rtt: 4 MiB per
// 50 ms of round trip (rounded), within 4-16 MiB. A third-party copy's
// bytes are seen only as each request ends, so a window (20 round trips)
// must hold several of a stream's requests: on the emulated 1 Gb/s, 50 ms
// path 16 MiB sub-writes at 8 streams moved 78 MB/s against 97 with
// 4 MiB. But each request also leaves its stream idle for a round trip:
// on the 150 ms path, a live-tuned copy with 4 MiB sub-writes moved
// 40 MB/s where fixed settings with 16 MiB moved 49; hence a sub-write
// that grows with the round trip, keeping its idle share the same.
func SubWriteFor(rtt time.Duration) int64 {
	const step = 50 * time.Millisecond
	n := int64((rtt + step/2) / step)
	return min(16<<20, max(4<<20, n*(4<<20)))
}

func (lo LiveOptions) withDefaults() (LiveOptions, error) {
	if lo.Tuner == nil {
		h, err := dataset.NewHill(dataset.HillParams{Start: min(max(lo.Start, 1), MaxLevel), Max: MaxLevel})
		if err != nil {
			return lo, err
		}
		lo.Tuner = h
	}
	if lo.Window == 0 {
		lo.Window = WindowFor(0)
	}
	if lo.MaxPP == 0 {
		lo.MaxPP = 256
	}
	if lo.P == 0 {
		lo.P = 4
	}
	if lo.Window < 10*time.Millisecond || lo.BatchBytes < 0 || lo.MaxPP < 1 || lo.P < 1 {
		return lo, fmt.Errorf("copyjob: %w: live window %v, batch bytes %d, max pp %d, p %d", backend.ErrInvalid, lo.Window, lo.BatchBytes, lo.MaxPP, lo.P)
	}
	return lo, nil
}

// liveUnits cuts the dataset into what a channel takes: files of at least
// 2·ChunkMin through the engine with p partial transfers, largest first
// (the longest go first so none is left alone at the end); the others in
// batches of up to BatchBytes and MaxPP files where the source batches,
// else one by one.
func (d *Dataset) liveUnits(lo LiveOptions) []unit {
	o := d.st.o
	if lo.BatchBytes == 0 {
		var total int64
		for _, f := range d.files {
			total += f.Size
		}
		lo.BatchBytes = min(8<<20, max(1<<20, total/64))
	}
	files := slices.Clone(d.files)
	slices.SortStableFunc(files, func(a, b dataset.File) int {
		switch {
		case a.Size > b.Size:
			return -1
		case a.Size < b.Size:
			return 1
		}
		return 0
	})
	var out []unit
	var group []item
	var groupBytes int64
	flush := func() {
		if len(group) > 0 {
			out = append(out, unit{kind: unitBatch, items: group})
			group, groupBytes = nil, 0
		}
	}
	for _, f := range files {
		it := d.items[f.Src]
		switch {
		case it.size >= 2*o.ChunkMin:
			out = append(out, unit{kind: unitBig, items: []item{it}, parts: lo.P})
		case d.canBatch(it.from):
			if len(group) > 0 && (group[0].from != it.from || groupBytes+it.size > lo.BatchBytes) {
				flush()
			}
			group = append(group, it)
			groupBytes += it.size
			if len(group) >= lo.MaxPP {
				flush()
			}
		default:
			out = append(out, unit{kind: unitWhole, items: []item{it}})
		}
	}
	flush()
	return out
}

// RunLive copies the dataset in one run whose concurrency follows
// lo.Tuner, window by window, and returns the summary with the tuning
// timeline (Summary.Tuning). Files fail and are given up one by one as in
// RunDataset.
func RunLive(ctx context.Context, d *Dataset, lo LiveOptions, progress func(Progress)) (Summary, error) {
	lo, err := lo.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	stop := d.st.tick(progress)
	units := d.liveUnits(lo)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		level   = max(1, lo.Tuner.Level())
		running int
		next    int
		first   error
		ended   bool
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	// A worker takes the next unit when fewer than level are running;
	// there are as many workers as the level can ever reach (or units).
	workers := min(len(units), max(level, maxLevel(lo.Tuner)))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				for running >= level && next < len(units) && ctx.Err() == nil {
					cond.Wait()
				}
				if next >= len(units) || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				u := units[next]
				next++
				running++
				mu.Unlock()
				if err := d.do(ctx, u); err != nil && !d.isolate(ctx, u, err) {
					fail(err)
				}
				mu.Lock()
				running--
				cond.Broadcast()
				mu.Unlock()
			}
		})
	}
	// The tuner's clock: every window, the bytes landed (and in flight
	// where they are counted) over the window's length.
	var points []TunePoint
	start := time.Now()
	tuned := make(chan struct{})
	go func() {
		defer close(tuned)
		t := time.NewTicker(lo.Window)
		defer t.Stop()
		last, lastAt := d.st.moved(), start
		for {
			select {
			case <-ctx.Done():
				mu.Lock()
				cond.Broadcast() // waiting workers see ctx and leave
				mu.Unlock()
				return
			case now := <-t.C:
				moved := d.st.moved()
				rate := float64(moved-last) / now.Sub(lastAt).Seconds()
				began := last > 0 // judged only if bytes were moving when the window began
				last, lastAt = moved, now
				mu.Lock()
				if ended {
					mu.Unlock()
					return
				}
				pt := TunePoint{At: now.Sub(start).Seconds(), Level: level, Rate: rate}
				points = append(points, pt)
				if lo.OnWindow != nil {
					lo.OnWindow(pt)
				}
				if began {
					// Before bytes moved, a window measures the start-up
					// (lists, stats, the first round trips), not the level.
					lo.Tuner.Observe(rate)
				}
				level = max(1, lo.Tuner.Level())
				cond.Broadcast()
				mu.Unlock()
			}
		}
	}()
	wg.Wait()
	mu.Lock()
	ended = true
	mu.Unlock()
	cancel()
	<-tuned
	if err := d.st.flush(); err != nil && first == nil {
		first = err
	}
	stop()
	if f := d.st.failed(); f != nil && (first == nil || fileLevel(first)) {
		first = f
	}
	sum := d.Summary()
	sum.Tuning = points
	if first == nil && parent.Err() != nil && next < len(units) {
		first = parent.Err()
	}
	return sum, first
}

// maxLevel is the highest level t can ask for, when it says.
func maxLevel(t dataset.Tuner) int {
	if m, ok := t.(interface{ Max() int }); ok {
		return m.Max()
	}
	return MaxLevel
}

// moved is the bytes of the copy delivered so far, and those of files in
// flight where the copy sees them: what a window's throughput is measured
// from.
func (st *state) moved() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.done.Load() + st.moving.Load()
	for t := range st.active {
		n += t.Progress().Done
	}
	return n
}

// tuneTransfer moves t's partial transfers with a tuner, window by window,
// until t ends; the windows are kept for the summary. It returns at once.
func (st *state) tuneTransfer(ctx context.Context, t *engine.Transfer, lo LiveOptions, start int) {
	if lo.Tuner == nil {
		h, err := dataset.NewHill(dataset.HillParams{Start: min(max(lo.Start, start, 1), MaxLevel), Max: MaxLevel})
		if err != nil {
			return // start is clamped into range: cannot happen
		}
		lo.Tuner = h
	}
	lo, err := lo.withDefaults()
	if err != nil {
		return
	}
	go func() {
		tick := time.NewTicker(lo.Window)
		defer tick.Stop()
		begin := time.Now()
		last, lastAt := t.Progress().Done, begin
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.Done():
				return
			case now := <-tick.C:
				p := t.Progress()
				if p.State != engine.StateCopying {
					// Preparing or verifying: nothing to measure.
					last, lastAt = p.Done, now
					continue
				}
				rate := float64(p.Done-last) / now.Sub(lastAt).Seconds()
				began := last > 0 // judged only if bytes were moving when the window began
				last, lastAt = p.Done, now
				pt := TunePoint{At: now.Sub(begin).Seconds(), Level: lo.Tuner.Level(), Rate: rate}
				st.mu.Lock()
				st.tuning = append(st.tuning, pt)
				st.mu.Unlock()
				if lo.OnWindow != nil {
					lo.OnWindow(pt)
				}
				if !began {
					continue
				}
				lo.Tuner.Observe(rate)
				if err := t.SetCC(max(1, lo.Tuner.Level())); err != nil {
					return
				}
			}
		}
	}()
}
