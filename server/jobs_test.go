package server

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/clock"
	"github.com/sluice-dtn/sluice/store"
)

// TestFilesPageBounded: GET /v1/jobs/ID/files?limit=0 (the API allows 0,
// and the client sends no limit for "the server's default page") lists
// one page, not every file of the job: a job of a million files would be
// read into memory and sent whole.
func TestFilesPageBounded(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	const page = 1000 // FilesPage, the API's default
	tasks := make([]store.Task, page+5)
	for i := range tasks {
		tasks[i] = store.Task{Index: i, Src: "sluice://a/f", Dst: "sluice://b/f", SrcEndpoint: "a", DstEndpoint: "b", Size: 1, State: store.StateQueued}
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	s := &Server{st: st}
	for _, c := range []struct{ from, limit, want int }{
		{0, 0, page},
		{0, -1, page},
		{0, 10, 10},
		{page, 0, 5},
		{0, page + 5, page + 5},
	} {
		ts, err := s.Files(ctx, Caller{User: u}, j.ID, c.from, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != c.want {
			t.Errorf("Files(from %d, limit %d): %d files, want %d", c.from, c.limit, len(ts), c.want)
		}
	}
	// Of one state: paged the same way (every file is queued, none failed).
	for _, c := range []struct {
		state       string
		from, limit int
		want        int
	}{
		{store.StateQueued, 0, 0, page},
		{store.StateQueued, page, 0, 5},
		{store.StateQueued, 0, 7, 7},
		{store.StateFailed, 0, 0, 0},
	} {
		ts, err := s.FilesInState(ctx, Caller{User: u}, j.ID, c.state, c.from, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != c.want {
			t.Errorf("FilesInState(%s, from %d, limit %d): %d files, want %d", c.state, c.from, c.limit, len(ts), c.want)
		}
	}
	// Another user's job is not found.
	bob, err := st.EnsureUser(ctx, "bob", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files(ctx, Caller{User: bob}, j.ID, 0, 0); err == nil {
		t.Error("bob listed alice's files")
	}
	if _, err := s.FilesInState(ctx, Caller{User: bob}, j.ID, store.StateQueued, 0, 0); err == nil {
		t.Error("bob listed alice's queued files")
	}

	// The audit (some entries per file) is paged the same way, and the
	// pages put together are the whole log, in order.
	entries := make([]store.AuditEntry, AuditPage+205)
	for i := range entries {
		entries[i] = store.AuditEntry{At: time.Unix(int64(i), 0), JobID: j.ID, Actor: "test", From: store.StateQueued, To: store.StateQueued, Detail: strconv.Itoa(i)}
	}
	if err := st.UpdateTasks(ctx, nil, entries); err != nil {
		t.Fatal(err)
	}
	all, err := st.Audit(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) <= AuditPage {
		t.Fatalf("the job has %d audit entries; the test needs more than a page (%d)", len(all), AuditPage)
	}
	if es, err := s.Audit(ctx, Caller{User: u}, j.ID, 0, 0); err != nil || len(es) != AuditPage {
		t.Errorf("Audit(limit 0): %d entries (%v), want a page of %d", len(es), err, AuditPage)
	}
	var pages []store.AuditEntry
	for from := 0; ; from += 300 {
		es, err := s.Audit(ctx, Caller{User: u}, j.ID, from, 300)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, es...)
		if len(es) < 300 {
			break
		}
	}
	if !reflect.DeepEqual(pages, all) {
		t.Errorf("the audit's pages hold %d entries, not the log's %d in order", len(pages), len(all))
	}
	if _, err := s.Audit(ctx, Caller{User: bob}, j.ID, 0, 0); err == nil {
		t.Error("bob read alice's audit")
	}
}

// TestStreamsPerUser: one user holds at most MaxStreamsPerUser event
// streams at once (each keeps a buffer and a goroutine while its
// connection lives); closing one makes room, and other users are not
// counted against it.
func TestStreamsPerUser(t *testing.T) {
	s := &Server{events: newBroker(clock.System{})}
	alice := Caller{User: store.User{ID: 1, Name: "alice"}}
	bob := Caller{User: store.User{ID: 2, Name: "bob"}}
	var dones []func()
	for i := range MaxStreamsPerUser {
		_, done, err := s.Subscribe(alice, 0)
		if err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
		dones = append(dones, done)
	}
	if _, _, err := s.Subscribe(alice, 0); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("stream %d: %v, want ErrTooManyStreams", MaxStreamsPerUser+1, err)
	}
	if _, done, err := s.Subscribe(bob, 0); err != nil {
		t.Errorf("another user's stream: %v", err)
	} else {
		done()
	}
	dones[0]()
	dones[0]() // twice: counted once
	_, done, err := s.Subscribe(alice, 0)
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	if _, _, err := s.Subscribe(alice, 0); !errors.Is(err, ErrTooManyStreams) {
		t.Errorf("a stream closed twice made room for two: %v", err)
	}
	done()
	for _, d := range dones[1:] {
		d()
	}
	if n := len(s.events.subs) + len(s.events.byUser); n != 0 {
		t.Errorf("%d subscriptions or counts left after every stream closed", n)
	}
}

// TestParseFileURL: job URLs are read as sluice cp reads them, the path
// percent-decoded, so that any file name can be named.
func TestParseFileURL(t *testing.T) {
	idx := map[string]store.Endpoint{"a1": {Name: "a1"}}
	cases := []struct {
		raw, path, err string
	}{
		{"sluice://a1/d/f.h5", "/d/f.h5", ""},
		{"sluice://a1/d/a%3Fb", "/d/a?b", ""},
		{"sluice://a1/d/c%23d", "/d/c#d", ""},
		{"sluice://a1/d/50%25", "/d/50%", ""},
		{"sluice://a1/d/g%20h/../x", "", "'..'"},
		{"sluice://a1/d/%2E%2E/x", "", "'..'"},
		{"sluice://a1/d/a?b", "", "percent-encode ?"},
		{"sluice://a1/d/c#d", "", "percent-encode ?"},
		{"sluice://a1/d/50%zz", "", "bad percent-encoding"},
		{"sluice://a1/d/nul%00", "", "NUL"},
		{"sluice://a2/d/f", "", "no endpoint"},
	}
	for _, c := range cases {
		_, p, err := parseFileURL(idx, c.raw)
		switch {
		case c.err == "" && (err != nil || p != c.path):
			t.Errorf("%s: %q, %v; want %q", c.raw, p, err, c.path)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %q, %v; want an error with %q", c.raw, p, err, c.err)
		}
	}
}
