package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/store"
)

// submitter is a server with endpoints a1, a2 and a3 registered and an
// admin to submit with (no loop runs: Submit only stores jobs).
func submitter(t *testing.T) (*Server, Caller) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w := loadedWorld(t, Config{Store: st})
	for i, n := range []string{"a1", "a2", "a3"} {
		e := store.Endpoint{Name: n, URL: "http://127.0.0.1:" + string(rune('1'+i)) + "000", Registered: time.Now(), LastSeen: time.Now(), Up: true}
		if err := w.s.st.UpsertEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	u, err := w.s.st.EnsureUser(ctx, "root", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	return w.s, Caller{User: u}
}

// TestSubmitPathConflicts: a job whose files' paths clash, so that what
// it writes depends on the order its files happen to run in, is refused
// at submission with a message naming the files, rather than accepted
// and left to fail (or to copy a half-written file) later. Before, a
// destination that was another file's source, or a replica of its own
// file, was accepted: the copy read a file the job itself was replacing.
func TestSubmitPathConflicts(t *testing.T) {
	s, admin := submitter(t)
	ctx := context.Background()
	f := func(src, dst string, replicas ...string) FileSpec {
		return FileSpec{Source: src, Destination: dst, Replicas: replicas, Size: -1}
	}
	for _, tc := range []struct {
		name  string
		files []FileSpec
		want  string // in the error; "" accepted
	}{
		{"independent files", []FileSpec{f("sluice://a1/x", "sluice://a2/x"), f("sluice://a1/y", "sluice://a2/y")}, ""},
		{"one source, two destinations", []FileSpec{f("sluice://a1/x", "sluice://a2/x"), f("sluice://a1/x", "sluice://a3/x")}, ""},
		{"same path on another endpoint", []FileSpec{f("sluice://a1/x", "sluice://a2/x"), f("sluice://a2/y", "sluice://a1/y")}, ""},
		{"same destination", []FileSpec{f("sluice://a1/x", "sluice://a2/x"), f("sluice://a1/y", "sluice://a2//x")}, "same destination"},
		{"destination is its own replica", []FileSpec{f("sluice://a1/x", "sluice://a2/x", "sluice://a2/x")}, "file 0"},
		{"destination is its own replica by host:port", []FileSpec{f("sluice://a1/x", "sluice://a2/d/x", "sluice://127.0.0.1:2000/d/./x")}, "file 0"},
		{"destination is a later file's source", []FileSpec{f("sluice://a1/x", "sluice://a1/y"), f("sluice://a1/y", "sluice://a2/y")}, "files 1 and 0"},
		{"destination is an earlier file's source", []FileSpec{f("sluice://a1/y", "sluice://a2/y"), f("sluice://a1/x", "sluice://a1/y")}, "files 0 and 1"},
		{"destination inside another's", []FileSpec{f("sluice://a1/x", "sluice://a2/d/x"), f("sluice://a1/y", "sluice://a2/d/x/y")}, "files 1 and 0"},
		{"destination deep inside a later file's", []FileSpec{f("sluice://a1/x", "sluice://a2/d/x/y/z"), f("sluice://a1/y", "sluice://a2/d")}, "files 0 and 1"},
		{"destinations side by side", []FileSpec{f("sluice://a1/x", "sluice://a2/d/x"), f("sluice://a1/y", "sluice://a2/d/xy"), f("sluice://a1/z", "sluice://a2/dx/y")}, ""},
		{"destination is another file's replica", []FileSpec{f("sluice://a1/x", "sluice://a2/x", "sluice://a3/x"), f("sluice://a1/z", "sluice://a3/x")}, "files 0 and 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Submit(ctx, admin, JobSpec{Files: tc.files})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted; want a refusal naming %q", tc.want)
			case !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("refusal %q: want ErrInvalid naming %q", err, tc.want)

			}
		})
	}
}

