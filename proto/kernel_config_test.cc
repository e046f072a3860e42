#include "proto/kernel_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace farm::proto {
namespace {

namespace pb = ::iommufarm::v1;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

pb::KernelConfig Config(const std::string& base, std::vector<std::string> fragments = {}) {
  pb::KernelConfig c;
  c.set_base(base);
  for (size_t i = 0; i < fragments.size(); ++i) {
    pb::ConfigFragment* f = c.add_fragments();
    f->set_name("f" + std::to_string(i) + ".config");
    f->set_text(fragments[i]);
  }
  return c;
}

std::string Messages(const pb::KernelConfig& c) {
  std::string out;
  for (const auto& [field, msg] : CheckKernelConfig(c)) out += field + ": " + msg + "\n";
  return out;
}

TEST(KernelConfigTest, TheDefaultHasTheEmptyIdAndNoProblems) {
  EXPECT_EQ(KernelConfigId(pb::KernelConfig()), "");
  EXPECT_THAT(CheckKernelConfig(pb::KernelConfig()), IsEmpty());
  EXPECT_EQ(BuildConfigId("", false), "");
}

TEST(KernelConfigTest, TheIdIsOfTheOptionsNotOfCommentsOrNames) {
  const pb::KernelConfig a = Config("tinyconfig", {"CONFIG_A=y\n# CONFIG_B is not set\n"});
  pb::KernelConfig b = Config("tinyconfig", {"# why\n  CONFIG_A=y  \n\n# CONFIG_B is not set"});
  b.mutable_fragments(0)->set_name("renamed.config");
  EXPECT_EQ(KernelConfigId(a).size(), 16u);
  EXPECT_EQ(KernelConfigId(a), KernelConfigId(b));
  // Any option, value, base or order changes it.
  EXPECT_NE(KernelConfigId(a), KernelConfigId(Config("defconfig", {"CONFIG_A=y\n"})));
  EXPECT_NE(KernelConfigId(a), KernelConfigId(Config("tinyconfig", {"CONFIG_A=m\n"})));
  EXPECT_NE(KernelConfigId(Config("tinyconfig", {"CONFIG_A=y\n", "CONFIG_A=n\n"})),
            KernelConfigId(Config("tinyconfig", {"CONFIG_A=n\n", "CONFIG_A=y\n"})));
  EXPECT_NE(KernelConfigId(Config("tinyconfig")), "");
}

TEST(KernelConfigTest, TheIdIsStable) {
  // The id names stored kernels: it must not change between releases.
  EXPECT_EQ(KernelConfigId(Config("tinyconfig", {"CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\n"})),
            "f55fd4678c6c8d49");
  EXPECT_EQ(BuildConfigId("", true), "dma-map-bench");
  EXPECT_EQ(BuildConfigId("a8ea6ec7fc4d4bdb", true), "a8ea6ec7fc4d4bdb+dma-map-bench");
}

TEST(KernelConfigTest, ABaseFileIsIdentifiedByItsOptions) {
  pb::KernelConfig a;
  a.set_base("my.config");
  a.set_base_text("CONFIG_X=y\n");
  pb::KernelConfig b = a;
  b.set_base("other/name.config");
  EXPECT_EQ(KernelConfigId(a), KernelConfigId(b));
  b.set_base_text("CONFIG_X=m\n");
  EXPECT_NE(KernelConfigId(a), KernelConfigId(b));
  EXPECT_THAT(CheckKernelConfig(a), IsEmpty());
}

TEST(KernelConfigTest, TheDmaMapBenchBuildIsAnotherKernel) {
  const std::string id = KernelConfigId(Config("defconfig"));
  EXPECT_EQ(BuildConfigId(id, false), id);
  EXPECT_NE(BuildConfigId(id, true), id);
  EXPECT_NE(BuildConfigId(id, true), BuildConfigId("", true));
  EXPECT_TRUE(IsDmaMapBenchBuild(BuildConfigId(id, true)));
  EXPECT_TRUE(IsDmaMapBenchBuild(BuildConfigId("", true)));
  EXPECT_FALSE(IsDmaMapBenchBuild(id));
  EXPECT_FALSE(IsDmaMapBenchBuild(""));
  pb::Job job;
  (*job.mutable_workload()->mutable_params())[kKernelConfigParam] = id;
  job.set_platform("q35-intel-iommu");
  job.set_executor(pb::EXECUTOR_FIO);
  EXPECT_EQ(JobBuildConfigId(job), id);
  job.set_executor(pb::EXECUTOR_DMA_MAP_BENCH);
  EXPECT_EQ(JobBuildConfigId(job), BuildConfigId(id, true));
}

// A lab host boots a kernel built with the host fragment, not the guests':
// another build of the same config, and only of a config the job names.
TEST(KernelConfigTest, AHostPlatformsBuildIsAnotherKernel) {
  const std::string id = KernelConfigId(Config("defconfig"));
  EXPECT_EQ(HostBuildConfigId(id), id + "+host");
  EXPECT_TRUE(IsHostBuild(HostBuildConfigId(id)));
  EXPECT_TRUE(IsHostBuild(BuildConfigId(HostBuildConfigId(id), true)));
  EXPECT_TRUE(IsDmaMapBenchBuild(BuildConfigId(HostBuildConfigId(id), true)));
  EXPECT_FALSE(IsHostBuild(id));
  EXPECT_FALSE(IsHostBuild(BuildConfigId(id, true)));
  EXPECT_FALSE(IsHostBuild(""));
  EXPECT_FALSE(IsHostBuild("dma-map-bench"));
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_platform("lab");
  EXPECT_EQ(JobBuildConfigId(job), "");  // the host's own kernel
  (*job.mutable_workload()->mutable_params())[kKernelConfigParam] = id;
  EXPECT_EQ(JobBuildConfigId(job), id + "+host");
  job.set_platform("virt-smmuv3");
  EXPECT_EQ(JobBuildConfigId(job), id);
}

TEST(KernelConfigTest, BadInputIsNamedByField) {
  EXPECT_THAT(Messages(Config("bigconfig")),
              HasSubstr("kernel_config.base: unknown base \"bigconfig\": tinyconfig, defconfig"));
  EXPECT_THAT(Messages(Config("tinyconfig", {"CONFIG_A=y\nA=y\nCONFIG_B\n"})),
              HasSubstr("kernel_config.fragments[0]: line 2 is not CONFIG_X=value"));
  EXPECT_THAT(Messages(Config("tinyconfig", {"CONFIG_A=y\nA=y\nCONFIG_B\n"})),
              HasSubstr("kernel_config.fragments[0]: line 3 is not"));
  EXPECT_THAT(Messages(Config("tinyconfig", {""})),
              HasSubstr("kernel_config.fragments[0]: \"f0.config\" was not read"));
  EXPECT_THAT(Messages(Config("tinyconfig", {"# only a comment\n"})), HasSubstr("sets no option"));
  EXPECT_THAT(Messages(Config("tinyconfig", {std::string(kMaxKernelConfigBytes, '#') + "\n"})),
              HasSubstr("kernel_config: 262145 bytes of base and fragments, at most 262144"));
  pb::KernelConfig no_base = Config("", {"CONFIG_A=y\n"});
  EXPECT_THAT(Messages(no_base), HasSubstr("kernel_config.base: required"));
  EXPECT_THAT(Messages(Config("tinyconfig", {"CONFIG_A=y\n"})), ::testing::IsEmpty());
}

TEST(KernelConfigTest, EncodesForTheBuildJobAndBack) {
  const pb::KernelConfig c = Config("tinyconfig", {"CONFIG_A=\"x y\"\n# c\n"});
  absl::StatusOr<pb::KernelConfig> back = DecodeKernelConfig(EncodeKernelConfig(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), c.SerializeAsString());
  EXPECT_FALSE(DecodeKernelConfig("base: [").ok());
}

}  // namespace
}  // namespace farm::proto
