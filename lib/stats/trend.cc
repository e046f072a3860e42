#include "lib/stats/trend.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <boost/math/distributions/normal.hpp>

#include "lib/stats/stats.h"

namespace farm::stats {
namespace {

// Number of permutations of n items with k inversions, k = 0..n(n-1)/2
// (Mahonian numbers), as doubles: n <= kExactTrendMax keeps them finite.
std::vector<double> InversionCounts(int n) {
  std::vector<double> counts = {1};
  for (int m = 2; m <= n; ++m) {
    // Inserting the m-th item adds 0..m-1 inversions.
    std::vector<double> next(counts.size() + static_cast<size_t>(m) - 1, 0);
    for (size_t k = 0; k < counts.size(); ++k) {
      for (int add = 0; add < m; ++add) next[k + static_cast<size_t>(add)] += counts[k];
    }
    counts = std::move(next);
  }
  return counts;
}

// P(S' <= s) and P(S' >= s) under no trend, without ties: S = P - Q with
// P + Q = n(n-1)/2 pairs, Q the inversions.
void ExactTails(int n, int64_t s, double* le, double* ge) {
  const std::vector<double> counts = InversionCounts(n);
  const int64_t pairs = static_cast<int64_t>(n) * (n - 1) / 2;
  double total = 0, below = 0, above = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    const int64_t sq = pairs - 2 * static_cast<int64_t>(q);
    total += counts[q];
    if (sq <= s) below += counts[q];
    if (sq >= s) above += counts[q];
  }
  *le = below / total;
  *ge = above / total;
}

}  // namespace

MannKendallResult MannKendall(std::span<const double> x) {
  MannKendallResult r;
  r.n = static_cast<int>(x.size());
  if (r.n < 3) return r;
  for (size_t i = 0; i < x.size(); ++i) {
    for (size_t j = i + 1; j < x.size(); ++j) r.s += (x[j] > x[i]) - (x[j] < x[i]);
  }
  std::map<double, int> groups;
  for (double v : x) ++groups[v];
  double tie_term = 0;
  for (const auto& [v, t] : groups) tie_term += static_cast<double>(t) * (t - 1) * (2 * t + 5);
  const bool ties = groups.size() < x.size();
  if (!ties && r.n <= kExactTrendMax) {
    ExactTails(r.n, r.s, &r.p_falling, &r.p_rising);
    return r;
  }
  const double n = r.n;
  const double var = (n * (n - 1) * (2 * n + 5) - tie_term) / 18.0;
  if (var <= 0) return r;  // every value equal: no trend
  const boost::math::normal normal;
  const double sd = std::sqrt(var);
  const double s = static_cast<double>(r.s);
  r.p_falling = boost::math::cdf(normal, (s + 1) / sd);
  r.p_rising = boost::math::cdf(boost::math::complement(normal, (s - 1) / sd));
  return r;
}

TheilSenLine TheilSen(std::span<const double> x) {
  TheilSenLine line;
  const size_t n = x.size();
  if (n < 2) return line;
  std::vector<double> slopes;
  slopes.reserve(n * (n - 1) / 2);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      slopes.push_back((x[j] - x[i]) / static_cast<double>(j - i));
    }
  }
  line.slope = Median(slopes);
  std::vector<double> at_zero(n);
  for (size_t i = 0; i < n; ++i) at_zero[i] = x[i] - line.slope * static_cast<double>(i);
  line.intercept = Median(at_zero);
  if (line.intercept == 0) return TheilSenLine{};
  const double level = std::fabs(line.intercept);
  line.relative_change = line.slope * static_cast<double>(n - 1) / level;
  std::vector<double> residuals(n);
  for (size_t i = 0; i < n; ++i) residuals[i] = std::fabs(at_zero[i] - line.intercept);
  line.noise = 1.4826 * Median(residuals) / level;
  return line;
}

DecayVerdict JudgeDecay(std::span<const double> x, double magnitude, double alpha,
                        double noise_factor) {
  DecayVerdict v;
  v.trend = MannKendall(x);
  v.line = TheilSen(x);
  v.decays = v.trend.p_falling < alpha && v.line.relative_change <= -magnitude &&
             -v.line.relative_change > noise_factor * v.line.noise;
  return v;
}

std::vector<double> MedianSeries(const std::vector<std::vector<double>>& runs) {
  if (runs.empty()) return {};
  size_t n = runs.front().size();
  for (const std::vector<double>& r : runs) n = std::min(n, r.size());
  std::vector<double> out(n);
  std::vector<double> column;
  for (size_t i = 0; i < n; ++i) {
    column.clear();
    for (const std::vector<double>& r : runs) column.push_back(r[i]);
    out[i] = Median(column);
  }
  return out;
}

}  // namespace farm::stats
