// ResultGauges: the latest benchmark results as Prometheus gauges, for
// dashboards, with labels bounded by the farm's configuration, never by its
// history (no commit, job or matrix label on a value series):
//   farm_result_latest{platform, workload, params, metric, mode}
//       mean over the repeats of the newest commit of the latest analysed
//       bulk matrix that measured the series (metric: "throughput/write" as
//       the analyzer names series);
//   farm_result_overhead_ratio{platform, workload, params, metric, mode}
//       at that commit, mean(mode) / mean(off), paired per repeat;
//   farm_result_latest_commit_info{platform, workload, catalog, commit} = 1
//       which commit the latest values of a (platform, workload) are from:
//       one series per (platform, workload), the previous commit's series
//       removed when it changes.
// So 1,000 jobs over 100 commits give as many series as one job per cell.
//
// Thread-safety: Update() from one thread (the analyzer's pass); scrapes
// read the gauges concurrently (prometheus-cpp families are thread-safe).
// The registry is not owned and must outlive this object.
#ifndef SERVICES_ANALYZER_RESULT_GAUGES_H_
#define SERVICES_ANALYZER_RESULT_GAUGES_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "services/analyzer/series.h"

namespace farm::analyzer {

class ResultGauges final {
 public:
  explicit ResultGauges(prometheus::Registry& registry);
  ResultGauges(const ResultGauges&) = delete;
  ResultGauges& operator=(const ResultGauges&) = delete;

  // The series of one analysed matrix (BuildSeries; overhead series feed the
  // ratio gauge). `catalog` names the info series' catalog.
  void Update(const std::string& catalog, const std::vector<Series>& series);

 private:
  prometheus::Family<prometheus::Gauge>& latest_;
  prometheus::Family<prometheus::Gauge>& ratio_;
  prometheus::Family<prometheus::Gauge>& info_;
  // (platform, workload) -> its info series and the labels it carries.
  std::map<std::pair<std::string, std::string>,
           std::pair<prometheus::Gauge*, std::map<std::string, std::string>>>
      info_series_;
};

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_RESULT_GAUGES_H_
