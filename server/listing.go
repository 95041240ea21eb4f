package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/cluster"
	"github.com/sluice-dtn/sluice/store"
)

// Directories a job copies whole (recursive items, store.Listing) are
// listed a page at a time by the server that holds the source endpoint's
// partition: each page's files become tasks, in one transaction with the
// listing's cursor (store.AddListed), so the first files are scheduled
// while the rest of the tree is listed, a tree of a million files is
// never held whole, and a listing cut short by a restart resumes from the
// last page recorded without adding a file twice. Directories are made
// at the destination as they are listed, empty ones too; entries that
// cannot be copied (broken links, devices) become failed files that say
// why, as `cp -r` reports them.

// DefaultListPage is how many entries a listing asks its agent for at a
// time (Config.ListPage).
const DefaultListPage = 1000

// listingsEvery is how often the loop looks for listings to start.
const listingsEvery = 2 * time.Second

// listKey names a listing.
type listKey struct {
	job  int64
	item int
}

// lister is what a listing's goroutine needs, copied out of the loop.
type lister struct {
	l                store.Listing
	srcURL, dstURL   string // the agents' http(s)://host:port
	srcDir, dstDir   string
	srcTok, dstTok   sluice.TokenSource
	batch            bool
	fail             error // set: the listing fails at once, saying this
	srcName, dstName string
}

// tendListings starts, every listingsEvery, a lister for each listing of
// an active job whose source partition this server holds and that is not
// being listed here already.
func (w *world) tendListings(now time.Time) {
	if now.Sub(w.lastListings) < listingsEvery || len(w.parts) == 0 {
		return
	}
	w.lastListings = now
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	defer cancel()
	ls, err := w.s.st.ActiveListings(ctx)
	if err != nil {
		w.logEvery(slog.LevelWarn, "reading the directories to list", "err", err)
		return
	}
	for _, l := range ls {
		k := listKey{l.JobID, l.Item}
		if _, held := w.parts[l.SrcEndpoint]; !held || w.listing[k] {
			continue
		}
		lr, err := w.listerFor(ctx, l)
		if err != nil {
			continue // the job was read wrong: tried again next time
		}
		if w.listing == nil {
			w.listing = map[listKey]bool{}
		}
		w.listing[k] = true
		w.s.spawn(func() {
			w.s.runListing(w.ctx, lr)
			w.s.post(func(w *world) { delete(w.listing, k) })
		})
	}
}

// listerFor prepares listing l: its agents and its data tokens, with the
// link bases the job owner's access rules give (a user held to rules gets
// no token above the rule that grants the directory).
func (w *world) listerFor(ctx context.Context, l store.Listing) (lister, error) {
	j, err := w.s.st.Job(ctx, l.JobID)
	if err != nil {
		return lister{}, err
	}
	lr := lister{l: l, srcDir: urlPath(l.Src), dstDir: urlPath(l.Dst), batch: j.Class == store.ClassBatch,
		srcName: l.SrcEndpoint, dstName: l.DstEndpoint}
	src, dst := w.eps[l.SrcEndpoint], w.eps[l.DstEndpoint]
	if src == nil || dst == nil {
		lr.fail = fmt.Errorf("%w: endpoint %s or %s is not registered", backend.ErrInvalid, l.SrcEndpoint, l.DstEndpoint)
		return lr, nil
	}
	lr.srcURL, lr.dstURL = src.URL, dst.URL
	acc, err := w.jobAccess(&jobState{Job: j})
	if err != nil {
		return lister{}, err
	}
	if err := errors.Join(acc.Allow(l.SrcEndpoint, lr.srcDir, AccessRead), acc.AllowWriteIn(l.DstEndpoint, lr.dstDir)); err != nil {
		lr.fail = fmt.Errorf("%w: access changed since the job was submitted: %w", backend.ErrPermission, err)
		return lr, nil
	}
	srcBase := baseFor(acc.LinkBase(l.SrcEndpoint, lr.srcDir, AccessRead), lr.srcDir)
	dstBase := baseFor(acc.LinkBase(l.DstEndpoint, lr.dstDir, AccessWrite), lr.dstDir)
	if !acc.Admin() && (srcBase == "" || dstBase == "") {
		lr.fail = fmt.Errorf("%w: a data token for the directories would cover more than the access rules grant", backend.ErrPermission)
		return lr, nil
	}
	sub := fmt.Sprintf("job %d listing %d", l.JobID, l.Item)
	if lr.srcTok, err = w.s.dataTokenSource(auth.Claims{Sub: sub, Scope: "read", Prefix: lr.srcDir, Base: srcBase, Aud: l.SrcEndpoint}); err != nil {
		return lister{}, err
	}
	if lr.dstTok, err = w.s.dataTokenSource(auth.Claims{Sub: sub, Scope: "rw", Prefix: lr.dstDir, Base: dstBase, Aud: l.DstEndpoint}); err != nil {
		return lister{}, err
	}
	return lr, nil
}

