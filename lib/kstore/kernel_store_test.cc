#include "lib/kstore/kernel_store.h"
#include "lib/kstore/manifest_testdata.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace farm::kstore {
namespace {

using ::farm::kstore::testdata::kGood;

namespace fs = std::filesystem;

std::string ParseError(const std::string& text) {
  absl::StatusOr<KernelBuild> b = ParseManifest(text, "store/x/kernel.yaml");
  EXPECT_FALSE(b.ok()) << text;
  if (b.ok()) return "";
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(b.status().message());
}

TEST(ParseManifest, ReadsEveryKey) {
  absl::StatusOr<KernelBuild> b = ParseManifest(kGood, "m");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->commit, "v6.1.192");
  EXPECT_EQ(b->release, "6.1.0-57-cloud-arm64");
  EXPECT_EQ(b->arch, "aarch64");
  EXPECT_EQ(b->image, "vmlinuz");
  EXPECT_EQ(b->config, "config");
  EXPECT_EQ(b->modules, "");
  EXPECT_EQ(b->version, "6.1.192-3");
}

TEST(ParseManifest, ErrorsNameTheFileAndTheKey) {
  EXPECT_EQ(ParseError("release: 6.1\narch: x86_64\nimage: vmlinuz\n"),
            "store/x/kernel.yaml: missing 'commit'");
  EXPECT_EQ(ParseError("commit: a\narch: x86_64\nimage: vmlinuz\n"),
            "store/x/kernel.yaml: missing 'release'");
  EXPECT_EQ(ParseError("commit: a\nrelease: r\narch: x86_64\n"),
            "store/x/kernel.yaml: missing 'image'");
  EXPECT_EQ(ParseError(std::string(kGood) + "imgae: vmlinuz\n"),
            "store/x/kernel.yaml: unknown key 'imgae' (known: commit, release, arch, image, "
            "initrd, config, modules, version, source, tree, config_hash, fragments, compiler, "
            "build_seconds, dma_map_benchmark, kernel_config)");
  EXPECT_EQ(ParseError("commit: a\nrelease: r\narch: riscv64\nimage: vmlinuz\n"),
            "store/x/kernel.yaml: arch 'riscv64' unknown (x86_64, aarch64)");
  EXPECT_EQ(ParseError("commit: a/b\nrelease: r\narch: x86_64\nimage: vmlinuz\n"),
            "store/x/kernel.yaml: commit 'a/b' is not a plain id ([A-Za-z0-9._+-], not starting "
            "with . or -)");
  EXPECT_EQ(ParseError("commit: a\nrelease: ../r\narch: x86_64\nimage: vmlinuz\n"),
            "store/x/kernel.yaml: release '../r' is not a kernel release name");
  EXPECT_EQ(ParseError("commit: a\nrelease: r\narch: x86_64\nimage: ../../boot/vmlinuz\n"),
            "store/x/kernel.yaml: 'image' path '../../boot/vmlinuz' must be relative to the build "
            "directory, without '..'");
  EXPECT_EQ(ParseError("commit: a\nrelease: r\narch: x86_64\nimage: /boot/vmlinuz\n"),
            "store/x/kernel.yaml: 'image' path '/boot/vmlinuz' must be relative to the build "
            "directory, without '..'");
  EXPECT_EQ(ParseError("commit: [a, b]\nrelease: r\narch: x86_64\nimage: v\n"),
            "store/x/kernel.yaml: 'commit' must be a single value");
  EXPECT_EQ(ParseError(std::string(kGood) + "fragments: [[a]]\n"),
            "store/x/kernel.yaml: 'fragments' must be a list of names");
  EXPECT_EQ(ParseError("- commit: a\n"),
            "store/x/kernel.yaml: expected a mapping of keys (commit, release, arch, image, ...)");
  EXPECT_NE(ParseError("commit: a\n  release: [\n").find("store/x/kernel.yaml: not YAML: line "),
            std::string::npos);
}

