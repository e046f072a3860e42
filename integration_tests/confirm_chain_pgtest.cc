// The pre-screen joined to real kernels, against the real pieces:
// PostgreSQL, the real scheduler (in-process gRPC server, its submit planning
// kernel builds) and the analyzer engine (in-process) over the PostgreSQL
// store and the scheduler's API. Two simulated agents speak the real
// AgentService:
//   - "emu" runs emulator jobs: a dma-map-bench-like throughput and map and
//     unmap mean latencies from the catalog's settings at the job's commit
//     (sw.unmap_delta_insns: instructions added to every unmap);
//   - "builder" offers `kbuild` for the catalog on x86_64 and
//     `dma-map-bench` on the kernels it built: a build job it leases is
//     answered as built, and it registers again offering that commit's
//     kernel (as a farm-agent with a kernel store does); its dma-map-bench
//     runs report the unmap latency of the commit's kernel.
// No agent offers any kernel at first. An emulator matrix of the range's
// ends with `analysis.confirm: {executor: dma-map-bench}` finds the
// throughput regression at the planted commit; the analyzer confirms it on
// real kernels the scheduler has built for it (unmap latency up = worse)
// and bisects it on real kernels to the planted commit, every step
// recorded as run by dma-map-bench on a real kernel. Without a builder the
// emulator confirms and the note says why.
#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "integration_tests/analyzer_ticks.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "proto/kernel_config.h"
#include "scheduler/server.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"
#include "testing/farm_fixture.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

constexpr char kCatalog[] = "chain-tree";
constexpr int kCommits = 9;
constexpr int kPlanted = 4;  // its sw.unmap_delta_insns, inherited by the commits after it
constexpr char kPlantedInsns[] = "3000";

std::string Id(int i) { return absl::StrFormat("%040x", 0xc0ffee00 + i); }

