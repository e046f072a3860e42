#include "lib/kbuild/kernel_builder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/file.h"
#include "lib/base/sha256.h"
#include "lib/kbuild/build_cache.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kconfig.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {
namespace {

namespace fs = std::filesystem;

// A make that does what the builder relies on, driven by files of the tree
// it is pointed at (-C SRC): `base.config` is every config target's output;
// olddefconfig keeps the lines whose symbol the tree's Kconfig defines and
// `drops` does not list; an image target fails with `error.txt` on stderr
// when the tree has one, else writes an image recording the identity
// variables; kernelrelease prints VERSION and LOCALVERSION. Every call is
// appended to <build dir>/make-calls.
constexpr char kFakeMake[] = R"(#!/bin/sh
src= obj= lv= target=
while [ $# -gt 0 ]; do
  case $1 in
    -C) src=$2; shift ;;
    O=*) obj=${1#O=} ;;
    LOCALVERSION=*) lv=${1#LOCALVERSION=} ;;
    -s|-j*|*=*) ;;
    *) target=$1 ;;
  esac
  shift
done
mkdir -p "$obj"
echo "$target" >>"$obj/../make-calls"
case $target in
  tinyconfig|defconfig) cp "$src/base.config" "$obj/.config" ;;
  olddefconfig)
    : >"$obj/.config.new"
    while IFS= read -r line; do
      sym=$(echo "$line" | sed -n -e 's/^\(CONFIG_[A-Za-z0-9_]*\)=.*/\1/p' -e 's/^# \(CONFIG_[A-Za-z0-9_]*\) is not set$/\1/p')
      [ -n "$sym" ] || continue
      grep -qx "config ${sym#CONFIG_}" "$src/Kconfig" || continue
      [ -f "$src/drops" ] && grep -qx "$sym" "$src/drops" && continue
      echo "$line" >>"$obj/.config.new"
    done <"$obj/.config"
    mv "$obj/.config.new" "$obj/.config" ;;
  bzImage)
    if [ -f "$src/error.txt" ]; then cat "$src/error.txt" >&2; exit 2; fi
    mkdir -p "$obj/arch/x86/boot"
    echo "$(cat "$src/VERSION")$lv $KBUILD_BUILD_TIMESTAMP $KBUILD_BUILD_USER@$KBUILD_BUILD_HOST" \
      >"$obj/arch/x86/boot/bzImage" ;;
  kernelrelease) echo "$(cat "$src/VERSION")$lv" ;;
  *) echo "fake make: unknown target $target" >&2; exit 2 ;;
esac
)";

class KernelBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<process::ScopedTempDir> d =
        process::ScopedTempDir::Create(fs::temp_directory_path(), "kbuild-test-");
    ASSERT_TRUE(d.ok()) << d.status();
    dir_ = std::make_unique<process::ScopedTempDir>(*std::move(d));
    tree_ = dir_->path() / "tree";
    fs::create_directories(tree_);
    make_ = dir_->path() / "fake-make";
    std::ofstream(make_) << kFakeMake;
    fs::permissions(make_, fs::perms::owner_all);
    Git({"init", "-q", "-b", "main", tree_.string()});
    // A Kconfig defining every symbol the shipped q35 fragment and the
    // builder ask for, and the ones these tests use.
    std::string kconfig;
    absl::StatusOr<std::vector<Fragment>> shipped = MachineFragments("q35-intel-iommu", "x86_64");
    ASSERT_TRUE(shipped.ok());
    std::vector<std::string> symbols = {"LOCALVERSION", "LOCALVERSION_AUTO", "SMP", "DROPPED"};
    for (const Fragment& f : *shipped) {
      for (const ConfigOption& o : ParseConfig(f.text)) symbols.push_back(o.symbol.substr(7));
    }
    for (const std::string& s : symbols) absl::StrAppend(&kconfig, "config ", s, "\n");
    Write("Kconfig", kconfig);
    Write("VERSION", "6.1.0");
    Write("base.config", "CONFIG_SMP=y\nCONFIG_LOCALVERSION_AUTO=y\n# CONFIG_PRINTK is not set\n");
    first_ = Commit("base", "2024-01-01 12:00:00 +0000");
  }

  void Git(std::vector<std::string> args) {
    process::ProcessOptions p;
    p.argv = {"git", "-C", tree_.string()};
    if (args[0] == "init") p.argv = {"git"};
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.env = std::vector<std::string>{"PATH=/usr/bin:/bin",       "GIT_AUTHOR_NAME=t",
                                     "GIT_AUTHOR_EMAIL=t@t",     "GIT_COMMITTER_NAME=t",
                                     "GIT_COMMITTER_EMAIL=t@t",  "HOME=" + dir_->path().string(),
                                     "GIT_AUTHOR_DATE=" + date_, "GIT_COMMITTER_DATE=" + date_};
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->ok()) << absl::StrJoin(p.argv, " ") << ": " << r->stderr_data;
    last_stdout_ = r->stdout_data;
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(tree_ / name) << text;
  }
  std::string Commit(const std::string& subject, const std::string& date) {
    date_ = date;
    Git({"add", "-A"});
    Git({"commit", "-q", "-m", subject});
    Git({"rev-parse", "HEAD"});
    return last_stdout_.substr(0, 40);
  }

  BuildRequest Request() const {
    BuildRequest r;
    r.tree = tree_.string();
    r.rev = "main";
    r.machine = "q35-intel-iommu";
    r.store_dir = (dir_->path() / "store").string();
    r.cache_root = (dir_->path() / "cache").string();
    r.make = make_.string();
    r.use_ccache = false;
    r.jobs = 1;
    r.timeout = absl::Seconds(60);
    return r;
  }

  std::unique_ptr<process::ScopedTempDir> dir_;
  fs::path tree_, make_;
  std::string first_, date_, last_stdout_;
};

TEST_F(KernelBuilderTest, WritesAStoreEntryWithAReproducibleIdentityAndItsManifest) {
  std::string log;
  absl::StatusOr<BuildResult> r = BuildKernel(Request(), &log);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log;
  EXPECT_EQ(r->commit, first_);
  EXPECT_EQ(r->release, "6.1.0-g" + first_.substr(0, 12));
  EXPECT_FALSE(r->reused_build_dir);
  absl::StatusOr<kstore::KernelBuild> b = kstore::ReadBuild(r->build.dir);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dir, (fs::path(Request().store_dir) / (first_ + "-x86_64")).string());
  EXPECT_EQ(b->commit, first_);
  EXPECT_EQ(b->release, r->release);
  EXPECT_EQ(b->arch, "x86_64");
  EXPECT_EQ(b->tree, tree_.string());
  EXPECT_EQ(b->fragments, (std::vector<std::string>{"guest.config", "q35-intel-iommu.config"}));
  EXPECT_EQ(b->config_hash, base::Sha256Hex(base::ReadFileOrEmpty(b->ConfigPath())));
  EXPECT_EQ(b->compiler.rfind("gcc", 0), 0u) << b->compiler;
  EXPECT_FALSE(b->build_seconds.empty());
  EXPECT_EQ(base::ReadFileOrEmpty(b->ImagePath()),
            absl::StrCat(r->release, " Mon, 1 Jan 2024 12:00:00 +0000 farm@iommu-farm\n"));
  // The base's lines the fragments do not touch stay; the builder's
  // identity options win over the base.
  const std::string config = base::ReadFileOrEmpty(b->ConfigPath());
  EXPECT_NE(config.find("CONFIG_SMP=y\n"), std::string::npos) << config;
  EXPECT_NE(config.find("CONFIG_PRINTK=y\n"), std::string::npos) << config;
  EXPECT_NE(config.find("# CONFIG_LOCALVERSION_AUTO is not set\n"), std::string::npos) << config;
  EXPECT_NE(log.find("olddefconfig"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(r->build_dir) / "last-use"));
}

