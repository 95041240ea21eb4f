package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/monitoring"
)

// TestServiceMetrics: after a job with two good files and one whose
// source does not exist, a running server's /metrics counts the good
// files done and their bytes on their pair, the missing one failed with
// reason not_found, both agents up with recent heartbeats, and its store
// calls; and every metric, label and label value that the shipped alert
// rules and Grafana dashboard (package monitoring) select is there, so
// that neither watches a series the server does not export.
func TestServiceMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newCluster(t, 2)
	sizes := map[string]int64{"mon/big.dat": 24 << 20, "mon/small.dat": 64 << 10}
	var job api.JobIn
	var total int64
	for rel, size := range sizes {
		c.file("a1", rel, size, uint64(size))
		job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/" + rel, Destination: "sluice://a2/" + rel})
		total += size
	}
	job.Files = append(job.Files, api.FileIn{Source: "sluice://a1/mon/missing.dat", Destination: "sluice://a2/mon/missing.dat"})
	ctx := context.Background()
	j, _, err := c.admin.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	j = c.waitJob(c.admin, j.ID, 2*time.Minute)
	if j.FilesDone != 2 || j.FilesFailed != 1 {
		t.Fatalf("job ended %s with %d done and %d failed, want 2 and 1", j.State, j.FilesDone, j.FilesFailed)
	}

	// The gauges are the loop's view at its last tick (every --cycle):
	// the first scrapes may still show the job's files waiting.
	var mfs map[string]*dto.MetricFamily
	pair := map[string]string{"source": "a1", "destination": "a2"}
	settled := func() bool {
		for _, g := range []string{"sluice_pair_tasks_queued", "sluice_pair_tasks_running", "sluice_pair_streams"} {
			if v, ok := gauge(mfs, g, pair); !ok || v != 0 {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if mfs = scrape(t, "http://"+c.addr+"/metrics"); settled() || time.Now().After(deadline) {
			break
		}
	}
	for _, g := range []string{"sluice_pair_tasks_queued", "sluice_pair_tasks_running", "sluice_pair_streams"} {
		if v, ok := gauge(mfs, g, pair); !ok || v != 0 {
			t.Errorf("%s{a1->a2} = %v (exported: %v), want 0 once the job ended", g, v, ok)
		}
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		for _, m := range mfs[name].GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue(), true
				case m.Gauge != nil:
					return m.Gauge.GetValue(), true
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount()), true
				}
			}
		}
		return 0, false
	}
	sum := func(name string) (s float64) {
		for _, m := range mfs[name].GetMetric() {
			s += m.GetCounter().GetValue()
		}
		return s
	}
	for _, reason := range []string{"not_found", "permission", "no_space", "exists", "checksum",
		"source_changed", "invalid", "endpoint_down", "network", "other"} {
		want := 0.0
		if reason == "not_found" {
			want = 1
		}
		if v, ok := value("sluice_files_failed_total", map[string]string{"reason": reason}); !ok || v != want {
			t.Errorf("sluice_files_failed_total{reason=%q} = %v (exported: %v), want %v", reason, v, ok, want)
		}
	}
	if v := sum("sluice_files_done_total"); v != 2 {
		t.Errorf("sluice_files_done_total sums to %v, want 2", v)
	}
	// Every byte of the two files is counted on their pair: exactly once
	// when no run was retried (a retried run counts again what it
	// writes again).
	moved, _ := value("sluice_pair_bytes_total", pair)
	if retries := sum("sluice_transfer_retries_total"); retries == 0 && moved != float64(total) || moved < float64(total) {
		t.Errorf("sluice_pair_bytes_total{a1->a2} = %v after %v retries, want %d", moved, retries, total)
	}
	for _, ep := range []string{"a1", "a2"} {
		if v, ok := value("sluice_endpoint_up", map[string]string{"endpoint": ep, "kind": "agent"}); !ok || v != 1 {
			t.Errorf("sluice_endpoint_up{endpoint=%q,kind=agent} = %v (exported: %v), want 1", ep, v, ok)
		}
		beat, _ := value("sluice_endpoint_last_heartbeat_timestamp_seconds", map[string]string{"endpoint": ep})
		if age := time.Since(time.Unix(int64(beat), 0)); age < -time.Minute || age > time.Minute {
			t.Errorf("%s's last heartbeat %v ago, want within the last seconds", ep, age.Round(time.Second))
		}
	}
	if n, _ := value("sluice_store_operation_seconds", map[string]string{"operation": "UpdateTasksFenced"}); n == 0 {
		t.Error("no UpdateTasksFenced store call (the loop's writes of task states) observed in sluice_store_operation_seconds")
	}

	qs, err := monitoring.Queries()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, q := range qs {
		sels, err := monitoring.Selectors(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
			continue
		}
		for _, s := range sels {
			checked++
			if s.Metric == "up" {
				continue // Prometheus's own, for each target it scrapes
			}
			series, ok := exported(mfs, s.Metric)
			if !ok {
				t.Errorf("%s uses %s, which the server does not export", q.Where, s.Metric)
				continue
			}
			for _, m := range s.Matchers {
				if m.Name == "job" || m.Name == "instance" {
					continue // the target's labels, which Prometheus adds
				}
				// An exact value must be one the server exports (every
				// failure reason's series exists from the start); a
				// regular expression's label must be there.
				if !labelValue(series, m.Name, m.Value, m.Op == "=") {
					t.Errorf("%s: %s{%s%s%q}: no series of %s matches", q.Where, s.Metric, m.Name, m.Op, m.Value, s.Metric)
				}
			}
		}
	}
	t.Logf("%d metric selectors of %d queries found in the scrape", checked, len(qs))
}

// scrape reads a server's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return mfs
}

// exported returns the series of the metric a query names: a family's
// own name, or for a histogram (summary) its _bucket (quantile), _sum
// and _count series, which are all a query can select of it.
func exported(mfs map[string]*dto.MetricFamily, name string) ([]*dto.Metric, bool) {
	if mf, ok := mfs[name]; ok && mf.GetType() != dto.MetricType_HISTOGRAM {
		return mf.GetMetric(), true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if mf, ok := mfs[base]; ok && (mf.GetType() == dto.MetricType_HISTOGRAM || suffix != "_bucket" && mf.GetType() == dto.MetricType_SUMMARY) {
			return mf.GetMetric(), true
		}
	}
	return nil, false
}

// labelValue reports whether some series has the label (with value, if
// exact).
func labelValue(series []*dto.Metric, name, value string, exact bool) bool {
	for _, m := range series {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && (!exact || l.GetValue() == value) {
				return true
			}
		}
	}
	return false
}

// gauge is the value of the gauge name's series with labels.
func gauge(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if m.Gauge != nil && hasLabels(m, labels) {
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
