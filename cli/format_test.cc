#include "cli/format.h"

#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_split.h"
#include "cli/agents.h"
#include "cli/bisect.h"
#include "cli/catalog.h"
#include "cli/matrix.h"
#include "cli/regressions.h"
#include "cli/results.h"
#include "cli/tokens.h"
#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

pb::Result MakeResult(int64_t job_id, const std::string& commit, int index, pb::IommuMode mode,
                      int repeat, double throughput,
                      const std::string& platform = "intel-vtd-2s12c") {
  pb::Result r;
  r.set_job_id(job_id);
  r.set_attempt(1);
  pb::Job* job = r.mutable_job();
  job->set_id(job_id);
  job->set_matrix_id(7);
  job->set_catalog("linux-iommu");
  job->set_commit_id(commit);
  job->set_commit_index(index);
  job->set_platform(platform);
  job->mutable_workload()->set_name("dma-map-bench");
  (*job->mutable_workload()->mutable_params())["threads"] = "4";
  job->set_mode(mode);
  job->set_repeat(repeat);
  pb::Sample* s = r.add_samples();
  s->set_metric("throughput");
  s->set_value(throughput);
  s->set_unit("ops/s");
  pb::Sample* lat = r.add_samples();
  lat->set_metric("map_latency_mean");
  lat->set_value(100 + repeat);
  lat->set_unit("ns");
  r.set_agent("a1");
  return r;
}

TEST(ComputeMeanCiTest, StudentTNotNormal) {
  // n = 5, sd = sqrt(2.5): t(0.975, 4) = 2.7764451 (tables), not 1.96.
  MeanCi ci = ComputeMeanCi({1, 2, 3, 4, 5});
  EXPECT_EQ(ci.n, 5);
  EXPECT_DOUBLE_EQ(ci.mean, 3.0);
  EXPECT_NEAR(ci.stddev, std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(ci.half_width, 2.7764451 * std::sqrt(2.5) / std::sqrt(5.0), 1e-6);
}

TEST(ComputeMeanCiTest, TwoValuesUseOneDegreeOfFreedom) {
  // t(0.975, 1) = 12.7062047.
  MeanCi ci = ComputeMeanCi({1, 3});
  EXPECT_DOUBLE_EQ(ci.mean, 2.0);
  EXPECT_NEAR(ci.half_width, 12.7062047, 1e-6);
}

TEST(ComputeMeanCiDeathTest, ConfidenceOutsideTheOpenUnitIntervalAborts) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  EXPECT_GT(ComputeMeanCi({1, 2, 3}, 0.5).half_width, 0);
  for (double bad : {0.0, 1.0, -0.5, 95.0}) {
    EXPECT_DEATH(ComputeMeanCi({1, 2, 3}, bad), "confidence level outside \\(0, 1\\)")
        << "confidence " << bad;
  }
}

TEST(ComputeMeanCiTest, OneValueHasNoInterval) {
  MeanCi ci = ComputeMeanCi({42});
  EXPECT_EQ(ci.n, 1);
  EXPECT_DOUBLE_EQ(ci.mean, 42);
  EXPECT_TRUE(std::isnan(ci.half_width));
}

TEST(ComputeMeanCiTest, EmptyIsNan) {
  MeanCi ci = ComputeMeanCi({});
  EXPECT_EQ(ci.n, 0);
  EXPECT_TRUE(std::isnan(ci.mean));
}

TEST(ComputeMeanCiTest, ConstantValuesHaveZeroWidth) {
  MeanCi ci = ComputeMeanCi({7, 7, 7});
  EXPECT_DOUBLE_EQ(ci.half_width, 0);
}

TEST(MainMetricTest, PrefersThroughput) {
  pb::Result r;
  r.add_samples()->set_metric("map_latency_mean");
  r.add_samples()->set_metric("throughput");
  EXPECT_EQ(MainMetric({r}), "throughput");
  pb::Result only_lat;
  only_lat.add_samples()->set_metric("iops");
  EXPECT_EQ(MainMetric({only_lat}), "iops");
  EXPECT_EQ(MainMetric({}), "");
}

