// Package sched owns the scheduling algorithms of Sluice: SEAL and STEAL
// (Kettimuthu et al., SC'15, Listings 1-4) and the baselines they are
// compared with (BaseCC1/2/4, BaseVary, Globus default).
//
// A scheduler is pure. One call to Schedule is one scheduling cycle: it gets a
// Snapshot of the world (the time, the waiting and running tasks, what is
// observed at each endpoint, and a throughput Estimator) and returns
// Decisions (start a task with a concurrency, preempt a task, change a
// running task's concurrency). It reads no clock, starts no goroutine and
// does no I/O, so the deterministic simulator (package sim) and the live
// engine drive exactly the same code: same snapshot, same decisions.
//
// Units: times are seconds (float64), sizes bytes, throughputs bytes per
// second.
package sched

import (
	"fmt"
	"strings"
)

// TaskID identifies a task within one world (simulation or service).
type TaskID int64

// Task is what a scheduler sees of one transfer task.
type Task struct {
	ID       TaskID
	Src, Dst string
	Size     int64 // bytes in total
	Left     int64 // bytes still to move
	Batch    bool  // STEAL's batch class; false means interactive
	Arrival  float64

	// Running is true when the task holds connections now (a task whose
	// start-up is still in progress counts as running).
	Running bool
	// CC is the task's current concurrency (partial transfers at once);
	// zero when waiting.
	CC int
	// Rate is the task's observed moving-average throughput (the paper
	// keeps a five-second average); zero when waiting.
	Rate float64
	// Wait is the total time the task has spent queued (WT).
	Wait float64
	// Trans is the total time the task has not been idle (TT_trans):
	// running, including start-up, over all its runs so far.
	Trans float64
	// Pending is true while a start, a preemption or a concurrency change
	// ordered by an earlier cycle has not yet taken effect; schedulers
	// leave such tasks alone.
	Pending bool
	// IdealTT, if positive, is TT_ideal as the world knows it (for
	// example from its own records), and the cycle uses it as is. Zero
	// means not known: the cycle computes it from the estimator at zero
	// load, once per pair and size key per cycle. The simulator and the
	// live service leave it zero, so TT_ideal follows what the
	// estimator learns.
	IdealTT float64
}

// Endpoint is what a scheduler sees of one endpoint (a DTN).
type Endpoint struct {
	Name string
	// MaxThroughput is the highest throughput the endpoint is known to
	// reach (configured or measured), bytes per second.
	MaxThroughput float64
	// MaxCC is the administrator's limit on concurrent transfers
	// (connections) at the endpoint; zero means no limit.
	MaxCC int
	// Observed is the sum of the observed moving-average throughputs of
	// the tasks running at the endpoint.
	Observed float64
	// CC is the total concurrency of the tasks the scheduler runs there
	// (the paper's "known load").
	CC int
	// Probe is the world asking for an upward probe here: MaxThroughput
	// is only the most observed lately (no capacity is configured), the
	// endpoint is at it, and it may carry more (see Peaks). seal+ then
	// gives one running task more connections although saturation test
	// (a) holds.
	Probe bool
}

// Estimator predicts the throughput of one task between src and dst with
// concurrency cc when the scheduler already runs srcLoad and dstLoad
// concurrent transfers at the two endpoints (paper §4.2). It must be pure
// for the duration of a cycle.
type Estimator interface {
	Throughput(src, dst string, cc, srcLoad, dstLoad int, size int64) float64
}

// Trigger says why the world runs a cycle.
type Trigger int

const (
	// Tick is the periodic cycle (every 0.5 s by default).
	Tick Trigger = iota
	// Completion is a cycle run because a task finished while others wait.
	Completion
	// Arrival is a cycle run because a task arrived, for schedulers that
	// admit on arrival (see ArrivalAdmitter).
	Arrival
)

// ArrivalAdmitter is implemented by schedulers that want a cycle the
// moment a task arrives, as "start on arrival" baselines do, rather than
// at the next periodic cycle.
type ArrivalAdmitter interface {
	AdmitsOnArrival() bool
}

// Snapshot is the world as one scheduling cycle sees it.
type Snapshot struct {
	// Trigger says why this cycle runs.
	Trigger   Trigger
	Now       float64
	Waiting   []*Task
	Running   []*Task
	Endpoints map[string]*Endpoint
	// TotalMaxCC bounds the total concurrency over all endpoints (80 in
	// the SC'15 testbed); zero means no bound.
	TotalMaxCC int
	Estimator  Estimator
	// StartupCost is the expected time to open and authenticate the
	// connections of a start or restart, in seconds.
	StartupCost float64
	// Checkpoint is the interval at which running transfers record their
	// progress (seconds): a preempted task re-sends on average half of it.
	Checkpoint float64
	// Refused lists the decisions of the world's previous cycle that its
	// admission rules refused or changed (a job's fixed streams, an
	// adaptive client's files in flight, a VO's allocation on the pair),
	// so that a scheduler can tell a start it ordered and did not get
	// from one it never ordered. The schedulers here do not act on it yet:
	// the snapshot's tasks already show what was carried out.
	Refused []Refusal
}

