#include "services/analyzer/alerts.h"

#include <gtest/gtest.h>

#include "lib/spec/spec_yaml.h"
#include "services/analyzer/bisect_state.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

AlertWork Bisected(int64_t id, const std::string& culprit) {
  AlertWork w;
  w.regression_id = id;
  w.state = pb::REGRESSION_STATE_CONFIRMED;
  w.platform = "kunpeng920-smmuv3";
  w.catalog = "linux-iommu";
  w.workload = "dma-map-bench";
  w.params = R"({"threads":"16"})";
  w.metric = "throughput";
  w.mode_name = "strict";
  w.magnitude = -0.2;
  w.last_good = "v5.10";
  w.first_bad = "v5.11";
  w.culprit_id = culprit;
  BisectState st;
  st.series.catalog = w.catalog;
  st.series.platform = w.platform;
  st.series.workload = w.workload;
  st.series.params_json = w.params;
  st.series.model_set_json = R"({"noise.cv":"0.02"})";
  st.series.metric = "throughput";
  st.series.mode = "strict";
  st.series.overhead = true;
  w.bisect_state_json = BisectStateToJson(st);
  return w;
}

TEST(AlertGroupTest, TheCulpritOnceKnownElseTheRange) {
  EXPECT_EQ(AlertGroup(Bisected(1, "")), "v5.10..v5.11");
  EXPECT_EQ(AlertGroup(Bisected(1, "c588072bba6b")), "c588072bba6b");
}

// The reproduce command is a here-document `farmctl try` reads from stdin:
// its spec is the cell (platform, workload with params, mode and off for an
// overhead series, the model settings) at the last good commit, and the
// patch is the first bad one.
TEST(ReproduceCommandTest, HoldsTheCellsSpecAtTheLastGoodCommit) {
  const AlertWork w = Bisected(12, "");
  const std::string cmd = ReproduceCommand(w, 5);
  const std::string head = "farmctl try --patch-commit v5.11 - <<'EOF'\n";
  ASSERT_EQ(cmd.rfind(head, 0), 0u) << cmd;
  ASSERT_EQ(cmd.substr(cmd.size() - 4), "\nEOF");
  const std::string yaml = cmd.substr(head.size(), cmd.size() - head.size() - 4);
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(yaml, spec::SpecLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << yaml;
  EXPECT_EQ(spec->name(), "reproduce regression 12");
  EXPECT_EQ(spec->catalog(), "linux-iommu");
  ASSERT_EQ(spec->commit_list().ids_size(), 1);
  EXPECT_EQ(spec->commit_list().ids(0), "v5.10");
  ASSERT_EQ(spec->platform_size(), 1);
  EXPECT_EQ(spec->platform(0), "kunpeng920-smmuv3");
  ASSERT_EQ(spec->modes_size(), 2);
  EXPECT_EQ(spec->modes(0), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(spec->modes(1), pb::IOMMU_MODE_OFF);
  ASSERT_EQ(spec->workloads_size(), 1);
  EXPECT_EQ(spec->workloads(0).params().at("threads"), "16");
  EXPECT_EQ(spec->set().at("noise.cv"), "0.02");
  EXPECT_EQ(spec->repeats(), 5);
  EXPECT_EQ(spec->kind(), pb::JOB_KIND_UNSPECIFIED);  // a user's bulk matrix
  AlertWork none = w;
  none.bisect_state_json.clear();
  EXPECT_EQ(ReproduceCommand(none, 5), "");
}

TEST(BuildAlertTest, CarriesItsGroupReproduceCommandAndReportLink) {
  AlertOptions o;
  o.report_url = "https://reports.lab:8088/";
  const AlertWork w = Bisected(12, "c588072bba6b");
  std::optional<Alert> a = BuildAlert(w, o, "now", {7, 12});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->labels.at("alert_group"), "c588072bba6b");
  EXPECT_EQ(a->labels.at("params"), "threads=16");
  EXPECT_EQ(a->labels.at("catalog"), "linux-iommu");
  EXPECT_EQ(a->annotations.at("group"), "2 open regressions share culprit c588072bba6b: 7, 12");
  EXPECT_EQ(a->annotations.at("report"), "https://reports.lab:8088/regressions/12");
  EXPECT_EQ(a->generator_url, a->annotations.at("report"));
  EXPECT_EQ(a->annotations.at("reproduce"), ReproduceCommand(w, o.reproduce_repeats));
  EXPECT_NE(a->annotations.at("summary").find("dma-map-bench{threads=16} throughput"),
            std::string::npos)
      << a->annotations.at("summary");
  // Alone in its group, without a report server: neither annotation.
  o.report_url.clear();
  a = BuildAlert(w, o, "now", {12});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->annotations.count("group"), 0u);
  EXPECT_EQ(a->annotations.count("report"), 0u);
  EXPECT_EQ(a->generator_url, "");
}

// A silence outlives the bisect moving the alert to its culprit's group.
TEST(BuildAlertTest, AModeChangeSaysBothModes) {
  AlertWork w = Bisected(9, "a250c23f15c2");
  w.change_class = pb::CHANGE_CLASS_MODE_CHANGED;
  w.metric = "effective_mode";
  w.mode_name = "lazy";
  w.magnitude = 0;
  BisectState st = *BisectStateFromJson(w.bisect_state_json);
  st.series.metric = "effective_mode";
  st.mode_before = "lazy";
  st.mode_after = "strict";
  w.bisect_state_json = BisectStateToJson(st);
  const std::optional<Alert> a = BuildAlert(w, AlertOptions{}, "2026-12-05T17:00:00Z", {9});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->labels.at("severity"), "critical");
  EXPECT_EQ(a->annotations.at("change_class"), "mode_changed");
  EXPECT_EQ(a->annotations.at("mode_before"), "lazy");
  EXPECT_EQ(a->annotations.at("mode_after"), "strict");
  EXPECT_EQ(a->annotations.at("requested_mode"), "lazy");
  EXPECT_EQ(a->annotations.at("magnitude"), "lazy -> strict");
  EXPECT_EQ(a->annotations.at("summary"),
            "effective IOMMU mode lazy -> strict (requested lazy): dma-map-bench{threads=16} on "
            "kunpeng920-smmuv3, culprit a250c23f15c2");
  // A performance finding of the same cell keeps its size.
  const std::optional<Alert> perf =
      BuildAlert(Bisected(10, ""), AlertOptions{}, "2026-12-05T17:00:00Z", {10});
  ASSERT_TRUE(perf.has_value());
  EXPECT_EQ(perf->annotations.count("mode_before"), 0u);
  EXPECT_EQ(perf->annotations.at("magnitude"), "-20.0%");
}

TEST(BuildSilenceTest, MatchesAcrossGroupAndSeverityChanges) {
  std::optional<Alert> a = BuildAlert(Bisected(12, ""), AlertOptions{}, "now");
  ASSERT_TRUE(a.has_value());
  const Silence s = BuildSilence(*a, 12, "now", "later");
  EXPECT_EQ(s.matchers.count("alert_group"), 0u);
  EXPECT_EQ(s.matchers.count("severity"), 0u);
  EXPECT_EQ(s.matchers.at("regression_id"), "12");
  EXPECT_EQ(s.matchers.at("params"), "threads=16");
}

}  // namespace
}  // namespace farm::analyzer
