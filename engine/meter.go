package engine

import "time"

// The rate is averaged over rateBuckets-1 full buckets plus the current one,
// i.e. about 5 s.
const (
	rateBucket  = 250 * time.Millisecond
	rateBuckets = 21
	rateWindow  = (rateBuckets - 1) * rateBucket
)

// meter is a moving average of bytes written over the last ~5 s. It is a
// fixed ring of per-quarter-second byte counts, so recording a sample (done
// at every sub-write) costs no allocation and the average does not depend
// on how often samples come.
type meter struct {
	start time.Time
	head  int64 // bucket number (since start) of the current bucket
	b     [rateBuckets]int64
}

func (m *meter) reset(now time.Time) { *m = meter{start: now} }

// advance moves the current bucket up to now, zeroing the ones skipped.
func (m *meter) advance(now time.Time) {
	idx := int64(now.Sub(m.start) / rateBucket)
	if idx <= m.head {
		return
	}
	if idx-m.head >= rateBuckets {
		m.b = [rateBuckets]int64{}
	} else {
		for h := m.head + 1; h <= idx; h++ {
			m.b[h%rateBuckets] = 0
		}
	}
	m.head = idx
}

func (m *meter) add(now time.Time, n int64) {
	if m.start.IsZero() {
		m.reset(now)
	}
	m.advance(now)
	m.b[m.head%rateBuckets] += n
}

// rate is bytes per second over the time the buckets cover (less than 5 s
// right after the start, so early readings are not diluted).
func (m *meter) rate(now time.Time) float64 {
	if m.start.IsZero() {
		return 0
	}
	m.advance(now)
	var sum int64
	for _, v := range m.b {
		sum += v
	}
	el := now.Sub(m.start)
	covered := rateWindow + el - time.Duration(m.head)*rateBucket
	if el < covered {
		covered = el
	}
	if covered < rateBucket {
		// Too short a time for a meaningful rate; avoid a huge first value.
		covered = rateBucket
	}
	return float64(sum) / covered.Seconds()
}
