#include "lib/stats/metric_roles.h"

#include <algorithm>
#include <cctype>

namespace farm::stats {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `throughput` or `throughput_<unit>`, not a per-CPU normalisation.
bool IsHeadlineThroughput(const std::string& metric) {
  const std::string m = Lower(metric);
  if (m == "throughput") return true;
  return m.rfind("throughput_", 0) == 0 && m.find("per_cpu") == std::string::npos &&
         m.find("/cpu") == std::string::npos;
}

bool IsWorkRate(const std::string& metric, const std::string& unit) {
  const std::string m = Lower(metric), u = Lower(unit);
  if (m.find("per_cpu") != std::string::npos || u.find("/cpu") != std::string::npos) return false;
  if (m.find("rate") != std::string::npos) return false;  // hit/miss rates are ratios
  if (u.size() > 2 && EndsWith(u, "/s")) return true;
  if (u == "iops" || u == "tps") return true;
  if (MetricPolarity(metric) != Polarity::kHigherIsBetter) return false;
  for (const char* k : {"throughput", "iops", "bw", "bandwidth", "ops_per", "tps", "per_sec",
                        "_kb_s", "_mb_s", "_gb_s", "gbps", "mbps", "_ops_s"}) {
    if (m.find(k) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Polarity MetricPolarity(const std::string& metric) {
  const std::string m = Lower(metric);
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

std::set<std::string> SelectPrimaryMetrics(const std::map<std::string, std::string>& metric_units) {
  std::set<std::string> primary;
  for (const auto& [metric, unit] : metric_units)
    if (IsHeadlineThroughput(metric)) primary.insert(metric);
  if (!primary.empty()) return primary;
  for (const auto& [metric, unit] : metric_units)
    if (IsWorkRate(metric, unit)) primary.insert(metric);
  if (!primary.empty()) return primary;
  for (const auto& [metric, unit] : metric_units)
    if (EndsWith(Lower(metric), "latency_mean")) primary.insert(metric);
  if (!primary.empty()) return primary;
  for (const auto& [metric, unit] : metric_units) primary.insert(metric);
  return primary;
}

}  // namespace farm::stats
