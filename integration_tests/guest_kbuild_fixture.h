// integration_tests/guest_kbuild_fixture.h: the set-up the kernel-build tests
// that boot their own kernels share. It builds commits of the test tree
// (scripts/make-test-kernel-tree) as the farm builds a dma-map-bench job's
// kernel (tinyconfig, every machine's fragments, one build directory per
// tree, so a second commit is an incremental build) into a private kernel
// store, and runs them in guests through the agent's KernelExecutor, as the
// agent runs a job. Tests only, header-only; one fixture per test, not
// thread-safe. It owns its temporary store and scratch directories.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root
// (scripts/test runs both as root); a test defines FARM_GUEST_ROOT_DIR.
#ifndef INTEGRATION_TESTS_GUEST_KBUILD_FIXTURE_H_
#define INTEGRATION_TESTS_GUEST_KBUILD_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/strip.h"
#include "agent/executors/kernel_executor.h"
#include "integration_tests/test_tree_fixture.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"
#include "proto/names.h"

namespace farm {

// A test of built kernels of one arch ("x86_64" or "aarch64").
class GuestKbuildTest : public ::testing::Test {
 protected:
  explicit GuestKbuildTest(std::string arch) : arch_(std::move(arch)) {}

  // The test tree, the guest root of arch_, and an empty store; ASSERTs.
  void PrepareTreeRootAndStore(const std::string& temp_prefix) {
    testing::MakeTestTreeOrFail(&tree_);
    if (HasFatalFailure()) return;

    process::ProcessOptions root;
    root.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--arch", arch_,
                 "--out", FARM_GUEST_ROOT_DIR};
    root.timeout = absl::Minutes(10);  // a first aarch64 root downloads its packages
    absl::StatusOr<process::ProcessResult> built = process::RunProcess(root);
    ASSERT_TRUE(built.ok() && built->ok())
        << "build-guest-root: " << (built.ok() ? built->stderr_data : built.status().ToString());
    initramfs_ = std::string(absl::StripAsciiWhitespace(built->stdout_data));

    absl::StatusOr<process::ScopedTempDir> dir =
        process::ScopedTempDir::Create(std::filesystem::temp_directory_path(), temp_prefix);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<process::ScopedTempDir>(*std::move(dir));
    std::filesystem::create_directories(dir_->path() / "store");
    std::filesystem::create_directories(dir_->path() / "scratch");
  }

  // `rev`'s parent in the test tree; ASSERTs.
  void ParentOf(const std::string& rev, std::string* parent) {
    process::ProcessOptions p;
    p.argv = {"git", "-C", tree_.dir, "rev-parse", rev + "~1"};
    p.timeout = absl::Seconds(30);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    ASSERT_TRUE(r.ok() && r->ok()) << "git rev-parse " << rev << "~1";
    *parent = std::string(absl::StripAsciiWhitespace(r->stdout_data));
  }

  // Builds `commit` into the store as the farm builds a dma-map-bench
  // job's kernel; ASSERTs that it built with the dma_map_benchmark tool.
  void BuildInto(const std::string& commit) {
    kbuild::BuildRequest req;
    req.tree = tree_.dir;
    req.rev = commit;
    req.arch = arch_;
    req.machine = kbuild::kAllMachines;  // the farm's build jobs' config: one build directory
    req.base = "tinyconfig";
    req.dma_map_bench = true;
    req.config_id = kConfigId;
    req.store_dir = (dir_->path() / "store").string();
    req.timeout = absl::Minutes(40);
    std::string log;
    absl::StatusOr<kbuild::BuildResult> b = kbuild::BuildKernel(req, &log);
    const std::string tail = log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    ASSERT_TRUE(b.ok()) << b.status() << "\n" << tail;
    ASSERT_FALSE(b->build.dma_map_benchmark.empty())
        << "the build has no dma_map_benchmark tool; its log:\n"
        << tail;
    std::cout << "built " << commit.substr(0, 12) << " (" << b->release << ") in "
              << absl::FormatDuration(absl::Trunc(b->wall_time, absl::Seconds(1)))
              << (b->reused_build_dir ? ", incremental" : ", from scratch") << "\n";
    release_[commit] = b->release;
  }

  // The guest of arch_: q35 + intel-iommu under tcg-icount on x86_64 (as
  // the farm's instruction-timed runs); virt + SMMUv3 under plain tcg on
  // aarch64 (as bench/vm_bench boots it).
  kernels::VmConfig Vm() const {
    kernels::VmConfig c;
    c.kernels_dir = (dir_->path() / "store").string();
    c.initramfs = initramfs_;
    c.allow_dir = (dir_->path() / "scratch").string();
    c.arch = arch_;
    c.qemu = "qemu-system-" + arch_;
    c.accel = arch_ == "x86_64" ? "tcg-icount" : "tcg";
    c.boot_timeout = absl::Seconds(90);
    return c;
  }

  // The agent's executor of guest jobs; `kernel_counters` as farm-agent
  // --kernel-counters (the guest counts IOMMU events around the tool).
  std::unique_ptr<agent::KernelExecutor> Executor(bool kernel_counters = false) const {
    ::iommufarm::v1::HostFacts host;
    host.set_kernel_release("host");
    host.set_architecture("x86_64");
    kernels::VmConfig vm = Vm();
    vm.kernel_counters = kernel_counters;
    return std::make_unique<agent::KernelExecutor>(
        std::make_unique<agent::GuestOnlyTool>("dma-map-bench"), host,
        std::make_unique<kernels::VmKernelProvider>(vm), "qemu under test");
  }

  // A one-second dma_map_benchmark job of `commit` under `mode`, as the
  // scheduler hands it out, on arch_'s machine (q35 + intel-iommu, or virt +
  // SMMUv3).
  ::iommufarm::v1::Job DmaMapBenchJob(int64_t id, const std::string& commit,
                                      ::iommufarm::v1::IommuMode mode) const {
    ::iommufarm::v1::Job job;
    job.set_id(id);
    job.set_executor(::iommufarm::v1::EXECUTOR_DMA_MAP_BENCH);
    job.set_commit_id(commit);
    job.set_platform(arch_ == "aarch64" ? "virt-smmuv3" : "q35-intel-iommu");
    job.set_mode(mode);
    job.mutable_workload()->set_name("dma-map-bench");
    (*job.mutable_workload()->mutable_params())["seconds"] = "1";
    return job;
  }

  // The config id every kernel of this fixture is built and booted with.
  static constexpr char kConfigId[] = "dma-map-bench";

  const std::string arch_;
  kbuild::TestTree tree_;
  std::map<std::string, std::string> release_;  // commit -> its build's release
  std::string initramfs_;
  std::unique_ptr<process::ScopedTempDir> dir_;
};

}  // namespace farm

#endif  // INTEGRATION_TESTS_GUEST_KBUILD_FIXTURE_H_
