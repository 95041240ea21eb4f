package sim

import (
	"github.com/sluice-dtn/sluice/model"
)

// Train returns an estimator whose history is the testbed's steady-state
// response: for a signature it has not observed, it answers what a task
// with that concurrency gets when the known loads run beside it. This
// stands for the "extensive historical data" SC'15 §4.2 assumes (its
// model came from a measurement campaign [38]); what the simulation then
// observes is added to the history and corrects predictions on each pair
// through the recent-transfer term, so unmodelled effects (external load,
// the real mix of competitors) are learned as they would be live.
//
// The history asks the fallback once per signature (bucketed loads, size
// class) and keeps the answer, so the probe runs at the bucket's value.
func Train(tb *Testbed) *model.History {
	h := model.NewHistory()
	h.Fallback = func(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
		if !tb.Has(src) || !tb.Has(dst) {
			return 0
		}
		return tb.probe(src, dst, cc, model.LoadBucket(srcLoad), model.LoadBucket(dstLoad), model.ClassSize(model.SizeClass(size)))
	}
	return h
}

// probe is the steady-state throughput of one task of concurrency cc
// between src and dst when srcLoad and dstLoad other connections run at
// the two endpoints (those common to both on the same path, the rest to
// and from elsewhere), shared as the simulator shares them.
func (tb *Testbed) probe(src, dst string, cc, srcLoad, dstLoad int, size int64) float64 {
	shared := min(srcLoad, dstLoad)
	const resSrc, resDst, resPath = 0, 1, 2
	caps := []float64{
		tb.Endpoint(src).capacity(cc+srcLoad, 0),
		tb.Endpoint(dst).capacity(cc+dstLoad, 0),
	}
	path := -1
	if c := tb.pathCapacity(src, dst, cc+shared); c > 0 {
		path = resPath
		caps = append(caps, c)
	}
	w := func(c int) float64 {
		if tb.EqualShare {
			return 1
		}
		return float64(c)
	}
	flows := []*flow{{res: [3]int{resSrc, resDst, path}, weight: w(tb.streams(cc, size)), cap: tb.demand(src, dst, cc, size)}}
	// Background load as single-connection tasks of large files, the
	// kind that stays long enough to be load.
	big := model.ClassSize(4)
	for i := 0; i < shared; i++ {
		flows = append(flows, &flow{res: [3]int{resSrc, resDst, path}, weight: w(1), cap: tb.demand(src, dst, 1, big)})
	}
	for i := 0; i < srcLoad-shared; i++ {
		flows = append(flows, &flow{res: [3]int{resSrc, -1, -1}, weight: w(1), cap: tb.Curve.At(1) * Gbps(tb.Endpoint(src).CapacityGbps)})
	}
	for i := 0; i < dstLoad-shared; i++ {
		flows = append(flows, &flow{res: [3]int{-1, resDst, -1}, weight: w(1), cap: tb.Curve.At(1) * Gbps(tb.Endpoint(dst).CapacityGbps)})
	}
	var a allocator
	a.run(flows, caps)
	return flows[0].rate
}
