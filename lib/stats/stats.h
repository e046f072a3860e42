// lib/stats: the two-sample statistics the analyzer detects, confirms and
// bisects with, and farmctl compare reports: Welch's and Student's t,
// Mann-Whitney with the Hodges-Lehmann shift and its interval, Yuen's
// trimmed t, the noise diagnosis that picks among them, the interval of a
// relative change and the magnitude rule on it, Benjamini-Hochberg, the
// adaptive-repeat decision.
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

// The run-to-run variance pooled over groups of repeats of one
// configuration each (one-way ANOVA's within-group mean square: the sum of
// (n_i - 1) s_i^2 over the sum of (n_i - 1)) and those degrees of freedom.
// A group of fewer than two values adds nothing. Shifts between the groups
// do not enter it.
struct PooledVariance {
  double variance = 0;
  double df = 0;
};
PooledVariance PoolWithinVariance(std::span<const std::span<const double>> groups);

// The means of a and b compared with a variance pooled over them and maybe
// other groups of the same noise (ContrastFromSummary at its df). Where one
// side holds a few runs and the other many, Welch's test takes its standard
// error and degrees of freedom mostly from the few: runs that fall in two
// levels (bimodal noise) put 6 runs mostly in one level often enough that
// Welch's 6 against 32 rejects at 1% about 3% of the time; the pooled
// contrast keeps its level (docs/analyzer.md, "Bisect steps").
TwoSampleResult PooledContrast(std::span<const double> a, std::span<const double> b,
                               const PooledVariance& pooled);

// Mann-Whitney U test with normal approximation and tie correction,
// two-sided. Robust to outliers; used as a second opinion.
TwoSampleResult MannWhitneyTest(std::span<const double> a, std::span<const double> b);

double Median(std::span<const double> x);  // 0 for no values

// Yuen's test of trimmed means (Yuen 1974; as R WRS's yuen(), Wilcox,
// "Introduction to Robust Estimation and Hypothesis Testing", ch. 5):
// floor(trim n) values cut from each end of each sample, the difference of
// the trimmed means over the winsorized variances' standard error, Student's
// t at Welch-Satterthwaite degrees of freedom over the trimmed counts.
// mean_a / mean_b are the trimmed means, relative_change their relative
// difference. Fewer than two values left after trimming on a side: p = 1.
// trim 0 is Welch's test.
inline constexpr double kYuenTrim = 0.2;
double TrimmedMean(std::span<const double> x, double trim);
// Sample variance of x with its floor(trim n) lowest values raised to the
// next and its highest lowered likewise.
double WinsorizedVariance(std::span<const double> x, double trim);
TwoSampleResult YuenTest(std::span<const double> a, std::span<const double> b,
                         double trim = kYuenTrim);

// The Hodges-Lehmann estimate of the shift of b against a: the median of
// the n_a n_b differences b_j - a_i.
double HodgesLehmannShift(std::span<const double> a, std::span<const double> b);

// The Mann-Whitney test read as a shift: statistic and p of
// MannWhitneyTest, mean_a the median of a, mean_b mean_a plus the
// Hodges-Lehmann shift, relative_change that shift over |median of a|
// (+-kFromZero from a median of 0).
TwoSampleResult RankShiftTest(std::span<const double> a, std::span<const double> b);

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

// Yuen's interval of the trimmed-mean difference over |trimmed mean of a|.
Interval YuenRelativeChangeInterval(std::span<const double> a, std::span<const double> b,
                                    double level, double trim = kYuenTrim);

// The distribution-free interval of the Hodges-Lehmann shift (Moses;
// Hollander & Wolfe, "Nonparametric Statistical Methods", 3.3; what R's
// wilcox.test(conf.int = TRUE) gives): order statistics C and n_a n_b + 1 - C
// of the differences b_j - a_i, C from the exact Mann-Whitney null
// distribution when both samples hold under 50 values and there are no ties
// (as R), else from its normal approximation; over |median of a|. Covers at
// least `level` (exact) or about it (normal). Empty sample: (-inf, +inf).
Interval HodgesLehmannRelativeInterval(std::span<const double> a, std::span<const double> b,
                                       double level);
// The order statistic C above (1-based), for the tests.
int HodgesLehmannRank(int n_a, int n_b, double level, bool exact);

// What a comparison's noise looks like, measured on groups of repeats of
// one configuration each (a commit's runs): residuals from each group's
// median, scaled by their median absolute deviation (x 1.4826, a normal's
// standard deviation).
//   kOutliers: some residual lies beyond kOutlierSds of those robust
//     standard deviations: a disturbed run, which Gaussian noise at the
//     farm's sample sizes (hundreds of runs) essentially never gives;
//   kBimodal: no such residual, and the residuals' kurtosis (from the group
//     means) is under kBimodalKurtosis over at least kMinBimodal of them:
//     runs falling into two levels (two cache or NUMA placements) rather
//     than around one (a kurtosis over fewer values is too noisy to tell,
//     and a rank test over a handful of runs has little power);
//   kGaussian: neither, or too few residuals to tell (under kMinDiagnosed).
enum class NoiseShape { kGaussian, kOutliers, kBimodal };
const char* NoiseShapeName(NoiseShape s);  // "gaussian", "outliers", "bimodal"
inline constexpr double kOutlierSds = 5;
inline constexpr double kBimodalKurtosis = 2.2;
inline constexpr int kMinDiagnosed = 16;
inline constexpr int kMinBimodal = 48;
struct NoiseDiagnosis {
  NoiseShape shape = NoiseShape::kGaussian;
  int residuals = 0;
  int outliers = 0;      // residuals beyond kOutlierSds robust sds
  double robust_sd = 0;  // 1.4826 x median |residual from the group median|
  double kurtosis = 3;   // of the residuals from the group means
};
NoiseDiagnosis DiagnoseNoise(std::span<const std::span<const double>> groups);

// The comparison a noise shape calls for: Welch on means for Gaussian
// noise (the most efficient there) and for bimodal runs (two levels of a
// bounded spread: on the quality bench's bimodal series a rank test lost 1
// to 2 points of recall against means, docs/analyzer.md); Yuen's trimmed
// means under outliers (a run eight sds off moves a mean and inflates a
// variance, not a 20% trimmed mean). kRank (Mann-Whitney with the
// Hodges-Lehmann shift) is there for a caller that asks for it.
enum class TwoSampleMethod { kWelch, kYuen, kRank };
const char* TwoSampleMethodName(TwoSampleMethod m);  // "welch", "yuen", "rank"
TwoSampleMethod MethodFor(NoiseShape shape);

// One comparison of a against b by `method`: the test and the interval (at
// `level`) of the relative change the method estimates.
struct Comparison {
  TwoSampleMethod method = TwoSampleMethod::kWelch;
  TwoSampleResult test;
  Interval interval;
};
Comparison Compare(std::span<const double> a, std::span<const double> b, double level,
                   TwoSampleMethod method);
// Compare with the method the noise of a and b (two groups) calls for.
Comparison CompareByNoise(std::span<const double> a, std::span<const double> b, double level);

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