TEST_F(KernelBuilderTest, ALaterCommitReusesTheBuildDirectoryAndReplacesNothingElse) {
  absl::StatusOr<BuildResult> a = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  Write("notes.txt", "a later change\n");
  const std::string second = Commit("later", "2024-01-02 12:00:00 +0000");
  std::string log;
  absl::StatusOr<BuildResult> b = BuildKernel(Request(), &log);
  ASSERT_TRUE(b.ok()) << b.status() << "\n" << log;
  EXPECT_EQ(b->commit, second);
  EXPECT_TRUE(b->reused_build_dir);
  EXPECT_EQ(b->build_dir, a->build_dir);
  EXPECT_NE(b->release, a->release);
  EXPECT_TRUE(fs::exists(fs::path(b->build_dir) / "src/notes.txt"));
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(Request().store_dir);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store->builds.size(), 2u);
  EXPECT_TRUE(store->problems.empty());
  // The same commit again replaces its entry in place.
  BuildRequest again = Request();
  again.rev = first_;
  absl::StatusOr<BuildResult> c = BuildKernel(again, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->release, a->release);
  EXPECT_EQ(kstore::ReadStore(Request().store_dir)->builds.size(), 2u);
}

// The make targets the fake make ran since the last call.
std::vector<std::string> NewMakeCalls(const std::string& build_dir, size_t* seen) {
  std::vector<std::string> all =
      absl::StrSplit(base::ReadFileOrEmpty((fs::path(build_dir) / "make-calls").string()), '\n',
                     absl::SkipEmpty());
  std::vector<std::string> out(all.begin() + std::min(*seen, all.size()), all.end());
  *seen = all.size();
  return out;
}

TEST_F(KernelBuilderTest, ABisectStepThatChangesNoConfigInputKeepsTheConfig) {
  absl::StatusOr<BuildResult> a = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  size_t seen = 0;
  EXPECT_EQ(NewMakeCalls(a->build_dir, &seen),
            (std::vector<std::string>{"tinyconfig", "olddefconfig", "bzImage", "kernelrelease"}));
  const fs::path dot_config = fs::path(a->build_dir) / "obj/.config";
  const fs::file_time_type configured = fs::last_write_time(dot_config);

  Write("iommu.c", "a change to a source file\n");
  Commit("a source change", "2024-01-02 12:00:00 +0000");
  std::string log;
  absl::StatusOr<BuildResult> b = BuildKernel(Request(), &log);
  ASSERT_TRUE(b.ok()) << b.status() << "\n" << log;
  EXPECT_EQ(NewMakeCalls(b->build_dir, &seen),
            (std::vector<std::string>{"bzImage", "kernelrelease"}));
  EXPECT_NE(log.find("the config's inputs are unchanged"), std::string::npos) << log;
  EXPECT_EQ(fs::last_write_time(dot_config), configured) << "make would run syncconfig";
  // The identity is the commit's all the same, and so is the stored config.
  EXPECT_EQ(b->release, "6.1.0-g" + b->commit.substr(0, 12));
  EXPECT_EQ(base::ReadFileOrEmpty(b->build.ConfigPath()),
            base::ReadFileOrEmpty(a->build.ConfigPath()));

  // A Kconfig change configures again.
  Write("Kconfig", base::ReadFileOrEmpty((tree_ / "Kconfig").string()) + "config EXTRA\n");
  Commit("a Kconfig change", "2024-01-03 12:00:00 +0000");
  absl::StatusOr<BuildResult> c = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(NewMakeCalls(c->build_dir, &seen),
            (std::vector<std::string>{"tinyconfig", "olddefconfig", "bzImage", "kernelrelease"}));

  // So does a .config that is not the one the builder left.
  std::ofstream(dot_config, std::ios::app) << "CONFIG_EXTRA=y\n";
  absl::StatusOr<BuildResult> d = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(NewMakeCalls(d->build_dir, &seen),
            (std::vector<std::string>{"tinyconfig", "olddefconfig", "bzImage", "kernelrelease"}));
  EXPECT_EQ(base::ReadFileOrEmpty(d->build.ConfigPath()).find("CONFIG_EXTRA"), std::string::npos);
}

