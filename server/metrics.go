package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dtn/sluice/store"
)

// metrics are the service's Prometheus metrics (served at /metrics).
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
}

func newMetrics(r *prometheus.Registry) *metrics {
	m := &metrics{
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tasks_queued",
			Help: "Tasks waiting for the scheduler, by class."}, []string{"class"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_tasks_running",
			Help: "Tasks running, by class."}, []string{"class"}),
		throughput: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_throughput_bytes_per_second",
			Help: "Observed aggregate throughput at each endpoint, by class."}, []string{"endpoint", "class"}),
		endpointCC: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_endpoint_concurrency",
			Help: "Concurrent partial transfers the scheduler runs at each endpoint."}, []string{"endpoint"}),
		slowdown: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_task_slowdown",
			Help:    "Slowdown (turnaround over transfer time) of finished tasks, by class.",
			Buckets: []float64{1, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100}}, []string{"class"}),
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_scheduler_cycle_seconds",
			Help:    "Time one scheduling cycle takes.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_preemptions_total",
			Help: "Tasks preempted by the scheduler."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_transfer_retries_total",
			Help: "Runs that ended in a transient error and were re-queued."}),
		jobsSubmitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_jobs_submitted_total",
			Help: "Jobs accepted."}),
		filesDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_files_done_total",
			Help: "Files transferred and verified, by class."}, []string{"class"}),
		bytesDone: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_bytes_done_total",
			Help: "Bytes of files transferred and verified, by class."}, []string{"class"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pull_batches_total",
			Help: "Pull batches of small files sent to destination agents."}),
		batchFiles: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_pull_batch_files_total",
			Help: "Files sent in pull batches (over sluice_pull_batches_total: the mean pipelining depth)."}),
	}
	r.MustRegister(m.queued, m.running, m.throughput, m.endpointCC, m.slowdown, m.cycleSeconds,
		m.preemptions, m.retries, m.jobsSubmitted, m.filesDone, m.bytesDone, m.batches, m.batchFiles)
	return m
}

func className(batch bool) string {
	if batch {
		return store.ClassBatch
	}
	return store.ClassInteractive
}

// observe refreshes the gauges from the loop's state.
func (m *metrics) observe(w *world) {
	var q, r [2]float64
	thr := map[[2]string]float64{}
	for t := range w.tasks.all() {
		c := 0
		if t.Batch {
			c = 1
		}
		switch t.State {
		case store.StateQueued, store.StateResolving:
			q[c]++
		case store.StateRunning:
			r[c]++
			thr[[2]string{t.SrcEndpoint, className(t.Batch)}] += t.rate
			thr[[2]string{t.DstEndpoint, className(t.Batch)}] += t.rate
		}
	}
	for c, name := range []string{store.ClassInteractive, store.ClassBatch} {
		m.queued.WithLabelValues(name).Set(q[c])
		m.running.WithLabelValues(name).Set(r[c])
	}
	for name, e := range w.eps {
		m.endpointCC.WithLabelValues(name).Set(float64(e.cc))
		for _, c := range []string{store.ClassInteractive, store.ClassBatch} {
			m.throughput.WithLabelValues(name, c).Set(thr[[2]string{name, c}])
		}
	}
}

// finished records a task that completed.
func (m *metrics) finished(t *task) {
	c := className(t.Batch)
	m.filesDone.WithLabelValues(c).Inc()
	m.bytesDone.WithLabelValues(c).Add(float64(t.Size))
	if t.Trans > 0 {
		turnaround := t.Finished.Sub(t.Arrival)
		m.slowdown.WithLabelValues(c).Observe(turnaround.Seconds() / t.Trans)
	}
}
