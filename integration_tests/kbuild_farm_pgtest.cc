// Whole farm, kernels built on demand: PostgreSQL, the real farm-scheduler
// (in-process) and a spawned farm-agent offering `kbuild` (the tree of
// scripts/make-test-kernel-tree) and fio under its vm provider, whose kernel
// store starts empty. A fio matrix over the tree's base commit, the next
// commit and the commit that does not compile, none of them prebuilt, gets
// one build job per commit; each commit's fio job runs in a q35 guest booted
// from its own build (its guest release is the build's, -g<sha>), and the
// broken commit's job fails with the build's "build failed at" reason.
// KbuildTryPgTest: the same farm running dma-map-bench, where `farmctl try
// --patch` of the tree's planted commit as mail answers with compare's
// verdicts, and a try whose patch cannot be measured answers why.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/compare.h"
#include "cli/git_import.h"
#include "gtest/gtest.h"
#include "integration_tests/test_tree_fixture.h"
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
    testing::MakeTestTreeOrFail(&tree_);
    if (HasFatalFailure()) return;
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
    const Runner runner = BuilderRunner();
    agent_ = StartAgent({.name = "builder",
                         .slots = 2,
                         .capabilities = "kbuild," + runner.executor,
                         .drain_timeout = absl::Seconds(10),
                         .flags = {"--kbuild-tree", "test-tree=" + tree_.dir, "--kernel-store",
                                   root_ + "/store", "--vm-initramfs", *initramfs, "--vm-accel",
                                   runner.accel, "--allow-dir", root_ + "/allowed"}},
                        &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << agent_->Out();
  }

  // What the builder agent runs on the kernels it builds, and under which
  // QEMU accel.
  struct Runner {
    std::string executor, accel;
  };
  virtual Runner BuilderRunner() const { return {"fio", "tcg"}; }
  // The commits of the catalog the scheduler resolves specs against.
  virtual std::vector<std::string> CatalogCommits() const { return Commits(); }

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
    for (const std::string& c : CatalogCommits()) {
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

// The same farm with the kernel's own dma_map_benchmark in q35 guests under
// tcg-icount (a guest's figures follow its instructions, so two kernels
// are compared by what they execute, not by the host's load), on a
// catalog of one commit: the planted commit's parent, the base of a try
// of the planted commit as mail.
class KbuildTryPgTest : public KbuildFarmPgTest {
 protected:
  Runner BuilderRunner() const override { return {"dma-map-bench", "tcg-icount"}; }
  std::vector<std::string> CatalogCommits() const override { return {Base()}; }

  // The planted commit's parent on main, "" when the tree has none.
  std::string Base() const {
    const auto planted = std::find(tree_.commits.begin(), tree_.commits.end(), tree_.planted);
    return planted == tree_.commits.begin() || planted == tree_.commits.end() ? "" : *(planted - 1);
  }

  std::string TrySpec(const std::string& modes, int repeats) const {
    return absl::StrCat("name: try-dmb\ncatalog: test-tree\nplatform: q35-intel-iommu\ncommits: [",
                        Base(), "]\nmodes: [", modes,
                        "]\nworkloads:\n  - name: dma-map-bench\n    params: {seconds: 1}\n"
                        "repeats: ",
                        repeats, "\nexecutor: dma-map-bench\n");
  }

  // `git format-patch -1 --stdout <planted>`: the planted commit as mail.
  std::string PlantedMail() const {
    absl::StatusOr<std::string> mail =
        cli::RunProgram({"git", "-C", tree_.dir, "format-patch", "-1", "--stdout", tree_.planted});
    EXPECT_TRUE(mail.ok()) << mail.status();
    return mail.ok() ? *mail : "";
  }

  // farmctl try SPEC --patch FILE with `patch` as FILE: its exit code, and
  // its standard output and error in `out` and `err`.
  int Try(const std::string& spec, const std::string& patch, cli::OutputFormat format,
          std::string* out, std::string* err, const std::string& html = "") {
    EXPECT_TRUE(base::WriteFile(root_ + "/try.yaml", spec).ok());
    EXPECT_TRUE(base::WriteFile(root_ + "/try.patch", patch).ok());
    std::ostringstream o, e;
    cli::Commands commands(client_, o, e);
    const int rc = commands.RunTry(root_ + "/try.yaml", {}, "", root_ + "/try.patch", format, html);
    *out = o.str();
    *err = e.str();
    return rc;
  }

  int Matrices() {
    pqxx::connection c(DbUri());
    pqxx::work w(c);
    return w.exec("SELECT count(*) FROM matrices")[0][0].as<int>();
  }
};

// The planted commit (an extra full IOTLB flush after each strict unmap)
// as a git format-patch mail on its parent: the try answers, from
// compare's verdict, that it makes strict unmap latency worse, with an
// interval above zero, and changes no primary series in passthrough, where
// no IOTLB is flushed; in the table, the JSON and the HTML page.
TEST_F(KbuildTryPgTest, APatchMailOnDmaMapBenchIsWorseInStrictAndNothingInPassthrough) {
  ASSERT_FALSE(Base().empty()) << "the planted commit has no parent on main";
  const std::string mail = PlantedMail();
  ASSERT_TRUE(absl::StartsWith(mail, "From " + tree_.planted)) << mail;
  const absl::Time start = absl::Now();
  std::string table, err;
  const int rc = Try(TrySpec("strict, passthrough", 5), mail, cli::OutputFormat::kTable, &table,
                     &err, root_ + "/try.html");
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(rc, 0) << err << "\n" << agent_->Out();
  std::printf("%s", table.c_str());
  std::printf("try of the planted mail, submit to answer: %s\n",
              absl::FormatDuration(absl::Trunc(took, absl::Seconds(1))).c_str());

  // The table: one verdict per (mode, metric) line.
  int strict_unmap = 0, passthrough = 0;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (absl::StrContains(line, " strict ") && absl::StrContains(line, " unmap_latency_mean ")) {
      ++strict_unmap;
      EXPECT_TRUE(absl::EndsWith(absl::StripTrailingAsciiWhitespace(line), "worse")) << line;
    }
    if (absl::StrContains(line, " passthrough ")) {
      ++passthrough;
      EXPECT_TRUE(absl::EndsWith(absl::StripTrailingAsciiWhitespace(line), "-")) << line;
    }
  }
  EXPECT_EQ(strict_unmap, 1) << table;
  EXPECT_GE(passthrough, 1) << table;

  // The JSON: the same answer, every series of both modes.
  const std::string try_id = proto::TryCommitId(Base(), mail);
  pqxx::connection c(DbUri());
  pqxx::work w(c);
  pqxx::result matrix =
      w.exec("SELECT id FROM matrices WHERE name LIKE 'try-dmb (try +%' ORDER BY id DESC LIMIT 1");
  ASSERT_EQ(matrix.size(), 1u);
  std::ostringstream out, cerr;
  cli::Commands commands(client_, out, cerr);
  // farmctl try -o json prints this (RunTry answers with RunCompare).
  ASSERT_EQ(cli::RunCompare(commands, matrix[0][0].as<int64_t>(), 0, Base(), try_id,
                            cli::OutputFormat::kJson),
            0)
      << cerr.str();
  const nlohmann::json answer = nlohmann::json::parse(out.str());
  int strict_worse = 0, passthrough_series = 0;
  for (const nlohmann::json& series : answer["series"]) {
    const std::string mode = series["mode"], metric = series["metric"];
    if (mode == "strict" && metric == "unmap_latency_mean") {
      ++strict_worse;
      EXPECT_EQ(series["verdict"], "worse") << series.dump();
      EXPECT_EQ(series["n_a"], 5);
      EXPECT_EQ(series["n_b"], 5);
      ASSERT_TRUE(series["ci_lo"].is_number()) << series.dump();
      EXPECT_GT(series["ci_lo"].get<double>(), 0) << series.dump();
    }
    if (mode == "passthrough" && series["primary"].get<bool>()) {
      ++passthrough_series;
      EXPECT_FALSE(series["changed"].get<bool>()) << series.dump();
    } else if (mode == "passthrough" && series["changed"].get<bool>()) {
      std::printf("passthrough, a secondary series changed: %s\n", series.dump().c_str());
    }
  }
  EXPECT_EQ(strict_worse, 1) << out.str();
  EXPECT_GE(passthrough_series, 1) << out.str();
  const std::string html = base::ReadFileOrEmpty(root_ + "/try.html");
  EXPECT_TRUE(absl::StrContains(html, "<td>worse</td>")) << html.substr(0, 2000);
}