TEST_F(KernelBuilderTest, TheBenchmarkToolIsBuiltAgainOnlyWhenItsSourcesChange) {
  fs::create_directories(tree_ / "tools/testing/selftests/dma");
  fs::create_directories(tree_ / "include/linux");
  Write("tools/testing/selftests/dma/dma_map_benchmark.c",
        "#include <linux/map_benchmark.h>\nint main(void) { return TOOL_EXIT; }\n");
  Write("include/linux/map_benchmark.h", "#define TOOL_EXIT 0\n");
  Commit("the tool", "2024-01-02 12:00:00 +0000");
  std::string log;
  absl::StatusOr<BuildResult> a = BuildKernel(Request(), &log);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_FALSE(a->build.dma_map_benchmark.empty()) << log;
  EXPECT_NE(log.find(" -static "), std::string::npos) << log;

  Write("notes.txt", "not the tool's\n");
  Commit("notes", "2024-01-03 12:00:00 +0000");
  log.clear();
  absl::StatusOr<BuildResult> b = BuildKernel(Request(), &log);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(log.find(" -static "), std::string::npos) << log;
  EXPECT_NE(log.find("dma_map_benchmark is up to date"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_regular_file(b->build.DmaMapBenchmarkPath()));

  // A header the tool includes changes: it is built again.
  Write("include/linux/map_benchmark.h", "#define TOOL_EXIT 1\n");
  Commit("the header", "2024-01-04 12:00:00 +0000");
  log.clear();
  absl::StatusOr<BuildResult> c = BuildKernel(Request(), &log);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(log.find(" -static "), std::string::npos) << log;
  process::ProcessOptions run;
  run.argv = {c->build.DmaMapBenchmarkPath()};
  absl::StatusOr<process::ProcessResult> exit = process::RunProcess(run);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_FALSE(exit->ok()) << "the tool built from the new header exits 1";
}

TEST_F(KernelBuilderTest, LaterFragmentsWinOverTheMachineAndEachOther) {
  std::ofstream(dir_->path() / "one.config") << "# CONFIG_SMP is not set\nCONFIG_DEBUG_FS=y\n";
  std::ofstream(dir_->path() / "two.config") << "CONFIG_SMP=y\n# CONFIG_DEBUG_FS is not set\n";
  BuildRequest req = Request();
  req.fragments = {(dir_->path() / "one.config").string(), (dir_->path() / "two.config").string()};
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string config = base::ReadFileOrEmpty(r->build.ConfigPath());
  EXPECT_NE(config.find("CONFIG_SMP=y\n"), std::string::npos);
  EXPECT_NE(config.find("# CONFIG_DEBUG_FS is not set\n"), std::string::npos);
  EXPECT_EQ(r->build.fragments, (std::vector<std::string>{"guest.config", "q35-intel-iommu.config",
                                                          "one.config", "two.config"}));
}

TEST_F(KernelBuilderTest, RefusesWithTheDroppedOptions) {
  Write("drops", "CONFIG_INTEL_IOMMU\nCONFIG_DROPPED\n");
  Commit("drops", "2024-01-02 12:00:00 +0000");
  std::ofstream(dir_->path() / "f.config") << "CONFIG_DROPPED=m\n";
  BuildRequest req = Request();
  req.fragments = {(dir_->path() / "f.config").string()};
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find(
                "CONFIG_INTEL_IOMMU=y (from q35-intel-iommu.config); olddefconfig left n, "
                "CONFIG_DROPPED=m (from f.config); olddefconfig left n"),
            std::string::npos)
      << r.status();
  EXPECT_FALSE(fs::exists(Request().store_dir)) << "a refused config wrote no build";
}

