package sim_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dtn/sluice/model"
	"github.com/sluice-dtn/sluice/sched"
	"github.com/sluice-dtn/sluice/sim"
	"github.com/sluice-dtn/sluice/trace"
)

// keyedEst is a cheap load-aware model that implements sched.SizeKeyer,
// so SEAL shares predictions among tasks of one size class on a pair:
// a task gets cap×cc/8 up to the pair's capacity (the smaller endpoint's),
// divided by 1 + (srcLoad+dstLoad)/16.
type keyedEst struct{ caps map[string]float64 }

func (e keyedEst) Throughput(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
	c := math.Min(e.caps[src], e.caps[dst])
	return math.Min(c*float64(cc)/8, c) / (1 + float64(srcLoad+dstLoad)/16)
}

func (keyedEst) SizeKey(size int64) int64 { return int64(model.SizeClass(size)) }

// ThroughputCurve implements sched.CurveEstimator, as a real estimator
// would: the pair's capacity looked up once.
func (e keyedEst) ThroughputCurve(src, dst string, fromCC, srcLoad, dstLoad int, size int64, thr []float64) {
	c := math.Min(e.caps[src], e.caps[dst])
	for i := range thr {
		thr[i] = math.Min(c*float64(fromCC+i)/8, c) / (1 + float64(srcLoad+dstLoad)/16)
	}
}

// Pair implements sched.PairEstimator, as a real estimator would: the
// pair's capacity looked up once for all the cycle's questions about it.
func (e keyedEst) Pair(src, dst string) sched.PairModel {
	return keyedPair(math.Min(e.caps[src], e.caps[dst]))
}

// keyedPair is keyedEst's model of one pair: its capacity.
type keyedPair float64

func (c keyedPair) Throughput(cc, srcLoad, dstLoad int, _ int64) float64 {
	return math.Min(float64(c)*float64(cc)/8, float64(c)) / (1 + float64(srcLoad+dstLoad)/16)
}

func (c keyedPair) ThroughputCurve(fromCC, srcLoad, dstLoad int, _ int64, thr []float64) {
	for i := range thr {
		thr[i] = c.Throughput(fromCC+i, srcLoad, dstLoad, 0)
	}
}

// classMix is SC'15 Table 2's 45% row: files per size class.
var classMix = [5]float64{907, 168, 334, 209, 232}

// classBounds are the classes' size ranges (class 0 from 1 KB).
var classBounds = [5][2]float64{{1e3, 1e6}, {1e6, 1e7}, {1e7, 1e8}, {1e8, 1e9}, {1e9, 1e10}}

// drawSize draws a size from the class mix, log-uniform within its class.
func drawSize(r *rand.Rand) int64 {
	total := 0.0
	for _, w := range classMix {
		total += w
	}
	x := r.Float64() * total
	c := 0
	for c < 4 && x >= classMix[c] {
		x -= classMix[c]
		c++
	}
	lo, hi := math.Log(classBounds[c][0]), math.Log(classBounds[c][1])
	return int64(math.Exp(lo + r.Float64()*(hi-lo)))
}

