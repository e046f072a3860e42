// The kernel's own DMA-API benchmark on real kernels built from the test
// tree, in q35 + intel-iommu guests under tcg-icount, through the agent's
// KernelExecutor (params -> the guest's dma_map_benchmark -> samples). The
// planted regression of scripts/make-test-kernel-tree (an extra full IOTLB
// flush after each strict unmap) and its parent are built (the parent
// incrementally after the planted one, in the build directory the kbuild
// tests share), then run in interleaved rounds: strict repeats of one commit
// must agree within 1% (coefficient of variation) and the planted commit's
// unmap latency must stand clear of its parent's; in passthrough, where no
// IOTLB is flushed, the two must not differ beyond their noise.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/executors/kernel_executor.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"
#include "proto/names.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

constexpr int kRounds = 5;

struct Spread {
  double mean = 0, sd = 0;
  double Cv() const { return mean == 0 ? 0 : sd / mean; }
};

Spread SpreadOf(const std::vector<double>& v) {
  Spread s;
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean) / static_cast<double>(v.size() - 1);
  s.sd = std::sqrt(s.sd);
  return s;
}

class DmaMapBenchKbuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<kbuild::TestTree> tree =
        kbuild::MakeTestTree(std::string(FARM_SOURCE_DIR) + "/scripts/make-test-kernel-tree");
    ASSERT_TRUE(tree.ok()) << tree.status();
    tree_ = *std::move(tree);
    auto planted = std::find(tree_.commits.begin(), tree_.commits.end(), tree_.planted);
    ASSERT_TRUE(planted != tree_.commits.end() && planted != tree_.commits.begin());
    parent_ = *(planted - 1);

    process::ProcessOptions root;
    root.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--out",
                 FARM_GUEST_ROOT_DIR};
    root.timeout = absl::Minutes(2);
    absl::StatusOr<process::ProcessResult> built = process::RunProcess(root);
    ASSERT_TRUE(built.ok() && built->ok())
        << "build-guest-root: " << (built.ok() ? built->stderr_data : built.status().ToString());
    initramfs_ = std::string(absl::StripAsciiWhitespace(built->stdout_data));

    absl::StatusOr<process::ScopedTempDir> dir =
        process::ScopedTempDir::Create(fs::temp_directory_path(), "dma-map-bench-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<process::ScopedTempDir>(*std::move(dir));
    fs::create_directories(dir_->path() / "store");
    fs::create_directories(dir_->path() / "scratch");
    for (const std::string& commit : {tree_.planted, parent_}) BuildInto(commit);
  }

  void BuildInto(const std::string& commit) {
    kbuild::BuildRequest req;
    req.tree = tree_.dir;
    req.rev = commit;
    req.machine = kbuild::kAllMachines;  // the farm's build jobs' config: one build directory
    req.base = "tinyconfig";
    req.dma_map_bench = true;  // as the farm builds a dma-map-bench job's kernel
    req.config_id = "dma-map-bench";
    req.store_dir = (dir_->path() / "store").string();
    req.timeout = absl::Minutes(40);
    std::string log;
    absl::StatusOr<kbuild::BuildResult> b = kbuild::BuildKernel(req, &log);
    ASSERT_TRUE(b.ok()) << b.status() << "\n"
                        << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    ASSERT_FALSE(b->build.dma_map_benchmark.empty())
        << "the build has no dma_map_benchmark tool; its log:\n"
        << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    std::cout << "built " << commit.substr(0, 12) << " (" << b->release << ") in "
              << absl::FormatDuration(absl::Trunc(b->wall_time, absl::Seconds(1))) << "\n";
  }

  std::unique_ptr<agent::KernelExecutor> Executor() const {
    kernels::VmConfig c;
    c.kernels_dir = (dir_->path() / "store").string();
    c.initramfs = initramfs_;
    c.allow_dir = (dir_->path() / "scratch").string();
    c.accel = "tcg-icount";
    c.boot_timeout = absl::Seconds(90);
    pb::HostFacts host;
    host.set_kernel_release("host");
    host.set_architecture("x86_64");
    return std::make_unique<agent::KernelExecutor>(
        std::make_unique<agent::GuestOnlyTool>("dma-map-bench"), host,
        std::make_unique<kernels::VmKernelProvider>(c), "qemu under test");
  }

  // unmap_latency_mean (ns) of each round, per commit, the commits'
  // order alternating round by round.
  std::map<std::string, std::vector<double>> Rounds(pb::IommuMode mode) {
    std::unique_ptr<agent::KernelExecutor> ex = Executor();
    std::map<std::string, std::vector<double>> out;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::string> order = {parent_, tree_.planted};
      if (round % 2 == 1) std::swap(order[0], order[1]);
      for (const std::string& commit : order) {
        pb::Job job;
        job.set_id(round);
        job.set_executor(pb::EXECUTOR_DMA_MAP_BENCH);
        job.set_commit_id(commit);
        job.set_platform("q35-intel-iommu");
        job.set_mode(mode);
        job.mutable_workload()->set_name("dma-map-bench");
        (*job.mutable_workload()->mutable_params())["seconds"] = "1";
        agent::CancelToken cancel;
        absl::StatusOr<agent::ExecutionResult> r = ex->Run(job, cancel);
        EXPECT_TRUE(r.ok()) << commit << " " << proto::ModeName(mode) << ": " << r.status();
        if (!r.ok()) continue;
        EXPECT_TRUE(r->ran_on.has_value());
        if (!r->ran_on.has_value()) continue;
        EXPECT_EQ(r->ran_on->guest().accel(), "tcg-icount");
        EXPECT_EQ(r->ran_on->guest().icount_shift(), 7u);
        EXPECT_EQ(r->ran_on->iommu_mode(), mode);
        EXPECT_EQ(r->raw_format, "dma-map-bench");
        for (const pb::Sample& s : r->samples) {
          if (s.metric() == "unmap_latency_mean") out[commit].push_back(s.value());
        }
        std::cout << proto::ModeName(mode) << " " << commit.substr(0, 12) << " round " << round
                  << ": " << absl::StripTrailingAsciiWhitespace(r->raw_output) << "\n";
      }
    }
    return out;
  }

  void Report(const char* what, const Spread& parent, const Spread& planted) {
    std::cout << absl::StrFormat(
        "%s: parent %.0f ns (cv %.2f%%), planted %.0f ns (cv %.2f%%), change %+.2f%%\n", what,
        parent.mean, 100 * parent.Cv(), planted.mean, 100 * planted.Cv(),
        100 * (planted.mean / parent.mean - 1));
  }

  kbuild::TestTree tree_;
  std::string parent_;
  std::string initramfs_;
  std::unique_ptr<process::ScopedTempDir> dir_;
};

