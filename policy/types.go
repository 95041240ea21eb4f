package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors returned by the Service, each wrapped with context. An operation
// that returns an error has changed nothing, beyond ending the leases that
// had run out by the time it was called.
var (
	// ErrNotFound: no live allocation has the ID; it was never granted,
	// was released, or its lease expired.
	ErrNotFound = errors.New("allocation not found")
	// ErrInvalid: the input is malformed or out of range.
	ErrInvalid = errors.New("invalid input")
	// ErrUnknownPair: the pair is not configured and the service does not
	// admit unknown pairs. It wraps ErrInvalid.
	ErrUnknownPair = fmt.Errorf("%w: unknown pair", ErrInvalid)
	// ErrForbidden: the caller does not own the allocation.
	ErrForbidden = errors.New("allocation belongs to another client")
	// ErrPolicy: the policy failed, panicked, ran out of execution steps
	// or answered something that is not a stream count.
	ErrPolicy = errors.New("policy failed")
)

// MaxStreams bounds every stream count the package accepts: a want, a
// parameter, a policy's answer. No pair of hosts runs 65,536 TCP streams,
// so anything above is a mistake, not a request.
const MaxStreams = 1 << 16

// Pair is a source and destination between which streams are allocated,
// as host names or URL prefixes; the package only compares them.
type Pair struct {
	Src, Dst string
}

func (p Pair) String() string { return p.Src + "->" + p.Dst }

func (p Pair) validate() error {
	if p.Src == "" || p.Dst == "" {
		return fmt.Errorf("pair %q: %w: empty source or destination", p, ErrInvalid)
	}
	return nil
}

// Params are the limits of one pair: the paper's Table I, plus the lease.
type Params struct {
	// Initial is s_i: the streams a new request gets when available.
	Initial int
	// Update is s_u: the increment an update request gets when
	// available. 0 means allocations never grow after the initial one
	// (the paper's "N/A" in Tables IV and V).
	Update int
	// PairMax is s_pmax: the most streams allocated on the pair in
	// total. 0 closes the pair.
	PairMax int
	// ClientMax is s_cmax: the most streams of one allocation, that is,
	// of one client's transfer (the paper's streams[t]). As in the
	// paper's service, a client holding several allocations on a pair
	// gets up to ClientMax on each; a caller that wants one per client
	// keeps track of them.
	ClientMax int
	// Lease is how long an allocation lives without an Update.
	Lease time.Duration
}

// DefaultParams are the Table III limits (128 streams per pair, 32 per
// client) with the Table VII pacing (16 initial, 4 per update), and a
// five-minute lease.
//
// Table VII is the paper's setting in which the service both grants an
// initial slice and grows it on updates; with Table III's eight clients,
// 8 × 16 = 128, so every client can start at once, where Table IV's 32
// initial streams leave half of them waiting. The paper has no lease; five
// minutes outlives the update interval of Table IV's clients (an update
// every 4 files of about 530 MB at a share of a 3.6 Gbit/s path) while
// returning a crashed client's streams within minutes.
func DefaultParams() Params {
	return Params{Initial: 16, Update: 4, PairMax: 128, ClientMax: 32, Lease: 5 * time.Minute}
}

// Validate reports whether p is usable: counts in [0, MaxStreams] and a
// positive lease.
func (p Params) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"initial", p.Initial}, {"update", p.Update}, {"pair max", p.PairMax}, {"client max", p.ClientMax}} {
		if f.v < 0 || f.v > MaxStreams {
			return fmt.Errorf("params: %s %d streams: %w: want 0..%d", f.name, f.v, ErrInvalid, MaxStreams)
		}
	}
	if p.Lease <= 0 {
		return fmt.Errorf("params: lease %v: %w: want > 0", p.Lease, ErrInvalid)
	}
	return nil
}

// Request asks for a new allocation.
type Request struct {
	Pair   Pair
	Client string
	// VO is the client's virtual organisation, which WeightedShares
	// weighs; empty is a VO of its own.
	VO string
	// Want is the total number of streams the client can use: 0 lets the
	// policy decide (the paper's client); more caps the grant.
	Want int
}

// Caller identifies who operates on an allocation: only the client and VO
// that requested it may update or release it.
type Caller struct {
	Client, VO string
}

// Allocation is a grant of streams on a pair to one client.
type Allocation struct {
	ID     string
	Pair   Pair
	Client string
	VO     string
	// Streams is what the client may run now.
	Streams int
	// Want is the total the client last asked for; 0 is "as many as the
	// policy gives".
	Want int
	// Draining is what the service took back (Shrink, ShrinkPair) that
	// the client has not heard of yet. It still counts against the pair,
	// because the client still runs those streams, and is freed at the
	// client's next Update or Release, or when the lease expires.
	Draining int
	// Reason says why the service took streams back: set while Draining
	// is positive and in the Update answer that reports Shrunk.
	Reason string
	// Shrunk is set only in the answer to Update: how many streams the
	// service took away since the client's previous Request or Update,
	// against its wish (a smaller Want is not a shrink).
	Shrunk int
	// Max, in the answers to Request, Update, Get and List, is the most
	// streams the allocation may hold: its pair's per-client limit now.
	// A client whose unit of work needs more (an adaptive client's p)
	// can tell that waiting will not help.
	Max int
	// Created is when the allocation was granted; Expires is when its
	// lease runs out unless renewed by Update.
	Created, Expires time.Time
}

// Owner is the allocation's client and VO, as a Caller.
func (a Allocation) Owner() Caller { return Caller{Client: a.Client, VO: a.VO} }

// View is what a policy sees of a pair when it decides. It is a copy,
// valid during the call.
type View struct {
	Pair   Pair
	Params Params
	Now    time.Time
	// Used is the paper's s_a: streams allocated on the pair, Draining
	// included. In Update, the updating allocation's Draining has already
	// been freed, since the client hears of the shrink in this answer.
	Used int
	// Allocations are the live allocations on the pair, oldest first. In
	// Update and Remove they include the one concerned; in Add the new
	// one is not there yet.
	Allocations []Allocation
	// Weights holds the weight of every VO in Allocations and of the
	// requester.
	Weights map[string]float64
}

// Free is how many streams the pair has left: PairMax − Used, or 0.
func (v View) Free() int { return max(0, v.Params.PairMax-v.Used) }

// Policy decides how many streams an allocation holds. Add and Update
// return the allocation's new total; the Service clamps it to the limits
// (see the package documentation) and to the client's Want. Remove is told
// of an allocation going away (release or expiry); its error cannot stop
// the release, since streams must never be stranded, and goes to
// Config.OnPolicyError.
//
// The Service calls a policy under its lock, one call at a time, so a
// policy need not be safe for concurrent use; it must not call the
// Service.
type Policy interface {
	Name() string
	Add(v View, r Request) (int, error)
	Update(v View, a Allocation, r Request) (int, error)
	Remove(v View, a Allocation) error
}

// weight validates a VO weight.
func validWeight(vo string, w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 || w > 1e6 {
		return fmt.Errorf("weight of VO %q = %v: %w: want 0 < w <= 1e6", vo, w, ErrInvalid)
	}
	return nil
}
