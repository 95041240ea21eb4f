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

func TestAccessCheck(t *testing.T) {
	rules := AccessConfig{Rules: []AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: AccessWrite},
		{Endpoint: "dtn1", Path: "/data/{vo}", VO: "*", Access: AccessRead},
		{Endpoint: "dtn2", Path: "/incoming/cms/", VO: "cms", Access: AccessWrite},
		{Endpoint: "dtn2", Path: "/scratch", User: "bob", VO: "atlas", Access: AccessWrite},
	}}
	rules, err := validateAccess(rules)
	if err != nil {
		t.Fatal(err)
	}
	alice := store.User{Name: "alice", VO: "cms"}
	bob := store.User{Name: "bob", VO: "atlas"}
	for _, tc := range []struct {
		u        store.User
		ep, path string
		need     string
		ok       bool
	}{
		{alice, "dtn1", "/home/alice/x", AccessWrite, true},
		{alice, "dtn3", "/home/alice", AccessRead, true},
		{alice, "dtn1", "/home/alicex/y", AccessRead, false}, // whole elements only
		{alice, "dtn1", "/home/bob/x", AccessRead, false},
		{alice, "dtn1", "/data/cms/run1/f", AccessRead, true},
		{alice, "dtn1", "/data/cms/run1/f", AccessWrite, false}, // read-only rule
		{alice, "dtn1", "/data/atlas/f", AccessRead, false},
		{bob, "dtn1", "/data/atlas/f", AccessRead, true},
		{alice, "dtn2", "/data/cms/f", AccessRead, false}, // rule is for dtn1
		{alice, "dtn2", "/incoming/cms/f", AccessWrite, true},
		{bob, "dtn2", "/incoming/cms/f", AccessWrite, false}, // VO cms only
		{bob, "dtn2", "/scratch/f", AccessWrite, true},
		{store.User{Name: "bob", VO: "cms"}, "dtn2", "/scratch/f", AccessWrite, false}, // bob, but not in atlas
		{alice, "dtn1", "/", AccessRead, false},
		{store.User{Name: "..", VO: "cms"}, "dtn1", "/etc/passwd", AccessWrite, false}, // "/home/.." is not "/"
		{store.User{Name: "eve", VO: ".."}, "dtn1", "/x", AccessRead, false},
	} {
		a := &accessCheck{u: tc.u, rules: rules.Rules}
		err := a.check(tc.ep, tc.path, tc.need)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s %s:%s = %v, want allowed %v", tc.u.Name, tc.need, tc.ep, tc.path, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), tc.ep+tc.path)) {
			t.Errorf("refusal %q: want ErrForbidden naming sluice://%s%s", err, tc.ep, tc.path)
		}
	}
	// No rules: nothing for users, everything for admins.
	if err := (&accessCheck{u: alice}).check("dtn1", "/home/alice/x", AccessRead); err == nil {
		t.Error("with no rules a user may read")
	}
	if err := (&accessCheck{u: store.User{Name: "root", Admin: true}, admin: true}).check("dtn1", "/etc/x", AccessWrite); err != nil {
		t.Errorf("admin refused: %v", err)
	}
}

func TestAccessValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    AccessRule
		want string // "" valid
	}{
		{"ok", AccessRule{Endpoint: "a1", Path: "/x", User: "*", Access: "read"}, ""},
		{"no endpoint", AccessRule{Path: "/x", User: "*", Access: "read"}, "endpoint missing"},
		{"bad endpoint", AccessRule{Endpoint: "a b", Path: "/x", User: "*", Access: "read"}, "not an endpoint name"},
		{"nobody", AccessRule{Endpoint: "a1", Path: "/x", Access: "read"}, "say who"},
		{"bad access", AccessRule{Endpoint: "a1", Path: "/x", User: "*", Access: "rw"}, "want read or write"},
		{"relative", AccessRule{Endpoint: "a1", Path: "x", User: "*", Access: "read"}, "absolute"},
		{"dotdot", AccessRule{Endpoint: "a1", Path: "/x/../y", User: "*", Access: "read"}, "no . or .."},
		{"placeholder", AccessRule{Endpoint: "a1", Path: "/x/{group}", User: "*", Access: "read"}, "only {user} and {vo}"},
	} {
		_, err := validateAccess(AccessConfig{Rules: []AccessRule{tc.r}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
}

// TestLinkBase: a data token's link base is the broadest rule that lets
// the job's owner have the path (links may go anywhere below it, not out
// of it); none for an admin, and none when no rule allows the path any
// more; baseFor drops a base a token's prefix is not below.
func TestLinkBase(t *testing.T) {
	rules, err := validateAccess(AccessConfig{Rules: []AccessRule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: AccessWrite},
		{Endpoint: "*", Path: "/home/{user}/deep", User: "*", Access: AccessWrite},
		{Endpoint: "dtn1", Path: "/data/{vo}", VO: "*", Access: AccessRead},
		{Endpoint: "dtn1", Path: "/", User: "root2", Access: AccessRead},
	}})
	if err != nil {
		t.Fatal(err)
	}
	alice := store.User{Name: "alice", VO: "cms"}
	for _, tc := range []struct {
		u        store.User
		admin    bool
		ep, path string
		need     string
		want     string
	}{
		{alice, false, "dtn1", "/home/alice/deep/x", AccessWrite, "/home/alice"}, // the broader of two
		{alice, false, "dtn1", "/data/cms/run1/f", AccessRead, "/data/cms"},
		{alice, false, "dtn1", "/data/cms/run1/f", AccessWrite, ""}, // no rule writes there
		{alice, false, "dtn1", "/home/bob/x", AccessRead, ""},
		{store.User{Name: "root2"}, false, "dtn1", "/etc/x", AccessRead, "/"},
		{store.User{Name: "admin", Admin: true}, true, "dtn1", "/home/alice/x", AccessRead, ""},
	} {
		a := &accessCheck{u: tc.u, admin: tc.admin, rules: rules.Rules}
		if got := a.linkBase(tc.ep, tc.path, tc.need); got != tc.want {
			t.Errorf("%s %s %s:%s: link base %q, want %q", tc.u.Name, tc.need, tc.ep, tc.path, got, tc.want)
		}
	}
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
