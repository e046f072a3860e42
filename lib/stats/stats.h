// lib/stats: the two-sample statistics the analyzer detects, confirms and
// bisects with, and farmctl compare reports: Welch's and Student's t,
// Mann-Whitney, the interval of a relative change and the magnitude rule on
// it, Benjamini-Hochberg, the adaptive-repeat decision.
//
// Pure functions over value vectors; no state, thread-safe. Distributions
// (Student's t, normal) come from Boost.Math so that tail probabilities are
// the library's, not hand-written approximations.
#ifndef LIB_STATS_STATS_H_
#define LIB_STATS_STATS_H_

#include <span>
#include <vector>

#include "proto/names.h"

namespace farm::stats {

double Mean(std::span<const double> x);
// Unbiased sample variance; 0 for fewer than two values.
double Variance(std::span<const double> x);

// A change from a mean of 0 (a counter that was never hit) has no relative
// size. It is given as kFromZero times its baseline, signed as the change:
// past any magnitude threshold, ranked first, bad or good as its sign says,
// and finite, since it is stored and sent as JSON. Percent() prints it as
// "rose from 0" / "fell from 0".
inline constexpr double kFromZero = proto::kChangeFromZero;

struct TwoSampleResult {
  double mean_a = 0;
  double mean_b = 0;
  // (mean_b - mean_a) / |mean_a|; when mean_a is 0: 0 if mean_b is too,
  // else +-kFromZero.
  double relative_change = 0;
  double statistic = 0;  // t (Welch) or z (Mann-Whitney)
  double p_value = 1;    // two-sided
};

// Welch's unequal-variance t-test, two-sided. Both samples need >= 2 values;
// otherwise p_value is 1. When both variances are 0 the means decide: equal
// means give p = 1, different means p = 0.
TwoSampleResult WelchTTest(std::span<const double> a, std::span<const double> b);

// Welch's test from summary statistics (n, mean, unbiased variance); the
// building block of the change-point scan, which keeps prefix sums.
TwoSampleResult WelchFromSummary(double n_a, double mean_a, double var_a, double n_b, double mean_b,
                                 double var_b);

// Two-sided t-test of mean_b - mean_a with a noise variance estimated
// elsewhere (`variance`, on `df` degrees of freedom): the contrast of two
// groups of commits when every commit's repeats give a within-commit
// variance, pooled over the segment (one-way ANOVA). Student's t at df.
// With df = n_a + n_b - 2 and the two groups' pooled variance it is
// Student's equal-variance t-test. variance 0: the means decide, as in
// WelchFromSummary.
TwoSampleResult ContrastFromSummary(double n_a, double mean_a, double n_b, double mean_b,
                                    double variance, double df);

// Mann-Whitney U test with normal approximation and tie correction,
// two-sided. Robust to outliers; used as a second opinion.
TwoSampleResult MannWhitneyTest(std::span<const double> a, std::span<const double> b);

// Two-sided confidence interval, at `level`, of the relative change
// (mean_b - mean_a) / |mean_a| from summary statistics: Welch's interval of
// the difference (Student's t quantile at the Welch-Satterthwaite degrees of
// freedom) divided by |mean_a|. The uncertainty of the denominator is left
// out: at the noise levels of benchmark repeats (CV of a few %) it moves the
// bounds by well under a tenth of their width. Fewer than two values on a
// side give (-inf, +inf); zero variance gives the point estimate.
struct Interval {
  double lo = 0;
  double hi = 0;
};
Interval RelativeChangeInterval(double n_a, double mean_a, double var_a, double n_b, double mean_b,
                                double var_b, double level);
Interval RelativeChangeInterval(std::span<const double> a, std::span<const double> b, double level);

// The magnitude rule on the interval, not on the point estimate: a true
// change of exactly the threshold measures below it half the time, so the
// point estimate would lose half of the changes at the threshold. kBelow:
// every plausible |change| is under `magnitude` (the change is real but
// small); kAbove: every plausible |change| is at least `magnitude`;
// kReaches: the interval holds the threshold.
enum class MagnitudeCall { kBelow, kReaches, kAbove };
MagnitudeCall JudgeMagnitude(const Interval& relative_change, double magnitude);

// Benjamini-Hochberg step-up procedure at false discovery rate q over the
// m hypotheses whose p-values are given: with p sorted ascending, the k
// smallest are rejected for the largest k with p_(k) <= k q / m. Returns
// k q / m (0 when nothing is rejected): hypothesis i is rejected exactly when
// p[i] <= that threshold, so it also serves as the per-hypothesis alpha.
double BenjaminiHochbergThreshold(std::span<const double> p, double q);
// Per hypothesis: rejected by Benjamini-Hochberg at q.
std::vector<bool> BenjaminiHochberg(std::span<const double> p, double q);

// The adaptive-sampling decision on one comparison of two commits (Pinpoint
// style: few repeats first, more only while the comparison is undecided).
//   kReject: the interval lies under the magnitude (real or not, the change
//            is too small to matter), or the repeats are at the cap;
//   kAccept: p < alpha and the interval reaches the magnitude;
//   kMoreRepeats: undecided (p >= alpha, the interval still reaching the
//            magnitude) with repeats below max_repeats: run the two commits
//            again, doubling their repeats.
// There is no looser p under which the doubling stops: a 5% change at CV 5%
// measured 8 times per side gives p above 0.1 about two times in five, and
// more repeats settle it either way: without a change, the interval narrows
// under the magnitude (at CV 5% and a 3% magnitude, by 64 repeats per side).
enum class SampleDecision { kReject, kAccept, kMoreRepeats };
const char* SampleDecisionName(SampleDecision d);  // "reject", "accept", "more-repeats"
SampleDecision DecideWithRepeats(double p_value, MagnitudeCall magnitude, double alpha, int repeats,
                                 int max_repeats);

}  // namespace farm::stats

#endif  // LIB_STATS_STATS_H_
