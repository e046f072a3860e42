// The results views and the statistics under the results table.
#include "cli/results.h"

#include <gtest/gtest.h>

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

// A guest run's facts as the vm provider records them.
pb::Result GuestRun(int64_t job_id, const std::string& commit, int index, pb::IommuMode asked,
                    pb::IommuMode effective, const std::string& group_type) {
  pb::Result r = MakeResult(job_id, commit, index, asked, 0, 100);
  r.mutable_host()->set_kernel_release("6.1.0-57-cloud-arm64");
  r.mutable_host()->set_iommu_mode(effective);
  pb::GuestFacts* g = r.mutable_host()->mutable_guest();
  g->set_provider("vm");
  g->set_requested_mode(asked);
  g->set_domain_type(group_type);
  g->set_machine_model("virt+smmuv3");
  g->set_accel("tcg-icount");
  return r;
}

TEST(FormatKernelRunsTableTest, CountsRunsPerKernelAndModeInCommitOrder) {
  std::vector<pb::Result> results = {
      GuestRun(1, "v6.1.192", 1, pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_STRICT, "DMA"),
      GuestRun(2, "v6.1.190", 0, pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_LAZY, "DMA-FQ"),
      GuestRun(3, "v6.1.190", 0, pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_OFF, ""),
      GuestRun(4, "v6.1.190", 0, pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_LAZY, "DMA-FQ"),
      MakeResult(5, "v6.1.190", 0, pb::IOMMU_MODE_STRICT, 0, 1),  // emulator: left out
  };
  const std::string t = FormatKernelRunsTable(results);
  const size_t off = t.find("v6.1.190  6.1.0-57-cloud-arm64  off");
  const size_t lazy = t.find("v6.1.190  6.1.0-57-cloud-arm64  lazy");
  const size_t strict = t.find("v6.1.192  6.1.0-57-cloud-arm64  strict");
  ASSERT_NE(off, std::string::npos) << t;
  ASSERT_NE(lazy, std::string::npos) << t;
  ASSERT_NE(strict, std::string::npos) << t;
  EXPECT_LT(off, lazy);
  EXPECT_LT(lazy, strict);
  EXPECT_NE(t.find("no IOMMU"), std::string::npos) << t;
  EXPECT_NE(t.find("DMA-FQ      lazy       virt+smmuv3  tcg-icount  2"), std::string::npos) << t;
  EXPECT_EQ(t.find("(!)"), std::string::npos) << t;
}

TEST(FormatKernelRunsTableTest, MarksARunThatRanInAnotherModeThanAsked) {
  const std::string t = FormatKernelRunsTable(
      {GuestRun(1, "v6.1.192", 0, pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_STRICT, "DMA")});
  EXPECT_NE(t.find("strict (!)"), std::string::npos) << t;
  EXPECT_NE(t.find("1 run(s) marked (!) ran in another IOMMU mode than asked"), std::string::npos)
      << t;
}

TEST(FormatKernelRunsTableTest, SaysNothingForEmulatorResults) {
  EXPECT_EQ(FormatKernelRunsTable({MakeResult(1, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 1)}), "");
}

// A fio run of `agent` under an environment of one VT-d unit whose caching
// mode is `cm`; its digest stands in for the agent's SHA-256.
pb::Result EnvironmentRun(int64_t job_id, const std::string& agent, const std::string& cm) {
  pb::Result r = MakeResult(job_id, "v6.1.190", 0, pb::IOMMU_MODE_STRICT, 0, 1);
  r.mutable_job()->set_executor(pb::EXECUTOR_FIO);
  r.set_agent(agent);
  pb::IommuEnvironment* env = r.mutable_host()->mutable_iommu_environment();
  (*env->mutable_facts())["unit/dmar0/ecap"] = "f00f4a";
  (*env->mutable_facts())["unit/dmar0/caching_mode"] = cm;
  (*env->mutable_facts())["device/0000:00:03.0/domain"] = "DMA";
  env->set_digest(cm == "1" ? "3afae21b82da9d731c76e5e0" : "0123456789abcdef01234567");
  return r;
}

TEST(FormatEnvironmentsTableTest, CountsRunsPerAgentAndEnvironment) {
  const std::string t = FormatEnvironmentsTable({
      EnvironmentRun(1, "lab-1", "1"), EnvironmentRun(2, "lab-1", "1"),
      EnvironmentRun(3, "lab-2", "0"),
      MakeResult(4, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 1),  // emulator: left out
  });
  EXPECT_NE(t.find("lab-1  3afae21b82da  1 VT-d unit (caching mode 1); domains DMA x1  2"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("lab-2  0123456789ab  1 VT-d unit (caching mode 0); domains DMA x1  1"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("ran under"), std::string::npos) << t;
  EXPECT_EQ(t.find("a1"), std::string::npos) << t;
}

TEST(FormatEnvironmentsTableTest, NamesAnAgentWhoseEnvironmentChanged) {
  const std::string t =
      FormatEnvironmentsTable({EnvironmentRun(1, "lab-1", "0"), EnvironmentRun(2, "lab-1", "1")});
  EXPECT_NE(t.find("agent lab-1 ran under 2 IOMMU environments"), std::string::npos) << t;
}

TEST(FormatEnvironmentsTableTest, SaysNothingWithoutEnvironments) {
  pb::Result fio = MakeResult(1, "aaa", 0, pb::IOMMU_MODE_STRICT, 0, 1);
  fio.mutable_job()->set_executor(pb::EXECUTOR_FIO);
  EXPECT_EQ(FormatEnvironmentsTable({fio}), "");
}

TEST(FormatResultsJsonTest, CarriesTheIommuEnvironmentOfARealRun) {
  auto plain =
      nlohmann::json::parse(FormatResultsJson({MakeResult(1, "a", 0, pb::IOMMU_MODE_OFF, 0, 1)}));
  EXPECT_FALSE(plain[0].contains("iommu_environment"));
  auto j = nlohmann::json::parse(FormatResultsJson({EnvironmentRun(1, "lab-1", "1")}));
  EXPECT_EQ(j[0]["iommu_environment"]["digest"], "3afae21b82da9d731c76e5e0");
  EXPECT_EQ(j[0]["iommu_environment"]["facts"]["unit/dmar0/caching_mode"], "1");
}

}  // namespace
}  // namespace farm::cli
