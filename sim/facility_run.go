package sim

import (
	"bufio"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dtn/sluice/sched"
)

// FacilityRunOptions configures RunFacility.
type FacilityRunOptions struct {
	// Scheduler is a sched.New name; Sched its options.
	Scheduler string
	Sched     sched.Options
	// Options are the world's settings. A facility's completions come
	// hundreds a second, so a cycle per completion (Run's default) would
	// run the scheduler hundreds of times a second: callers normally set
	// NoCycleOnCompletion and schedule on the periodic cycle alone.
	Options Options
	// TimelineEvery is the simulated interval between timeline points
	// (default 900 s).
	TimelineEvery float64
	// OnTimeline, if set, is called with each timeline point as it is
	// taken (progress for long runs).
	OnTimeline func(TimelinePoint)
	// SampleSize is how many cycles a uniform sample keeps for scatter
	// plots (default 4000).
	SampleSize int
	// Resolution is the grain of completion times in seconds
	// (StreamOptions.Resolution); zero keeps exact times.
	Resolution float64
}

// CycleBin summarises the cycles whose task count fell in [Lo, Hi]:
// quantiles of the wall time of Schedule, and of the CPU time of the
// thread that ran it (CPU*; zero where not measured), in milliseconds.
// Wall time includes the time the thread waited for a core, so on a
// shared machine the CPU time is the steadier measure of the work.
type CycleBin struct {
	Lo        int     `json:"lo"`
	Hi        int     `json:"hi"`
	Cycles    int64   `json:"cycles"`
	Median    float64 `json:"median_ms"`
	P99       float64 `json:"p99_ms"`
	Mean      float64 `json:"mean_ms"`
	Max       float64 `json:"max_ms"`
	CPUMedian float64 `json:"cpu_median_ms"`
	CPUP99    float64 `json:"cpu_p99_ms"`
	CPUMean   float64 `json:"cpu_mean_ms"`
	CPUMax    float64 `json:"cpu_max_ms"`
	// MeanOther is the mean of the other count: running tasks in a bin
	// by queued tasks, queued tasks in a bin by all tasks.
	MeanOther float64 `json:"mean_other"`
}

// CyclePoint is one sampled cycle: wall and CPU milliseconds.
type CyclePoint struct {
	Waiting int     `json:"waiting"`
	Running int     `json:"running"`
	Ms      float64 `json:"ms"`
	CPUMs   float64 `json:"cpu_ms"`
}

