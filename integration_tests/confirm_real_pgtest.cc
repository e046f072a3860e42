// Pre-screen then confirm, end to end: PostgreSQL, the real farm-scheduler
// (in-process), a spawned farm-agent running the emulator, a spawned
// farm-agent offering the two Debian arm64 cloud kernels
// scripts/fetch-test-kernels fetched (its kernel store: commits v6.1.190 and
// v6.1.192) through its vm provider (QEMU virt + SMMUv3 under TCG), and the
// analyzer engine (in-process) over PostgreSQL and the scheduler's gRPC API.
//
// The emulator matrix runs a catalog whose commits include the two kernels'
// commits, with a model setting at v6.1.192 that costs strict throughput;
// its spec asks for `analysis.confirm` with fio. The analyzer finds the
// regression between v6.1.190 and v6.1.192 and runs its confirmation as real
// fio jobs on those two kernels; whatever the real verdict, the test checks
// that the jobs ran in guests booted from those kernels in strict (group type
// DMA) and that the regression records fio and the real matrix.
// Missing kernels or QEMU fail (never skip): the message says what to run.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/regressions.h"
#include "gtest/gtest.h"
#include "integration_tests/cached_kernels.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/process/process.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "proto/names.h"
#include "scheduler/server.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

constexpr char kFetchHint[] =
    "run scripts/fetch-test-kernels --arch arm64 --previous (as root: it fetches two Debian "
    "arm64 cloud kernels; scripts/install-deps installs qemu-system-arm)";

// commit (kernel.yaml) -> release of the arm64 builds under `cache`.
std::map<std::string, std::string> Arm64Kernels(const std::string& cache) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache, ec)) {
    const std::string name = e.path().filename().string();
    if (!absl::EndsWith(name, "-cloud-arm64") || !fs::exists(e.path() / ".complete") ||
        !fs::is_regular_file(e.path() / "vmlinuz")) {
      continue;
    }
    std::ifstream manifest(e.path() / "kernel.yaml");
    std::string line;
    while (std::getline(manifest, line)) {
      if (absl::StartsWith(line, "commit:")) {
        out[std::string(absl::StripAsciiWhitespace(line.substr(7)))] = name;
      }
    }
  }
  return out;
}

class ConfirmRealPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    kernels_dir_ = KernelCacheDir();
    kernels_ = Arm64Kernels(kernels_dir_);
    ASSERT_TRUE(kernels_.count("v6.1.190") && kernels_.count("v6.1.192"))
        << "need the arm64 kernels of v6.1.190 and v6.1.192 under " << kernels_dir_ << ": "
        << kFetchHint;
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-aarch64").ok())
        << "no qemu-system-aarch64: " << kFetchHint;
    absl::StatusOr<std::string> initramfs =
        BuildGuestRoot(FARM_GUEST_ROOT_ARM64_DIR, "aarch64", absl::Minutes(8));
    ASSERT_TRUE(initramfs.ok()) << initramfs.status();

    root_ = TestDir();
    allowed_ = root_ + "/allowed";
    fs::create_directories(allowed_);

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();

    // Four emulated releases around the two real ones; at v6.1.192 the
    // SMMUv3 command queue goes back to the spinlock, which costs strict
    // dma_map_benchmark throughput on kunpeng920-smmuv3 in the emulator
    // (farm-emu run --platform kunpeng920-smmuv3 --kernel smmu.cmdq=spinlock
    // --mode strict --workload dma-map-bench --param threads=8: 1.16 M
    // map+unmap/s against 1.95 M with smmu.cmdq=lockfree).
    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::LoadCatalogRequest load;
    load.set_yaml(
        "catalog: prescreen\ncommits:\n"
        "  - {id: v6.1.187, subject: \"base\", set: {smmu.cmdq: lockfree}}\n"
        "  - {id: v6.1.188, subject: \"emulated only\"}\n"
        "  - {id: v6.1.190, subject: \"kernel 6.1.0-54-cloud-arm64\"}\n"
        "  - {id: v6.1.192, subject: \"kernel 6.1.0-57-cloud-arm64\", set: {smmu.cmdq: spinlock}}\n"
        "  - {id: v6.1.193, subject: \"emulated only\"}\n"
        "  - {id: v6.1.194, subject: \"emulated only\"}\n");
    load.set_source_name("confirm_real_pgtest");
    pb::LoadCatalogResponse loaded;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->LoadCatalog(ctx.get(), load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();

    absl::Status up;
    emu_agent_ =
        StartAgent({.name = "emu-agent", .slots = 2, .drain_timeout = absl::Seconds(10)}, &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << emu_agent_->Out();
    vm_agent_ = StartAgent({.name = "vm-agent",
                            .slots = 2,
                            .capabilities = "fio",
                            .drain_timeout = absl::Seconds(10),
                            .flags = {"--allow-dir", allowed_, "--vm-kernels", kernels_dir_,
                                      "--vm-arch", "aarch64", "--vm-initramfs", *initramfs}},
                           &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << vm_agent_->Out();

    pool_ = std::make_unique<storage::PgPool>(storage::PgPoolOptions{DbUri(), 2, 5});
    store_ = storage::NewPgAnalyzerStore(pool_.get());
    submitter_ = analyzer::NewGrpcJobSubmitter(server_->address(), "");
  }

  void TearDown() override {
    for (auto* a : {&vm_agent_, &emu_agent_}) {
      if (*a) {
        EXPECT_EQ((*a)->Terminate(), 0) << (*a)->Out();
      }
      a->reset();
    }
    store_.reset();
    submitter_.reset();
    pool_.reset();
    FarmTest::TearDown();
  }

  std::string kernels_dir_, root_, allowed_;
  std::map<std::string, std::string> kernels_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> emu_agent_, vm_agent_;
  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<analyzer::AnalyzerStore> store_;
  std::unique_ptr<analyzer::JobSubmitter> submitter_;
};

TEST_F(ConfirmRealPgTest, EmulatorFindingIsConfirmedByFioOnTheCommitsKernels) {
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  auto submitted = commands.SubmitSpec(
      "name: prescreen\ncatalog: prescreen\nplatform: kunpeng920-smmuv3\n"
      "commits: v6.1.187..v6.1.194\nmodes: [strict]\n"
      "workloads:\n  - name: dma-map-bench\n    params: {threads: 8, seconds: 0.01, granule: 1}\n"
      "repeats: 3\nexecutor: emulator\nset: {noise.cv: 0.02}\n"
      "analysis:\n  bisect: true\n  confirm:\n    executor: fio\n    platform: virt-smmuv3\n"
      "    repeats: 2\n    workload:\n      name: fio-nvme\n"
      "      params: {rw: randread, bs: 4k, iodepth: 16, ioengine: libaio, direct: 1, "
      "runtime: 2, time_based: 1}\n",
      false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t bulk = submitted->matrix().id();
  auto progress = commands.WaitForMatrix(bulk, [](const pb::MatrixProgress&) {});
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << emu_agent_->Out();
  ASSERT_EQ(progress->counts().succeeded(), 18) << emu_agent_->Out();

  analyzer::Analyzer a(store_.get(), submitter_.get(), nullptr, {}, analyzer::AnalyzerOptions{});
  // Until the confirmation step has a verdict (the real jobs are 4 TCG
  // boots; the loop's bound is the test's timeout, not a timed assertion).
  pb::Regression reg;
  auto analysis = pb::AnalysisService::NewStub(client::MakeChannel(client_));
  for (int pass = 0; pass < 600; ++pass) {
    (void)a.Tick();
    pb::ListRegressionsRequest req;
    req.set_include_closed(true);
    pb::ListRegressionsResponse resp;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    ASSERT_TRUE(analysis->ListRegressions(ctx.get(), req, &resp).ok());
    bool decided = false;
    for (const pb::Regression& r : resp.regressions()) {
      // The primary (throughput) regression: the one confirmed on real
      // kernels (secondary findings are confirmed on the emulator).
      if (r.workload() != "dma-map-bench" || r.metric_rank() != "primary" ||
          r.direction() != pb::CHANGE_DIRECTION_REGRESSION) {
        continue;
      }
      reg = r;
      decided = r.state() != pb::REGRESSION_STATE_SUSPECTED;
    }
    if (decided) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  ASSERT_NE(reg.id(), 0) << "no regression found in matrix " << bulk;
  EXPECT_EQ(reg.last_good(), "v6.1.190");
  EXPECT_EQ(reg.first_bad(), "v6.1.192");
  EXPECT_TRUE(reg.state() == pb::REGRESSION_STATE_CONFIRMED ||
              reg.state() == pb::REGRESSION_STATE_REJECTED)
      << proto::RegressionStateName(reg.state()) << "\n"
      << vm_agent_->Out();
  EXPECT_EQ(reg.confirmed_by(), "fio") << reg.confirm_note();
  EXPECT_NE(reg.confirm_matrix_id(), 0);
  EXPECT_TRUE(absl::StrContains(reg.confirm_note(), "fio on real kernels (virt-smmuv3, fio-nvme)"))
      << reg.confirm_note();
  std::cout << "regression " << reg.id() << ": " << proto::RegressionStateName(reg.state())
            << ", confirmed by " << reg.confirmed_by() << " (matrix " << reg.confirm_matrix_id()
            << "): " << reg.confirm_note() << "\n";
  const std::string shown = cli::FormatRegression(reg);
  EXPECT_TRUE(absl::StrContains(
      shown, absl::StrCat("confirmed: by fio (matrix ", reg.confirm_matrix_id(), ")")))
      << shown;

  // The confirmation's jobs: fio in guests booted from the two commits'
  // kernels, strict on SMMUv3 (group type DMA), two per commit.
  pqxx::connection c(DbUri());
  pqxx::work w(c);
  pqxx::result rows = w.exec_params(
      "SELECT j.commit_id, j.executor, h.host->>'kernel_release', "
      "h.host->'guest'->>'domain_type', h.host->'guest'->>'provider', j.kind "
      "FROM results r JOIN jobs j ON j.id = r.job_id JOIN result_hosts h ON h.id = r.host_id "
      "WHERE j.matrix_id IN ($1::bigint, $1::bigint + 1) AND j.executor = $2 ORDER BY j.commit_id",
      reg.confirm_matrix_id(), static_cast<int>(pb::EXECUTOR_FIO));
  ASSERT_EQ(rows.size(), 4u) << vm_agent_->Out();
  std::map<std::string, int> per_commit;
  for (const pqxx::row& r : rows) {
    const std::string commit = r[0].as<std::string>();
    ++per_commit[commit];
    EXPECT_EQ(r[2].as<std::string>(), kernels_.at(commit));
    EXPECT_EQ(r[3].as<std::string>(), "DMA");
    EXPECT_EQ(r[4].as<std::string>(), "vm");
    EXPECT_EQ(r[5].as<int>(), static_cast<int>(pb::JOB_KIND_CONFIRM));
  }
  EXPECT_EQ(per_commit, (std::map<std::string, int>{{"v6.1.190", 2}, {"v6.1.192", 2}}));
  // Its confirmation ran no emulator job: both of its matrices are fio.
  pqxx::row emu = w.exec_params1(
      "SELECT count(*) FROM jobs WHERE matrix_id IN ($1::bigint, $1::bigint + 1) AND executor <> "
      "$2",
      reg.confirm_matrix_id(), static_cast<int>(pb::EXECUTOR_FIO));
  EXPECT_EQ(emu[0].as<int64_t>(), 0);
}

}  // namespace
}  // namespace farm
