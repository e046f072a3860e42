// A real kernel regression found, confirmed and bisected by the farm with
// nobody telling it where: PostgreSQL, the real farm-scheduler and the
// analyzer engine (in-process), Alertmanager, and a spawned farm-agent that
// builds kernels from scripts/make-test-kernel-tree's tree (`kbuild`, an
// empty kernel store) and runs the kernel's own dma_map_benchmark in q35 +
// intel-iommu guests under tcg-icount.
//
// The tree's catalog is imported as a user would (farmctl catalog
// import-git). A matrix of its two endpoints x strict x dma-map-bench with
// `analysis.bisect` must end with the planted commit (an extra full IOTLB
// flush after each strict unmap) as the culprit of the unmap-latency
// regression, confirmed by dma-map-bench on those kernels, every step's
// kernel built on demand, and an alert in Alertmanager naming the culprit.
// The same matrix in passthrough, where no IOTLB is flushed, finds no
// primary regression. On branch `merged` (a topic branch merged into main,
// with a second planted commit inside it) the whole history graph is
// imported and the regression between the fork and the merge is bisected,
// as git bisect would, to the commit inside the merged branch. On branch
// `strict-forced` a commit that makes every default domain strict is found
// as a mode_changed finding of a passthrough matrix and bisected to. On
// branch small-cost a strict unmap change of about 3% is found and bisected
// exactly. An emulator finding over the tree's catalog is confirmed with
// dma-map-bench on kernels built for it and bisected on real kernels to the
// planted commit. Built with FARM_REAL_BISECT_ARM64, the first case runs on
// aarch64 kernels on virt + SMMUv3 under plain TCG, in strict and lazy.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/git_import.h"
#include "cli/regressions.h"
#include "gtest/gtest.h"
#include "integration_tests/analyzer_ticks.h"
#include "integration_tests/test_tree_fixture.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/kbuild/test_tree.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "proto/names.h"
#include "scheduler/server.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

constexpr char kCatalog[] = "test-tree";
// Built with FARM_REAL_BISECT_ARM64 (its own binary): aarch64 kernels on
// virt + SMMUv3, where lazy is real, under plain TCG (QEMU's aarch64 has no
// instruction-timed runs here: the guest's figures are wall time).
#ifdef FARM_REAL_BISECT_ARM64
constexpr char kArch[] = "aarch64";
constexpr char kPlatform[] = "virt-smmuv3";
constexpr char kAccel[] = "tcg";
#else
constexpr char kArch[] = "x86_64";
constexpr char kPlatform[] = "q35-intel-iommu";
constexpr char kAccel[] = "tcg-icount";
#endif

class RealBisectPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    testing::MakeTestTreeOrFail(&tree_);
    if (HasFatalFailure()) return;
    absl::StatusOr<std::string> initramfs =
        BuildGuestRoot(FARM_GUEST_ROOT_DIR, kArch, absl::Minutes(10));
    ASSERT_TRUE(initramfs.ok()) << initramfs.status();
    initramfs_ = *initramfs;

    root_ = TestDir();
    fs::create_directories(root_ + "/allowed");
    fs::create_directories(root_ + "/store");

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();
    auto am = testing::AlertmanagerInstance::Start();
    ASSERT_TRUE(am.ok()) << am.status();
    am_ = *std::move(am);
    StartAgent();

    pool_ = std::make_unique<storage::PgPool>(storage::PgPoolOptions{DbUri(), 2, 5});
    store_ = storage::NewPgAnalyzerStore(pool_.get());
    submitter_ = analyzer::NewGrpcJobSubmitter(server_->address(), "");
    auto sink = analyzer::NewAlertmanagerSink(am_->BaseUrl());
    ASSERT_TRUE(sink.ok()) << sink.status();
    sink_ = *std::move(sink);
  }

  // Two slots: a build and a guest, or two guests, at once. Under
  // tcg-icount (x86_64) a guest's figures follow its instructions, not the
  // host's load, so neither perturbs the other's numbers; on aarch64 (plain
  // tcg) they are wall time and do.
  void StartAgent() {
    absl::Status up;
    agent_ = FarmTest::StartAgent(
        {.name = "builder",
         .slots = 2,
         .capabilities = "kbuild,dma-map-bench",
         .drain_timeout = absl::Seconds(10),
         .flags = {"--kbuild-tree", absl::StrCat(kCatalog, "=", tree_.dir), "--kernel-store",
                   root_ + "/store", "--vm-initramfs", initramfs_, "--vm-arch", kArch, "--vm-accel",
                   kAccel, "--allow-dir", root_ + "/allowed"}},
        &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << agent_->Out();
  }

  void TearDown() override {
    if (agent_) {
      EXPECT_EQ(agent_->Terminate(), 0) << agent_->Out();
    }
    agent_.reset();
    sink_.reset();
    store_.reset();
    submitter_.reset();
    pool_.reset();
    FarmTest::TearDown();
    am_.reset();
  }

  std::string Spec(const std::string& mode) const {
    return Spec(mode, tree_.commits.front(), tree_.commits.back());
  }
  std::string Spec(const std::string& mode, const std::string& good, const std::string& bad,
                   int repeats = 5) const {
    return absl::StrCat("name: real-bisect-", mode, "\ncatalog: ", kCatalog,
                        "\nplatform: ", kPlatform, "\ncommits: [", good, ", ", bad, "]\nmodes: [",
                        mode,
                        "]\nworkloads:\n  - name: dma-map-bench\n    params: {seconds: 1}\n"
                        "repeats: ",
                        repeats, "\nexecutor: dma-map-bench\nanalysis: {bisect: true}\n");
  }

  std::vector<pb::Regression> Regressions() {
    auto analysis = pb::AnalysisService::NewStub(client::MakeChannel(client_));
    pb::ListRegressionsRequest req;
    req.set_include_closed(true);
    pb::ListRegressionsResponse resp;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status s = analysis->ListRegressions(ctx.get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.regressions().begin(), resp.regressions().end()};
  }

  pb::Bisect BisectOf(int64_t id) {
    auto analysis = pb::AnalysisService::NewStub(client::MakeChannel(client_));
    pb::GetBisectRequest req;
    req.set_bisect_id(id);
    pb::Bisect b;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status s = analysis->GetBisect(ctx.get(), req, &b);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return b;
  }

  json AlertOf(int64_t regression_id) {
    auto r = testing::HttpGet(am_->BaseUrl() + "/api/v2/alerts");
    if (!r.ok() || r->status != 200) return nullptr;
    for (const json& al : json::parse(r->body, nullptr, false)) {
      if (al.is_object() &&
          al["labels"].value("regression_id", "") == std::to_string(regression_id))
        return al;
    }
    return nullptr;
  }

  static bool IsPrimaryRegression(const pb::Regression& r, pb::IommuMode mode) {
    return r.workload() == "dma-map-bench" && r.metric_rank() == "primary" &&
           r.direction() == pb::CHANGE_DIRECTION_REGRESSION && r.mode() == mode &&
           !r.overhead_series();
  }

  // Imports `range` of the test tree as the catalog, as a user would.
  void ImportGit(cli::Commands& commands, const std::string& range, const std::ostringstream& err) {
    ASSERT_EQ(commands.RunCatalogImportGit(tree_.dir, range, kCatalog), 0) << err.str();
  }

  std::string RevParse(const std::string& rev) {
    absl::StatusOr<std::string> out = cli::RunProgram({"git", "-C", tree_.dir, "rev-parse", rev});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::string(absl::StripAsciiWhitespace(*out)) : "";
  }

  // Waits for matrix `id`; ASSERTs that `jobs` of its jobs succeeded.
  void AwaitMatrix(cli::Commands& commands, int64_t id, int jobs, absl::Time start) {
    auto progress = commands.WaitForMatrix(id, [](const pb::MatrixProgress&) {});
    ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << agent_->Out();
    ASSERT_EQ(progress->counts().succeeded(), jobs) << "matrix " << id << "\n" << agent_->Out();
    std::cout << "matrix " << id << " ran in " << Since(start) << "\n";
  }

  // Submits `spec` and waits for it as AwaitMatrix does; its matrix's id.
  int64_t RunMatrix(cli::Commands& commands, const std::string& spec, int jobs, absl::Time start) {
    auto submitted = commands.SubmitSpec(spec, false);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return 0;
    AwaitMatrix(commands, submitted->matrix().id(), jobs, start);
    return submitted->matrix().id();
  }

  // Analyzer passes, a second apart (each may build and boot kernels),
  // until the regression `pick` accepts (the last listed) is `decided`;
  // that regression, or an empty one.
  pb::Regression DecidedRegression(
      analyzer::Analyzer& a, const std::function<bool(const pb::Regression&)>& pick,
      const std::function<bool(const pb::Regression&)>& decided = Bisected) {
    pb::Regression reg;
    analyzer::TickUntil(
        a,
        [&] {
          for (const pb::Regression& r : Regressions())
            if (pick(r)) reg = r;
          return reg.id() != 0 && decided(reg);
        },
        "a decided regression", absl::Minutes(50), [&] { return agent_->Out(); }, absl::Seconds(1));
    return reg;
  }

  static bool Bisected(const pb::Regression& r) {
    return r.state() == pb::REGRESSION_STATE_REJECTED || !r.culprit_id().empty();
  }

  // Prints the bisect's steps; EXPECTs each decided and the bisect done.
  // A mode-changed bisect's step mean is the mode it ran.
  void ExpectStepsDecided(int64_t bisect_id, bool mode_steps = false) {
    const pb::Bisect b = BisectOf(bisect_id);
    EXPECT_EQ(b.state(), "done");
    for (const pb::BisectStep& s : b.steps()) {
      const std::string value =
          s.repeats() == 0 ? ""
          : mode_steps     ? " mode " + proto::ModeName(static_cast<pb::IommuMode>(s.mean()))
                           : absl::StrFormat(" mean %.0f", s.mean());
      std::cout << absl::StrFormat("step %d: %s %s x%d%s\n", s.step(), s.commit_id().substr(0, 12),
                                   s.verdict(), s.repeats(), value);
      EXPECT_NE(s.verdict(), "pending") << s.commit_id();
    }
    EXPECT_GE(b.steps_size(), 2);
  }

  // The endpoints in strict and in `other_mode`, where the planted commit
  // changes nothing: the strict regression is found, confirmed and bisected
  // to the planted commit and alerted; `other_mode` finds no primary
  // regression.
  void PlantedInStrictOnly(const std::string& other_mode);

  static std::string Since(absl::Time start) {
    return absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1)));
  }

  kbuild::TestTree tree_;
  std::string root_, initramfs_;
  std::unique_ptr<testing::AlertmanagerInstance> am_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> agent_;
  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<analyzer::AnalyzerStore> store_;
  std::unique_ptr<analyzer::JobSubmitter> submitter_;
  std::unique_ptr<analyzer::AlertSink> sink_;
};

