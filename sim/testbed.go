package sim

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/trace"
)

//go:embed testbeds/*.json
var testbedFS embed.FS

// EndpointSpec describes one simulated endpoint (DTN).
type EndpointSpec struct {
	Name string `json:"name"`
	// CapacityGbps is the endpoint's maximum aggregate disk-to-disk
	// throughput.
	CapacityGbps float64 `json:"capacity_gbps"`
	// MaxCC is the administrator's limit on concurrent transfers
	// (connections); zero means none.
	MaxCC int `json:"max_cc,omitempty"`
	// Knee is the total concurrency beyond which storage and host
	// contention make the aggregate fall; Decline is how fast: capacity is
	// divided by 1 + Decline×(n-Knee)/Knee. Zero Knee means no decline.
	Knee    int     `json:"knee,omitempty"`
	Decline float64 `json:"decline,omitempty"`
	// Weight is the share of generated traffic sent to this endpoint when
	// it is a destination (the paper splits transfers by capacity).
	Weight float64 `json:"weight,omitempty"`
	// ExternalLoad is a step series of the fraction of capacity taken by
	// traffic Sluice does not control.
	ExternalLoad []LoadStep `json:"external_load,omitempty"`
	// ConnGbps, if positive, is what one connection reaches on the paths
	// to and from this endpoint (their round-trip time and loss decide
	// it, so it differs by path on a real network); a path takes the
	// smaller of its two endpoints' values. It overrides the testbed's
	// ConnGbps on those paths, and like it replaces the curve there.
	ConnGbps float64 `json:"conn_gbps,omitempty"`
}

// ReplaySpec scales traces for a testbed emulated on one machine: a trace
// generated for the full-scale testbed (capacities divided by
// SizeScale×TimeScale) has its sizes multiplied by SizeScale and its
// arrivals divided by TimeScale, so every transfer keeps its share of the
// (scaled) capacity and a run takes 1/TimeScale of the trace's time.
type ReplaySpec struct {
	SizeScale float64 `json:"size_scale"`
	TimeScale float64 `json:"time_scale"`
	// StartupSeconds is the emulated cost of opening a connection, and the
	// simulator's start-up cost when it predicts a replay.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
}

// LoadStep says that from time At (seconds) on, Fraction of the
// endpoint's capacity is used by external traffic.
type LoadStep struct {
	At       float64 `json:"at"`
	Fraction float64 `json:"fraction"`
}

// Curve is how one task's throughput grows with its own concurrency on a
// path, as a fraction of the path's capacity: the second-order model
// Th(cc) = cc/sqrt(a cc² + b cc + c), normalised so that Th(∞) = 1.
type Curve struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
	C float64 `json:"c"`
}

// DefaultCurve is fitted to the real Stampede->Gordon runs of
// SGData.csv (2.87 GB files, 2 streams, no pipelining; median throughput
// over concurrency 1..32; see docs/calibration.md) and normalised to its
// asymptote (4.82 Gb/s): one partial transfer reaches about a quarter of
// the path, four about 59%, sixteen about 86%.
var DefaultCurve = Curve{A: 1, B: 0.2222 / 0.04305, C: 0.4242 / 0.04305}

// check refuses a curve that gives a task no throughput at some
// concurrency (the model reads a non-positive a cc² + b cc + c as zero,
// and a replay then stalls until its time limit) or none that levels off
// (a <= 0).
func (c Curve) check() error {
	if !(c.A > 0) || math.IsInf(c.A, 0) || math.IsNaN(c.B) || math.IsInf(c.B, 0) || math.IsNaN(c.C) || math.IsInf(c.C, 0) {
		return fmt.Errorf("curve {a: %g, b: %g, c: %g}: want a positive a and finite b and c", c.A, c.B, c.C)
	}
	// The least of a n² + b n + c over n >= 1: at n = 1, or at the
	// vertex -b/2a when that lies beyond 1.
	least := c.A + c.B + c.C
	if v := -c.B / (2 * c.A); v > 1 {
		least = c.C - c.B*c.B/(4*c.A)
	}
	if !(least > 0) {
		return fmt.Errorf("curve {a: %g, b: %g, c: %g}: a cc² + b cc + c is not positive for every concurrency cc >= 1, so some task would move nothing", c.A, c.B, c.C)
	}
	return nil
}

