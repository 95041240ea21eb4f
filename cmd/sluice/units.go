package main

import (
	"fmt"
	"math"
	"time"

	"github.com/dustin/go-humanize"
)

// Sizes and rates on one screen are in one system: decimal (SI) units,
// as network rates are given (MB/s, Gbit/s), so that "1.2 GB of 2.0 GB at
// 120 MB/s" adds up without converting.

// siBytes is n bytes in decimal units: "0 B", "830 kB", "2.0 GB".
func siBytes(n int64) string {
	if n < 0 {
		n = 0
	}
	return humanize.Bytes(uint64(n))
}

// siRate is a rate in bytes per second, in decimal units: "120 MB/s".
func siRate(bps float64) string {
	if !(bps > 0) || math.IsInf(bps, 0) {
		return "0 B/s"
	}
	return humanize.Bytes(uint64(bps)) + "/s"
}

// eta is how long the bytes left take at rate (bytes/s), as the API's
// eta_seconds counts it; 0 when that is not known (no rate, nothing left).
func eta(total, done int64, rate float64) time.Duration {
	left := total - done
	if left <= 0 || !(rate > 0) {
		return 0
	}
	s := float64(left) / rate
	if s > 100*24*3600 {
		s = 100 * 24 * 3600 // beyond that, "a very long time" is all it says
	}
	return time.Duration(s * float64(time.Second))
}

// etaText is an ETA for a person: "ETA 42s", "ETA 3m05s", "ETA 2h14m";
// "" when it is not known.
func etaText(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d <= 0:
		return ""
	case d < time.Minute:
		return fmt.Sprintf("ETA %ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("ETA %dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("ETA %dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}
