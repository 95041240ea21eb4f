package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/sluice-dtn/sluice/trace"
)

// A facility is a synthetic day of a large transfer service: thousands of
// endpoints of a few DTN classes and millions of transfers between them,
// generated lazily so that a day of 25 million transfers never exists in
// memory. It is what `sluice sim facility` replays with RunStream to
// measure how the simulator and the schedulers scale (docs/SCALING.md).
//
// The model, and why:
//
//   - Endpoints belong to DTN classes with nominal capacities 1, 10, 40
//     and 100 Gb/s (FacilityClasses: the network interfaces DTNs are
//     built with) in fixed shares, assigned to endpoints in a seeded
//     order. Their administrators' limits (max_cc) and contention knees
//     grow with the class.
//   - Transfers arrive as a Poisson process: exactly Transfers of them,
//     uniformly ordered over Hours (the spacings of a Poisson process
//     normalised to the day).
//   - Sizes follow the SC'15 generator's law (trace.SizeLaw of the 45%
//     trace by default): Table 2's class mix, log-uniform within a class,
//     the large classes scaled to the trace's mean size (252 MB).
//   - Each endpoint sends to Partners others, chosen in proportion to
//     capacity (big DTNs are everyone's partners), and a transfer picks
//     one of these links by weight. The weights are fitted (iterative
//     proportional fitting) so that every endpoint's share of the bytes,
//     sent plus received, is its share of the capacity: every endpoint
//     is offered the same utilisation, Load.
//   - Capacities are scaled by one factor so that this utilisation is
//     Load. 25 million transfers of SC'15 sizes are 6.3 PB a day, which
//     would load 5,000 endpoints at the nominal class capacities to only
//     about 2%: a facility that never queues says nothing about how a
//     scheduler copes with a queue. The scale keeps the classes' relative
//     spread (1:10:40:100) and the SC'15 sizes, and puts the endpoints at
//     the requested load; NominalUtilisation reports what the load would
//     be unscaled.
//
// The links bound the number of distinct pairs (Endpoints × Partners), so
// the estimator's per-pair history and the path resources stay bounded
// however long the day.

// FacilityClass is one DTN class of a facility.
type FacilityClass struct {
	Name string `json:"name"`
	// NominalGbps is the class's interface speed; an endpoint's capacity
	// is NominalGbps times the facility's capacity scale.
	NominalGbps float64 `json:"nominal_gbps"`
	// Share is the fraction of endpoints in the class.
	Share float64 `json:"share"`
	// MaxCC and Knee are the endpoints' concurrency limit and contention
	// knee (capacity declines past Knee connections, Decline 0.5).
	MaxCC int `json:"max_cc"`
	Knee  int `json:"knee"`
	// Count and CapacityGbps are filled in for a generated facility.
	Count        int     `json:"count,omitempty"`
	CapacityGbps float64 `json:"capacity_gbps,omitempty"`
}

// FacilityClasses are the default DTN classes: mostly 1 and 10 Gb/s hosts
// with a few 40 and 100 Gb/s DTNs, which carry most of the capacity.
var FacilityClasses = []FacilityClass{
	{Name: "1G", NominalGbps: 1, Share: 0.40, MaxCC: 16, Knee: 8},
	{Name: "10G", NominalGbps: 10, Share: 0.45, MaxCC: 32, Knee: 24},
	{Name: "40G", NominalGbps: 40, Share: 0.10, MaxCC: 64, Knee: 48},
	{Name: "100G", NominalGbps: 100, Share: 0.05, MaxCC: 128, Knee: 96},
}

// FacilitySpec describes a facility day.
type FacilitySpec struct {
	// Endpoints is the number of endpoints (at least 2).
	Endpoints int `json:"endpoints"`
	// Transfers is the number of transfers over the whole day.
	Transfers int64 `json:"transfers"`
	// Hours is the length of the day the transfers spread over.
	Hours float64 `json:"hours"`
	// Until, if positive and below Hours, stops arrivals at that hour:
	// the run is the first Until hours of the same day (same arrival
	// rate, same transfers), drained. Zero means the whole day.
	Until float64 `json:"until_hours,omitempty"`
	// Load is the utilisation every endpoint is offered (0 < Load <= 2).
	Load float64 `json:"load"`
	// SizeLoad names the SC'15 trace whose size law is used (0.45: the
	// 45% trace).
	SizeLoad float64 `json:"size_load"`
	// Partners is how many endpoints each endpoint sends to.
	Partners int   `json:"partners"`
	Seed     int64 `json:"seed"`
}

