#include "services/analyzer/mode_change.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "proto/names.h"

namespace farm::analyzer {

double ModalValue(std::span<const double> values) {
  std::map<double, int> counts;
  for (double v : values) ++counts[v];
  double best = 0;
  int best_count = 0;
  for (const auto& [v, n] : counts) {  // ascending: the lowest wins a tie
    if (n > best_count) {
      best = v;
      best_count = n;
    }
  }
  return best;
}

std::string EffectiveModeName(double value) {
  const int n = static_cast<int>(value);
  if (n == value && iommufarm::v1::IommuMode_IsValid(n) && n != 0) {
    return proto::ModeName(static_cast<iommufarm::v1::IommuMode>(n));
  }
  return absl::StrCat("mode ", value);
}

std::vector<Finding> DetectModeChanges(const std::vector<SampleRow>& samples) {
  // (platform, workload, params, requested mode, timing) -> commit index ->
  // (id, the runs' modes).
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  std::map<Key, std::map<int, std::pair<std::string, std::vector<double>>>> series;
  for (const SampleRow& s : samples) {
    if (s.metric != storage::kEffectiveModeMetric) continue;
    auto& point = series[{s.platform, s.workload, s.params, s.mode, s.timing}][s.commit_index];
    point.first = s.commit_id;
    point.second.push_back(s.value);
  }
  std::vector<Finding> out;
  for (const auto& [key, points] : series) {
    const auto& [platform, workload, params, mode, timing] = key;
    const std::pair<const int, std::pair<std::string, std::vector<double>>>* prev = nullptr;
    for (const auto& point : points) {
      if (prev != nullptr) {
        const double before = ModalValue(prev->second.second);
        const double after = ModalValue(point.second.second);
        if (before != after) {
          Finding f;
          f.platform = platform;
          f.workload = workload;
          f.params = params;
          f.metric = storage::kEffectiveModeMetric;
          f.mode = mode;
          f.change_class = ChangeClass::kModeChanged;
          f.regression = true;
          f.last_good_index = prev->first;
          f.last_good = prev->second.first;
          f.first_bad_index = point.first;
          f.first_bad = point.second.first;
          f.magnitude = 0;
          f.p_value = 0;
          f.primary_metric = true;
          f.per_mode.push_back(ModeEffect{mode, false, before, after, 0, 0, true});
          out.push_back(std::move(f));
        }
      }
      prev = &point;
    }
  }
  return out;
}

}  // namespace farm::analyzer
