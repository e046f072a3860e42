#include "lib/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/complement.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>

namespace farm::stats {

double Mean(std::span<const double> x) {
  if (x.empty()) return 0;
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double Variance(std::span<const double> x) {
  if (x.size() < 2) return 0;
  const double m = Mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return ss / static_cast<double>(x.size() - 1);
}

namespace {

double Relative(double a, double b) {
  if (a == 0) return b == 0 ? 0 : std::copysign(kFromZero, b);
  return (b - a) / std::fabs(a);
}

// Welch-Satterthwaite's degrees of freedom, kept where Boost accepts them:
// variances that overflowed (values near the double's range) give NaN or
// infinity, which Boost's Student's t refuses with an exception; the pooled
// count stands in then.
double UsableDf(double se2, double denom, double n_a, double n_b) {
  const double df = denom > 0 ? se2 * se2 / denom : n_a + n_b - 2;
  if (!std::isfinite(df)) return std::max(1.0, n_a + n_b - 2);
  return std::max(df, 1.0);
}

// The two-sided p of `t` under Student's t with `df`; 1 (no evidence) for a
// statistic that is not a number (infinite variance over an infinite
// difference) or degrees of freedom Boost would refuse.
double TwoSidedP(double t, double df) {
  if (std::isnan(t) || !std::isfinite(df) || df <= 0) return 1;
  boost::math::students_t dist(df);
  return std::min(1.0, 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(t))));
}

}  // namespace

TwoSampleResult WelchFromSummary(double n_a, double mean_a, double var_a, double n_b, double mean_b,
                                 double var_b) {
  TwoSampleResult r;
  r.mean_a = mean_a;
  r.mean_b = mean_b;
  r.relative_change = Relative(mean_a, mean_b);
  if (n_a < 2 || n_b < 2) return r;
  const double va = std::max(var_a, 0.0) / n_a;
  const double vb = std::max(var_b, 0.0) / n_b;
  const double se2 = va + vb;
  const double diff = mean_b - mean_a;
  // Identical constant samples arise from deterministic emulator runs; the
  // means alone then decide, with a tiny tolerance for float noise.
  const double scale = std::max({std::fabs(mean_a), std::fabs(mean_b), 1e-300});
  // Compared as standard errors: squaring a scale near the double's range
  // would overflow and take any variance for none.
  if (std::sqrt(se2) <= 1e-12 * scale) {
    if (std::fabs(diff) <= 1e-12 * scale) return r;
    r.statistic = diff > 0 ? INFINITY : -INFINITY;
    r.p_value = 0;
    return r;
  }
  const double t = diff / std::sqrt(se2);
  const double denom = va * va / (n_a - 1) + vb * vb / (n_b - 1);
  r.statistic = t;
  r.p_value = TwoSidedP(t, UsableDf(se2, denom, n_a, n_b));
  return r;
}

TwoSampleResult ContrastFromSummary(double n_a, double mean_a, double n_b, double mean_b,
                                    double variance, double df) {
  TwoSampleResult r;
  r.mean_a = mean_a;
  r.mean_b = mean_b;
  r.relative_change = Relative(mean_a, mean_b);
  if (n_a < 1 || n_b < 1 || df < 1) return r;
  const double se2 = std::max(variance, 0.0) * (1 / n_a + 1 / n_b);
  const double diff = mean_b - mean_a;
  const double scale = std::max({std::fabs(mean_a), std::fabs(mean_b), 1e-300});
  // Compared as standard errors: squaring a scale near the double's range
  // would overflow and take any variance for none.
  if (std::sqrt(se2) <= 1e-12 * scale) {
    if (std::fabs(diff) <= 1e-12 * scale) return r;
    r.statistic = diff > 0 ? INFINITY : -INFINITY;
    r.p_value = 0;
    return r;
  }
  const double t = diff / std::sqrt(se2);
  r.statistic = t;
  r.p_value = TwoSidedP(t, df);
  return r;
}

TwoSampleResult WelchTTest(std::span<const double> a, std::span<const double> b) {
  return WelchFromSummary(static_cast<double>(a.size()), Mean(a), Variance(a),
                          static_cast<double>(b.size()), Mean(b), Variance(b));
}