TEST(FormatManifest, RoundTrips) {
  absl::StatusOr<KernelBuild> b = ParseManifest(kGood, "m");
  ASSERT_TRUE(b.ok());
  b->source = "linux-image-6.1.0-57-cloud-arm64_6.1.192-3_arm64.deb";
  b->modules = "modules";
  b->tree = "/src/linux";
  b->config_hash = "3f2a";
  b->fragments = {"q35-intel-iommu.config", "extra.config"};
  b->compiler = "gcc (Debian 12.2.0-14) 12.2.0";
  b->build_seconds = "43.2";
  b->dma_map_benchmark = "dma_map_benchmark";
  b->kernel_config = "a8ea6ec7fc4d4bdb+dma-map-bench";
  absl::StatusOr<KernelBuild> again = ParseManifest(FormatManifest(*b), "m");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << FormatManifest(*b);
  EXPECT_EQ(again->commit, b->commit);
  EXPECT_EQ(again->release, b->release);
  EXPECT_EQ(again->modules, "modules");
  EXPECT_EQ(again->source, b->source);
  EXPECT_EQ(again->version, b->version);
  EXPECT_EQ(again->tree, b->tree);
  EXPECT_EQ(again->config_hash, b->config_hash);
  EXPECT_EQ(again->fragments, b->fragments);
  EXPECT_EQ(again->compiler, b->compiler);
  EXPECT_EQ(again->build_seconds, b->build_seconds);
  EXPECT_EQ(again->dma_map_benchmark, "dma_map_benchmark");
  EXPECT_EQ(again->kernel_config, b->kernel_config);
}

TEST(CompareVersions, NaturalOrder) {
  EXPECT_LT(CompareVersions("6.1.176-1", "6.1.192-3"), 0);
  EXPECT_LT(CompareVersions("6.1.9", "6.1.10"), 0);
  EXPECT_GT(CompareVersions("6.12.1", "6.2.99"), 0);
  EXPECT_EQ(CompareVersions("6.1.05", "6.1.5"), 0);
  EXPECT_LT(CompareVersions("6.1", "6.1.1"), 0);
}

TEST(ConfigEnabled, OnlyEqualsY) {
  const std::string config =
      "# CONFIG_AMD_IOMMU is not set\nCONFIG_INTEL_IOMMU=y\nCONFIG_ARM_SMMU_V3=m\n"
      "CONFIG_AMD_IOMMU_V2=y\n";
  EXPECT_TRUE(ConfigEnabled(config, "CONFIG_INTEL_IOMMU"));
  EXPECT_FALSE(ConfigEnabled(config, "CONFIG_AMD_IOMMU"));
  EXPECT_FALSE(ConfigEnabled(config, "CONFIG_ARM_SMMU_V3"));
  EXPECT_TRUE(ConfigEnabled(config, "CONFIG_AMD_IOMMU_V2"));
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kstore-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

TEST_F(StoreTest, ReadsManifestsAndTheBareLayout) {
  Write("v6.1.192/kernel.yaml", kGood);
  Write("v6.1.192/vmlinuz", "image");
  Write("v6.1.192/config", "CONFIG_ARM_SMMU_V3=y\n");
  // The layout of DIR/<release>/vmlinuz without a manifest.
  Write("6.1.0-50-cloud-amd64/vmlinuz", "image");
  Write("6.1.0-50-cloud-amd64/arch", "x86_64\n");
  // Work in progress and a build whose image is missing.
  Write(".import-abc/build/vmlinuz", "half");
  Write("broken/kernel.yaml", "commit: b\nrelease: r\narch: x86_64\nimage: vmlinuz\n");
  // The same commit and arch twice: the first directory in name order wins;
  // another arch of the commit is a build of its own.
  Write("zz-again/kernel.yaml", kGood);
  Write("zz-again/vmlinuz", "image");
  Write("v6.1.192-x86/kernel.yaml",
        "commit: v6.1.192\nrelease: 6.1.0-57-cloud-amd64\narch: x86_64\nimage: vmlinuz\n");
  Write("v6.1.192-x86/vmlinuz", "image");

  absl::StatusOr<StoreListing> s = ReadStore(dir_.string());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->builds.size(), 3u);
  EXPECT_EQ(s->builds[2].commit, "v6.1.192");
  EXPECT_EQ(s->builds[2].arch, "x86_64");
  EXPECT_EQ(s->builds[0].commit, "6.1.0-50-cloud-amd64");
  EXPECT_EQ(s->builds[0].release, "6.1.0-50-cloud-amd64");
  EXPECT_EQ(s->builds[0].arch, "x86_64");
  EXPECT_EQ(s->builds[0].ImagePath(), (dir_ / "6.1.0-50-cloud-amd64" / "vmlinuz").string());
  EXPECT_EQ(s->builds[1].commit, "v6.1.192");
  EXPECT_EQ(s->builds[1].ConfigPath(), (dir_ / "v6.1.192" / "config").string());
  EXPECT_TRUE(BuildConfigEnabled(s->builds[1], "CONFIG_ARM_SMMU_V3"));
  EXPECT_FALSE(BuildConfigEnabled(s->builds[0], "CONFIG_ARM_SMMU_V3"));
  ASSERT_EQ(s->problems.size(), 2u);
  EXPECT_EQ(s->problems[0], (dir_ / "broken" / "kernel.yaml").string() +
                                ": image 'vmlinuz' is not a file in " + (dir_ / "broken").string());
  EXPECT_EQ(s->problems[1], (dir_ / "zz-again").string() +
                                ": commit v6.1.192 (aarch64) already has the build in " +
                                (dir_ / "v6.1.192").string());
}