// The commit cannot be built with the config: a permanent failure worded
// as a build failure, which a bisect skips (services/analyzer/bisect_driver.h).
TEST_F(KernelBuilderTest, AnOptionTheTreeDoesNotKnowFailsTheBuildNamingIt) {
  std::ofstream(dir_->path() / "f.config")
      << "CONFIG_NO_SUCH_OPTION=y\n# CONFIG_NOR_THIS is not set\n";
  BuildRequest req = Request();
  req.fragments = {(dir_->path() / "f.config").string()};
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message(),
            absl::StrCat("build failed at ", first_,
                         ": config for x86_64: config options the tree's Kconfig does not define: "
                         "CONFIG_NO_SUCH_OPTION (from f.config), CONFIG_NOR_THIS (from f.config)"));
  EXPECT_FALSE(fs::exists(Request().store_dir)) << "a refused config wrote no build";
}

// The tree's Kconfig here has no DMA_MAP_BENCHMARK, as trees before v5.11:
// a kernel for fio builds; one for dma-map-bench fails naming the option.
TEST_F(KernelBuilderTest, TheDmaMapBenchOptionIsAskedOnlyForDmaMapBenchKernels) {
  absl::StatusOr<BuildResult> fio = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(fio.ok()) << fio.status();
  EXPECT_EQ(base::ReadFileOrEmpty(fio->build.ConfigPath()).find("DMA_MAP_BENCHMARK"),
            std::string::npos);
  BuildRequest req = Request();
  req.dma_map_bench = true;
  req.config_id = "dma-map-bench";
  absl::StatusOr<BuildResult> dma = BuildKernel(req, nullptr);
  ASSERT_EQ(dma.status().code(), absl::StatusCode::kFailedPrecondition) << dma.status();
  EXPECT_EQ(dma.status().message(),
            absl::StrCat("build failed at ", first_,
                         ": config for x86_64: config options the tree's Kconfig does not define: "
                         "CONFIG_DMA_MAP_BENCHMARK (from dma-map-bench.config)"));
  // With the option in the tree's Kconfig the same request builds, stored
  // beside the fio kernel under its config id.
  Write("Kconfig",
        base::ReadFileOrEmpty((tree_ / "Kconfig").string()) + "config DMA_MAP_BENCHMARK\n");
  Commit("dma_map_benchmark", "2024-01-02 12:00:00 +0000");
  req.rev = "main";
  dma = BuildKernel(req, nullptr);
  ASSERT_TRUE(dma.ok()) << dma.status();
  EXPECT_NE(base::ReadFileOrEmpty(dma->build.ConfigPath()).find("CONFIG_DMA_MAP_BENCHMARK=y"),
            std::string::npos);
  EXPECT_EQ(fs::path(dma->build.dir).filename().string(), dma->commit + "-x86_64-dma-map-bench");
  EXPECT_EQ(dma->build.kernel_config, "dma-map-bench");
}