// DefaultFacilitySpec is the facility day of docs/SCALING.md: 5,000
// endpoints, 25 million transfers in 24 hours at 45% load, SC'15 45% sizes.
func DefaultFacilitySpec() FacilitySpec {
	return FacilitySpec{Endpoints: 5000, Transfers: 25_000_000, Hours: 24, Load: 0.45, SizeLoad: 0.45, Partners: 8, Seed: 1}
}

// maxFacilityEndpoints bounds a facility so that a typo cannot ask for a
// testbed that exhausts memory before the run starts.
const maxFacilityEndpoints = 1_000_000

// Validate reports the first thing wrong with the spec.
func (s FacilitySpec) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case s.Endpoints < 2 || s.Endpoints > maxFacilityEndpoints:
		return fmt.Errorf("facility: endpoints %d: want 2 to %d", s.Endpoints, maxFacilityEndpoints)
	case s.Transfers < 1:
		return fmt.Errorf("facility: transfers %d: want at least 1", s.Transfers)
	case !(s.Hours > 0) || bad(s.Hours):
		return fmt.Errorf("facility: hours %v: want a positive number", s.Hours)
	case s.Until < 0 || bad(s.Until):
		return fmt.Errorf("facility: until %v hours: want 0 (the whole day) or a positive number", s.Until)
	case !(s.Load > 0 && s.Load <= 2):
		return fmt.Errorf("facility: load %v: want a utilisation in (0, 2]", s.Load)
	case !(s.SizeLoad > 0 && s.SizeLoad <= 2):
		return fmt.Errorf("facility: size load %v: want the load of an SC'15 trace in (0, 2]", s.SizeLoad)
	case s.Partners < 1:
		return fmt.Errorf("facility: partners %d: want at least 1", s.Partners)
	}
	return nil
}

// FacilityLink is one source-destination pair of a facility and its
// share of the transfers.
type FacilityLink struct {
	Src, Dst int32
	Weight   float64
}

// Facility is a generated facility: its testbed, links and size law. Its
// arrivals are drawn afresh, from the seed, by each call of Arrivals.
type Facility struct {
	Spec    FacilitySpec    `json:"spec"`
	Classes []FacilityClass `json:"classes"`
	// CapacityScale multiplies the classes' nominal capacities (see the
	// comment on facilities).
	CapacityScale float64 `json:"capacity_scale"`
	// NominalUtilisation is the load the transfers would offer the
	// endpoints at their nominal capacities.
	NominalUtilisation float64 `json:"nominal_utilisation"`
	// MeanSize is the size law's mean (bytes); DayBytes the expected
	// volume of the whole day.
	MeanSize float64 `json:"mean_size_bytes"`
	DayBytes float64 `json:"day_bytes"`
	// Links is the number of source-destination pairs.
	Links int `json:"links"`
	// OfferedMin, OfferedMedian and OfferedMax summarise the utilisation
	// each endpoint is offered after fitting (all Load when the fit
	// converged).
	OfferedMin    float64 `json:"offered_min"`
	OfferedMedian float64 `json:"offered_median"`
	OfferedMax    float64 `json:"offered_max"`
	// TotalCapacityGbps is the sum of the endpoints' capacities.
	TotalCapacityGbps float64 `json:"total_capacity_gbps"`

	Testbed *Testbed       `json:"-"`
	links   []FacilityLink // by source, then destination
	cum     []float64      // cumulative link weights
	sizes   *trace.SizeLaw
	class   []int    // class of each endpoint
	names   []string // endpoint names
}

// Random streams of a facility, one per purpose, so that changing one
// aspect (the partners, the size law) leaves the others as they were.
const (
	facStreamClasses uint64 = 0xfac1_0000 + iota
	facStreamPartners
	facStreamArrivals
	facStreamLinks
	facStreamSizes
)

