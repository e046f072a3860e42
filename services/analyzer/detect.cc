#include "services/analyzer/detect.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <span>
#include <tuple>
#include <utility>

#include <boost/math/distributions/chi_squared.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/names.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {
namespace {

// Prefix sums over the points of a series so every split is O(1).
class PrefixStats {
 public:
  explicit PrefixStats(const Series& s) {
    n_.push_back(0);
    sum_.push_back(0);
    sq_.push_back(0);
    // Shift by the first value keeps the sum of squares well conditioned.
    shift_ = s.points.empty() || s.points[0].values.empty() ? 0 : s.points[0].values[0];
    within_.push_back(0);
    within_df_.push_back(0);
    for (const SeriesPoint& p : s.points) {
      double n = n_.back(), sum = sum_.back(), sq = sq_.back();
      for (double v : p.values) {
        n += 1;
        sum += v - shift_;
        sq += (v - shift_) * (v - shift_);
      }
      n_.push_back(n);
      sum_.push_back(sum);
      sq_.push_back(sq);
      within_.push_back(within_.back() +
                        Variance(p.values) *
                            (p.values.size() < 2 ? 0.0 : static_cast<double>(p.values.size() - 1)));
      within_df_.push_back(within_df_.back() +
                           (p.values.size() < 2 ? 0.0 : static_cast<double>(p.values.size() - 1)));
    }
  }
  // Within-commit variance pooled over points [lo, hi) and its degrees of
  // freedom: the run-to-run noise, untouched by any shift between commits.
  double WithinDf(size_t lo, size_t hi) const { return within_df_[hi] - within_df_[lo]; }
  double WithinVar(size_t lo, size_t hi) const {
    const double df = WithinDf(lo, hi);
    return df <= 0 ? 0 : std::max(0.0, within_[hi] - within_[lo]) / df;
  }
  // Repeats give the noise level directly; then two groups of commits are
  // compared with it (Student's t on those degrees of freedom) instead of
  // Welch's test, whose degrees of freedom collapse to ~4 when one side is
  // a single commit of 5 repeats (a change after the first measured
  // commit). Without enough repeats, Welch.
  bool UseWithin(size_t lo, size_t hi) const { return WithinDf(lo, hi) >= kMinWithinDf; }
  // Points [lo, hi).
  double N(size_t lo, size_t hi) const { return n_[hi] - n_[lo]; }
  double MeanOf(size_t lo, size_t hi) const {
    const double n = N(lo, hi);
    return n == 0 ? 0 : (sum_[hi] - sum_[lo]) / n + shift_;
  }
  double VarOf(size_t lo, size_t hi) const {
    const double n = N(lo, hi);
    if (n < 2) return 0;
    const double s = sum_[hi] - sum_[lo];
    return std::max(0.0, (sq_[hi] - sq_[lo] - s * s / n) / (n - 1));
  }
  // Points [i, j) against [lo, i) + [j, hi).
  TwoSampleResult TestMiddle(size_t lo, size_t i, size_t j, size_t hi) const {
    const double n_in = N(i, j);
    const double n_out = N(lo, hi) - n_in;
    const double s_in = sum_[j] - sum_[i];
    const double s_out = (sum_[hi] - sum_[lo]) - s_in;
    const double q_in = sq_[j] - sq_[i];
    const double q_out = (sq_[hi] - sq_[lo]) - q_in;
    auto var = [](double n, double s, double q) {
      return n < 2 ? 0.0 : std::max(0.0, (q - s * s / n) / (n - 1));
    };
    const double mean_out = n_out == 0 ? 0 : s_out / n_out + shift_;
    const double mean_in = n_in == 0 ? 0 : s_in / n_in + shift_;
    if (UseWithin(lo, hi))
      return ContrastFromSummary(n_out, mean_out, n_in, mean_in, WithinVar(lo, hi),
                                 WithinDf(lo, hi));
    return WelchFromSummary(n_out, mean_out, var(n_out, s_out, q_out), n_in, mean_in,
                            var(n_in, s_in, q_in));
  }
  // Residual sum of squares of one mean per side of a split at k.
  double SplitSse(size_t lo, size_t k, size_t hi) const {
    return VarOf(lo, k) * std::max(0.0, N(lo, k) - 1) + VarOf(k, hi) * std::max(0.0, N(k, hi) - 1);
  }
  TwoSampleResult Test(size_t lo, size_t k, size_t hi) const {
    if (UseWithin(lo, hi))
      return ContrastFromSummary(N(lo, k), MeanOf(lo, k), N(k, hi), MeanOf(k, hi),
                                 WithinVar(lo, hi), WithinDf(lo, hi));
    return WelchFromSummary(N(lo, k), MeanOf(lo, k), VarOf(lo, k), N(k, hi), MeanOf(k, hi),
                            VarOf(k, hi));
  }

