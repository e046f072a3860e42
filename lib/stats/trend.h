// lib/stats/trend: a trend within one run's series (its metric per interval
// of the run, in time order): the Mann-Kendall test of a monotone trend and
// the Theil-Sen line, and the decay rule the analyzer raises a `decay`
// finding by (services/analyzer/decay.h).
//
// Both are rank based: one interval far off (a stall, a timer) moves
// neither much, and Mann-Kendall judges the trend against the series' own
// scatter, so a noisy steady run is not a decay.
//
// Pure functions over value vectors; no state, thread-safe. The normal tail
// is Boost.Math's.
#ifndef LIB_STATS_TREND_H_
#define LIB_STATS_TREND_H_

#include <cstdint>
#include <span>
#include <vector>

namespace farm::stats {

// Mann-Kendall (Mann 1945, Kendall 1975): S = sum over i < j of
// sign(x_j - x_i). The one-sided p of a falling trend is P(S' <= S) under
// no trend: from the exact null distribution of S (Kendall's, by counting
// permutations by their inversions) when there are no ties and at most
// kExactTrendMax values, else from the normal approximation with the
// tie-corrected variance n(n-1)(2n+5)/18 - sum over ties t(t-1)(2t+5)/18
// and a continuity correction of 1. Fewer than 3 values: p = 1.
inline constexpr int kExactTrendMax = 50;
struct MannKendallResult {
  int n = 0;
  int64_t s = 0;
  double p_falling = 1;  // one-sided: a falling trend
  double p_rising = 1;   // one-sided: a rising trend
};
MannKendallResult MannKendall(std::span<const double> x);

// The Theil-Sen line (Theil 1950, Sen 1968) through (i, x_i): the slope is
// the median of the pairwise slopes (x_j - x_i) / (j - i), the intercept
// the median of x_i - slope i. `relative_change` is the line's change over
// the run, slope (n - 1), over |intercept| (the line at the first interval):
// -0.2 is a run that ends 20% below where it started. `noise` is the
// residuals' robust scatter (1.4826 x their median absolute value) over
// |intercept|. Fewer than 2 values, or an intercept of 0: all 0.
struct TheilSenLine {
  double slope = 0;
  double intercept = 0;
  double relative_change = 0;
  double noise = 0;
};
TheilSenLine TheilSen(std::span<const double> x);

// The decay rule: a series decays when Mann-Kendall finds a falling trend
// at p < alpha and the Theil-Sen line falls by at least `magnitude` of its
// start (relative_change <= -magnitude) and by more than `noise_factor`
// times the residuals' scatter, so a drift inside the run's own noise is
// not a decay however many intervals make it significant.
inline constexpr double kDecayNoiseFactor = 3;
struct DecayVerdict {
  bool decays = false;
  MannKendallResult trend;
  TheilSenLine line;
};
DecayVerdict JudgeDecay(std::span<const double> x, double magnitude, double alpha,
                        double noise_factor = kDecayNoiseFactor);

// The per-interval median of several runs' series (the shortest run's
// length): one series for the runs of one configuration, which one odd run
// does not move.
std::vector<double> MedianSeries(const std::vector<std::vector<double>>& runs);

}  // namespace farm::stats

#endif  // LIB_STATS_TREND_H_