// NewFacility generates the facility of spec (see the comment on
// facilities for the model).
func NewFacility(spec FacilitySpec) (*Facility, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	sizes, err := trace.NewSizeLaw(spec.SizeLoad)
	if err != nil {
		return nil, fmt.Errorf("facility: %w", err)
	}
	n := spec.Endpoints
	f := &Facility{Spec: spec, sizes: sizes, MeanSize: sizes.Mean()}
	f.DayBytes = float64(spec.Transfers) * f.MeanSize

	// Classes: counts by largest remainder, assigned in a seeded order.
	f.Classes = slices.Clone(FacilityClasses)
	counts := apportion(n, f.Classes)
	f.class = make([]int, 0, n)
	for c, k := range counts {
		f.Classes[c].Count = k
		for range k {
			f.class = append(f.class, c)
		}
	}
	rc := rand.New(rand.NewPCG(uint64(spec.Seed), facStreamClasses))
	rc.Shuffle(n, func(i, j int) { f.class[i], f.class[j] = f.class[j], f.class[i] })

	// Capacity scale: every endpoint offered Load. Each byte passes two
	// endpoints, so the capacity needed is 2 × rate × mean size / Load.
	rate := float64(spec.Transfers) / (spec.Hours * 3600)
	need := 2 * rate * f.MeanSize / spec.Load // bytes/s
	nominal := 0.0
	for _, c := range f.class {
		nominal += Gbps(f.Classes[c].NominalGbps)
	}
	f.CapacityScale = need / nominal
	f.NominalUtilisation = spec.Load * f.CapacityScale
	f.TotalCapacityGbps = need * 8 / 1e9
	for i := range f.Classes {
		f.Classes[i].CapacityGbps = f.Classes[i].NominalGbps * f.CapacityScale
	}

	tb := &Testbed{
		Name:        fmt.Sprintf("facility-%d", n),
		Description: "generated facility (sim/facility.go)",
		// Splitting costs as on the SC'15 testbed.
		ChunkOverhead: 10e6,
	}
	f.names = make([]string, n)
	width := len(fmt.Sprint(n - 1))
	for i, c := range f.class {
		cl := f.Classes[c]
		f.names[i] = fmt.Sprintf("ep%0*d-%s", width, i, cl.Name)
		tb.Endpoints = append(tb.Endpoints, EndpointSpec{Name: f.names[i], CapacityGbps: cl.CapacityGbps, MaxCC: cl.MaxCC, Knee: cl.Knee, Decline: 0.5})
	}
	if err := tb.init(); err != nil {
		return nil, fmt.Errorf("facility: %w", err)
	}
	f.Testbed = tb

	if err := f.makeLinks(); err != nil {
		return nil, err
	}
	return f, nil
}

