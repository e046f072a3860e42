// Unit tests of the engine's pure helpers (the DB-backed flow is in
// analyzer_pgtest.cc).
#include "services/analyzer/analyzer.h"

#include <gtest/gtest.h>

namespace farm::analyzer {
namespace {

SampleRow Row(int64_t matrix, const std::string& commit, const std::string& mode, int repeat,
              double v) {
  SampleRow r;
  r.matrix_id = matrix;
  r.commit_id = commit;
  r.platform = "p";
  r.workload = "w";
  r.mode = mode;
  r.metric = "throughput";
  r.phase = "write";
  r.repeat = repeat;
  r.value = v;
  return r;
}

TEST(AnalyzerHelpersTest, SeriesValuesPlainAndOverhead) {
  const std::vector<SampleRow> rows{Row(1, "a", "strict", 0, 50), Row(1, "a", "off", 0, 100),
                                    Row(1, "a", "strict", 1, 60), Row(1, "a", "off", 1, 120),
                                    Row(2, "a", "strict", 0, 40), Row(1, "b", "strict", 0, 7)};
  SeriesSpec spec;
  spec.platform = "p";
  spec.workload = "w";
  spec.metric = "throughput";
  spec.phase = "write";
  spec.mode = "strict";
  EXPECT_EQ(SeriesValuesAt(rows, spec, "a"), (std::vector<double>{50, 60, 40}));
  spec.overhead = true;
  // Matrix 2 has no off run: no ratio from it.
  EXPECT_EQ(SeriesValuesAt(rows, spec, "a"), (std::vector<double>{0.5, 0.5}));
}

TEST(AnalyzerHelpersTest, RerunSpecCarriesCellAndKind) {
  SeriesSpec spec;
  spec.catalog = "linux-iommu";
  spec.platform = "intel-vtd-2s12c";
  spec.workload = "iozone-nfsrdma";
  spec.params_json = R"({"threads":"12","tests":"write,read"})";
  spec.model_set_json = R"({"agent.hold_ms":"5"})";
  spec.mode = "strict";
  spec.overhead = true;
  const std::string y =
      RerunSpecYaml(spec, "analyzer-b1-step1", {"v5.10", "c588072bba6b"}, 3, "bisect", 42, 0);
  EXPECT_NE(y.find("commits: [\"v5.10\",\"c588072bba6b\"]"), std::string::npos) << y;
  EXPECT_NE(y.find("modes: [\"strict\",\"off\"]"), std::string::npos) << y;
  EXPECT_NE(y.find("kind: bisect"), std::string::npos);
  EXPECT_NE(y.find("repeats: 3"), std::string::npos);
  EXPECT_NE(y.find("seed: 42"), std::string::npos);
  EXPECT_NE(y.find(R"(params: {"tests":"write,read","threads":"12"})"), std::string::npos) << y;
  EXPECT_NE(y.find(R"(set: {"agent.hold_ms":"5"})"), std::string::npos) << y;
  EXPECT_NE(y.find("executor: emulator"), std::string::npos);
}

TEST(AnalyzerHelpersTest, AlertJsonHasLabelsAnnotationsAndEnd) {
  Alert a;
  a.labels = {{"alertname", "IommuPerfRegression"}};
  a.annotations = {{"culprit", "c588072bba6b"}};
  a.ends_at = "2026-01-01T00:00:00Z";
  EXPECT_EQ(AlertsToJson({a}),
            R"([{"annotations":{"culprit":"c588072bba6b"},"endsAt":"2026-01-01T00:00:00Z",)"
            R"("labels":{"alertname":"IommuPerfRegression"}}])");
  EXPECT_FALSE(NewAlertmanagerSink("127.0.0.1:9093").ok());
  EXPECT_TRUE(NewAlertmanagerSink("http://127.0.0.1:9093/").ok());
}

AlertWork Work(bool primary, double magnitude) {
  AlertWork w;
  w.regression_id = 7;
  w.state = 2;  // CONFIRMED
  w.platform = "intel-vtd-2s12c";
  w.workload = "iozone-nfsrdma";
  w.metric = primary ? "throughput_kb_s/read" : "rcache_hit_rate";
  w.mode_name = "lazy";
  w.magnitude = magnitude;
  w.primary_metric = primary;
  w.primary_metrics = "throughput,throughput_kb_s";
  return w;
}

TEST(AnalyzerRankTest, PrimaryPagesSecondaryIsInfoOrSilent) {
  AnalyzerOptions o;
  auto primary = BuildAlert(Work(true, -0.227), o, "now");
  ASSERT_TRUE(primary.has_value());
  EXPECT_EQ(primary->labels["severity"], "critical");
  EXPECT_EQ(primary->labels["metric_rank"], "primary");
  EXPECT_EQ(BuildAlert(Work(true, -0.05), o, "now")->labels["severity"], "warning");

  auto secondary = BuildAlert(Work(false, -0.45), o, "now");
  ASSERT_TRUE(secondary.has_value());
  EXPECT_EQ(secondary->labels["severity"], "info");  // however large the change
  EXPECT_EQ(secondary->labels["metric_rank"], "secondary");
  EXPECT_EQ(secondary->annotations["primary_metrics"], "throughput,throughput_kb_s");
  EXPECT_EQ(secondary->annotations["summary"].rfind("secondary metric: ", 0), 0u);
  EXPECT_TRUE(secondary->ends_at.empty());

  o.secondary_severity = "none";
  EXPECT_FALSE(BuildAlert(Work(false, -0.45), o, "now").has_value());
  AlertWork fixed = Work(true, -0.2);
  fixed.state = 4;  // FIXED: resolved
  EXPECT_EQ(BuildAlert(fixed, o, "2026-01-01T00:00:00Z")->ends_at, "2026-01-01T00:00:00Z");
}

TEST(AnalyzerRankTest, NoteRecordsTheRank) {
  Finding f;
  f.workload = "iozone-nfsrdma";
  f.metric = "rcache_hit_rate/write";
  f.primary_metric = false;
  AnalyzerOptions o;
  EXPECT_EQ(RankNote(f, {"throughput", "throughput_kb_s"}, o),
            "secondary metric: rcache_hit_rate is not a primary metric of iozone-nfsrdma "
            "(throughput, throughput_kb_s); alerted as info, not bisected");
  o.bisect_secondary = true;
  o.secondary_severity = "none";
  EXPECT_EQ(RankNote(f, {"throughput"}, o),
            "secondary metric: rcache_hit_rate is not a primary metric of iozone-nfsrdma "
            "(throughput); not alerted");
  f.primary_metric = true;
  EXPECT_EQ(RankNote(f, {"throughput"}, o), "primary metric of iozone-nfsrdma");
}

}  // namespace
}  // namespace farm::analyzer