// cycleSnapshot is a synthetic SEAL cycle: 500 sources × 500
// destinations, one running task per (source i, destination i) and (i,
// i+250) (1,000 running, two at each endpoint), and nWaiting waiting tasks
// between random pairs. Every even-numbered endpoint observes 97% of its
// maximum throughput (saturated), every odd one 25%.
//
// group is how many consecutive waiting tasks share one (random) pair: 1
// is the worst case for SEAL's per-pair memoisation; real submissions come
// as jobs of many files between one source and one destination.
func cycleSnapshot(nEP, nRunning, nWaiting, group int) (*sched.Snapshot, map[string]float64) {
	r := rand.New(rand.NewPCG(42, 7))
	s := &sched.Snapshot{Now: 10000, Endpoints: map[string]*sched.Endpoint{}, StartupCost: 0.5}
	caps := map[string]float64{}
	src := func(i int) string { return "s" + strconv.Itoa(i) }
	dst := func(i int) string { return "d" + strconv.Itoa(i) }
	for i := 0; i < nEP; i++ {
		for _, n := range []string{src(i), dst(i)} {
			caps[n] = sim.Gbps(float64(2 + r.IntN(9)))
			s.Endpoints[n] = &sched.Endpoint{Name: n, MaxCC: 64}
		}
	}
	id := sched.TaskID(1)
	for k := 0; k < nRunning; k++ {
		i := k % nEP
		j := (i + (k/nEP)*(nEP/2)) % nEP
		size := drawSize(r) + 1e9
		cc := 1 + r.IntN(8)
		t := &sched.Task{ID: id, Src: src(i), Dst: dst(j), Size: size, Left: 1 + r.Int64N(size), Running: true, CC: cc,
			Rate: 50e6 + r.Float64()*100e6, Trans: r.Float64() * 300, Wait: r.Float64() * 60}
		t.Arrival = s.Now - t.Trans - t.Wait
		id++
		s.Running = append(s.Running, t)
		for _, n := range []string{t.Src, t.Dst} {
			s.Endpoints[n].CC += cc
			s.Endpoints[n].Observed += t.Rate
		}
	}
	for i := 0; i < nEP; i++ {
		for _, n := range []string{src(i), dst(i)} {
			ep := s.Endpoints[n]
			if i%2 == 0 {
				ep.MaxThroughput = ep.Observed / 0.97
			} else {
				ep.MaxThroughput = ep.Observed * 4
			}
			caps[n] = ep.MaxThroughput
		}
	}
	var ws, wd string
	for k := 0; k < nWaiting; k++ {
		if k%max(group, 1) == 0 {
			ws, wd = src(r.IntN(nEP)), dst(r.IntN(nEP))
		}
		t := &sched.Task{ID: id, Src: ws, Dst: wd, Size: drawSize(r), Wait: r.Float64() * 600}
		t.Left = t.Size
		t.Arrival = s.Now - t.Wait
		id++
		s.Waiting = append(s.Waiting, t)
	}
	s.Estimator = keyedEst{caps}
	return s, caps
}

func historyFor(caps map[string]float64) *model.History {
	h := model.NewHistory()
	e := keyedEst{caps}
	h.Fallback = func(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
		return e.Throughput(src, dst, cc, srcLoad, dstLoad, size)
	}
	return h
}

// BenchmarkSEALCycle is one SEAL scheduling cycle over 100,000 waiting and
// 1,000 running tasks on 1,000 endpoints, half of them saturated.
//
// Variants: the estimator (a cheap closed form keyed by size class, or the
// model.History the simulator uses); the waiting tasks' pairs (each task on
// its own random pair, or jobs of 100 files on one pair); and the room at
// the endpoints (up to 64 connections each, so the cycle starts some twenty
// thousand tasks at once, or two more each, the steady state of a
// backlog). The facility variant is the shape of the facility day of
// docs/SCALING.md in steady state: 5,000 endpoints, 6,500 running tasks and a
// short queue of 250 on random pairs, where most endpoints have nothing
// waiting.
func BenchmarkSEALCycle(b *testing.B) {
	for _, g := range []struct {
		name           string
		group          int
		steady         bool
		eps, run, wait int
	}{
		{"random-pairs", 1, false, 500, 1000, 100000},
		{"jobs-of-100", 100, false, 500, 1000, 100000},
		{"steady-backlog", 100, true, 500, 1000, 100000},
		{"facility", 1, false, 2500, 6500, 250},
	} {
		snap, caps := cycleSnapshot(g.eps, g.run, g.wait, g.group)
		if g.steady {
			// A backlog of 100,000 exists because the endpoints are
			// busy: every endpoint has room for two more connections, so
			// the cycle weighs everything and starts or preempts little.
			for _, ep := range snap.Endpoints {
				ep.MaxCC = ep.CC + 2
			}
		}
		for _, v := range []struct {
			name string
			est  sched.Estimator
		}{{"keyed", snap.Estimator}, {"history", historyFor(caps)}} {
			benchCycle(b, g.name+"/"+v.name, snap, v.est)
		}
	}
}

func benchCycle(b *testing.B, name string, snap *sched.Snapshot, est sched.Estimator) {
	b.Run(name, func(b *testing.B) {
		snap.Estimator = est
		s, err := sched.New("seal", sched.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var n int
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n = len(s.Schedule(snap))
		}
		b.ReportMetric(float64(n), "decisions")
	})
}

