// A real kernel that chooses another IOMMU mode than its command line asks
// for, built from the test tree and booted in q35 + intel-iommu guests
// through the agent's KernelExecutor: branch strict-forced's mode-forcing
// commit of scripts/make-test-kernel-tree (every default domain translated
// and strict whatever iommu.passthrough= and iommu.strict= say) and its
// parent are built incrementally in the build directory the kbuild tests
// share. Under a passthrough request the parent runs passthrough and the
// forcing commit strict, each a result whose HostFacts say the mode it ran
// beside the requested one (the fields the analyzer's mode_changed reads).
// Lazy cannot show the change there: QEMU's VT-d model needs caching mode,
// under which the VT-d driver disables batching (docs/kernels.md), so a
// lazy request runs strict on both commits: reported, not failed. Built
// with FARM_MODE_FORCED_ARM64 (its own binary, label `kbuild long`: its
// first aarch64 build of the tree is a cold one) the same two commits are
// built for aarch64 and booted on virt + SMMUv3, where lazy is real: under
// a lazy request the parent runs lazy (DMA-FQ) and the forcing commit
// strict, and the parent runs dma_map_benchmark as a farm job in all four
// modes.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "integration_tests/guest_kbuild_fixture.h"
#include "proto/names.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

#ifdef FARM_MODE_FORCED_ARM64
constexpr char kArch[] = "aarch64";
#else
constexpr char kArch[] = "x86_64";
#endif

class ModeForcedKbuildTest : public GuestKbuildTest {
 protected:
  ModeForcedKbuildTest() : GuestKbuildTest(kArch) {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PrepareTreeRootAndStore("mode-forced-"));
    ASSERT_EQ(tree_.mode_forced.size(), 40u) << "the tree's report has no mode-forced line";
    ASSERT_NO_FATAL_FAILURE(ParentOf(tree_.mode_forced, &parent_));
    // The forcing commit first: the parent then differs from it by one file.
    for (const std::string& commit : {tree_.mode_forced, parent_}) {
      ASSERT_NO_FATAL_FAILURE(BuildInto(commit));
    }
  }

  // `commit` booted under `mode` for its facts alone, through the vm
  // provider itself (an x86_64 vm offer lists no lazy, so no job gets there).
  kernels::KernelRun Booted(const std::string& commit, pb::IommuMode mode) {
    kernels::VmKernelProvider vm(Vm());
    kernels::KernelRequest r;
    r.kernel_release = release_[commit];
    r.commit = commit;
    r.kernel_config = kConfigId;  // the config both commits were built with
    r.mode = mode;
    absl::StatusOr<kernels::KernelRun> run = vm.Run(r);
    EXPECT_TRUE(run.ok()) << commit << " " << proto::ModeName(mode) << ": " << run.status();
    if (!run.ok()) return {};
    std::cout << commit.substr(0, 12) << " requested " << proto::ModeName(mode)
              << " (boot only): ran " << proto::ModeName(run->effective) << " ("
              << run->effective_detail << ")\n";
    return *run;
  }

  // The facts of `commit`'s result under `mode`: a one-second
  // dma_map_benchmark run, as a farm job. Its samples by metric go to
  // `samples` when given.
  pb::HostFacts RanOn(const std::string& commit, pb::IommuMode mode,
                      std::map<std::string, double>* samples = nullptr) {
    agent::CancelToken cancel;
    const absl::Time start = absl::Now();
    absl::StatusOr<agent::ExecutionResult> r =
        Executor()->Run(DmaMapBenchJob(1, commit, mode), cancel);
    EXPECT_TRUE(r.ok()) << commit << " " << proto::ModeName(mode) << ": " << r.status();
    if (!r.ok()) return {};
    EXPECT_TRUE(r->ran_on.has_value());
    if (!r->ran_on.has_value()) return {};
    EXPECT_FALSE(r->samples.empty());
    std::map<std::string, double> by_metric;
    for (const pb::Sample& sample : r->samples) by_metric[sample.metric()] = sample.value();
    std::cout << commit.substr(0, 12) << " requested " << proto::ModeName(mode) << ": ran "
              << proto::ModeName(r->ran_on->iommu_mode()) << " (" << r->ran_on->iommu_detail()
              << ") in " << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1)))
              << ", map " << by_metric["map_latency_mean"] << " ns, unmap "
              << by_metric["unmap_latency_mean"] << " ns\n";
    if (samples != nullptr) *samples = std::move(by_metric);
    EXPECT_EQ(r->ran_on->guest().requested_mode(), mode);
    return *r->ran_on;
  }

  std::string parent_;
};