// One simulated agent: registers with `caps`, leases and answers jobs with
// `answer` (true: reported), heartbeats; re-registers when Offer() changed
// its capabilities.
class SimAgent {
 public:
  using Answer = std::function<void(SimAgent&, const pb::JobLease&)>;
  SimAgent(const std::string& target, std::string name, std::vector<pb::Capability> caps,
           Answer answer)
      : channel_(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())),
        stub_(pb::AgentService::NewStub(channel_)),
        name_(std::move(name)),
        caps_(std::move(caps)),
        answer_(std::move(answer)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~SimAgent() {
    stop_ = true;
    thread_.join();
  }

  // Adds a kernel offer to capability `cap`; the agent registers again.
  void Offer(const std::string& cap, const pb::KernelOffer& offer) {
    absl::MutexLock l(&mu_);
    for (pb::Capability& c : caps_)
      if (c.name() == cap) *c.add_kernels() = offer;
    changed_ = true;
  }

  void Report(const pb::JobLease& l, const std::vector<std::pair<std::string, double>>& samples) {
    pb::ReportResultRequest req;
    req.set_agent_id(agent_id_);
    *req.mutable_lease() = l.lease();
    for (const auto& [metric, value] : samples) {
      pb::Sample* s = req.add_samples();
      s->set_metric(metric);
      s->set_value(value);
      s->set_unit(absl::StrContains(metric, "latency") ? "ns" : "");
    }
    req.set_raw_format("sim");
    pb::ReportResultResponse resp;
    grpc::ClientContext ctx;
    (void)stub_->ReportResult(&ctx, req, &resp);
  }

 private:
  bool Register() {
    pb::RegisterRequest reg;
    reg.set_name(name_);
    {
      absl::MutexLock l(&mu_);
      for (const pb::Capability& c : caps_) *reg.add_capabilities() = c;
      changed_ = false;
    }
    reg.set_slots(16);
    pb::RegisterResponse rr;
    grpc::ClientContext ctx;
    if (!stub_->Register(&ctx, reg, &rr).ok()) return false;
    agent_id_ = rr.agent_id();
    session_ = rr.session();
    return true;
  }

  void Loop() {
    while (!stop_ && !Register()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    absl::Time last_beat = absl::Now();
    while (!stop_) {
      bool changed;
      {
        absl::MutexLock l(&mu_);
        changed = changed_;
      }
      if (changed) (void)Register();
      pb::LeaseJobsRequest lr;
      lr.set_agent_id(agent_id_);
      lr.set_session(session_);
      lr.set_max_jobs(16);
      pb::LeaseJobsResponse resp;
      grpc::ClientContext ctx;
      const bool ok = stub_->LeaseJobs(&ctx, lr, &resp).ok();
      if (ok) {
        for (const pb::JobLease& l : resp.leases()) answer_(*this, l);
      }
      if (absl::Now() - last_beat > absl::Seconds(2)) {
        pb::HeartbeatRequest hb;
        hb.set_agent_id(agent_id_);
        hb.set_session(session_);
        pb::HeartbeatResponse hr;
        grpc::ClientContext hctx;
        (void)stub_->Heartbeat(&hctx, hb, &hr);
        last_beat = absl::Now();
      }
      if (!ok || resp.leases().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::AgentService::Stub> stub_;
  const std::string name_;
  absl::Mutex mu_;
  std::vector<pb::Capability> caps_ ABSL_GUARDED_BY(mu_);
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  const Answer answer_;
  int64_t agent_id_ = 0;
  std::string session_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ConfirmChainPgTest : public testing::FarmTest {
 protected:
  void StartFarm() {
    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& so) {
      so.db_connections = 4;
      so.worker_threads = 4;
    });
    ASSERT_TRUE(server_ != nullptr);
    jobs_ = pb::JobService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    analysis_ = pb::AnalysisService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    std::string yaml = absl::StrCat("catalog: ", kCatalog, "\ncommits:\n");
    for (int i = 0; i < kCommits; ++i) {
      absl::StrAppend(&yaml, "  - id: ", Id(i), "\n    subject: \"commit ", i, "\"\n");
      if (i == kPlanted) {
        absl::StrAppend(&yaml, "    set: {sw.unmap_delta_insns: ", kPlantedInsns, "}\n");
      }
    }
    pb::LoadCatalogRequest req;
    req.set_yaml(yaml);
    req.set_source_name("confirm_chain_pgtest");
    pb::LoadCatalogResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = jobs_->LoadCatalog(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    pool_ = std::make_unique<storage::PgPool>(storage::PgPoolOptions{db_uri_, 2, 5});
    store_ = storage::NewPgAnalyzerStore(pool_.get());
    submitter_ = NewGrpcJobSubmitter(server_->address(), "");
  }

  void TearDown() override {
    builder_.reset();
    emu_.reset();
    FarmTest::TearDown();
  }

  static bool Planted(const pb::Job& j) {
    for (int i = kPlanted; i < kCommits; ++i)
      if (j.commit_id() == Id(i)) return true;
    return false;
  }

  // The emulator: throughput 1000 kops/s, unmap 500 ns, map 300 ns; the
  // planted commit's unmaps cost 60% more, which costs the throughput.
  void StartEmulator() {
    pb::Capability emu;
    emu.set_name("emulator");
    emu_ = std::make_unique<SimAgent>(server_->address(), "emu", std::vector<pb::Capability>{emu},
                                      [](SimAgent& a, const pb::JobLease& l) {
                                        std::mt19937_64 rng(l.job().seed() + l.job().id());
                                        std::normal_distribution<double> noise(0, 0.005);
                                        const double unmap =
                                            500 * (Planted(l.job()) ? 1.6 : 1) * (1 + noise(rng));
                                        const double map = 300 * (1 + noise(rng));
                                        a.Report(l, {{"throughput", 1e6 / (unmap + map)},
                                                     {"map_latency_mean", map},
                                                     {"unmap_latency_mean", unmap}});
                                      });
  }

  // The builder: kbuild of the catalog for x86_64, dma-map-bench on the
  // kernels it built (strict unmap 2000 ns, 2600 ns from the planted commit
  // on).
  void StartBuilder() {
    pb::Capability kbuild;
    kbuild.set_name("kbuild");
    pb::BuildOffer* b = kbuild.add_builds();
    b->set_catalog(kCatalog);
    b->add_architectures("x86_64");
    pb::Capability bench;
    bench.set_name("dma-map-bench");
    builder_ = std::make_unique<SimAgent>(
        server_->address(), "builder", std::vector<pb::Capability>{kbuild, bench},
        [this](SimAgent& a, const pb::JobLease& l) {
          const pb::Job& j = l.job();
          if (j.executor() == pb::EXECUTOR_KBUILD) {
            {
              absl::MutexLock lock(&mu_);
              built_.push_back(j.commit_id());
            }
            a.Report(l, {{"build_seconds", 1}});
            pb::KernelOffer o;
            o.set_provider("vm");
            o.set_commit(j.commit_id());
            o.set_release("6.1.0-sim");
            o.set_architecture("x86_64");
            o.set_machine_model("q35+intel-iommu");
            o.set_accel("tcg");
            auto config = j.workload().params().find(proto::kKernelConfigParam);
            if (config != j.workload().params().end()) o.set_kernel_config(config->second);
            for (pb::IommuMode m : {pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_LAZY}) o.add_modes(m);
            a.Offer("dma-map-bench", o);
            return;
          }
          std::mt19937_64 rng(j.seed() + j.id());
          std::normal_distribution<double> noise(0, 0.01);
          {
            absl::MutexLock lock(&mu_);
            ran_on_real_.insert(j.commit_id());
          }
          a.Report(l, {{"map_latency_mean", 1500 * (1 + noise(rng))},
                       {"unmap_latency_mean", (Planted(j) ? 2600 : 2000) * (1 + noise(rng))}});
        });
  }

  int64_t SubmitEmulatorMatrix() {
    const std::string spec = absl::StrCat(
        "name: prescreen\ncatalog: ", kCatalog, "\nplatform: intel-spr-2s56c\ncommits: [", Id(0),
        ", ", Id(kCommits - 1),
        "]\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n    params: {threads: 1}\n"
        "repeats: 5\nexecutor: emulator\nanalysis:\n  bisect: true\n  confirm:\n"
        "    executor: dma-map-bench\n    platform: q35-intel-iommu\n    repeats: 3\n"
        "    workload: {name: dma-map-bench, params: {seconds: 1}}\n");
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(spec);
    pb::SubmitMatrixResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = jobs_->SubmitMatrix(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.matrix().id();
  }

  // The primary regression of the matrix once decided (bisected or not
  // bisected on purpose).
  pb::Regression Decided(Analyzer& a, const std::function<bool(const pb::Regression&)>& done) {
    pb::Regression reg;
    TickUntil(
        a,
        [&] {
          pb::ListRegressionsRequest req;
          req.set_include_closed(true);
          pb::ListRegressionsResponse resp;
          grpc::ClientContext ctx;
          if (!analysis_->ListRegressions(&ctx, req, &resp).ok()) return false;
          for (const pb::Regression& r : resp.regressions()) {
            if (r.metric_rank() == "primary" && r.direction() == pb::CHANGE_DIRECTION_REGRESSION)
              reg = r;
          }
          return reg.id() != 0 && done(reg);
        },
        "the primary regression decided", absl::Seconds(180));
    return reg;
  }

  pb::Bisect BisectOf(int64_t id) {
    pb::GetBisectRequest req;
    req.set_bisect_id(id);
    pb::Bisect b;
    grpc::ClientContext ctx;
    EXPECT_TRUE(analysis_->GetBisect(&ctx, req, &b).ok());
    return b;
  }

  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AnalysisService::Stub> analysis_;
  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<AnalyzerStore> store_;
  std::unique_ptr<JobSubmitter> submitter_;
  absl::Mutex mu_;
  std::vector<std::string> built_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> ran_on_real_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SimAgent> emu_;
  std::unique_ptr<SimAgent> builder_;
};

TEST_F(ConfirmChainPgTest, AnEmulatorFindingIsConfirmedAndBisectedOnKernelsBuiltForIt) {
  ASSERT_NO_FATAL_FAILURE(StartFarm());
  StartEmulator();
  StartBuilder();
  const int64_t matrix = SubmitEmulatorMatrix();
  ASSERT_NE(matrix, 0);
  Analyzer a(store_.get(), submitter_.get(), nullptr, {}, AnalyzerOptions{});
  const pb::Regression reg = Decided(a, [](const pb::Regression& r) {
    return r.state() == pb::REGRESSION_STATE_REJECTED || !r.culprit_id().empty();
  });
  ASSERT_NE(reg.id(), 0);
  EXPECT_EQ(reg.metric(), "throughput");
  EXPECT_EQ(reg.state(), pb::REGRESSION_STATE_CONFIRMED) << reg.confirm_note();
  EXPECT_EQ(reg.confirmed_by(), "dma-map-bench") << reg.confirm_note();
  // The metric the finding called for, judged by its own direction, on
  // kernels nobody offered before.
  EXPECT_TRUE(absl::StrContains(reg.confirm_note(),
                                "dma-map-bench on real kernels (q35-intel-iommu, dma-map-bench): "
                                "unmap_latency_mean +"))
      << reg.confirm_note();
  EXPECT_TRUE(absl::StrContains(reg.confirm_note(), "confirmed; kernels built for it"))
      << reg.confirm_note();
  EXPECT_EQ(reg.culprit_id(), Id(kPlanted));
  EXPECT_EQ(reg.last_good(), Id(kPlanted - 1));

  // Every step ran on a real kernel built for it.
  const pb::Bisect b = BisectOf(reg.bisect_id());
  EXPECT_EQ(b.state(), "done");
  ASSERT_GE(b.steps_size(), 2);
  std::set<std::string> stepped;
  for (const pb::BisectStep& s : b.steps()) {
    EXPECT_NE(s.verdict(), "pending") << s.step();
    if (s.step() > 0 && s.verdict() != "skip") stepped.insert(s.commit_id());
  }
  // Each step records where it ran: dma-map-bench, on a real kernel.
  const pqxx::result where = SqlRows(absl::StrCat(
      "SELECT step, executor, real_kernel FROM bisect_steps WHERE bisect_id = ", b.id()));
  ASSERT_EQ(where.size(), static_cast<size_t>(b.steps_size()));
  for (const pqxx::row& r : where) {
    EXPECT_EQ(r[1].as<std::string>(), "dma-map-bench") << "step " << r[0].as<int>();
    EXPECT_TRUE(r[2].as<bool>()) << "step " << r[0].as<int>();
  }
  // The step matrices are real dma-map-bench matrices; every kernel they
  // ran was built once, by a build job the scheduler's submit planned.
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM bisect_steps s JOIN matrices m ON m.id = "
                             "s.matrix_id WHERE s.bisect_id = ",
                             b.id(), " AND m.executor <> 5")),
            0);
  absl::MutexLock lock(&mu_);
  const std::set<std::string> built(built_.begin(), built_.end());
  EXPECT_EQ(built.size(), built_.size()) << "a kernel was built twice";
  for (const std::string& c : stepped) EXPECT_TRUE(built.contains(c)) << c;
  EXPECT_TRUE(built.contains(Id(0)) && built.contains(Id(kCommits - 1)));
  EXPECT_EQ(ran_on_real_, built);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE executor = 4"),
            static_cast<int64_t>(built.size()));
}

// No agent offers the kernels and none builds the catalog: the emulator
// confirms, the note says why, and no build is asked for.
TEST_F(ConfirmChainPgTest, WithoutABuilderTheEmulatorConfirmsAndSaysWhy) {
  ASSERT_NO_FATAL_FAILURE(StartFarm());
  StartEmulator();
  ASSERT_NE(SubmitEmulatorMatrix(), 0);
  Analyzer a(store_.get(), submitter_.get(), nullptr, {}, AnalyzerOptions{});
  const pb::Regression reg = Decided(a, [](const pb::Regression& r) {
    return r.state() != pb::REGRESSION_STATE_SUSPECTED && !r.confirmed_by().empty();
  });
  EXPECT_EQ(reg.confirmed_by(), "emulator");
  EXPECT_EQ(reg.confirm_note(),
            absl::StrCat("not confirmed on real kernels: no live agent offers a dma-map-bench "
                         "kernel for ",
                         Id(0), " in strict, ", Id(kCommits - 1),
                         " in strict, and no registered agent builds catalog ", kCatalog,
                         " for x86_64; confirmed on the emulator"));
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE executor = 4"), 0);
}

}  // namespace
}  // namespace farm::analyzer
