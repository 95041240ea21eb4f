// Package starlarkpolicy holds the Policy Service's policies that an
// administrator writes in Starlark, and Load, which turns a configuration
// string (greedy, weighted-shares, starlark:PATH) into a policy.Policy.
// It is a package of its own so that the clients of the Policy Service
// (package client, the adaptive copy) do not carry an interpreter.
package starlarkpolicy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/sluice-dtn/sluice/policy"
)

// Load returns the policy a configuration names: "greedy" (or empty),
// "weighted-shares", or "starlark:PATH", a Starlark module read from PATH
// and checked by New.
func Load(spec string, opts Options) (policy.Policy, error) {
	switch {
	case spec == "" || spec == "greedy":
		return policy.Greedy{}, nil
	case spec == "weighted-shares":
		return policy.WeightedShares{}, nil
	case strings.HasPrefix(spec, "starlark:"):
		path := strings.TrimPrefix(spec, "starlark:")
		if path == "" {
			return nil, fmt.Errorf("policy: %q: %w: no file after starlark:", spec, policy.ErrInvalid)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("policy: load %q: %w", spec, err)
		}
		return New(path, src, opts)
	default:
		return nil, fmt.Errorf("policy: unknown policy %q: %w: want greedy, weighted-shares or starlark:PATH", spec, policy.ErrInvalid)
	}
}

// DefaultMaxSteps bounds each call of a Starlark policy: about 10 ms of
// computation on one core (the Service holds its lock meanwhile), and far
// more than a sensible policy needs: Greedy in Starlark takes 37 steps, a
// loop summing streams per VO over a thousand allocations about 21,000.
const DefaultMaxSteps = 1_000_000

// DefaultTimeout bounds each call of a Starlark policy in wall time. A
// policy's call takes microseconds; one taking a second holds every
// client of the Service waiting.
const DefaultTimeout = time.Second

// Options tune a Starlark policy.
type Options struct {
	// MaxSteps bounds the execution steps of each call, and of loading
	// the module; 0 means DefaultMaxSteps.
	MaxSteps uint64
	// Timeout bounds the wall time of each call, and of loading the
	// module; 0 means DefaultTimeout. Steps alone do not bound time: a
	// step may call a built-in (sorted, a string repeated) whose own
	// work is not counted, and calls run under the Service's lock.
	Timeout time.Duration
	// Print receives what the module prints; nil discards it.
	Print func(msg string)
}

// Starlark is a policy written in Starlark (go.starlark.net): the
// paper's service loads a user's Python module; Starlark keeps the idea
// and sandboxes it. The module defines three functions:
//
//	def add(request): ...                # returns the new allocation's streams
//	def update(allocation, request): ... # returns the allocation's new streams
//	def remove(allocation): ...          # result ignored
//
// request has fields src, dst, client, vo, want and state; allocation has
// id, src, dst, client, vo, streams, want, draining, created and expires
// (Unix seconds) and state. state is the host's view of the pair (View):
// src, dst, now (Unix seconds), initial, update, pair_max, client_max,
// lease (seconds), used, free, allocations (a tuple of allocations,
// oldest first, without state) and weights (a dict from VO to weight).
// Everything is frozen: a module keeps no state of its own between calls,
// the host owns it.
//
// Greedy, for instance, is (testdata/greedy.star):
//
//	def provision(s, streams):
//	    sv = min(s.client_max - streams, s.pair_max - s.used)
//	    if sv <= 0:
//	        return streams
//	    elif streams == 0 and sv > s.initial:
//	        return s.initial
//	    elif streams > 0 and sv > s.update:
//	        return streams + s.update
//	    return streams + sv
//
//	def add(request):
//	    return provision(request.state, 0)
//
//	def update(allocation, request):
//	    return provision(request.state, allocation.streams)
//
//	def remove(allocation):
//	    pass
//
// The dialect is strict: no while, no recursion, no top-level if or for,
// so loops are over finite ranges; every call is further bounded by
// MaxSteps and Timeout. A call that fails, runs out of steps or time or
// returns anything but a non-negative int is an error and changes
// nothing; an int above the limits is clamped by the Service. Neither
// bounds memory, nor the time of a single built-in: one step can still
// build a value of up to 1 GiB (Starlark's own cap), so the sandbox
// protects against mistakes in an administrator's policy, not
// against a hostile one.
type Policy struct {
	file                string
	add, update, remove *starlark.Function
	maxSteps            uint64
	timeout             time.Duration
	print               func(string)
}