// What a try answers when it cannot measure the patch: a binary patch or
// one past the bound is refused before a matrix exists; a patch that does
// not apply is named with git's reason (file and line of the hunk); one
// that does not compile with the compiler's first error at the try id.
TEST_F(KbuildTryPgTest, ATryThatCannotBeMeasuredSaysWhy) {
  ASSERT_FALSE(Base().empty()) << "the planted commit has no parent on main";
  const std::string mail = PlantedMail();
  const std::string spec = TrySpec("strict", 1);
  std::string out, err;
  const int before = Matrices();
  EXPECT_NE(Try(spec,
                mail + "diff --git a/fw.bin b/fw.bin\nnew file mode 100644\nindex "
                       "0000000..e69de29\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n",
                cli::OutputFormat::kTable, &out, &err),
            0);
  EXPECT_TRUE(absl::StrContains(err, "a binary diff of fw.bin")) << err;
  EXPECT_NE(Try(spec, mail + std::string(proto::kMaxPatchBytes, '+'), cli::OutputFormat::kTable,
                &out, &err),
            0);
  EXPECT_TRUE(absl::StrContains(err, "over the farm's bound")) << err;
  EXPECT_EQ(Matrices(), before) << "nothing submitted";

  // A context line the base does not have.
  std::string stale = mail;
  const std::string context = " \t\tiommu_iotlb_sync(domain, &iotlb_gather);\n";
  ASSERT_NE(stale.find(context), std::string::npos) << mail;
  stale.replace(stale.find(context), context.size(), " \t\tiommu_iotlb_sync(domain, &gather);\n");
  ASSERT_NE(Try(spec, stale, cli::OutputFormat::kTable, &out, &err), 0) << out;
  std::printf("%s", err.c_str());
  EXPECT_TRUE(absl::StrContains(err, "was not measured")) << err;
  EXPECT_TRUE(absl::StrContains(err, "the patch does not apply to " + Base() +
                                         ": error: patch failed: drivers/iommu/dma-iommu.c:"))
      << err;

  // The added call without its semicolon.
  std::string broken = mail;
  const std::string added = "+\t\tiommu_flush_iotlb_all(domain);\n";
  ASSERT_NE(broken.find(added), std::string::npos) << mail;
  broken.replace(broken.find(added), added.size(), "+\t\tiommu_flush_iotlb_all(domain)\n");
  ASSERT_NE(Try(spec, broken, cli::OutputFormat::kTable, &out, &err), 0) << out;
  std::printf("%s", err.c_str());
  EXPECT_TRUE(absl::StrContains(err, "build failed at " + proto::TryCommitId(Base(), broken) +
                                         ": drivers/iommu/dma-iommu.c:"))
      << err;
  EXPECT_TRUE(absl::StrContains(err, "error:")) << err;
}

}  // namespace
}  // namespace farm