// A build job's config: its base text and fragments as given, stored under
// its id (the manifest says it), beside the default config's build.
TEST_F(KernelBuilderTest, AGivenConfigIsBuiltAndStoredUnderItsId) {
  absl::StatusOr<BuildResult> plain = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  BuildRequest req = Request();
  req.base = "mine.config";
  req.base_text = "CONFIG_SMP=y\n";
  req.inline_fragments = {{"lazy.config", "CONFIG_DROPPED=m\n"}};
  req.config_id = "0123456789abcdef";
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string config = base::ReadFileOrEmpty(r->build.ConfigPath());
  EXPECT_NE(config.find("CONFIG_DROPPED=m\n"), std::string::npos) << config;
  EXPECT_EQ(fs::path(r->build.dir).filename().string(), first_ + "-x86_64-0123456789abcdef");
  EXPECT_NE(r->build_dir, plain->build_dir) << "another config, another build directory";
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(req.store_dir);
  ASSERT_TRUE(store.ok());
  ASSERT_EQ(store->builds.size(), 2u) << absl::StrJoin(store->problems, "; ");
  EXPECT_EQ(store->builds[0].kernel_config, "");
  EXPECT_EQ(store->builds[1].kernel_config, "0123456789abcdef");
  req.config_id = "../up";
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// A host platform's kernel: the host fragment alone (no guest.config), and
// the base's modules built in, since the builder builds no modules and a
// kexec'd host has no initramfs; another build directory than the guests'.
TEST_F(KernelBuilderTest, AHostsKernelHasTheHostFragmentAndItsBasesModulesBuiltIn) {
  absl::StatusOr<std::vector<Fragment>> host = MachineFragments(kHostMachine, "x86_64");
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_EQ(host->size(), 1u);
  EXPECT_EQ((*host)[0].name, "host-x86.config");
  std::string kconfig = base::ReadFileOrEmpty((tree_ / "Kconfig").string()) + "config NVME\n";
  for (const ConfigOption& o : ParseConfig((*host)[0].text)) {
    absl::StrAppend(&kconfig, "config ", o.symbol.substr(7), "\n");
  }
  Write("Kconfig", kconfig);
  Commit("host symbols", "2024-01-02 12:00:00 +0000");
  absl::StatusOr<BuildResult> guest = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(guest.ok()) << guest.status();
  BuildRequest req = Request();
  req.machine = kHostMachine;
  req.modules_built_in = true;
  req.base = "lab.config";
  req.base_text = "CONFIG_SMP=y\nCONFIG_NVME=m\n";
  req.config_id = "0123456789abcdef+host";
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string config = base::ReadFileOrEmpty(r->build.ConfigPath());
  EXPECT_NE(config.find("CONFIG_NVME=y\n"), std::string::npos) << config;
  EXPECT_EQ(config.find("CONFIG_NVME=m"), std::string::npos) << config;
  EXPECT_NE(config.find("CONFIG_KEXEC=y\n"), std::string::npos) << config;
  EXPECT_NE(config.find("CONFIG_AMD_IOMMU=y\n"), std::string::npos) << config;
  EXPECT_EQ(config.find("CONFIG_BLK_DEV_INITRD"), std::string::npos) << "no guest.config";
  EXPECT_EQ(r->build.fragments, std::vector<std::string>{"host-x86.config"});
  EXPECT_EQ(r->build.kernel_config, "0123456789abcdef+host");
  EXPECT_EQ(fs::path(r->build.dir).filename().string(),
            r->commit + "-x86_64-0123456789abcdef+host");
  EXPECT_NE(r->build_dir, guest->build_dir);
  // Without modules_built_in the base's modules stay modules (not built).
  req.modules_built_in = false;
  req.config_id = "0123456789abcdef";
  r = BuildKernel(req, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(base::ReadFileOrEmpty(r->build.ConfigPath()).find("CONFIG_NVME=m\n"),
            std::string::npos);
}

TEST_F(KernelBuilderTest, ACommitThatDoesNotBuildFailsWithItsFirstErrorLine) {
  Write("error.txt",
        "  CC      drivers/iommu/dma-iommu.o\n"
        "drivers/iommu/dma-iommu.c: In function 'iommu_dma_unmap_budget':\n"
        "../src/drivers/iommu/dma-iommu.c:612:52: error: expected ';' before '}' token\n"
        "drivers/iommu/dma-iommu.c:700:1: error: second error\n"
        "make[3]: *** [scripts/Makefile.build:250: drivers/iommu/dma-iommu.o] Error 1\n");
  const std::string broken = Commit("broken", "2024-01-02 12:00:00 +0000");
  std::string log;
  absl::StatusOr<BuildResult> r = BuildKernel(Request(), &log);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(
      r.status().message(),
      absl::StrCat("build failed at ", broken,
                   ": drivers/iommu/dma-iommu.c:612:52: error: expected ';' before '}' token"));
  EXPECT_NE(log.find("second error"), std::string::npos);
  EXPECT_FALSE(fs::exists(fs::path(Request().store_dir) / (broken + "-x86_64")));
}

// A try build: the patch applied on the base and committed with the
// builder's identity and the base's date, so the commit, its release and
// its image are the same each time; stored under the try id it is asked to.
TEST_F(KernelBuilderTest, ATryBuildIsItsBaseWithThePatchStoredUnderItsTryId) {
  Write("VERSION", "6.1.1");
  Git({"diff"});
  const std::string patch = last_stdout_;
  Git({"checkout", "--", "."});
  BuildRequest req = Request();
  req.rev = first_;
  req.patch = patch;
  req.store_commit = first_ + "+0123456789ab";
  std::string log;
  absl::StatusOr<BuildResult> r = BuildKernel(req, &log);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log;
  EXPECT_NE(r->commit, first_);
  EXPECT_EQ(r->release, "6.1.1-g" + r->commit.substr(0, 12)) << "the patched VERSION is built";
  absl::StatusOr<kstore::KernelBuild> b = kstore::ReadBuild(r->build.dir);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->commit, req.store_commit);
  EXPECT_EQ(b->dir, (fs::path(req.store_dir) / (req.store_commit + "-x86_64")).string());
  EXPECT_EQ(base::ReadFileOrEmpty(b->ImagePath()),
            absl::StrCat(r->release, " Mon, 1 Jan 2024 12:00:00 +0000 farm@iommu-farm\n"));

  // The base again, then the try again: the same try commit.
  ASSERT_TRUE(BuildKernel(Request(), nullptr).ok());
  absl::StatusOr<BuildResult> again = BuildKernel(req, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->commit, r->commit);

  req.patch = "--- a/nothing\n+++ b/nothing\n@@ -1 +1 @@\n-a\n+b\n";
  absl::StatusOr<BuildResult> bad = BuildKernel(req, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_NE(bad.status().message().find("the patch does not apply to " + first_), std::string::npos)
      << bad.status();
  req.store_commit = "../escape";
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// A patch that applies but does not compile fails the try build with the
// compiler's first error, at the try id the farm's jobs know (the patched
// commit's own sha exists only in the build directory).
TEST_F(KernelBuilderTest, ATryThatDoesNotBuildFailsAtItsTryIdWithItsFirstErrorLine) {
  Write("error.txt", "drivers/iommu/dma-iommu.c:697:48: error: expected ';' before 'if'\n");
  Git({"add", "-N", "error.txt"});
  Git({"diff"});
  const std::string patch = last_stdout_;
  Git({"rm", "-q", "--cached", "error.txt"});
  fs::remove(tree_ / "error.txt");
  BuildRequest req = Request();
  req.rev = first_;
  req.patch = patch;
  req.store_commit = first_ + "+0123456789ab";
  absl::StatusOr<BuildResult> r = BuildKernel(req, nullptr);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message(),
            absl::StrCat("build failed at ", req.store_commit,
                         ": drivers/iommu/dma-iommu.c:697:48: error: expected ';' before 'if'"));
  EXPECT_FALSE(fs::exists(fs::path(req.store_dir) / (req.store_commit + "-x86_64")));
}

// A try build of a mail series (git format-patch's mbox): the patches
// apply in order, the second over the first; a series whose second patch
// does not apply names it.
TEST_F(KernelBuilderTest, ATrySeriesAppliesInOrderAndNamesThePatchThatDoesNot) {
  auto mail = [](const std::string& hash, const std::string& subject, const std::string& diff) {
    return "From " + hash + " Mon Sep 17 00:00:00 2001\nSubject: " + subject + "\n\nWhy.\n---\n" +
           diff + "-- \n2.39.5\n\n";
  };
  Write("VERSION", "6.1.1");
  Git({"diff"});
  const std::string first = last_stdout_;
  Git({"add", "-A"});
  Write("VERSION", "6.1.2");
  Git({"diff"});
  const std::string second = last_stdout_;  // needs the first applied
  Git({"reset", "-q", "--hard"});
  BuildRequest req = Request();
  req.rev = first_;
  req.patch = mail(std::string(40, 'a'), "[PATCH 1/2] one", first) +
              mail(std::string(40, 'b'), "[PATCH 2/2] two", second);
  req.store_commit = first_ + "+aaaaaaaaaaaa";
  std::string log;
  absl::StatusOr<BuildResult> r = BuildKernel(req, &log);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << log;
  EXPECT_EQ(r->release, "6.1.2-g" + r->commit.substr(0, 12)) << "both patches built";

  req.patch = mail(std::string(40, 'a'), "[PATCH 1/2] one", first) +
              mail(std::string(40, 'b'), "[PATCH 2/2] two", first);  // the first again
  req.store_commit = first_ + "+bbbbbbbbbbbb";
  absl::StatusOr<BuildResult> bad = BuildKernel(req, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_NE(bad.status().message().find("patch 2/2 ([PATCH 2/2] two) does not apply to "),
            std::string::npos)
      << bad.status();
}

TEST_F(KernelBuilderTest, WaitsForTheBuildDirectoryLock) {
  absl::StatusOr<BuildResult> a = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<DirLock> held = DirLock::Acquire(a->build_dir + ".lock", absl::ZeroDuration());
  ASSERT_TRUE(held.ok());
  BuildRequest req = Request();
  req.timeout = absl::Milliseconds(300);
  absl::StatusOr<BuildResult> b = BuildKernel(req, nullptr);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
}

TEST_F(KernelBuilderTest, EvictsTheLeastRecentlyUsedBuildDirectoryPastTheBound) {
  absl::StatusOr<BuildResult> a = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  std::ofstream(dir_->path() / "f.config") << "CONFIG_SMP=y\n";
  BuildRequest req = Request();
  req.fragments = {(dir_->path() / "f.config").string()};  // another config: another directory
  req.cache_max_bytes = 1;
  absl::StatusOr<BuildResult> b = BuildKernel(req, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->build_dir, a->build_dir);
  EXPECT_EQ(b->evicted, std::vector<std::string>{a->build_dir});
  EXPECT_FALSE(fs::exists(a->build_dir));
  EXPECT_TRUE(fs::exists(b->build_dir));
  // The evicted configuration builds again from scratch.
  absl::StatusOr<BuildResult> c = BuildKernel(Request(), nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->reused_build_dir);
}

TEST_F(KernelBuilderTest, RefusesBadRequests) {
  BuildRequest req = Request();
  req.rev = "no-such-branch";
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req = Request();
  req.machine = "virt-smmuv3";  // aarch64
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req = Request();
  req.fragments = {"/nonexistent.config"};
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req = Request();
  req.arch = "riscv64";
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  req = Request();
  req.make = (dir_->path() / "no-make").string();
  EXPECT_EQ(BuildKernel(req, nullptr).status().code(), absl::StatusCode::kNotFound);
}

TEST(FirstErrorLine, CompilerThenMakeThenLastLine) {
  EXPECT_EQ(FirstErrorLine("a\nb.c:1:2: warning: x\nb.c:3:4: fatal error: y.h: No such file\n"),
            "b.c:3:4: fatal error: y.h: No such file");
  EXPECT_EQ(FirstErrorLine("drivers/iommu/Kconfig:12: syntax error\nmake: *** Error 1\n"),
            "drivers/iommu/Kconfig:12: syntax error");
  EXPECT_EQ(FirstErrorLine("ld: vmlinux.o: undefined reference to `foo'\n"),
            "ld: vmlinux.o: undefined reference to `foo'");
  EXPECT_EQ(FirstErrorLine("x\nmake[1]: *** [Makefile:2] Error 2\nmake: *** Error 2\n"),
            "make[1]: *** [Makefile:2] Error 2");
  EXPECT_EQ(FirstErrorLine("one\ntwo\n\n"), "two");
  EXPECT_EQ(FirstErrorLine(""), "");
}

}  // namespace
}  // namespace farm::kbuild
