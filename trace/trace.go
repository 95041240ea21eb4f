// Package trace owns transfer workloads: the in-memory form of a trace, a
// seeded generator that reproduces the SC'15 traces (Table 2 of Kettimuthu
// et al.), and loaders/writers for the CSV, JSONL and globus-gridftp-server
// transfer-log formats. A trace says what was asked for and when; it says
// nothing about how a scheduler should run it.
//
// The pieces:
//
//   - Generate builds the 25%, 45% and 60% traces of SC'15 §6.2 (and the
//     45%-4x and 60%-HV variants of §6.2/§6.4) from their published per-class
//     file counts (ClassCountsFor) and total volume, with bursty, grouped
//     arrivals (§2.1) whose variation MinuteArrivalCV measures.
//   - AddBatch, Apportion and BatchCountFor add the 50 GB batch tasks of §6.4.
//   - ReadCSV/WriteCSV, ReadJSONL/WriteJSONL, ReadGridFTPLog and Read (or
//     ReadFile, which also returns a LoadReport) load and store traces;
//     Remap fills in the endpoints a log does not identify, as §6.2 did for
//     the anonymised Globus usage logs.
//   - SizeClass, ClassNames and Trace.Stats summarise a trace in the paper's
//     five file-size classes; Trace.Validate checks the ordering invariants.
//
// Everything is deterministic: randomness comes only from explicit seeds.
package trace

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Transfer is one requested file transfer: the six-tuple of SC'15 §4.1 plus
// the batch flag of §5.1.
type Transfer struct {
	ID      int64   `json:"id"`
	Arrival float64 `json:"arrival"` // seconds since the trace start
	Src     string  `json:"src"`
	Dst     string  `json:"dst"`
	Size    int64   `json:"size"` // bytes
	Batch   bool    `json:"batch,omitempty"`
	Path    string  `json:"path,omitempty"`
}

// Trace is an ordered list of transfers (ascending Arrival, then ID).
type Trace struct {
	Name      string
	Transfers []Transfer
}

// Clone returns a deep copy, so that derived traces (Remap, variants) never
// alias the caller's slice.
func (t *Trace) Clone() *Trace {
	if t == nil {
		return nil
	}
	return &Trace{Name: t.Name, Transfers: slices.Clone(t.Transfers)}
}

// Validate reports the first violation of the invariants the simulator
// relies on: arrivals finite, non-negative and ascending (ties by ID), sizes
// non-negative, IDs unique.
func (t *Trace) Validate() error {
	seen := make(map[int64]struct{}, len(t.Transfers))
	for i, x := range t.Transfers {
		if math.IsNaN(x.Arrival) || math.IsInf(x.Arrival, 0) || x.Arrival < 0 {
			return fmt.Errorf("trace %q: transfer %d (id %d): bad arrival %v", t.Name, i, x.ID, x.Arrival)
		}
		if x.Size < 0 {
			return fmt.Errorf("trace %q: transfer %d (id %d): negative size %d", t.Name, i, x.ID, x.Size)
		}
		if _, dup := seen[x.ID]; dup {
			return fmt.Errorf("trace %q: transfer %d: duplicate id %d", t.Name, i, x.ID)
		}
		seen[x.ID] = struct{}{}
		if i > 0 && compareTransfers(t.Transfers[i-1], x) > 0 {
			return fmt.Errorf("trace %q: transfer %d (id %d) out of order", t.Name, i, x.ID)
		}
	}
	return nil
}

// compareTransfers is the Trace order: by arrival, then by ID.
func compareTransfers(a, b Transfer) int {
	if c := cmp.Compare(a.Arrival, b.Arrival); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// sortByArrivalRenumber sorts stably by arrival (keeping the input order of
// ties, which is the only order information a renumbered trace has) and then
// assigns IDs 0..n-1.
func sortByArrivalRenumber(ts []Transfer) {
	slices.SortStableFunc(ts, func(a, b Transfer) int { return cmp.Compare(a.Arrival, b.Arrival) })
	for i := range ts {
		ts[i].ID = int64(i)
	}
}

// NumClasses is the number of file-size classes of SC'15 Table 2.
const NumClasses = 5

// ClassNames are the labels of the SC'15 Table 2 size classes, indexed by
// SizeClass.
var ClassNames = [NumClasses]string{"0-1M", "1-10M", "10-100M", "100M-1G", "1-10G"}

// classUpper holds each class's inclusive upper bound in bytes (1 MB = 1e6,
// as in the paper's "1MB < f <= 10MB"). The last class is nominally 1-10G.
var classUpper = [NumClasses]int64{1e6, 1e7, 1e8, 1e9, 1e10}

// SizeClass returns the Table 2 class index of a file of size bytes: 0 for
// size <= 1 MB, 1 for 1 MB < size <= 10 MB, and so on. The paper's traces have
// no file above 10 GB, but derived traces do (45%-4x, batch tasks), so sizes
// above 10 GB are counted in the last class (1-10G) rather than dropped;
// negative sizes fall in class 0.
func SizeClass(size int64) int {
	for c, hi := range classUpper {
		if size <= hi {
			return c
		}
	}
	return NumClasses - 1
}

// Stats summarises a trace in the paper's terms.
type Stats struct {
	Count        int               // all transfers
	Bytes        int64             // total volume of all transfers
	ClassCount   [NumClasses]int   // transfers per SizeClass
	ClassBytes   [NumClasses]int64 // bytes per SizeClass
	BatchCount   int               // transfers with Batch set
	BatchBytes   int64             // their volume
	FirstArrival float64           // earliest arrival (0 for an empty trace)
	LastArrival  float64           // latest arrival
	Duration     float64           // LastArrival - FirstArrival: the arrival span, which understates a generation window that ends in idle time
	PerDst       map[string]int    // transfers per destination
	PerDstBytes  map[string]int64  // bytes per destination
}

// Stats computes the summary; batch transfers are included in every count
// (and also reported separately) so that Bytes is the whole offered load.
func (t *Trace) Stats() Stats {
	s := Stats{PerDst: map[string]int{}, PerDstBytes: map[string]int64{}}
	for i, x := range t.Transfers {
		s.Count++
		s.Bytes += x.Size
		c := SizeClass(x.Size)
		s.ClassCount[c]++
		s.ClassBytes[c] += x.Size
		if x.Batch {
			s.BatchCount++
			s.BatchBytes += x.Size
		}
		s.PerDst[x.Dst]++
		s.PerDstBytes[x.Dst] += x.Size
		if i == 0 || x.Arrival < s.FirstArrival {
			s.FirstArrival = x.Arrival
		}
		if i == 0 || x.Arrival > s.LastArrival {
			s.LastArrival = x.Arrival
		}
	}
	s.Duration = s.LastArrival - s.FirstArrival
	return s
}
