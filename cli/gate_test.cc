#include "cli/gate.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/spec/spec_yaml.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// `n` runs of one dma-map-bench cell at `commit`: `metric` around `mean`
// with a CV of `cv`, and a counter (no polarity) that is never judged.
std::vector<pb::Result> Runs(const std::string& commit, const std::string& metric,
                             const std::string& unit, int n, double mean, double cv,
                             uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, cv);
  std::vector<pb::Result> out;
  for (int i = 0; i < n; ++i) {
    pb::Result r;
    pb::Job& j = *r.mutable_job();
    j.set_commit_id(commit);
    j.set_platform("intel-vtd-snb16c");
    j.set_mode(pb::IOMMU_MODE_STRICT);
    j.mutable_workload()->set_name("dma-map-bench");
    pb::Sample* s = r.add_samples();
    s->set_metric(metric);
    s->set_unit(unit);
    s->set_value(mean * (1 + noise(rng)));
    pb::Sample* c = r.add_samples();
    c->set_metric("invalidations");
    c->set_unit("count");
    c->set_value(100.0 * (i + 1));
    out.push_back(r);
  }
  return out;
}

GateAnswer Gate(double base_mean, double candidate_mean, double cv, int n,
                const std::string& metric = "throughput", const std::string& unit = "ops/s") {
  return JudgeGate(CompareSides(Runs("a", metric, unit, n, base_mean, cv, 1),
                                Runs("b", metric, unit, n, candidate_mean, cv, 2)),
                   0.03);
}

TEST(GateTest, AnUnchangedPrimaryMetricPasses) {
  const GateAnswer a = Gate(1000, 1000, 0.002, 8);
  ASSERT_EQ(a.rows.size(), 1u) << "only the primary metric is judged";
  EXPECT_EQ(a.rows[0].compared.metric, "throughput");
  EXPECT_EQ(a.rows[0].call, GateCall::kPass);
  EXPECT_EQ(a.exit_code, kGatePass);
}

// The table shows the judged series; --all adds the counter it never
// judges, so a reader can still see it.
TEST(GateTest, TheTableShowsEverySeriesOnlyWithAll) {
  const GateAnswer a = Gate(1000, 1000, 0.002, 8);
  const std::string judged = FormatGateTable(a, "a", "b", 0.03);
  EXPECT_NE(judged.find("throughput"), std::string::npos) << judged;
  EXPECT_EQ(judged.find("invalidations"), std::string::npos) << judged;
  const std::string all = FormatGateTable(a, "a", "b", 0.03, /*all=*/true);
  EXPECT_NE(all.find("invalidations"), std::string::npos) << all;
  EXPECT_NE(all.find("pass: no primary metric regressed"), std::string::npos) << all;
}

TEST(GateTest, ASignificantDropPastTheThresholdIsARegression) {
  const GateAnswer a = Gate(1000, 900, 0.002, 8);
  EXPECT_EQ(a.exit_code, kGateRegression);
  EXPECT_NEAR(a.rows[0].worse, 0.10, 0.01);
  // The same change upwards is an improvement: it passes.
  EXPECT_EQ(Gate(900, 1000, 0.002, 8).exit_code, kGatePass);
}

TEST(GateTest, LatencyRisingIsTheWorseDirection) {
  const GateAnswer up = Gate(500, 600, 0.002, 8, "map_latency_mean", "ns");
  ASSERT_EQ(up.rows.size(), 1u);
  EXPECT_FALSE(up.rows[0].higher_is_better);
  EXPECT_EQ(up.exit_code, kGateRegression);
  EXPECT_EQ(Gate(600, 500, 0.002, 8, "map_latency_mean", "ns").exit_code, kGatePass);
}

