package wan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Status is a running network: its hosts, links and the forwarder's
// counters.
type Status struct {
	Profile string `json:"profile"`
	Prefix  string `json:"prefix"`
	PID     int    `json:"pid"`
	// UptimeSeconds since the forwarder started; CPUSeconds is the user
	// plus system time of its process (in-process: of the whole process).
	UptimeSeconds float64      `json:"uptime_seconds"`
	CPUSeconds    float64      `json:"cpu_seconds"`
	Hosts         []HostStatus `json:"hosts"`
	Links         []LinkStatus `json:"links"`
}

// HostStatus is one host.
type HostStatus struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Addr      string `json:"addr"`
	MTU       int    `json:"mtu"`
	CC        string `json:"cc,omitempty"`
	RmemMax   int    `json:"rmem_max,omitempty"`
	WmemMax   int    `json:"wmem_max,omitempty"`
	NIC       NIC    `json:"nic"`
	// Reads and ReadBytes are what the forwarder took from the host's
	// TUN; Unroutable what it had no link for.
	Reads      uint64 `json:"reads"`
	ReadBytes  uint64 `json:"read_bytes"`
	Unroutable uint64 `json:"unroutable"`
	// TUNTxDropped counts packets the kernel dropped because the
	// forwarder did not read them in time (the device's transmit queue
	// was full): loss the profile does not ask for. It should stay 0.
	TUNTxDropped  uint64 `json:"tun_tx_dropped"`
	TUNTxQueueLen int    `json:"tun_txqueuelen"`
}

// LinkStatus is one direction of a link.
type LinkStatus struct {
	Name string `json:"name"`
	Path Path   `json:"path"`
	// RateMbps is the rate now (the series' current step, if any);
	// SeriesSeconds how far into its series the link is.
	RateMbps      float64 `json:"rate_mbps"`
	SeriesSeconds float64 `json:"series_seconds,omitempty"`
	LinkCounters
}

// Update changes parameters of a running network; nil fields stay. For a
// link: RateMbps (clears a series), Series (restarts from its first step
// now), QueueBytes, DelayMs, JitterMs, Loss, GE (P and R zero: off). For a
// host's NIC: EgressMbps, IngressMbps and their queues. (A host's TCP
// settings are sysctls: change them with Net.Exec(host, "sysctl", ...).)
type Update struct {
	RateMbps     *float64        `json:"rate_mbps,omitempty"`
	Series       []Step          `json:"series,omitempty"`
	QueueBytes   *int            `json:"queue_bytes,omitempty"`
	DelayMs      *float64        `json:"delay_ms,omitempty"`
	JitterMs     *float64        `json:"jitter_ms,omitempty"`
	Loss         *float64        `json:"loss,omitempty"`
	GE           *GilbertElliott `json:"ge,omitempty"`
	EgressMbps   *float64        `json:"egress_mbps,omitempty"`
	IngressMbps  *float64        `json:"ingress_mbps,omitempty"`
	EgressQueue  *int            `json:"egress_queue_bytes,omitempty"`
	IngressQueue *int            `json:"ingress_queue_bytes,omitempty"`
}

func (f *forwarder) status(ctx context.Context, st *state) *Status {
	s := &Status{Profile: st.Profile.Name, Prefix: st.Prefix, PID: os.Getpid(),
		UptimeSeconds: f.clock.Now().Sub(f.start).Seconds(), CPUSeconds: cpuSeconds()}
	now := f.now()
	for i, h := range st.Profile.Hosts {
		fh := f.hosts[i]
		hs := HostStatus{Name: h.Name, Namespace: st.ns(h.Name), Addr: Addr(i).String(), MTU: h.MTU, CC: h.CC,
			RmemMax: h.RmemMax, WmemMax: h.WmemMax, NIC: *fh.nic.Load(),
			Reads: fh.reads.Load(), ReadBytes: fh.readBytes.Load(), Unroutable: fh.unroutable.Load()}
		if hs.MTU == 0 {
			hs.MTU = 1500
		}
		if ts, err := readTunStats(ctx, st.ns(h.Name)); err == nil {
			hs.TUNTxDropped, hs.TUNTxQueueLen = ts.TxDropped, ts.TxQueueLen
		}
		s.Hosts = append(s.Hosts, hs)
	}
	for _, l := range f.order {
		ps := l.params.Load()
		ls := LinkStatus{Name: l.name, Path: ps.Path, RateMbps: ps.RateAt(float64(now-ps.seriesStart) / 1e9), LinkCounters: l.counters.snapshot()}
		if len(ps.Series) > 0 {
			ls.SeriesSeconds = float64(now-ps.seriesStart) / 1e9
		}
		s.Links = append(s.Links, ls)
	}
	return s
}

func cpuSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// set applies u to target: "a>b", "a-b" or a host name.
func (f *forwarder) set(target string, u Update) error {
	hostIdx := func(name string) int {
		for i, h := range f.hosts {
			if h.name == name {
				return i
			}
		}
		return -1
	}
	pathFields := u.RateMbps != nil || u.Series != nil || u.QueueBytes != nil || u.DelayMs != nil || u.JitterMs != nil || u.Loss != nil || u.GE != nil
	hostFields := u.EgressMbps != nil || u.IngressMbps != nil || u.EgressQueue != nil || u.IngressQueue != nil
	if !pathFields && !hostFields {
		return errors.New("wan: set: nothing to change")
	}
	var links []*link
	if a, b, ok := strings.Cut(target, ">"); ok {
		i, j := hostIdx(a), hostIdx(b)
		if i < 0 || j < 0 || f.links[i][j] == nil {
			return fmt.Errorf("wan: set: no link %s", target)
		}
		links = append(links, f.links[i][j])
	} else if a, b, ok := strings.Cut(target, "-"); ok {
		i, j := hostIdx(a), hostIdx(b)
		if i < 0 || j < 0 || f.links[i][j] == nil || f.links[j][i] == nil {
			return fmt.Errorf("wan: set: no link %s in both directions", target)
		}
		links = append(links, f.links[i][j], f.links[j][i])
	} else {
		i := hostIdx(target)
		if i < 0 {
			return fmt.Errorf("wan: set: no host or link %q (links are A>B or A-B)", target)
		}
		if pathFields {
			return fmt.Errorf("wan: set: %s is a host: only the NIC's egress_mbps, ingress_mbps and queues apply", target)
		}
		nic := *f.hosts[i].nic.Load()
		if u.EgressMbps != nil {
			nic.EgressMbps = *u.EgressMbps
		}
		if u.IngressMbps != nil {
			nic.IngressMbps = *u.IngressMbps
		}
		if u.EgressQueue != nil {
			nic.EgressQueueBytes = *u.EgressQueue
		}
		if u.IngressQueue != nil {
			nic.IngressQueueBytes = *u.IngressQueue
		}
		if err := nic.validate(); err != nil {
			return fmt.Errorf("wan: set %s: %w", target, err)
		}
		f.hosts[i].nic.Store(&nic)
		return nil
	}
	if hostFields {
		return fmt.Errorf("wan: set: %s is a link: NIC settings apply to hosts", target)
	}
	now := f.now()
	next := make([]*pathState, len(links))
	for k, l := range links {
		ps := *l.params.Load()
		if u.RateMbps != nil {
			ps.RateMbps, ps.Series = *u.RateMbps, nil
		}
		if u.Series != nil {
			ps.Series, ps.seriesStart = u.Series, now
		}
		if u.QueueBytes != nil {
			ps.QueueBytes = *u.QueueBytes
		}
		if u.DelayMs != nil {
			ps.DelayMs = *u.DelayMs
		}
		if u.JitterMs != nil {
			ps.JitterMs = *u.JitterMs
		}
		if u.Loss != nil {
			ps.Loss = *u.Loss
		}
		if u.GE != nil {
			ps.GE = u.GE
			if u.GE.P == 0 && u.GE.R == 0 {
				ps.GE = nil
			}
		}
		if err := ps.Path.validate(); err != nil {
			return fmt.Errorf("wan: set %s: %w", target, err)
		}
		next[k] = &ps
	}
	for k, l := range links {
		l.params.Store(next[k])
	}
	return nil
}
