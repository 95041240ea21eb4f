package starlarkpolicy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/policy"
)

func loadTestdata(t *testing.T, name string) *Policy {
	t.Helper()
	p, err := Load("starlark:testdata/"+name, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Policy)
}

func loadSource(t *testing.T, src string, opts Options) *Policy {
	t.Helper()
	p, err := New("test.star", []byte(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStarlarkGreedyMatchesGo drives a Go Greedy service and a service
// running testdata/greedy.star through the same random operations: their
// states never differ.
func TestStarlarkGreedyMatchesGo(t *testing.T) {
	goSvc := newTestService(t, paper(16, 4), policy.Greedy{})
	starSvc := newTestService(t, paper(16, 4), loadTestdata(t, "greedy.star"))
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	for i := range 2000 {
		now = now.Add(time.Duration(rng.IntN(10)) * time.Second)
		live := goSvc.List(now, policy.Filter{})
		var op func(s *policy.Service) (any, error)
		switch k := rng.IntN(10); {
		case k < 3 || len(live) == 0:
			r := policy.Request{Pair: pair, Client: fmt.Sprint("c", i), VO: fmt.Sprint("vo", rng.IntN(3)), Want: rng.IntN(2) * rng.IntN(40)}
			op = func(s *policy.Service) (any, error) { return s.Request(now, r) }
		case k < 8:
			a := live[rng.IntN(len(live))]
			want := rng.IntN(2) * rng.IntN(40)
			op = func(s *policy.Service) (any, error) { return s.Update(now, a.ID, a.Owner(), want) }
		case k < 9:
			a := live[rng.IntN(len(live))]
			op = func(s *policy.Service) (any, error) { return nil, s.Release(now, a.ID, a.Owner()) }
		default:
			total := rng.IntN(128)
			op = func(s *policy.Service) (any, error) { return s.ShrinkPair(now, pair, total, "test") }
		}
		gv, gerr := op(goSvc)
		sv, serr := op(starSvc)
		if !reflect.DeepEqual(gv, sv) || fmt.Sprint(gerr) != fmt.Sprint(serr) {
			t.Fatalf("op %d: Go %+v, %v; Starlark %+v, %v", i, gv, gerr, sv, serr)
		}
		if !reflect.DeepEqual(goSvc.State(), starSvc.State()) {
			t.Fatalf("op %d: states differ", i)
		}
	}
}

// TestStarlarkEndlessLoop: a policy that never returns is stopped after
// its steps, the error says so, and nothing changes.
func TestStarlarkEndlessLoop(t *testing.T) {
	s := newTestService(t, paper(16, 4), policy.Greedy{})
	mustRequest(t, s, t0, "before", "vo", 0)
	s.SetPolicy(loadTestdata(t, "loop.star"))
	before := s.State()

	start := time.Now()
	_, err := s.Request(t0, policy.Request{Pair: pair, Client: "c", VO: "vo"})
	if !errors.Is(err, policy.ErrPolicy) {
		t.Fatalf("endless add: %v, want policy.ErrPolicy", err)
	}
	for _, want := range []string{"testdata/loop.star", "add", "1000000 execution steps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %v", d)
	}
	unchanged(t, s, before)

	// The service still works: update does not loop.
	if _, err := s.Update(t0, before[0].ID, before[0].Owner(), 0); err != nil {
		t.Error(err)
	}
}

// TestStarlarkSlowBuiltins: few steps, each a slow built-in, are stopped
// by the call's timeout (the Service's lock is held meanwhile), and change
// nothing. Loading is bounded the same way.
func TestStarlarkSlowBuiltins(t *testing.T) {
	const slow = `
def add(request):
    n = 0
    for i in range(100000):
        n += len(sorted(range(100000), reverse = True))
    return 1

def update(allocation, request):
    return allocation.streams

def remove(allocation):
    pass
`
	s := newTestService(t, paper(16, 4), policy.Greedy{})
	mustRequest(t, s, t0, "before", "vo", 0)
	s.SetPolicy(loadSource(t, slow, Options{Timeout: 200 * time.Millisecond}))
	before := s.State()
	start := time.Now()
	_, err := s.Request(t0, policy.Request{Pair: pair, Client: "c", VO: "vo"})
	if !errors.Is(err, policy.ErrPolicy) || !strings.Contains(err.Error(), "add stopped after 200ms") {
		t.Fatalf("slow add: %v, want policy.ErrPolicy, stopped after 200ms", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping took %v", d)
	}
	unchanged(t, s, before)

	start = time.Now()
	_, err = New("slow.star", []byte("x = [len(sorted(range(100000))) for i in range(100000)]\n"+slow), Options{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "loading stopped after 200ms") {
		t.Fatalf("slow load: %v, want policy.ErrInvalid, stopped after 200ms", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping the load took %v", d)
	}
}

func TestStarlarkLoadErrors(t *testing.T) {
	const rest = "\ndef update(allocation, request):\n    return 0\n\ndef remove(allocation):\n    pass\n"
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"missing function", "def add(request):\n    return 0\n\ndef update(allocation, request):\n    return 0\n",
			[]string{"no function remove(allocation) defined"}},
		{"wrong arity", "def add(request):\n    return 0\n\ndef update(allocation):\n    return 0\n\ndef remove(allocation):\n    pass\n",
			[]string{"update at bad.star:4:1 takes 1 parameter, want exactly 2 (allocation, request)"}},
		{"extra parameter with default", "def add(request, extra = 1):\n    return 0\n" + rest,
			[]string{"add at bad.star:1:1 takes 2 parameters, want exactly 1 (request)"}},
		{"varargs", "def add(*args):\n    return 0\n" + rest,
			[]string{"add at bad.star:1:1 takes 0 parameters, *args, want exactly 1 (request)"}},
		{"not a function", "add = 3\n" + rest,
			[]string{"add is a int, want a function add(request)"}},
		{"builtin", "add = len\n" + rest,
			[]string{"add is a builtin_function_or_method"}},
		{"syntax error", "def add(request)\n    return 0\n" + rest,
			[]string{"bad.star:2:1: got newline, want ':'"}},
		{"undefined name", "def add(request):\n    return streams\n" + rest,
			[]string{"bad.star:2:12: undefined: streams"}},
		{"while", "def add(request):\n    while True:\n        pass\n" + rest,
			[]string{"bad.star:2:5:", "while"}},
		{"endless top level", "def spin():\n    for i in range(1 << 60):\n        pass\n\nx = spin()\n" + rest,
			[]string{"loading stopped after 1000 execution steps"}},
		{"failing top level", "x = 1 // 0\n" + rest,
			[]string{"loading failed", "division by zero", "bad.star:1:7"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New("bad.star", []byte(c.src), Options{MaxSteps: 1000})
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("got %v, want policy.ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "policy: starlark module bad.star: ") {
				t.Errorf("error %q does not name the file first", err)
			}
			for _, want := range c.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}

	// The syntax error of a file is reported with the file's path.
	_, err := Load("starlark:testdata/syntax.star", Options{})
	if err == nil || !strings.Contains(err.Error(), "testdata/syntax.star:5:1: got newline, want ':'") {
		t.Errorf("syntax error in a file: %v", err)
	}
}

// TestStarlarkGarbage: answers that are not stream counts are errors and
// change nothing; counts above the limits are clamped.
func TestStarlarkGarbage(t *testing.T) {
	for _, c := range []struct {
		ret  string
		want string // in the error; "" for no error
	}{
		{`"ten"`, `add returned string "ten", want an int number of streams`},
		{`None`, `add returned NoneType None`},
		{`3.5`, `add returned float 3.5`},
		{`True`, `add returned bool True`},
		{`-1`, `add returned -1 streams, want >= 0`},
		{`-(1 << 100)`, `add returned -1267650600228229401496703205376 streams`},
		{`1 // 0`, `test.star: add: floored division by zero (at test.star:2:14 in add)`},
		{`add(request)`, `add: function add called recursively`},
		{`1 << 100`, ``},
		{`1000`, ``},
	} {
		t.Run(c.ret, func(t *testing.T) {
			src := "def add(request):\n    return " + c.ret + "\n\ndef update(allocation, request):\n    return 0\n\ndef remove(allocation):\n    pass\n"
			s := newTestService(t, paper(16, 4), loadSource(t, src, Options{}))
			a, err := s.Request(t0, policy.Request{Pair: pair, Client: "c"})
			if c.want == "" {
				if err != nil || a.Streams != 32 {
					t.Errorf("got %+v, %v, want 32 streams (clamped to the client max)", a, err)
				}
				return
			}
			if !errors.Is(err, policy.ErrPolicy) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want policy.ErrPolicy with %q", err, c.want)
			}
			if st := s.State(); len(st) != 0 {
				t.Errorf("state changed: %+v", st)
			}
		})
	}
}

// TestStarlarkSeesState: the host's view reaches the module.
func TestStarlarkSeesState(t *testing.T) {
	src := `
def add(request):
    s = request.state
    print("add", request.client, request.vo, request.want, s.used, s.free, s.pair_max, s.client_max, s.initial, s.update, s.lease)
    return s.free // 2 if s.weights[request.vo] > 1 else 1

def update(allocation, request):
    s = allocation.state
    others = [a for a in s.allocations if a.id != allocation.id]
    print("update", allocation.id, allocation.streams, request.want, len(others), others[0].client, others[0].state, s.now - allocation.created)
    return allocation.streams + len(others)

def remove(allocation):
    print("remove", allocation.id, allocation.streams)
`
	var printed []string
	s := newTestService(t, paper(16, 4), loadSource(t, src, Options{Print: func(m string) { printed = append(printed, m) }}))
	if err := s.SetWeights(policy.Pair{}, map[string]float64{"atlas": 2}); err != nil {
		t.Fatal(err)
	}
	a := mustRequest(t, s, t0, "alice", "atlas", 0)
	b := mustRequest(t, s, t0, "bob", "cms", 5)
	b = mustUpdate(t, s, t0.Add(90*time.Second), b, 7)
	if err := s.Release(t0.Add(90*time.Second), a.ID, a.Owner()); err != nil {
		t.Fatal(err)
	}
	// alice asked for 64 and got the client max.
	if a.Streams != 32 || b.Streams != 2 {
		t.Errorf("got %d and %d streams, want 32 and 2", a.Streams, b.Streams)
	}
	want := []string{
		"add alice atlas 0 0 128 128 32 16 4 300.0",
		"add bob cms 5 32 96 128 32 16 4 300.0",
		"update a2 1 7 1 alice None 90.0",
		"remove a1 32",
	}
	if !reflect.DeepEqual(printed, want) {
		t.Errorf("printed\n%q\nwant\n%q", printed, want)
	}
}

// TestStarlarkRemoveError: a failing remove cannot keep streams; its
// error goes to OnPolicyError.
func TestStarlarkRemoveError(t *testing.T) {
	src := "def add(request):\n    return 8\n\ndef update(allocation, request):\n    return 8\n\ndef remove(allocation):\n    return 1 // 0\n"
	var reported []error
	s, err := policy.New(policy.Config{
		Pairs:         map[policy.Pair]policy.Params{pair: paper(16, 4)},
		Policy:        loadSource(t, src, Options{}),
		OnPolicyError: func(err error) { reported = append(reported, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a := mustRequest(t, s, t0, "c", "vo", 0)
	mustRequest(t, s, t0.Add(time.Second), "d", "vo", 0)
	if err := s.Release(t0, a.ID, a.Owner()); err != nil {
		t.Fatalf("release: %v", err)
	}
	s.Expire(t0.Add(time.Hour))
	if got := used(t, s, t0.Add(time.Hour)); got != 0 {
		t.Errorf("pair uses %d, want 0", got)
	}
	if len(reported) != 2 || !errors.Is(reported[0], policy.ErrPolicy) || !strings.Contains(reported[0].Error(), "remove") {
		t.Errorf("reported %v, want two remove errors", reported)
	}
}

func TestLoad(t *testing.T) {
	for spec, name := range map[string]string{
		"":                              "greedy",
		"greedy":                        "greedy",
		"weighted-shares":               "weighted-shares",
		"starlark:testdata/greedy.star": "starlark:testdata/greedy.star",
	} {
		p, err := Load(spec, Options{})
		if err != nil || p.Name() != name {
			t.Errorf("Load(%q) = %v, %v, want %s", spec, p, err, name)
		}
	}
	for _, spec := range []string{"fair", "starlark:", "Greedy"} {
		if _, err := Load(spec, Options{}); !errors.Is(err, policy.ErrInvalid) {
			t.Errorf("Load(%q): %v, want policy.ErrInvalid", spec, err)
		}
	}
	if _, err := Load("starlark:testdata/missing.star", Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
