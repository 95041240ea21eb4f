package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dtn/sluice/api"
	"github.com/sluice-dtn/sluice/model/iperf3"
)

// TestPrintEstimateLongTime: a transfer predicted to take longer than a
// time.Duration holds (about 292 years: 1 PB at 100 kB/s) is printed as a
// long time, not as the negative duration the conversion wrapped to.
func TestPrintEstimateLongTime(t *testing.T) {
	for _, tt := range []struct {
		name    string
		seconds float64
		want    string
	}{
		{"an hour", 3600, "1h0m0s"},
		{"1 PB at 100 kB/s", 1e10, "317 years"},
		{"4 EiB at 1 B/s", 4.6e18, "years"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printEstimate(&b, api.EstimateOut{Source: "a", Destination: "b", Streams: 1, Throughput: 1, Seconds: tt.seconds, Size: 1})
			printIperf3Estimate(&b, iperf3.Result{Streams: 1, Throughput: 1, Seconds: tt.seconds, Size: 1})
			out := b.String()
			if strings.Count(out, tt.want) != 2 || strings.Contains(out, "B     -") {
				t.Errorf("time printed:\n%s\nwant %q in both answers and no negative time", out, tt.want)
			}
		})
	}
}

// TestPrintEstimateBound: the answer shows the fit's uncertainty, and a
// throughput clamped to what the samples support says so, with the
// fitted curve's value and why, for the service's answer and iperf3's.
func TestPrintEstimateBound(t *testing.T) {
	note := "the fitted curve gives n=2 60% more than the best sample (n=4), beyond the fit's uncertainty of ±5%: clamped"
	for _, tt := range []struct {
		name     string
		th, fit  float64
		unc      float64
		clamped  bool
		note     string
		want     []string
		wantNone []string
	}{
		{"clamped", 1.89e9, 2.9e9, 0.05, true, note,
			[]string{"throughput       1.9 GB/s (15.12 Gbit/s) ±5%", "clamped          the fitted curve said 2.9 GB/s", "note             " + note}, nil},
		{"the curve's own", 1.8e9, 1.8e9, 0.12, false, "",
			[]string{"1.8 GB/s (14.40 Gbit/s) ±12%"}, []string{"clamped", "note"}},
		{"stored before uncertainty was recorded", 1.8e9, 0, 0, false, "",
			[]string{"1.8 GB/s (14.40 Gbit/s)\n"}, []string{"±", "clamped", "note"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			printEstimate(&b, api.EstimateOut{Source: "a", Destination: "b", Streams: 2, Throughput: tt.th, Fitted: tt.fit, Uncertainty: tt.unc, Clamped: tt.clamped, Note: tt.note, Seconds: 1, Size: 1})
			printIperf3Estimate(&b, iperf3.Result{Streams: 2, Throughput: tt.th, Fitted: tt.fit, Uncertainty: tt.unc, Clamped: tt.clamped, Note: tt.note, Seconds: 1, Size: 1})
			out := b.String()
			for _, w := range tt.want {
				if strings.Count(out, w) != 2 {
					t.Errorf("%q not in both answers:\n%s", w, out)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(out, w) {
					t.Errorf("%q printed:\n%s", w, out)
				}
			}
		})
	}
}