// apportion splits n endpoints among the classes by share, by largest
// remainder, so the counts add up to n.
func apportion(n int, classes []FacilityClass) []int {
	total := 0.0
	for _, c := range classes {
		total += c.Share
	}
	counts := make([]int, len(classes))
	rem := make([]float64, len(classes))
	left := n
	for i, c := range classes {
		x := float64(n) * c.Share / total
		counts[i] = int(math.Floor(x))
		rem[i] = x - float64(counts[i])
		left -= counts[i]
	}
	order := make([]int, len(classes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for i := 0; i < left; i++ {
		counts[order[i%len(order)]]++
	}
	return counts
}

// makeLinks draws each endpoint's partners and fits the link weights so
// that every endpoint's share of the traffic is its share of capacity.
func (f *Facility) makeLinks() error {
	n := f.Spec.Endpoints
	k := min(f.Spec.Partners, n-1)
	caps := make([]float64, n)
	cum := make([]float64, n)
	sum := 0.0
	for i := range caps {
		caps[i] = f.Testbed.Endpoints[i].CapacityGbps
		sum += caps[i]
		cum[i] = sum
	}
	r := rand.New(rand.NewPCG(uint64(f.Spec.Seed), facStreamPartners))
	f.links = make([]FacilityLink, 0, n*k)
	chosen := make([]int32, 0, k)
	for i := 0; i < n; i++ {
		chosen = chosen[:0]
		// Rejection sampling by capacity; when k is close to n-1 the
		// rejections pile up, so finish with the remaining endpoints in
		// order.
		for tries := 0; len(chosen) < k && tries < 50*k; tries++ {
			j, _ := slices.BinarySearch(cum, r.Float64()*sum)
			j = min(j, n-1)
			if j == i || slices.Contains(chosen, int32(j)) {
				continue
			}
			chosen = append(chosen, int32(j))
		}
		for j := 0; len(chosen) < k && j < n; j++ {
			if j != i && !slices.Contains(chosen, int32(j)) {
				chosen = append(chosen, int32(j))
			}
		}
		slices.Sort(chosen)
		for _, j := range chosen {
			f.links = append(f.links, FacilityLink{Src: int32(i), Dst: j, Weight: 1})
		}
	}
	f.Links = len(f.links)
	// Iterative proportional fitting: endpoint i's weight W_i (its links'
	// weights, sent and received) should be 2·cap_i/Σcap of the total
	// (each link counts at both ends).
	target := make([]float64, n)
	for i := range target {
		target[i] = 2 * caps[i] / sum
	}
	W := make([]float64, n)
	fit := make([]float64, n)
	measure := func() float64 {
		clear(W)
		tot := 0.0
		for _, l := range f.links {
			tot += l.Weight
		}
		for i := range f.links {
			f.links[i].Weight /= tot
			W[f.links[i].Src] += f.links[i].Weight
			W[f.links[i].Dst] += f.links[i].Weight
		}
		worst := 0.0
		for i := range W {
			fit[i] = target[i] / W[i]
			worst = math.Max(worst, math.Abs(1/fit[i]-1))
		}
		return worst
	}
	for it := 0; it < 2000 && measure() > 1e-6; it++ {
		for i := range f.links {
			l := &f.links[i]
			l.Weight *= math.Sqrt(fit[l.Src] * fit[l.Dst])
		}
	}
	measure()
	offered := make([]float64, n)
	for i := range offered {
		offered[i] = f.Spec.Load * W[i] / target[i]
	}
	slices.Sort(offered)
	f.OfferedMin, f.OfferedMedian, f.OfferedMax = offered[0], offered[n/2], offered[n-1]
	f.cum = make([]float64, len(f.links))
	acc := 0.0
	for i, l := range f.links {
		acc += l.Weight
		f.cum[i] = acc
	}
	if !(acc > 0) || math.IsNaN(acc) {
		return errors.New("facility: link weights did not fit")
	}
	return nil
}

// Arrivals returns a new source of the facility's transfers (the same
// ones, in the same order, at every call).
func (f *Facility) Arrivals() ArrivalSource {
	s := &facilitySource{f: f, n: f.Spec.Transfers, day: f.Spec.Hours * 3600, until: math.Inf(1)}
	if f.Spec.Until > 0 && f.Spec.Until < f.Spec.Hours {
		s.until = f.Spec.Until * 3600
	}
	// The day's n arrivals are the first n points of a Poisson process
	// rescaled so that point n+1 falls at the end of the day: then they
	// are uniform order statistics over the day, exactly n of them. The
	// total is summed once here, and the same stream is replayed.
	r := rand.New(rand.NewPCG(uint64(f.Spec.Seed), facStreamArrivals))
	total := 0.0
	for i := int64(0); i <= s.n; i++ {
		total += r.ExpFloat64()
	}
	s.total = total
	s.ra = rand.New(rand.NewPCG(uint64(f.Spec.Seed), facStreamArrivals))
	s.rl = rand.New(rand.NewPCG(uint64(f.Spec.Seed), facStreamLinks))
	s.rs = rand.New(rand.NewPCG(uint64(f.Spec.Seed), facStreamSizes))
	return s
}

// Expected is how many transfers the source yields: Transfers, or for a
// run that stops at Until, the expected number before it.
func (f *Facility) Expected() float64 {
	if f.Spec.Until > 0 && f.Spec.Until < f.Spec.Hours {
		return float64(f.Spec.Transfers) * f.Spec.Until / f.Spec.Hours
	}
	return float64(f.Spec.Transfers)
}

// facilitySource generates a facility's transfers on demand.
type facilitySource struct {
	f          *Facility
	n, i       int64
	day, until float64
	total, acc float64
	ra, rl, rs *rand.Rand
}

func (s *facilitySource) Next() (trace.Transfer, bool) {
	if s.i >= s.n {
		return trace.Transfer{}, false
	}
	s.acc += s.ra.ExpFloat64()
	at := s.day * s.acc / s.total
	if at >= s.until {
		s.i = s.n
		return trace.Transfer{}, false
	}
	f := s.f
	l, _ := slices.BinarySearch(f.cum, s.rl.Float64()*f.cum[len(f.cum)-1])
	l = min(l, len(f.links)-1)
	x := trace.Transfer{ID: s.i, Arrival: at, Src: f.names[f.links[l].Src], Dst: f.names[f.links[l].Dst], Size: f.sizes.Draw(s.rs)}
	s.i++
	return x, true
}

func (s *facilitySource) Err() error { return nil }