// TimelinePoint is a facility run's state at one simulated time.
type TimelinePoint struct {
	Hour      float64 `json:"hour"`
	Arrived   int64   `json:"arrived"`
	Completed int64   `json:"completed"`
	Waiting   int     `json:"waiting"`
	InFlight  int     `json:"in_flight"`
	Cycles    int64   `json:"cycles"`
	// MeanCycleMs and MeanCycleCPUMs are the mean Schedule wall and
	// CPU time over the interval.
	MeanCycleMs    float64 `json:"mean_cycle_ms"`
	MeanCycleCPUMs float64 `json:"mean_cycle_cpu_ms"`
	// WallSeconds and CPUSeconds are the replay's wall and process CPU
	// time so far.
	WallSeconds float64 `json:"wall_seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	HeapBytes   uint64  `json:"heap_bytes"`
}

// FacilityPerf is what a facility run cost. None of it is deterministic.
type FacilityPerf struct {
	// GenerateSeconds is the wall time to build the facility (testbed,
	// links); ReplaySeconds the replay's, arrivals generated on the way;
	// ReplayCPUSeconds the process's CPU time during the replay (user
	// and system, garbage collection included; 0 where not measured).
	GenerateSeconds  float64 `json:"generate_seconds"`
	ReplaySeconds    float64 `json:"replay_seconds"`
	ReplayCPUSeconds float64 `json:"replay_cpu_seconds"`
	// SimPerWall is simulated seconds per wall second.
	SimPerWall float64 `json:"sim_per_wall"`
	// ScheduleSeconds is the wall time inside Schedule, ScheduleShare its
	// share of the replay's; ScheduleCPUSeconds the CPU time inside it.
	ScheduleSeconds    float64 `json:"schedule_seconds"`
	ScheduleShare      float64 `json:"schedule_share"`
	ScheduleCPUSeconds float64 `json:"schedule_cpu_seconds"`
	// PeakRSSBytes is the process's peak resident set (VmHWM; 0 where
	// /proc is missing); PeakHeapBytes the largest Go heap (objects,
	// live or not yet swept) sampled during the run.
	PeakRSSBytes  uint64 `json:"peak_rss_bytes"`
	PeakHeapBytes uint64 `json:"peak_heap_bytes"`
	GoVersion     string `json:"go_version"`
	GOMAXPROCS    int    `json:"gomaxprocs"`
	NumCPU        int    `json:"num_cpu"`
}

// FacilityReport is a facility run: what was run, what happened, what it
// cost.
type FacilityReport struct {
	Facility  *Facility `json:"facility"`
	Scheduler string    `json:"scheduler"`
	Cycle     float64   `json:"cycle_seconds"`
	Startup   float64   `json:"startup_seconds"`
	// CompletionCycles says whether completions triggered cycles.
	CompletionCycles bool `json:"completion_cycles"`
	// Resolution is the grain of completion times in seconds (0: exact).
	Resolution float64       `json:"resolution_seconds,omitempty"`
	Result     *StreamResult `json:"result"`
	Perf       FacilityPerf  `json:"perf"`
	// CyclesByQueued bins the cycles by queued (waiting) tasks,
	// CyclesByTasks by queued plus running tasks: powers of two.
	CyclesByQueued []CycleBin       `json:"cycles_by_queued"`
	CyclesByTasks  []CycleBin       `json:"cycles_by_tasks"`
	Timeline       []TimelinePoint  `json:"timeline"`
	Sample         []CyclePoint     `json:"-"`
	SlowestCycles  []CycleInfoBrief `json:"slowest_cycles"`
}

// CycleInfoBrief is a cycle in the report's list of the slowest.
type CycleInfoBrief struct {
	Hour      float64 `json:"hour"`
	Waiting   int     `json:"waiting"`
	Running   int     `json:"running"`
	Decisions int     `json:"decisions"`
	Ms        float64 `json:"ms"`
	CPUMs     float64 `json:"cpu_ms"`
}

// RunFacility generates spec's facility, replays its day under the
// scheduler with the streaming engine, and measures the run: replay wall
// time, peak memory, and per cycle the queued and running tasks and the
// wall time of Schedule.
func RunFacility(spec FacilitySpec, o FacilityRunOptions) (*FacilityReport, error) {
	s, err := sched.New(o.Scheduler, o.Sched)
	if err != nil {
		return nil, fmt.Errorf("facility: %w", err)
	}
	if o.Options.Live != nil {
		return nil, fmt.Errorf("facility: the live-service view (--live) is not supported by the streaming engine")
	}
	t0 := time.Now()
	f, err := NewFacility(spec)
	if err != nil {
		return nil, err
	}
	gen := time.Since(t0)
	opt := o.Options.withDefaults()
	rep := &FacilityReport{Facility: f, Scheduler: s.Name(), Cycle: opt.Cycle, Startup: opt.Startup, CompletionCycles: !opt.NoCycleOnCompletion, Resolution: o.Resolution}
	if !(o.Resolution >= 0) || math.IsInf(o.Resolution, 1) {
		return nil, fmt.Errorf("facility: resolution %v: want a finite, non-negative number of seconds", o.Resolution)
	}
	every := o.TimelineEvery
	if every <= 0 {
		every = 900
	}
	size := o.SampleSize
	if size <= 0 {
		size = 4000
	}
	m := newCycleMeter(size, spec.Seed)
	heap := newHeapMeter()
	begin := time.Now()
	var lastCycles int64
	var lastWall, lastCPU time.Duration
	cpu0 := processCPU()
	so := StreamOptions{
		Options:       o.Options,
		Resolution:    o.Resolution,
		ProgressEvery: every,
		OnCycle: func(c CycleInfo) {
			m.add(c)
			if m.n%256 == 0 {
				heap.sample()
			}
		},
		OnProgress: func(p StreamProgress) {
			pt := TimelinePoint{Hour: p.Time / 3600, Arrived: p.Arrived, Completed: p.Completed, Waiting: p.Waiting, InFlight: p.InFlight,
				Cycles: p.Cycles, WallSeconds: time.Since(begin).Seconds(), CPUSeconds: (processCPU() - cpu0).Seconds(), HeapBytes: heap.sample()}
			if dc := p.Cycles - lastCycles; dc > 0 {
				pt.MeanCycleMs = float64(p.ScheduleWall-lastWall) / float64(dc) / 1e6
				pt.MeanCycleCPUMs = float64(p.ScheduleCPU-lastCPU) / float64(dc) / 1e6
			}
			lastCycles, lastWall, lastCPU = p.Cycles, p.ScheduleWall, p.ScheduleCPU
			rep.Timeline = append(rep.Timeline, pt)
			if o.OnTimeline != nil {
				o.OnTimeline(pt)
			}
		},
	}
	res, err := RunStream(f.Testbed, f.Arrivals(), s, so)
	if err != nil {
		return nil, fmt.Errorf("facility: %w", err)
	}
	wall := time.Since(begin)
	cpu := processCPU() - cpu0
	rep.Result = res
	rep.CyclesByQueued, rep.CyclesByTasks = m.bins()
	rep.Sample = m.sample
	rep.SlowestCycles = m.slowest()
	rep.Perf = FacilityPerf{
		GenerateSeconds: gen.Seconds(), ReplaySeconds: wall.Seconds(), ReplayCPUSeconds: cpu.Seconds(),
		ScheduleSeconds: res.ScheduleWall.Seconds(), ScheduleShare: res.ScheduleWall.Seconds() / wall.Seconds(),
		ScheduleCPUSeconds: res.ScheduleCPU.Seconds(),
		PeakRSSBytes:       peakRSS(), PeakHeapBytes: max(heap.peak, heap.sample()),
		GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
	}
	if wall > 0 {
		rep.Perf.SimPerWall = res.Makespan / wall.Seconds()
	}
	return rep, nil
}

// cycleMeter bins cycle times by task counts.
type cycleMeter struct {
	n        int64
	byQ, byT []*binAcc
	sample   []CyclePoint
	size     int
	r        *rand.Rand
	top      []CycleInfoBrief // the slowest cycles, slowest first
	topN     int
	minTopMs float64
}

type binAcc struct {
	h, hc     *LogHist
	sum, sumc float64
	max, maxc float64
	other     float64
}

func newCycleMeter(size int, seed int64) *cycleMeter {
	return &cycleMeter{size: size, r: rand.New(rand.NewPCG(uint64(seed), 0xc1c1e)), topN: 10}
}

// binOf is the power-of-two bin of a count: 0, 1, 2-3, 4-7, ...
func binOf(x int) int {
	if x <= 0 {
		return 0
	}
	return bits.Len(uint(x))
}

func binRange(b int) (int, int) {
	if b == 0 {
		return 0, 0
	}
	return 1 << (b - 1), 1<<b - 1
}

func (m *cycleMeter) add(c CycleInfo) {
	m.n++
	ms, cms := float64(c.Schedule)/1e6, float64(c.ScheduleCPU)/1e6
	put := func(bins *[]*binAcc, x int, other int) {
		b := binOf(x)
		for len(*bins) <= b {
			*bins = append(*bins, nil)
		}
		a := (*bins)[b]
		if a == nil {
			// Seconds from 100 ns to 1000 s, 50 bins a decade.
			a = &binAcc{h: NewLogHist(-7, 3, 50), hc: NewLogHist(-7, 3, 50)}
			(*bins)[b] = a
		}
		a.h.Add(c.Schedule.Seconds())
		a.sum += ms
		a.max = math.Max(a.max, ms)
		a.hc.Add(c.ScheduleCPU.Seconds())
		a.sumc += cms
		a.maxc = math.Max(a.maxc, cms)
		a.other += float64(other)
	}
	put(&m.byQ, c.Waiting, c.Running)
	put(&m.byT, c.Waiting+c.Running, c.Waiting)
	// Reservoir sample (Algorithm R): each cycle kept with equal chance.
	p := CyclePoint{Waiting: c.Waiting, Running: c.Running, Ms: ms, CPUMs: cms}
	if len(m.sample) < m.size {
		m.sample = append(m.sample, p)
	} else if j := m.r.Int64N(m.n); j < int64(m.size) {
		m.sample[j] = p
	}
	if len(m.top) < m.topN || ms > m.minTopMs {
		m.top = append(m.top, CycleInfoBrief{Hour: c.Time / 3600, Waiting: c.Waiting, Running: c.Running, Decisions: c.Decisions, Ms: ms, CPUMs: cms})
		for i := len(m.top) - 1; i > 0 && m.top[i].Ms > m.top[i-1].Ms; i-- {
			m.top[i], m.top[i-1] = m.top[i-1], m.top[i]
		}
		if len(m.top) > m.topN {
			m.top = m.top[:m.topN]
		}
		m.minTopMs = m.top[len(m.top)-1].Ms
	}
}

func (m *cycleMeter) slowest() []CycleInfoBrief { return m.top }

func (m *cycleMeter) bins() ([]CycleBin, []CycleBin) {
	conv := func(bins []*binAcc) []CycleBin {
		var out []CycleBin
		for b, a := range bins {
			if a == nil || a.h.N == 0 {
				continue
			}
			lo, hi := binRange(b)
			n := float64(a.h.N)
			out = append(out, CycleBin{Lo: lo, Hi: hi, Cycles: a.h.N, Median: a.h.Quantile(0.5) * 1e3, P99: a.h.Quantile(0.99) * 1e3,
				Mean: a.sum / n, Max: a.max, MeanOther: a.other / n,
				CPUMedian: a.hc.Quantile(0.5) * 1e3, CPUP99: a.hc.Quantile(0.99) * 1e3, CPUMean: a.sumc / n, CPUMax: a.maxc})
		}
		return out
	}
	return conv(m.byQ), conv(m.byT)
}

// heapMeter samples the Go heap and keeps its peak.
type heapMeter struct {
	s    []metrics.Sample
	peak uint64
}

func newHeapMeter() *heapMeter {
	return &heapMeter{s: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

func (h *heapMeter) sample() uint64 {
	metrics.Read(h.s)
	if h.s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	v := h.s[0].Value.Uint64()
	h.peak = max(h.peak, v)
	return v
}

// peakRSS is the process's peak resident set size in bytes, from Linux's
// /proc/self/status (VmHWM); 0 where that is not available.
func peakRSS() uint64 {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}
