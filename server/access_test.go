package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/store"
)

// TestBaseFor: baseFor drops a link base a token's prefix is not below.
func TestBaseFor(t *testing.T) {
	for _, tc := range []struct{ base, prefix, want string }{
		{"/home/alice", "/home/alice/x", "/home/alice"},
		{"/home/alice", "/home/alice", "/home/alice"},
		{"/home/alice/deep", "/home/alice", ""}, // a batch's directory above the rule
		{"", "/home/alice/x", ""},
		{"/", "/etc", "/"},
	} {
		if got := baseFor(tc.base, tc.prefix); got != tc.want {
			t.Errorf("baseFor(%q, %q) = %q, want %q", tc.base, tc.prefix, got, tc.want)
		}
	}
}

// grantHomes gives every user write access to /home/{user} and returns
// alice, a user held to the rules.
func grantHomes(t *testing.T, w *world, st store.Store) store.User {
	t.Helper()
	ctx := context.Background()
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	grant := AccessConfig{Rules: []AccessRule{{Endpoint: "*", Path: "/home/{user}", User: "*", Access: AccessWrite}}}
	if _, err := w.s.SetAccess(ctx, admin, grant); err != nil {
		t.Fatal(err)
	}
	alice, err := st.EnsureUser(ctx, "alice", "cms", false)
	if err != nil {
		t.Fatal(err)
	}
	return alice
}

// TestAccessRevokedAfterSubmission: access is checked again when a file
// runs, not only when its job was submitted. A file whose owner may no
// longer read its source or write its destination fails at once with a
// permanent permission error; before, it ran, with data tokens that no
// rule bounded (weaker than at submission). An admin's files are not
// held to the rules.
func TestAccessRevokedAfterSubmission(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	w := loadedWorld(t, Config{Store: st})
	admin := Caller{User: store.User{Name: "admin", VO: "admin", Admin: true}}
	alice := grantHomes(t, w, st)
	root, err := st.EnsureUser(ctx, "root", "ops", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []store.User{alice, root} {
		j := store.Job{OwnerID: u.ID, Owner: u.Name, VO: u.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
		if _, err := st.CreateJob(ctx, &j, []store.Task{{Src: "sluice://a/home/" + u.Name + "/in", Dst: "sluice://d/home/" + u.Name + "/out",
			SrcEndpoint: "a", DstEndpoint: "d", Size: 1000, State: store.StateQueued}}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, _ := claimPartitions(t, w, st, "local", 2, "a")
	plans := func() map[string]error {
		clear(w.access) // the rules as they are now
		out := map[string]error{}
		for _, c := range claimed {
			tk := w.tasks.get(c.ID)
			out[tk.job.Owner] = w.plan(tk).denied
		}
		return out
	}
	if got := plans(); got["alice"] != nil || got["root"] != nil {
		t.Fatalf("with access: %v", got)
	}
	if _, err := w.s.SetAccess(ctx, admin, AccessConfig{Rules: []AccessRule{{Endpoint: "*", Path: "/scratch/{user}", User: "*", Access: AccessWrite}}}); err != nil {
		t.Fatal(err)
	}
	got := plans()
	if err := got["alice"]; !errors.Is(err, backend.ErrPermission) || !permanent(err) || !strings.Contains(err.Error(), "access changed since the job was submitted") {
		t.Errorf("alice's file after her access was taken away: %v, want a permanent permission error", err)
	}
	if got["root"] != nil {
		t.Errorf("an admin's file: %v", got["root"])
	}
}

// failingUsers is a store whose user look-ups fail while fail is set (a
// database that does not answer).
type failingUsers struct {
	store.Store
	fail bool
}

func (f *failingUsers) UserByName(ctx context.Context, name string) (store.User, error) {
	if f.fail {
		return store.User{}, errors.New("the database does not answer")
	}
	return f.Store.UserByName(ctx, name)
}

// TestNoRulesNoStart: a file whose owner's access rules cannot be read
// (the database does not answer) is not started, and not failed: its
// tokens would carry no link base, as an admin's do, so a user held to
// rules would read through links out of the grant. It starts with its
// rule's link base once the rules can be read.
func TestNoRulesNoStart(t *testing.T) {
	ctx := context.Background()
	inner := testStore(t)
	st := &failingUsers{Store: inner}
	w := loadedWorld(t, Config{Store: st})
	alice := grantHomes(t, w, st)
	j := store.Job{OwnerID: alice.ID, Owner: alice.Name, VO: alice.VO, Class: store.ClassInteractive, Checksum: "adler32", Created: time.Now()}
	if _, err := st.CreateJob(ctx, &j, []store.Task{{Src: "sluice://a/home/alice/in", Dst: "sluice://d/home/alice/out",
		SrcEndpoint: "a", DstEndpoint: "d", Size: 1000, State: store.StateQueued}}); err != nil {
		t.Fatal(err)
	}
	claimed, _ := claimPartitions(t, w, st, "local", 1, "a")
	tk := w.tasks.get(claimed[0].ID)

	st.fail = true
	clear(w.access)
	p := w.plan(tk)
	if p.denied == nil || permanent(p.denied) || tk.stop != stopNoRules {
		t.Fatalf("planned without the rules: denied %v, stop %q; want a wait", p.denied, tk.stop)
	}
	if w.batchable(tk) {
		t.Errorf("batched without the rules")
	}
	tk.stop = ""

	st.fail = false
	p = w.plan(tk)
	if p.denied != nil || p.dstBase != "/home/alice" || !p.restricted {
		t.Errorf("with the rules: denied %v, destination link base %q, restricted %v", p.denied, p.dstBase, p.restricted)
	}
}
