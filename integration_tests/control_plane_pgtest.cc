// The scheduler under load and faults: the real farm-scheduler binary (and
// farm-agent / farmctl where named) against a real PostgreSQL.
//  - four clients loading 10,000-commit catalogs over and over while a long
//    job heartbeats: its lease is never reaped (lease renewals have their
//    own threads and connections);
//  - the scheduler SIGSTOPped for 2 x TTL mid-job: the healthy lease is not
//    reaped when it resumes (reaper grace);
//  - a LeaseJobs whose caller left before the claim committed: no lease
//    reaches anyone and no attempt is spent;
//  - `farmctl watch` against a frozen (SIGSTOPped) scheduler ends with an
//    error within 30 s;
//  - a NUL in a sample name: the scheduler refuses the result
//    (INVALID_ARGUMENT), the agent fails that job once with the reason and
//    runs the next one;
//  - eight results finished together share report calls, each settled on
//    its own (one poisoned item fails alone, the rest stored once);
//  - health: NOT_SERVING while PostgreSQL is down, SERVING after.
// Waits are bounded polls (PollUntil); the only time bound asserted is the
// 30 s the watch property names.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "testing/binaries.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace {

namespace pb = ::iommufarm::v1;
using ::farm::testing::BinaryPath;
using ::farm::testing::PollUntil;
using ::farm::testing::SpawnLogged;
using Proc = ::farm::testing::ChildProcess;

const std::string kSpec = R"(
catalog: linux-iommu
platform: intel-vtd-snb16c
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.001}
executor: emulator
)";

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

class ControlPlanePgTest : public farm::testing::FarmTest {
 protected:
  std::string Address() const { return SchedulerAddress(); }

  void StartScheduler(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags{
        "--metrics",       "127.0.0.1:0", "--lease-ttl",   "2s",
        "--retry-backoff", "200ms",       "--catalog-dir", FARM_SOURCE_DIR "/emu/model/catalogs"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    scheduler_ = &StartSchedulerProcess(farm::testing::FarmMode::kPlaintext, flags);
    channel_ = grpc::CreateChannel(Address(), grpc::InsecureChannelCredentials());
    jobs_ = pb::JobService::NewStub(channel_);
    agents_ = pb::AgentService::NewStub(channel_);
  }

  std::unique_ptr<Proc> StartAgent(const std::string& name, int slots = 1) {
    return FarmTest::StartAgent(
        {.name = name, .slots = slots, .metrics = true, .drain_timeout = absl::Seconds(1)});
  }

  int64_t Submit(const std::string& extra_yaml) {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(kSpec + extra_yaml);
    pb::SubmitMatrixResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(60)));
    grpc::Status st = jobs_->SubmitMatrix(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.matrix().id();
  }

  absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) {
    pb::GetMatrixRequest req;
    req.set_matrix_id(id);
    pb::Matrix m;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    grpc::Status st = jobs_->GetMatrix(&ctx, req, &m);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    return m;
  }

  pb::Matrix WaitDone(int64_t id, absl::Duration timeout) {
    pb::Matrix last;
    absl::Status st = PollUntil(
        [&]() -> absl::StatusOr<bool> {
          auto m = GetMatrix(id);
          if (!m.ok()) return false;
          last = *m;
          return m->state() != pb::MATRIX_STATE_RUNNING;
        },
        timeout, "matrix finished", absl::Milliseconds(250));
    EXPECT_TRUE(st.ok()) << st << " last counts: " << last.counts().ShortDebugString();
    return last;
  }

  void WaitLeased(int64_t id, int n) {
    absl::Status st = PollUntil(
        [&]() -> absl::StatusOr<bool> {
          auto m = GetMatrix(id);
          return m.ok() && m->counts().leased() == n;
        },
        absl::Seconds(120), "jobs leased", absl::Milliseconds(50));
    ASSERT_TRUE(st.ok()) << st;
  }

  Proc* scheduler_ = nullptr;  // the fixture's child scheduler
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AgentService::Stub> agents_;
};

std::string BigCatalog(const std::string& name, int commits) {
  std::string y = absl::StrCat("catalog: ", name, "\ncommits:\n");
  for (int i = 0; i < commits; ++i) {
    absl::StrAppend(&y, "  - id: ", absl::StrFormat("%012x", 0x100000000000LL + i),
                    "\n    subject: \"commit ", i, "\"\n");
    if (i % 100 == 0) absl::StrAppend(&y, "    set: {iova.rcache.mag_size: ", 64 + i % 7, "}\n");
  }
  return y;
}

