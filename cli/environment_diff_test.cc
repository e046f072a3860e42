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

TEST(EnvironmentSummaryTest, CountsUnitsPerKindWithTheirModesAndFeatures) {
  pb::IommuEnvironment env;
  auto& f = *env.mutable_facts();
  f["unit/dmar0/ecap"] = "f00f4a";
  f["unit/dmar0/caching_mode"] = "1";
  f["unit/dmar1/ecap"] = "f00f4a";
  f["unit/dmar1/caching_mode"] = "0";
  f["unit/smmu3.0x9050000/oas"] = "44";
  f["unit/smmu3.0x9050000/features"] = "0x00008305";
  f["unit/ivhd0/features"] = "0x25bf";
  f["device/0000:00:03.0/ats"] = "on";
  f["device/0000:00:04.0/ats"] = "off";
  f["device/0000:00:03.0/domain"] = "DMA-FQ";
  f["device/0000:00:04.0/domain"] = "DMA-FQ";
  f["device/0000:00:05.0/domain"] = "identity";
  f["firmware/bios_vendor"] = "SeaBIOS";
  f["firmware/bios_version"] = "1.16.2";
  f["firmware/bios_date"] = "04/01/2014";
  f["acpi/DMAR/sha256"] = "ab12";
  (*env.mutable_unavailable())["unit/smmu3.0x9050000/iidr"] = "not exported";
  EXPECT_EQ(EnvironmentSummary(env),
            "1 AMD-Vi unit (features 0x25bf); 1 SMMUv3 unit (features 0x00008305); "
            "2 VT-d units (caching mode 0, caching mode 1); ATS on 1/2 devices; "
            "domains DMA-FQ x2, identity x1; firmware SeaBIOS 1.16.2 04/01/2014; ACPI DMAR; "
            "1 unavailable");
}

TEST(EnvironmentSummaryTest, SaysWhenAtsWasNotRead) {
  pb::IommuEnvironment env;
  (*env.mutable_facts())["device/0000:00:03.0/domain"] = "DMA";
  (*env.mutable_unavailable())["device/*/ats"] = "root only";
  EXPECT_EQ(EnvironmentSummary(env), "ATS unread; domains DMA x1; 1 unavailable");
  EXPECT_EQ(EnvironmentSummary(pb::IommuEnvironment()), "-");
  EXPECT_EQ(ShortDigest("3afae21b82da9d731c76e5e0"), "3afae21b82da");
  EXPECT_EQ(ShortDigest(""), "-");
}

}  // namespace
}  // namespace farm::cli