// Refusal is one decision a world's admission rule refused or changed.
type Refusal struct {
	Decision Decision
	// Rule names the rule.
	Rule string
	// CC is what the rule granted: 0 for a start it refused, the task's
	// concurrency then for a change it refused, otherwise the
	// concurrency it allowed instead of the decision's.
	CC int
	// Why says why, in words.
	Why string
}

// DecisionKind says what a Decision does.
type DecisionKind int

const (
	// Start starts a waiting task with concurrency CC.
	Start DecisionKind = iota + 1
	// Preempt stops a running task at its next checkpoint and returns it
	// to the wait queue. The world keeps the victim running until the task
	// started in the same cycle has begun moving data (SC'15 §4.5).
	Preempt
	// SetCC changes a running task's concurrency to CC.
	SetCC
)

func (k DecisionKind) String() string {
	switch k {
	case Start:
		return "start"
	case Preempt:
		return "preempt"
	case SetCC:
		return "set-cc"
	}
	return fmt.Sprintf("DecisionKind(%d)", int(k))
}

// Decision is one action a scheduler asks the world to carry out.
type Decision struct {
	Kind DecisionKind
	Task TaskID
	CC   int
	// For is, on a Preempt, the task whose start caused it: the world
	// keeps the victim running until For has started.
	For TaskID
}

func (d Decision) String() string {
	switch d.Kind {
	case Start, SetCC:
		return fmt.Sprintf("%s(%d, cc=%d)", d.Kind, d.Task, d.CC)
	case Preempt:
		return fmt.Sprintf("preempt(%d for %d)", d.Task, d.For)
	}
	return d.Kind.String()
}

// Scheduler is one scheduling algorithm.
type Scheduler interface {
	// Name is the algorithm's command-line name (e.g. "seal").
	Name() string
	// Schedule runs one cycle. It must not modify the snapshot's tasks or
	// endpoints, and must return the same decisions for the same snapshot.
	Schedule(s *Snapshot) []Decision
}

// Names lists the schedulers New knows, in a stable order.
func Names() []string {
	return []string{"basecc1", "basecc2", "basecc4", "basecc8", "basevary", "globus", "seal", "steal", "seal+"}
}

// PlusChanges names the changes of seal+, as used in "seal+:arrival,cost".
var PlusChanges = []string{"arrival", "cost", "startup", "retune", "guard", "idle-beta", "short-first", "probe"}

// onlyPlus returns the PlusOptions for a list of seal+ changes, separated
// by "+" (or ","): "a+b" leaves on just a and b; "-a+-b" is plain seal+
// without a and b.
func onlyPlus(list string) (PlusOptions, error) {
	var p PlusOptions
	fields := map[string]*bool{
		"arrival": &p.NoArrival, "cost": &p.NoCostPreempt, "startup": &p.NoStartupCC,
		"retune": &p.NoRetune, "guard": &p.NoErrorGuard, "idle-beta": &p.NoIdleBeta,
		"short-first": &p.NoShortFirst, "probe": &p.NoProbe,
	}
	items := strings.FieldsFunc(list, func(r rune) bool { return r == '+' || r == ',' })
	except := len(items) > 0 && strings.HasPrefix(strings.TrimSpace(items[0]), "-")
	if except {
		p.NoStartupCC = true // as in plain seal+
	} else {
		for _, f := range fields {
			*f = true
		}
	}
	for _, c := range items {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if strings.HasPrefix(c, "-") != except {
			return p, fmt.Errorf("mix of changes to keep and to drop in %q", list)
		}
		f, ok := fields[strings.TrimPrefix(c, "-")]
		if !ok {
			return p, fmt.Errorf("unknown seal+ change %q (known: %v)", c, PlusChanges)
		}
		*f = except
	}
	return p, nil
}

// PlusOptions turns off single changes of seal+ (see sealplus.go).
type PlusOptions struct {
	NoArrival     bool // admit only at periodic cycles, as SEAL does
	NoCostPreempt bool // preempt by the xfactor ratio pf, as SEAL does
	NoStartupCC   bool // choose and raise concurrency without start-up cost
	NoRetune      bool // raise running tasks only when nothing waits
	NoErrorGuard  bool // trust the model even where it has been wrong
	NoIdleBeta    bool // keep Beta fixed however idle the endpoints are
	NoShortFirst  bool // short tasks get no more connections than long ones
	NoProbe       bool // ignore Endpoint.Probe: never raise past a learned maximum
}

