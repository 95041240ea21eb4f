package server

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/access"
	"github.com/sluice-dtn/sluice/auth"
	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/store"
)

// grantAlice gives every user write access to /home/{user} and returns
// the caller alice (not an admin).
func grantAlice(t *testing.T, s *Server) Caller {
	t.Helper()
	ctx := context.Background()
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	grant := AccessConfig{Rules: []AccessRule{{Endpoint: "*", Path: "/home/{user}", User: "*", Access: AccessWrite}}}
	if _, err := s.SetAccess(ctx, admin, grant); err != nil {
		t.Fatal(err)
	}
	alice, err := s.st.EnsureUser(ctx, "alice", "cms", false)
	if err != nil {
		t.Fatal(err)
	}
	return Caller{User: alice}
}

// TestSubmitDestinationIsTheGrant: a destination equal to the directory
// a rule grants (or above it) is refused at submission, as an estimate
// of it is: its run would write its temporary file in the directory
// above, which the user was not granted. Before, alice, granted
// /home/alice, could submit sluice://a2/home/alice, and the run wrote
// /home/.alice.tN.sluice-part with a read-write token for all of /home.
func TestSubmitDestinationIsTheGrant(t *testing.T) {
	s, _ := submitter(t)
	alice := grantAlice(t, s)
	ctx := context.Background()
	for _, tc := range []struct {
		dst string
		ok  bool
	}{
		{"sluice://a2/home/alice", false},
		{"sluice://a2/home/alice/", false}, // a directory, refused either way
		{"sluice://a2/home/alice/x/..", false},
		{"sluice://a2/home", false},
		{"sluice://a2/home/alice/x", true},
		{"sluice://a2/home/alice/d/x", true},
	} {
		t.Run(tc.dst, func(t *testing.T) {
			_, _, err := s.Submit(ctx, alice, JobSpec{Files: []FileSpec{{Source: "sluice://a1/home/alice/in", Destination: tc.dst, Size: 1}}})
			switch {
			case tc.ok && err != nil:
				t.Fatalf("refused: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("accepted")
			case !tc.ok && !errors.Is(err, ErrForbidden) && !errors.Is(err, ErrInvalid):
				t.Fatalf("refused with %v; want forbidden or invalid", err)
			}
		})
	}
	// The exact case is refused as forbidden, naming the directory.
	_, _, err := s.Submit(ctx, alice, JobSpec{Files: []FileSpec{{Source: "sluice://a1/home/alice/in", Destination: "sluice://a2/home/alice", Size: 1}}})
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "written in their directory (/home)") {
		t.Errorf("destination = the grant: %v; want forbidden, naming /home", err)
	}
}

// TestDataTokensStayInTheGrant: the data tokens minted for a task of a
// user held to access rules never cover a directory above the one the
// user was granted, and always carry that directory as their link base;
// a task stored with a destination equal to the grant (as the service
// accepted before) fails as its run is planned, and no token is minted
// for it. Before, its destination token had prefix /home and no base.
func TestDataTokensStayInTheGrant(t *testing.T) {
	ctx := context.Background()
	st := testStore(t, "a", "d")
	w := loadedWorld(t, Config{Store: st})
	alice := grantAlice(t, w.s)
	root, err := st.EnsureUser(ctx, "root", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		owner    store.User
		src, dst string
	}
	files := []file{
		{alice.User, "/home/alice/in", "/home/alice/out"},
		{alice.User, "/home/alice/d/in", "/home/alice/d/e/out"},
		{alice.User, "/home/alice/in2", "/home/alice"},  // stored as the service took it before
		{alice.User, "/home/alice", "/home/alice/out3"}, // a source named as the grant: a batch's directory token would be /home
		{root, "/etc/in", "/out"},
	}
	for _, f := range files {
		j := store.Job{OwnerID: f.owner.ID, Owner: f.owner.Name, VO: f.owner.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
		if _, err := st.CreateJob(ctx, &j, []store.Task{{Src: "sluice://a" + f.src, Dst: "sluice://d" + f.dst,
			SrcEndpoint: "a", DstEndpoint: "d", Size: 1000, State: store.StateQueued}}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, _ := claimPartitions(t, w, st, "local", len(files), "a")
	now := time.Now()
	for _, c := range claimed {
		tk := w.tasks.get(c.ID)
		p := w.plan(tk)
		srcPath, dstPath := urlPath(tk.Src), urlPath(tk.Dst)
		name := tk.job.Owner + " " + srcPath + " -> " + dstPath
		if dstPath == "/home/alice" {
			if !errors.Is(p.denied, backend.ErrPermission) {
				t.Errorf("%s: planned with %v; want a permission error", name, p.denied)
			}
		} else if p.denied != nil {
			t.Errorf("%s: denied: %v", name, p.denied)
		}
		// A run's tokens (source: the file) and a batch's (source: its
		// directory).
		for _, srcPrefix := range []string{srcPath, path.Dir(srcPath)} {
			srcTS, dstTS, err := w.s.dataTokens(p, "test", srcPrefix)
			if tk.job.Owner == "root" {
				if err != nil {
					t.Errorf("%s: an admin's tokens: %v", name, err)
				}
				continue
			}
			if dstPath == "/home/alice" || srcPrefix == "/home" {
				if !errors.Is(err, backend.ErrPermission) {
					t.Errorf("%s, source prefix %s: tokens minted (err %v); want none above /home/alice", name, srcPrefix, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s, source prefix %s: %v", name, srcPrefix, err)
				continue
			}
			for _, ts := range []struct {
				aud  string
				toks func() (string, error)
			}{{"a", srcTS}, {"d", dstTS}} {
				tok, err := ts.toks()
				if err != nil {
					t.Fatal(err)
				}
				cl, err := auth.Verify(w.s.agentKey(ts.aud), tok, now, ts.aud)
				if err != nil {
					t.Fatal(err)
				}
				if !access.Under(cl.Prefix, "/home/alice") || cl.Base != "/home/alice" {
					t.Errorf("%s: token for %s: prefix %q, base %q; want at or below /home/alice, base /home/alice", name, ts.aud, cl.Prefix, cl.Base)
				}
			}
		}
	}
	// A batch never takes a file whose source directory is not granted.
	for _, c := range claimed {
		tk := w.tasks.get(c.ID)
		tk.srcEp, tk.dstEp = w.eps["a"], w.eps["d"]
		if got, want := w.batchable(tk), tk.job.Owner == "root" || path.Dir(urlPath(tk.Src)) != "/home"; got != want {
			t.Errorf("%s: batchable %v, want %v", tk.Src, got, want)
		}
	}
}