TEST_F(ControlPlanePgTest, LeaseOfALongJobSurvivesFourConcurrentBigCatalogLoads) {
  // Two database connections, as in the measurement that reaped a healthy
  // lease: every expensive call competes with the heartbeats for them.
  StartScheduler({"--db-connections", "2"});
  auto agent = StartAgent("longjob");
  const int64_t mid = Submit(R"(
name: long
commits: [v5.10]
modes: [strict]
repeats: 1
set: {agent.hold_ms: 12000}
)");
  ASSERT_GT(mid, 0);
  WaitLeased(mid, 1);
  std::atomic<bool> stop{false};
  std::atomic<int> loaded{0}, shed{0}, other{0};
  std::vector<std::thread> loaders;
  for (int t = 0; t < 4; ++t) {
    loaders.emplace_back([&, t] {
      pb::LoadCatalogRequest req;
      req.set_yaml(BigCatalog(absl::StrCat("big", t), 10000));
      req.set_source_name(absl::StrCat("big", t, ".yaml"));
      req.set_replace(true);
      auto stub = pb::JobService::NewStub(
          grpc::CreateChannel(Address(), grpc::InsecureChannelCredentials()));
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(In(absl::Seconds(120)));
        pb::LoadCatalogResponse resp;
        grpc::Status st = stub->LoadCatalog(&ctx, req, &resp);
        if (st.ok()) {
          ++loaded;
        } else if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++shed;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        } else {
          ++other;
        }
      }
    });
  }
  pb::Matrix m = WaitDone(mid, absl::Seconds(180));
  stop.store(true);
  for (std::thread& t : loaders) t.join();
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_GE(loaded.load() + shed.load(), 4) << "the load never happened";
  EXPECT_EQ(other.load(), 0);
  // Leased once, never reaped: one attempt, its result from that attempt.
  const std::string where = absl::StrCat(" WHERE matrix_id = ", mid);
  EXPECT_EQ(Sql("SELECT max(attempt) FROM jobs" + where), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM results" + where + " AND attempt = 1"), 1);
  EXPECT_TRUE(agent->Alive()) << agent->Err();
  std::cerr << "catalog loads: " << loaded.load() << " done, " << shed.load() << " shed\n";
}

TEST_F(ControlPlanePgTest, SchedulerStoppedForTwoTtlsReapsNoHealthyLease) {
  StartScheduler();
  auto agent = StartAgent("steady");
  const int64_t mid = Submit(R"(
name: frozen-scheduler
commits: [v5.10]
modes: [lazy]
repeats: 1
set: {agent.hold_ms: 9000}
)");
  ASSERT_GT(mid, 0);
  WaitLeased(mid, 1);
  scheduler_->Signal(SIGSTOP);
  absl::SleepFor(absl::Seconds(5));  // 2 x TTL (2 s) and then some
  scheduler_->Signal(SIGCONT);
  pb::Matrix m = WaitDone(mid, absl::Seconds(120));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  const std::string where = absl::StrCat(" WHERE matrix_id = ", mid);
  EXPECT_EQ(Sql("SELECT max(attempt) FROM jobs" + where), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM results" + where + " AND attempt = 1"), 1);
  EXPECT_NE(scheduler_->Err().find("was paused for"), std::string::npos) << scheduler_->Err();
}

TEST_F(ControlPlanePgTest, LeaseJobsPastItsDeadlineBurnsNoAttempt) {
  StartScheduler();
  const int64_t mid = Submit(R"(
name: departed
commits: [v5.10]
modes: [off, strict, lazy]
repeats: 1
)");
  ASSERT_GT(mid, 0);
  pb::RegisterRequest reg;
  reg.set_name("impatient");
  reg.set_slots(3);
  reg.add_capabilities()->set_name("emulator");
  pb::RegisterResponse agent;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(10)));
    ASSERT_TRUE(agents_->Register(&ctx, reg, &agent).ok());
  }
  // Hold the claim up in the database past the caller's deadline.
  pqxx::connection locker(db_uri_);
  auto lock = std::make_unique<pqxx::work>(locker);
  lock->exec("LOCK TABLE agents IN ACCESS EXCLUSIVE MODE");
  pb::LeaseJobsRequest lreq;
  lreq.set_agent_id(agent.agent_id());
  lreq.set_session(agent.session());
  lreq.set_max_jobs(3);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(1)));
    pb::LeaseJobsResponse lresp;
    grpc::Status st = agents_->LeaseJobs(&ctx, lreq, &lresp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  }
  absl::SleepFor(absl::Seconds(1));
  lock->abort();
  lock.reset();
  // The handler runs on after the lock: it must hand the claim back.
  absl::Status released = scheduler_->WaitFor("caller left while leasing", true, absl::Seconds(30));
  EXPECT_TRUE(released.ok()) << released << "\n" << scheduler_->Err();
  const std::string where = absl::StrCat(" WHERE matrix_id = ", mid);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs" + where + " AND state = 1 AND attempt = 0"), 3);
  // And a caller that waits gets them, as first attempts.
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(30)));
  pb::LeaseJobsResponse lresp;
  ASSERT_TRUE(agents_->LeaseJobs(&ctx, lreq, &lresp).ok());
  ASSERT_EQ(lresp.leases_size(), 3);
  for (const pb::JobLease& l : lresp.leases()) EXPECT_EQ(l.lease().attempt(), 1);
}

