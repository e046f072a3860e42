// Performance series in catalog commit order.
//
// A series is one (platform, workload, metric, mode) cell measured at a set of
// catalog commits, with every repeat kept. The IOMMU overhead series of a
// translated mode is mode / off at the same commit. Plain value types; no
// shared state, thread-compatible.
#ifndef SERVICES_ANALYZER_SERIES_H_
#define SERVICES_ANALYZER_SERIES_H_

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "lib/stats/metric_roles.h"
#include "lib/storage/analyzer_rows.h"

namespace farm::analyzer {

// One stored sample as the analyzer reads it (the store's row).
using storage::SampleRow;

// Polarity and the primary-metric rule are lib/stats/metric_roles.h's,
// shared with farmctl gate.
using stats::MetricPolarity;
using stats::Polarity;

// "metric" or "metric/phase".
// SeriesKey.params as a label and in text: "threads=16,tests=write,read"
// (keys sorted), "" for none.
std::string ParamsLabel(const std::string& params_json);

std::string SeriesMetricName(const std::string& metric, const std::string& phase);

struct SeriesKey {
  std::string platform;
  std::string workload;
  std::string metric;  // SeriesMetricName
  std::string mode;
  bool overhead = false;  // mode / off ratio
  std::string timing;     // SampleRow.timing: guests timed otherwise are another series
  // SampleRow.params: a workload's runs with other params are another series.
  std::string params = "{}";

  auto Tie() const { return std::tie(platform, workload, params, metric, mode, overhead, timing); }
  bool operator<(const SeriesKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const SeriesKey& o) const { return Tie() == o.Tie(); }
  std::string ToString() const;
};

// All repeats measured at one commit.
struct SeriesPoint {
  int commit_index = 0;
  std::string commit_id;
  std::vector<double> values;
};

struct Series {
  SeriesKey key;
  Polarity polarity = Polarity::kUnknown;
  // The metric is one of its workload's primary metrics (PrimaryMetrics).
  bool primary = true;
  std::vector<SeriesPoint> points;  // ascending commit_index, no duplicates
};

// Primary metrics: the throughput figures users bisect on, per workload.
//
// A workload reports many metrics; only its throughput is what a user
// bisects a kernel on (seed 000: iozone KB/s). Latencies, CPU time, cache hit
// rates and the like explain a throughput change, or are diagnostics on their
// own, so the analyzer ranks their findings below (secondary metrics).
// Derived from the samples of one (platform, workload), by metric name
// without phase, with stats::SelectPrimaryMetrics.
// `overrides` (workload -> metric names) replaces the derivation for the
// workloads it names.
using PrimaryOverrides = std::map<std::string, std::set<std::string>>;
using PrimaryMetricMap = std::map<std::pair<std::string, std::string>, std::set<std::string>>;
PrimaryMetricMap PrimaryMetrics(const std::vector<SampleRow>& samples,
                                const PrimaryOverrides& overrides = {});
// Whether `series_metric` ("metric" or "metric/phase") is in `primary`.
bool IsPrimaryMetric(const std::set<std::string>& primary, const std::string& series_metric);
// Parses "WORKLOAD=METRIC[,METRIC...]" (the --primary-metric flag) into
// `overrides`; false on malformed input.
bool ParsePrimaryOverride(const std::string& text, PrimaryOverrides* overrides);

// Groups samples into series (skipping metrics of unknown polarity unless
// include_unknown) and adds the overhead series mode/off for every
// translated mode where off exists at the same commit. The overhead value of
// repeat r is value_r(mode) / mean(off at that commit); its polarity is the
// metric's polarity (a higher ratio of a throughput is better).
// Series.primary is set from PrimaryMetrics(samples, overrides).
std::vector<Series> BuildSeries(const std::vector<SampleRow>& samples, bool include_unknown = false,
                                const PrimaryOverrides& overrides = {});

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_SERIES_H_
