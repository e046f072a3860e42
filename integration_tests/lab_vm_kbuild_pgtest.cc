// The VM lab host on kernels the farm builds for it. The lab host
// registers first (its agent says the platform's architecture); a matrix of
// two commits of the test tree (scripts/make-test-kernel-tree) x strict and
// passthrough on its platform, with the lab's kernel config
// (agent/kernels/lab/lab-vm.config on tinyconfig), has the scheduler plan
// host builds (`<id>+host`: the host fragment, everything built in), which a
// kbuild agent on this machine builds; the lab host's store then holds them
// (a shared store, as a lab runs it: here the guest's disk is made again with
// the builds in it) and it kexecs into each built kernel with the job's mode,
// proves the mode, runs fio and reports. Long: the first build of the lab
// config is a cold one (tens of minutes on two cores); the second commit's is
// incremental.
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/matrix.h"
#include "gtest/gtest.h"
#include "integration_tests/lab_vm_fixture.h"
#include "integration_tests/test_tree_fixture.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/kbuild/test_tree.h"
#include "lib/kstore/kernel_store.h"
#include "proto/names.h"

namespace farm::lab_vm {
namespace {

constexpr char kCatalog[] = "test-tree";

// The host builds (kernel_config ending in "+host") in `store`, by commit.
std::map<std::string, kstore::KernelBuild> HostBuilds(const std::string& store) {
  std::map<std::string, kstore::KernelBuild> out;
  absl::StatusOr<kstore::StoreListing> listing = kstore::ReadStore(store);
  if (!listing.ok()) return out;
  for (const kstore::KernelBuild& b : listing->builds) {
    if (absl::EndsWith(b.kernel_config, "+host")) out[b.commit] = b;
  }
  return out;
}

class LabVmKbuildPgTest : public LabVmPgTest {
 protected:
  void SetUp() override {
    LabVmPgTest::SetUp();
    if (HasFatalFailure()) return;
    testing::MakeTestTreeOrFail(&tree_);
    if (HasFatalFailure()) return;
    store_ = TestDir() + "/store";
    fs::create_directories(store_);
  }

  void TearDown() override {
    if (builder_) builder_->Terminate();
    builder_.reset();
    LabVmPgTest::TearDown();
  }

  // The guest boots, its agent registers (platform lab, x86_64), and the
  // guest is switched off: the scheduler keeps what the agent reported.
  void RegisterTheLabHost() {
    BuildImage();
    if (HasFatalFailure()) return;
    BootGuest();
    const absl::Time deadline = absl::Now() + absl::Minutes(5);
    while (Sql(absl::StrCat("SELECT count(*) FROM agents WHERE name = '", kAgentName, "'")) == 0) {
      ASSERT_LT(absl::Now(), deadline) << "the lab host did not register:\n" << Console();
      ASSERT_TRUE(qemu_->Alive()) << Console();
      absl::SleepFor(absl::Seconds(2));
    }
    qemu_->Terminate();
    qemu_.reset();
  }

  // A kbuild agent on this machine, building the tree's commits into store_.
  void StartBuilder() {
    absl::Status up;
    builder_ =
        FarmTest::StartAgent({.name = "builder",
                              .capabilities = "kbuild",
                              .drain_timeout = absl::Seconds(10),
                              .flags = {"--kbuild-tree", absl::StrCat(kCatalog, "=", tree_.dir),
                                        "--kernel-store", store_}},
                             &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << builder_->Out();
  }

  // Waits for a host build of each of `commits` in store_.
  std::map<std::string, kstore::KernelBuild> AwaitBuilds(const std::vector<std::string>& commits) {
    const absl::Time start = absl::Now(), deadline = start + absl::Minutes(40);
    absl::Time said = start;
    for (;;) {
      std::map<std::string, kstore::KernelBuild> builds = HostBuilds(store_);
      bool all = true;
      for (const std::string& c : commits) all = all && builds.count(c) > 0;
      if (all) {
        std::cout << "lab vm kbuild: both host builds in "
                  << absl::ToDoubleSeconds(absl::Now() - start) << " s\n";
        return builds;
      }
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "no host build of every commit after 40 min:\n" << builder_->Out();
        return {};
      }
      if (absl::Now() - said > absl::Minutes(2)) {
        said = absl::Now();
        std::cout << "lab vm kbuild: building, " << builds.size() << " of " << commits.size()
                  << " done after " << absl::ToDoubleSeconds(said - start) << " s\n";
      }
      absl::SleepFor(absl::Seconds(5));
    }
  }