TEST(GateTest, AWideIntervalIsInconclusiveWithTheRunsThatWouldDecide) {
  const GateAnswer a = Gate(1000, 980, 0.05, 3);
  EXPECT_EQ(a.exit_code, kGateInconclusive);
  ASSERT_EQ(a.rows.size(), 1u);
  EXPECT_GT(a.rows[0].further_runs, 0);
  EXPECT_EQ(a.further_runs, a.rows[0].further_runs);
  // The estimate is of the right size: a true 2% change under 5% noise
  // needs a half width of about 1% to pass 3%, some 200 runs per commit.
  EXPECT_EQ(Gate(1000, 980, 0.05, 400).exit_code, kGatePass);
}

TEST(GateTest, TooFewRunsAreInconclusiveAndAChangeBelowTheThresholdIsNoRegression) {
  EXPECT_EQ(Gate(1000, 500, 0.001, 2).exit_code, kGateInconclusive);
  // Significant but smaller than the threshold: ruled out beyond 3%.
  EXPECT_EQ(Gate(1000, 990, 0.001, 8).exit_code, kGatePass);
}

TEST(GateTest, NoJudgedSeriesIsAnInfrastructureAnswer) {
  EXPECT_EQ(JudgeGate({}, 0.03).exit_code, kGateInfrastructure);
}

TEST(GateTest, JsonAndJunitCarryTheVerdicts) {
  const GateAnswer a = Gate(1000, 900, 0.002, 8);
  const nlohmann::json j = nlohmann::json::parse(FormatGateJson(a, "v5.10", "v5.11", 0.03));
  EXPECT_EQ(j["exit_code"], kGateRegression);
  EXPECT_EQ(j["series"][0]["verdict"], "REGRESSION");
  EXPECT_EQ(j["series"][0]["higher_is_better"], true);
  const std::string junit = FormatGateJunit(a, 0.03);
  EXPECT_NE(junit.find("tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\""), std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<failure message=\"regressed -10"), std::string::npos) << junit;
  const std::string broken = FormatGateJunit(GateAnswer{}, 0.03, "UNAVAILABLE: <no \"farm\">");
  EXPECT_NE(broken.find("errors=\"1\""), std::string::npos) << broken;
  EXPECT_NE(broken.find("UNAVAILABLE: &lt;no &quot;farm&quot;&gt;"), std::string::npos) << broken;
  const nlohmann::json e =
      nlohmann::json::parse(FormatGateJson(GateAnswer{}, "a", "b", 0.03, "UNAVAILABLE: x"));
  EXPECT_EQ(e["exit_code"], kGateInfrastructure);
  EXPECT_EQ(e["error"], "UNAVAILABLE: x");
}

TEST(GateTest, TheGateMatrixMeasuresBothCommits) {
  const std::string spec = R"(name: nightly
catalog: linux-iommu
platform: intel-vtd-snb16c
commits: v4.6..v5.0
modes: [strict]
workloads: [{name: dma-map-bench}]
repeats: 3
executor: emulator
)";
  absl::StatusOr<std::string> planned = PlanGateSpec(spec, "v4.6", "v4.7", 0);
  ASSERT_TRUE(planned.ok()) << planned.status();
  absl::StatusOr<pb::MatrixSpec> parsed = spec::MatrixSpecFromYaml(*planned, spec::SpecLimits{});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->commit_list().ids_size(), 2);
  EXPECT_EQ(parsed->commit_list().ids(0), "v4.6");
  EXPECT_EQ(parsed->commit_list().ids(1), "v4.7");
  EXPECT_EQ(parsed->repeats(), 3);
  EXPECT_EQ(parsed->name(), "nightly (gate v4.7 vs v4.6)");
  absl::StatusOr<std::string> more = PlanGateSpec(spec, "v4.6", "v4.7", 7);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(spec::MatrixSpecFromYaml(*more, spec::SpecLimits{})->repeats(), 7);
  EXPECT_FALSE(PlanGateSpec(spec, "v4.6", "v4.6", 0).ok());
  EXPECT_FALSE(PlanGateSpec(spec + "patch: \"diff --git a/x b/x\"\n", "v4.6", "v4.7", 0).ok());
}

}  // namespace
}  // namespace farm::cli
