#include "services/analyzer/series.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "proto/names.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {

PrimaryMetricMap PrimaryMetrics(const std::vector<SampleRow>& samples,
                                const PrimaryOverrides& overrides) {
  // (platform, workload) -> metric -> a unit seen
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::string>> seen;
  for (const SampleRow& s : samples) {
    // The effective mode is what a run was, not what it measured.
    if (s.metric == storage::kEffectiveModeMetric) continue;
    std::string& unit = seen[{s.platform, s.workload}][s.metric];
    if (unit.empty()) unit = s.unit;
  }
  PrimaryMetricMap out;
  for (const auto& [cell, metrics] : seen) {
    std::set<std::string>& primary = out[cell];
    if (auto o = overrides.find(cell.second); o != overrides.end()) {
      primary = o->second;
      continue;
    }
    primary = stats::SelectPrimaryMetrics(metrics);
  }
  return out;
}

bool IsPrimaryMetric(const std::set<std::string>& primary, const std::string& series_metric) {
  return primary.count(series_metric.substr(0, series_metric.find('/'))) > 0;
}

bool ParsePrimaryOverride(const std::string& text, PrimaryOverrides* overrides) {
  const size_t eq = text.find('=');
  if (eq == 0 || eq == std::string::npos || eq + 1 == text.size()) return false;
  std::set<std::string> metrics;
  size_t pos = eq + 1;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string m = text.substr(pos, comma - pos);
    if (m.empty()) return false;
    metrics.insert(m);
    pos = comma + 1;
  }
  (*overrides)[text.substr(0, eq)] = std::move(metrics);
  return true;
}

std::string SeriesMetricName(const std::string& metric, const std::string& phase) {
  return phase.empty() ? metric : metric + "/" + phase;
}

std::string ParamsLabel(const std::string& params_json) {
  const nlohmann::json j = nlohmann::json::parse(params_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "";
  std::vector<std::string> parts;
  for (auto it = j.begin(); it != j.end(); ++it) {  // nlohmann keeps keys sorted
    parts.push_back(it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
  }
  return absl::StrJoin(parts, ",");
}

std::string SeriesKey::ToString() const {
  const std::string p = ParamsLabel(params);
  return platform + " " + workload + (p.empty() ? "" : "{" + p + "}") + " " + metric + " " +
         (overhead ? mode + "/off" : mode) + (timing.empty() ? "" : " (" + timing + ")");
}

std::vector<Series> BuildSeries(const std::vector<SampleRow>& samples, bool include_unknown,
                                const PrimaryOverrides& overrides) {
  const PrimaryMetricMap primary = PrimaryMetrics(samples, overrides);
  // key -> commit_index -> point
  std::map<SeriesKey, std::map<int, SeriesPoint>> cells;
  std::map<SeriesKey, Polarity> polarity;
  for (const SampleRow& s : samples) {
    const Polarity p = MetricPolarity(s.metric);
    if (p == Polarity::kUnknown && !include_unknown) continue;
    SeriesKey key{s.platform, s.workload, SeriesMetricName(s.metric, s.phase), s.mode, false,
                  s.timing,   s.params};
    polarity[key] = p;
    SeriesPoint& pt = cells[key][s.commit_index];
    pt.commit_index = s.commit_index;
    pt.commit_id = s.commit_id;
    pt.values.push_back(s.value);
  }
  std::vector<Series> out;
  for (auto& [key, by_commit] : cells) {
    Series s;
    s.key = key;
    s.polarity = polarity[key];
    auto pm = primary.find({key.platform, key.workload});
    s.primary = pm == primary.end() || IsPrimaryMetric(pm->second, key.metric);
    for (const auto& [idx, pt] : by_commit) s.points.push_back(pt);
    out.push_back(std::move(s));
  }
  // Overhead series: every translated mode against off of the same cell.
  std::vector<Series> overhead;
  const std::string off = proto::ModeName(iommufarm::v1::IOMMU_MODE_OFF);
  for (const Series& s : out) {
    if (s.key.mode == off) continue;
    SeriesKey off_key = s.key;
    off_key.mode = off;
    auto off_it = cells.find(off_key);
    if (off_it == cells.end()) continue;
    Series o;
    o.key = s.key;
    o.key.overhead = true;
    o.polarity = s.polarity;
    o.primary = s.primary;
    for (const SeriesPoint& pt : s.points) {
      auto op = off_it->second.find(pt.commit_index);
      if (op == off_it->second.end()) continue;
      const double off_mean = Mean(op->second.values);
      if (off_mean == 0) continue;
      SeriesPoint r{pt.commit_index, pt.commit_id, {}};
      for (double v : pt.values) r.values.push_back(v / off_mean);
      o.points.push_back(std::move(r));
    }
    if (!o.points.empty()) overhead.push_back(std::move(o));
  }
  for (Series& o : overhead) out.push_back(std::move(o));
  return out;
}

}  // namespace farm::analyzer
