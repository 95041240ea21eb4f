package access

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/wire"
)

func TestAccessCheck(t *testing.T) {
	rules := Config{Rules: []Rule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: Write},
		{Endpoint: "dtn1", Path: "/data/{vo}", VO: "*", Access: Read},
		{Endpoint: "dtn2", Path: "/incoming/cms/", VO: "cms", Access: Write},
		{Endpoint: "dtn2", Path: "/scratch", User: "bob", VO: "atlas", Access: Write},
	}}
	rules, err := Validate(rules)
	if err != nil {
		t.Fatal(err)
	}
	alice := User{Name: "alice", VO: "cms"}
	bob := User{Name: "bob", VO: "atlas"}
	for _, tc := range []struct {
		u        User
		ep, path string
		need     string
		ok       bool
	}{
		{alice, "dtn1", "/home/alice/x", Write, true},
		{alice, "dtn3", "/home/alice", Read, true},
		{alice, "dtn1", "/home/alicex/y", Read, false}, // whole elements only
		{alice, "dtn1", "/home/bob/x", Read, false},
		{alice, "dtn1", "/data/cms/run1/f", Read, true},
		{alice, "dtn1", "/data/cms/run1/f", Write, false}, // read-only rule
		{alice, "dtn1", "/data/atlas/f", Read, false},
		{bob, "dtn1", "/data/atlas/f", Read, true},
		{alice, "dtn2", "/data/cms/f", Read, false}, // rule is for dtn1
		{alice, "dtn2", "/incoming/cms/f", Write, true},
		{bob, "dtn2", "/incoming/cms/f", Write, false}, // VO cms only
		{bob, "dtn2", "/scratch/f", Write, true},
		{User{Name: "bob", VO: "cms"}, "dtn2", "/scratch/f", Write, false}, // bob, but not in atlas
		{alice, "dtn1", "/", Read, false},
		{User{Name: "..", VO: "cms"}, "dtn1", "/etc/passwd", Write, false}, // "/home/.." is not "/"
		{User{Name: "eve", VO: ".."}, "dtn1", "/x", Read, false},
	} {
		a := NewCheck(tc.u, rules.Rules)
		err := a.Allow(tc.ep, tc.path, tc.need)
		if (err == nil) != tc.ok {
			t.Errorf("%s %s %s:%s = %v, want allowed %v", tc.u.Name, tc.need, tc.ep, tc.path, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, wire.ErrForbidden) || !strings.Contains(err.Error(), tc.ep+tc.path)) {
			t.Errorf("refusal %q: want wire.ErrForbidden naming sluice://%s%s", err, tc.ep, tc.path)
		}
	}
	// No rules: nothing for users, everything for admins.
	if err := NewCheck(alice, nil).Allow("dtn1", "/home/alice/x", Read); err == nil {
		t.Error("with no rules a user may read")
	}
	if err := NewCheck(User{Name: "root", Admin: true}, nil).Allow("dtn1", "/etc/x", Write); err != nil {
		t.Errorf("admin refused: %v", err)
	}
}

func TestAccessValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Rule
		want string // "" valid
	}{
		{"ok", Rule{Endpoint: "a1", Path: "/x", User: "*", Access: "read"}, ""},
		{"no endpoint", Rule{Path: "/x", User: "*", Access: "read"}, "endpoint missing"},
		{"bad endpoint", Rule{Endpoint: "a b", Path: "/x", User: "*", Access: "read"}, "not an endpoint name"},
		{"nobody", Rule{Endpoint: "a1", Path: "/x", Access: "read"}, "say who"},
		{"bad access", Rule{Endpoint: "a1", Path: "/x", User: "*", Access: "rw"}, "want read or write"},
		{"relative", Rule{Endpoint: "a1", Path: "x", User: "*", Access: "read"}, "absolute"},
		{"dotdot", Rule{Endpoint: "a1", Path: "/x/../y", User: "*", Access: "read"}, "no . or .."},
		{"placeholder", Rule{Endpoint: "a1", Path: "/x/{group}", User: "*", Access: "read"}, "only {user} and {vo}"},
	} {
		_, err := Validate(Config{Rules: []Rule{tc.r}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, wire.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an wire.ErrInvalid saying %q", tc.name, err, tc.want)
		}
	}
}

// TestLinkBase: a data token's link base is the broadest rule that lets
// the job's owner have the path (links may go anywhere below it, not out
// of it); none for an admin, and none when no rule allows the path any
// more.
func TestLinkBase(t *testing.T) {
	rules, err := Validate(Config{Rules: []Rule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: Write},
		{Endpoint: "*", Path: "/home/{user}/deep", User: "*", Access: Write},
		{Endpoint: "dtn1", Path: "/data/{vo}", VO: "*", Access: Read},
		{Endpoint: "dtn1", Path: "/", User: "root2", Access: Read},
	}})
	if err != nil {
		t.Fatal(err)
	}
	alice := User{Name: "alice", VO: "cms"}
	for _, tc := range []struct {
		u        User
		ep, path string
		need     string
		want     string
	}{
		{alice, "dtn1", "/home/alice/deep/x", Write, "/home/alice"}, // the broader of two
		{alice, "dtn1", "/data/cms/run1/f", Read, "/data/cms"},
		{alice, "dtn1", "/data/cms/run1/f", Write, ""}, // no rule writes there
		{alice, "dtn1", "/home/bob/x", Read, ""},
		{User{Name: "root2"}, "dtn1", "/etc/x", Read, "/"},
		{User{Name: "admin", Admin: true}, "dtn1", "/home/alice/x", Read, ""},
	} {
		a := NewCheck(tc.u, rules.Rules)
		if got := a.LinkBase(tc.ep, tc.path, tc.need); got != tc.want {
			t.Errorf("%s %s %s:%s: link base %q, want %q", tc.u.Name, tc.need, tc.ep, tc.path, got, tc.want)
		}
	}
}

// TestMine: a user is shown the rules that apply to them, with {user}
// and {vo} filled in, and not the others'.
func TestMine(t *testing.T) {
	rules, err := Validate(Config{Rules: []Rule{
		{Endpoint: "*", Path: "/home/{user}", User: "*", Access: Write},
		{Endpoint: "dtn1", Path: "/data/{vo}", VO: "*", Access: Read},
		{Endpoint: "dtn2", Path: "/scratch", User: "bob", Access: Write},
		{Endpoint: "dtn2", Path: "/incoming", VO: "atlas", Access: Write},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := Mine(rules, User{Name: "alice", VO: "cms"})
	want := []Rule{
		{Endpoint: "*", Path: "/home/alice", User: "*", Access: Write},
		{Endpoint: "dtn1", Path: "/data/cms", VO: "*", Access: Read},
	}
	if len(got.Rules) != len(want) {
		t.Fatalf("alice sees %+v, want %+v", got.Rules, want)
	}
	for i := range want {
		if got.Rules[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, got.Rules[i], want[i])
		}
	}
	if got := Mine(Config{}, User{Name: "alice"}); got.Rules == nil || len(got.Rules) != 0 {
		t.Errorf("no rules: %#v, want an empty list (JSON [])", got.Rules)
	}
}
