#include "lib/stats/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/complement.hpp>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <boost/math/special_functions/binomial.hpp>

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

PooledVariance PoolWithinVariance(std::span<const std::span<const double>> groups) {
  PooledVariance p;
  double ss = 0;
  for (std::span<const double> g : groups) {
    if (g.size() < 2) continue;
    const double df = static_cast<double>(g.size() - 1);
    ss += Variance(g) * df;
    p.df += df;
  }
  p.variance = p.df > 0 ? ss / p.df : 0;
  return p;
}

TwoSampleResult PooledContrast(std::span<const double> a, std::span<const double> b,
                               const PooledVariance& pooled) {
  return ContrastFromSummary(static_cast<double>(a.size()), Mean(a), static_cast<double>(b.size()),
                             Mean(b), pooled.variance, pooled.df);
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

double Median(std::span<const double> x) {
  if (x.empty()) return 0;
  std::vector<double> v(x.begin(), x.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

namespace {

std::vector<double> Sorted(std::span<const double> x) {
  std::vector<double> v(x.begin(), x.end());
  std::sort(v.begin(), v.end());
  return v;
}

// floor(trim n), never past the middle.
size_t TrimCount(size_t n, double trim) {
  const size_t g =
      static_cast<size_t>(std::floor(std::clamp(trim, 0.0, 0.5) * static_cast<double>(n)));
  return n == 0 ? 0 : std::min(g, (n - 1) / 2);
}

// Yuen's squared standard error of a trimmed mean, (n - 1) s_w^2 / (h (h - 1)),
// and the trimmed count h; h < 2 gives no error estimate (d < 0).
struct TrimmedSummary {
  double mean = 0;
  double d = -1;
  double h = 0;
};
TrimmedSummary Trimmed(std::span<const double> x, double trim) {
  TrimmedSummary t;
  t.mean = TrimmedMean(x, trim);
  const double n = static_cast<double>(x.size());
  t.h = n - 2 * static_cast<double>(TrimCount(x.size(), trim));
  if (t.h >= 2) t.d = (n - 1) * WinsorizedVariance(x, trim) / (t.h * (t.h - 1));
  return t;
}

}  // namespace

double TrimmedMean(std::span<const double> x, double trim) {
  if (x.empty()) return 0;
  const std::vector<double> v = Sorted(x);
  const size_t g = TrimCount(v.size(), trim);
  return Mean(std::span<const double>(v).subspan(g, v.size() - 2 * g));
}

double WinsorizedVariance(std::span<const double> x, double trim) {
  std::vector<double> v = Sorted(x);
  const size_t g = TrimCount(v.size(), trim);
  if (g > 0) {
    std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(g), v[g]);
    std::fill(v.end() - static_cast<std::ptrdiff_t>(g), v.end(), v[v.size() - g - 1]);
  }
  return Variance(v);
}

TwoSampleResult YuenTest(std::span<const double> a, std::span<const double> b, double trim) {
  const TrimmedSummary ta = Trimmed(a, trim), tb = Trimmed(b, trim);
  TwoSampleResult r;
  r.mean_a = ta.mean;
  r.mean_b = tb.mean;
  r.relative_change = Relative(ta.mean, tb.mean);
  if (ta.d < 0 || tb.d < 0) return r;
  // Welch's test on the trimmed summaries: the same degenerate cases (no
  // spread) and the same overflow guards.
  const TwoSampleResult w =
      WelchFromSummary(ta.h, ta.mean, ta.d * ta.h, tb.h, tb.mean, tb.d * tb.h);
  r.statistic = w.statistic;
  r.p_value = w.p_value;
  return r;
}

double HodgesLehmannShift(std::span<const double> a, std::span<const double> b) {
  if (a.empty() || b.empty()) return 0;
  std::vector<double> d;
  d.reserve(a.size() * b.size());
  for (double y : b)
    for (double x : a) d.push_back(y - x);
  return Median(d);
}

TwoSampleResult RankShiftTest(std::span<const double> a, std::span<const double> b) {
  TwoSampleResult r = MannWhitneyTest(a, b);
  r.mean_a = Median(a);
  r.mean_b = r.mean_a + HodgesLehmannShift(a, b);
  r.relative_change = Relative(r.mean_a, r.mean_b);
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

Interval YuenRelativeChangeInterval(std::span<const double> a, std::span<const double> b,
                                    double level, double trim) {
  const TrimmedSummary ta = Trimmed(a, trim), tb = Trimmed(b, trim);
  if (ta.d < 0 || tb.d < 0) {
    if (ta.mean == 0) return {Relative(ta.mean, tb.mean), Relative(ta.mean, tb.mean)};
    return {-INFINITY, INFINITY};
  }
  // Welch's interval over the trimmed summaries: d h plays the variance.
  return RelativeChangeInterval(ta.h, ta.mean, ta.d * ta.h, tb.h, tb.mean, tb.d * tb.h, level);
}

namespace {

// P(U <= u) for every u of the Mann-Whitney U of samples of m and n values
// without ties: the coefficients of the Gaussian binomial [m + n choose m]
// in q, built as prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), over C(m + n, m).
std::vector<double> MannWhitneyCdf(int m, int n) {
  const int top = m * n;
  std::vector<long double> c(static_cast<size_t>(top) + 1, 0);
  c[0] = 1;
  int degree = 0;
  for (int i = 1; i <= m; ++i) {
    // Times (1 - q^(n+i)).
    const int shift = n + i;
    degree += n;  // the product so far is [n+i choose i], of degree i n
    for (int k = degree; k >= shift; --k)
      c[static_cast<size_t>(k)] -= c[static_cast<size_t>(k - shift)];
    // Over (1 - q^i): a running sum with stride i.
    for (int k = i; k <= degree; ++k) c[static_cast<size_t>(k)] += c[static_cast<size_t>(k - i)];
  }
  const long double total = boost::math::binomial_coefficient<long double>(
      static_cast<unsigned>(m + n), static_cast<unsigned>(m));
  std::vector<double> cdf(c.size());
  long double run = 0;
  for (size_t u = 0; u < c.size(); ++u) {
    run += c[u];
    cdf[u] = static_cast<double>(run / total);
  }
  return cdf;
}

bool HasTies(std::span<const double> a, std::span<const double> b) {
  std::vector<double> all(a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) != all.end();
}

}  // namespace

int HodgesLehmannRank(int n_a, int n_b, double level, bool exact) {
  const double tail = (1 - level) / 2;
  const int mn = n_a * n_b;
  int c = 0;
  if (exact) {
    // R's qwilcox(tail, n_a, n_b): the smallest u with P(U <= u) >= tail.
    const std::vector<double> cdf = MannWhitneyCdf(n_a, n_b);
    while (c < mn && cdf[static_cast<size_t>(c)] < tail) ++c;
  } else {
    // The same quantile from the normal approximation with continuity
    // correction (Hollander & Wolfe's large-sample C).
    const double sd = std::sqrt(static_cast<double>(mn) * (n_a + n_b + 1) / 12);
    const double z = boost::math::quantile(boost::math::complement(boost::math::normal(), tail));
    c = static_cast<int>(std::floor(mn / 2.0 - z * sd + 0.5));
  }
  return std::clamp(c, 1, std::max(1, (mn + 1) / 2));
}

Interval HodgesLehmannRelativeInterval(std::span<const double> a, std::span<const double> b,
                                       double level) {
  if (a.empty() || b.empty()) return {-INFINITY, INFINITY};
  const double base = Median(a);
  std::vector<double> d;
  d.reserve(a.size() * b.size());
  for (double y : b)
    for (double x : a) d.push_back(y - x);
  std::sort(d.begin(), d.end());
  const int n_a = static_cast<int>(a.size()), n_b = static_cast<int>(b.size());
  const bool exact = n_a < 50 && n_b < 50 && !HasTies(a, b);
  const int c = HodgesLehmannRank(n_a, n_b, level, exact);
  const double lo = d[static_cast<size_t>(c - 1)];
  const double hi = d[d.size() - static_cast<size_t>(c)];
  if (base == 0) return {Relative(0, lo), Relative(0, hi)};
  return {lo / std::fabs(base), hi / std::fabs(base)};
}

const char* NoiseShapeName(NoiseShape s) {
  switch (s) {
    case NoiseShape::kOutliers:
      return "outliers";
    case NoiseShape::kBimodal:
      return "bimodal";
    case NoiseShape::kGaussian:
      break;
  }
  return "gaussian";
}

NoiseDiagnosis DiagnoseNoise(std::span<const std::span<const double>> groups) {
  NoiseDiagnosis d;
  std::vector<double> from_median;
  double m2 = 0, m4 = 0, n = 0;
  for (std::span<const double> g : groups) {
    // Two values sit symmetrically about their median and mean: no shape.
    if (g.size() < 3) continue;
    const double med = Median(g), mean = Mean(g);
    bool skipped_median = false;
    for (double v : g) {
      // The median of an odd group is its own residual of 0: left out, it
      // would shrink the scale by a group's share.
      if (v == med && g.size() % 2 == 1 && !skipped_median) {
        skipped_median = true;
      } else {
        from_median.push_back(std::fabs(v - med));
      }
      const double e2 = (v - mean) * (v - mean);
      n += 1;
      m2 += e2;
      m4 += e2 * e2;
    }
  }
  d.residuals = static_cast<int>(from_median.size());
  if (d.residuals < kMinDiagnosed || m2 <= 0) return d;
  d.robust_sd = 1.4826 * Median(from_median);
  d.kurtosis = n * m4 / (m2 * m2);
  for (double r : from_median) d.outliers += d.robust_sd > 0 && r > kOutlierSds * d.robust_sd;
  if (d.outliers > 0) {
    d.shape = NoiseShape::kOutliers;
  } else if (n >= kMinBimodal && d.kurtosis < kBimodalKurtosis) {
    d.shape = NoiseShape::kBimodal;
  }
  return d;
}

const char* TwoSampleMethodName(TwoSampleMethod m) {
  switch (m) {
    case TwoSampleMethod::kYuen:
      return "yuen";
    case TwoSampleMethod::kRank:
      return "rank";
    case TwoSampleMethod::kWelch:
      break;
  }
  return "welch";
}

TwoSampleMethod MethodFor(NoiseShape shape) {
  switch (shape) {
    case NoiseShape::kOutliers:
      return TwoSampleMethod::kYuen;
    case NoiseShape::kBimodal:
    case NoiseShape::kGaussian:
      break;
  }
  return TwoSampleMethod::kWelch;
}

Comparison Compare(std::span<const double> a, std::span<const double> b, double level,
                   TwoSampleMethod method) {
  Comparison c;
  c.method = method;
  switch (method) {
    case TwoSampleMethod::kYuen:
      c.test = YuenTest(a, b);
      c.interval = YuenRelativeChangeInterval(a, b, level);
      break;
    case TwoSampleMethod::kRank:
      c.test = RankShiftTest(a, b);
      c.interval = HodgesLehmannRelativeInterval(a, b, level);
      break;
    case TwoSampleMethod::kWelch:
      c.test = WelchTTest(a, b);
      c.interval = RelativeChangeInterval(a, b, level);
      break;
  }
  return c;
}

Comparison CompareByNoise(std::span<const double> a, std::span<const double> b, double level) {
  const std::span<const double> groups[] = {a, b};
  return Compare(a, b, level, MethodFor(DiagnoseNoise(groups).shape));
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