TEST_F(DmaMapBenchKbuildTest, StrictShowsThePlantedFlushAndPassthroughDoesNot) {
  std::map<std::string, std::vector<double>> strict = Rounds(pb::IOMMU_MODE_STRICT);
  ASSERT_EQ(strict[parent_].size(), static_cast<size_t>(kRounds));
  ASSERT_EQ(strict[tree_.planted].size(), static_cast<size_t>(kRounds));
  const Spread p = SpreadOf(strict[parent_]), q = SpreadOf(strict[tree_.planted]);
  Report("strict unmap latency", p, q);
  EXPECT_LT(p.Cv(), 0.01);
  EXPECT_LT(q.Cv(), 0.01);
  // Clear of both commits' noise: well beyond what their repeats spread.
  EXPECT_GT(q.mean - p.mean, 5 * std::max(p.sd, q.sd));

  std::map<std::string, std::vector<double>> pt = Rounds(pb::IOMMU_MODE_PASSTHROUGH);
  ASSERT_EQ(pt[parent_].size(), static_cast<size_t>(kRounds));
  ASSERT_EQ(pt[tree_.planted].size(), static_cast<size_t>(kRounds));
  const Spread a = SpreadOf(pt[parent_]), b = SpreadOf(pt[tree_.planted]);
  Report("passthrough unmap latency", a, b);
  EXPECT_LT(std::fabs(b.mean - a.mean), 0.01 * a.mean + 3 * std::max(a.sd, b.sd));
}

}  // namespace
}  // namespace farm