TEST(SummarizeTest, GroupsRepeatsPerCellInCommitOrder) {
  std::vector<pb::Result> results = {
      MakeResult(1, "bbb", 1, pb::IOMMU_MODE_STRICT, 0, 10),
      MakeResult(2, "bbb", 1, pb::IOMMU_MODE_STRICT, 1, 12),
      MakeResult(3, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 20),
      MakeResult(4, "aaa", 0, pb::IOMMU_MODE_OFF, 0, 30),
      MakeResult(5, "bbb", 1, pb::IOMMU_MODE_STRICT, 2, 14),
  };
  std::vector<SummaryRow> rows = Summarize(results, "throughput");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].commit, "aaa");
  EXPECT_EQ(rows[0].mode, "off");
  EXPECT_EQ(rows[1].commit, "aaa");
  EXPECT_EQ(rows[1].mode, "strict");
  EXPECT_EQ(rows[2].commit, "bbb");
  EXPECT_EQ(rows[2].stats.n, 3);
  EXPECT_DOUBLE_EQ(rows[2].stats.mean, 12);
  EXPECT_EQ(rows[2].unit, "ops/s");
  EXPECT_EQ(rows[2].workload, "dma-map-bench");
}

TEST(SummarizeTest, WorkloadLabelledWithParamsOnlyWhenAmbiguous) {
  pb::Result a = MakeResult(1, "aaa", 0, pb::IOMMU_MODE_OFF, 0, 1);
  pb::Result b = MakeResult(2, "aaa", 0, pb::IOMMU_MODE_OFF, 0, 2);
  (*b.mutable_job()->mutable_workload()->mutable_params())["threads"] = "8";
  std::vector<SummaryRow> rows = Summarize({a, b}, "throughput");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].workload, "dma-map-bench{threads=4}");
  EXPECT_EQ(rows[1].workload, "dma-map-bench{threads=8}");
}

TEST(FormatResultsTableTest, ShowsCiAndPlatformOnlyWhenSeveral) {
  std::vector<pb::Result> results = {
      MakeResult(1, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 1),
      MakeResult(2, "aaa", 0, pb::IOMMU_MODE_STRICT, 1, 2),
      MakeResult(3, "aaa", 0, pb::IOMMU_MODE_STRICT, 2, 3),
      MakeResult(4, "aaa", 0, pb::IOMMU_MODE_STRICT, 3, 4),
      MakeResult(5, "aaa", 0, pb::IOMMU_MODE_STRICT, 4, 5),
  };
  std::string table = FormatResultsTable(results);
  EXPECT_NE(table.find("metric: throughput"), std::string::npos) << table;
  EXPECT_EQ(table.find("platform"), std::string::npos) << table;
  // 3 -/+ 1.9632 (t with 4 degrees of freedom).
  EXPECT_NE(table.find("1.037"), std::string::npos) << table;
  EXPECT_NE(table.find("4.963"), std::string::npos) << table;
  results.push_back(MakeResult(6, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 9, "arm-mmu500-8c"));
  table = FormatResultsTable(results);
  EXPECT_NE(table.find("platform"), std::string::npos) << table;
  EXPECT_NE(table.find("arm-mmu500-8c"), std::string::npos) << table;
  EXPECT_EQ(FormatResultsTable({}), "no results\n");
}

TEST(FormatResultsTableTest, SaysWhenFiguresAreInstructionTimed) {
  std::vector<pb::Result> results = {MakeResult(1, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 1)};
  EXPECT_EQ(FormatResultsTable(results).find("instruction-timed"), std::string::npos);
  results[0].mutable_host()->mutable_guest()->set_accel("tcg-icount");
  results[0].mutable_host()->mutable_guest()->set_icount_shift(7);
  const std::string table = FormatResultsTable(results);
  EXPECT_NE(table.find("instruction-timed: guests under QEMU tcg-icount (shift 7)"),
            std::string::npos)
      << table;
}

