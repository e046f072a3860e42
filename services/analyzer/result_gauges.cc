#include "services/analyzer/result_gauges.h"

#include "services/analyzer/stats.h"

namespace farm::analyzer {

ResultGauges::ResultGauges(prometheus::Registry& registry)
    : latest_(prometheus::BuildGauge()
                  .Name("farm_result_latest")
                  .Help("Latest benchmark result: mean over the repeats of the newest commit "
                        "measured, per platform, workload, metric and IOMMU mode (the commit: "
                        "farm_result_latest_commit_info)")
                  .Register(registry)),
      ratio_(prometheus::BuildGauge()
                 .Name("farm_result_overhead_ratio")
                 .Help("IOMMU overhead ratio of the latest result: mean(mode) / mean(off) at "
                       "the newest commit measured, per platform, workload, metric and mode")
                 .Register(registry)),
      info_(prometheus::BuildGauge()
                .Name("farm_result_latest_commit_info")
                .Help("The commit the latest results of a platform and workload are from "
                      "(value 1; one series per platform and workload)")
                .Register(registry)) {}

void ResultGauges::Update(const std::string& catalog, const std::vector<Series>& series) {
  // The newest commit of each (platform, workload) in this matrix.
  std::map<std::pair<std::string, std::string>, std::pair<int, std::string>> newest;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    const SeriesPoint& p = s.points.back();
    auto [it, inserted] =
        newest.try_emplace({s.key.platform, s.key.workload}, p.commit_index, p.commit_id);
    if (!inserted && p.commit_index > it->second.first) it->second = {p.commit_index, p.commit_id};
  }
  for (const Series& s : series) {
    auto n = newest.find({s.key.platform, s.key.workload});
    if (n == newest.end() || s.points.back().commit_index != n->second.first) continue;
    const std::vector<double>& values = s.points.back().values;
    if (values.empty()) continue;
    const std::map<std::string, std::string> labels = {{"platform", s.key.platform},
                                                       {"workload", s.key.workload},
                                                       {"params", ParamsLabel(s.key.params)},
                                                       {"metric", s.key.metric},
                                                       {"mode", s.key.mode}};
    (s.key.overhead ? ratio_ : latest_).Add(labels).Set(Mean(values));
  }
  for (const auto& [cell, commit] : newest) {
    const std::map<std::string, std::string> labels = {{"platform", cell.first},
                                                       {"workload", cell.second},
                                                       {"catalog", catalog},
                                                       {"commit", commit.second}};
    auto it = info_series_.find(cell);
    if (it != info_series_.end() && it->second.second == labels) continue;
    if (it != info_series_.end()) info_.Remove(it->second.first);
    prometheus::Gauge& g = info_.Add(labels);
    g.Set(1);
    info_series_[cell] = {&g, labels};
  }
}

}  // namespace farm::analyzer
