package copyjob

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-dtn/sluice/backend/sluice"
)

// committer puts files copied whole in place durably, in groups, behind
// the workers' backs. A file's bytes must be synced before it is renamed
// to its final name (renamed first, it could be found empty after a
// crash, under its final name, counted as copied), and a sync per file
// makes small files crawl (a 1 MiB file's fsync takes as long as writing
// it). So a worker that has verified a file queues it here and goes on
// with its next file; one goroutine syncs everything queued at once (one
// syncfs(2) where the destination can), renames those files, and takes
// the next group, which the workers filled meanwhile.
//
// Without Options.Overwrite the renames never replace a file at the
// destination (see placer): one that appeared there after inPlace looked
// is kept, and its file given up as inPlace gives it up (takenMeanwhile).
//
// A file is counted copied only once it is in place. A file that fails
// to land is given up as a file of its own (st.giveUp) or, if that is
// not allowed, stops the copy: the error is returned by the next queue
// and by flush, which every path that copies files whole calls before it
// returns, so that nothing is left unlanded (or landing) after a copy.
type committer struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when a group has landed
	queue   []landing
	bytes   int64 // of the files queued
	landing bool  // the goroutine is running
	err     error // a failure that stops the copy
}

// renamesBatcher is a destination that renames many files in one request
// (an agent: POST /v1/renames).
type renamesBatcher interface {
	Renames(ctx context.Context, pairs []sluice.RenamePair) ([]sluice.PullBatchResult, error)
}

// landing is a verified file waiting to be put in place.
type landing struct {
	it  item
	tmp string
}

// The queue is bounded so that the data not yet synced stays bounded: a
// worker waits when it is full (a disk slower than the network).
const (
	maxQueuedFiles = 1024
	maxQueuedBytes = 256 << 20
)

// landTimeout bounds a group's landing, which runs on even when the copy
// is canceled (verified files are put in place rather than sent again):
// a destination that stopped answering must not hold the copy forever.
const landTimeout = 2 * time.Minute

// queue hands a verified file (at tmp) to the committer. It returns the
// error that stopped the copy, if a landing failed for good.
func (st *state) queue(ctx context.Context, it item, tmp string) error {
	c := &st.committer
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cond == nil {
		c.cond = sync.NewCond(&c.mu)
	}
	for c.err == nil && (len(c.queue) >= maxQueuedFiles || c.bytes >= maxQueuedBytes) {
		c.cond.Wait()
	}
	if c.err != nil {
		return c.err
	}
	c.queue = append(c.queue, landing{it, tmp})
	c.bytes += it.size
	st.moving.Add(it.size) // still in flight for progress: sent, not landed
	if !c.landing {
		c.landing = true
		go st.landLoop(context.WithoutCancel(ctx))
	}
	return nil
}

// flush waits until every queued file has landed and returns the error
// that stopped the copy, if any.
func (st *state) flush() error {
	c := &st.committer
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.landing {
		c.cond.Wait()
	}
	return c.err
}

// landLoop lands groups until the queue is empty.
func (st *state) landLoop(ctx context.Context) {
	c := &st.committer
	for {
		c.mu.Lock()
		group := c.queue
		c.queue, c.bytes = nil, 0
		if len(group) == 0 {
			c.landing = false
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		c.cond.Broadcast() // room in the queue
		c.mu.Unlock()
		lctx, cancel := context.WithTimeout(ctx, landTimeout)
		errs := st.land(lctx, group)
		cancel()
		for i, l := range group {
			st.moving.Add(-l.it.size)
			if errs[i] == nil {
				st.done.Add(l.it.size)
				st.filesDone.Add(1)
				continue
			}
			st.dst.Backend.Remove(ctx, l.tmp)
			if st.refusedAtRename(errs[i]) {
				// A file appeared at its path after inPlace looked,
				// and the rename kept it: given up as inPlace gives
				// it up (or skipped, if it is this very file), and
				// the copy goes on. A small file is sent again whole
				// by a later run: its temporary file is of no use.
				lctx, cancel := context.WithTimeout(ctx, landTimeout)
				st.takenMeanwhile(lctx, l.it)
				cancel()
				continue
			}
			err := fmt.Errorf("%s -> %s: %w", l.it.src, l.it.dst, errs[i])
			if !st.giveUp(l.it, err) {
				c.mu.Lock()
				if c.err == nil {
					c.err = err
				}
				c.mu.Unlock()
			}
		}
	}
}

// land makes a group's files durable, together where the destination
// can, then renames each; it returns each file's outcome.
func (st *state) land(ctx context.Context, group []landing) []error {
	dst := st.dst.Backend
	errs := make([]error, len(group))
	if sm, ok := dst.(syncManyer); ok {
		tmps := make([]string, len(group))
		for i, l := range group {
			tmps[i] = l.tmp
		}
		if err := sm.SyncMany(ctx, tmps); err != nil {
			for i := range errs {
				errs[i] = fmt.Errorf("sync: %w", err)
			}
			return errs
		}
	} else {
		for i, l := range group {
			if err := dst.Sync(ctx, l.tmp); err != nil {
				errs[i] = fmt.Errorf("sync: %w", err)
			}
		}
	}
	if rb, ok := dst.(renamesBatcher); ok {
		// An agent: one request for the group's renames.
		var pairs []sluice.RenamePair
		var pass []int
		for i, l := range group {
			if errs[i] == nil {
				pairs = append(pairs, sluice.RenamePair{From: l.tmp, To: l.it.dst, Replace: st.noReplace(), ModTime: st.modTime(l.it)})
				pass = append(pass, i)
			}
		}
		if len(pairs) == 0 {
			return errs
		}
		res, err := rb.Renames(ctx, pairs)
		for k, i := range pass {
			if err != nil {
				errs[i] = err
			} else {
				errs[i] = res[k].Err()
			}
		}
		return errs
	}
	rename, syncDirs := st.placer()
	var placed []string
	for i, l := range group {
		if errs[i] != nil {
			continue
		}
		if errs[i] = st.setModTime(ctx, l.tmp, l.it); errs[i] != nil {
			continue
		}
		if errs[i] = rename(ctx, l.tmp, l.it.dst); errs[i] == nil {
			placed = append(placed, l.it.dst)
		}
	}
	if syncDirs != nil {
		syncDirs(ctx, placed)
	}
	return errs
}
