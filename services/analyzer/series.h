// Performance series in catalog commit order.
//
// A series is one (platform, workload, metric, mode) cell measured at a set of
// catalog commits, with every repeat kept. The IOMMU overhead series of a
// translated mode is mode / off at the same commit. Plain value types; no
// shared state, thread-compatible.
#ifndef SERVICES_ANALYZER_SERIES_H_
#define SERVICES_ANALYZER_SERIES_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace farm::analyzer {

// One stored sample as the analyzer reads it (one row of analyzer_samples).
struct SampleRow {
  int64_t sample_id = 0;
  int64_t matrix_id = 0;
  std::string catalog;
  std::string commit_id;
  int commit_index = 0;
  std::string platform;
  std::string workload;
  std::string mode;    // "off", "passthrough", "strict", "lazy"
  std::string metric;  // Sample.metric
  std::string phase;   // Sample.phase, may be empty
  int repeat = 0;
  double value = 0;
};

// Whether a larger value is better for a metric, judged from its name.
// Unknown metrics (counters such as invalidations) are not analysed:
// their direction has no performance meaning on its own.
enum class Polarity { kHigherIsBetter, kLowerIsBetter, kUnknown };
Polarity MetricPolarity(const std::string& metric);

// "metric" or "metric/phase".
std::string SeriesMetricName(const std::string& metric, const std::string& phase);

struct SeriesKey {
  std::string platform;
  std::string workload;
  std::string metric;  // SeriesMetricName
  std::string mode;
  bool overhead = false;  // mode / off ratio

  auto Tie() const { return std::tie(platform, workload, metric, mode, overhead); }
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
  std::vector<SeriesPoint> points;  // ascending commit_index, no duplicates
};

// Groups samples into series (skipping metrics of unknown polarity unless
// include_unknown) and adds the overhead series mode/off for every
// translated mode where off exists at the same commit. The overhead value of
// repeat r is value_r(mode) / mean(off at that commit); its polarity is the
// metric's polarity (a higher ratio of a throughput is better).
std::vector<Series> BuildSeries(const std::vector<SampleRow>& samples,
                                bool include_unknown = false);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_SERIES_H_
