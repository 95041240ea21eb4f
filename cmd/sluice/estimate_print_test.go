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