TEST(FormatResultsCsvTest, EverySampleAndQuoting) {
  pb::Result r = MakeResult(1, "aaa", 0, pb::IOMMU_MODE_LAZY, 0, 1.5);
  (*r.mutable_job()->mutable_workload()->mutable_params())["tests"] = "write,read";
  std::string csv = FormatResultsCsv({r});
  // Header + 2 samples.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("\"tests=write,read,threads=4\""), std::string::npos) << csv;
  EXPECT_NE(csv.find(",lazy,0,a1,throughput,,1.5,ops/s\n"), std::string::npos) << csv;
  EXPECT_EQ(CsvField("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(CsvField("plain"), "plain");
}

TEST(FormatResultsJsonTest, ParsesBackWithEverySample) {
  pb::Result r = MakeResult(3, "aaa", 0, pb::IOMMU_MODE_OFF, 2, 5);
  r.set_raw_output("{\"x\":1}");
  r.set_raw_format("emu-json");
  auto j = nlohmann::json::parse(FormatResultsJson({r}));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["job_id"], 3);
  EXPECT_EQ(j[0]["mode"], "off");
  EXPECT_EQ(j[0]["params"]["threads"], "4");
  EXPECT_EQ(j[0]["samples"].size(), 2u);
  EXPECT_EQ(j[0]["samples"][0]["value"], 5.0);
  EXPECT_EQ(j[0]["raw_format"], "emu-json");
}

TEST(FormatResultsJsonTest, CarriesTheMonitorsOfARealRun) {
  pb::Result r = MakeResult(3, "aaa", 0, pb::IOMMU_MODE_STRICT, 2, 5);
  auto plain = nlohmann::json::parse(FormatResultsJson({r}));
  EXPECT_FALSE(plain[0].contains("monitors"));
  pb::Monitors& m = *r.mutable_monitors();
  m.set_where("host");
  pb::InterruptDelta* d = m.add_interrupts();
  d->set_source("nvme0q1");
  d->set_total(250);
  (*m.mutable_vmstat())["pgfault"] = 800;
  auto j = nlohmann::json::parse(FormatResultsJson({r}));
  EXPECT_EQ(j[0]["monitors"]["where"], "host");
  EXPECT_EQ(j[0]["monitors"]["interrupts"][0]["source"], "nvme0q1");
  EXPECT_EQ(j[0]["monitors"]["interrupts"][0]["total"], "250");  // int64 as the proto's JSON
  EXPECT_EQ(j[0]["monitors"]["vmstat"]["pgfault"], "800");
}

TEST(FormatProgressLineTest, CountsRateAndEta) {
  pb::MatrixProgress p;
  p.set_matrix_id(9);
  p.set_state(pb::MATRIX_STATE_RUNNING);
  p.mutable_counts()->set_total(100);
  p.mutable_counts()->set_succeeded(40);
  p.mutable_counts()->set_failed(2);
  p.set_jobs_per_second(4.2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 9 running: 42/100 done, 2 failed, 4.2 jobs/s, ETA 14s");
  p.mutable_eta()->set_seconds(125);
  EXPECT_EQ(FormatProgressLine(p),
            "matrix 9 running: 42/100 done, 2 failed, 4.2 jobs/s, ETA 2m05s");
  p.set_done(true);
  p.set_state(pb::MATRIX_STATE_FAILED);
  EXPECT_EQ(FormatProgressLine(p), "matrix 9 failed: 42/100 done, 2 failed, 4.2 jobs/s");
}

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
  EXPECT_NE(csv.find(",confirmed_by,confirm_matrix_id,culprits,params\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",fio,12,,\n"), std::string::npos) << csv;
  r.set_confirmed_by("emulator");
  r.set_confirm_matrix_id(0);
  EXPECT_NE(FormatRegressionsTable({r}).find("emulator"), std::string::npos);
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
  EXPECT_NE(FormatRegressionsCsv({r}).find(",\"granule=4096,threads=16\"\n"), std::string::npos)
      << FormatRegressionsCsv({r});
}

TEST(RenderTableTest, PadsColumns) {
  EXPECT_EQ(RenderTable({"a", "bb"}, {{"xxx", "y"}}), "a    bb\nxxx  y\n");
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

TEST(JobsPerSecondTest, FinishedOverElapsed) {
  EXPECT_DOUBLE_EQ(JobsPerSecond(18, 4.0), 4.5);
  EXPECT_EQ(JobsPerSecond(18, 0.0), 0.0);
  EXPECT_EQ(JobsPerSecond(0, 3.0), 0.0);
  // Not measurable yet: one job, or less than a second.
  EXPECT_EQ(JobsPerSecond(1, 5.0), 0.0);
  EXPECT_EQ(JobsPerSecond(3, 0.4), 0.0);
  EXPECT_DOUBLE_EQ(JobsPerSecond(2, 1.0), 2.0);
}

TEST(FormatProgressLineTest, FinalLineShowsTheMeasuredRate) {
  pb::MatrixProgress p;
  p.set_matrix_id(3);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.set_done(true);
  p.mutable_counts()->set_total(18);
  p.mutable_counts()->set_succeeded(18);
  p.set_jobs_per_second(JobsPerSecond(18, 4.0));
  EXPECT_EQ(FormatProgressLine(p), "matrix 3 completed: 18/18 done, 0 failed, 4.5 jobs/s");
}

TEST(FormatProgressLineTest, AShortMatrixEndsWithCountsOnly) {
  pb::MatrixProgress p;
  p.set_matrix_id(4);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.set_done(true);
  p.mutable_counts()->set_total(4);
  p.mutable_counts()->set_succeeded(4);
  p.set_jobs_per_second(JobsPerSecond(4, 0.3));  // farmctl's final line
  EXPECT_EQ(FormatProgressLine(p), "matrix 4 completed: 4/4 done, 0 failed");
}

TEST(FormatProgressLineTest, NoRateYetIsSaidNotPrintedAsZero) {
  pb::MatrixProgress p;
  p.set_matrix_id(5);
  p.set_state(pb::MATRIX_STATE_RUNNING);
  p.mutable_counts()->set_total(2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 running: 0/2 done, 0 failed, no job finished yet");
  p.mutable_counts()->set_succeeded(1);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 running: 1/2 done, 0 failed, rate not measured yet");
  p.set_jobs_per_second(1.0 / 240);  // a real kernel job every four minutes
  EXPECT_EQ(FormatProgressLine(p),
            "matrix 5 running: 1/2 done, 0 failed, 0.25 jobs/min, ETA 4m00s");
  p.set_done(true);
  p.set_jobs_per_second(0);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.mutable_counts()->set_succeeded(2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 completed: 2/2 done, 0 failed");
}

TEST(ParseOutputFormatTest, AcceptsTheListedNamesOnly) {
  EXPECT_EQ(OutputFormatNames(), (std::vector<std::string>{"table", "csv", "json"}));
  EXPECT_EQ(*ParseOutputFormat("table"), OutputFormat::kTable);
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  absl::StatusOr<OutputFormat> bad = ParseOutputFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("table, csv, json"), std::string::npos) << bad.status();
}

pb::Catalog CatalogWithCommits(const std::string& name, int commits) {
  pb::Catalog c;
  c.set_name(name);
  c.set_source("file:" + name + ".yaml");
  for (int i = 0; i < commits; ++i) {
    pb::CatalogCommit* cc = c.add_commits();
    cc->set_index(i);
    cc->set_id("v" + std::to_string(i));
  }
  return c;
}

TEST(FormatCatalogListTest, CountsCommitsInEveryFormat) {
  const std::vector<pb::Catalog> cats = {CatalogWithCommits("linux-iommu", 12),
                                         CatalogWithCommits("a,b", 0)};
  const std::string table = FormatCatalogList(cats);
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << table;
  EXPECT_EQ(lines[0].rfind("name", 0), 0u) << table;
  EXPECT_NE(lines[1].find("linux-iommu  12"), std::string::npos) << table;
  EXPECT_EQ(FormatCatalogList(cats, OutputFormat::kCsv),
            "name,commits,source,loaded\n"
            "linux-iommu,12,file:linux-iommu.yaml,-\n"
            "\"a,b\",0,\"file:a,b.yaml\",-\n");
  auto j = nlohmann::json::parse(FormatCatalogList(cats, OutputFormat::kJson));
  ASSERT_EQ(j["catalogs"].size(), 2u);
  EXPECT_EQ(j["catalogs"][0]["name"], "linux-iommu");
  EXPECT_EQ(j["catalogs"][0]["commits"].size(), 12u);
}

TEST(FormatAgentsTest, TableCsvAndJsonShareTheRows) {
  pb::Agent a;
  a.set_name("agent-1");
  a.set_agent_id(5);
  a.set_connected(true);
  a.set_slots(2);
  a.set_running_jobs(1);
  a.add_capabilities()->set_name("emulator");
  a.add_capabilities()->set_name("fio");
  a.mutable_host()->set_kernel_release("6.1.0");
  a.mutable_host()->set_cpus(8);
  a.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(FormatAgents({}), "no agents\n");
  (*a.mutable_host()->mutable_labels())["platform"] = "spr-lab";
  (*a.mutable_host()->mutable_labels())["nic"] = "cx6";
  a.mutable_host()->set_numa_nodes(2);
  pb::Inventory* inv = a.mutable_host()->mutable_inventory();
  inv->set_cpu_model("Xeon 8480+");
  inv->set_sockets(2);
  inv->set_memory_kib(uint64_t{512} << 20);
  inv->add_iommus()->set_name("dmar0");
  pb::InventoryDevice* dev = inv->add_devices();
  dev->set_path("/dev/nvme0n1");
  dev->set_block("nvme0n1");
  dev->set_pci_address("0000:17:00.0");
  dev->set_group_type("DMA-FQ");
  a.mutable_health()->set_checked(true);
  a.mutable_health()->set_ok(false);
  a.mutable_health()->set_detail("fio: INTERNAL: disk full");
  EXPECT_EQ(FormatAgents({}, OutputFormat::kCsv),
            "name,id,connected,running,capabilities,labels,health,kernel,cpus,iommu,hardware,"
            "kernels offered,last heartbeat\n");
  const std::string table = FormatAgents({a});
  EXPECT_NE(table.find("agent-1"), std::string::npos) << table;
  EXPECT_NE(table.find("emulator,fio"), std::string::npos) << table;
  std::vector<std::string> csv =
      absl::StrSplit(FormatAgents({a}, OutputFormat::kCsv), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 2u);
  // The fio capability lists no kernels: it runs the host's, in its mode.
  EXPECT_EQ(csv[1],
            "agent-1,5,yes,1/2,\"emulator,fio\",\"nic=cx6,platform=spr-lab\","
            "FAILED: fio: INTERNAL: disk full,6.1.0,8,strict,"
            "\"Xeon 8480+; 2 sockets, 8 cpus, 2 nodes, 512 GiB; iommus dmar0; "
            "/dev/nvme0n1 (nvme0n1 0000:17:00.0 DMA-FQ)\",host 6.1.0 [strict],-");
  auto j = nlohmann::json::parse(FormatAgents({a}, OutputFormat::kJson));
  ASSERT_EQ(j["agents"].size(), 1u);
  EXPECT_EQ(j["agents"][0]["name"], "agent-1");
  EXPECT_EQ(j["agents"][0]["slots"], 2);
  EXPECT_TRUE(nlohmann::json::parse(FormatAgents({}, OutputFormat::kJson)).is_object());
}

TEST(FormatMatrixListTest, TableCsvAndJson) {
  pb::Matrix m;
  m.set_id(7);
  m.set_name("smoke");
  m.set_state(pb::MATRIX_STATE_RUNNING);
  m.set_platform("intel-vtd-snb16c");
  m.mutable_counts()->set_total(18);
  m.mutable_counts()->set_succeeded(10);
  m.mutable_counts()->set_queued(6);
  m.mutable_counts()->set_leased(2);
  EXPECT_EQ(FormatMatrixList({}), "no matrices\n");
  const std::string table = FormatMatrixList({m});
  EXPECT_NE(table.find("smoke"), std::string::npos) << table;
  EXPECT_EQ(FormatMatrixList({m}, OutputFormat::kCsv),
            "id,name,state,jobs,succeeded,failed,pending,platform,created,submitter\n"
            "7,smoke,running,18,10,0,8,intel-vtd-snb16c,-,-\n");
  m.set_submitted_by("alice");
  EXPECT_NE(FormatMatrixList({m}).find("alice"), std::string::npos);
  EXPECT_NE(FormatMatrixDetail(m).find("submitted by: alice"), std::string::npos);
  auto j = nlohmann::json::parse(FormatMatrixList({m}, OutputFormat::kJson));
  ASSERT_EQ(j["matrices"].size(), 1u);
  EXPECT_EQ(j["matrices"][0]["name"], "smoke");
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
  ASSERT_GE(header.size(), 2u) << csv;
  EXPECT_EQ(header[header.size() - 2], "culprits") << csv;
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
            "bisect,regression,state,culprit,step,commit,index,verdict,repeats,mean,change,p\n"
            "3,9,done,f5caa960c7ef,1,f5caa960c7ef,9,bad,5,1.5,0.25,0.001\n"
            "3,9,done,f5caa960c7ef,2,3fe465c9a8b7,8,good,5,1.5,0.25,0.001\n");
}

TEST(FormatTokensTest, TableCsvAndJsonShareTheRows) {
  pb::ApiToken t;
  t.set_id(4);
  t.set_name("ci, nightly");
  t.set_role("submitter");
  t.mutable_created_at()->set_seconds(1700000000);
  t.set_revoked(true);
  const std::string table = FormatTokens({t});
  EXPECT_NE(table.find("ci, nightly"), std::string::npos) << table;
  EXPECT_NE(table.find("revoked"), std::string::npos) << table;
  EXPECT_NE(table.find("2023-11-14T22:13:20Z"), std::string::npos) << table;
  EXPECT_EQ(
      FormatTokens({t}, OutputFormat::kCsv),
      "id,name,role,created,state\n4,\"ci, nightly\",submitter,2023-11-14T22:13:20Z,revoked\n");
  auto j = nlohmann::json::parse(FormatTokens({t}, OutputFormat::kJson));
  ASSERT_EQ(j["tokens"].size(), 1u) << j.dump();
  EXPECT_EQ(j["tokens"][0]["name"], "ci, nightly");
  EXPECT_EQ(FormatTokens({}), "no tokens\n");
}

TEST(FormatCatalogTest, TableCsvAndJson) {
  pb::Catalog c;
  c.set_name("linux-iommu");
  c.set_source("builtin");
  pb::CatalogCommit* commit = c.add_commits();
  commit->set_index(0);
  commit->set_id("v5.11");
  commit->set_subject("Linux 5.11");
  (*commit->mutable_set())["iommu.flush"] = "fq";
  const std::string table = FormatCatalog(c);
  EXPECT_EQ(table.rfind("catalog linux-iommu (builtin), 1 commits\n", 0), 0u) << table;
  EXPECT_NE(table.find("iommu.flush=fq"), std::string::npos) << table;
  EXPECT_EQ(FormatCatalog(c, OutputFormat::kCsv),
            "#,id,subject,set\n0,v5.11,Linux 5.11,iommu.flush=fq\n");
  auto j = nlohmann::json::parse(FormatCatalog(c, OutputFormat::kJson));
  EXPECT_EQ(j["name"], "linux-iommu");
  EXPECT_EQ(j["commits"][0]["set"]["iommu.flush"], "fq");
}

TEST(PrintableTest, ControlCharactersOfServerTextAreEscaped) {
  // A name that would clear the screen and retitle the terminal.
  pb::Agent a;
  a.set_name(
      "lab\x1b[2J\x1b]0;owned\x07\xc2\x9b"
      "31m\x7f-\xc3\xa9");
  a.set_agent_id(3);
  const std::string table = FormatAgents({a}, OutputFormat::kTable);
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find("\xc2\x9b"), std::string::npos) << table;
  EXPECT_NE(table.find("lab\\x1b[2J\\x1b]0;owned\\x07\\u009b31m\\x7f-\xc3\xa9"), std::string::npos)
      << table;
  pb::Matrix m;
  m.set_name("m\nfake line");
  EXPECT_EQ(FormatMatrixDetail(m).rfind("matrix 0 m\\x0afake line\n", 0), 0u);
}

}  // namespace
}  // namespace farm::cli
