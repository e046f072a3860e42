// Whole farm, real kernels: PostgreSQL, the real farm-scheduler (in-process)
// and a spawned farm-agent offering fio under the host kernel and, through
// its vm provider, the Debian amd64 cloud kernel scripts/fetch-test-kernels
// fetched (QEMU q35 + intel-iommu under TCG). A matrix for that kernel's
// commit in strict and passthrough is leased to the agent's vm offer, runs
// fio on the guest's NVMe and lands in PostgreSQL with the mode the guest
// kernel really ran and its guest facts; a lazy cell (which VT-d in caching
// mode cannot run, so no agent offers it) stays queued, never failed.
// Missing kernel or QEMU fails (never skips): the message says what to run.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/runners/fio_json.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "integration_tests/cached_kernels.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/process/process.h"
#include "proto/names.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

constexpr char kFetchHint[] =
    "run scripts/fetch-test-kernels (as root: it fetches the Debian amd64 cloud kernel; "
    "scripts/install-deps installs qemu-system-x86)";

std::string NewestAmd64Release(const std::string& cache) {
  const std::vector<std::string> releases = CachedAmd64CloudReleases(cache);
  return releases.empty() ? "" : releases.front();
}

class VmRunsPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    kernels_dir_ = KernelCacheDir();
    release_ = NewestAmd64Release(kernels_dir_);
    ASSERT_FALSE(release_.empty())
        << "no *-cloud-amd64 kernel under " << kernels_dir_ << ": " << kFetchHint;
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-x86_64").ok())
        << "no qemu-system-x86_64: " << kFetchHint;
    absl::StatusOr<std::string> initramfs = BuildGuestRoot(FARM_GUEST_ROOT_DIR);
    ASSERT_TRUE(initramfs.ok()) << initramfs.status();

    root_ = TestDir();
    allowed_ = root_ + "/allowed";
    fs::create_directories(allowed_);

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();

    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::LoadCatalogRequest load;
    load.set_yaml(absl::StrCat("catalog: test-kernels\ncommits:\n  - id: \"", release_,
                               "\"\n    subject: \"Debian's amd64 cloud kernel\"\n"));
    load.set_source_name("vm_runs_pgtest");
    pb::LoadCatalogResponse loaded;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->LoadCatalog(ctx.get(), load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();

    absl::Status up;
    agent_ = StartAgent({.name = "vm-agent",
                         .slots = 2,
                         .capabilities = "fio",
                         .drain_timeout = absl::Seconds(10),
                         .flags = {"--allow-dir", allowed_, "--vm-kernels", kernels_dir_,
                                   "--vm-initramfs", *initramfs}},
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

  std::string Spec(const std::string& name, const std::string& modes) const {
    return absl::StrCat(
        "name: ", name, "\ncatalog: test-kernels\nplatform: q35-vtd\n", "commits: [\"", release_,
        "\"]\nmodes: [", modes, "]\n",
        "workloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k, iodepth: 16, "
        "ioengine: libaio, direct: 1, runtime: 2, time_based: 1}\n",
        "repeats: 1\nexecutor: fio\n");
  }

  std::string kernels_dir_, release_, root_, allowed_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(VmRunsPgTest, StrictAndPassthroughRunInTheGuestAndLandWithTheirEffectiveMode) {
  // The agent offers the fetched kernel under the vm provider in the modes
  // VT-d in caching mode really runs.
  auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
  pb::ListAgentsResponse agents;
  auto ctx = client::NewContext(client_, absl::Seconds(30));
  ASSERT_TRUE(stub->ListAgents(ctx.get(), pb::ListAgentsRequest(), &agents).ok());
  ASSERT_EQ(agents.agents_size(), 1);
  ASSERT_EQ(agents.agents(0).capabilities_size(), 1);
  const pb::Capability& fio = agents.agents(0).capabilities(0);
  EXPECT_EQ(fio.name(), "fio");
  std::set<std::string> vm_modes;
  bool host_offer = false;
  for (const pb::KernelOffer& k : fio.kernels()) {
    if (k.provider() == "host") host_offer = true;
    if (k.provider() != "vm" || k.release() != release_) continue;
    EXPECT_EQ(k.machine_model(), "q35+intel-iommu");
    // No KVM here: the agent's default is instruction-timed TCG.
    EXPECT_EQ(k.accel(), "tcg-icount");
    for (int m : k.modes()) vm_modes.insert(proto::ModeName(m));
  }
  EXPECT_TRUE(host_offer);
  EXPECT_EQ(vm_modes, (std::set<std::string>{"off", "passthrough", "strict"}));

  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  // Submitted first, so it heads the queue: it must stay there. (Two slots:
  // the claim reads as many candidates as free slots before the offer
  // filter, so with one slot the lazy job would hide the others.)
  auto lazy = commands.SubmitSpec(Spec("vm-lazy", "lazy"), false);
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  auto submitted = commands.SubmitSpec(Spec("vm-real", "strict, passthrough"), false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t matrix_id = submitted->matrix().id();
  auto progress = commands.WaitForMatrix(matrix_id, [](const pb::MatrixProgress&) {});
  ASSERT_TRUE(progress.ok()) << progress.status() << "\n" << agent_->Out();
  EXPECT_EQ(progress->state(), pb::MATRIX_STATE_COMPLETED) << agent_->Out();
  EXPECT_EQ(progress->counts().succeeded(), 2) << agent_->Out();

  auto results = commands.FetchResults(matrix_id, /*include_raw=*/true);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  std::set<std::string> seen;
  for (const pb::Result& r : *results) {
    const std::string mode = proto::ModeName(r.job().mode());
    seen.insert(mode);
    EXPECT_EQ(r.host().kernel_release(), release_);
    EXPECT_EQ(r.host().iommu_mode(), r.job().mode()) << r.host().iommu_detail();
    EXPECT_EQ(r.host().architecture(), "x86_64");
    EXPECT_FALSE(r.host().hostname().empty());
    ASSERT_TRUE(r.host().has_guest()) << mode;
    const pb::GuestFacts& g = r.host().guest();
    EXPECT_EQ(g.provider(), "vm");
    EXPECT_EQ(g.requested_mode(), r.job().mode());
    EXPECT_EQ(g.domain_type(), mode == "strict" ? "DMA" : "identity");
    EXPECT_EQ(g.machine_model(), "q35+intel-iommu");
    EXPECT_EQ(g.iommu_driver(), "dmar0");
    EXPECT_EQ(g.accel(), "tcg-icount");
    EXPECT_EQ(g.icount_shift(), 7u);
    EXPECT_EQ(r.host().cpus(), 1u);  // x86_64 under icount: one CPU
    EXPECT_TRUE(absl::StartsWith(g.qemu_version(), "QEMU emulator version")) << g.qemu_version();
    EXPECT_TRUE(
        absl::StrContains(g.cmdline(), mode == "strict" ? "iommu.strict=1" : "iommu.passthrough=1"))
        << g.cmdline();
    EXPECT_EQ(r.raw_format(), "fio-json");
    auto parsed = runners::ParseFioJson(r.raw_output());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->fio_version, r.tool_version());
    double iops = 0;
    for (const pb::Sample& s : r.samples()) {
      if (s.metric() == "iops" && s.phase() == "read") iops = s.value();
    }
    EXPECT_GT(iops, 0) << mode;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"strict", "passthrough"}));

  // The rows themselves: the effective mode and the guest's facts are in
  // the result's host facts (result_hosts).
  pqxx::connection c(DbUri());
  pqxx::work w(c);
  pqxx::result rows = w.exec_params(
      "SELECT j.mode, (h.host->>'iommu_mode')::int, h.host->'guest'->>'domain_type', "
      "h.host->>'kernel_release', h.host->'guest'->>'iommu_driver', "
      "h.host->'guest'->>'qemu_version' FROM results r JOIN jobs j ON j.id = r.job_id "
      "JOIN result_hosts h ON h.id = r.host_id "
      "WHERE r.matrix_id = $1 ORDER BY j.mode",
      matrix_id);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].as<int>(), pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(rows[0][1].as<int>(), pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(rows[0][2].as<std::string>(), "identity");
  EXPECT_EQ(rows[1][0].as<int>(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(rows[1][1].as<int>(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(rows[1][2].as<std::string>(), "DMA");
  EXPECT_EQ(rows[1][3].as<std::string>(), release_);
  EXPECT_EQ(rows[1][4].as<std::string>(), "dmar0");
  EXPECT_NE(rows[1][5].as<std::string>(), "");
  std::cout << "guest facts of the strict row: " << rows[1][3].as<std::string>() << ", "
            << rows[1][2].as<std::string>() << ", " << rows[1][4].as<std::string>() << ", "
            << rows[1][5].as<std::string>() << "\n";

  // Lazy: never leased, never failed.
  pb::GetMatrixRequest get;
  get.set_matrix_id(lazy->matrix().id());
  pb::Matrix lazy_matrix;
  auto ctx2 = client::NewContext(client_, absl::Seconds(30));
  ASSERT_TRUE(stub->GetMatrix(ctx2.get(), get, &lazy_matrix).ok());
  EXPECT_EQ(lazy_matrix.counts().queued(), 1);
  EXPECT_EQ(lazy_matrix.counts().failed(), 0);
}

}  // namespace
}  // namespace farm