// A commit may have a build per kernel config: the key is (commit, arch,
// kernel_config).
TEST_F(StoreTest, OtherKernelConfigsOfACommitAreOtherBuilds) {
  const std::string x86 = "commit: v6.1\nrelease: 6.1.0-g1\narch: x86_64\nimage: vmlinuz\n";
  Write("v6.1-x86_64/kernel.yaml", x86);
  Write("v6.1-x86_64/vmlinuz", "image");
  Write("v6.1-x86_64-dma-map-bench/kernel.yaml", x86 + "kernel_config: dma-map-bench\n");
  Write("v6.1-x86_64-dma-map-bench/vmlinuz", "image");
  Write("v6.1-x86_64-zz/kernel.yaml", x86 + "kernel_config: dma-map-bench\n");
  Write("v6.1-x86_64-zz/vmlinuz", "image");
  absl::StatusOr<StoreListing> s = ReadStore(dir_.string());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->builds.size(), 2u);
  EXPECT_EQ(s->builds[0].kernel_config, "");
  EXPECT_EQ(s->builds[1].kernel_config, "dma-map-bench");
  ASSERT_EQ(s->problems.size(), 1u);
  EXPECT_EQ(s->problems[0], (dir_ / "v6.1-x86_64-zz").string() +
                                ": commit v6.1 (x86_64, kernel config dma-map-bench) already has "
                                "the build in " +
                                (dir_ / "v6.1-x86_64-dma-map-bench").string());
  EXPECT_EQ(ParseManifest(x86 + "kernel_config: ../x\n", "m").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, MissingStoreIsNotFound) {
  EXPECT_EQ(ReadStore((dir_ / "nope").string()).status().code(), absl::StatusCode::kNotFound);
}

TEST(CatalogOrder, ByVersionThenRelease) {
  auto build = [](std::string commit, std::string release, std::string version) {
    KernelBuild b;
    b.commit = std::move(commit);
    b.release = std::move(release);
    b.version = std::move(version);
    return b;
  };
  std::vector<KernelBuild> order = CatalogOrder({build("new", "6.1.0-57-cloud-amd64", "6.1.192-3"),
                                                 build("old", "6.1.0-50-cloud-amd64", "6.1.176-1"),
                                                 build("bare", "6.1.0-9-cloud-amd64", "")});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].commit, "bare");  // "6.1.0-9..." sorts before "6.1.176-1"
  EXPECT_EQ(order[1].commit, "old");
  EXPECT_EQ(order[2].commit, "new");
}

}  // namespace
}  // namespace farm::kstore
