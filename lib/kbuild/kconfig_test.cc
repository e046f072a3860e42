#include "lib/kbuild/kconfig.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {
namespace {

TEST(ParseConfigLine, SetAndNotSetAndOthers) {
  std::optional<ConfigOption> y = ParseConfigLine("CONFIG_BLK_DEV_NVME=y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->symbol, "CONFIG_BLK_DEV_NVME");
  EXPECT_EQ(y->value, "y");
  std::optional<ConfigOption> s = ParseConfigLine("CONFIG_LOCALVERSION=\"-x\"");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->value, "\"-x\"");
  std::optional<ConfigOption> n = ParseConfigLine("# CONFIG_SMP is not set");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->symbol, "CONFIG_SMP");
  EXPECT_EQ(n->value, "n");
  EXPECT_FALSE(ParseConfigLine("# Automatically generated file; DO NOT EDIT."));
  EXPECT_FALSE(ParseConfigLine(""));
  EXPECT_FALSE(ParseConfigLine("FOO=y"));
  EXPECT_FALSE(ParseConfigLine("CONFIG_=y"));
  EXPECT_EQ(FormatConfigOption(*n), "# CONFIG_SMP is not set");
  EXPECT_EQ(FormatConfigOption(*y), "CONFIG_BLK_DEV_NVME=y");
}

TEST(MergeConfig, LaterFragmentWinsAndReplacesTheBaseLine) {
  const std::string base =
      "# header\nCONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\nCONFIG_D=\"x\"\n";
  std::vector<ConfigOption> requested =
      RequestedOptions({ParseConfig("CONFIG_B=m\nCONFIG_C=y\n", "one.config"),
                        ParseConfig("# CONFIG_B is not set\nCONFIG_E=0x10\n", "two.config")});
  ASSERT_EQ(requested.size(), 3u);
  EXPECT_EQ(requested[0].symbol, "CONFIG_B");
  EXPECT_EQ(requested[0].value, "n");
  EXPECT_EQ(requested[0].origin, "two.config");
  EXPECT_EQ(requested[1].origin, "one.config");
  EXPECT_EQ(MergeConfig(base, requested),
            "# header\nCONFIG_A=y\nCONFIG_D=\"x\"\n# CONFIG_B is not set\nCONFIG_C=y\n"
            "CONFIG_E=0x10\n");
}

TEST(Mismatches, ListsWhatTheFinalConfigDoesNotHold) {
  std::vector<ConfigOption> requested = ParseConfig(
      "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n# CONFIG_D is not set\n"
      "CONFIG_E=m\n",
      "f.config");
  std::vector<OptionMismatch> m =
      Mismatches(requested,
                 "CONFIG_A=y\n# CONFIG_B is not set\n# CONFIG_C is not set\n"
                 "CONFIG_E=y\n");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].wanted.symbol, "CONFIG_B");
  EXPECT_EQ(m[0].got, "n");
  EXPECT_FALSE(m[0].absent);
  EXPECT_EQ(m[1].wanted.symbol, "CONFIG_D");
  EXPECT_TRUE(m[1].absent);
  EXPECT_EQ(m[2].wanted.symbol, "CONFIG_E");
  EXPECT_EQ(m[2].got, "y");
}

TEST(ExplainMismatches, UnknownSymbolsFirstThenDroppedOptions) {
  std::vector<ConfigOption> requested =
      ParseConfig("CONFIG_A=y\n# CONFIG_OFF is not set\nCONFIG_NOPE=y\n", "f.config");
  std::vector<OptionMismatch> m = Mismatches(requested, "# CONFIG_A is not set\n");
  absl::Status s = ExplainMismatches(m, {"CONFIG_A", "CONFIG_OFF"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "config options the tree's Kconfig does not define: CONFIG_NOPE (from f.config)");
  s = ExplainMismatches(m, {"CONFIG_A", "CONFIG_OFF", "CONFIG_NOPE"});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "olddefconfig dropped options the fragments ask for (their dependencies are off): "
            "CONFIG_A=y (from f.config); olddefconfig left n, CONFIG_NOPE=y (from f.config); "
            "olddefconfig left n");
  // Asked off and absent with a known symbol: its dependencies are off, so is it.
  EXPECT_TRUE(
      ExplainMismatches(Mismatches(ParseConfig("# CONFIG_OFF is not set\n"), ""), {"CONFIG_OFF"})
          .ok());
  EXPECT_EQ(ExplainMismatches(Mismatches(ParseConfig("# CONFIG_GONE is not set\n"), ""), {}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KconfigSymbols, ReadsEveryKconfigFileButGit) {
  absl::StatusOr<process::ScopedTempDir> dir =
      process::ScopedTempDir::Create(std::filesystem::temp_directory_path(), "kconfig-");
  ASSERT_TRUE(dir.ok());
  const std::filesystem::path root = dir->path();
  std::filesystem::create_directories(root / "drivers/iommu");
  std::filesystem::create_directories(root / ".git");
  std::ofstream(root / "Kconfig") << "source \"drivers/iommu/Kconfig\"\nconfig DEBUG_FS\n\tbool\n";
  std::ofstream(root / "drivers/iommu/Kconfig")
      << "menuconfig IOMMU_SUPPORT\n  bool \"x\"\nif IOMMU_SUPPORT\n\tconfig INTEL_IOMMU # c\n"
         "\tdepends on configfoo\nendif\n";
  std::ofstream(root / "drivers/iommu/Kconfig.amd") << "config AMD_IOMMU\n";
  std::ofstream(root / ".git/Kconfig") << "config IN_GIT\n";
  std::ofstream(root / "Makefile") << "config NOT_KCONFIG\n";
  absl::StatusOr<std::set<std::string>> s = KconfigSymbols(root.string());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::set<std::string>{"CONFIG_AMD_IOMMU", "CONFIG_DEBUG_FS", "CONFIG_INTEL_IOMMU",
                                       "CONFIG_IOMMU_SUPPORT"}));
}

}  // namespace
}  // namespace farm::kbuild
