// The regression and bisect views, and the triage states a user may set.
#include "cli/regressions.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/bisect.h"
#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(ParseRegressionMarkTest, AcceptsOnlyTriageStates) {
  EXPECT_EQ(*ParseRegressionMark("fixed"), pb::REGRESSION_STATE_FIXED);
  EXPECT_EQ(*ParseRegressionMark("false-positive"), pb::REGRESSION_STATE_FALSE_POSITIVE);
  EXPECT_EQ(*ParseRegressionMark("acknowledged"), pb::REGRESSION_STATE_ACKNOWLEDGED);
  EXPECT_EQ(*ParseRegressionMark("ignored"), pb::REGRESSION_STATE_IGNORED);
  EXPECT_FALSE(ParseRegressionMark("confirmed").ok());
  EXPECT_FALSE(ParseRegressionMark("reopen").ok());
}

TEST(FormatRegressionTest, ShowsTheFixCheck) {
  pb::Regression r;
  r.set_id(3);
  r.set_state(pb::REGRESSION_STATE_FIXED);
  EXPECT_EQ(FormatRegression(r).find("fix check"), std::string::npos);
  r.set_fix_check("back");
  r.set_fix_check_commit("t31");
  r.set_fix_check_change(-0.004);
  EXPECT_NE(FormatRegression(r).find("  fix check: back at t31 (-0.40% vs last good)\n"),
            std::string::npos)
      << FormatRegression(r);
}

TEST(FormatRegressionTest, AModeChangeShowsItsModes) {
  pb::Regression r;
  r.set_id(7);
  r.set_state(pb::REGRESSION_STATE_CONFIRMED);
  r.set_change_class(pb::CHANGE_CLASS_MODE_CHANGED);
  r.set_metric("effective_mode");
  r.set_mode(pb::IOMMU_MODE_LAZY);
  r.set_last_good("v5.12");
  r.set_first_bad("v5.13");
  r.set_culprit_id("a250c23f15c2");
  pb::ModeEffect* e = r.add_per_mode();
  e->set_mode(pb::IOMMU_MODE_LAZY);
  e->set_before(pb::IOMMU_MODE_LAZY);
  e->set_after(pb::IOMMU_MODE_STRICT);
  EXPECT_NE(FormatRegressionsTable({r}).find("lazy -> strict"), std::string::npos)
      << FormatRegressionsTable({r});
  EXPECT_NE(FormatRegression(r).find("  change:    effective mode lazy -> strict (mode_changed)\n"),
            std::string::npos)
      << FormatRegression(r);
  EXPECT_EQ(FormatRegression(r).find("before"), std::string::npos) << FormatRegression(r);
}

