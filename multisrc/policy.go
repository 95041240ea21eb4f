package multisrc

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Link is what is predicted of one source→destination link for the coming
// transfer. It is the whole input of a plan: the policies differ only in how
// they turn Mean and SD into the bandwidth they plan with.
type Link struct {
	// Name identifies the replica in logs and reports; planning ignores it.
	Name string
	// Mean is the predicted mean bandwidth over the transfer's interval
	// (paper §4.1.1), bytes/s. A link whose Mean is <= 0 or NaN is not
	// usable by any policy.
	Mean float64
	// SD is the predicted standard deviation of bandwidth over that interval
	// (§4.1.2), bytes/s. NaN or negative is read as 0: an unknown spread
	// plans on the mean alone.
	SD float64
	// Latency is the effective latency of eq. 2, seconds: the time before
	// the first byte arrives. NaN or negative is read as 0; +Inf makes the
	// link unusable for time balancing.
	Latency float64
}

// Policy names how bytes are split across links. Policies are strings so
// they can travel in configuration, flags and reports unchanged.
type Policy string

// The policies of the paper's §5.1, plus the conservative reading of eq. 3.
const (
	// BOS (Best One Scheduling) takes all bytes from the link with the
	// highest predicted Mean: the baseline without parallelism.
	BOS Policy = "bos"
	// EAS (Equal Allocation Scheduling) takes the same number of bytes from
	// every usable link: the baseline without load balancing.
	EAS Policy = "eas"
	// MS (Mean Scheduling) time-balances on the predicted Mean (TF = 0):
	// load balancing without variance.
	MS Policy = "ms"
	// NTSS (Non-Tuned Stochastic Scheduling) time-balances on Mean + SD
	// (TF = 1): variance without tuning.
	NTSS Policy = "ntss"
	// TCS (Tuned Conservative Scheduling) time-balances on Mean + TF*SD with
	// TF from Fig. 1: the paper's policy, eq. 3 as printed.
	TCS Policy = "tcs"
	// TCSMinus time-balances on Mean - TF*SD, floored at MinusFloor*Mean:
	// the reading of eq. 3 that matches the text's intent that a more
	// variable link gets a smaller effective bandwidth.
	TCSMinus Policy = "tcs-minus"
)

// MinusFloor is the fraction of Mean below which TCSMinus never plans a
// link's bandwidth, so a noisy but working replica stays in the plan
// instead of being dropped. With Fig. 1's TF the floor cannot bind: TF*SD
// is N(1-N/2)*Mean <= Mean/2 for N <= 1 and exactly Mean/2 for N > 1, so
// Mean - TF*SD is always in [Mean/2, Mean]. It is a guard for other TF rules
// (the paper invites them) and for rounding, not a tuning knob.
const MinusFloor = 0.05

// Errors that Split and ParsePolicy wrap, so callers can tell bad input
// from bad predictions with errors.Is.
var (
	// ErrUnknownPolicy: the policy name is not one of Policies().
	ErrUnknownPolicy = errors.New("unknown policy")
	// ErrBadInput: a negative size or an empty link list.
	ErrBadInput = errors.New("bad input")
	// ErrNoUsableLink: every link's planning bandwidth is <= 0, NaN or
	// infinite (or its latency is infinite), so no plan can finish.
	ErrNoUsableLink = errors.New("no usable link")
)

// Policies returns every policy in a fixed order (the paper's order, then
// TCSMinus), so evaluations and reports list them the same way each time.
func Policies() []Policy {
	return []Policy{BOS, EAS, MS, NTSS, TCS, TCSMinus}
}

// ParsePolicy reads a policy name as given in flags or configuration.
// Matching is case-insensitive and ignores surrounding space; an unknown
// name gets an error listing the valid ones, wrapping ErrUnknownPolicy.
func ParsePolicy(s string) (Policy, error) {
	want := strings.ToLower(strings.TrimSpace(s))
	names := make([]string, 0, len(Policies()))
	for _, p := range Policies() {
		if string(p) == want {
			return p, nil
		}
		names = append(names, string(p))
	}
	return "", fmt.Errorf("multisrc: parse policy %q: %w (valid: %s)",
		s, ErrUnknownPolicy, strings.Join(names, ", "))
}

// valid reports whether p is one of Policies().
func (p Policy) valid() bool {
	for _, q := range Policies() {
		if p == q {
			return true
		}
	}
	return false
}

// TuningFactor is the paper's Fig. 1: with N = sd/mean, TF = 1/(2N) when
// N > 1 and TF = 1 - N/2 otherwise, so TF falls from 1 to 0 as the link gets
// more variable and a noisy link's SD counts for less.
//
// Inputs the figure does not cover give 0, the value under which TCS and
// TCSMinus both plan on the Mean alone (MS): mean <= 0 or NaN (no usable
// prediction to scale by), sd NaN or negative (no usable spread), or N NaN
// (both infinite). sd = 0 gives 1 as the formula says; it multiplies 0.
func TuningFactor(mean, sd float64) float64 {
	if math.IsNaN(mean) || mean <= 0 || math.IsNaN(sd) || sd < 0 {
		return 0
	}
	n := sd / mean
	switch {
	case math.IsNaN(n):
		return 0
	case n > 1:
		return 1 / (2 * n)
	default:
		return 1 - n/2
	}
}

// EffectiveBW is the bandwidth policy p plans link l with: eq. 3 for TCS
// (Mean + TF*SD), Mean + SD for NTSS, max(Mean - TF*SD, MinusFloor*Mean) for
// TCSMinus, and the Mean itself for MS, BOS and EAS.
//
// It returns 0 when the link cannot be planned with (Mean <= 0 or NaN) or p
// is unknown, so callers need only test "> 0". A NaN or negative SD counts
// as 0. The result may be +Inf when Mean is; Split treats that as unusable.
func EffectiveBW(p Policy, l Link) float64 {
	mean := l.Mean
	if math.IsNaN(mean) || mean <= 0 {
		return 0
	}
	sd := l.SD
	if math.IsNaN(sd) || sd < 0 {
		sd = 0
	}
	switch p {
	case BOS, EAS, MS:
		return mean
	case NTSS:
		return mean + sd
	case TCS:
		return mean + TuningFactor(mean, sd)*sd
	case TCSMinus:
		// Always in [Mean/2, Mean] with Fig. 1's TF: see MinusFloor.
		return math.Max(mean-TuningFactor(mean, sd)*sd, MinusFloor*mean)
	default:
		return 0
	}
}

// latency normalises a Link's Latency the way planning reads it: NaN and
// negative values become 0 (the paper ignores latency altogether, so an
// unknown one is planned like the paper would).
func latency(l Link) float64 {
	if math.IsNaN(l.Latency) || l.Latency < 0 {
		return 0
	}
	return l.Latency
}

// usable reports whether a link with planning bandwidth b and latency lat
// can take part in a plan: a finite positive bandwidth and a finite latency.
func usable(b, lat float64) bool {
	return b > 0 && !math.IsInf(b, 0) && !math.IsNaN(b) && !math.IsInf(lat, 0)
}
