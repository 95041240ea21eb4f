package sim

import (
	"math"

	"github.com/sluice-dtn/sluice/model"
)

// LiveService describes how the live service (package server driving the
// transfer engine) presents the world to the scheduler, where that differs
// from the paper's idealised observer that Options otherwise models. The
// snapshot and the application of decisions are the service's own code
// (package dispatch) in both modes; what differs is what the records say,
// which here comes from a model of the engine. With Options.Live set the
// simulator models the engine's meter, sub-writes and pauses below, so that
// it predicts what the service would do (testbed.Predict); without it, the
// paper's settings stay (sluice sim). Each field is the service's value
// (testbed.TestLiveDefaultsMatchEngine checks them against the engine);
// LiveDefaults returns them.
//
// The mechanisms modelled (file and function of the live side):
//
//   - Observed rates (engine/meter.go, server/world.go tick): a task's
//     rate is the engine's meter, which counts bytes only when a sub-write
//     of SubWrite bytes completes, averages them since the copy began
//     (then over the last 5 s, in quarter-second buckets), and is read
//     into the snapshot only at the periodic tick: a task shows rate 0
//     from its start until a tick after its first sub-write, and a file of
//     one sub-write or less shows 0 all its run. Cycles run on completions
//     see the last tick's rates.
//   - Pending (server/world.go schedTask): a task is pending, so left
//     alone by the scheduler and counted by SEAL at the model's
//     prediction, until its first sub-write completes, and while it is
//     being paused.
//   - Preemption (server/world.go cycle, pause): the scheduler lists a
//     victim's Preempt before its replacement's Start, so the service
//     pauses the victim at once rather than when the replacement moves;
//     the engine's pause lets each connection finish its sub-write and
//     journals them, so nothing is re-sent. Until then the victim stays in
//     the snapshot, pending, with its connections counted. Its end, like
//     any run's, triggers a cycle.
//   - The model (server/world.go complete): fed only when a run that
//     moved the whole file completes, with the file's size over the time
//     since the start was decided (start-up and verification included)
//     and the known loads when it started; running and preempted
//     transfers teach it nothing.
//   - Costs told to the scheduler (server/world.go snapshot): StartupCost
//     and Checkpoint are the service's constants, whatever the start-up
//     really costs and although a pause loses nothing.
type LiveService struct {
	// SubWrite is the engine's unit of progress per connection, bytes
	// (engine.DefaultSubWrite; the service passes its default).
	SubWrite int64
	// StartupCost is the start-up cost the service's snapshots state, s.
	StartupCost float64
	// Checkpoint is the checkpoint interval they state, s
	// (engine.DefaultCheckpointEvery).
	Checkpoint float64
}

// LiveDefaults returns the live service's settings at this commit.
func LiveDefaults() *LiveService {
	return &LiveService{SubWrite: 4 << 20, StartupCost: 0.5, Checkpoint: 1}
}

// The engine's rate meter (engine/meter.go): a ring of quarter-second
// buckets covering 5 s plus the current bucket.
const (
	meterBucket  = 0.25
	meterBuckets = 21
	meterWindow  = (meterBuckets - 1) * meterBucket
)

// meter mirrors the engine's moving average of bytes written, in simulated
// seconds.
type meter struct {
	on    bool
	start float64
	head  int64
	b     [meterBuckets]float64
}

func (m *meter) reset(now float64) { *m = meter{on: true, start: now} }

func (m *meter) advance(now float64) {
	idx := int64(math.Floor((now - m.start) / meterBucket))
	if idx <= m.head {
		return
	}
	if idx-m.head >= meterBuckets {
		m.b = [meterBuckets]float64{}
	} else {
		for h := m.head + 1; h <= idx; h++ {
			m.b[h%meterBuckets] = 0
		}
	}
	m.head = idx
}

func (m *meter) add(at, n float64) {
	m.advance(at)
	m.b[m.head%meterBuckets] += n
}

