#include "proto/kernel_params.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/kernel_offers.h"

namespace farm::proto {
namespace {

namespace pb = ::iommufarm::v1;

TEST(KernelParams, AllowListedIommuAndTestParamsPass) {
  std::string error;
  EXPECT_EQ(
      ParseKernelParams("  intel_iommu=sm_on iommu.forcedac=1\tquiet nvme.poll_queues=2 ", &error),
      (std::vector<std::string>{"intel_iommu=sm_on", "iommu.forcedac=1", "quiet",
                                "nvme.poll_queues=2"}));
  EXPECT_EQ(error, "");
  EXPECT_TRUE(ParseKernelParams("", &error).empty());
  EXPECT_EQ(error, "");
}

TEST(KernelParams, AnythingElseIsRefusedWithTheReason) {
  std::string error;
  EXPECT_TRUE(ParseKernelParams("quiet init=/bin/sh", &error).empty());
  EXPECT_EQ(error.rfind("kernel parameter 'init' is not allowed on a guest's command line "
                        "(allowed: amd_iommu, ",
                        0),
            0u)
      << error;
  ParseKernelParams("rdinit=/farm/x", &error);
  EXPECT_NE(error.find("'rdinit' is not allowed"), std::string::npos) << error;
  ParseKernelParams("console=ttyS1", &error);
  EXPECT_NE(error.find("'console' is not allowed"), std::string::npos) << error;
  ParseKernelParams("iommu.strict=0", &error);
  EXPECT_EQ(error,
            "kernel parameter 'iommu.strict=0' sets the IOMMU mode, which the job's mode owns "
            "(use the matrix's modes)");
  ParseKernelParams("iommu=pt", &error);
  EXPECT_NE(error.find("sets the IOMMU mode"), std::string::npos) << error;
  ParseKernelParams("intel_iommu=on;reboot", &error);
  EXPECT_EQ(error,
            "kernel parameter 'intel_iommu=on;reboot' has a value outside [A-Za-z0-9._,:+-]");
  ParseKernelParams("loglevel=", &error);
  EXPECT_NE(error.find("has a value outside"), std::string::npos) << error;
}

TEST(KernelParams, AJobWithKernelParamsIsNeverAHostOffersJob) {
  pb::KernelOffer host;
  host.set_provider("host");
  host.set_release("6.1.0-57-cloud-amd64");
  host.add_modes(pb::IOMMU_MODE_STRICT);
  pb::KernelOffer vm = host;
  vm.set_provider("vm");
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_commit_id("6.1.0-57-cloud-amd64");
  job.set_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_TRUE(OfferRuns(host, job));
  (*job.mutable_workload()->mutable_params())[kKernelParamsKey] = "iommu.forcedac=1";
  EXPECT_FALSE(OfferRuns(host, job));
  EXPECT_TRUE(OfferRuns(vm, job));
  const std::vector<pb::KernelOffer> offers = {host, vm};
  ASSERT_NE(FindOffer(offers, job), nullptr);
  EXPECT_EQ(FindOffer(offers, job)->provider(), "vm");
}

TEST(VmPlatforms, AVmPlatformPicksTheMachineModelOfTheOffer) {
  pb::KernelOffer intel;
  intel.set_provider("vm");
  intel.set_release("6.1.0-57-amd64");
  intel.set_machine_model("q35+intel-iommu");
  intel.add_modes(pb::IOMMU_MODE_STRICT);
  pb::KernelOffer amd = intel;
  amd.set_machine_model("q35+amd-iommu");
  pb::KernelOffer host = intel;
  host.set_provider("host");
  host.clear_machine_model();
  const std::vector<pb::KernelOffer> offers = {host, intel, amd};
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_commit_id("6.1.0-57-amd64");
  job.set_mode(pb::IOMMU_MODE_STRICT);
  job.set_platform("this-host");  // not a vm platform: the first offer that runs it
  ASSERT_NE(FindOffer(offers, job), nullptr);
  EXPECT_EQ(FindOffer(offers, job)->provider(), "host");
  job.set_platform("q35-amd-iommu");
  ASSERT_NE(FindOffer(offers, job), nullptr);
  EXPECT_EQ(FindOffer(offers, job)->machine_model(), "q35+amd-iommu");
  job.set_platform("q35-intel-iommu");
  ASSERT_NE(FindOffer(offers, job), nullptr);
  EXPECT_EQ(FindOffer(offers, job)->machine_model(), "q35+intel-iommu");
  job.set_platform("virt-smmuv3");  // no offer of that model
  EXPECT_EQ(FindOffer(offers, job), nullptr);

  ASSERT_NE(FindVmPlatform("q35-amd-iommu"), nullptr);
  EXPECT_EQ(FindVmPlatform("q35-amd-iommu")->architecture, "x86_64");
  EXPECT_EQ(FindVmPlatform("virt-smmuv3")->machine_model, "virt+smmuv3");
  EXPECT_EQ(FindVmPlatform("q35-amd"), nullptr);
  EXPECT_TRUE(LooksLikeVmPlatform("q35-amd"));
  EXPECT_TRUE(LooksLikeVmPlatform("virt-smmuv2"));
  EXPECT_FALSE(LooksLikeVmPlatform("this-host"));
  EXPECT_FALSE(LooksLikeVmPlatform("kunpeng920-smmuv3"));
}

}  // namespace
}  // namespace farm::proto
