package emul

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
)

// Config is one endpoint's emulated behaviour, as JSON in testbed
// profiles (sluice agent --emulate FILE).
type Config struct {
	// CapacityBps is the endpoint's aggregate maximum throughput in
	// bytes/s, shared by all its streams; 0 means unlimited.
	CapacityBps float64 `json:"capacity_bps"`
	// ConnBps caps each stream (one TCP connection's window/RTT limit on
	// a WAN path), bytes/s; 0 means no cap.
	ConnBps float64 `json:"conn_bps,omitempty"`
	// Knee is the number of open streams beyond which the aggregate
	// declines; Decline is how fast (see the package doc). Zero Knee
	// means no decline.
	Knee    int     `json:"knee,omitempty"`
	Decline float64 `json:"decline,omitempty"`
	// External is outside traffic: a step series, sorted by At.
	External []Step `json:"external,omitempty"`
	// StartupMs is the delay, in milliseconds, before a newly accepted
	// connection is read from (Shaper.Listener).
	StartupMs float64 `json:"startup_ms,omitempty"`
	// RTTMs is the path's round-trip time in milliseconds: every request
	// waits this long before it is answered (Shaper.WaitRTT), as a
	// request and its response each cross a WAN once. It is what makes
	// pipelining pay: a batch of k files waits once, k requests k times.
	RTTMs float64 `json:"rtt_ms,omitempty"`
}

// Step says that from At seconds after the Shaper started, outside
// traffic takes Fraction of the endpoint's capacity.
type Step struct {
	At       float64 `json:"at"`
	Fraction float64 `json:"fraction"`
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"capacity_bps", c.CapacityBps}, {"conn_bps", c.ConnBps}, {"decline", c.Decline}, {"startup_ms", c.StartupMs}, {"rtt_ms", c.RTTMs}} {
		if !finite(f.v) || f.v < 0 {
			return fmt.Errorf("emul: %s is %v, want a finite number >= 0", f.name, f.v)
		}
	}
	if c.Knee < 0 {
		return fmt.Errorf("emul: knee is %d, want >= 0", c.Knee)
	}
	// The decline and outside traffic scale the capacity: without one they
	// would do nothing, which is surely not what the profile meant.
	if c.CapacityBps == 0 && (c.Knee > 0 || c.Decline > 0 || len(c.External) > 0) {
		return errors.New("emul: knee, decline and external scale capacity_bps, which is 0 (unlimited)")
	}
	for i, s := range c.External {
		if !finite(s.At) || s.At < 0 {
			return fmt.Errorf("emul: external[%d].at is %v, want seconds >= 0", i, s.At)
		}
		if !(s.Fraction >= 0 && s.Fraction < 1) {
			return fmt.Errorf("emul: external[%d].fraction is %v, want [0,1)", i, s.Fraction)
		}
		if i > 0 && s.At < c.External[i-1].At {
			return fmt.Errorf("emul: external[%d] (at %v) is before external[%d] (at %v): steps must be sorted by time", i, s.At, i-1, c.External[i-1].At)
		}
	}
	return nil
}

// Load reads a Config from a JSON file, refusing unknown fields (a
// misspelt limit would otherwise be silently off), and validates it.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("emul: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("emul: %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return &c, nil
}

// Capacity is the aggregate rate A(n, at) in bytes/s with n open streams
// at seconds since the Shaper started (+Inf when CapacityBps is 0).
func (c Config) Capacity(n int, at float64) float64 {
	if c.CapacityBps <= 0 {
		return math.Inf(1)
	}
	return c.capacity(n, c.externalAt(at))
}

// Throughput is what n equal, busy streams move together at time at:
// the aggregate or the sum of their own caps, whichever is less (0 for
// n <= 0; +Inf if nothing limits them).
func (c Config) Throughput(n int, at float64) float64 {
	if n <= 0 {
		return 0
	}
	t := c.Capacity(n, at)
	if c.ConnBps > 0 {
		t = math.Min(t, float64(n)*c.ConnBps)
	}
	return t
}

// capacity is A with the outside fraction given (CapacityBps > 0).
func (c Config) capacity(n int, frac float64) float64 {
	v := c.CapacityBps
	if c.Knee > 0 && n > c.Knee {
		v /= 1 + c.Decline*float64(n-c.Knee)/float64(c.Knee)
	}
	if frac > 0 {
		v *= 1 - frac
	}
	return v
}

// externalAt is the outside fraction in force at seconds at: the last step
// at or before it (steps are sorted; a long series, such as a varying
// bandwidth sampled every few hundred milliseconds for an hour, is searched,
// not scanned).
func (c Config) externalAt(at float64) float64 {
	i := sort.Search(len(c.External), func(i int) bool { return c.External[i].At > at })
	if i == 0 {
		return 0
	}
	return c.External[i-1].Fraction
}
