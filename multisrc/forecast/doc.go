// Package forecast owns bandwidth prediction for multi-source downloads: the
// Network Weather Service (NWS) family of one-step-ahead predictors, the
// forecaster that trusts whichever of them has been most accurate lately,
// and the interval aggregation of Yang, Schopf and Foster, "Improving
// Parallel Data Transfer Times Using Predicted Variances in Shared
// Networks" §4.1 (eqs. 4-6), which turns a one-step-ahead predictor into a
// prediction of the mean and the standard deviation of bandwidth over a
// whole transfer. Package multisrc plans with those two numbers (a Link's
// Mean and SD); this package produces them.
//
// Everything here is pure and deterministic: no clock, goroutine or I/O, and
// no global mutable state. The same series always gives the same forecast.
//
// # One-step-ahead prediction
//
// No single simple predictor is best on every network: the last value wins
// when bandwidth drifts like a random walk, a long mean wins when it is noise
// around a level, a median wins when there are outliers. NWS therefore runs
// them all side by side (NWS returns the family) and, at every step, forecasts
// with the one whose recent forecasts had the lowest mean squared error
// (Forecaster, Predict). Each predictor's error is recorded when the value it
// predicted arrives, so the choice uses only the past.
//
// The family, in order (the order breaks ties: the earlier wins):
//
//	last                 the last value
//	mean                 the mean of all values
//	exp0.05 .. exp0.75   exponential smoothing, gains 0.05 0.10 0.15 0.20
//	                     0.30 0.40 0.50 0.75: f = x1, then f += g*(x - f)
//	median5, median31    the median of the last 5 / 31 values
//	slide5 .. slide31    the mean of the last 5, 10, 20, 31 values
//	trim31-10, trim31-25 the alpha-trimmed mean of the last 31 values:
//	                     sort, drop floor(alpha*n) values from each end
//	                     (alpha = 10% / 25%), average the rest
//	adaptmedian          the adaptive-window median, below
//
// A window longer than the data uses the values there are, so every
// predictor forecasts from the first value on. A median of an even number
// of values is the mean of the two middle ones.
//
// Trimmed medians are deliberately absent: trimming the same number of
// values from both ends of a sorted window never moves its median, so a
// "trimmed median" of 31 values would be median31 again and would only add a
// tie.
//
// The adaptive-window median, after NWS's, is a median whose window length w
// moves between 5 and 31, starting at 5. When a value x arrives,
// before it joins the history, the medians over the last w-1, w and w+1
// values (those within 5..31) are compared by |median - x|; w moves to the
// length with the smallest error, staying put on a tie and preferring w-1
// over w+1 on a tie between them. The window thus drifts, one step per
// value, toward the length that has lately predicted best.
//
// Non-finite values (NaN, ±Inf) are not measurements: every predictor, the
// Forecaster and the aggregation skip them, so one bad sample cannot poison
// a forecast. Arithmetic is arranged so that huge finite values cannot turn
// into NaN either.
//
// # Interval prediction (paper §4.1)
//
// A transfer lasts many sampling periods, and network traffic is
// self-similar: averaging does not smooth it much, so the bandwidth at the
// next sample says little about the average over the next hundred seconds.
// The paper instead aggregates the series at the scale of the transfer and
// predicts one step ahead at that scale:
//
//   - Degree (eq. 4): M = transfer time × sampling frequency, the number of
//     samples one transfer spans (100 s at 0.1 Hz: M = 10).
//   - Aggregate (eqs. 5, 6): cut the series c_1..c_n into k = ceil(n/M)
//     non-overlapping blocks aligned to its end (the last block is the last
//     M values) and take each block's mean a_i and population standard
//     deviation s_i (divided by the block's size).
//   - Interval: the forecast of a_{k+1} is the predicted mean bandwidth over
//     the transfer, the forecast of s_{k+1} its predicted standard deviation.
//
// When M does not divide n, the paper's index c_{n-(k-i+1)M+j} for the first
// block points before c_1. Aggregate uses the values that exist: the first
// block holds the n mod M oldest values, and its a_1 and s_1 are their mean
// and population standard deviation (divided by their count, not by M).
// Keeping the block keeps the oldest data in the history, at the price of a
// spread measured over fewer values (a one-value block has s_1 = 0); as the
// oldest point of the interval series it is the first one the windowed
// predictors forget. Non-finite samples are removed before the series is cut
// into blocks, so every block but the first holds exactly M finite values.
package forecast
