// Two-sample statistics used by detection and bisection.
//
// Pure functions over value vectors; no state, thread-safe. Distributions
// (Student's t, normal) come from Boost.Math so that tail probabilities are
// the library's, not hand-written approximations.
#ifndef SERVICES_ANALYZER_STATS_H_
#define SERVICES_ANALYZER_STATS_H_

#include <span>
#include <vector>

namespace farm::analyzer {

double Mean(std::span<const double> x);
// Unbiased sample variance; 0 for fewer than two values.
double Variance(std::span<const double> x);

struct TwoSampleResult {
  double mean_a = 0;
  double mean_b = 0;
  // (mean_b - mean_a) / |mean_a|; 0 when mean_a is 0.
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

// Mann-Whitney U test with normal approximation and tie correction,
// two-sided. Robust to outliers; used as a second opinion.
TwoSampleResult MannWhitneyTest(std::span<const double> a, std::span<const double> b);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_STATS_H_