// rate is the meter's reading at now: bytes over the time the buckets
// cover, which right after the start is the time since the start (at
// least one bucket).
func (m *meter) rate(now float64) float64 {
	if !m.on {
		return 0
	}
	m.advance(now)
	sum := 0.0
	for _, v := range m.b {
		sum += v
	}
	el := now - m.start
	covered := meterWindow + el - float64(m.head)*meterBucket
	covered = math.Max(math.Min(covered, el), meterBucket)
	return sum / covered
}

// liveTask is what the live view keeps of a task's current run.
type liveTask struct {
	meter    meter
	runLeft  float64 // bytes left when the run began moving data
	credited float64 // bytes of the run whose sub-writes completed
	rate     float64 // the meter as read at the last tick
	pausing  bool    // preempted: stops when its progress reaches pauseAt
	pauseAt  float64 // the sub-write boundary it stops at
	startAt  float64 // when the start was decided
	fromZero bool    // the run began with nothing done
	srcLoad  int     // known loads at its endpoints when it started
	dstLoad  int
}

// pausing reports whether t is a live-view victim being paused.
func (t *simTask) pausing() bool { return t.lv != nil && t.lv.pausing }

// liveBegin starts the meter of a run that begins moving data now.
func (w *World) liveBegin(t *simTask) {
	t.lv.meter.reset(w.now)
	t.lv.runLeft, t.lv.credited = t.left, 0
}

// subUnit is how many bytes a run of t credits at once: each of its
// connections completes a sub-write (the fluid model moves them in step).
func (w *World) subUnit(t *simTask) float64 {
	k := w.tb.streams(max(t.cc, 1), t.st.Size)
	return float64(k) * float64(w.opt.Live.SubWrite)
}

// nextBoundary is the run's progress (bytes moved in the run) at which its
// next sub-writes complete: one unit on, or the end of the file.
func (w *World) nextBoundary(t *simTask) float64 {
	return math.Min(t.lv.credited+w.subUnit(t), t.lv.runLeft)
}

// liveCredit records in t's meter the sub-writes it completed while its
// run's progress went from moved0 to moved0+b bytes, from time from on at
// its current rate. The file's last sub-write needs no record: the task
// ends with it.
func (w *World) liveCredit(t *simTask, from, moved0, b float64) {
	moved1 := moved0 + b
	for {
		nb := t.lv.credited + w.subUnit(t)
		if nb >= t.lv.runLeft-0.5 || nb > moved1+0.5 {
			return
		}
		at := from
		if t.rate > 0 {
			at = math.Max(from, from+(nb-moved0)/t.rate)
		}
		t.lv.meter.add(at, nb-t.lv.credited)
		t.lv.credited = nb
	}
}

// livePause asks t to pause: each connection finishes the sub-write it is
// in (a pausing task is pending, so its concurrency does not change).
func (w *World) livePause(t *simTask) {
	t.lv.pausing = true
	t.lv.pauseAt = w.nextBoundary(t)
}

// pauseDue is when a pausing task reaches its sub-write boundary (+Inf if
// it does not move).
func (w *World) pauseDue(t *simTask) float64 {
	moved := t.lv.runLeft - t.left
	rest := t.lv.pauseAt - moved
	if rest <= 0.5 {
		return w.now
	}
	if t.rate <= 0 {
		return math.Inf(1)
	}
	return w.now + rest/t.rate
}

// livePaused ends a pausing task's run at its sub-write boundary: the
// journal holds every byte moved, so nothing is re-sent.
func (w *World) livePaused(t *simTask) {
	t.lv.pausing = false
	t.stopAt = 0
	t.cc, t.target, t.rate, t.readyAt = 0, 0, 0, 0
	t.lv.rate = 0
	t.lv.meter.on = false
	t.preempted++
	w.setState(t, waiting)
	w.ratesDirty = true
}

// liveObserve feeds the estimator as the service does when t completes.
func (w *World) liveObserve(t *simTask) {
	secs := w.now - t.lv.startAt
	if !t.lv.fromZero || secs <= 0 {
		return
	}
	w.est.Observe(model.Obs{Time: w.now, Src: t.st.Src, Dst: t.st.Dst, CC: max(t.target, 1), SrcLoad: t.lv.srcLoad, DstLoad: t.lv.dstLoad, Size: t.st.Size, Thr: float64(t.st.Size) / secs})
}
