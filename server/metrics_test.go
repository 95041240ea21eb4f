package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dtn/sluice/backend"
	"github.com/sluice-dtn/sluice/backend/sluice"
	"github.com/sluice-dtn/sluice/engine"
	"github.com/sluice-dtn/sluice/store"
)

// TestFailReason: each kind of error a run or a stat ends with is counted
// under the reason an operator acts on, through the wrapping the engine,
// the backends and the agents' client add.
func TestFailReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("stat sluice://a1/x: %w", backend.ErrNotFound), reasonNotFound},
		{fmt.Errorf("agent a1: %w", sluice.ErrUnauthorized), reasonPermission},
		{fmt.Errorf("write: %w", backend.ErrPermission), reasonPermission},
		{fmt.Errorf("write: %w", backend.ErrNoSpace), reasonNoSpace},
		{fmt.Errorf("engine: %w: /d is there already; not replaced", engine.ErrDestinationExists), reasonExists},
		{fmt.Errorf("verify: %w", engine.ErrChecksum), reasonChecksum},
		{fmt.Errorf("read: %w", engine.ErrSourceChanged), reasonSourceChanged},
		{fmt.Errorf("%w: /x is a directory", backend.ErrInvalid), reasonInvalid},
		{&url.Error{Op: "Get", URL: "https://a1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, reasonNetwork},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), reasonNetwork},
		{fmt.Errorf("pull: %w", io.ErrUnexpectedEOF), reasonNetwork},
		{fmt.Errorf("stat: %w", context.DeadlineExceeded), reasonNetwork},
		{errors.New("agent a1: 500 Internal Server Error"), reasonOther},
	} {
		if got := failReason(tc.err); got != tc.want {
			t.Errorf("failReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestListedReason: a listing's entries carry their agent's error as
// text; the backend errors' texts in it give the reason.
func TestListedReason(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"open /data/run42/priv: permission denied", reasonPermission},
		{"lstat /data/run42/gone: not found", reasonNotFound},
		{"a symbolic link out of the root", reasonOther},
	} {
		if got := listedReason(tc.msg); got != tc.want {
			t.Errorf("listedReason(%q) = %s, want %s", tc.msg, got, tc.want)
		}
	}
}

// TestFailReasonsStartAtZero: every reason's counter exists from the
// start, so that an alert's rate sees a series's first failure.
func TestFailReasonsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.failed(reasonChecksum, 2)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_files_failed_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	for _, r := range failReasons {
		want := 0.0
		if r == reasonChecksum {
			want = 2
		}
		if v, ok := got[r]; !ok || v != want {
			t.Errorf("sluice_files_failed_total{reason=%q} = %v (exported: %v), want %v", r, v, ok, want)
		}
	}
	if len(got) != len(failReasons) {
		t.Errorf("%d failure series, want one per reason (%d)", len(got), len(failReasons))
	}
}

// TestTimedStore: each call through the timed store is observed under
// its operation, and only the store's failures count as errors, not the
// answers callers act on.
func TestTimedStore(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := newMetrics(prometheus.NewRegistry())
	ts := timedStore{s: st, met: m}
	if err := ts.PutSetting(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Setting(ctx, "absent"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Setting of an absent key: %v", err)
	}
	if _, err := ts.Setting(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := ts.PutSetting(ctx, "k", "w"); err == nil {
		t.Fatal("PutSetting on a closed store succeeded")
	}
	for _, tc := range []struct {
		op            string
		calls, errors int
	}{
		{"PutSetting", 2, 1},
		{"Setting", 2, 0},
	} {
		if n := histCount(t, m.storeSeconds, tc.op); n != tc.calls {
			t.Errorf("%s: %d calls observed, want %d", tc.op, n, tc.calls)
		}
		var d dto.Metric
		if err := m.storeErrors.WithLabelValues(tc.op).Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := d.GetCounter().GetValue(); int(n) != tc.errors {
			t.Errorf("%s: %v errors counted, want %d", tc.op, n, tc.errors)
		}
	}
}

// histCount is how many observations the histogram of vec under label
// has.
func histCount(t *testing.T, vec *prometheus.HistogramVec, label string) int {
	t.Helper()
	var d dto.Metric
	if err := vec.WithLabelValues(label).(prometheus.Metric).Write(&d); err != nil {
		t.Fatal(err)
	}
	return int(d.GetHistogram().GetSampleCount())
}
