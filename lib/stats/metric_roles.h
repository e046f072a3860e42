// lib/stats/metric_roles: what a metric's name and unit say about how to
// judge it, for every reader of results that judges (the analyzer's series,
// farmctl gate): its polarity (is larger better?) and which of a workload's
// metrics are its primary ones, the throughput users bisect a kernel on.
//
// Pure functions over names and units; no state, thread-safe.
#ifndef LIB_STATS_METRIC_ROLES_H_
#define LIB_STATS_METRIC_ROLES_H_

#include <map>
#include <set>
#include <string>

namespace farm::stats {

// Whether a larger value is better for a metric, judged from its name.
// Unknown metrics (counters such as invalidations, maxima) are not judged:
// their direction has no performance meaning on its own.
enum class Polarity { kHigherIsBetter, kLowerIsBetter, kUnknown };
Polarity MetricPolarity(const std::string& metric);

// The primary metrics among one workload's metrics (name without phase ->
// a unit it was reported in), the first rule that selects any:
//   1. `throughput` or `throughput_<unit>` (`throughput_kb_s`,
//      `throughput_ops_s`): the workload's own headline figure; normalised
//      or partial variants (`throughput_per_cpu`, iozone's min_/max_/avg_/
//      parent_ throughput) are not primary;
//   2. every work-rate metric, judged by its unit (".../s", "iops", "tps")
//      or name (iops, bw, bandwidth, ops_per, tps, per_sec, _kb_s ...), e.g.
//      real fio's `iops` and `bw_kib_s`;
//   3. the mean latencies (`*latency_mean`: the kernel's dma_map_benchmark
//      reports no rate);
//   4. every metric (nothing to rank against).
std::set<std::string> SelectPrimaryMetrics(const std::map<std::string, std::string>& metric_units);

}  // namespace farm::stats

#endif  // LIB_STATS_METRIC_ROLES_H_