TEST_F(ControlPlanePgTest, WatchAgainstAFrozenSchedulerErrorsWithin30Seconds) {
  StartScheduler();
  const int64_t mid = Submit(R"(
name: watched
commits: [v5.10]
modes: [strict]
repeats: 1
)");
  ASSERT_GT(mid, 0);
  auto watch = SpawnLogged(
      {BinaryPath("FARMCTL_BIN", FARMCTL_BIN), "--server", Address(), "watch", std::to_string(mid)},
      TestDir() + "/watch");
  // No agent: the matrix stays running and the stream open.
  absl::Status st = PollUntil([&]() -> absl::StatusOr<bool> { return !watch->Out().empty(); },
                              absl::Seconds(30), "first progress line", absl::Milliseconds(100));
  ASSERT_TRUE(st.ok()) << st << "\n" << watch->Err();
  scheduler_->Signal(SIGSTOP);
  st = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        return watch->Err().find("no progress from the server") != std::string::npos;
      },
      absl::Seconds(30), "farmctl watch failing", absl::Milliseconds(100));
  scheduler_->Signal(SIGCONT);
  ASSERT_TRUE(st.ok()) << st << "\nstdout:\n" << watch->Out() << "\nstderr:\n" << watch->Err();
  EXPECT_NE(watch->Wait(), 0) << watch->Err();  // farmctl exit status 1
}

TEST_F(ControlPlanePgTest, NulInASampleNameFailsTheJobOnceAndTheAgentMovesOn) {
  StartScheduler();
  const int64_t mid = Submit(R"(
name: poison
commits: [v5.10]
modes: [strict]
repeats: 2
)");
  ASSERT_GT(mid, 0);
  std::atomic<int> runs{0};
  class Poison final : public farm::agent::Executor {
   public:
    explicit Poison(std::atomic<int>* runs) : runs_(runs) {}
    std::string capability() const override { return "emulator"; }
    std::string version() const override { return "poison-1"; }
    absl::StatusOr<farm::agent::ExecutionResult> Run(const pb::Job&,
                                                     farm::agent::CancelToken&) override {
      farm::agent::ExecutionResult r;
      pb::Sample s;
      s.set_metric(runs_->fetch_add(1) == 0 ? std::string("through\0put", 11) : "throughput");
      s.set_value(1.0);
      s.set_unit("ops/s");
      r.samples.push_back(s);
      r.raw_format = "none";
      return r;
    }

   private:
    std::atomic<int>* const runs_;
  };
  farm::agent::AgentOptions opts;
  opts.client.server = Address();
  opts.name = "poisoned";
  opts.slots = 1;
  opts.drain_timeout = absl::Seconds(1);
  std::vector<std::unique_ptr<farm::agent::Executor>> executors;
  executors.push_back(std::make_unique<Poison>(&runs));
  farm::agent::Agent agent(opts, std::move(executors), nullptr);
  std::thread run([&] { (void)agent.Run(); });
  pb::Matrix m = WaitDone(mid, absl::Seconds(120));
  agent.Shutdown();
  run.join();
  EXPECT_EQ(m.counts().failed(), 1) << m.counts().ShortDebugString();
  EXPECT_EQ(m.counts().succeeded(), 1) << m.counts().ShortDebugString();
  EXPECT_EQ(runs.load(), 2);  // ran once each: the poisoned one was not retried
  const std::string where = absl::StrCat(" WHERE matrix_id = ", mid, " AND state = 4");
  EXPECT_EQ(Sql("SELECT max(attempt) FROM jobs" + where), 1);
  const std::string reason = SqlText("SELECT failure_reason FROM jobs" + where);
  EXPECT_NE(reason.find("samples[0].metric"), std::string::npos) << reason;
  EXPECT_NE(reason.find("NUL"), std::string::npos) << reason;
  EXPECT_EQ(agent.stats().failed, 1);
  EXPECT_EQ(agent.stats().succeeded, 1);
}

