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

}  // namespace
}  // namespace farm::proto
