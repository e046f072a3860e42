#include "services/analyzer/series.h"

#include <algorithm>

#include "services/analyzer/stats.h"

namespace farm::analyzer {

Polarity MetricPolarity(const std::string& metric) {
  std::string m = metric;
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  // Maxima are single extreme events: too unstable to judge a commit by.
  if (has("_max")) return Polarity::kUnknown;
  if (has("latency") || has("lat_") || has("_ns") || has("_us") || has("duration") ||
      has("miss_rate") || has("cpu_busy"))
    return Polarity::kLowerIsBetter;
  if (has("throughput") || has("iops") || has("bandwidth") || has("bw") || has("ops_per") ||
      has("tps") || has("hit_rate") || has("gbps") || has("mbps") || has("per_sec") ||
      has("kb_s") || has("mb_s") || has("gb_s"))
    return Polarity::kHigherIsBetter;
  return Polarity::kUnknown;
}

std::string SeriesMetricName(const std::string& metric, const std::string& phase) {
  return phase.empty() ? metric : metric + "/" + phase;
}

std::string SeriesKey::ToString() const {
  return platform + " " + workload + " " + metric + " " + (overhead ? mode + "/off" : mode);
}

std::vector<Series> BuildSeries(const std::vector<SampleRow>& samples, bool include_unknown) {
  // key -> commit_index -> point
  std::map<SeriesKey, std::map<int, SeriesPoint>> cells;
  std::map<SeriesKey, Polarity> polarity;
  for (const SampleRow& s : samples) {
    const Polarity p = MetricPolarity(s.metric);
    if (p == Polarity::kUnknown && !include_unknown) continue;
    SeriesKey key{s.platform, s.workload, SeriesMetricName(s.metric, s.phase), s.mode, false};
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
    for (const auto& [idx, pt] : by_commit) s.points.push_back(pt);
    out.push_back(std::move(s));
  }
  // Overhead series: every translated mode against off of the same cell.
  std::vector<Series> overhead;
  for (const Series& s : out) {
    if (s.key.mode == "off") continue;
    SeriesKey off_key = s.key;
    off_key.mode = "off";
    auto off_it = cells.find(off_key);
    if (off_it == cells.end()) continue;
    Series o;
    o.key = s.key;
    o.key.overhead = true;
    o.polarity = s.polarity;
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
