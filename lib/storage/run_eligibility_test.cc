#include "lib/storage/run_eligibility.h"

#include "gtest/gtest.h"

namespace farm::storage {
namespace {

namespace pb = ::iommufarm::v1;

TEST(KernelMatches, Table) {
  struct Case {
    const char* commit;
    const char* release;
    bool match;
  };
  const Case cases[] = {
      {"6.1.0-13-amd64", "6.1.0-13-amd64", true},
      {"v5.11", "5.11.0-rc3", true},
      {"v5.11", "5.11", true},
      {"5.11", "5.11+", true},
      {"v5.11", "5.110.0", false},
      {"v5.1", "5.11.0", false},
      {"v5.12", "5.11.0", false},
      {"c588072bba6b", "5.11.0-rc3-00012-gc588072bba6b", true},
      {"c588072bba6bfe", "5.11.0-rc3-00012-gc588072bba6b", true},
      {"C588072", "5.11.0-rc3-00012-gc588072", true},
      {"c588072bba6b", "5.11.0-rc3-00012-gc588072bba6b0", false},
      {"c588072bba6b", "5.11.0-rc3", false},
      {"", "5.11.0", false},
      {"v5.11", "", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KernelMatches(c.commit, c.release), c.match) << c.commit << " vs " << c.release;
  }
}

TEST(CheckRealRunHost, ModeAndKernelMustMatch) {
  pb::HostFacts host;
  host.set_kernel_release("6.18.44-fc");
  host.set_iommu_mode(pb::IOMMU_MODE_OFF);
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_commit_id("v6.18.44");
  job.set_mode(pb::IOMMU_MODE_OFF);
  EXPECT_TRUE(CheckRealRunHost(job, host).ok());
  EXPECT_TRUE(RealRunEligible(job, host));

  job.set_mode(pb::IOMMU_MODE_STRICT);
  absl::Status s = CheckRealRunHost(job, host);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "host runs IOMMU mode off, the cell wants strict");

  job.set_mode(pb::IOMMU_MODE_OFF);
  job.set_executor(pb::EXECUTOR_IOZONE);
  job.set_commit_id("v5.11");
  s = CheckRealRunHost(job, host);
  EXPECT_EQ(s.message(), "host runs kernel 6.18.44-fc, the cell wants v5.11");

  host.set_iommu_mode(pb::IOMMU_MODE_UNSPECIFIED);
  job.set_commit_id("v6.18.44");
  EXPECT_FALSE(RealRunEligible(job, host));
}

TEST(CheckRealRunHost, EmulatorJobsAlwaysMatch) {
  pb::HostFacts host;  // nothing known
  pb::Job job;
  job.set_executor(pb::EXECUTOR_EMULATOR);
  job.set_commit_id("v5.11");
  job.set_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_TRUE(RealRunEligible(job, host));
}

pb::Capability FioWithOffers() {
  pb::Capability fio;
  fio.set_name("fio");
  pb::KernelOffer* host = fio.add_kernels();
  host->set_provider("host");
  host->set_release("6.18.44-fc");
  host->add_modes(pb::IOMMU_MODE_OFF);
  pb::KernelOffer* vm = fio.add_kernels();
  vm->set_provider("vm");
  vm->set_release("6.1.0-57-cloud-amd64");
  vm->add_modes(pb::IOMMU_MODE_OFF);
  vm->add_modes(pb::IOMMU_MODE_PASSTHROUGH);
  vm->add_modes(pb::IOMMU_MODE_STRICT);
  return fio;
}

TEST(CheckRealRun, AnOfferMustNameTheCommitAndHoldTheMode) {
  pb::HostFacts host;  // the offers decide, not the host facts
  host.set_kernel_release("6.18.44-fc");
  host.set_iommu_mode(pb::IOMMU_MODE_OFF);
  const std::vector<pb::Capability> caps = {FioWithOffers()};
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_commit_id("6.1.0-57-cloud-amd64");
  job.set_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_TRUE(RealRunEligible(job, caps, host));
  const std::vector<pb::KernelOffer> offers(caps[0].kernels().begin(), caps[0].kernels().end());
  const pb::KernelOffer* offer = ::farm::proto::FindOffer(offers, job);
  ASSERT_NE(offer, nullptr);
  EXPECT_EQ(offer->provider(), "vm");

  // VT-d in caching mode cannot run lazy: not offered, so not eligible.
  job.set_mode(pb::IOMMU_MODE_LAZY);
  absl::Status s = CheckRealRun(job, caps, host);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "no kernel offer runs 6.1.0-57-cloud-amd64 in mode lazy (offered: host 6.18.44-fc "
            "[off]; vm 6.1.0-57-cloud-amd64 [off,passthrough,strict])");

