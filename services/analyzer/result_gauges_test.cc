#include "services/analyzer/result_gauges.h"

#include <random>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_format.h"

namespace farm::analyzer {
namespace {

// Series count per family name in the registry.
std::map<std::string, size_t> SeriesCounts(prometheus::Registry& r) {
  std::map<std::string, size_t> out;
  for (const prometheus::MetricFamily& f : r.Collect()) out[f.name] += f.metric.size();
  return out;
}

size_t Total(const std::map<std::string, size_t>& counts) {
  size_t n = 0;
  for (const auto& [name, c] : counts) n += c;
  return n;
}

// One bulk matrix: `commit` in off and strict, `repeats` jobs each, two
// metrics (throughput with a phase, a latency) per job.
std::vector<SampleRow> Matrix(int64_t matrix, int commit, int repeats, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<SampleRow> out;
  for (const char* mode : {"off", "strict"}) {
    const double base = std::string(mode) == "off" ? 2000 : 1200 - commit;
    for (int r = 0; r < repeats; ++r) {
      SampleRow s;
      s.matrix_id = matrix;
      s.catalog = "cat";
      s.commit_id = absl::StrFormat("c%03d", commit);
      s.commit_index = commit;
      s.platform = "intel-vtd-2s12c";
      s.workload = "iozone-nfsrdma";
      s.mode = mode;
      s.repeat = r;
      s.metric = "throughput";
      s.phase = "write";
      s.unit = "kB/s";
      s.value = base * (1 + noise(rng));
      out.push_back(s);
      s.metric = "map_latency_p50";
      s.phase = "";
      s.unit = "ns";
      s.value = 300 * (1 + noise(rng));
      out.push_back(s);
    }
  }
  return out;
}

// 1,000 jobs over 100 commits (100 matrices of one commit x 2 modes x 5
// repeats): the number of series stays what the first matrix made.
TEST(ResultGaugesTest, SeriesCountFlatOverManyJobsAndCommits) {
  prometheus::Registry registry;
  ResultGauges gauges(registry);
  std::mt19937_64 rng(7);
  int jobs = 0;
  size_t after_first = 0;
  std::vector<SampleRow> last;
  for (int commit = 0; commit < 100; ++commit) {
    last = Matrix(commit + 1, commit, 5, rng);
    jobs += 2 * 5;
    gauges.Update("cat", BuildSeries(last));
    if (commit == 0) after_first = Total(SeriesCounts(registry));
  }
  EXPECT_EQ(jobs, 1000);
  const std::map<std::string, size_t> counts = SeriesCounts(registry);
  // 2 metrics x 2 modes; the ratio per metric for strict; one info series.
  EXPECT_EQ(counts.at("farm_result_latest"), 4u);
  EXPECT_EQ(counts.at("farm_result_overhead_ratio"), 2u);
  EXPECT_EQ(counts.at("farm_result_latest_commit_info"), 1u);
  EXPECT_EQ(Total(counts), after_first);

  // The values are the last matrix's, the info series names its commit.
  double strict = 0, off = 0;
  for (const SampleRow& s : last) {
    if (s.metric != "throughput") continue;
    (s.mode == "strict" ? strict : off) += s.value / 5;
  }
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> l;
      for (const prometheus::ClientMetric::Label& x : m.label) l[x.name] = x.value;
      for (const auto& [k, v] : l) EXPECT_NE(k, "job") << f.name;
      if (f.name == "farm_result_latest_commit_info") {
        EXPECT_EQ(l["commit"], "c099");
        EXPECT_EQ(l["catalog"], "cat");
        EXPECT_EQ(m.gauge.value, 1);
        continue;
      }
      EXPECT_EQ(l.count("commit"), 0u) << f.name;
      if (l["metric"] != "throughput/write") continue;
      if (f.name == "farm_result_latest" && l["mode"] == "strict") {
        EXPECT_NEAR(m.gauge.value, strict, 1e-6 * strict);
      }
      if (f.name == "farm_result_latest" && l["mode"] == "off") {
        EXPECT_NEAR(m.gauge.value, off, 1e-6 * off);
      }
      if (f.name == "farm_result_overhead_ratio") {
        EXPECT_EQ(l["mode"], "strict");
        EXPECT_NEAR(m.gauge.value, strict / off, 0.01);
      }
    }
  }
}

// A matrix over several commits reports its newest one.
TEST(ResultGaugesTest, NewestCommitOfAMatrixWins) {
  prometheus::Registry registry;
  ResultGauges gauges(registry);
  std::mt19937_64 rng(3);
  std::vector<SampleRow> samples = Matrix(1, 40, 3, rng);
  const std::vector<SampleRow> older = Matrix(1, 10, 3, rng);
  samples.insert(samples.end(), older.begin(), older.end());
  gauges.Update("cat", BuildSeries(samples));
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != "farm_result_latest_commit_info") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    for (const auto& x : f.metric[0].label)
      if (x.name == "commit") EXPECT_EQ(x.value, "c040");
  }
}

}  // namespace
}  // namespace farm::analyzer