// New compiles and runs the module in src (named filename in
// errors) and checks that it defines add, update and remove with the
// right number of parameters. Its errors wrap ErrInvalid and name the
// file, and the line where there is one.
func New(filename string, src []byte, opts Options) (*Policy, error) {
	p := &Policy{file: filename, maxSteps: opts.MaxSteps, timeout: opts.Timeout, print: opts.Print}
	if p.maxSteps == 0 {
		p.maxSteps = DefaultMaxSteps
	}
	if p.timeout <= 0 {
		p.timeout = DefaultTimeout
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("policy: starlark module %s: %w: %s", filename, policy.ErrInvalid, fmt.Sprintf(format, args...))
	}

	thread, exceeded := p.thread("load")
	stop := p.deadline(thread)
	globals, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, filename, src, nil)
	late := stop()
	if err != nil {
		var syn syntax.Error
		var res resolve.ErrorList
		switch {
		case errors.As(err, &syn), errors.As(err, &res):
			// These print as file:line:col: message.
			return nil, bad("%v", err)
		case late:
			return nil, bad("loading stopped after %v", p.timeout)
		case *exceeded:
			return nil, bad("loading stopped after %d execution steps (an endless loop?)", p.maxSteps)
		default:
			return nil, bad("loading failed: %s", evalMessage(err))
		}
	}

	for _, want := range []struct {
		name   string
		params string
		fn     **starlark.Function
	}{
		{"add", "request", &p.add},
		{"update", "allocation, request", &p.update},
		{"remove", "allocation", &p.remove},
	} {
		n := strings.Count(want.params, ",") + 1
		v, ok := globals[want.name]
		if !ok {
			return nil, bad("no function %s(%s) defined", want.name, want.params)
		}
		fn, ok := v.(*starlark.Function)
		if !ok {
			return nil, bad("%s is a %s, want a function %s(%s)", want.name, v.Type(), want.name, want.params)
		}
		if fn.NumParams() != n || fn.HasVarargs() || fn.HasKwargs() || fn.NumKwonlyParams() > 0 {
			return nil, bad("%s at %s takes %s, want exactly %d (%s)", want.name, fn.Position(), describeParams(fn), n, want.params)
		}
		*want.fn = fn
	}
	return p, nil
}

func describeParams(fn *starlark.Function) string {
	var parts []string
	// NumParams counts *args, **kwargs and keyword-only parameters too.
	k := fn.NumParams() - fn.NumKwonlyParams()
	if fn.HasVarargs() {
		k--
	}
	if fn.HasKwargs() {
		k--
	}
	if k == 1 {
		parts = append(parts, "1 parameter")
	} else {
		parts = append(parts, fmt.Sprintf("%d parameters", k))
	}
	if fn.NumKwonlyParams() > 0 {
		parts = append(parts, fmt.Sprintf("%d keyword-only", fn.NumKwonlyParams()))
	}
	if fn.HasVarargs() {
		parts = append(parts, "*args")
	}
	if fn.HasKwargs() {
		parts = append(parts, "**kwargs")
	}
	return strings.Join(parts, ", ")
}

// Name is "starlark:" and the module's file name.
func (p *Policy) Name() string { return "starlark:" + p.file }

// Add calls add(request).
func (p *Policy) Add(v policy.View, r policy.Request) (int, error) {
	st := stateValue(v)
	return p.decide(p.add, requestValue(r, st))
}

// Update calls update(allocation, request).
func (p *Policy) Update(v policy.View, a policy.Allocation, r policy.Request) (int, error) {
	st := stateValue(v)
	return p.decide(p.update, allocationValue(a, st), requestValue(r, st))
}

// Remove calls remove(allocation) and ignores its result.
func (p *Policy) Remove(v policy.View, a policy.Allocation) error {
	_, err := p.call(p.remove, allocationValue(a, stateValue(v)))
	return err
}

func (p *Policy) decide(fn *starlark.Function, args ...starlark.Value) (int, error) {
	res, err := p.call(fn, args...)
	if err != nil {
		return 0, err
	}
	i, ok := res.(starlark.Int)
	if !ok {
		return 0, fmt.Errorf("%s: %s returned %s %s, want an int number of streams", p.file, fn.Name(), res.Type(), shorten(res.String()))
	}
	if i.Sign() < 0 {
		return 0, fmt.Errorf("%s: %s returned %s streams, want >= 0", p.file, fn.Name(), shorten(i.String()))
	}
	if n, ok := i.Int64(); ok && n <= policy.MaxStreams {
		return int(n), nil
	}
	// More than there can be: the Service clamps it like any other
	// answer above the limits.
	return policy.MaxStreams, nil
}

// deadline cancels t once the timeout has passed. Cancelling is seen at
// the thread's next step, so a single built-in runs to its end. The
// returned stop ends the timer and reports whether it fired.
func (p *Policy) deadline(t *starlark.Thread) (stop func() bool) {
	var fired atomic.Bool
	timer := time.AfterFunc(p.timeout, func() {
		fired.Store(true)
		t.Cancel("took too long")
	})
	return func() bool {
		timer.Stop()
		return fired.Load()
	}
}

