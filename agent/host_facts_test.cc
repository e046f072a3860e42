#include "agent/host_facts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lib/base/fake_root_for_test.h"

namespace farm::agent {
namespace {

using base::FakeRoot;

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;

TEST(DetectHostFactsTest, FakeVtdHostInStrictMode) {
  FakeRoot root;
  root.Write("proc/sys/kernel/osrelease", "5.11.0-rc5\n");
  root.Write("proc/sys/kernel/hostname", "nfs-client\n");
  root.Write("proc/cmdline", "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu.strict=1\n");
  for (int i = 0; i < 24; ++i) root.Dir("sys/devices/system/cpu/cpu" + std::to_string(i));
  root.Dir("sys/devices/system/cpu/cpufreq");
  root.Dir("sys/devices/system/node/node0");
  root.Dir("sys/devices/system/node/node1");
  root.Write("sys/devices/system/node/possible", "0-1\n");
  root.Dir("sys/class/iommu/dmar0");
  root.Dir("sys/class/iommu/dmar1");
  root.Write("sys/kernel/iommu_groups/0/type", "DMA\n");
  root.Write("sys/kernel/iommu_groups/1/type", "DMA\n");
  pb::HostFacts facts = DetectHostFacts(root.path());
  EXPECT_EQ(facts.kernel_release(), "5.11.0-rc5");
  EXPECT_EQ(facts.hostname(), "nfs-client");
  EXPECT_EQ(facts.cpus(), 24u);
  EXPECT_EQ(facts.numa_nodes(), 2u);
  EXPECT_EQ(facts.iommu_mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_NE(facts.iommu_detail().find("intel_iommu=on iommu.strict=1"), std::string::npos)
      << facts.iommu_detail();
  EXPECT_NE(facts.iommu_detail().find("dmar0,dmar1"), std::string::npos) << facts.iommu_detail();
}

TEST(DetectHostFactsTest, GroupTypesOverrideCmdlineDefault) {
  FakeRoot root;
  root.Write("proc/cmdline", "quiet\n");
  root.Dir("sys/class/iommu/dmar0");
  root.Write("sys/kernel/iommu_groups/3/type", "DMA-FQ\n");
  EXPECT_EQ(DetectHostFacts(root.path()).iommu_mode(), pb::IOMMU_MODE_LAZY);
}

TEST(DetectHostFactsTest, NoIommuUnitsMeansOff) {
  FakeRoot root;
  root.Write("proc/cmdline", "intel_iommu=on iommu.strict=1\n");
  pb::HostFacts facts = DetectHostFacts(root.path());
  EXPECT_EQ(facts.iommu_mode(), pb::IOMMU_MODE_OFF);
  EXPECT_EQ(facts.numa_nodes(), 1u);  // no node dirs: one node
}

// Before v5.15 a lazy (flush-queue) domain also showed as "DMA".
TEST(DetectHostFactsTest, PreDmaFqKernelTakesStrictnessFromCmdline) {
  FakeRoot root;
  root.Write("proc/sys/kernel/osrelease", "5.11.0-rc5\n");
  root.Write("proc/cmdline", "intel_iommu=on iommu.strict=0\n");
  root.Dir("sys/class/iommu/dmar0");
  root.Write("sys/kernel/iommu_groups/0/type", "DMA\n");
  EXPECT_EQ(DetectHostFacts(root.path()).iommu_mode(), pb::IOMMU_MODE_LAZY);
}

TEST(DetectHostFactsTest, PreDmaFqKernelDefaultsByArchitecture) {
  FakeRoot x86;
  x86.Write("proc/sys/kernel/osrelease", "5.10.0\n");
  x86.Write("proc/sys/kernel/arch", "x86_64\n");
  x86.Write("proc/cmdline", "intel_iommu=on\n");
  x86.Dir("sys/class/iommu/dmar0");
  x86.Write("sys/kernel/iommu_groups/0/type", "DMA\n");
  pb::HostFacts facts = DetectHostFacts(x86.path());
  EXPECT_EQ(facts.iommu_mode(), pb::IOMMU_MODE_LAZY);
  EXPECT_NE(facts.iommu_detail().find("x86 default lazy"), std::string::npos)
      << facts.iommu_detail();

  FakeRoot arm;
  arm.Write("proc/sys/kernel/osrelease", "5.10.0\n");
  arm.Write("proc/sys/kernel/arch", "aarch64\n");
  arm.Write("proc/cmdline", "quiet\n");
  arm.Dir("sys/class/iommu/smmu3.0x0000000148000000");
  arm.Write("sys/kernel/iommu_groups/0/type", "DMA\n");
  EXPECT_EQ(DetectHostFacts(arm.path()).iommu_mode(), pb::IOMMU_MODE_STRICT);
}

TEST(DetectHostFactsTest, ModernKernelDmaGroupsAreStrictWhateverTheCmdline) {
  // v5.15+ shows lazy domains as DMA-FQ; a DMA group there really is strict
  // (e.g. an untrusted device), whatever iommu.strict asked for.
  FakeRoot root;
  root.Write("proc/sys/kernel/osrelease", "6.8.0-31-generic\n");
  root.Write("proc/sys/kernel/arch", "x86_64\n");
  root.Write("proc/cmdline", "intel_iommu=on iommu.strict=0\n");
  root.Dir("sys/class/iommu/dmar0");
  root.Write("sys/kernel/iommu_groups/0/type", "DMA\n");
  EXPECT_EQ(DetectHostFacts(root.path()).iommu_mode(), pb::IOMMU_MODE_STRICT);
}

TEST(DetectHostFactsTest, PassthroughFromIdentityGroups) {
  FakeRoot root;
  root.Write("proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
  root.Write("proc/cmdline", "amd_iommu=on iommu=pt\n");
  root.Dir("sys/class/iommu/ivhd0");
  root.Write("sys/kernel/iommu_groups/0/type", "identity\n");
  root.Write("sys/kernel/iommu_groups/1/type", "identity\n");
  root.Write("sys/kernel/iommu_groups/2/type", "DMA\n");
  pb::HostFacts facts = DetectHostFacts(root.path());
  EXPECT_EQ(facts.iommu_mode(), pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_NE(facts.iommu_detail().find("identity x2"), std::string::npos) << facts.iommu_detail();
}

TEST(DetectHostFactsTest, UnitsWithoutGroupsFallBackToCmdline) {
  FakeRoot root;
  root.Write("proc/cmdline", "intel_iommu=on iommu.strict=1\n");
  root.Dir("sys/class/iommu/dmar0");
  EXPECT_EQ(DetectHostFacts(root.path()).iommu_mode(), pb::IOMMU_MODE_STRICT);
}

// The governor of cpu0, turbo from intel_pstate (else cpufreq/boost), SMT,
// and the process's CPU and memory binding.
TEST(DetectHygieneTest, GovernorTurboSmtAndBinding) {
  FakeRoot root;
  root.Write("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n");
  root.Write("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n");
  root.Write("sys/devices/system/cpu/smt/active", "0\n");
  root.Write("proc/self/status",
             "Name:\tfarm-agent\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n"
             "Mems_allowed_list:\t0\n");
  const pb::HostFacts facts = DetectHostFacts(root.path());
  EXPECT_EQ(facts.hygiene().governor(), "performance");
  EXPECT_EQ(facts.hygiene().turbo(), "off");
  EXPECT_EQ(facts.hygiene().smt(), "off");
  EXPECT_EQ(facts.hygiene().cpus_allowed(), "0-3");
  EXPECT_EQ(facts.hygiene().mems_allowed(), "0");

  FakeRoot amd;
  amd.Write("sys/devices/system/cpu/cpufreq/boost", "1\n");
  const pb::Hygiene h = DetectHygiene(amd.path());
  EXPECT_EQ(h.turbo(), "on");
  EXPECT_EQ(h.governor(), "") << "no cpufreq";
  EXPECT_EQ(h.smt(), "");
}

TEST(DetectHygieneTest, SetGovernorWritesEveryCpuOrSaysWhy) {
  FakeRoot root;
  root.Write("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n");
  root.Write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave\n");
  ASSERT_TRUE(SetGovernor("performance", root.path()).ok());
  for (const char* cpu : {"cpu0", "cpu1"}) {
    std::ifstream in(root.path() + "/sys/devices/system/cpu/" + cpu + "/cpufreq/scaling_governor");
    std::string g;
    in >> g;
    EXPECT_EQ(g, "performance") << cpu;
  }
  FakeRoot none;
  none.Dir("sys/devices/system/cpu/cpu0");
  EXPECT_EQ(SetGovernor("performance", none.path()).code(), absl::StatusCode::kNotFound);
}

TEST(DetectHygieneTest, SetTurboAndSmtWriteWhatDetectHygieneReads) {
  FakeRoot intel;
  intel.Write("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
  intel.Write("sys/devices/system/cpu/smt/control", "on\n");
  ASSERT_TRUE(SetTurbo(false, intel.path()).ok());
  ASSERT_TRUE(SetSmt(false, intel.path()).ok());
  EXPECT_EQ(DetectHygiene(intel.path()).turbo(), "off");
  std::ifstream control(intel.path() + "/sys/devices/system/cpu/smt/control");
  std::string smt;
  control >> smt;
  EXPECT_EQ(smt, "off");

  FakeRoot amd;
  amd.Write("sys/devices/system/cpu/cpufreq/boost", "1\n");
  ASSERT_TRUE(SetTurbo(false, amd.path()).ok());
  EXPECT_EQ(DetectHygiene(amd.path()).turbo(), "off");
  EXPECT_EQ(SetSmt(false, amd.path()).code(), absl::StatusCode::kNotFound);

  FakeRoot none;
  EXPECT_EQ(SetTurbo(true, none.path()).code(), absl::StatusCode::kNotFound);
}

TEST(DetectHostFactsTest, RealHostHasKernelAndCpus) {
  pb::HostFacts facts = DetectHostFacts("/");
  EXPECT_FALSE(facts.kernel_release().empty());
  EXPECT_GE(facts.cpus(), 1u);
  EXPECT_FALSE(facts.architecture().empty());
}

}  // namespace
}  // namespace farm::agent