// TestSEALCycleSnapshotUnchanged: on the benchmark's kind of snapshot (at
// a smaller scale), a SEAL or STEAL cycle leaves every task and endpoint
// as it found them, with both estimators, and gives the same decisions
// twice (so a benchmark loop re-scheduling one snapshot measures the same
// work every iteration).
func TestSEALCycleSnapshotUnchanged(t *testing.T) {
	snap, caps := cycleSnapshot(50, 100, 5000, 1)
	for i, x := range snap.Waiting {
		x.Batch = i%3 == 0
	}
	freeze := func() ([]sched.Task, []sched.Task, map[string]sched.Endpoint) {
		var w, r []sched.Task
		for _, x := range snap.Waiting {
			w = append(w, *x)
		}
		for _, x := range snap.Running {
			r = append(r, *x)
		}
		e := map[string]sched.Endpoint{}
		for k, v := range snap.Endpoints {
			e[k] = *v
		}
		return w, r, e
	}
	for _, est := range []sched.Estimator{snap.Estimator, historyFor(caps)} {
		snap.Estimator = est
		for _, name := range []string{"seal", "steal"} {
			s, err := sched.New(name, sched.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w0, r0, e0 := freeze()
			d1 := s.Schedule(snap)
			w1, r1, e1 := freeze()
			d2 := s.Schedule(snap)
			if !reflect.DeepEqual(w0, w1) || !reflect.DeepEqual(r0, r1) || !reflect.DeepEqual(e0, e1) {
				t.Errorf("%s with %T: Schedule modified its snapshot", name, est)
			}
			if !reflect.DeepEqual(d1, d2) {
				t.Errorf("%s with %T: a second cycle on the same snapshot decided differently", name, est)
			}
			if len(d1) == 0 {
				t.Errorf("%s with %T: no decisions at all", name, est)
			}
		}
	}
}

// replayTestbed writes a 100-endpoint testbed: 10 sources and 90
// destinations of 2-10 Gb/s, at most 64 connections each, no total limit.
func replayTestbed(dir string, r *rand.Rand) (string, error) {
	type ep struct {
		Name         string  `json:"name"`
		CapacityGbps float64 `json:"capacity_gbps"`
		MaxCC        int     `json:"max_cc"`
	}
	tb := struct {
		Name       string `json:"name"`
		Source     string `json:"source"`
		TotalMaxCC int    `json:"total_max_cc"`
		Endpoints  []ep   `json:"endpoints"`
	}{Name: "replay100", Source: "src0"}
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("src%d", i)
		if i >= 10 {
			name = fmt.Sprintf("dst%d", i-10)
		}
		tb.Endpoints = append(tb.Endpoints, ep{Name: name, CapacityGbps: float64(2 + r.IntN(9)), MaxCC: 64})
	}
	data, err := json.Marshal(tb)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "replay100.json")
	return path, os.WriteFile(path, data, 0o644)
}

// replayTrace draws n transfers over 24 hours: Poisson arrivals, sources
// and destinations chosen in proportion to capacity, sizes from the SC'15
// 45% class mix, then scaled down (never below 1 KB) if needed so the
// offered load is at most 30% of the sources' capacity over the day.
func replayTrace(tb *sim.Testbed, n int, r *rand.Rand) *trace.Trace {
	const day = 86400.0
	var srcs, dsts []sim.EndpointSpec
	var srcCap, dstCap float64
	for _, e := range tb.Endpoints {
		if len(e.Name) > 3 && e.Name[:3] == "src" {
			srcs = append(srcs, e)
			srcCap += e.CapacityGbps
		} else {
			dsts = append(dsts, e)
			dstCap += e.CapacityGbps
		}
	}
	pick := func(es []sim.EndpointSpec, total float64) string {
		x := r.Float64() * total
		for _, e := range es {
			if x < e.CapacityGbps {
				return e.Name
			}
			x -= e.CapacityGbps
		}
		return es[len(es)-1].Name
	}
	tr := &trace.Trace{Name: fmt.Sprintf("replay24h-%d", n), Transfers: make([]trace.Transfer, n)}
	rate := float64(n) / day
	at, bytes := 0.0, 0.0
	for i := range tr.Transfers {
		at += r.ExpFloat64() / rate
		if at >= day {
			at = math.Nextafter(day, 0)
		}
		x := trace.Transfer{ID: int64(i), Arrival: at, Src: pick(srcs, srcCap), Dst: pick(dsts, dstCap), Size: drawSize(r)}
		bytes += float64(x.Size)
		tr.Transfers[i] = x
	}
	if f := 0.3 * sim.Gbps(srcCap) * day / bytes; f < 1 {
		for i := range tr.Transfers {
			tr.Transfers[i].Size = max(int64(float64(tr.Transfers[i].Size)*f), 1000)
		}
	}
	return tr
}