 private:
  static constexpr double kMinWithinDf = 8;
  double shift_ = 0;
  std::vector<double> n_, sum_, sq_, within_, within_df_;
};

bool IsRegression(Polarity p, double relative_change) {
  return p == Polarity::kLowerIsBetter ? relative_change > 0 : relative_change < 0;
}

// The series with every value replaced by its mid-rank among all the
// series' values: what the scan tests when the noise is not Gaussian. The
// same contrasts over ranks are a rank test (the rank transform of Conover
// and Iman): a run eight standard deviations off is one rank away from its
// neighbours, and two levels of runs cost ranks nothing.
Series RankTransform(const Series& s) {
  std::vector<std::pair<double, std::pair<size_t, size_t>>> all;
  for (size_t i = 0; i < s.points.size(); ++i)
    for (size_t j = 0; j < s.points[i].values.size(); ++j)
      all.push_back({s.points[i].values[j], {i, j}});
  std::sort(all.begin(), all.end());
  Series r = s;
  for (size_t i = 0; i < all.size();) {
    size_t j = i;
    while (j < all.size() && all[j].first == all[i].first) ++j;
    const double mid_rank = (static_cast<double>(i + j) + 1) / 2;
    for (size_t k = i; k < j; ++k)
      r.points[all[k].second.first].values[all[k].second.second] = mid_rank;
    i = j;
  }
  return r;
}

// The series' values as the scan tests them: themselves under Gaussian
// noise, their ranks otherwise (SeriesNoise).
Series ScanSeries(const Series& s) {
  return stats::MethodFor(SeriesNoise(s).shape) == stats::TwoSampleMethod::kWelch
             ? s
             : RankTransform(s);
}

// The values of points [lo, hi).
std::vector<double> Pooled(const Series& s, size_t lo, size_t hi) {
  std::vector<double> v;
  for (size_t i = lo; i < hi; ++i)
    v.insert(v.end(), s.points[i].values.begin(), s.points[i].values.end());
  return v;
}

// A split found by the scan: its corrected p, and whether it is only
// suggestive.
struct Found {
  double p = 1;
  bool suggestive = false;
};

// A scan that tried no split (too few samples on every side) found
// nothing: its p stays above 1, and k, i and j mean nothing then.
struct ScanResult {
  double single_p = 2;  // best single split, Bonferroni over the splits tried
  size_t k = 0;
  double middle_p = 2;  // best middle run, Bonferroni over the runs tried
  size_t i = 0, j = 0;
  bool single_found() const { return single_p <= 1; }
  bool middle_found() const { return middle_p <= 1; }
};

ScanResult SingleScan(const PrefixStats& ps, size_t lo, size_t hi, const DetectOptions& opt) {
  ScanResult s;
  double best_p = 2;
  int splits = 0;
  for (size_t k = lo + 1; k < hi; ++k) {
    if (ps.N(lo, k) < opt.min_samples_per_side || ps.N(k, hi) < opt.min_samples_per_side) continue;
    ++splits;
    const TwoSampleResult r = ps.Test(lo, k, hi);
    if (r.p_value < best_p) {
      best_p = r.p_value;
      s.k = k;
    }
  }
  if (splits > 0) s.single_p = std::min(1.0, best_p * splits);
  return s;
}

// A change that is undone inside the segment (a dip between two releases
// that later recovers) hides from a single split: scan every middle run
// [i, j) against the rest of the segment.
void MiddleScan(const PrefixStats& ps, size_t lo, size_t hi, const DetectOptions& opt,
                ScanResult* s) {
  double best_pm = 2;
  int pairs = 0;
  for (size_t i = lo + 1; i < hi; ++i) {
    for (size_t j = i + 1; j < hi; ++j) {
      const double n_mid = ps.N(i, j);
      const double n_out = ps.N(lo, hi) - n_mid;
      if (n_mid < opt.min_samples_per_side || n_out < opt.min_samples_per_side) continue;
      ++pairs;
      const TwoSampleResult r = ps.TestMiddle(lo, i, j, hi);
      if (r.p_value < best_pm) {
        best_pm = r.p_value;
        s->i = i;
        s->j = j;
      }
    }
  }
  if (pairs > 0) s->middle_p = std::min(1.0, best_pm * pairs);
}

// `loose` > alpha: a best single split with corrected p under loose / 2 that
// misses alpha / 2 is recorded as suggestive (not searched further).
void Split(const PrefixStats& ps, size_t lo, size_t hi, int depth, const DetectOptions& opt,
           double alpha, double loose, std::map<size_t, Found>* found) {
  if (depth > opt.max_depth || hi - lo < 2) return;
  // Half of alpha for the single-split scan, half for the middle-segment
  // scan, so trying both keeps the family-wise error within alpha.
  const double half = alpha / 2;
  ScanResult s = SingleScan(ps, lo, hi, opt);
  if (s.single_p < half) {
    (*found)[s.k] = Found{s.single_p, false};
    Split(ps, lo, s.k, depth + 1, opt, alpha, loose, found);
    Split(ps, s.k, hi, depth + 1, opt, alpha, loose, found);
    return;
  }
  MiddleScan(ps, lo, hi, opt, &s);
  if (s.middle_p < half) {
    (*found)[s.i] = Found{s.middle_p, false};
    (*found)[s.j] = Found{s.middle_p, false};
    Split(ps, lo, s.i, depth + 1, opt, alpha, loose, found);
    Split(ps, s.i, s.j, depth + 1, opt, alpha, loose, found);
    Split(ps, s.j, hi, depth + 1, opt, alpha, loose, found);
    return;
  }
  // Only a split the scan tried: with one sample per commit there is none,
  // and a loose threshold above 2 would otherwise take the unset position.
  if (s.single_found() && s.single_p < loose / 2 && !found->contains(s.k))
    (*found)[s.k] = Found{s.single_p, true};
}

ModeEffect MeasureAt(const Series& s, int seg_begin, int last_good, int first_bad, int seg_end) {
  std::vector<double> before, after;
  for (const SeriesPoint& p : s.points) {
    if (p.commit_index >= seg_begin && p.commit_index <= last_good)
      before.insert(before.end(), p.values.begin(), p.values.end());
    if (p.commit_index >= first_bad && p.commit_index <= seg_end)
      after.insert(after.end(), p.values.begin(), p.values.end());
  }
  ModeEffect e;
  e.mode = s.key.mode;
  e.overhead = s.key.overhead;
  if (before.empty() || after.empty()) {
    e.p_value = 2;  // marks "not measured" for the caller
    return e;
  }
  const TwoSampleResult r =
      stats::Compare(before, after, 0.99, stats::MethodFor(SeriesNoise(s).shape)).test;
  e.before = r.mean_a;
  e.after = r.mean_b;
  e.relative_change = r.relative_change;
  e.p_value = r.p_value;
  return e;
}

// Where a change at split k of [lo, hi) may lie: the splits j whose
// two-mean fit explains the points nearly as well as k's, (SSE_j - SSE_k) /
// sigma^2 within the chi-squared(1) quantile at interval_level (a profile
// likelihood set for the location; sigma^2 the within-commit noise when the
// repeats give it), at most one measured commit either side of k. Returns
// the first and last such split. At a small shift over noisy points the best
// split is often one measured commit off the true one, and a range that
// leaves the culprit out is confirmed as nothing. No further: over a slow
// drift every split fits about as well, and a range across the whole drift
// would confirm the drift as one commit's change.
std::pair<size_t, size_t> LocationSet(const PrefixStats& ps, size_t lo, size_t k, size_t hi,
                                      const DetectOptions& options) {
  const double n = ps.N(lo, hi);
  const double best = ps.SplitSse(lo, k, hi);
  const double var = ps.UseWithin(lo, hi) ? ps.WithinVar(lo, hi) : best / std::max(1.0, n - 2);
  if (var <= 0) return {k, k};
  const double q = boost::math::quantile(boost::math::chi_squared(1), options.interval_level);
  size_t first = k, last = k;
  for (size_t j = std::max(lo + 1, k - 1); j < std::min(hi, k + 2); ++j) {
    if (ps.N(lo, j) < options.min_samples_per_side || ps.N(j, hi) < options.min_samples_per_side)
      continue;
    if ((ps.SplitSse(lo, j, hi) - best) / var > q) continue;
    first = std::min(first, j);
    last = std::max(last, j);
  }
  return {first, last};
}

// The split at k of segment [lo, hi) and its location set [first, last]
// name points first - 1 and last: checked in every build, because a
// position outside the segment reads before the series or past its end.
absl::Status CheckSplit(const Series& series, size_t lo, size_t k, size_t hi, size_t first,
                        size_t last) {
  if (lo < k && k < hi && lo < first && first <= k && k <= last && last < hi &&
      hi <= series.points.size())
    return absl::OkStatus();
  return absl::InternalError(absl::StrCat("detector split at ", k, " (location ", first, "..", last,
                                          ") outside its segment [", lo, ", ", hi, ") of ",
                                          series.points.size(), " commits"));
}

absl::StatusOr<std::vector<ChangePoint>> Detect(const Series& series, const DetectOptions& options,
                                                double alpha, double loose,
                                                bool include_suggestive) {
  std::vector<ChangePoint> out;
  if (series.points.size() < 2) return out;
  const stats::TwoSampleMethod method = stats::MethodFor(SeriesNoise(series).shape);
  // Means for the change's size (Gaussian noise), the scan's statistic
  // (ranks under other noise) for its significance and location.
  const PrefixStats ps(series);
  const PrefixStats scan(ScanSeries(series));
  std::map<size_t, Found> found;  // split position -> scan p
  Split(scan, 0, series.points.size(), 0, options, alpha, loose, &found);
  // Segments are bounded by the significant splits only: a suggestive split
  // is a guess to be re-measured, and cutting a significant change's segment
  // at it would judge that change on fewer points.
  std::vector<size_t> bounds;
  for (const auto& [k, f] : found) {
    if (!f.suggestive) bounds.push_back(k);
  }
  for (const auto& [k, f] : found) {
    const auto after = std::upper_bound(bounds.begin(), bounds.end(), k);
    const auto at = std::lower_bound(bounds.begin(), bounds.end(), k);
    const size_t lo = at == bounds.begin() ? 0 : *std::prev(at);
    const size_t hi = after == bounds.end() ? series.points.size() : *after;
    if (absl::Status st = CheckSplit(series, lo, k, hi, k, k); !st.ok()) return st;
    // Magnitude between the neighbouring change points, not over the whole
    // series, so a second shift does not dilute the first; judged on the
    // interval, so a true change at the threshold is not lost half the time.
    TwoSampleResult r = ps.Test(lo, k, hi);
    Interval ci =
        RelativeChangeInterval(ps.N(lo, k), ps.MeanOf(lo, k), ps.VarOf(lo, k), ps.N(k, hi),
                               ps.MeanOf(k, hi), ps.VarOf(k, hi), options.interval_level);
    if (method != stats::TwoSampleMethod::kWelch) {
      // The size the robust comparison estimates: an outlier moves a mean
      // by a fifth of its distance at five runs, not a trimmed mean or a
      // Hodges-Lehmann shift.
      const stats::Comparison c = stats::Compare(Pooled(series, lo, k), Pooled(series, k, hi),
                                                 options.interval_level, method);
      r = c.test;
      ci = c.interval;
    }
    if (JudgeMagnitude(ci, options.magnitude) == MagnitudeCall::kBelow) continue;
    // Under the threshold by its point estimate but reaching it within the
    // interval: suggestive, for the confirmation's extra repeats to decide.
    const bool suggestive = f.suggestive || std::fabs(r.relative_change) < options.magnitude;
    if (suggestive && !include_suggestive) continue;
    const auto [first, last] = LocationSet(scan, lo, k, hi, options);
    if (absl::Status st = CheckSplit(series, lo, k, hi, first, last); !st.ok()) return st;
    ChangePoint cp;
    cp.key = series.key;
    cp.polarity = series.polarity;
    cp.primary = series.primary;
    cp.last_good_index = series.points[first - 1].commit_index;
    cp.last_good = series.points[first - 1].commit_id;
    cp.first_bad_index = series.points[last].commit_index;
    cp.first_bad = series.points[last].commit_id;
    cp.segment_begin_index = series.points[lo].commit_index;
    cp.segment_end_index = series.points[hi - 1].commit_index;
    cp.before = r.mean_a;
    cp.after = r.mean_b;
    cp.relative_change = r.relative_change;
    cp.p_value = f.p;
    cp.regression = IsRegression(series.polarity, r.relative_change);
    cp.interval = ci;
    cp.suggestive = suggestive;
    out.push_back(std::move(cp));
  }
  return out;
}

// Why a series cannot be judged, found before any statistic: a sample that
// is not finite poisons every mean and p-value (and the Benjamini-Hochberg
// sort across series); points out of commit order or repeated would make
// the splits name the wrong commits.
absl::Status CheckSeries(const Series& s) {
  for (size_t i = 0; i < s.points.size(); ++i) {
    const SeriesPoint& p = s.points[i];
    if (i > 0 && p.commit_index <= s.points[i - 1].commit_index)
      return absl::InvalidArgumentError(absl::StrCat("commit ", p.commit_id, " (index ",
                                                     p.commit_index, ") out of order after index ",
                                                     s.points[i - 1].commit_index));
    for (double v : p.values) {
      if (!std::isfinite(v))
        return absl::InvalidArgumentError(
            absl::StrCat("sample ", v, " at commit ", p.commit_id, " is not finite"));
    }
  }
  return absl::OkStatus();
}

void Fail(const Series& s, const absl::Status& why, std::vector<SeriesFailure>* failed) {
  if (failed != nullptr) failed->push_back({s.key, why});
}

// The series CheckSeries accepts; the others go to `failed`.
std::vector<const Series*> Judgeable(const std::vector<Series>& series,
                                     std::vector<SeriesFailure>* failed) {
  std::vector<const Series*> out;
  out.reserve(series.size());
  for (const Series& s : series) {
    if (absl::Status st = CheckSeries(s); !st.ok()) {
      Fail(s, st, failed);
      continue;
    }
    out.push_back(&s);
  }
  return out;
}

double AlphaOf(const std::vector<const Series*>& series, const DetectOptions& options) {
  if (series.size() <= 1) return options.alpha;
  std::vector<double> p;
  p.reserve(series.size());
  for (const Series* s : series) p.push_back(SeriesScanP(*s, options));
  const double t = BenjaminiHochbergThreshold(p, options.alpha);
  return t > 0 ? t : options.alpha / static_cast<double>(series.size());
}

// Detect over every judgeable series at their common alpha, a failing
// series left out (into `failed`) and the others kept.
std::vector<ChangePoint> DetectEach(const std::vector<Series>& series, const DetectOptions& options,
                                    double loose_factor, bool include_suggestive,
                                    std::vector<SeriesFailure>* failed) {
  std::vector<ChangePoint> out;
  const std::vector<const Series*> judged = Judgeable(series, failed);
  const double alpha = AlphaOf(judged, options);
  for (const Series* s : judged) {
    absl::StatusOr<std::vector<ChangePoint>> cps =
        Detect(*s, options, alpha, alpha * loose_factor, include_suggestive);
    if (!cps.ok()) {
      Fail(*s, cps.status(), failed);
      continue;
    }
    out.insert(out.end(), cps->begin(), cps->end());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ChangePoint>> DetectChangePoints(const Series& series,
                                                            const DetectOptions& options,
                                                            double alpha_corrected) {
  if (absl::Status st = CheckSeries(series); !st.ok()) return st;
  return Detect(series, options, alpha_corrected, 0, false);
}

stats::NoiseDiagnosis SeriesNoise(const Series& series) {
  std::vector<std::span<const double>> groups;
  groups.reserve(series.points.size());
  for (const SeriesPoint& p : series.points) groups.emplace_back(p.values);
  return stats::DiagnoseNoise(groups);
}

double SeriesScanP(const Series& series, const DetectOptions& options) {
  if (series.points.size() < 2) return 1;
  const PrefixStats ps(ScanSeries(series));
  ScanResult s = SingleScan(ps, 0, series.points.size(), options);
  MiddleScan(ps, 0, series.points.size(), options, &s);
  return std::min(1.0, 2 * std::min(s.single_p, s.middle_p));
}

double SeriesAlpha(const std::vector<Series>& series, const DetectOptions& options,
                   std::vector<SeriesFailure>* failed) {
  return AlphaOf(Judgeable(series, failed), options);
}

std::vector<ChangePoint> DetectCandidates(const std::vector<Series>& series,
                                          const DetectOptions& options,
                                          std::vector<SeriesFailure>* failed) {
  return DetectEach(series, options, options.suggestive_factor, true, failed);
}

std::vector<TopUpRequest> TopUpRequests(const std::vector<Series>& series,
                                        const DetectOptions& options,
                                        std::vector<SeriesFailure>* failed) {
  std::vector<TopUpRequest> out;
  if (options.max_top_up_factor <= 1) return out;
  std::map<SeriesKey, const Series*> by_key;
  for (const Series& s : series) by_key.emplace(s.key, &s);
  for (ChangePoint& cp : DetectEach(series, options, options.top_up_factor, true, failed)) {
    if (!cp.suggestive) continue;
    const Series& s = *by_key.at(cp.key);
    // The bulk's repeats: the fewest a commit holds (the top-ups only add).
    size_t fewest = s.points.front().values.size();
    for (const SeriesPoint& p : s.points) fewest = std::min(fewest, p.values.size());
    const size_t cap = static_cast<size_t>(options.max_top_up_factor) * fewest;
    TopUpRequest r;
    size_t least = cap, most = 0;
    for (const SeriesPoint& p : s.points) {
      if (p.commit_index < cp.last_good_index || p.commit_index > cp.first_bad_index) continue;
      if (p.values.size() >= cap) continue;
      r.commit_indices.push_back(p.commit_index);
      r.commit_ids.push_back(p.commit_id);
      least = std::min(least, p.values.size());
      most = std::max(most, p.values.size());
    }
    if (r.commit_indices.empty()) continue;
    // Doubling the least measured of them, none beyond the cap.
    r.repeats = static_cast<int>(std::min(least, cap - most));
    r.at = std::move(cp);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<ChangePoint> DetectAll(const std::vector<Series>& series, const DetectOptions& options,
                                   std::vector<SeriesFailure>* failed) {
  return DetectEach(series, options, 0, false, failed);
}

const char* ChangeClassName(ChangeClass c) {
  switch (c) {
    case ChangeClass::kIommu:
      return "iommu";
    case ChangeClass::kNotIommu:
      return "not_iommu";
    case ChangeClass::kModeChanged:
      return "mode_changed";
    case ChangeClass::kUnspecified:
      break;
  }
  return "unspecified";
}

std::vector<Finding> Classify(const std::vector<ChangePoint>& change_points,
                              const std::vector<Series>& series, const DetectOptions& options) {
  const double alpha = options.alpha / static_cast<double>(std::max<size_t>(1, series.size()));
  // Merge overlapping intervals of one (platform, workload with its params,
  // direction).
  std::vector<std::vector<const ChangePoint*>> groups;
  std::vector<const ChangePoint*> sorted;
  for (const ChangePoint& cp : change_points) sorted.push_back(&cp);
  std::sort(sorted.begin(), sorted.end(), [](const ChangePoint* a, const ChangePoint* b) {
    return std::tie(a->key.platform, a->key.workload, a->key.params, a->first_bad_index) <
           std::tie(b->key.platform, b->key.workload, b->key.params, b->first_bad_index);
  });
  for (const ChangePoint* cp : sorted) {
    std::vector<const ChangePoint*>* home = nullptr;
    for (auto& g : groups) {
      const ChangePoint* f = g.front();
      if (f->key.platform != cp->key.platform || f->key.workload != cp->key.workload ||
          f->key.params != cp->key.params || f->regression != cp->regression)
        continue;
      const bool overlap = std::max(f->last_good_index, cp->last_good_index) <
                           std::min(f->first_bad_index, cp->first_bad_index);
      if (overlap) {
        home = &g;
        break;
      }
    }
    if (home == nullptr) {
      groups.emplace_back();
      home = &groups.back();
    }
    home->push_back(cp);
  }

  std::vector<Finding> out;
  for (const auto& g : groups) {
    // The finding's metric: a primary metric of the workload, plain mode
    // series before overhead ratios, throughput-like (higher is better)
    // before latencies, then the largest change.
    auto rank = [](const ChangePoint* cp) {
      return std::make_tuple(cp->primary, !cp->key.overhead,
                             cp->polarity == Polarity::kHigherIsBetter,
                             std::fabs(cp->relative_change));
    };
    const ChangePoint* lead = nullptr;
    for (const ChangePoint* cp : g)
      if (lead == nullptr || rank(cp) > rank(lead)) lead = cp;
    Finding f;
    f.platform = lead->key.platform;
    f.workload = lead->key.workload;
    f.params = lead->key.params;
    f.metric = lead->key.metric;
    f.regression = lead->regression;
    f.polarity = lead->polarity;
    f.primary_metric = lead->primary;
    f.last_good_index = lead->last_good_index;
    f.last_good = lead->last_good;
    f.first_bad_index = lead->first_bad_index;
    f.first_bad = lead->first_bad;
    for (const ChangePoint* cp : g) f.change_points.push_back(*cp);

    bool off_measured = false, off_changed = false, translated_changed = false,
         overhead_changed = false;
    const ModeEffect* best_translated = nullptr;
    const ModeEffect* best_overhead = nullptr;
    const ModeEffect* off_effect = nullptr;
    for (const Series& s : series) {
      if (s.key.platform != f.platform || s.key.workload != f.workload ||
          s.key.params != f.params || s.key.metric != f.metric)
        continue;
      ModeEffect e = MeasureAt(s, lead->segment_begin_index, f.last_good_index, f.first_bad_index,
                               lead->segment_end_index);
      if (e.p_value > 1) continue;  // this mode was not measured around the change
      e.significant = e.p_value < alpha && std::fabs(e.relative_change) >= options.magnitude &&
                      IsRegression(s.polarity, e.relative_change) == f.regression;
      f.per_mode.push_back(e);
    }
    for (const ModeEffect& e : f.per_mode) {
      if (e.overhead) {
        overhead_changed |= e.significant;
        if (e.significant &&
            (best_overhead == nullptr ||
             std::fabs(e.relative_change) > std::fabs(best_overhead->relative_change)))
          best_overhead = &e;
      } else if (e.mode == proto::ModeName(iommufarm::v1::IOMMU_MODE_OFF)) {
        off_measured = true;
        off_changed = e.significant;
        off_effect = &e;
      } else if (e.significant) {
        translated_changed = true;
        if (best_translated == nullptr ||
            std::fabs(e.relative_change) > std::fabs(best_translated->relative_change))
          best_translated = &e;
      }
    }
    if (overhead_changed || (translated_changed && off_measured && !off_changed)) {
      f.change_class = ChangeClass::kIommu;
    } else if (off_changed) {
      f.change_class = ChangeClass::kNotIommu;
    }
    const ModeEffect* chosen = nullptr;
    if (f.change_class == ChangeClass::kNotIommu) {
      chosen = off_effect;
    } else if (best_translated != nullptr) {
      chosen = best_translated;
    } else if (best_overhead != nullptr) {
      chosen = best_overhead;
    }
    if (chosen != nullptr) {
      f.mode = chosen->mode;
      f.overhead_series = chosen->overhead;
      f.magnitude = chosen->relative_change;
      f.p_value = chosen->p_value;
    } else {
      f.mode = lead->key.mode;
      f.overhead_series = lead->key.overhead;
      f.magnitude = lead->relative_change;
      f.p_value = lead->p_value;
    }
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::make_tuple(!a.primary_metric, !a.regression, -std::fabs(a.magnitude)) <
           std::make_tuple(!b.primary_metric, !b.regression, -std::fabs(b.magnitude));
  });
  return out;
}

}  // namespace farm::analyzer