void RealBisectPgTest::PlantedInStrictOnly(const std::string& other_mode) {
  const pb::IommuMode other = proto::ModeFromName(other_mode);
  ASSERT_NE(other, pb::IOMMU_MODE_UNSPECIFIED) << other_mode;
  const absl::Time start = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  ASSERT_NO_FATAL_FAILURE(
      ImportGit(commands, absl::StrCat(tree_.commits.front(), "..", tree_.commits.back()), err));
  EXPECT_TRUE(absl::StrContains(
      out.str(), absl::StrCat("added ", tree_.commits.size(), " of ", tree_.commits.size())))
      << out.str();

  std::map<std::string, int64_t> matrix;
  for (const std::string& mode : {std::string("strict"), other_mode}) {
    auto submitted = commands.SubmitSpec(Spec(mode), false);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    matrix[mode] = submitted->matrix().id();
  }
  for (const auto& [mode, id] : matrix)
    ASSERT_NO_FATAL_FAILURE(AwaitMatrix(commands, id, 10, start));

  // Until the strict regression is bisected and alerted (its steps build
  // and boot kernels).
  analyzer::Analyzer a(store_.get(), submitter_.get(), sink_.get(), {},
                       analyzer::AnalyzerOptions{});
  json alert;
  const pb::Regression reg = DecidedRegression(
      a, [](const pb::Regression& r) { return IsPrimaryRegression(r, pb::IOMMU_MODE_STRICT); },
      [&](const pb::Regression& r) {
        if (r.state() == pb::REGRESSION_STATE_REJECTED) return true;
        if (r.culprit_id().empty() || !r.alert_firing()) return false;
        alert = AlertOf(r.id());
        return alert.is_object() && alert["annotations"].value("culprit", "") == r.culprit_id();
      });
  const std::string took = Since(start);
  ASSERT_NE(reg.id(), 0) << "no strict regression found in matrix " << matrix["strict"];
  std::cout << cli::FormatRegression(reg) << "\n";
  // The bisect narrowed the range to the planted commit and its parent.
  const auto planted = std::find(tree_.commits.begin(), tree_.commits.end(), tree_.planted);
  ASSERT_TRUE(planted != tree_.commits.end() && planted != tree_.commits.begin());
  EXPECT_EQ(reg.last_good(), *(planted - 1));
  EXPECT_EQ(reg.first_bad(), tree_.planted);
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED)
      << proto::RegressionStateName(reg.state()) << ": " << reg.confirm_note();
  EXPECT_EQ(reg.confirmed_by(), "dma-map-bench") << reg.confirm_note();
  EXPECT_TRUE(absl::StrContains(reg.metric(), "unmap_latency_mean")) << reg.metric();
  EXPECT_GT(reg.magnitude(), 0.03);
  EXPECT_EQ(reg.culprit_id(), tree_.planted) << agent_->Out();
  ASSERT_TRUE(alert.is_object()) << "no alert for regression " << reg.id();
  EXPECT_EQ(alert["annotations"].value("culprit", ""), tree_.planted);
  EXPECT_EQ(alert["labels"].value("platform", ""), kPlatform);
  EXPECT_EQ(alert["status"].value("state", ""), "active");

  // Every step ran on a kernel built for it.
  ExpectStepsDecided(reg.bisect_id());
  std::cout << "submit to culprit and alert: " << took << "\n";

  for (const pb::Regression& r : Regressions()) {
    EXPECT_FALSE(IsPrimaryRegression(r, other)) << other_mode << ": " << cli::FormatRegression(r);
  }
}