  kbuild::TestTree tree_;
  std::string store_;
  std::unique_ptr<testing::ChildProcess> builder_;
};

TEST_F(LabVmKbuildPgTest, TwoBuiltCommitsTimesStrictAndPassthroughRunThroughRealKexecReboots) {
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  // Two commits of main that build: its first and its last.
  const std::vector<std::string> commits = {tree_.commits.front(), tree_.commits.back()};
  ASSERT_EQ(
      commands.RunCatalogImportGit(
          tree_.dir, absl::StrCat(tree_.commits.front(), "..", tree_.commits.back()), kCatalog),
      0)
      << err.str();
  RegisterTheLabHost();
  if (HasFatalFailure()) return;
  StartBuilder();
  if (HasFatalFailure()) return;

  // The lab's config, read as `farmctl submit` reads a spec's files.
  absl::StatusOr<std::string> spec = cli::ReadKernelConfigFiles(
      Spec(kCatalog, commits, "[strict, passthrough]",
           "kernel_config: {base: tinyconfig, fragments: [agent/kernels/lab/lab-vm.config]}\n"),
      std::string(FARM_SOURCE_DIR) + "/lab-vm-kbuild.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const int64_t matrix_id = SubmitYaml(commands, *spec);
  ASSERT_NE(matrix_id, 0);
  const std::map<std::string, kstore::KernelBuild> builds = AwaitBuilds(commits);
  ASSERT_EQ(builds.size(), 2u);

  const absl::Time booted = absl::Now();
  BuildImage({builds.begin()->second.dir, builds.rbegin()->second.dir});
  if (HasFatalFailure()) return;
  BootGuest();
  // Room for one hung kexec: the 6-minute hold, the power cycle, the boot again.
  const pb::Matrix done = WaitForMatrix(matrix_id, absl::Minutes(25));
  ASSERT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << done.ShortDebugString();
  EXPECT_EQ(done.counts().failed(), 0) << done.ShortDebugString();

  auto results = commands.FetchResults(matrix_id, /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  std::set<std::string> cells;
  std::vector<pb::Result> fio;
  for (const pb::Result& r : *results) {
    if (r.job().executor() != pb::EXECUTOR_FIO) continue;
    fio.push_back(r);
    const std::string mode = proto::ModeName(r.job().mode());
    const std::string cell = absl::StrCat(r.job().commit_id(), "/", mode);
    cells.insert(cell);
    ASSERT_EQ(builds.count(r.job().commit_id()), 1u) << cell;
    const kstore::KernelBuild& build = builds.at(r.job().commit_id());
    EXPECT_EQ(r.agent(), kAgentName) << cell;
    // The farm's build of the job's commit, for this host, in the job's mode.
    EXPECT_EQ(r.host().kernel_release(), build.release) << cell;
    EXPECT_TRUE(absl::EndsWith(build.kernel_config, "+host")) << build.dir;
    EXPECT_EQ(r.host().iommu_mode(), r.job().mode()) << cell << ": " << r.host().iommu_detail();
    ASSERT_TRUE(r.host().has_guest()) << cell;
    EXPECT_EQ(r.host().guest().provider(), "kexec") << cell;
    EXPECT_EQ(r.host().guest().domain_type(), mode == "strict" ? "DMA" : "identity") << cell;
    double iops = 0;
    for (const pb::Sample& s : r.samples()) {
      if (s.metric() == "iops" && s.phase() == "read") iops = s.value();
    }
    EXPECT_GT(iops, 0) << cell;
    std::cout << "lab vm kbuild result: " << cell << " on " << r.host().kernel_release() << " ("
              << r.host().iommu_detail() << "): " << iops << " read IOPS\n";
  }
  EXPECT_EQ(cells.size(), 4u);
  EXPECT_EQ(KexecsStarted(Console()), 4 + BootedAgain(fio)) << Console();
  std::cout << "lab vm kbuild: guest start to the last result "
            << absl::ToDoubleSeconds(absl::Now() - booted) << " s\n";
}

}  // namespace
}  // namespace farm::lab_vm