// runListing lists lr's directory a page at a time until its end, an
// error that says the listing cannot go on (recorded: the job fails), a
// conflict (another server recorded the page: it lists on), or ctx's
// end. An agent that cannot be reached is asked again, with a growing
// pause.
func (s *Server) runListing(ctx context.Context, lr lister) {
	l := lr.l
	log := s.log.With("job", l.JobID, "listing", l.Src)
	end := func(why error) {
		next := l
		next.Done, next.Error = true, why.Error()
		if err := s.st.AddListed(context.WithoutCancel(ctx), l, next, nil); err != nil {
			log.Warn("recording a listing that failed", "err", err, "why", why)
			return
		}
		log.Warn("listing failed; the job fails", "err", why)
		s.listingEnded(ctx, l.JobID)
	}
	if lr.fail != nil {
		end(lr.fail)
		return
	}
	var src, dst *sluice.Backend
	var err error
	if src, err = s.agent(ctx, lr.srcURL, lr.srcTok); err == nil {
		dst, err = s.agent(ctx, lr.dstURL, lr.dstTok)
	}
	if err != nil {
		end(err)
		return
	}
	page := s.cfg.ListPage
	if page <= 0 {
		page = DefaultListPage
	}
	wait := time.Second
	retry := func(what string, err error) bool {
		if backend.Permanent(err) {
			end(fmt.Errorf("%s: %w", what, err))
			return false
		}
		log.Warn("listing: "+what+"; asking again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
		return true
	}
	if l.LastPath == "" {
		// The destination directory itself, even for an empty tree.
		for {
			err := dst.Mkdir(ctx, lr.dstDir)
			if err == nil || errors.Is(err, backend.ErrExist) {
				break
			}
			if ctx.Err() != nil || !retry("making "+l.Dst, err) {
				return
			}
		}
	}
	for ctx.Err() == nil {
		entries, more, err := src.ListPage(ctx, lr.srcDir, l.LastPath, page)
		if err != nil {
			if ctx.Err() != nil || !retry("listing "+l.Src, err) {
				return
			}
			continue
		}
		next := l
		next.Done = !more
		if len(entries) > 0 {
			next.LastPath = entries[len(entries)-1].Path
		}
		tasks, dirs, failed, err := s.listedTasks(ctx, lr, dst, entries)
		if err != nil {
			if ctx.Err() != nil || !retry("making directories at "+l.Dst, err) {
				return
			}
			continue
		}
		next.Files += int64(len(tasks))
		next.Dirs += int64(dirs)
		if err := s.st.AddListed(ctx, l, next, tasks); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return // recorded elsewhere: the loop starts over from the store
			}
			if ctx.Err() != nil || !retry("recording a page", err) {
				return
			}
			continue
		}
		for reason, n := range failed {
			s.met.failed(reason, n)
		}
		wait = time.Second
		l = next
		if len(tasks) > 0 {
			s.wakeUp() // the coordinator claims the new files now
			if err := s.st.Notify(ctx, cluster.WorkChannel); err != nil {
				log.Debug("notifying other servers of listed files", "err", err)
			}
		}
		if l.Done {
			log.Info("listed", "files", l.Files, "dirs", l.Dirs)
			s.listingEnded(ctx, l.JobID)
			return
		}
	}
}

// listingEnded finishes a job whose last listing ended if every file of
// it has ended too (otherwise the last file's end finishes it).
func (s *Server) listingEnded(ctx context.Context, id int64) {
	state, err := s.st.FinishJobIfDone(context.WithoutCancel(ctx), id, s.now(), s.cfg.ServerID)
	if err != nil {
		s.log.Warn("finishing a job after its listing", "job", id, "err", err)
		return
	}
	if state == store.StateDone || state == store.StateFailed {
		if j, err := s.st.Job(context.WithoutCancel(ctx), id); err == nil {
			s.events.publish(Event{Type: "job", Job: id, Owner: j.OwnerID, State: state})
		}
	}
}

// listedTasks turns a page of a listing into tasks: a queued file for
// each file, a failed one saying why for each entry that cannot be
// copied (as `cp -r` reports them); each directory is made at the
// destination (empty ones too), and counted. failed counts the failed
// ones by reason (metrics.failed), once the page is stored.
func (s *Server) listedTasks(ctx context.Context, lr lister, dst *sluice.Backend, entries []backend.FileInfo) (tasks []store.Task, dirs int, failed map[string]int, err error) {
	now := s.now()
	failed = map[string]int{}
	srcScheme, dstScheme := scheme(lr.l.Src), scheme(lr.l.Dst)
	for _, e := range entries {
		rel, ok := strings.CutPrefix(e.Path, strings.TrimSuffix(lr.srcDir, "/")+"/")
		if !ok {
			// Not below the directory: the agent's answer is wrong. Said,
			// not dropped.
			tasks = append(tasks, store.Task{Src: srcScheme + lr.srcName + e.Path, Dst: lr.l.Dst, SrcEndpoint: lr.srcName, DstEndpoint: lr.dstName,
				State: store.StateFailed, Error: "not copied: the agent listed it outside " + lr.srcDir, Arrival: now, Finished: now})
			failed[reasonOther]++
			continue
		}
		dp := path.Join(lr.dstDir, rel)
		if e.Err == "" && e.IsDir {
			if err := dst.Mkdir(ctx, dp); err != nil && !errors.Is(err, backend.ErrExist) {
				return nil, 0, nil, err
			}
			dirs++
			continue
		}
		t := store.Task{Src: srcScheme + lr.srcName + e.Path, Dst: dstScheme + lr.dstName + dp,
			SrcEndpoint: lr.srcName, DstEndpoint: lr.dstName, Size: e.Size, Batch: lr.batch, State: store.StateQueued, Arrival: now}
		switch {
		case e.Err != "":
			t.State, t.Size, t.Error, t.Finished = store.StateFailed, 0, "not copied: "+e.Err, now
			failed[listedReason(e.Err)]++
		case e.Size < 0 || e.Size > store.MaxSize:
			t.State, t.Size, t.Error, t.Finished = store.StateFailed, 0, fmt.Sprintf("not copied: a size of %d bytes", e.Size), now
			failed[reasonInvalid]++
		case len(dp) > maxPathBytes:
			t.State, t.Size, t.Error, t.Finished = store.StateFailed, 0, fmt.Sprintf("not copied: its destination's path has %d bytes; at most %d", len(dp), maxPathBytes), now
			failed[reasonInvalid]++
		}
		tasks = append(tasks, t)
	}
	return tasks, dirs, failed, nil
}