#ifndef FARM_REAL_BISECT_ARM64
TEST_F(RealBisectPgTest, StrictFindsConfirmsAndBisectsThePlantedCommitPassthroughFindsNothing) {
  PlantedInStrictOnly("passthrough");
}
#else
// On virt + SMMUv3, where lazy is real: a lazy unmap queues its IOVA for a
// deferred flush and never takes the strict path the planted flush is on.
TEST_F(RealBisectPgTest, OnArm64StrictFindsAndBisectsThePlantedCommitLazyFindsNothing) {
  PlantedInStrictOnly("lazy");
}
#endif

// The other cases run in the x86_64 binary only.
#ifndef FARM_REAL_BISECT_ARM64
// A merge-based history: main's commits, the topic branch forked from
// main's last but one commit (a comment, the planted extra IOTLB flush after
// each strict map, a documentation change) and the merge of that branch
// into main's last commit, imported as one graph. A matrix of the fork and
// the merge in strict finds the map-latency regression; the bisect's
// suspects are main's last commit, the three branch commits and the merge,
// and it ends at the commit inside the branch, every step's kernel built on
// demand (the first-parent line alone could only have named the merge).
TEST_F(RealBisectPgTest, AMergedBranchIsBisectedToTheCommitInsideIt) {
  ASSERT_FALSE(tree_.merge.empty()) << "the test tree has no merged branch";
  const absl::Time start = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const std::string range = absl::StrCat(tree_.commits.front(), "..", tree_.merge);
  ASSERT_NO_FATAL_FAILURE(ImportGit(commands, range, err));
  // The base, then every commit of git's range: main's up to the merge's
  // first parent, the three branch commits and the merge.
  absl::StatusOr<std::string> count =
      cli::RunProgram({"git", "-C", tree_.dir, "rev-list", "--count", range});
  ASSERT_TRUE(count.ok()) << count.status();
  const int commits = std::stoi(*count) + 1;
  EXPECT_GE(commits, 6);
  EXPECT_TRUE(absl::StrContains(out.str(), absl::StrCat("added ", commits, " of ", commits)))
      << out.str();
  absl::StatusOr<std::string> fork = cli::RunProgram(
      {"git", "-C", tree_.dir, "merge-base", tree_.merge + "^1", tree_.merge + "^2"});
  ASSERT_TRUE(fork.ok()) << fork.status();
  const std::string good(absl::StripAsciiWhitespace(*fork));

  const int64_t matrix = RunMatrix(commands, Spec("strict", good, tree_.merge), 10, start);
  ASSERT_FALSE(HasFatalFailure());

  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  const pb::Regression reg = DecidedRegression(a, [](const pb::Regression& r) {
    return IsPrimaryRegression(r, pb::IOMMU_MODE_STRICT) &&
           absl::StartsWith(r.metric(), "map_latency_mean");
  });
  const std::string took = Since(start);
  for (const pb::Regression& r : Regressions()) std::cout << cli::FormatRegression(r) << "\n";
  ASSERT_NE(reg.id(), 0) << "no strict map-latency regression in matrix " << matrix;
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED) << reg.confirm_note();
  EXPECT_EQ(reg.culprit_id(), tree_.merged_planted) << agent_->Out();
  EXPECT_EQ(reg.first_bad(), tree_.merged_planted);
  EXPECT_EQ(reg.last_good(), RevParse(tree_.merged_planted + "^"));
  ExpectStepsDecided(reg.bisect_id());
  std::cout << "submit to culprit: " << took << "\n";
}

