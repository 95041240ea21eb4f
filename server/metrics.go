package server

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// metrics are the service's Prometheus metrics (served at /metrics). The
// alert rules and the Grafana dashboard in monitoring/ use them; a test
// there checks that every name they use is one a running server exports.
//
// Several servers may share a PostgreSQL store: each one's figures are
// about what it holds (the tasks of its partitions, the runs it started,
// the store calls it made), so a cluster's totals are sums over its
// servers; endpoint states are each server's own view of every endpoint.
type metrics struct {
	queued        *prometheus.GaugeVec
	running       *prometheus.GaugeVec
	throughput    *prometheus.GaugeVec
	endpointCC    *prometheus.GaugeVec
	slowdown      *prometheus.HistogramVec
	cycleSeconds  prometheus.Histogram
	preemptions   prometheus.Counter
	retries       prometheus.Counter
	jobsSubmitted prometheus.Counter
	filesDone     *prometheus.CounterVec
	bytesDone     *prometheus.CounterVec
	batches       prometheus.Counter
	batchFiles    prometheus.Counter

	filesFailed  *prometheus.CounterVec
	pairBytes    *prometheus.CounterVec
	pairQueued   *prometheus.GaugeVec
	pairRunning  *prometheus.GaugeVec
	pairStreams  *prometheus.GaugeVec
	endpointUp   *prometheus.GaugeVec
	heartbeat    *prometheus.GaugeVec
	storeSeconds *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec

	// pairs are the endpoint pairs whose gauges observe sets: every pair
	// it saw a task of, or a file of which ended (a small job may start
	// and end between two looks). An idle pair reads 0 rather than
	// vanishing, so that "queued and nothing running" is a comparison
	// of two series. Only the loop touches it.
	pairs map[[2]string]bool
}

// Failure reasons: the reason label of sluice_files_failed_total, a fixed
// set (failReason maps an error to one) so that the label's values stay
// few whatever the errors say. Each names what an operator looks at.
const (
	// reasonNotFound: the source file (or a directory on its path)
	// does not exist.
	reasonNotFound = "not_found"
	// reasonPermission: an endpoint refused to read or write (its file
	// permissions, or a data token that does not cover the path).
	reasonPermission = "permission"
	// reasonNoSpace: the destination's storage is full.
	reasonNoSpace = "no_space"
	// reasonExists: the destination exists and the job said not to
	// overwrite.
	reasonExists = "exists"
	// reasonChecksum: the copy's checksum differs from the source's.
	reasonChecksum = "checksum"
	// reasonSourceChanged: the source changed while it was read.
	reasonSourceChanged = "source_changed"
	// reasonInvalid: the request cannot be carried out as asked (a
	// directory where a file was named, a size out of range or not the
	// one submitted, a destination path too long).
	reasonInvalid = "invalid"
	// reasonEndpointDown: the file waited longer than --down-give-up
	// for an endpoint with no heartbeat.
	reasonEndpointDown = "endpoint_down"
	// reasonNetwork: connections refused, reset or timed out, until the
	// job's retries were spent.
	reasonNetwork = "network"
	// reasonOther: anything else (an agent's internal error, say); the
	// file's error says what.
	reasonOther = "other"
)

// failReasons lists every reason, so that each counter starts at 0: a
// rate over a series that appears only with its first failure misses
// that failure.
var failReasons = []string{reasonNotFound, reasonPermission, reasonNoSpace, reasonExists, reasonChecksum,
	reasonSourceChanged, reasonInvalid, reasonEndpointDown, reasonNetwork, reasonOther}