// At is the fraction of the path's capacity a task with concurrency cc
// reaches on an otherwise idle path.
func (c Curve) At(cc int) float64 {
	return model.SecondOrder{A: c.A, B: c.B, C: c.C}.At(float64(cc))
}

// Testbed is a set of endpoints and the paths between them.
type Testbed struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Endpoints   []EndpointSpec `json:"endpoints"`
	// Source is the endpoint traces' transfers start from when they name
	// none the testbed knows (the SC'15 testbed has one source).
	Source string `json:"source"`
	// TotalMaxCC bounds total concurrency (80 in the SC'15 runs).
	TotalMaxCC int `json:"total_max_cc,omitempty"`
	// LinkGbps caps each source-destination path (the WAN); zero means
	// only the endpoints limit it.
	LinkGbps float64 `json:"link_gbps,omitempty"`
	// Curve is the per-task concurrency response; zero means DefaultCurve.
	Curve *Curve `json:"curve,omitempty"`
	// SingleTaskFraction, if positive, replaces the curve by a flat cap:
	// any task reaches at most this fraction of its path whatever its
	// concurrency (the idealised model of the paper's Figure 2).
	SingleTaskFraction float64 `json:"single_task_fraction,omitempty"`
	// EqualShare shares an endpoint equally among its running tasks
	// instead of in proportion to their connections (Figure 2).
	EqualShare bool `json:"equal_share,omitempty"`
	// ChunkOverhead (bytes) is the per-piece cost of splitting a file; see
	// demand. Zero means splitting is free.
	ChunkOverhead float64 `json:"chunk_overhead_bytes,omitempty"`
	// ConnGbps, if positive, replaces the curve by a per-connection cap:
	// a task with concurrency cc reaches at most cc×ConnGbps on its path
	// (a TCP window/RTT limit), and a path carries what its endpoints (and
	// LinkGbps) allow. This is the model of the emulated testbed (package
	// emul), so the simulator predicts it.
	ConnGbps float64 `json:"conn_gbps,omitempty"`
	// ChunkMinBytes, if positive, is the smallest partial transfer, as in
	// the transfer engine (engine.DefaultChunkMin): a file of size s opens
	// at most ceil(s/ChunkMinBytes) connections whatever its concurrency,
	// so a small file takes one connection's share, not cc of them.
	ChunkMinBytes int64 `json:"chunk_min_bytes,omitempty"`
	// Replay, on profiles of the emulated testbed (package testbed), says
	// how traces are scaled for runs on real bytes.
	Replay *ReplaySpec `json:"replay,omitempty"`

	byName map[string]int
}

