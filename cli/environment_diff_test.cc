#include "cli/environment_diff.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/compare.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// A real (fio) run of `host` in `mode` under an environment of `facts`.
pb::Result RealRun(const std::string& host, pb::IommuMode mode,
                   const std::map<std::string, std::string>& facts,
                   pb::Executor executor = pb::EXECUTOR_FIO) {
  pb::Result r;
  r.mutable_job()->set_platform("xeon-nvme");
  r.mutable_job()->set_mode(mode);
  r.mutable_job()->set_executor(executor);
  r.mutable_host()->set_hostname(host);
  if (!facts.empty()) {
    pb::IommuEnvironment* env = r.mutable_host()->mutable_iommu_environment();
    for (const auto& [k, v] : facts) (*env->mutable_facts())[k] = v;
    env->set_digest("d" + std::to_string(facts.size()) + facts.begin()->second);
  }
  return r;
}

const std::map<std::string, std::string> kBefore = {{"unit/dmar0/cap", "d2008c40660462"},
                                                    {"unit/dmar0/caching_mode", "0"},
                                                    {"firmware/bios_version", "2.1"},
                                                    {"device/0000:17:00.0/domain", "DMA"}};

TEST(EnvironmentDiffTest, ListsWhatChangedPerHostAndMode) {
  std::map<std::string, std::string> after = kBefore;
  after["firmware/bios_version"] = "2.3";
  after.erase("unit/dmar0/caching_mode");
  after["acpi/DMAR/sha256"] = "ab12";
  const std::vector<pb::Result> a = {RealRun("lab1", pb::IOMMU_MODE_STRICT, kBefore),
                                     RealRun("lab2", pb::IOMMU_MODE_STRICT, kBefore)};
  const std::vector<pb::Result> b = {RealRun("lab1", pb::IOMMU_MODE_STRICT, after),
                                     RealRun("lab2", pb::IOMMU_MODE_STRICT, kBefore)};
  const EnvironmentDiff diff = CompareEnvironments(a, b);
  EXPECT_EQ(diff.groups, 2);
  ASSERT_EQ(diff.rows.size(), 3u);
  EXPECT_EQ(diff.rows[0].host, "lab1");
  EXPECT_EQ(diff.rows[0].mode, "strict");
  EXPECT_EQ(diff.rows[0].key, "acpi/DMAR/sha256");
  EXPECT_EQ(diff.rows[0].a, "(absent)");
  EXPECT_EQ(diff.rows[0].b, "ab12");
  EXPECT_EQ(diff.rows[1].key, "firmware/bios_version");
  EXPECT_EQ(diff.rows[1].a, "2.1");
  EXPECT_EQ(diff.rows[1].b, "2.3");
  EXPECT_EQ(diff.rows[2].key, "unit/dmar0/caching_mode");
  EXPECT_EQ(diff.rows[2].b, "(absent)");

  const std::string table = FormatCompareTable({}, "A", "B", {}, false, diff);
  EXPECT_NE(table.find("IOMMU environment differences (A -> B):"), std::string::npos) << table;
  EXPECT_NE(table.find("firmware/bios_version"), std::string::npos) << table;
  const std::string csv = FormatCompareCsv({}, {}, diff);
  EXPECT_NE(csv.find("\nplatform,host,mode,key,a,b\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("xeon-nvme,lab1,strict,firmware/bios_version,2.1,2.3\n"), std::string::npos)
      << csv;
  const nlohmann::json j = nlohmann::json::parse(FormatCompareJson({}, "A", "B", {}, diff));
  EXPECT_EQ(j["environment_groups"], 2);
  ASSERT_EQ(j["environment"].size(), 3u);
  EXPECT_EQ(j["environment"][1]["key"], "firmware/bios_version");
  EXPECT_EQ(j["environment"][1]["b"], "2.3");
  const std::string html = FormatCompareHtml({}, "A", "B", {}, diff);
  EXPECT_NE(html.find("<td>firmware/bios_version</td>"), std::string::npos);
}

TEST(EnvironmentDiffTest, ComparesOnlyLikeRunsWithEnvironments) {
  std::map<std::string, std::string> lazy = kBefore;
  lazy["device/0000:17:00.0/domain"] = "DMA-FQ";
  // Another mode's domain type is that mode's, not a change; an emulator
  // run and a result recorded without an environment are not compared.
  const std::vector<pb::Result> a = {
      RealRun("lab1", pb::IOMMU_MODE_STRICT, kBefore), RealRun("lab2", pb::IOMMU_MODE_STRICT, {}),
      RealRun("emu", pb::IOMMU_MODE_STRICT, kBefore, pb::EXECUTOR_EMULATOR)};
  std::map<std::string, std::string> other = kBefore;
  other["firmware/bios_version"] = "9";
  const std::vector<pb::Result> b = {
      RealRun("lab1", pb::IOMMU_MODE_LAZY, lazy), RealRun("lab1", pb::IOMMU_MODE_STRICT, kBefore),
      RealRun("lab2", pb::IOMMU_MODE_STRICT, other),
      RealRun("emu", pb::IOMMU_MODE_STRICT, other, pb::EXECUTOR_EMULATOR)};
  const EnvironmentDiff diff = CompareEnvironments(a, b);
  EXPECT_EQ(diff.groups, 1);  // lab1 strict
  EXPECT_TRUE(diff.rows.empty());
  EXPECT_EQ(FormatEnvironmentDiffTable(diff),
            "IOMMU environment: the same on both sides (1 host/platform/mode groups)\n");
  EXPECT_EQ(FormatEnvironmentDiffTable(CompareEnvironments({}, b)), "");
  EXPECT_EQ(FormatCompareCsv({}, {}, CompareEnvironments({}, b)).find("platform,host"),
            std::string::npos);
}

TEST(EnvironmentDiffTest, ASideWhoseRunsDisagreeShowsAllItsValues) {
  std::map<std::string, std::string> identity = kBefore;
  identity["device/0000:17:00.0/domain"] = "identity";
  const std::vector<pb::Result> a = {RealRun("lab1", pb::IOMMU_MODE_STRICT, kBefore)};
  const std::vector<pb::Result> b = {RealRun("lab1", pb::IOMMU_MODE_STRICT, kBefore),
                                     RealRun("lab1", pb::IOMMU_MODE_STRICT, identity)};
  const EnvironmentDiff diff = CompareEnvironments(a, b);
  ASSERT_EQ(diff.rows.size(), 1u);
  EXPECT_EQ(diff.rows[0].a, "DMA");
  EXPECT_EQ(diff.rows[0].b, "DMA | identity");
}

}  // namespace
}  // namespace farm::cli
