package store

import (
	"errors"
	"testing"
)

// TestListings: a job with a directory to list is stored with its
// listing; a page adds its files with the next indices and moves the
// cursor in one step, a page recorded from a stale cursor (a second
// lister, or one from before a restart) adds nothing; the job is not done
// while its listing is not, and a canceled job's listing ends with no
// more files.
func TestListings(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		alice := mustUser(t, s, "alice")
		l := Listing{Item: 1, Src: "sluice://src/run", Dst: "sluice://dst/copy", SrcEndpoint: "src", DstEndpoint: "dst"}
		j := Job{OwnerID: alice.ID, Class: ClassInteractive, Checksum: "adler32", Listings: []Listing{l}}
		if _, err := s.CreateJob(ctx, &j, makeTasks(1)); err != nil {
			t.Fatal(err)
		}
		ls, err := s.ActiveListings(ctx)
		if err != nil || len(ls) != 1 || ls[0].JobID != j.ID || ls[0].Src != l.Src || ls[0].LastPath != "" || ls[0].Done {
			t.Fatalf("active listings %+v, %v", ls, err)
		}
		if got, _ := s.Job(ctx, j.ID); !got.Listing {
			t.Error("the job does not say it is being listed")
		}
		// Its one file ends: the job stays active while listing.
		finish := func() string {
			t.Helper()
			st, err := s.FinishJobIfDone(ctx, j.ID, ts(5, 0), "test")
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		ts0, _ := s.ActiveTasks(ctx)
		ts0[0].State = StateDone
		if err := s.UpdateTasks(ctx, ts0, nil); err != nil {
			t.Fatal(err)
		}
		if st := finish(); st != StateActive {
			t.Fatalf("a job being listed finished: %s", st)
		}
		page := makeTasks(3)
		for i := range page {
			page[i].Arrival = ts(6, 0)
		}
		next := ls[0]
		next.LastPath, next.Files = "/run/c", 3
		if err := s.AddListed(ctx, ls[0], next, page); err != nil {
			t.Fatal(err)
		}
		// The same page again, from the stale cursor: nothing added.
		if err := s.AddListed(ctx, ls[0], next, makeTasks(3)); !errors.Is(err, ErrConflict) {
			t.Fatalf("a page from a stale cursor: %v, want ErrConflict", err)
		}
		got, _ := s.Job(ctx, j.ID)
		if got.Files != 4 {
			t.Fatalf("job has %d files, want 4 (1 + a page of 3)", got.Files)
		}
		active, _ := s.ActiveTasks(ctx)
		idx := map[int]bool{}
		for _, a := range active {
			idx[a.Index] = true
		}
		if len(active) != 3 || !idx[1] || !idx[2] || !idx[3] {
			t.Errorf("the page's tasks: %+v, want indices 1, 2, 3", active)
		}
		// Cancel: the listing's next page adds nothing, and ends it.
		if _, err := s.CancelJob(ctx, j.ID, ts(7, 0), "alice"); err != nil {
			t.Fatal(err)
		}
		last := next
		last.LastPath, last.Files = "/run/f", 6
		if err := s.AddListed(ctx, next, last, makeTasks(3)); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Job(ctx, j.ID); got.Files != 4 || got.Listing {
			t.Errorf("a canceled job's listing: %d files, listing %v; want 4 and ended", got.Files, got.Listing)
		}
		if ls, _ := s.ActiveListings(ctx); len(ls) != 0 {
			t.Errorf("active listings after the cancel: %+v", ls)
		}
	})
}
