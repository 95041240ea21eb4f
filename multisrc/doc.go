// Package multisrc owns the planning of multi-source downloads: splitting
// one file's bytes across the replicas that hold it, the scheduling policies
// of Yang, Schopf and Foster, "Improving Parallel Data Transfer Times Using
// Predicted Variances in Shared Networks" (Tuned Conservative Scheduling),
// the rebalancing rule of the dynamic mode (work stealing, which goes beyond
// the paper), and the statistics the paper's §5.2 uses to evaluate policies
// against each other (Tables 2-5).
//
// Everything here is pure: no clock, goroutine or I/O. The caller brings
// the predictions (a Link's interval mean and standard deviation of
// bandwidth and its effective latency: the forecasting lives elsewhere) and
// the observed rates, and gets back byte counts, byte ranges, predicted
// finish times and p-values. The live engine, the simulator and offline
// analysis therefore share one implementation.
//
// Units: sizes and offsets are bytes (int64), bandwidths and rates bytes per
// second, times and latencies seconds (float64).
//
// The policies (paper §5.1) differ only in the bandwidth they plan with:
//
//	BOS       all bytes from the link with the highest predicted Mean
//	EAS       the same number of bytes from every usable link
//	MS        time balancing on Mean                   (TF = 0)
//	NTSS      time balancing on Mean + SD              (TF = 1)
//	TCS       time balancing on Mean + TF*SD           (eq. 3, TF from Fig. 1)
//	TCSMinus  time balancing on max(Mean - TF*SD, 5% of Mean)
//
// TCS is the paper's policy exactly as printed: eq. 3 adds TF standard
// deviations, so its effective bandwidth lies in [Mean, 1.5 Mean] and a more
// variable link is still planned above its mean, only by less than NTSS
// would. The text's stated intent ("for a link with more variable
// bandwidth, effective bandwidth will be smaller") reads more naturally as
// subtracting; TCSMinus is that conservative reading, in [Mean/2, Mean], so
// the two can be compared on measured data instead of argued about.
//
// Time balancing (eqs. 1-2) makes every link used finish together: link i
// with effective bandwidth B_i and latency L_i sends D_i bytes and finishes
// at T_i = L_i + D_i/B_i. Unlike the paper, which drops latency because it
// was under 1% of its transfer times, Split keeps it: a WAN replica's setup
// time matters for the small files Sluice also moves.
package multisrc
