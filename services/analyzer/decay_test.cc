#include "services/analyzer/decay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace farm::analyzer {
namespace {

// A run's throughput sample at commit c1 with `intervals`.
SampleRow RunRow(const std::string& params, int repeat, std::vector<double> intervals,
                 const std::string& metric = "throughput") {
  SampleRow s;
  s.sample_id = repeat + 1;
  s.matrix_id = 1;
  s.catalog = "cat";
  s.commit_id = "c1";
  s.commit_index = 1;
  s.platform = "intel-vtd-2s12c";
  s.workload = "dma-map-bench";
  s.params = params;
  s.mode = "strict";
  s.metric = metric;
  s.repeat = repeat;
  s.intervals = std::move(intervals);
  double sum = 0;
  for (double v : s.intervals) sum += v;
  s.value = s.intervals.empty() ? 0 : sum / static_cast<double>(s.intervals.size());
  return s;
}

std::vector<double> Line(double start, double end, int n = 20) {
  std::vector<double> x;
  for (int i = 0; i < n; ++i) x.push_back(start + (end - start) * i / (n - 1));
  return x;
}

TEST(DecayTest, TheAgingCellDecaysAndTheSteadyOneDoesNot) {
  std::vector<SampleRow> samples = {
      RunRow(R"({"aging":"30000"})", 0, Line(31000, 22000)),
      RunRow(R"({"aging":"30000"})", 1, Line(31100, 21900)),
      RunRow("{}", 0, std::vector<double>(20, 41600)),
      RunRow("{}", 1, Line(41580, 41620)),
  };
  const std::vector<DecayFinding> found = FindDecays(samples, {}, DecayOptions{});
  ASSERT_EQ(found.size(), 1u);
  const DecayFinding& d = found[0];
  EXPECT_EQ(d.key.params, R"({"aging":"30000"})");
  EXPECT_EQ(d.key.metric, "throughput");
  EXPECT_EQ(d.commit_id, "c1");
  EXPECT_EQ(d.runs, 2);
  EXPECT_NEAR(d.verdict.line.relative_change, -0.29, 0.01);
  EXPECT_NE(DecayNote(d).find("throughput fell 29."), std::string::npos) << DecayNote(d);
}

TEST(DecayTest, OneOddRunDoesNotMakeADecay) {
  // Two steady runs and one that fell: the median series is steady.
  std::vector<SampleRow> samples = {
      RunRow("{}", 0, std::vector<double>(20, 41600)),
      RunRow("{}", 1, std::vector<double>(20, 41650)),
      RunRow("{}", 2, Line(41600, 20000)),
  };
  EXPECT_TRUE(FindDecays(samples, {}, DecayOptions{}).empty());
}

TEST(DecayTest, ALatencyDecaysByRisingAndUnknownMetricsAreNotJudged) {
  std::vector<SampleRow> samples = {
      RunRow("{}", 0, Line(1000, 1400), "map_latency_mean"),
      RunRow("{}", 0, Line(1000, 10), "throughput"),  // falls a lot, but see below
  };
  samples[1].intervals.resize(3);  // too few intervals to judge
  const std::vector<DecayFinding> found = FindDecays(samples, {}, DecayOptions{});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key.metric, "map_latency_mean");
  EXPECT_NE(DecayNote(found[0]).find("rose 40.0%"), std::string::npos) << DecayNote(found[0]);
  // invalidations has no polarity: a falling count is no decay.
  EXPECT_TRUE(
      FindDecays({RunRow("{}", 0, Line(1000, 10), "invalidations")}, {}, DecayOptions{}).empty());
}

TEST(DecayTest, TheMagnitudeIsTheThreshold) {
  const std::vector<SampleRow> samples = {RunRow("{}", 0, Line(1000, 960))};  // -4%
  EXPECT_TRUE(FindDecays(samples, {}, DecayOptions{}).empty());
  DecayOptions loose;
  loose.magnitude = 0.03;
  EXPECT_EQ(FindDecays(samples, {}, loose).size(), 1u);
}

}  // namespace
}  // namespace farm::analyzer
