package copyjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/dataset"
)

// RunDataset copies d's files chunk by chunk as pl decides (dataset.Run
// with d as the performer), calling progress, if not nil, about every
// 200 ms. The summary covers the copy since it was prepared, listing and
// path measurements included, with one step per chunk; on an error it
// reports what was done.
func RunDataset(ctx context.Context, d *Dataset, pl dataset.Planner, progress func(Progress)) (Summary, error) {
	stop := d.st.tick(progress)
	rep, err := dataset.Run(ctx, pl, d)
	stop()
	if f := d.st.failed(); f != nil && (err == nil || fileLevel(err)) {
		err = f // the files given up, the others copied
	}
	sum := d.Summary()
	sum.Steps = rep.Steps
	return sum, err
}

// Fixed is a planner of one step: every file with pipelining pp,
// parallelism p and concurrency cc, as `sluice cp -r --auto=false` sends
// them. (Its phase is dataset.PhaseBulk: the rest of the dataset with the
// settings chosen, here by the user.)
func Fixed(files []dataset.File, pp, p, cc int) dataset.Planner {
	return &fixed{chunk: dataset.Chunk{Files: slices.Clone(files), PP: pp, P: p, CC: cc}}
}

type fixed struct {
	chunk   dataset.Chunk
	pending bool
	done    bool
}

func (f *fixed) Next() (dataset.Step, bool) {
	if f.done || len(f.chunk.Files) == 0 {
		return dataset.Step{}, false
	}
	f.pending = true
	return dataset.Step{Chunk: f.chunk, Phase: dataset.PhaseBulk}, true
}

func (f *fixed) Observe(float64) {
	if f.pending {
		f.pending, f.done = false, true
	}
}

// MeasureRTT estimates the round-trip time to the agents of the copy (the
// sources and the destination that are sluice agents): the fastest of n
// small requests (a stat of the endpoint's path) to each, the largest over
// the agents. The fastest, because the first request on a connection also
// pays for opening it, and a busy moment only ever adds. Local endpoints
// count as 0. An agent that answers no request is an error.
func (d *Dataset) MeasureRTT(ctx context.Context, n int) (time.Duration, error) {
	return MeasureRTT(ctx, append(slices.Clone(d.st.srcs), d.st.dst), n)
}

// MeasureRTT is Dataset.MeasureRTT for any endpoints. The agents are asked
// at once: their round trips are independent, and each one measured is time
// the copy has not started.
func MeasureRTT(ctx context.Context, eps []Endpoint, n int) (time.Duration, error) {
	n = max(n, 1)
	rtts := make([]time.Duration, len(eps))
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		if !strings.HasPrefix(e.URL, "sluice") {
			continue
		}
		wg.Go(func() { rtts[i], errs[i] = measureOne(ctx, e, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return slices.Max(append(rtts, 0)), nil
}

// measureOne is the fastest of n stats of e's path.
func measureOne(ctx context.Context, e Endpoint, n int) (time.Duration, error) {
	best := time.Duration(-1)
	var last error
	for range n {
		start := time.Now()
		_, err := e.Backend.Stat(ctx, e.Path)
		el := time.Since(start)
		if err != nil && !errors.Is(err, backend.ErrNotFound) {
			last = err // a 404 is an answer too; anything else is not
			continue
		}
		if best < 0 || el < best {
			best = el
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("copyjob: measuring the round trip to %s: %w", e.URL, last)
	}
	return best, nil
}

// ProbeBandwidth estimates the bandwidth of the path from the agent that
// is the source of the largest files, in bytes per second: streams readers fetch whole
// files (at most 8 MiB of each), largest first and round again, for about
// dur or until they have read maxBytes (0: no limit), and the bytes they
// read over the time taken is the estimate. The bytes are read and
// dropped: the probe costs about dur of the transfer, and maxBytes keeps
// it from costing more than a small dataset itself.
// Several streams, because one connection on a WAN is limited by its
// window, not by the path. Files of the dataset that are small make it an
// underestimate (each read waits a round trip), which errs towards less
// pipelining, not more. Without a source agent or files of any size it
// returns 0: reading local files would measure the disk, not the path.
func (d *Dataset) ProbeBandwidth(ctx context.Context, streams int, dur time.Duration, maxBytes int64) (float64, error) {
	var probe []item
	for _, f := range d.files { // largest first
		it := d.items[f.Src]
		if it.size == 0 {
			break
		}
		if !strings.HasPrefix(d.st.srcs[it.from].URL, "sluice") || len(probe) > 0 && it.from != probe[0].from {
			continue
		}
		if probe = append(probe, it); len(probe) == 64 {
			break
		}
	}
	if len(probe) == 0 {
		return 0, nil
	}
	src := d.st.srcs[probe[0].from].Backend
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var bytes, next atomic.Int64
	var failed atomic.Pointer[error]
	start := time.Now()
	var wg sync.WaitGroup
	for range max(streams, 1) {
		wg.Go(func() {
			for ctx.Err() == nil && (maxBytes <= 0 || bytes.Load() < maxBytes) {
				it := probe[int(next.Add(1)-1)%len(probe)]
				rc, err := src.OpenRange(ctx, it.src, 0, min(it.size, 8<<20))
				if err == nil {
					_, err = io.Copy(countWriter{&bytes}, rc)
					rc.Close()
				}
				if err != nil && ctx.Err() == nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if p := failed.Load(); p != nil && bytes.Load() == 0 {
		return 0, fmt.Errorf("copyjob: probing bandwidth: %w", *p)
	}
	if el <= 0 {
		return 0, nil
	}
	return float64(bytes.Load()) / el, nil
}

// countWriter counts and drops what is written to it.
type countWriter struct{ n *atomic.Int64 }

func (c countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}
