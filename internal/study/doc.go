// Package study holds the paired statistics of Falcon's convergence study
// (cmd/falcon-study/PROTOCOL.md): the paired reduction of a time to
// target, its median over seeds, a percentile-bootstrap confidence interval
// of that median and the verdict a row of the study may carry.
//
// # Paired reduction
//
// For a seed k, a baseline's time to target T_base,k and the candidate's
// T_cand,k (both from runs with the same seed, so the same data order,
// initial model and slowdowns) give
//
//	r_k = (T_base,k − T_cand,k) / T_base,k
//
// positive when the candidate is faster. A run that never reaches the
// target has T = +Inf, and the limits are used: T_base = +Inf with a finite
// T_cand gives r = 1, a finite T_base with T_cand = +Inf gives r = −Inf, and
// both +Inf gives r = 0 (neither reached it; a tie). So r ∈ [−Inf, 1] and
// the median of any set of r is defined.
//
// # Interval
//
// [BootstrapMedian] resamples the n reductions with replacement B times,
// takes each resample's median and returns the α/2 and 1 − α/2 empirical
// quantiles of those medians (the percentile bootstrap; Efron and
// Tibshirani, An Introduction to the Bootstrap, 1993, ch. 13). The
// resampling draws from a PCG generator seeded by the caller, so equal
// inputs give equal intervals. With n = 5 and a 95 % level the interval of
// the median is the smallest and the largest reduction whenever they are
// distinct (P(resampled median ≤ min) = 0.058 > 0.025), so a win over five
// seeds needs all five paired reductions above zero.
package study