TEST(FormatRegressionTest, ShowsTheConfirmingExecutor) {
  pb::Regression r;
  r.set_id(5);
  r.set_state(pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(FormatRegression(r).find("confirmed: by"), std::string::npos);
  EXPECT_NE(FormatRegressionsTable({r}).find("confirmed by"), std::string::npos);
  r.set_confirmed_by("fio");
  r.set_confirm_matrix_id(12);
  r.set_confirm_note("fio on real kernels (virt-smmuv3, fio-nvme): iops/read -9.0%");
  EXPECT_NE(FormatRegression(r).find("  confirmed: by fio (matrix 12): fio on real kernels "
                                     "(virt-smmuv3, fio-nvme): iops/read -9.0%\n"),
            std::string::npos)
      << FormatRegression(r);
  EXPECT_NE(FormatRegressionsTable({r}).find("fio (matrix 12)"), std::string::npos)
      << FormatRegressionsTable({r});
  const std::string csv = FormatRegressionsCsv({r});
  EXPECT_NE(csv.find(",confirmed_by,confirm_matrix_id,culprits,params,group_id\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",fio,12,,,0\n"), std::string::npos) << csv;
  r.set_confirmed_by("emulator");
  r.set_confirm_matrix_id(0);
  EXPECT_NE(FormatRegressionsTable({r}).find("emulator"), std::string::npos);
}

TEST(FormatRegressionTest, ShowsItsRegressionGroup) {
  pb::Regression r;
  r.set_id(5);
  EXPECT_EQ(FormatRegression(r).find("group:"), std::string::npos);
  const std::string none = FormatRegressionsTable({r});
  EXPECT_NE(none.find("group"), std::string::npos) << none;
  r.set_group_id(12);
  EXPECT_NE(FormatRegression(r).find("  group:     12 (farmctl regressions --group 12)\n"),
            std::string::npos)
      << FormatRegression(r);
  const std::string table = FormatRegressionsTable({r});
  EXPECT_NE(table.find(" 12"), std::string::npos) << table;
  EXPECT_NE(FormatRegressionsCsv({r}).find(",12\n"), std::string::npos);
}

// A series is a workload with its params: they are shown with it, sorted,
// and a change from zero in words.
TEST(FormatRegressionTest, ShowsTheSeriesParamsAndAChangeFromZero) {
  pb::Regression r;
  r.set_id(6);
  r.set_workload("dma-map-bench");
  (*r.mutable_params())["threads"] = "16";
  (*r.mutable_params())["granule"] = "4096";
  r.set_magnitude(proto::kChangeFromZero);
  const std::string table = FormatRegressionsTable({r});
  EXPECT_NE(table.find("dma-map-bench{granule=4096,threads=16}"), std::string::npos) << table;
  EXPECT_NE(table.find("rose from 0"), std::string::npos) << table;
  EXPECT_NE(FormatRegression(r).find(" / dma-map-bench{granule=4096,threads=16} / "),
            std::string::npos)
      << FormatRegression(r);
  EXPECT_NE(FormatRegressionsCsv({r}).find(",\"granule=4096,threads=16\",0\n"), std::string::npos)
      << FormatRegressionsCsv({r});
}

TEST(FormatAnalysisTest, EmptyDataIsReadable) {
  EXPECT_EQ(FormatRegressionsTable({}), "no regressions\n");
  auto j = nlohmann::json::parse(FormatRegressionsJson({}));
  EXPECT_TRUE(j.is_object());
  pb::Bisect b;
  EXPECT_NE(FormatBisectTable(b).find("no steps yet"), std::string::npos);
  pb::Regression reg;
  reg.set_id(4);
  reg.set_magnitude(-0.19);
  reg.set_state(pb::REGRESSION_STATE_CONFIRMED);
  std::string table = FormatRegressionsTable({reg});
  EXPECT_NE(table.find("-19.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("confirmed"), std::string::npos) << table;
}

pb::Regression RankedRegression(int64_t id, const std::string& metric, const std::string& rank) {
  pb::Regression reg;
  reg.set_id(id);
  reg.set_state(pb::REGRESSION_STATE_CONFIRMED);
  reg.set_workload("iozone-nfsrdma");
  reg.set_metric(metric);
  reg.set_metric_rank(rank);
  reg.add_primary_metrics("throughput");
  reg.add_primary_metrics("throughput_kb_s");
  reg.set_note("looked at, \"fine\"");
  return reg;
}

TEST(FormatRegressionsTest, TableHasRankColumn) {
  const std::string table = FormatRegressionsTable(
      {RankedRegression(1, "throughput", "primary"), RankedRegression(2, "latency", "secondary")});
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << table;
  const size_t col = lines[0].find("rank");
  ASSERT_NE(col, std::string::npos) << table;
  EXPECT_EQ(lines[1].substr(col, 8), "primary ") << table;
  EXPECT_EQ(lines[2].substr(col, 9), "secondary") << table;
  // An older server leaves the field empty: shown as unknown, never as primary.
  pb::Regression old = RankedRegression(3, "throughput", "");
  const std::string t2 = FormatRegressionsTable({old});
  std::vector<std::string> l2 = absl::StrSplit(t2, '\n', absl::SkipEmpty());
  ASSERT_EQ(l2.size(), 2u);
  EXPECT_EQ(l2[1].substr(l2[0].find("rank"), 2), "- ") << t2;
}

TEST(FormatRegressionsTest, CsvHasRankAndPrimaryMetrics) {
  const std::string csv = FormatRegressionsCsv({RankedRegression(2, "latency", "secondary")});
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << csv;
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  ASSERT_GE(header.size(), 7u);
  EXPECT_EQ(header[5], "rank");
  EXPECT_EQ(header[6], "primary_metrics");
  EXPECT_EQ(lines[1].rfind(
                "2,confirmed,,iozone-nfsrdma,latency,secondary,throughput;throughput_kb_s,", 0),
            0u)
      << csv;
  EXPECT_NE(lines[1].find("\"looked at, \"\"fine\"\"\""), std::string::npos) << csv;
}

TEST(FormatRegressionsTest, JsonCarriesRankFields) {
  auto j = nlohmann::json::parse(FormatRegressionsJson(
      {RankedRegression(1, "throughput", "primary"), RankedRegression(2, "latency", "secondary")}));
  ASSERT_EQ(j["regressions"].size(), 2u) << j.dump();
  EXPECT_EQ(j["regressions"][0]["metric_rank"], "primary");
  EXPECT_EQ(j["regressions"][1]["metric_rank"], "secondary");
  EXPECT_EQ(j["regressions"][1]["primary_metrics"],
            nlohmann::json::array({"throughput", "throughput_kb_s"}));
}

TEST(FormatRegressionsTest, DetailShowsRank) {
  const std::string text = FormatRegression(RankedRegression(2, "latency", "secondary"));
  EXPECT_NE(text.find("rank:      secondary (primary metrics: throughput, throughput_kb_s)"),
            std::string::npos)
      << text;
}

// seed 000's range: two changes, each its own culprit with its share.
pb::Regression TwoCulpritRegression() {
  pb::Regression reg = RankedRegression(7, "throughput", "primary");
  reg.set_bisect_id(3);
  reg.set_culprit_id("c588072bba6b");
  reg.set_culprit_subject("iommu: second");
  pb::Culprit* a = reg.add_culprits();
  a->set_commit_id("c062db039f40");
  a->set_subject("iommu/vt-d: Update domain geometry");
  a->set_last_good("aaaa");
  a->set_relative_change(-0.098);
  a->set_share(0.43);
  pb::Culprit* b = reg.add_culprits();
  b->set_commit_id("c588072bba6b");
  b->set_subject("iommu: second");
  b->set_last_good("c062db039f40");
  b->set_relative_change(-0.129);
  b->set_share(0.57);
  return reg;
}

TEST(FormatRegressionsTest, EveryCulpritIsListedWithItsShare) {
  const pb::Regression reg = TwoCulpritRegression();
  const std::string table = FormatRegressionsTable({reg});
  EXPECT_NE(table.find("c062db039f40 (43%), c588072bba6b (57%)"), std::string::npos) << table;

  const std::string csv = FormatRegressionsCsv({reg});
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << csv;
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  ASSERT_GE(header.size(), 3u) << csv;
  EXPECT_EQ(header[header.size() - 3], "culprits") << csv;
  EXPECT_NE(lines[1].find(",c062db039f40:0.42999999999999999;c588072bba6b:0.56999999999999995"),
            std::string::npos)
      << csv;

  auto j = nlohmann::json::parse(FormatRegressionsJson({reg}));
  const auto& cs = j["regressions"][0]["culprits"];
  ASSERT_EQ(cs.size(), 2u) << j.dump();
  EXPECT_EQ(cs[0]["commit_id"], "c062db039f40");
  EXPECT_DOUBLE_EQ(cs[0]["share"].get<double>(), 0.43);
  EXPECT_EQ(cs[1]["commit_id"], "c588072bba6b");

  const std::string text = FormatRegression(reg);
  EXPECT_NE(text.find("culprits:  2"), std::string::npos) << text;
  for (const std::string want :
       {"c062db039f40  43%    -9.80%   aaaa", "c588072bba6b  57%    -12.90%  c062db039f40"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_NE(text.find("iommu/vt-d: Update domain geometry"), std::string::npos) << text;
}

TEST(FormatRegressionsTest, OneCulpritKeepsTheSingleCulpritLayout) {
  pb::Regression reg = RankedRegression(8, "throughput", "primary");
  reg.set_culprit_id("t21");
  reg.add_culprits()->set_commit_id("t21");
  const std::string table = FormatRegressionsTable({reg});
  EXPECT_NE(table.find("t21 "), std::string::npos) << table;
  EXPECT_EQ(table.find("(100%)"), std::string::npos) << table;
  EXPECT_EQ(FormatRegression(reg).find("culprits:"), std::string::npos);
}

TEST(FormatBisectTest, TableListsEveryCulprit) {
  const pb::Regression reg = TwoCulpritRegression();
  pb::Bisect b;
  b.set_id(3);
  b.set_regression_id(7);
  b.set_state("done");
  b.set_culprit_id("c588072bba6b");
  *b.mutable_culprits() = reg.culprits();
  pb::BisectStep* s = b.add_steps();
  s->set_step(1);
  s->set_commit_id("c062db039f40");
  s->set_verdict("split");
  const std::string text = FormatBisectTable(b);
  EXPECT_NE(text.find("culprits:  2"), std::string::npos) << text;
  EXPECT_NE(text.find("c062db039f40  43%"), std::string::npos) << text;
  EXPECT_NE(text.find("c588072bba6b  57%"), std::string::npos) << text;
  EXPECT_NE(text.find("split"), std::string::npos) << text;
  auto j = nlohmann::json::parse(FormatBisectJson(b));
  ASSERT_EQ(j["culprits"].size(), 2u) << j.dump();
  EXPECT_EQ(j["culprits"][1]["commit_id"], "c588072bba6b");
}

TEST(FormatBisectTest, EachStepSaysWhereItRan) {
  pb::Bisect b;
  b.set_id(3);
  b.set_regression_id(9);
  const char* executors[] = {"emulator", "dma-map-bench", ""};
  for (int i = 0; i < 3; ++i) {
    pb::BisectStep* s = b.add_steps();
    s->set_step(i);
    s->set_commit_id(absl::StrCat("c", i));
    s->set_verdict("bad");
    s->set_executor(executors[i]);
    s->set_real_kernel(i == 1);
  }
  const std::string text = FormatBisectTable(b);
  EXPECT_NE(text.find("ran on"), std::string::npos) << text;
  EXPECT_NE(text.find("dma-map-bench on real kernels"), std::string::npos) << text;
  EXPECT_EQ(StepRanOn(b.steps(0)), "emulator");
  EXPECT_EQ(StepRanOn(b.steps(2)), "-");
  const std::string csv = FormatBisectCsv(b);
  EXPECT_NE(csv.find(",executor,real_kernel\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",dma-map-bench,true\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",emulator,false\n"), std::string::npos) << csv;
}

TEST(FormatBisectTest, CsvHasOneRowPerStep) {
  pb::Bisect b;
  b.set_id(3);
  b.set_regression_id(9);
  b.set_state("done");
  b.set_culprit_id("f5caa960c7ef");
  for (int i = 1; i <= 2; ++i) {
    pb::BisectStep* s = b.add_steps();
    s->set_step(i);
    s->set_commit_id(i == 1 ? "f5caa960c7ef" : "3fe465c9a8b7");
    s->set_commit_index(10 - i);
    s->set_verdict(i == 1 ? "bad" : "good");
    s->set_repeats(5);
    s->set_mean(1.5);
    s->set_relative_change(0.25);
    s->set_p_value(0.001);
  }
  EXPECT_EQ(FormatBisectCsv(b),
            "bisect,regression,state,culprit,step,commit,index,verdict,repeats,mean,change,p,"
            "executor,real_kernel\n"
            "3,9,done,f5caa960c7ef,1,f5caa960c7ef,9,bad,5,1.5,0.25,0.001,,false\n"
            "3,9,done,f5caa960c7ef,2,3fe465c9a8b7,8,good,5,1.5,0.25,0.001,,false\n");
}

}  // namespace
}  // namespace farm::cli
