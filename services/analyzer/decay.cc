#include "services/analyzer/decay.h"

#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace farm::analyzer {

std::vector<DecayFinding> FindDecays(const std::vector<SampleRow>& samples,
                                     const PrimaryMetricMap& primary, const DecayOptions& options) {
  // Per cell and commit, every run's series.
  std::map<std::tuple<SeriesKey, int, std::string>, std::vector<std::vector<double>>> runs;
  for (const SampleRow& s : samples) {
    if (static_cast<int>(s.intervals.size()) < options.min_intervals) continue;
    SeriesKey key{s.platform, s.workload, SeriesMetricName(s.metric, s.phase), s.mode, false,
                  s.timing,   s.params};
    runs[{key, s.commit_index, s.commit_id}].push_back(s.intervals);
  }
  std::vector<DecayFinding> out;
  for (const auto& [where, series] : runs) {
    const auto& [key, commit_index, commit_id] = where;
    const Polarity polarity = MetricPolarity(key.metric.substr(0, key.metric.find('/')));
    if (polarity == Polarity::kUnknown) continue;
    DecayFinding d;
    d.key = key;
    d.commit_index = commit_index;
    d.commit_id = commit_id;
    d.runs = static_cast<int>(series.size());
    d.series = stats::MedianSeries(series);
    if (static_cast<int>(d.series.size()) < options.min_intervals) continue;
    // A lower-is-better metric decays by rising: judged on its negation.
    std::vector<double> judged = d.series;
    if (polarity == Polarity::kLowerIsBetter) {
      for (double& v : judged) v = -v;
    }
    d.verdict = stats::JudgeDecay(judged, options.magnitude, options.alpha);
    if (!d.verdict.decays) continue;
    auto pm = primary.find({key.platform, key.workload});
    d.primary = pm == primary.end() || IsPrimaryMetric(pm->second, key.metric);
    out.push_back(std::move(d));
  }
  return out;
}

std::string DecayNote(const DecayFinding& d) {
  const double fall = -d.verdict.line.relative_change;
  const bool higher =
      MetricPolarity(d.key.metric.substr(0, d.key.metric.find('/'))) != Polarity::kLowerIsBetter;
  std::string values;
  for (double v : d.series)
    absl::StrAppend(&values, values.empty() ? "" : " ", absl::StrFormat("%.6g", v));
  return absl::StrFormat(
      "decay within runs: %s %s %.1f%% over the run (Theil-Sen, first to last of %d "
      "intervals), Mann-Kendall p=%.2g, %d run%s; median per interval: %s",
      d.key.metric, higher ? "fell" : "rose", 100.0 * std::fabs(fall),
      static_cast<int>(d.series.size()), d.verdict.trend.p_falling, d.runs, d.runs == 1 ? "" : "s",
      values);
}

}  // namespace farm::analyzer