// BenchmarkReplay24h replays a day of N transfers (SLUICE_BENCH_N, default
// 1,000,000) on a 100-endpoint testbed under SEAL. It is long, so it runs
// only with SLUICE_BENCH_LONG=1:
//
//	SLUICE_BENCH_LONG=1 go test -run '^$' -bench Replay24h -benchtime 1x ./sim/
func BenchmarkReplay24h(b *testing.B) {
	if os.Getenv("SLUICE_BENCH_LONG") != "1" {
		b.Skip("set SLUICE_BENCH_LONG=1 to run the 24-hour replay")
	}
	n := 1000000
	if v := os.Getenv("SLUICE_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SLUICE_BENCH_N=%q: want a positive integer", v)
		}
	}
	r := rand.New(rand.NewPCG(2024, 24))
	path, err := replayTestbed(b.TempDir(), r)
	if err != nil {
		b.Fatal(err)
	}
	tb, err := sim.LoadTestbed(path)
	if err != nil {
		b.Fatal(err)
	}
	tr := replayTrace(tb, n, r)
	s, err := sched.New("seal", sched.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	begin := time.Now()
	var res *sim.Result
	cycles := 0
	for i := 0; i < b.N; i++ {
		res, err = sim.Run(tb, tr, s, sim.Options{Observer: func(*sim.World, []sched.Decision) { cycles++ }})
		if err != nil {
			b.Fatal(err)
		}
	}
	wall := time.Since(begin).Seconds() / float64(b.N)
	b.StopTimer()
	b.ReportMetric(wall, "wall-s/op")
	b.ReportMetric(float64(n)/wall, "tasks/s")
	b.ReportMetric(float64(cycles)/float64(b.N), "cycles/op")
	b.ReportMetric(res.Interactive.AvgSlowdown, "avg-slowdown")
	b.ReportMetric(float64(res.Preemptions), "preemptions")
}

// plainEst hides every optional interface of an estimator but Throughput.
type plainEst struct{ e sched.Estimator }

func (p plainEst) Throughput(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
	return p.e.Throughput(src, dst, cc, srcLoad, dstLoad, size)
}

// sizeKeyed hides CurveEstimator only.
type sizeKeyed struct{ keyedEst }

func (s sizeKeyed) ThroughputCurve() {} // a different method: not a sched.CurveEstimator

// TestCurveSameDecisions: a cycle decides the same whether its estimator
// answers a run of concurrencies at once (sched.CurveEstimator) or one at
// a time, for SEAL and STEAL, with the closed-form and the history
// estimators.
func TestCurveSameDecisions(t *testing.T) {
	snap, caps := cycleSnapshot(50, 100, 5000, 3)
	for i, x := range snap.Waiting {
		x.Batch = i%4 == 0
	}
	for _, name := range []string{"seal", "steal"} {
		for _, pair := range []struct {
			name      string
			curve, by sched.Estimator
		}{
			{"keyed", keyedEst{caps}, sizeKeyed{keyedEst{caps}}},
			{"history", historyFor(caps), plainEst{historyFor(caps)}},
		} {
			if _, ok := pair.curve.(sched.CurveEstimator); !ok {
				t.Fatalf("%s: the estimator under test is no CurveEstimator", pair.name)
			}
			if _, ok := pair.by.(sched.CurveEstimator); ok {
				t.Fatalf("%s: the reference estimator is a CurveEstimator", pair.name)
			}
			var out [2][]sched.Decision
			for k, est := range []sched.Estimator{pair.curve, pair.by} {
				s, err := sched.New(name, sched.Options{})
				if err != nil {
					t.Fatal(err)
				}
				snap.Estimator = est
				out[k] = s.Schedule(snap)
			}
			if len(out[0]) == 0 || !reflect.DeepEqual(out[0], out[1]) {
				t.Errorf("%s with %s: %d decisions with curves, %d without, or they differ", name, pair.name, len(out[0]), len(out[1]))
			}
		}
	}
}