// Options tunes the schedulers; the zero value is the paper's settings.
type Options struct {
	// PF is SEAL's preemption factor (default 1.5).
	PF float64
	// Beta is FindThrCC's threshold: concurrency grows while the predicted
	// throughput rises by more than Beta (default 0.10, i.e. 10%).
	Beta float64
	// MaxCC is the largest concurrency one task may use (default 16).
	MaxCC int
	// Lambda is STEAL's fraction of spare bandwidth batch tasks may use
	// (default 1).
	Lambda float64
	// SmallSize: tasks smaller than this bypass SEAL's saturation test
	// (default 1 GB).
	SmallSize int64
	// SplitMin: files at or below this size always use concurrency 1
	// (default 10 MB, the paper's bandwidth-delay threshold).
	SplitMin int64
	// SatFraction is saturation test (a): an endpoint whose observed
	// throughput reaches this fraction of its maximum is saturated
	// (default 0.95).
	SatFraction float64
	// NoConcurrencyProbe turns off saturation test (b) (the 0.25×F rule);
	// only idealised models whose throughput does not depend on
	// concurrency need this.
	NoConcurrencyProbe bool
	// PromoteAfter, if positive, makes STEAL treat a batch task that has
	// waited this long (seconds since arrival) as interactive.
	PromoteAfter float64
	// Plus switches off, one at a time, the changes seal+ makes to SEAL
	// (for ablation); it has no effect on other schedulers.
	Plus PlusOptions
	// OwnThroughputCC makes SEAL choose a starting or raised task's
	// concurrency on the task's own predicted throughput, the literal
	// reading of Listing 2, instead of on what it adds at its endpoints
	// (see chooseCC). Kept for comparison.
	OwnThroughputCC bool
	// CycleAdmission makes the static baselines (BaseCC*, BaseVary,
	// Globus) admit tasks only at the world's scheduling cycles, as SEAL
	// does, instead of the moment they arrive: a comparison in which
	// neither side is spared the wait for the next cycle. It has no effect
	// on SEAL, STEAL and seal+.
	CycleAdmission bool
}

func (o Options) withDefaults() Options {
	if o.PF <= 0 {
		o.PF = 1.5
	}
	if o.Beta <= 0 {
		o.Beta = 0.10
	}
	if o.MaxCC <= 0 {
		o.MaxCC = 16
	}
	if o.Lambda <= 0 {
		o.Lambda = 1
	}
	if o.SmallSize <= 0 {
		o.SmallSize = 1e9
	}
	if o.SplitMin <= 0 {
		o.SplitMin = 10e6
	}
	if o.SatFraction <= 0 {
		o.SatFraction = 0.95
	}
	return o
}

// New returns the scheduler called name.
func New(name string, o Options) (Scheduler, error) {
	o = o.withDefaults()
	// The static baselines; with CycleAdmission they wait for the cycle.
	// No task gets more than MaxCC, the bound on every scheduler's tasks.
	static := func(ccFor func(int64) int, perPair int) (Scheduler, error) {
		bounded := func(size int64) int { return min(ccFor(size), o.MaxCC) }
		return &Static{name: name, ccFor: bounded, perPair: perPair, onCycle: o.CycleAdmission}, nil
	}
	switch name {
	case "basecc1":
		return static(func(int64) int { return 1 }, 0)
	case "basecc2", "basecc4", "basecc8":
		// BaseCC8 is a static concurrency above 4, which SC'15 §6.3
		// reports did worse than BaseCC2 and BaseCC4.
		cc := int(name[len(name)-1] - '0')
		split := o.SplitMin
		return static(func(size int64) int {
			if size <= split {
				return 1
			}
			return cc
		}, 0)
	case "basevary":
		return static(func(size int64) int {
			if size <= 1e9 {
				return 1
			}
			return 4
		}, 0)
	case "globus":
		return static(func(int64) int { return 1 }, 2)
	case "seal":
		return &SEAL{opt: o}, nil
	case "steal":
		return &SEAL{opt: o, typeAware: true}, nil
	case "seal+", "sealplus":
		// Start-up-aware concurrency is off by default: on the
		// simulator's grid it did not pay (docs/results/seal-plus.md).
		o.Plus.NoStartupCC = true
		return &SEAL{opt: o, plus: true}, nil
	}
	if only, ok := strings.CutPrefix(name, "seal+:"); ok {
		// seal+ with only the listed changes, for ablation.
		p, err := onlyPlus(only)
		if err != nil {
			return nil, fmt.Errorf("scheduler %q: %w", name, err)
		}
		o.Plus = p
		return &SEAL{opt: o, plus: true, label: name}, nil
	}
	return nil, fmt.Errorf("unknown scheduler %q (known: %v)", name, Names())
}
