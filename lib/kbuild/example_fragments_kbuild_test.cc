// The optional fragments in examples/ (a spec's kernel_config fragments for
// --kernel-counters) against the test tree's Kconfig (label kbuild): on top
// of tinyconfig and the shipped fragments of every machine model of the
// architecture, as the farm's build jobs merge them, every option they ask
// for holds after `make olddefconfig`, so a kernel_config naming them
// builds. Kconfig only: nothing is compiled.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/base/file.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kconfig.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {
namespace {

namespace fs = std::filesystem;

// `make O=obj ARCH=... <target>` in `tree`; "" or what failed.
std::string Make(const std::string& tree, const std::string& obj, const std::string& arch,
                 const std::string& target) {
  process::ProcessOptions p;
  p.argv = {"make", "-s", "-C", tree, absl::StrCat("O=", obj)};
  if (arch == "aarch64") {
    p.argv.insert(p.argv.end(), {"ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"});
  } else {
    p.argv.push_back("ARCH=x86_64");
  }
  p.argv.push_back(target);
  p.timeout = absl::Minutes(5);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
  if (!r.ok()) return r.status().ToString();
  return r->ok() ? "" : absl::StrCat(r->Describe(), ": ", r->stderr_data);
}

// tinyconfig, the shipped fragments of `arch` and `extra` (examples/ files),
// olddefconfig: what ExplainMismatches says of the result.
absl::Status ConfigHolds(const std::string& tree, const std::string& arch,
                         const std::vector<std::string>& extra) {
  absl::StatusOr<process::ScopedTempDir> obj =
      process::ScopedTempDir::Create(fs::temp_directory_path(), "kbuild-example-");
  if (!obj.ok()) return obj.status();
  const std::string dir = obj->path().string();
  if (std::string e = Make(tree, dir, arch, "tinyconfig"); !e.empty()) {
    return absl::InternalError(e);
  }
  absl::StatusOr<std::vector<Fragment>> shipped = MachineFragments(kAllMachines, arch);
  if (!shipped.ok()) return shipped.status();
  std::vector<std::vector<ConfigOption>> fragments;
  for (const Fragment& f : *shipped) fragments.push_back(ParseConfig(f.text, f.name));
  for (const std::string& name : extra) {
    absl::StatusOr<std::string> text =
        base::ReadFile(absl::StrCat(FARM_SOURCE_DIR, "/examples/", name));
    if (!text.ok()) return text.status();
    fragments.push_back(ParseConfig(*text, name));
  }
  const std::vector<ConfigOption> requested = RequestedOptions(fragments);
  const std::string config = dir + "/.config";
  if (absl::Status st =
          base::WriteFile(config, MergeConfig(base::ReadFileOrEmpty(config), requested));
      !st.ok()) {
    return st;
  }
  if (std::string e = Make(tree, dir, arch, "olddefconfig"); !e.empty()) {
    return absl::InternalError(e);
  }
  absl::StatusOr<std::set<std::string>> known = KconfigSymbols(tree);
  if (!known.ok()) return known.status();
  return ExplainMismatches(Mismatches(requested, base::ReadFileOrEmpty(config)), *known);
}

TEST(ExampleFragments, KernelCountersHoldOnBothArchitectures) {
  absl::StatusOr<TestTree> tree = MakeTestTree(FARM_SOURCE_DIR "/scripts/make-test-kernel-tree");
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_TRUE(ConfigHolds(tree->dir, "x86_64", {"kernel-counters.config"}).ok());
  const absl::Status arm =
      ConfigHolds(tree->dir, "aarch64", {"kernel-counters.config", "kernel-counters-pmcg.config"});
  EXPECT_TRUE(arm.ok()) << arm;
  // The PMCG driver is Arm's: on x86_64 olddefconfig drops it, and the
  // check names it (a kernel_config giving it fails the build).
  const absl::Status x86_pmcg = ConfigHolds(tree->dir, "x86_64", {"kernel-counters-pmcg.config"});
  EXPECT_EQ(x86_pmcg.code(), absl::StatusCode::kFailedPrecondition) << x86_pmcg;
  EXPECT_NE(x86_pmcg.message().find("CONFIG_ARM_SMMU_V3_PMU=y"), absl::string_view::npos)
      << x86_pmcg;
}

}  // namespace
}  // namespace farm::kbuild
