#include "agent/health_baseline.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "agent/health_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/file.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class HealthBaselineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "health-baseline-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ + "/health-baseline.json";
  }
  void TearDown() override { fs::remove_all(dir_); }

  HealthBaseline Loaded() {
    absl::StatusOr<HealthBaseline> b = HealthBaseline::Load(path_);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : HealthBaseline::Empty(path_);
  }

  std::string dir_, path_;
};

TEST_F(HealthBaselineTest, AKeyJudgesOnlyOnceItHoldsThreePasses) {
  HealthBaseline b = Loaded();
  for (double iops : {10000.0, 11000.0}) {
    const HealthBaseline::Verdict v = b.Judge("k strict fio read IOPS", iops, 0.5);
    EXPECT_TRUE(v.ok);
    EXPECT_THAT(v.line, HasSubstr("of the 3 figures a baseline needs"));
  }
  // Two figures kept: even a collapse passes, and is kept.
  EXPECT_TRUE(b.Judge("k strict fio read IOPS", 100, 0.5).ok);
  // Now the median of {10000, 11000, 100} is 10000: 4,000 is below half.
  const HealthBaseline::Verdict low = b.Judge("k strict fio read IOPS", 4000, 0.5);
  EXPECT_FALSE(low.ok);
  EXPECT_EQ(low.line,
            "k strict fio read IOPS 4000, below 10000 x 0.50 (median of this host's last 3)");
  EXPECT_THAT(b.figures().at("k strict fio read IOPS"), ElementsAre(10000, 11000, 100))
      << "a failing figure is not kept";
  const HealthBaseline::Verdict fine = b.Judge("k strict fio read IOPS", 9000, 0.5);
  EXPECT_TRUE(fine.ok);
  EXPECT_EQ(fine.line,
            "k strict fio read IOPS 9000, at least 10000 x 0.50 (median of this host's last 3)");
}

TEST_F(HealthBaselineTest, KeysAreJudgedApartAndKeepTheirLastFive) {
  HealthBaseline b = Loaded();
  for (int i = 1; i <= 7; ++i) EXPECT_TRUE(b.Judge("a", 1000 * i, 0.5).ok);
  EXPECT_THAT(b.figures().at("a"), ElementsAre(3000, 4000, 5000, 6000, 7000));
  // Another kernel or mode is another key: nothing to compare with.
  EXPECT_TRUE(b.Judge("b", 1, 0.5).ok);
  // Band 0 judges nothing.
  EXPECT_TRUE(b.Judge("a", 1, 0).ok);
}

TEST_F(HealthBaselineTest, TheBaselineOutlivesTheProcessThroughItsFile) {
  {
    HealthBaseline b = Loaded();
    for (double iops : {8000.0, 9000.0, 10000.0}) b.Judge("k", iops, 0.5);
    ASSERT_TRUE(b.Save().ok());
  }
  HealthBaseline again = Loaded();
  EXPECT_THAT(again.figures().at("k"), ElementsAre(8000, 9000, 10000));
  EXPECT_FALSE(again.Judge("k", 4000, 0.5).ok);
}

TEST_F(HealthBaselineTest, AFileThatDoesNotParseIsDataLossNamingIt) {
  for (const char* text : {"not json", "[]", "{\"version\": 2, \"figures\": {}}",
                           "{\"version\": 1}", "{\"version\": 1, \"figures\": {\"k\": 3}}",
                           "{\"version\": 1, \"figures\": {\"k\": [\"x\"]}}",
                           "{\"version\": 1, \"figures\": {\"k\": [-1]}}"}) {
    ASSERT_TRUE(base::WriteFileAtomically(path_, text, 0644).ok());
    absl::StatusOr<HealthBaseline> b = HealthBaseline::Load(path_);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss) << text;
    EXPECT_THAT(b.status().message(), HasSubstr(path_)) << text;
  }
}

TEST_F(HealthBaselineTest, TheHealthCheckKeysAFigureByTheHostsKernelAndMode) {
  HealthBaseline b = Loaded();
  pb::HostFacts host;
  host.set_kernel_release("6.1.0-57-amd64");
  host.set_iommu_mode(pb::IOMMU_MODE_STRICT);
  for (double iops : {20000.0, 21000.0, 22000.0}) {
    pb::AgentHealth health;
    AddBaselineCheck(host, {{"fio read IOPS", iops}}, 0.5, &b, &health);
    EXPECT_TRUE(health.ok());
  }
  pb::AgentHealth health;
  health.set_checked(true);
  health.set_ok(true);
  health.set_detail("fio: ok, 6 samples");
  AddBaselineCheck(host, {{"fio read IOPS", 900}}, 0.5, &b, &health);
  EXPECT_FALSE(health.ok());
  EXPECT_EQ(health.detail(),
            "fio: ok, 6 samples; baseline: 6.1.0-57-amd64 strict fio read IOPS 900, below 21000 x "
            "0.50 (median of this host's last 3)");
  // The same kernel in passthrough has no figures yet.
  host.set_iommu_mode(pb::IOMMU_MODE_PASSTHROUGH);
  pb::AgentHealth other;
  AddBaselineCheck(host, {{"fio read IOPS", 900}}, 0.5, &b, &other);
  EXPECT_TRUE(other.ok());
  EXPECT_THAT(other.detail(), HasSubstr("6.1.0-57-amd64 passthrough fio read IOPS 900 (0 of"));
}

}  // namespace
}  // namespace farm::agent