// A commit that changes the mode a real kernel runs: branch strict-forced
// (a comment, the commit that makes every default domain translated and
// strict whatever the command line asks, a documentation change) imported
// on top of main. A passthrough matrix of main's tip and the branch's tip
// reports effective passthrough, then strict (the forcing kernel's runs are
// results, not failures), raises mode_changed and bisects it on the
// effective mode to the forcing commit. Passthrough, not lazy: under QEMU's
// VT-d caching mode a lazy request runs strict on every commit
// (docs/kernels.md), so lazy cannot change here.
TEST_F(RealBisectPgTest, AForcedModeIsFoundAndBisectedToTheForcingCommit) {
  ASSERT_FALSE(tree_.mode_forced.empty()) << "the test tree has no strict-forced branch";
  const absl::Time start = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const std::string bad = RevParse("strict-forced");
  ASSERT_NO_FATAL_FAILURE(ImportGit(commands, absl::StrCat(tree_.commits.front(), "..", bad), err));
  const int64_t matrix =
      RunMatrix(commands, Spec("passthrough", tree_.commits.back(), bad, /*repeats=*/2), 4, start);
  ASSERT_FALSE(HasFatalFailure());

  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  const pb::Regression reg = DecidedRegression(a, [](const pb::Regression& r) {
    return r.change_class() == pb::CHANGE_CLASS_MODE_CHANGED &&
           r.mode() == pb::IOMMU_MODE_PASSTHROUGH;
  });
  const std::string took = Since(start);
  for (const pb::Regression& r : Regressions()) std::cout << cli::FormatRegression(r) << "\n";
  ASSERT_NE(reg.id(), 0) << "no mode_changed finding in matrix " << matrix;
  EXPECT_EQ(reg.workload(), "dma-map-bench");
  EXPECT_EQ(reg.culprit_id(), tree_.mode_forced) << agent_->Out();
  EXPECT_EQ(reg.first_bad(), tree_.mode_forced);
  EXPECT_EQ(reg.last_good(), RevParse(tree_.mode_forced + "^"));
  ExpectStepsDecided(reg.bisect_id(), /*mode_steps=*/true);
  std::cout << "submit to culprit: " << took << "\n";
}

// A small change, shown rather than computed: branch small-cost (a comment,
// a commit that pauses a few dozen instructions after each strict unmap's
// invalidation, a documentation change) on top of main. A strict matrix of
// main's tip and the branch's tip at 3 repeats finds the unmap-latency
// regression of about 3%, confirms it and bisects it to that commit.
TEST_F(RealBisectPgTest, ASmallStrictUnmapCostIsFoundAndBisectedExactly) {
  ASSERT_FALSE(tree_.planted_small.empty()) << "the test tree has no small-cost branch";
  const absl::Time start = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const std::string bad = RevParse("small-cost");
  ASSERT_NO_FATAL_FAILURE(ImportGit(commands, absl::StrCat(tree_.commits.front(), "..", bad), err));
  const int64_t matrix =
      RunMatrix(commands, Spec("strict", tree_.commits.back(), bad, /*repeats=*/3), 6, start);
  ASSERT_FALSE(HasFatalFailure());

  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  const pb::Regression reg = DecidedRegression(a, [](const pb::Regression& r) {
    return IsPrimaryRegression(r, pb::IOMMU_MODE_STRICT) &&
           absl::StartsWith(r.metric(), "unmap_latency_mean");
  });
  const std::string took = Since(start);
  for (const pb::Regression& r : Regressions()) std::cout << cli::FormatRegression(r) << "\n";
  ASSERT_NE(reg.id(), 0) << "no strict unmap-latency regression in matrix " << matrix;
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED) << reg.confirm_note();
  // The planted pauses are a few dozen instructions on a strict unmap of a
  // few thousand: the band around 3% the tree's script states.
  EXPECT_GT(reg.magnitude(), 0.015);
  EXPECT_LT(reg.magnitude(), 0.06);
  EXPECT_EQ(reg.culprit_id(), tree_.planted_small) << agent_->Out();
  EXPECT_EQ(reg.first_bad(), tree_.planted_small);
  EXPECT_EQ(reg.last_good(), RevParse(tree_.planted_small + "^"));
  ExpectStepsDecided(reg.bisect_id());
  std::cout << absl::StrFormat("small change %+.2f%% at 3 repeats: submit to culprit %s\n",
                               100 * reg.magnitude(), took);
}

