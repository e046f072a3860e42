// Imports a small linux-image-like package built here with dpkg-deb --build
// (no download), label tools: needs dpkg-deb.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "lib/base/file.h"
#include "lib/kstore/kernel_store.h"
#include "lib/process/process.h"

namespace farm::kstore {
namespace {

namespace fs = std::filesystem;

constexpr char kRelease[] = "6.1.0-99-test-amd64";

class DebImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kstore-deb-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    store_ = dir_ / "store";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A package with boot/vmlinuz-<release>, its config and one module.
  fs::path BuildDeb(const std::string& arch, bool with_image = true) {
    const fs::path root = dir_ / ("pkg-" + arch);
    fs::create_directories(root / "DEBIAN");
    std::ofstream(root / "DEBIAN" / "control")
        << "Package: linux-image-" << kRelease << "\nVersion: 6.1.999-1\nArchitecture: " << arch
        << "\nMaintainer: farm tests <farm@example.org>\nDescription: test kernel\n";
    fs::create_directories(root / "boot");
    if (with_image)
      std::ofstream(root / "boot" / (std::string("vmlinuz-") + kRelease)) << "MZimage";
    std::ofstream(root / "boot" / (std::string("config-") + kRelease))
        << "CONFIG_AMD_IOMMU=y\nCONFIG_INTEL_IOMMU=y\n";
    fs::create_directories(root / "lib" / "modules" / kRelease / "kernel");
    std::ofstream(root / "lib" / "modules" / kRelease / "kernel" / "nvme.ko") << "module";
    const fs::path deb = dir_ / ("test-" + arch + (with_image ? "" : "-noimage") + ".deb");
    process::ProcessOptions p;
    p.argv = {"dpkg-deb", "--root-owner-group", "--build", root.string(), deb.string()};
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    EXPECT_TRUE(r.ok() && r->ok()) << (r.ok() ? r->stderr_data : r.status().ToString());
    return deb;
  }

  static DebImport Import(const fs::path& deb, const std::string& commit, bool replace = false) {
    DebImport r;
    r.deb = deb.string();
    r.commit = commit;
    r.replace = replace;
    return r;
  }

  fs::path dir_;
  fs::path store_;
};

TEST_F(DebImportTest, ImportsImageConfigAndModules) {
  const fs::path deb = BuildDeb("amd64");
  absl::StatusOr<KernelBuild> b = ImportDeb(store_.string(), Import(deb, "c588072bba6b"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->commit, "c588072bba6b");
  EXPECT_EQ(b->release, kRelease);
  EXPECT_EQ(b->arch, "x86_64");
  EXPECT_EQ(b->version, "6.1.999-1");
  EXPECT_EQ(b->source, "test-amd64.deb");
  EXPECT_EQ(b->dir, (store_ / "c588072bba6b-x86_64").string());
  EXPECT_EQ(base::ReadFileOrEmpty(b->ImagePath()), "MZimage");
  EXPECT_TRUE(fs::is_regular_file(fs::path(b->ModulesPath()) / "kernel" / "nvme.ko"));
  EXPECT_TRUE(BuildConfigEnabled(*b, "CONFIG_AMD_IOMMU"));

  // The store reads it back from its manifest; no work directory is left.
  absl::StatusOr<StoreListing> s = ReadStore(store_.string());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->builds.size(), 1u);
  EXPECT_TRUE(s->problems.empty());
  EXPECT_EQ(s->builds[0].release, kRelease);
  EXPECT_EQ(s->builds[0].modules, "modules");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(store_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);

  // A second import of the commit is refused unless it replaces.
  absl::StatusOr<KernelBuild> again = ImportDeb(store_.string(), Import(deb, "c588072bba6b"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  again = ImportDeb(store_.string(), Import(deb, "c588072bba6b", true));
  EXPECT_TRUE(again.ok()) << again.status();
  // The arm64 build of the same commit is another build.
  absl::StatusOr<KernelBuild> arm =
      ImportDeb(store_.string(), Import(BuildDeb("arm64"), "c588072bba6b"));
  ASSERT_TRUE(arm.ok()) << arm.status();
  EXPECT_EQ(arm->arch, "aarch64");
  s = ReadStore(store_.string());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->builds.size(), 2u);
  EXPECT_TRUE(s->problems.empty());
}

TEST_F(DebImportTest, RefusesWhatIsNotABootableKernelPackage) {
  absl::StatusOr<KernelBuild> b =
      ImportDeb(store_.string(), Import(BuildDeb("amd64", false), "k1"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("expected one boot/vmlinuz-<release>, found none"),
            std::string::npos)
      << b.status();
  b = ImportDeb(store_.string(), Import(BuildDeb("riscv64"), "k2"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("architecture 'riscv64' is not one the farm boots"),
            std::string::npos)
      << b.status();
  b = ImportDeb(store_.string(), Import(BuildDeb("amd64"), "../up"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  // Not a package at all: dpkg-deb says why.
  std::ofstream(dir_ / "junk.deb") << "not an archive";
  b = ImportDeb(store_.string(), Import((dir_ / "junk.deb"), "k3"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(fs::exists(store_ / "k1-x86_64"));
  EXPECT_FALSE(fs::exists(store_ / "k3-x86_64"));
  EXPECT_TRUE(ReadStore(store_.string())->builds.empty());
}

}  // namespace
}  // namespace farm::kstore
