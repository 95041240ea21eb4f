package wan

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed profiles/*.json
var builtin embed.FS

// Profile is an emulated network: hosts and the links between them.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Hosts in address order: the i-th host gets 198.18.0.(i+1).
	Hosts []Host `json:"hosts"`
	// Links join pairs of hosts. A pair without a link (in either
	// direction) cannot exchange packets.
	Links []LinkSpec `json:"links"`
}

// Host is one network namespace: a DTN, an endpoint or a client.
type Host struct {
	Name string `json:"name"`
	// MTU of the host's wan0 device; 0 means 1500.
	MTU int `json:"mtu,omitempty"`
	// CC is the TCP congestion control (cubic, reno, bbr); "" keeps the
	// kernel's default.
	CC string `json:"cc,omitempty"`
	// RmemMax and WmemMax are the maxima of net.ipv4.tcp_rmem and
	// tcp_wmem in bytes (what autotuning may grow a socket's buffers to);
	// 0 keeps the namespace's default.
	RmemMax int `json:"rmem_max,omitempty"`
	WmemMax int `json:"wmem_max,omitempty"`
	// NIC is the host's network interface: its egress and ingress
	// capacity, shared by all its flows.
	NIC NIC `json:"nic,omitempty"`
}

// NIC is a host's interface capacity, Mbit/s (0: unlimited) and its
// queues, bytes (0: 8 MB).
type NIC struct {
	EgressMbps        float64 `json:"egress_mbps,omitempty"`
	IngressMbps       float64 `json:"ingress_mbps,omitempty"`
	EgressQueueBytes  int     `json:"egress_queue_bytes,omitempty"`
	IngressQueueBytes int     `json:"ingress_queue_bytes,omitempty"`
}

// LinkSpec is the path between two hosts: Hosts names both ends (the
// parameters apply to both directions) or From and To one direction (an
// asymmetric path is two such specs).
type LinkSpec struct {
	Hosts []string `json:"hosts,omitempty"`
	From  string   `json:"from,omitempty"`
	To    string   `json:"to,omitempty"`
	Path
}

// Path is one direction of a link.
type Path struct {
	// RateMbps is the bottleneck rate; 0 means unlimited.
	RateMbps float64 `json:"rate_mbps,omitempty"`
	// Series, if set, replaces RateMbps over time: from Series[i].At
	// seconds after the forwarder started (or after the series was last
	// set) the rate is Series[i].Mbps. SeriesFile names a file of
	// "seconds Mbit/s" lines to read it from (relative to the profile).
	Series     []Step `json:"series,omitempty"`
	SeriesFile string `json:"series_file,omitempty"`
	// QueueBytes is the drop-tail queue in front of the rate; 0 means one
	// bandwidth-delay product (RateMbps x 2 DelayMs), at least 256 KB.
	QueueBytes int `json:"queue_bytes,omitempty"`
	// DelayMs is the one-way delay; JitterMs adds a uniform random
	// extra delay in [0, JitterMs] that never reorders packets.
	DelayMs  float64 `json:"delay_ms,omitempty"`
	JitterMs float64 `json:"jitter_ms,omitempty"`
	// Loss is the probability that a packet (a segment) is lost at random.
	Loss float64 `json:"loss,omitempty"`
	// GE is a bursty (Gilbert-Elliott) loss model on top of Loss.
	GE *GilbertElliott `json:"ge,omitempty"`
}

// GilbertElliott is a two-state loss model: in the good state a segment is
// lost with probability LossGood, in the bad state with LossBad (1 if 0);
// after each segment the state flips good to bad with probability P and
// bad to good with probability R. The mean loss rate is
// (R·LossGood + P·LossBad)/(P+R) and the mean burst length 1/R.
type GilbertElliott struct {
	P        float64 `json:"p"`
	R        float64 `json:"r"`
	LossGood float64 `json:"loss_good,omitempty"`
	LossBad  float64 `json:"loss_bad,omitempty"`
}

// MeanLoss is the model's long-run loss rate.
func (g GilbertElliott) MeanLoss() float64 {
	if g.P+g.R == 0 {
		return g.LossGood
	}
	bad := g.LossBad
	if bad == 0 {
		bad = 1
	}
	return (g.R*g.LossGood + g.P*bad) / (g.P + g.R)
}

// Step is one point of a bandwidth time series.
type Step struct {
	At   float64 `json:"at"`
	Mbps float64 `json:"mbps"`
}

// RateAt is the path's rate t seconds into its series (RateMbps without
// one): the last step at or before t, the first step's rate before it.
func (p Path) RateAt(t float64) float64 {
	if len(p.Series) == 0 {
		return p.RateMbps
	}
	i := sort.Search(len(p.Series), func(i int) bool { return p.Series[i].At > t })
	if i == 0 {
		return p.Series[0].Mbps
	}
	return p.Series[i-1].Mbps
}

// Queue is the path's drop-tail queue in bytes, QueueBytes or its default.
func (p Path) Queue() int {
	if p.QueueBytes > 0 {
		return p.QueueBytes
	}
	rate := p.RateMbps
	for _, s := range p.Series {
		rate = math.Max(rate, s.Mbps)
	}
	bdp := int(rate * 1e6 / 8 * 2 * p.DelayMs / 1e3)
	return max(bdp, 256<<10)
}

const defaultNICQueue = 8 << 20

// MaxHosts bounds a profile: addresses are 198.18.0.1 upwards.
const MaxHosts = 200

var hostName = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)

// Addr is the address of the i-th host.
func Addr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}) }

// HostIndex is the position of the named host, -1 if there is none.
func (p *Profile) HostIndex(name string) int {
	for i, h := range p.Hosts {
		if h.Name == name {
			return i
		}
	}
	return -1
}

// Validate reports the first thing wrong with p.
func (p *Profile) Validate() error {
	if p.Name == "" {
		return errors.New("wan: profile has no name")
	}
	if len(p.Hosts) < 2 || len(p.Hosts) > MaxHosts {
		return fmt.Errorf("wan: profile %s has %d hosts, want 2 to %d", p.Name, len(p.Hosts), MaxHosts)
	}
	seen := map[string]bool{}
	for _, h := range p.Hosts {
		if !hostName.MatchString(h.Name) {
			return fmt.Errorf("wan: host name %q: want a lower-case letter, then up to 15 letters or digits", h.Name)
		}
		if seen[h.Name] {
			return fmt.Errorf("wan: host %s named twice", h.Name)
		}
		seen[h.Name] = true
		if h.MTU != 0 && (h.MTU < 576 || h.MTU > 65000) {
			return fmt.Errorf("wan: host %s: mtu %d, want 576 to 65000", h.Name, h.MTU)
		}
		switch h.CC {
		case "", "cubic", "reno", "bbr":
		default:
			return fmt.Errorf("wan: host %s: congestion control %q, want cubic, reno or bbr", h.Name, h.CC)
		}
		if h.RmemMax < 0 || h.WmemMax < 0 || (h.RmemMax > 0 && h.RmemMax < 4096) || (h.WmemMax > 0 && h.WmemMax < 4096) {
			return fmt.Errorf("wan: host %s: rmem_max/wmem_max must be 0 or at least 4096", h.Name)
		}
		if err := h.NIC.validate(); err != nil {
			return fmt.Errorf("wan: host %s: %w", h.Name, err)
		}
	}
	dirs := map[[2]int]bool{}
	for i, l := range p.Links {
		pairs, err := p.directions(l)
		if err != nil {
			return fmt.Errorf("wan: link %d: %w", i+1, err)
		}
		for _, d := range pairs {
			if dirs[d] {
				return fmt.Errorf("wan: link %s>%s given twice", p.Hosts[d[0]].Name, p.Hosts[d[1]].Name)
			}
			dirs[d] = true
		}
		if err := l.Path.validate(); err != nil {
			return fmt.Errorf("wan: link %d: %w", i+1, err)
		}
	}
	if len(dirs) == 0 {
		return fmt.Errorf("wan: profile %s has no links", p.Name)
	}
	return nil
}

func (n NIC) validate() error {
	for _, v := range []float64{n.EgressMbps, n.IngressMbps} {
		if !finite(v) || v < 0 {
			return fmt.Errorf("nic rate %v, want a finite number >= 0", v)
		}
	}
	if n.EgressQueueBytes < 0 || n.IngressQueueBytes < 0 {
		return errors.New("nic queue bytes must be >= 0")
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (p Path) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"rate_mbps", p.RateMbps}, {"delay_ms", p.DelayMs}, {"jitter_ms", p.JitterMs}} {
		if !finite(f.v) || f.v < 0 {
			return fmt.Errorf("%s is %v, want a finite number >= 0", f.name, f.v)
		}
	}
	if p.DelayMs > 10000 || p.JitterMs > 10000 {
		return errors.New("delay_ms and jitter_ms must be at most 10000")
	}
	if p.QueueBytes < 0 {
		return fmt.Errorf("queue_bytes is %d, want >= 0", p.QueueBytes)
	}
	if !(p.Loss >= 0 && p.Loss <= 1) {
		return fmt.Errorf("loss is %v, want 0 to 1", p.Loss)
	}
	if g := p.GE; g != nil {
		for _, v := range []float64{g.P, g.R, g.LossGood, g.LossBad} {
			if !(v >= 0 && v <= 1) {
				return fmt.Errorf("ge: probabilities must be 0 to 1, got %v", v)
			}
		}
	}
	if p.SeriesFile != "" && len(p.Series) > 0 {
		return errors.New("give series or series_file, not both")
	}
	for i, s := range p.Series {
		if !finite(s.At) || !finite(s.Mbps) || s.At < 0 || s.Mbps < 0 {
			return fmt.Errorf("series step %d: at and mbps must be finite and >= 0", i+1)
		}
		if i > 0 && s.At <= p.Series[i-1].At {
			return fmt.Errorf("series step %d: times must increase", i+1)
		}
	}
	return nil
}

// directions are the (from, to) host indexes a link spec covers.
func (p *Profile) directions(l LinkSpec) ([][2]int, error) {
	switch {
	case len(l.Hosts) == 2 && l.From == "" && l.To == "":
		a, b := p.HostIndex(l.Hosts[0]), p.HostIndex(l.Hosts[1])
		if a < 0 || b < 0 || a == b {
			return nil, fmt.Errorf("hosts %v: want two different hosts of the profile", l.Hosts)
		}
		return [][2]int{{a, b}, {b, a}}, nil
	case len(l.Hosts) == 0 && l.From != "" && l.To != "":
		a, b := p.HostIndex(l.From), p.HostIndex(l.To)
		if a < 0 || b < 0 || a == b {
			return nil, fmt.Errorf("from %q to %q: want two different hosts of the profile", l.From, l.To)
		}
		return [][2]int{{a, b}}, nil
	}
	return nil, errors.New(`name both ends with "hosts": [A, B] or one direction with "from" and "to"`)
}

// Paths is every direction of every link, by (from, to) host index.
func (p *Profile) Paths() map[[2]int]Path {
	out := map[[2]int]Path{}
	for _, l := range p.Links {
		ds, _ := p.directions(l)
		for _, d := range ds {
			out[d] = l.Path
		}
	}
	return out
}

// ParseProfile reads a profile from JSON; dir resolves series_file names.
func ParseProfile(data []byte, dir string) (*Profile, error) {
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("wan: parse profile: %w", err)
	}
	for i := range p.Links {
		l := &p.Links[i]
		if l.SeriesFile == "" {
			continue
		}
		f := l.SeriesFile
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		s, err := ReadSeries(f)
		if err != nil {
			return nil, err
		}
		if len(l.Series) > 0 {
			return nil, fmt.Errorf("wan: link %d: give series or series_file, not both", i+1)
		}
		l.Series, l.SeriesFile = s, ""
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// LoadProfile is a shipped profile by name (Profiles lists them) or a
// profile file.
func LoadProfile(nameOrFile string) (*Profile, error) {
	if data, err := builtin.ReadFile("profiles/" + nameOrFile + ".json"); err == nil && !strings.ContainsAny(nameOrFile, "/.") {
		return ParseProfile(data, ".")
	}
	data, err := os.ReadFile(nameOrFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(nameOrFile, "/.") {
			return nil, fmt.Errorf("wan: no profile %q (shipped: %s)", nameOrFile, strings.Join(Profiles(), ", "))
		}
		return nil, fmt.Errorf("wan: read profile: %w", err)
	}
	return ParseProfile(data, filepath.Dir(nameOrFile))
}

// Profiles are the names of the shipped profiles.
func Profiles() []string {
	ents, _ := builtin.ReadDir("profiles")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

// ReadSeries reads a bandwidth time series: one "seconds Mbit/s" pair per
// line, blank lines and lines starting with # ignored, times increasing.
func ReadSeries(file string) ([]Step, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("wan: series: %w", err)
	}
	defer f.Close()
	var out []Step
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(strings.ReplaceAll(line, ",", " "))
		if len(fs) != 2 {
			return nil, fmt.Errorf("wan: series %s line %d: want \"seconds mbit/s\"", file, n)
		}
		t, err1 := strconv.ParseFloat(fs[0], 64)
		r, err2 := strconv.ParseFloat(fs[1], 64)
		if err1 != nil || err2 != nil || !finite(t) || !finite(r) || t < 0 || r < 0 {
			return nil, fmt.Errorf("wan: series %s line %d: want two numbers >= 0", file, n)
		}
		if len(out) > 0 && t <= out[len(out)-1].At {
			return nil, fmt.Errorf("wan: series %s line %d: times must increase", file, n)
		}
		out = append(out, Step{At: t, Mbps: r})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wan: series %s: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("wan: series %s has no steps", file)
	}
	return out, nil
}