// The pre-screen joined to real kernels: main's commits as a catalog whose
// planted commit carries a model setting for what it does (an unmap that
// costs more: sw.unmap_delta_insns, inherited by the commits after it), an
// emulator matrix of the planted commit's neighbours on intel-spr-2s56c
// with `analysis.confirm: {executor: dma-map-bench}`, and a spawned
// emulator agent beside the builder. Nobody offers a kernel of the tree:
// the analyzer finds the emulator's throughput regression, confirms it with
// dma-map-bench on unmap_latency_mean (the latency that rose in the
// emulator's runs; up is worse) on kernels the scheduler asks the builder
// to build, and bisects it on real kernels built for each step to the
// planted commit; every step records that it ran on a real kernel.
TEST_F(RealBisectPgTest, AnEmulatorFindingIsConfirmedAndBisectedOnKernelsBuiltForIt) {
  const absl::Time start = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const auto planted = std::find(tree_.commits.begin(), tree_.commits.end(), tree_.planted);
  ASSERT_TRUE(planted != tree_.commits.end() && planted != tree_.commits.begin() &&
              planted + 1 != tree_.commits.end());
  std::string yaml = absl::StrCat("catalog: ", kCatalog, "\ncommits:\n");
  for (const std::string& id : tree_.commits) {
    absl::StatusOr<std::string> subject =
        cli::RunProgram({"git", "-C", tree_.dir, "log", "-1", "--format=%s", id});
    ASSERT_TRUE(subject.ok()) << subject.status();
    absl::StrAppend(&yaml, "  - id: ", id, "\n    subject: ",
                    json(std::string(absl::StripAsciiWhitespace(*subject))).dump(), "\n");
    if (id == tree_.planted) absl::StrAppend(&yaml, "    set: {sw.unmap_delta_insns: 3000}\n");
  }
  {
    auto jobs = Stub<pb::JobService>(client_);
    pb::LoadCatalogRequest req;
    req.set_yaml(yaml);
    req.set_source_name("real_bisect_pgtest");
    pb::LoadCatalogResponse resp;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    const grpc::Status s = jobs->LoadCatalog(ctx.get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  absl::Status up;
  auto emu = FarmTest::StartAgent({.name = "emu", .drain_timeout = absl::Seconds(10)}, &up);
  ASSERT_TRUE(up.ok()) << emu->Out();
  const std::string good = *(planted - 1), bad = *(planted + 1);
  auto bulk = commands.SubmitSpec(
      absl::StrCat("name: prescreen\ncatalog: ", kCatalog, "\nplatform: intel-spr-2s56c\n",
                   "commits: [", good, ", ", bad,
                   "]\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n"
                   "    params: {threads: 1, seconds: 0.002}\nrepeats: 5\n"
                   "analysis:\n  bisect: true\n  confirm:\n    executor: dma-map-bench\n"
                   "    platform: q35-intel-iommu\n    repeats: 3\n"
                   "    workload: {name: dma-map-bench, params: {seconds: 1}}\n"),
      false);
  ASSERT_TRUE(bulk.ok()) << bulk.status();

  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  const pb::Regression reg = DecidedRegression(a, [](const pb::Regression& r) {
    return r.platform() == "intel-spr-2s56c" && IsPrimaryRegression(r, pb::IOMMU_MODE_STRICT);
  });
  const std::string took = Since(start);
  for (const pb::Regression& r : Regressions()) std::cout << cli::FormatRegression(r) << "\n";
  ASSERT_NE(reg.id(), 0) << "no strict regression on intel-spr-2s56c\n" << emu->Out();
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED) << reg.confirm_note();
  EXPECT_EQ(reg.confirmed_by(), "dma-map-bench") << reg.confirm_note();
  EXPECT_TRUE(absl::StrContains(reg.confirm_note(),
                                "dma-map-bench on real kernels (q35-intel-iommu, dma-map-bench): "
                                "unmap_latency_mean +"))
      << reg.confirm_note();
  EXPECT_TRUE(absl::StrContains(reg.confirm_note(), "; kernels built for it"))
      << reg.confirm_note();
  EXPECT_EQ(reg.culprit_id(), tree_.planted) << agent_->Out();
  EXPECT_EQ(reg.last_good(), good);
  ExpectStepsDecided(reg.bisect_id());
  const pqxx::result where = SqlRows(absl::StrCat(
      "SELECT step, executor, real_kernel FROM bisect_steps WHERE bisect_id = ", reg.bisect_id()));
  EXPECT_GE(where.size(), 2u);
  for (const pqxx::row& r : where) {
    EXPECT_EQ(r[1].as<std::string>(), "dma-map-bench") << "step " << r[0].as<int>();
    EXPECT_TRUE(r[2].as<bool>()) << "step " << r[0].as<int>();
  }
  std::cout << "confirmed: " << reg.confirm_note() << "\nsubmit to culprit: " << took << "\n";
  EXPECT_EQ(emu->Terminate(), 0) << emu->Out();
}

// Each commit's software cost from its own kernel: dma-map-bench on every
// commit of the tree in instruction-counted guests, `farmctl catalog
// measure` turning each commit's map and unmap instructions over the base's
// into its model keys, then an emulator matrix of the measured catalog's
// endpoints on intel-spr-2s56c (112 CPUs, a machine this one is not): the
// analyzer finds the strict regression and bisects it, on the emulator, to
// the planted commit, which the emulator's own catalog never described.
TEST_F(RealBisectPgTest, MeasuredCostsFindThePlantedCommitOnALargePlatform) {
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const std::string range = absl::StrCat(tree_.commits.front(), "..", tree_.commits.back());
  ASSERT_NO_FATAL_FAILURE(ImportGit(commands, range, err));
  auto measured = commands.SubmitSpec(
      absl::StrCat("name: measure\ncatalog: ", kCatalog,
                   "\nplatform: q35-intel-iommu\ncommits: ", range,
                   "\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n"
                   "    params: {seconds: 1}\nrepeats: 3\nexecutor: dma-map-bench\n"),
      false);
  ASSERT_TRUE(measured.ok()) << measured.status();
  auto progress = commands.WaitForMatrix(measured->matrix().id(), [](const pb::MatrixProgress&) {});
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << agent_->Out();
  // Every commit but the one that does not build.
  EXPECT_EQ(progress->counts().succeeded(), 3 * (static_cast<int>(tree_.commits.size()) - 1))
      << agent_->Out();
  ASSERT_EQ(commands.RunCatalogMeasure(measured->matrix().id(), tree_.commits.front(), "", "strict",
                                       /*print_only=*/false),
            0)
      << err.str();
  std::cout << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "loaded catalog test-tree-measured")) << out.str();

  absl::Status up;
  auto emu = FarmTest::StartAgent({.name = "emu", .drain_timeout = absl::Seconds(10)}, &up);
  ASSERT_TRUE(up.ok()) << emu->Out();
  auto bulk = commands.SubmitSpec(
      absl::StrCat("name: measured-on-spr\ncatalog: test-tree-measured\nplatform: "
                   "intel-spr-2s56c\ncommits: [",
                   tree_.commits.front(), ", ", tree_.commits.back(),
                   "]\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n"
                   "    params: {threads: 1, seconds: 0.002}\nrepeats: 5\n"
                   "analysis: {bisect: true}\n"),
      false);
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  pb::Regression reg;
  for (int pass = 0; pass < 600 && reg.culprit_id().empty(); ++pass) {
    (void)a.Tick();
    for (const pb::Regression& r : Regressions()) {
      if (r.platform() == "intel-spr-2s56c" && IsPrimaryRegression(r, pb::IOMMU_MODE_STRICT))
        reg = r;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_NE(reg.id(), 0) << "no regression on intel-spr-2s56c\n" << emu->Out();
  std::cout << cli::FormatRegression(reg) << "\n";
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED) << reg.confirm_note();
  EXPECT_EQ(reg.culprit_id(), tree_.planted) << emu->Out();
}
#endif  // FARM_REAL_BISECT_ARM64

}  // namespace
}  // namespace farm