#ifdef FARM_MODE_FORCED_ARM64
TEST_F(ModeForcedKbuildTest, UnderLazyTheForcingCommitRunsStrictWhereItsParentRunsLazy) {
  const kernels::KernelRun parent = Booted(parent_, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(parent.effective, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(parent.domain_type, "DMA-FQ");
  EXPECT_EQ(parent.machine_model, "virt+smmuv3");

  const kernels::KernelRun forced = Booted(tree_.mode_forced, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(forced.requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(forced.effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(forced.domain_type, "DMA");
  EXPECT_TRUE(absl::StrContains(forced.effective_detail,
                                "the kernel ran strict although its command line asked for "
                                "lazy (iommu.strict=0)"))
      << forced.effective_detail;
}

// A kernel the farm built for aarch64 runs the kernel's dma_map_benchmark as
// a farm job in each of the four modes, and runs each as asked: on virt +
// SMMUv3 all four are real (the SMMU's absence, identity, DMA, DMA-FQ).
TEST_F(ModeForcedKbuildTest, TheParentRunsDmaMapBenchInEveryModeAsAsked) {
  const std::map<pb::IommuMode, std::string> domain = {{pb::IOMMU_MODE_PASSTHROUGH, "identity"},
                                                       {pb::IOMMU_MODE_STRICT, "DMA"},
                                                       {pb::IOMMU_MODE_LAZY, "DMA-FQ"}};
  for (pb::IommuMode mode : {pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT,
                             pb::IOMMU_MODE_LAZY}) {
    std::map<std::string, double> samples;
    const pb::HostFacts ran = RanOn(parent_, mode, &samples);
    EXPECT_EQ(ran.iommu_mode(), mode) << ran.iommu_detail();
    if (auto it = domain.find(mode); it != domain.end()) {
      EXPECT_EQ(ran.guest().machine_model(), "virt+smmuv3");
      EXPECT_EQ(ran.guest().domain_type(), it->second) << proto::ModeName(mode);
    }
    EXPECT_GT(samples["map_latency_mean"], 0) << proto::ModeName(mode);
    EXPECT_GT(samples["unmap_latency_mean"], 0) << proto::ModeName(mode);
  }
}
#else
TEST_F(ModeForcedKbuildTest, TheForcingCommitRunsStrictWhereItsParentRunsTheRequestedMode) {
  const pb::HostFacts parent_pt = RanOn(parent_, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(parent_pt.iommu_mode(), pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(parent_pt.guest().domain_type(), "identity");

  const pb::HostFacts forced_pt = RanOn(tree_.mode_forced, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(forced_pt.iommu_mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(forced_pt.guest().domain_type(), "DMA");
  EXPECT_TRUE(absl::StrContains(forced_pt.iommu_detail(),
                                "the kernel ran strict although its command line asked for "
                                "passthrough (iommu.passthrough=1)"))
      << forced_pt.iommu_detail();

  // Lazy runs strict on both under caching mode: the kernel's choice,
  // reported; the change cannot show here.
  for (const std::string& commit : {parent_, tree_.mode_forced}) {
    const kernels::KernelRun lazy = Booted(commit, pb::IOMMU_MODE_LAZY);
    EXPECT_EQ(lazy.effective, pb::IOMMU_MODE_STRICT) << commit;
    EXPECT_TRUE(absl::StrContains(lazy.effective_detail, "asked for lazy (iommu.strict=0)"))
        << lazy.effective_detail;
  }
}
#endif

}  // namespace
}  // namespace farm
