// Whole farm, kernels built on demand: PostgreSQL, the real farm-scheduler
// (in-process) and a spawned farm-agent offering `kbuild` (the tree of
// scripts/make-test-kernel-tree) and fio under its vm provider, whose kernel
// store starts empty. A fio matrix over the tree's base commit, the next
// commit and the commit that does not compile, none of them prebuilt, gets
// one build job per commit; each commit's fio job runs in a q35 guest booted
// from its own build (its guest release is the build's, -g<sha>), and the
// broken commit's job fails with the build's "build failed at" reason.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/base/file.h"
#include "lib/client/client.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"
#include "proto/try_commit.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

class KbuildFarmPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<kbuild::TestTree> tree =
        kbuild::MakeTestTree(std::string(FARM_SOURCE_DIR) + "/scripts/make-test-kernel-tree");
    ASSERT_TRUE(tree.ok()) << tree.status();
    tree_ = *std::move(tree);
    ASSERT_GE(tree_.commits.size(), 3u);
    absl::StatusOr<std::string> initramfs = BuildGuestRoot(FARM_GUEST_ROOT_DIR);
    ASSERT_TRUE(initramfs.ok()) << initramfs.status();

    root_ = TestDir();
    fs::create_directories(root_ + "/allowed");
    fs::create_directories(root_ + "/store");

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();
    LoadCatalog();

    absl::Status up;
    agent_ = StartAgent({.name = "builder",
                         .slots = 2,
                         .capabilities = "kbuild,fio",
                         .drain_timeout = absl::Seconds(10),
                         .flags = {"--kbuild-tree", "test-tree=" + tree_.dir, "--kernel-store",
                                   root_ + "/store", "--vm-initramfs", *initramfs, "--vm-accel",
                                   "tcg", "--allow-dir", root_ + "/allowed"}},
                        &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << agent_->Out();
  }

  void TearDown() override {
    if (agent_) {
      EXPECT_EQ(agent_->Terminate(), 0) << agent_->Out();
    }
    agent_.reset();
    FarmTest::TearDown();
  }

  // The base commit, the next one and the broken one.
  std::vector<std::string> Commits() const {
    return {tree_.commits[0], tree_.commits[1], tree_.broken};
  }

  void LoadCatalog() {
    std::string yaml = "catalog: test-tree\ncommits:\n";
    for (const std::string& c : Commits()) {
      absl::StrAppend(&yaml, "  - id: \"", c, "\"\n    subject: \"test tree ", c.substr(0, 12),
                      "\"\n");
    }
    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::LoadCatalogRequest load;
    load.set_yaml(yaml);
    load.set_source_name("kbuild_farm_pgtest");
    pb::LoadCatalogResponse loaded;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->LoadCatalog(ctx.get(), load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  std::string Spec() const {
    std::string list;
    for (const std::string& c : Commits()) absl::StrAppend(&list, list.empty() ? "" : ", ", c);
    return absl::StrCat(
        "name: built\ncatalog: test-tree\nplatform: q35-intel-iommu\ncommits: [", list,
        "]\nmodes: [strict]\nworkloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k, "
        "iodepth: 4, ioengine: libaio, direct: 1, runtime: 2, time_based: 1}\n",
        "repeats: 1\nexecutor: fio\n");
  }

  kbuild::TestTree tree_;
  std::string root_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(KbuildFarmPgTest, EveryCommitIsBuiltOnceAndItsJobRunsOnItsOwnKernel) {
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  auto dry = commands.SubmitSpec(Spec(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  ASSERT_GE(dry->warnings_size(), 1);
  EXPECT_EQ(dry->warnings(dry->warnings_size() - 1),
            "kernels to build first: 3 new, 0 already built or queued");

  auto submitted = commands.SubmitSpec(Spec(), false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(submitted->build_job_ids_size(), 3);
  ASSERT_NE(submitted->build_matrix_id(), 0);
  auto progress =
      commands.WaitForMatrix(submitted->matrix().id(), [](const pb::MatrixProgress&) {});
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << agent_->Out();
  EXPECT_EQ(progress->state(), pb::MATRIX_STATE_FAILED) << "the broken commit's job fails";
  EXPECT_EQ(progress->counts().succeeded(), 2) << agent_->Out();
  EXPECT_EQ(progress->counts().failed(), 1) << agent_->Out();

  auto results = commands.FetchResults(submitted->matrix().id(), /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  std::map<std::string, std::string> release_of;  // commit -> guest kernel release
  for (const pb::Result& r : *results) {
    release_of[r.job().commit_id()] = r.host().kernel_release();
    EXPECT_EQ(r.host().iommu_mode(), pb::IOMMU_MODE_STRICT) << r.host().iommu_detail();
    EXPECT_EQ(r.host().guest().machine_model(), "q35+intel-iommu");
    EXPECT_NE(r.job().waits_for_job(), 0);
  }
  ASSERT_EQ(release_of.size(), 2u);
  for (const std::string& c : {tree_.commits[0], tree_.commits[1]}) {
    EXPECT_TRUE(absl::EndsWith(release_of[c], "-g" + c.substr(0, 12)))
        << c << ": " << release_of[c];
  }

  // The build matrix: two builds succeeded, the broken one failed with its error line.
  auto builds =
      commands.WaitForMatrix(submitted->build_matrix_id(), [](const pb::MatrixProgress&) {});
  ASSERT_TRUE(builds.ok()) << builds.status();
  EXPECT_EQ(builds->counts().succeeded(), 2);
  EXPECT_EQ(builds->counts().failed(), 1);
  pqxx::connection c(DbUri());
  pqxx::work w(c);
  pqxx::result failed =
      w.exec_params("SELECT failure_reason FROM jobs WHERE matrix_id = $1 AND state = 4",
                    submitted->matrix().id());
  ASSERT_EQ(failed.size(), 1u);
  const std::string reason = failed[0][0].as<std::string>();
  EXPECT_TRUE(absl::StrContains(reason, "build failed at " + tree_.broken)) << reason;
  EXPECT_TRUE(absl::StrContains(reason, "drivers/iommu/dma-iommu.c")) << reason;

  // A second matrix over the same commits: the agent offers the two built
  // kernels now; only the broken commit would be built (again).
  auto again = commands.SubmitSpec(Spec(), /*dry_run=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_GE(again->warnings_size(), 1);
  EXPECT_EQ(again->warnings(again->warnings_size() - 1),
            "kernels to build first: 1 new, 0 already built or queued");
}

// `farmctl try SPEC --patch FILE`: the planted commit's change as a patch
// file on the base. The farm builds the base and the base + patch (its try
// commit, stored under the try id), runs the fio job on each in its own
// guest and answers with the comparison.
TEST_F(KbuildFarmPgTest, ATryPatchIsBuiltOnItsBaseAndComparedWithIt) {
  process::ProcessOptions diff;
  diff.argv = {"git", "-C", tree_.dir, "diff", tree_.planted + "^", tree_.planted};
  absl::StatusOr<process::ProcessResult> d = process::RunProcess(diff);
  ASSERT_TRUE(d.ok() && d->ok()) << (d.ok() ? d->stderr_data : d.status().ToString());
  const std::string patch = d->stdout_data;
  ASSERT_FALSE(patch.empty());
  std::string spec = Spec();
  const size_t from = spec.find("commits: [") + 10;
  spec.replace(from, spec.find(']', from) - from, tree_.commits[0]);
  ASSERT_TRUE(base::WriteFile(root_ + "/try.yaml", spec).ok());
  ASSERT_TRUE(base::WriteFile(root_ + "/try.patch", patch).ok());

  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const int rc =
      commands.RunTry(root_ + "/try.yaml", {}, "", root_ + "/try.patch", cli::OutputFormat::kTable);
  ASSERT_EQ(rc, 0) << err.str() << "\n" << agent_->Out();
  std::printf("%s", out.str().c_str());
  const std::string try_id = proto::TryCommitId(tree_.commits[0], patch);
  EXPECT_TRUE(absl::StrContains(out.str(), try_id.substr(tree_.commits[0].size()))) << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "iops")) << out.str();

  pqxx::connection c(DbUri());
  pqxx::work w(c);
  pqxx::result built = w.exec_params(
      "SELECT count(*) FROM jobs WHERE commit_id = $1 AND executor = $2 AND state = 3", try_id,
      static_cast<int>(pb::EXECUTOR_KBUILD));
  EXPECT_EQ(built[0][0].as<int>(), 1) << "one build of the try commit";
  pqxx::result matrix =
      w.exec("SELECT id FROM matrices WHERE name LIKE 'built (try +%' ORDER BY id DESC LIMIT 1");
  ASSERT_EQ(matrix.size(), 1u);
  auto results = commands.FetchResults(matrix[0][0].as<int64_t>(), /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  std::map<std::string, std::string> release_of;  // commit -> guest kernel release
  for (const pb::Result& r : *results) release_of[r.job().commit_id()] = r.host().kernel_release();
  ASSERT_EQ(release_of.size(), 2u) << agent_->Out();
  ASSERT_EQ(release_of.count(try_id), 1u);
  EXPECT_NE(release_of[try_id], release_of[tree_.commits[0]]) << "its own kernel";
  EXPECT_TRUE(fs::exists(root_ + "/store/" + try_id + "-x86_64"));
}

}  // namespace
}  // namespace farm