// call runs fn on a fresh thread bounded by maxSteps and the timeout.
func (p *Policy) call(fn *starlark.Function, args ...starlark.Value) (starlark.Value, error) {
	thread, exceeded := p.thread(fn.Name())
	stop := p.deadline(thread)
	res, err := starlark.Call(thread, fn, args, nil)
	late := stop()
	switch {
	case err == nil:
		return res, nil
	case late:
		return nil, fmt.Errorf("%s: %s stopped after %v", p.file, fn.Name(), p.timeout)
	case *exceeded:
		return nil, fmt.Errorf("%s: %s stopped after %d execution steps (an endless loop?)", p.file, fn.Name(), p.maxSteps)
	default:
		return nil, fmt.Errorf("%s: %s: %s", p.file, fn.Name(), evalMessage(err))
	}
}

func (p *Policy) thread(name string) (*starlark.Thread, *bool) {
	exceeded := new(bool)
	t := &starlark.Thread{
		Name: p.file + ":" + name,
		Print: func(_ *starlark.Thread, msg string) {
			if p.print != nil {
				p.print(msg)
			}
		},
		OnMaxSteps: func(t *starlark.Thread) {
			*exceeded = true
			t.Cancel("too many steps")
		},
	}
	t.SetMaxExecutionSteps(p.maxSteps)
	return t, exceeded
}

// evalMessage is a Starlark error with the position of the innermost
// Starlark frame, in one line.
func evalMessage(err error) string {
	var ev *starlark.EvalError
	if !errors.As(err, &ev) {
		return err.Error()
	}
	for i := range len(ev.CallStack) {
		fr := ev.CallStack.At(i)
		if fr.Pos.Filename() != "<builtin>" {
			return fmt.Sprintf("%s (at %s in %s)", ev.Msg, fr.Pos, fr.Name)
		}
	}
	return ev.Msg
}

func shorten(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

var (
	structRequest    = starlark.String("request")
	structAllocation = starlark.String("allocation")
	structState      = starlark.String("state")
)

func unix(t time.Time) starlark.Value {
	if t.IsZero() {
		return starlark.None
	}
	return starlark.Float(float64(t.UnixNano()) / 1e9)
}

func requestValue(r policy.Request, st starlark.Value) starlark.Value {
	s := starlarkstruct.FromStringDict(structRequest, starlark.StringDict{
		"src":    starlark.String(r.Pair.Src),
		"dst":    starlark.String(r.Pair.Dst),
		"client": starlark.String(r.Client),
		"vo":     starlark.String(r.VO),
		"want":   starlark.MakeInt(r.Want),
		"state":  st,
	})
	s.Freeze()
	return s
}

// allocationValue converts a; st is None inside state.allocations.
func allocationValue(a policy.Allocation, st starlark.Value) starlark.Value {
	s := starlarkstruct.FromStringDict(structAllocation, starlark.StringDict{
		"id":       starlark.String(a.ID),
		"src":      starlark.String(a.Pair.Src),
		"dst":      starlark.String(a.Pair.Dst),
		"client":   starlark.String(a.Client),
		"vo":       starlark.String(a.VO),
		"streams":  starlark.MakeInt(a.Streams),
		"want":     starlark.MakeInt(a.Want),
		"draining": starlark.MakeInt(a.Draining),
		"created":  unix(a.Created),
		"expires":  unix(a.Expires),
		"state":    st,
	})
	s.Freeze()
	return s
}

func stateValue(v policy.View) starlark.Value {
	allocs := make(starlark.Tuple, len(v.Allocations))
	for i, a := range v.Allocations {
		allocs[i] = allocationValue(a, starlark.None)
	}
	weights := starlark.NewDict(len(v.Weights))
	for vo, w := range v.Weights {
		_ = weights.SetKey(starlark.String(vo), starlark.Float(w)) // a new dict of string keys cannot fail
	}
	s := starlarkstruct.FromStringDict(structState, starlark.StringDict{
		"src":         starlark.String(v.Pair.Src),
		"dst":         starlark.String(v.Pair.Dst),
		"now":         unix(v.Now),
		"initial":     starlark.MakeInt(v.Params.Initial),
		"update":      starlark.MakeInt(v.Params.Update),
		"pair_max":    starlark.MakeInt(v.Params.PairMax),
		"client_max":  starlark.MakeInt(v.Params.ClientMax),
		"lease":       starlark.Float(v.Params.Lease.Seconds()),
		"used":        starlark.MakeInt(v.Used),
		"free":        starlark.MakeInt(v.Free()),
		"allocations": allocs,
		"weights":     weights,
	})
	s.Freeze()
	return s
}