func newMetrics(r *prometheus.Registry) *metrics {
	pair := []string{"source", "destination"}
	m := &metrics{
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tasks_queued",
			Help: "Tasks (files) this server holds waiting for the scheduler, by class."}, []string{"class"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tasks_running",
			Help: "Tasks (files) this server runs, by class."}, []string{"class"}),
		throughput: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_throughput_bytes_per_second",
			Help: "Aggregate throughput of this server's runs at each endpoint, by class."}, []string{"endpoint", "class"}),
		endpointCC: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_concurrency",
			Help: "Concurrent partial transfers the scheduler runs at each endpoint (this server's and the load other servers publish)."}, []string{"endpoint"}),
		slowdown: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_task_slowdown",
			Help:    "Slowdown (turnaround over transfer time) of finished tasks, by class.",
			Buckets: []float64{1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100}}, []string{"class"}),
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_scheduler_cycle_seconds",
			Help:    "Time the scheduler takes to plan one cycle (one runs every --cycle, default 0.5 s).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_preemptions_total",
			Help: "Tasks preempted by the scheduler."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_transfer_retries_total",
			Help: "Runs that ended in a transient error and were re-queued or, their retries spent, failed."}),
		jobsSubmitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_jobs_submitted_total",
			Help: "Jobs this server accepted."}),
		filesDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_files_done_total",
			Help: "Files this server transferred and verified (or found in place), by class."}, []string{"class"}),
		bytesDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_bytes_done_total",
			Help: "Bytes of the files this server transferred and verified, by class."}, []string{"class"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pull_batches_total",
			Help: "Pull batches of small files sent to destination agents."}),
		batchFiles: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pull_batch_files_total",
			Help: "Files sent in pull batches (over sluice_pull_batches_total: the mean pipelining depth)."}),

		filesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_files_failed_total",
			Help: "Files that failed for good on this server, by reason: not_found, permission, no_space, exists, " +
				"checksum, source_changed, invalid, endpoint_down, network, other (each file's error in its job says more)."}, []string{"reason"}),
		pairBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_pair_bytes_total",
			Help: "Bytes written to destination files by this server's runs, by source and destination endpoint, " +
				"counted as the runs progress (a resumed run counts from where it resumed)."}, pair),
		pairQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_pair_tasks_queued",
			Help: "Tasks (files) this server holds waiting to run, by source and destination endpoint (those waiting for a source's size or a down endpoint included)."}, pair),
		pairRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_pair_tasks_running",
			Help: "Tasks (files) this server runs, by source and destination endpoint."}, pair),
		pairStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_pair_streams",
			Help: "Connections (concurrency) of this server's running tasks, by source and destination endpoint."}, pair),
		endpointUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_up",
			Help: "1 if this server takes the endpoint to be up, 0 if down. kind=agent: up while its heartbeats arrive " +
				"(within --heartbeat-timeout, to any server of a cluster); kind=storage: a storage server the service reaches itself, always 1."}, []string{"endpoint", "kind"}),
		heartbeat: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_last_heartbeat_timestamp_seconds",
			Help: "Unix time of the last heartbeat this server knows of from each agent (its own or, through the store, another server's)."}, []string{"endpoint"}),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_store_operation_seconds",
			Help:    "Duration of this server's calls to its store (SQLite or PostgreSQL), by operation (the store method).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"operation"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_store_errors_total",
			Help: "This server's store calls that failed, by operation (answers such as not found, a conflict or a lost lease are not counted)."}, []string{"operation"}),

		pairs: map[[2]string]bool{},
	}
	for _, reason := range failReasons {
		m.filesFailed.WithLabelValues(reason)
	}
	for _, c := range []string{store.ClassInteractive, store.ClassBatch} {
		m.filesDone.WithLabelValues(c)
		m.bytesDone.WithLabelValues(c)
	}
	// Each store operation's error count too (not its latency: a
	// histogram per operation never called would be many series of
	// nothing).
	st := reflect.TypeFor[store.Store]()
	for i := range st.NumMethod() {
		if op := st.Method(i).Name; !untimed[op] {
			m.storeErrors.WithLabelValues(op)
		}
	}
	r.MustRegister(m.queued, m.running, m.throughput, m.endpointCC, m.slowdown, m.cycleSeconds,
		m.preemptions, m.retries, m.jobsSubmitted, m.filesDone, m.bytesDone, m.batches, m.batchFiles,
		m.filesFailed, m.pairBytes, m.pairQueued, m.pairRunning, m.pairStreams, m.endpointUp, m.heartbeat,
		m.storeSeconds, m.storeErrors,
		// The process's own: its start time (restarts), memory, file
		// descriptors, goroutines.
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return m
}

func className(batch bool) string {
	if batch {
		return store.ClassBatch
	}
	return store.ClassInteractive
}

// pairCount is one endpoint pair's figures in observe.
type pairCount struct{ queued, running, streams float64 }

