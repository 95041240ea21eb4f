package policy

// Greedy is the paper's Greedy policy, PROVISION of Fig. 2, line for line:
//
//	s_v ← min(s_cmax − streams[t], s_pmax − s_a)   // available
//	if s_v = 0: unchanged                          // lines 4–6
//	else if streams[t] = 0 and s_v > s_i: s_i      // line 7, initial
//	else if streams[t] > 0 and s_v > s_u: + s_u    // line 11, update
//	else: + s_v                                    // lines 15–18, remainder
//
// Lines 7 and 11 compare strictly, so when exactly s_i (or s_u) streams
// are available the remainder branch grants them: the same number. An
// update of an allocation that holds nothing (granted while the pool was
// exhausted) is treated as an initial request, since streams[t] = 0, as
// the paper's service does.
//
// s_v is negative only after an administrator lowered a limit below what
// is granted. Taken literally, Fig. 2 would then add s_v and take the
// whole excess from whichever client updates first; Greedy reads line 4
// as "no streams available" (s_v ≤ 0) and leaves the allocation as it is.
// Taking streams back evenly is Service.ShrinkPair's job. Greedy ignores
// Want and VO weights; the Service caps by Want.
type Greedy struct{}

// Name is "greedy".
func (Greedy) Name() string { return "greedy" }

// Add provisions a new allocation (streams[t] = 0).
func (Greedy) Add(v View, _ Request) (int, error) {
	return provision(v.Params, v.Used, 0), nil
}

// Update provisions an existing allocation a.
func (Greedy) Update(v View, a Allocation, _ Request) (int, error) {
	return provision(v.Params, v.Used, a.Streams), nil
}

// Remove does nothing: releasing only returns streams to the pool (the
// paper's Section II.A), which the Service does.
func (Greedy) Remove(View, Allocation) error { return nil }

// provision is Fig. 2 for an allocation holding streams, on a pair with
// used streams allocated in total (s_a, streams included).
func provision(p Params, used, streams int) int {
	sv := min(p.ClientMax-streams, p.PairMax-used)
	switch {
	case sv <= 0:
		return streams
	case streams == 0 && sv > p.Initial:
		return p.Initial
	case streams > 0 && sv > p.Update:
		return streams + p.Update
	default:
		return streams + sv
	}
}