// Eight jobs that finish together on an eight-slot agent share report
// calls (ReportResults), and each is still settled on its own: the one
// with a NUL in a sample name fails once with the reason, the other seven
// are stored exactly once.
TEST_F(ControlPlanePgTest, ResultsFinishedTogetherShareReportCallsEachSettledOnce) {
  StartScheduler();
  const int64_t mid = Submit(R"(
name: together
commits: [v5.10]
modes: [strict]
repeats: 8
)");
  ASSERT_GT(mid, 0);
  constexpr int kJobs = 8;
  struct Wave {
    absl::Mutex mu;
    int started ABSL_GUARDED_BY(mu) = 0;
  } wave;
  class Together final : public farm::agent::Executor {
   public:
    explicit Together(Wave* wave) : wave_(wave) {}
    std::string capability() const override { return "emulator"; }
    std::string version() const override { return "together-1"; }
    absl::StatusOr<farm::agent::ExecutionResult> Run(const pb::Job&,
                                                     farm::agent::CancelToken&) override {
      int me;
      {
        absl::MutexLock lock(&wave_->mu);
        me = wave_->started++;
        // All eight return at once (bounded: a lost job must not hang the test).
        auto all = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(wave_->mu) { return wave_->started >= kJobs; };
        wave_->mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(60));
      }
      farm::agent::ExecutionResult r;
      pb::Sample s;
      s.set_metric(me == 0 ? std::string("through\0put", 11) : "throughput");
      s.set_value(1.0 + me);
      s.set_unit("ops/s");
      r.samples.push_back(s);
      r.raw_output = std::string(1000, 'a' + me);
      r.raw_format = "none";
      return r;
    }

   private:
    Wave* const wave_;
  };
  farm::agent::AgentOptions opts;
  opts.client.server = Address();
  opts.name = "together";
  opts.slots = kJobs;
  opts.drain_timeout = absl::Seconds(1);
  std::vector<std::unique_ptr<farm::agent::Executor>> executors;
  executors.push_back(std::make_unique<Together>(&wave));
  farm::agent::Agent agent(opts, std::move(executors), nullptr);
  std::thread run([&] { (void)agent.Run(); });
  pb::Matrix m = WaitDone(mid, absl::Seconds(120));
  agent.Shutdown();
  run.join();
  EXPECT_EQ(m.counts().failed(), 1) << m.counts().ShortDebugString();
  EXPECT_EQ(m.counts().succeeded(), kJobs - 1) << m.counts().ShortDebugString();
  {
    absl::MutexLock lock(&wave.mu);
    EXPECT_EQ(wave.started, kJobs);  // none ran twice
  }
  const std::string of = absl::StrCat(" WHERE matrix_id = ", mid);
  EXPECT_EQ(Sql("SELECT count(*) FROM results" + of), kJobs - 1);
  EXPECT_EQ(Sql("SELECT count(DISTINCT job_id) FROM results" + of), kJobs - 1);
  EXPECT_EQ(Sql("SELECT max(attempt) FROM jobs" + of), 1);
  // A raw output that long is stored out of the row (lib/storage/pg/pg_raw_outputs.h).
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM results r JOIN raw_outputs o ON o.digest = "
                             "r.raw_digest WHERE r.matrix_id = ",
                             mid, " AND o.size = 1000")),
            kJobs - 1);
  const std::string reason = SqlText("SELECT failure_reason FROM jobs" + of + " AND state = 4");
  EXPECT_NE(reason.find("samples[0].metric"), std::string::npos) << reason;
  EXPECT_NE(reason.find("NUL"), std::string::npos) << reason;
  const farm::agent::Agent::Stats stats = agent.stats();
  EXPECT_EQ(stats.succeeded, kJobs - 1);
  EXPECT_EQ(stats.failed, 1);
  std::cerr << kJobs << " results finished together went out in " << stats.report_calls
            << " report calls\n";
  // Eight results went out; one call each would be eight.
  EXPECT_LT(stats.report_calls, kJobs) << "no two results shared a call";
  EXPECT_GE(stats.report_calls, 1);
}

TEST_F(ControlPlanePgTest, HealthIsNotServingWhilePostgresIsDown) {
  StartScheduler();
  // grpc.health.v1.Health/Check with an empty request; the answer's field 1
  // is the status (1 SERVING, 2 NOT_SERVING).
  grpc::GenericStub generic(channel_);
  const auto status = [&]() -> absl::StatusOr<bool> {
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    grpc::ClientContext ctx;
    ctx.set_deadline(In(absl::Seconds(5)));
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) { done.set_value(s); });
    grpc::Status st = done.get_future().get();
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable answer");
    std::string bytes;
    for (const auto& sl : slices)
      bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    return bytes == std::string("\x08\x01", 2);
  };
  const auto wait_for = [&](bool serving, const char* what) {
    return PollUntil(
        [&]() -> absl::StatusOr<bool> {
          absl::StatusOr<bool> s = status();
          return s.ok() && *s == serving;
        },
        absl::Seconds(60), what, absl::Milliseconds(200));
  };
  ASSERT_TRUE(wait_for(true, "SERVING").ok());
  ASSERT_TRUE(Postgres().Stop().ok());
  absl::Status st = wait_for(false, "NOT_SERVING with PostgreSQL down");
  EXPECT_TRUE(st.ok()) << st;
  ASSERT_TRUE(Postgres().Restart().ok());
  st = wait_for(true, "SERVING again");
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
