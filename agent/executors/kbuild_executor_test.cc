// KbuildExecutor's offers and its refusals (kbuild_executor.h). Real builds
// are lib/kbuild's tests (label kbuild).
#include "agent/executors/kbuild_executor.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/kernel_config.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

TEST(KbuildExecutorTest, OffersEachTreesCatalogForItsArchitectures) {
  KbuildConfig config;
  config.trees = {{"linux-iommu", "/src/linux"}, {"next", "https://example.org/next.git"}};
  config.store_dir = "/tmp/store";
  config.archs = {"x86_64", "aarch64"};
  KbuildExecutor executor(config);
  EXPECT_EQ(executor.capability(), "kbuild");
  const std::vector<pb::BuildOffer> offers = executor.builds();
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[0].catalog(), "linux-iommu");
  EXPECT_EQ(offers[0].tree(), "/src/linux");
  ASSERT_EQ(offers[0].architectures_size(), 2);
  EXPECT_EQ(offers[0].architectures(1), "aarch64");
  EXPECT_EQ(offers[1].catalog(), "next");
}

TEST(KbuildExecutorTest, TheBuildableArchitecturesStartWithTheHosts) {
  const std::vector<std::string> archs = BuildableArchs();
  ASSERT_FALSE(archs.empty());
  EXPECT_EQ(archs[0], "x86_64");
}

TEST(KbuildExecutorTest, AJobOfACatalogWithoutATreeFailsPermanently) {
  KbuildConfig config;
  config.trees = {{"linux-iommu", "/src/linux"}};
  config.store_dir = "/tmp/store";
  KbuildExecutor executor(config);
  pb::Job job;
  job.set_catalog("other");
  job.set_commit_id("abc1234");
  job.set_platform("x86_64");
  CancelToken cancel;
  absl::StatusOr<ExecutionResult> r = executor.Run(job, cancel);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsPermanentFailure(r.status().code())) << r.status();
  EXPECT_EQ(r.status().message(), "this agent has no tree for catalog other");
}

// A host build job must carry its config, and the config must be the one
// its id names as a host's; both refused before anything is built.
TEST(KbuildExecutorTest, AHostBuildJobMustCarryTheHostsConfig) {
  KbuildConfig config;
  config.trees = {{"linux-iommu", "/src/linux"}};
  config.store_dir = "/tmp/store";
  KbuildExecutor executor(config);
  pb::KernelConfig lab;
  lab.set_base("lab.config");
  lab.set_base_text("CONFIG_BLK_DEV_NVME=y\n");
  const std::string id = proto::KernelConfigId(lab);
  pb::Job job;
  job.set_catalog("linux-iommu");
  job.set_commit_id("abc1234");
  job.set_platform("x86_64");
  auto& params = *job.mutable_workload()->mutable_params();
  params[proto::kKernelConfigParam] = proto::HostBuildConfigId(id);
  CancelToken cancel;
  absl::StatusOr<ExecutionResult> r = executor.Run(job, cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(
      r.status().message(),
      absl::StrCat("build config ", id, "+host is a host's: the build job carries no config"));
  // A config other than the one the id names.
  params[proto::kKernelConfigParam] = proto::HostBuildConfigId(id);
  params[proto::kKernelConfigTextParam] =
      proto::EncodeKernelConfig(lab) + "fragments { name: \"x\" text: \"CONFIG_X=y\" }";
  r = executor.Run(job, cancel);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("the build job's kernel config is "), absl::string_view::npos)
      << r.status();
}

}  // namespace
}  // namespace farm::agent
