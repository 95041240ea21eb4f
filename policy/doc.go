// Package policy owns the allocation of transfer streams between endpoints
// and the adaptive client that lives within an allocation, after the Policy
// Service and Adaptive Transfer Client of Chervenak et al., "Adaptation and
// Policy-Based Resource Allocation for Efficient Bulk Data Transfers in High
// Performance Computing Environments" (NDM 2014).
//
// # Allocations
//
// A Service hands out streams per (source, destination) Pair. A client asks
// for an Allocation with Service.Request (the paper's initial PROVISION),
// asks for more, or renews, with Service.Update (PROVISION on an existing
// allocation) and gives the streams back with Service.Release. Each pair
// has Params: the paper's s_i (Initial), s_u (Update), s_pmax (PairMax) and
// s_cmax (ClientMax), and a Lease.
//
// Beyond the paper (its own future work), an allocation is a lease: a
// client that stops calling Update for Params.Lease loses its streams, so
// a crashed client never strands them. The service can also take streams
// back (Service.Shrink, Service.ShrinkPair), for instance when a
// higher-priority VO arrives or the pair's throughput falls. The client is
// told at its next Update; until then the streams it gave up are Draining:
// they still count against the pair, because the client is still using
// them, so a shrink never oversubscribes a pair.
//
// # Policies
//
// How many streams a request gets is decided by a Policy: Greedy (the
// paper's Fig. 2, the default), WeightedShares (VO shares per pair, as in
// FTS3) or a user-written Starlark module (package starlarkpolicy, whose
// Load builds any of them from a configuration string). Whatever a policy
// answers, the Service enforces the limits: never more than PairMax streams on a pair, never
// more than ClientMax on an allocation, never fewer than zero; a policy
// that fails, panics or answers garbage changes nothing and its error
// wraps ErrPolicy.
//
// # Time and state
//
// The package reads no clock: every operation takes the current time, so
// simulations and tests are deterministic. It does no I/O. State lives in
// memory; persistence is the caller's concern, through Service.State and
// Service.Restore. Service is safe for concurrent use; nothing else in the package is.
//
// # Adaptive client
//
// Adaptive is the paper's Fig. 3 (AdaptTransferClient and Adapt) as a pure
// state machine: the caller moves files, reports completions and rates,
// and asks the service for updates when Adaptive says one is due.
//
// # Errors
//
// Errors wrap one of ErrNotFound, ErrInvalid (ErrUnknownPair is one),
// ErrForbidden or ErrPolicy, which an API maps to 404, 422, 403 and 500.
// An operation that returns an error has changed nothing, beyond ending
// the leases that had run out by the time it was called.
package policy