// LoadTestbed returns a built-in testbed by name ("sc15", "fig2", ...) or
// reads one from a JSON file.
func LoadTestbed(nameOrPath string) (*Testbed, error) {
	var data []byte
	var err error
	if strings.ContainsAny(nameOrPath, "/.") {
		data, err = os.ReadFile(nameOrPath)
	} else {
		data, err = testbedFS.ReadFile("testbeds/" + nameOrPath + ".json")
		if err != nil {
			return nil, fmt.Errorf("unknown testbed %q (built in: %v; or give a JSON file path)", nameOrPath, TestbedNames())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	// Unknown fields are refused: a misspelt one ("link_gpbs") would
	// otherwise be dropped and the run made without the setting.
	var tb Testbed
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tb); err != nil {
		return nil, fmt.Errorf("testbed %s: %w", nameOrPath, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("testbed %s: text after the testbed's JSON object", nameOrPath)
	}
	if err := tb.init(); err != nil {
		return nil, fmt.Errorf("testbed %s: %w", nameOrPath, err)
	}
	return &tb, nil
}

// TestbedNames lists the built-in testbeds.
func TestbedNames() []string {
	ents, _ := testbedFS.ReadDir("testbeds")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

func (tb *Testbed) init() error {
	if len(tb.Endpoints) == 0 {
		return errors.New("no endpoints")
	}
	tb.byName = map[string]int{}
	for i, e := range tb.Endpoints {
		if e.Name == "" {
			return fmt.Errorf("endpoint %d has no name", i)
		}
		if _, dup := tb.byName[e.Name]; dup {
			return fmt.Errorf("endpoint %q listed twice", e.Name)
		}
		if !(e.CapacityGbps > 0) || math.IsInf(e.CapacityGbps, 0) {
			return fmt.Errorf("endpoint %q: capacity_gbps must be positive", e.Name)
		}
		// In bytes per second, sums of capacities must stay finite.
		if e.CapacityGbps > MaxCapacityGbps {
			return fmt.Errorf("endpoint %q: capacity_gbps %g is more than %g (1 Eb/s)", e.Name, e.CapacityGbps, float64(MaxCapacityGbps))
		}
		if e.MaxCC < 0 || e.Knee < 0 || e.Decline < 0 {
			return fmt.Errorf("endpoint %q: max_cc, knee and decline must not be negative", e.Name)
		}
		// A weight of zero means "by capacity"; a negative one was read
		// the same way, silently.
		if e.Weight < 0 || math.IsInf(e.Weight, 0) {
			return fmt.Errorf("endpoint %q: weight must not be negative (zero: by capacity)", e.Name)
		}
		for j, s := range e.ExternalLoad {
			if s.Fraction < 0 || s.Fraction >= 1 {
				return fmt.Errorf("endpoint %q: external_load[%d].fraction must be in [0,1)", e.Name, j)
			}
			if j > 0 && s.At < e.ExternalLoad[j-1].At {
				return fmt.Errorf("endpoint %q: external_load must be sorted by time", e.Name)
			}
		}
		tb.byName[e.Name] = i
	}
	if tb.Source == "" {
		tb.Source = tb.Endpoints[0].Name
	}
	if _, ok := tb.byName[tb.Source]; !ok {
		return fmt.Errorf("source %q is not an endpoint", tb.Source)
	}
	if tb.Curve == nil {
		c := DefaultCurve
		tb.Curve = &c
	}
	if err := tb.Curve.check(); err != nil {
		return err
	}
	// Zero means "none" for these; a negative value was read the same
	// way, silently, so the run lacked a limit its author meant to set.
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"link_gbps", tb.LinkGbps < 0 || math.IsInf(tb.LinkGbps, 0)},
		{"total_max_cc", tb.TotalMaxCC < 0},
		{"chunk_overhead_bytes", tb.ChunkOverhead < 0 || math.IsInf(tb.ChunkOverhead, 0)},
		{"chunk_min_bytes", tb.ChunkMinBytes < 0},
	} {
		if c.bad {
			return fmt.Errorf("%s must not be negative (zero: none)", c.name)
		}
	}
	if !(tb.SingleTaskFraction >= 0 && tb.SingleTaskFraction <= 1) {
		return fmt.Errorf("single_task_fraction %g: want a fraction of the path in (0, 1], or zero for the curve", tb.SingleTaskFraction)
	}
	if tb.ConnGbps < 0 || math.IsInf(tb.ConnGbps, 0) || math.IsNaN(tb.ConnGbps) {
		return fmt.Errorf("conn_gbps must not be negative")
	}
	for _, e := range tb.Endpoints {
		if e.ConnGbps < 0 || math.IsInf(e.ConnGbps, 0) || math.IsNaN(e.ConnGbps) {
			return fmt.Errorf("endpoint %s: conn_gbps must not be negative", e.Name)
		}
	}
	if r := tb.Replay; r != nil && (!(r.SizeScale > 0 && r.SizeScale <= 1) || !(r.TimeScale >= 1) || r.StartupSeconds < 0) {
		return fmt.Errorf("replay: size_scale must be in (0, 1], time_scale at least 1, startup_seconds not negative")
	}
	return nil
}

// Has reports whether the testbed has an endpoint called name.
func (tb *Testbed) Has(name string) bool { _, ok := tb.byName[name]; return ok }

// Endpoint returns the spec of endpoint name.
func (tb *Testbed) Endpoint(name string) *EndpointSpec {
	if i, ok := tb.byName[name]; ok {
		return &tb.Endpoints[i]
	}
	return nil
}

// Destinations lists the endpoints other than the source with their
// traffic weights (capacity when no weight is given).
func (tb *Testbed) Destinations() []trace.Dest {
	var out []trace.Dest
	for _, e := range tb.Endpoints {
		if e.Name == tb.Source {
			continue
		}
		w := e.Weight
		if w <= 0 {
			w = e.CapacityGbps
		}
		out = append(out, trace.Dest{Name: e.Name, Weight: w})
	}
	return out
}

// MaxCapacityGbps is the largest capacity_gbps a testbed may give an
// endpoint: far beyond any host, and small enough that the bytes-per-second
// sums of thousands of them stay finite.
const MaxCapacityGbps = 1e9

// Gbps converts gigabits per second to bytes per second.
func Gbps(g float64) float64 { return g * 1e9 / 8 }

// pathCap is the capacity of the path between two endpoints, bytes/s.
func (tb *Testbed) pathCap(src, dst string) float64 {
	c := math.Min(Gbps(tb.Endpoint(src).CapacityGbps), Gbps(tb.Endpoint(dst).CapacityGbps))
	if tb.LinkGbps > 0 {
		c = math.Min(c, Gbps(tb.LinkGbps))
	}
	return c
}

// connCap is one connection's rate on the path between src and dst,
// bytes/s: the smaller of the endpoints' own values where they have one,
// else the testbed's ConnGbps (zero: the curve models the path).
func (tb *Testbed) connCap(src, dst string) float64 {
	c := 0.0
	for _, e := range [2]string{src, dst} {
		if g := tb.Endpoint(e).ConnGbps; g > 0 && (c == 0 || Gbps(g) < c) {
			c = Gbps(g)
		}
	}
	if c == 0 && tb.ConnGbps > 0 {
		c = Gbps(tb.ConnGbps)
	}
	return c
}

// demand is the most a task of size bytes with concurrency cc can move
// between src and dst on otherwise idle endpoints. Splitting a file into
// cc partial transfers has a cost when the pieces are small: each piece
// pays TCP ramp-up and per-transfer overhead, modelled as an efficiency
// chunk/(chunk+ChunkOverhead). With the default 10 MB (about the paths'
// bandwidth-delay product, the paper's threshold for splitting) a 100 MB
// file gains little beyond cc 4 and a 1 GB file keeps gaining to cc 16.
func (tb *Testbed) demand(src, dst string, cc int, size int64) float64 {
	if cc <= 0 {
		return 0
	}
	cc = tb.streams(cc, size)
	p := tb.pathCap(src, dst)
	if tb.SingleTaskFraction > 0 {
		return tb.SingleTaskFraction * p
	}
	d := tb.Curve.At(cc) * p
	if c := tb.connCap(src, dst); c > 0 {
		d = math.Min(float64(cc)*c, p)
	}
	if tb.ChunkOverhead > 0 && size > 0 {
		chunk := float64(size) / float64(cc)
		d *= chunk / (chunk + tb.ChunkOverhead)
	}
	return d
}

// streams is how many connections a task of size bytes with concurrency
// cc really opens (see ChunkMinBytes).
func (tb *Testbed) streams(cc int, size int64) int {
	if tb.ChunkMinBytes <= 0 || size <= 0 || cc <= 1 {
		return cc
	}
	return int(min(int64(cc), (size+tb.ChunkMinBytes-1)/tb.ChunkMinBytes))
}

// pathCapacity is what the path between src and dst carries with n
// connections open on it, whatever tasks they belong to: the measured
// curve (SGData.csv measured n concurrent files on one path) times the
// path's capacity. Zero means the path adds no limit of its own (the
// idealised single-task-fraction model).
func (tb *Testbed) pathCapacity(src, dst string, n int) float64 {
	if tb.SingleTaskFraction > 0 || tb.connCap(src, dst) > 0 {
		if tb.LinkGbps > 0 {
			return Gbps(tb.LinkGbps)
		}
		return 0
	}
	return tb.Curve.At(max(n, 1)) * tb.pathCap(src, dst)
}

// capacity is what endpoint e can move with n concurrent connections at
// time t (contention decline and external load applied).
func (e *EndpointSpec) capacity(n int, t float64) float64 {
	c := Gbps(e.CapacityGbps)
	if e.Knee > 0 && n > e.Knee {
		c /= 1 + e.Decline*float64(n-e.Knee)/float64(e.Knee)
	}
	if f := e.externalAt(t); f > 0 {
		c *= 1 - f
	}
	return c
}

func (e *EndpointSpec) externalAt(t float64) float64 {
	f := 0.0
	for _, s := range e.ExternalLoad {
		if s.At > t {
			break
		}
		f = s.Fraction
	}
	return f
}