TwoSampleResult MannWhitneyTest(std::span<const double> a, std::span<const double> b) {
  TwoSampleResult r;
  r.mean_a = Mean(a);
  r.mean_b = Mean(b);
  r.relative_change = Relative(r.mean_a, r.mean_b);
  if (a.empty() || b.empty()) return r;
  struct Item {
    double v;
    bool from_a;
  };
  std::vector<Item> all;
  all.reserve(a.size() + b.size());
  for (double v : a) all.push_back({v, true});
  for (double v : b) all.push_back({v, false});
  std::sort(all.begin(), all.end(), [](const Item& x, const Item& y) { return x.v < y.v; });
  const double n = static_cast<double>(all.size());
  double rank_sum_a = 0;
  double tie_term = 0;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].v == all[i].v) ++j;
    const double avg_rank = (static_cast<double>(i + j) + 1) / 2;  // ranks are 1-based
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k)
      if (all[k].from_a) rank_sum_a += avg_rank;
    i = j;
  }
  const double na = static_cast<double>(a.size());
  const double nb = static_cast<double>(b.size());
  const double u = rank_sum_a - na * (na + 1) / 2;
  const double mu = na * nb / 2;
  const double sigma2 = na * nb / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (sigma2 <= 0) return r;
  // Continuity correction toward the mean. Sign: positive when b ranks higher.
  const double d = mu - u;
  const double z = (d - (d > 0 ? 0.5 : d < 0 ? -0.5 : 0)) / std::sqrt(sigma2);
  boost::math::normal norm;
  r.statistic = z;
  r.p_value = std::min(1.0, 2 * boost::math::cdf(boost::math::complement(norm, std::fabs(z))));
  return r;
}

Interval RelativeChangeInterval(double n_a, double mean_a, double var_a, double n_b, double mean_b,
                                double var_b, double level) {
  const double rel = Relative(mean_a, mean_b);
  // From a zero baseline the change has no relative size to be unsure of:
  // none when the after mean is 0 too, else kFromZero.
  if (mean_a == 0) return {rel, rel};
  if (n_a < 2 || n_b < 2) return {-INFINITY, INFINITY};
  const double va = std::max(var_a, 0.0) / n_a;
  const double vb = std::max(var_b, 0.0) / n_b;
  const double se2 = va + vb;
  if (se2 <= 0) return {rel, rel};
  const double denom = va * va / (n_a - 1) + vb * vb / (n_b - 1);
  boost::math::students_t dist(UsableDf(se2, denom, n_a, n_b));
  const double q = boost::math::quantile(boost::math::complement(dist, (1 - level) / 2));
  const double half = q * std::sqrt(se2) / std::fabs(mean_a);
  return {rel - half, rel + half};
}

Interval RelativeChangeInterval(std::span<const double> a, std::span<const double> b,
                                double level) {
  return RelativeChangeInterval(static_cast<double>(a.size()), Mean(a), Variance(a),
                                static_cast<double>(b.size()), Mean(b), Variance(b), level);
}

MagnitudeCall JudgeMagnitude(const Interval& ci, double magnitude) {
  const double upper = std::max(std::fabs(ci.lo), std::fabs(ci.hi));
  const double lower =
      (ci.lo <= 0 && ci.hi >= 0) ? 0 : std::min(std::fabs(ci.lo), std::fabs(ci.hi));
  if (upper < magnitude) return MagnitudeCall::kBelow;
  if (lower >= magnitude) return MagnitudeCall::kAbove;
  return MagnitudeCall::kReaches;
}

double BenjaminiHochbergThreshold(std::span<const double> p, double q) {
  // A NaN p (a test over values that overflowed) rejects nothing; sorted as
  // it is it would break the sort's ordering, which may then read past the
  // array.
  std::vector<double> sorted;
  sorted.reserve(p.size());
  for (double v : p) sorted.push_back(std::isnan(v) ? 1.0 : v);
  std::sort(sorted.begin(), sorted.end());
  const double m = static_cast<double>(sorted.size());
  double threshold = 0;
  for (size_t k = 1; k <= sorted.size(); ++k) {
    const double line = static_cast<double>(k) * q / m;
    if (sorted[k - 1] <= line) threshold = line;
  }
  return threshold;
}

std::vector<bool> BenjaminiHochberg(std::span<const double> p, double q) {
  const double t = BenjaminiHochbergThreshold(p, q);
  std::vector<bool> out;
  out.reserve(p.size());
  for (double v : p) out.push_back(t > 0 && v <= t);
  return out;
}

const char* SampleDecisionName(SampleDecision d) {
  switch (d) {
    case SampleDecision::kAccept:
      return "accept";
    case SampleDecision::kMoreRepeats:
      return "more-repeats";
    case SampleDecision::kReject:
      break;
  }
  return "reject";
}

SampleDecision DecideWithRepeats(double p_value, MagnitudeCall magnitude, double alpha, int repeats,
                                 int max_repeats) {
  if (magnitude == MagnitudeCall::kBelow) return SampleDecision::kReject;
  if (p_value < alpha) return SampleDecision::kAccept;
  return repeats < max_repeats ? SampleDecision::kMoreRepeats : SampleDecision::kReject;
}

}  // namespace farm::stats