// TestSubmitLongPaths: a path longer than PATH_MAX is refused at
// submission, naming the limit. Before, it was accepted and its file
// failed when it ran, with an error about a malformed token (the agents'
// data tokens, which carry the path, outgrew what agents accept).
func TestSubmitLongPaths(t *testing.T) {
	s, admin := submitter(t)
	ctx := context.Background()
	// A path of n bytes: elements of 200 bytes (NAME_MAX is 255), then
	// one to make up the rest.
	long := func(n int) string {
		var b strings.Builder
		for b.Len()+201 < n {
			b.WriteString("/" + strings.Repeat("d", 200))
		}
		b.WriteString("/" + strings.Repeat("f", n-b.Len()-1))
		if b.Len() != n {
			t.Fatalf("path of %d bytes, want %d", b.Len(), n)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name     string
		src, dst string
		ok       bool
	}{
		{"destination at the limit", "sluice://a1/x", "sluice://a2" + long(maxPathBytes), true},
		{"source at the limit", "sluice://a1" + long(maxPathBytes), "sluice://a2/x", true},
		{"destination past it", "sluice://a1/x", "sluice://a2" + long(maxPathBytes+1), false},
		{"source far past it", "sluice://a1" + long(6000), "sluice://a2/x", false},
		{"unicode past it", "sluice://a1/x", "sluice://a2/" + strings.Repeat("é/", maxPathBytes/3) + "f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Submit(ctx, admin, JobSpec{Files: []FileSpec{{Source: tc.src, Destination: tc.dst, Size: -1}}})
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("accepted")
			case !tc.ok && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), strconv.Itoa(maxPathBytes))):
				t.Fatalf("refusal %q: want ErrInvalid naming the limit", err)
			}
		})
	}
}

// racingStore finishes a job just before canceling it, as happens on
// PostgreSQL when the job's last file is recorded (FinishJobIfDone, by
// any server) between CancelJob's read of the job's state and its
// update: CancelJob then fails with ErrConflict.
type racingStore struct {
	store.Store
}

func (r racingStore) CancelJob(ctx context.Context, id int64, at time.Time, actor string) ([]int64, error) {
	if err := r.Store.FinishJob(ctx, id, store.StateDone, at, "another server"); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("store: cancel job %d: job changed concurrently: %w", id, store.ErrConflict)
}

// TestCancelRacesJobEnd: a cancel that comes as the job ends answers
// with the job as it ended, as a cancel of a finished job does. Before,
// the store's conflict reached the user as 500 Internal Server Error.
func TestCancelRacesJobEnd(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u, err := st.EnsureUser(ctx, "alice", "vo", false)
	if err != nil {
		t.Fatal(err)
	}
	j := store.Job{OwnerID: u.ID, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	tasks := []store.Task{{Src: "sluice://a/f", Dst: "sluice://d/f", SrcEndpoint: "a", DstEndpoint: "d", Size: 1, State: store.StateDone}}
	if _, err := st.CreateJob(ctx, &j, tasks); err != nil {
		t.Fatal(err)
	}
	w := loadedWorld(t, Config{Store: racingStore{st}})
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the loop, for its part of a cancel
		for {
			select {
			case f := <-w.s.inbox:
				f(w)
			case <-stop:
				return
			}
		}
	}()
	got, err := w.s.Cancel(ctx, Caller{User: u}, j.ID)
	if err != nil {
		t.Fatalf("cancel as the job ended: %v", err)
	}
	if got.State != store.StateDone || got.FilesDone != 1 {
		t.Errorf("cancel answered %s with %d files done; want the job as it ended: done, 1", got.State, got.FilesDone)
	}
}

// TestEndpointAliasesNeverNames: a sluice:// URL names an endpoint by its
// name or by the host (host:port) of its URL, and an agent registering
// with a URL without a port (https://dtn9.example.org, behind a proxy)
// must not take another endpoint's name with its host. Before, the host alone was
// an alias: an agent that registered as zz with URL http://a1 took over
// sluice://a1/... (the later endpoint by name won), and every job and
// estimate of a1's files went to zz's URL with data tokens for zz, which
// nameFree exists to prevent.
func TestEndpointAliasesNeverNames(t *testing.T) {
	s, admin := submitter(t)
	ctx := context.Background()
	tok, err := os.ReadFile(s.JoinTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []AgentInfo{
		{Name: "zz", URL: "http://a1"},
		{Name: "zz2", URL: "https://a2/"},
		{Name: "proxied", URL: "https://dtn9.example.org"},
	} {
		if _, err := s.Register(ctx, strings.TrimSpace(string(tok)), a); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		url, want string
	}{
		{"sluice://a1/x", "a1"},
		{"sluice://a2/x", "a2"},
		{"sluice://dtn9.example.org/x", "proxied"},
		{"sluice://proxied/x", "proxied"},
		{"sluice://127.0.0.1:1000/x", "a1"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			j, _, err := s.Submit(ctx, admin, JobSpec{Files: []FileSpec{{Source: tc.url, Destination: "sluice://a3/y", Size: -1}}})
			if err != nil {
				t.Fatal(err)
			}
			ts, err := s.Files(ctx, admin, j.ID, 0, 0)
			if err != nil || len(ts) != 1 {
				t.Fatalf("files: %v, %v", ts, err)
			}
			if ts[0].SrcEndpoint != tc.want {
				t.Errorf("%s is endpoint %q, want %q", tc.url, ts[0].SrcEndpoint, tc.want)
			}
		})
	}
}
