// The matrix list in every --output format.
#include "cli/matrix.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(FormatFailuresTest, AReasonOfSeveralLinesGoesOnIndented) {
  pb::Matrix m;
  pb::JobFailure* f = m.add_failures();
  f->set_jobs(1);
  f->set_first_job_id(12);
  f->set_state(pb::JOB_STATE_FAILED);
  f->set_reason(
      "attempt 1 of 3: ... does not boot on this host\nconsole (tail: exit 0):\n\x1b[2JKernel "
      "panic");
  EXPECT_EQ(FormatFailures(m, "  "),
            "  1 failed (first job 12): attempt 1 of 3: ... does not boot on this host\n"
            "      console (tail: exit 0):\n"
            "      \\x1b[2JKernel panic\n");
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

}  // namespace
}  // namespace farm::cli

namespace farm::cli {
namespace {

class ReadKernelConfigFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("farmctl-kconfig-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "cfg");
    std::ofstream(dir_ / "cfg" / "lazy.config") << "CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string SpecPath() const { return (dir_ / "spec.yaml").string(); }
  std::filesystem::path dir_;
};

constexpr char kSpecHead[] =
    "name: k\ncatalog: c\nplatform: q35-intel-iommu\ncommits: [v6.1]\nmodes: [strict]\n"
    "workloads: [{name: fio-nvme}]\nexecutor: fio\n";

TEST_F(ReadKernelConfigFilesTest, FragmentsAreReadRelativeToTheSpec) {
  const std::string yaml =
      std::string(kSpecHead) + "kernel_config: {base: tinyconfig, fragments: [cfg/lazy.config]}\n";
  absl::StatusOr<std::string> out = ReadKernelConfigFiles(yaml, SpecPath());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("name: cfg/lazy.config"), std::string::npos) << *out;
  EXPECT_NE(out->find("CONFIG_IOMMU_DEFAULT_DMA_LAZY=y"), std::string::npos) << *out;
  // What it wrote reads back as is: nothing left to read.
  absl::StatusOr<std::string> again = ReadKernelConfigFiles(*out, SpecPath());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *out);
}

TEST_F(ReadKernelConfigFilesTest, AMissingFileIsNamedByItsField) {
  const std::string yaml = std::string(kSpecHead) +
                           "kernel_config: {base: tinyconfig, fragments: [cfg/lazy.config, " +
                           "cfg/none.config]}\n";
  absl::StatusOr<std::string> out = ReadKernelConfigFiles(yaml, SpecPath());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("kernel_config.fragments[1]: "), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("none.config"), std::string::npos) << out.status();
}

TEST_F(ReadKernelConfigFilesTest, ASpecWithoutFilesIsLeftAsItIs) {
  const std::string yaml = std::string(kSpecHead) + "kernel_config: {base: defconfig}\n";
  absl::StatusOr<std::string> out = ReadKernelConfigFiles(yaml, SpecPath());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, yaml);
}

}  // namespace
}  // namespace farm::cli