// observe refreshes the gauges from the loop's state, and counts the
// bytes the runs wrote since the last call.
func (m *metrics) observe(w *world) {
	var q, r [2]float64
	thr := map[[2]string]float64{}
	pairs := map[[2]string]*pairCount{}
	// The tasks of a pair mostly come one after another (a job's files):
	// the last pair's counts spare a map lookup per task, of which there
	// may be a million.
	var last [2]string
	var p *pairCount
	for t := range w.tasks.all() {
		c := 0
		if t.Batch {
			c = 1
		}
		if k := [2]string{t.SrcEndpoint, t.DstEndpoint}; p == nil || k != last {
			if p = pairs[k]; p == nil {
				p = &pairCount{}
				pairs[k] = p
			}
			last = k
		}
		switch t.State {
		case store.StateQueued, store.StateResolving:
			q[c]++
			p.queued++
		case store.StateRunning:
			r[c]++
			p.running++
			p.streams += float64(t.conns())
			thr[[2]string{t.SrcEndpoint, className(t.Batch)}] += t.rate
			thr[[2]string{t.DstEndpoint, className(t.Batch)}] += t.rate
			if t.xfer != nil {
				m.moved(t, t.xfer.Progress().Done)
			}
		}
	}
	for c, name := range []string{store.ClassInteractive, store.ClassBatch} {
		m.queued.WithLabelValues(name).Set(q[c])
		m.running.WithLabelValues(name).Set(r[c])
	}
	for k := range pairs {
		m.pairs[k] = true
	}
	for k := range m.pairs {
		p = pairs[k]
		if p == nil {
			p = &pairCount{}
		}
		m.pairQueued.WithLabelValues(k[0], k[1]).Set(p.queued)
		m.pairRunning.WithLabelValues(k[0], k[1]).Set(p.running)
		m.pairStreams.WithLabelValues(k[0], k[1]).Set(p.streams)
	}
	for name, e := range w.eps {
		m.endpointCC.WithLabelValues(name).Set(float64(e.cc))
		for _, c := range []string{store.ClassInteractive, store.ClassBatch} {
			m.throughput.WithLabelValues(name, c).Set(thr[[2]string{name, c}])
		}
		kind, other := "agent", "storage"
		if e.Storage() {
			kind, other = other, kind
		}
		m.endpointUp.DeleteLabelValues(name, other)
		if e.removed {
			m.endpointUp.DeleteLabelValues(name, kind)
			m.heartbeat.DeleteLabelValues(name)
			continue
		}
		up := 0.0
		if e.Up {
			up = 1
		}
		m.endpointUp.WithLabelValues(name, kind).Set(up)
		if kind == "agent" && !e.heard.IsZero() {
			m.heartbeat.WithLabelValues(name).Set(float64(e.heard.UnixNano()) / 1e9)
		}
	}
}

// moved counts the bytes t's current run has written up to done (its
// progress): those past what was counted of the run so far, starting
// from where the run started. A run that starts its file over counts
// again only past the highest point it had reached.
func (m *metrics) moved(t *task, done int64) {
	if t.meterRun != t.run {
		t.meterRun, t.metered = t.run, t.runDone
	}
	if done > t.metered {
		m.pairBytes.WithLabelValues(t.SrcEndpoint, t.DstEndpoint).Add(float64(done - t.metered))
		t.metered = done
	}
}

// finished records a task that completed (its done state written).
func (m *metrics) finished(t *task) {
	m.pairs[[2]string{t.SrcEndpoint, t.DstEndpoint}] = true
	c := className(t.Batch)
	m.filesDone.WithLabelValues(c).Inc()
	m.bytesDone.WithLabelValues(c).Add(float64(t.Size))
	if t.Error != store.NoteInPlace {
		// What the last progress did not show: a pull batch's files
		// report none, and a small file ends between two looks.
		m.moved(t, t.Size)
	}
	if t.Trans > 0 {
		turnaround := t.Finished.Sub(t.Arrival)
		m.slowdown.WithLabelValues(c).Observe(turnaround.Seconds() / t.Trans)
	}
}

// taskFailed records a task of the loop that failed for reason (its
// failed state written).
func (m *metrics) taskFailed(t *task, reason string) {
	m.pairs[[2]string{t.SrcEndpoint, t.DstEndpoint}] = true
	m.failed(reason, 1)
}

// failed records n files that failed for reason (one of failReasons);
// safe outside the loop.
func (m *metrics) failed(reason string, n int) {
	m.filesFailed.WithLabelValues(reason).Add(float64(n))
}

// failReason is the reason (failReasons) of a file's failure with err.
func failReason(err error) string {
	switch {
	case err == nil:
		return reasonOther
	case errors.Is(err, engine.ErrDestinationExists), errors.Is(err, backend.ErrExist):
		return reasonExists
	case errors.Is(err, backend.ErrNotFound):
		return reasonNotFound
	case errors.Is(err, backend.ErrPermission):
		return reasonPermission
	case errors.Is(err, backend.ErrNoSpace):
		return reasonNoSpace
	case errors.Is(err, engine.ErrChecksum):
		return reasonChecksum
	case errors.Is(err, engine.ErrSourceChanged):
		return reasonSourceChanged
	case errors.Is(err, backend.ErrInvalid):
		return reasonInvalid
	case networkError(err):
		return reasonNetwork
	}
	return reasonOther
}

// networkError reports whether err is a connection that failed: refused,
// reset, cut short or timed out.
func networkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, io.ErrUnexpectedEOF)
}

// listedReason is the reason of a listed entry's failure from the error
// text its agent sent (backend.FileInfo.Err, the backend error's text:
// no error value crosses the network with a listing).
func listedReason(msg string) string {
	for _, k := range []struct {
		err    error
		reason string
	}{
		{backend.ErrPermission, reasonPermission},
		{backend.ErrNotFound, reasonNotFound},
		{backend.ErrInvalid, reasonInvalid},
	} {
		if strings.Contains(msg, k.err.Error()) {
			return k.reason
		}
	}
	return reasonOther
}
