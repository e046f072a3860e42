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

}  // namespace
}  // namespace farm::storage