  // The host offer: its release in its mode only.
  job.set_commit_id("v6.18.44");
  job.set_mode(pb::IOMMU_MODE_OFF);
  EXPECT_TRUE(RealRunEligible(job, caps, host));
  job.set_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_FALSE(RealRunEligible(job, caps, host));

  // Offers belong to their executor: iozone is not offered at all.
  job.set_executor(pb::EXECUTOR_IOZONE);
  job.set_mode(pb::IOMMU_MODE_OFF);
  s = CheckRealRun(job, caps, host);
  EXPECT_EQ(s.message(), "no kernel offer runs v6.18.44 in mode off (offered: none)");
}

TEST(CheckRealRun, AStoreOfferRunsItsCommitId) {
  pb::HostFacts host;
  pb::Capability fio;
  fio.set_name("fio");
  pb::KernelOffer* vm = fio.add_kernels();
  vm->set_provider("vm");
  vm->set_commit("c588072bba6b");
  vm->set_release("6.1.0-57-cloud-amd64");
  vm->add_modes(pb::IOMMU_MODE_STRICT);
  const std::vector<pb::Capability> caps = {fio};
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_mode(pb::IOMMU_MODE_STRICT);
  job.set_commit_id("c588072bba6b");  // the release does not carry it: the commit does
  EXPECT_FALSE(::farm::proto::KernelMatches(job.commit_id(), vm->release()));
  EXPECT_TRUE(RealRunEligible(job, caps, host));
  job.set_commit_id("6.1.0-57-cloud-amd64");  // the release still names it
  EXPECT_TRUE(RealRunEligible(job, caps, host));
  job.set_commit_id("c588072bba6");  // an id is matched whole, not by prefix
  EXPECT_FALSE(RealRunEligible(job, caps, host));
  job.set_commit_id("c588072bba6b");
  job.set_mode(pb::IOMMU_MODE_LAZY);
  EXPECT_FALSE(RealRunEligible(job, caps, host));
}

TEST(CheckRealRun, ACapabilityWithoutOffersIsItsHostKernel) {
  pb::HostFacts host;
  host.set_kernel_release("6.18.44-fc");
  host.set_iommu_mode(pb::IOMMU_MODE_OFF);
  pb::Capability fio;
  fio.set_name("fio");
  const std::vector<pb::Capability> caps = {fio};
  pb::Job job;
  job.set_executor(pb::EXECUTOR_FIO);
  job.set_commit_id("v6.18.44");
  job.set_mode(pb::IOMMU_MODE_OFF);
  EXPECT_TRUE(RealRunEligible(job, caps, host));
  job.set_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_FALSE(RealRunEligible(job, caps, host));
  // An undetected host mode offers no mode.
  host.set_iommu_mode(pb::IOMMU_MODE_UNSPECIFIED);
  job.set_mode(pb::IOMMU_MODE_OFF);
  EXPECT_FALSE(RealRunEligible(job, caps, host));
  // Emulator jobs need no offer.
  job.set_executor(pb::EXECUTOR_EMULATOR);
  EXPECT_TRUE(RealRunEligible(job, {}, host));
}

}  // namespace
}  // namespace farm::storage
