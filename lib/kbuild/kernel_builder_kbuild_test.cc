// Real kernel builds of scripts/make-test-kernel-tree's tree (label kbuild):
// its base commit for every x86_64 machine model (tinyconfig + the shipped
// fragments, as the farm's build jobs build it), then incrementally the next commit in the same
// build directory, then the commit that does not compile. The cache is the default one, so a second
// run rebuilds only what changed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {
namespace {

namespace fs = std::filesystem;

TestTree MakeTestTree() {
  absl::StatusOr<TestTree> t =
      ::farm::kbuild::MakeTestTree(FARM_SOURCE_DIR "/scripts/make-test-kernel-tree");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : TestTree();
}

size_t CountCompiles(const std::string& log) {
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(line, "  CC ")) ++n;
  }
  return n;
}

TEST(RealKernelBuild, BaseThenIncrementallyTheNextCommitThenTheBrokenOne) {
  TestTree tree = MakeTestTree();
  ASSERT_GE(tree.commits.size(), 3u);
  ASSERT_EQ(tree.broken.size(), 40u);
  absl::StatusOr<process::ScopedTempDir> store =
      process::ScopedTempDir::Create(fs::temp_directory_path(), "kbuild-store-");
  ASSERT_TRUE(store.ok());
  BuildRequest req;
  req.tree = tree.dir;
  req.machine = kAllMachines;  // as the farm's build jobs build, so they share the build directory
  req.base = "tinyconfig";
  req.dma_map_bench = true;  // a dma-map-bench job's kernel: the benchmark and its tool
  req.config_id = "dma-map-bench";
  req.store_dir = store->path().string();
  req.timeout = absl::Minutes(40);

  std::string log;
  req.rev = tree.commits[0];
  absl::StatusOr<BuildResult> base = BuildKernel(req, &log);
  ASSERT_TRUE(base.ok()) << base.status() << "\n"
                         << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  EXPECT_EQ(base->commit, tree.commits[0]);
  EXPECT_TRUE(absl::StartsWith(base->release, "6.1.")) << base->release;
  EXPECT_TRUE(absl::EndsWith(base->release, "-g" + tree.commits[0].substr(0, 12))) << base->release;
  EXPECT_TRUE(fs::exists(fs::path(base->build_dir) / "obj/vmlinux"));
  EXPECT_GT(fs::file_size(base->build.ImagePath()), 500'000u);
  EXPECT_EQ(base->build.fragments,
            (std::vector<std::string>{"guest.config", "q35-intel-iommu.config",
                                      "q35-amd-iommu.config", "dma-map-bench.config"}));
  std::ifstream config(base->build.ConfigPath());
  std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  for (const char* want : {"CONFIG_INTEL_IOMMU=y", "CONFIG_DMA_MAP_BENCHMARK=y",
                           "CONFIG_BLK_DEV_NVME=y", "CONFIG_IOMMU_DEBUGFS=y"}) {
    EXPECT_TRUE(absl::StrContains(text, absl::StrCat(want, "\n"))) << want;
  }

  // The tree's DMA-API benchmark tool, static, for the guest's busybox root.
  ASSERT_EQ(base->build.dma_map_benchmark, "dma_map_benchmark") << log;
  std::ifstream tool(base->build.DmaMapBenchmarkPath(), std::ios::binary);
  std::string elf(4, '\0');
  tool.read(elf.data(), 4);
  EXPECT_EQ(elf,
            "\x7f"
            "ELF");
  EXPECT_FALSE(absl::StrContains(log, "dma_map_benchmark did not build")) << log;

  const size_t base_compiled = CountCompiles(log);
  log.clear();
  req.rev = tree.commits[1];
  absl::StatusOr<BuildResult> next = BuildKernel(req, &log);
  ASSERT_TRUE(next.ok()) << next.status() << "\n"
                         << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
  EXPECT_TRUE(next->reused_build_dir);
  EXPECT_EQ(next->build_dir, base->build_dir);
  EXPECT_NE(next->release, base->release);
  EXPECT_TRUE(absl::EndsWith(next->release, "-g" + tree.commits[1].substr(0, 12)));
  // A documentation commit recompiles what the release string reaches, not the tree.
  EXPECT_FALSE(absl::StrContains(log, "CC      drivers/iommu/dma-iommu.o")) << log;
  // Incremental: a handful of objects, not the ~700 of a clean tinyconfig build.
  const size_t compiled = CountCompiles(log);
  EXPECT_LT(compiled, 60u) << log;

  log.clear();
  req.rev = tree.broken;
  absl::StatusOr<BuildResult> broken = BuildKernel(req, &log);
  ASSERT_EQ(broken.status().code(), absl::StatusCode::kFailedPrecondition) << broken.status();
  EXPECT_TRUE(absl::StartsWith(
      broken.status().message(),
      absl::StrCat("build failed at ", tree.broken, ": drivers/iommu/dma-iommu.c:")))
      << broken.status();
  EXPECT_TRUE(absl::StrContains(broken.status().message(), "error:")) << broken.status();
  std::cout << "base " << base->release << " in " << absl::FormatDuration(base->wall_time) << " ("
            << base_compiled << " files compiled)"
            << ", next " << next->release << " in " << absl::FormatDuration(next->wall_time) << " ("
            << compiled << " files compiled)"
            << ", broken: " << broken.status().message() << "\n";
}

}  // namespace
}  // namespace farm::kbuild
