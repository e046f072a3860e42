// Multi-process fault tests of the farm: the real
// farm-scheduler and farm-agent binaries against a real PostgreSQL.
//  - a 2,000-job matrix run by 4 agents: every job done exactly once, no
//    duplicate result;
//  - kill -9 of an agent mid-job: the jobs are re-leased after the TTL and
//    finish, one result row each;
//  - a SIGSTOPped agent resumed after its lease was re-granted: its work is
//    not stored (heartbeat revoked / result rejected);
//  - scheduler killed and restarted mid-matrix: the matrix completes; killed
//    at five seeded random instants in a row: no duplicate, no orphan lease;
//  - two schedulers over one database, agents given both addresses: one is
//    killed for good mid-matrix and the other finishes it;
//  - PostgreSQL restarted, or every farm backend terminated
//    (pg_terminate_backend), mid-matrix: nothing lost, nothing duplicated.
// Every case runs twice (Transport/FarmFaultPgTest.CASE/plaintext and /mtls):
// once on a plaintext loopback farm, once as docs/security.md deploys one --
// the scheduler with its server certificate, the farm CA (client
// certificates required) and a bootstrap admin token file; each agent with
// its own agent certificate (scripts/farm-certs, O=agent, CN = its --name);
// the test submitting and polling with a submitter token the admin made, over
// a submitter certificate. Flags are passed explicitly: the harness clears
// the caller's FARM_* variables.
// Waits are bounded polls (PollUntil), never timing assertions.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace {

namespace pb = ::iommufarm::v1;
using ::farm::testing::PollUntil;

using Proc = ::farm::testing::ChildProcess;

const std::string kSpec = R"(
catalog: linux-iommu
platform: intel-vtd-snb16c
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.001}
executor: emulator
)";

enum class Transport { kPlaintext, kMtls };

std::string TransportName(const ::testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kMtls ? "mtls" : "plaintext";
}

// gtest prints the parameter of a failed case with this.
void PrintTo(Transport t, std::ostream* os) {
  *os << (t == Transport::kMtls ? "mtls" : "plaintext");
}

class FarmFaultPgTest : public farm::testing::FarmTestWithParam<Transport> {
 protected:
  bool Mtls() const { return GetParam() == Transport::kMtls; }

  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    StartScheduler();
    client_ = RoleClient("submitter");
    if (Mtls()) {
      // A submitter API token made by the admin (certificate + bootstrap
      // token), as `farmctl token create --role submitter` does.
      client_.token = CreateToken("fault-ci", "submitter");
      ASSERT_FALSE(client_.token.empty());
    }
    UseClient();
  }

  // The test's own calls go to client_.server, with its TLS and token.
  void UseClient() {
    channel_ = farm::client::MakeChannel(client_);
    jobs_ = pb::JobService::NewStub(channel_);
  }

  void StartScheduler() {
    scheduler_ = &StartSchedulerProcess(
        Mtls() ? farm::testing::FarmMode::kDeployed : farm::testing::FarmMode::kPlaintext,
        {"--metrics", "127.0.0.1:0", "--lease-ttl", "2s", "--retry-backoff", "200ms",
         "--catalog-dir", FARM_SOURCE_DIR "/emu/model/catalogs"});
  }

  // `scheduler` defaults to this fixture's one scheduler. Under mTLS the
  // agent presents its own certificate (CN = name, O=agent): the scheduler
  // binds an agent principal to its name.
  std::unique_ptr<Proc> StartAgent(const std::string& name, int slots = 4,
                                   std::string scheduler = "") {
    return FarmTest::StartAgent({.name = name,
                                 .slots = slots,
                                 .metrics = true,
                                 .drain_timeout = absl::Seconds(1),
                                 .scheduler = scheduler});
  }

  int64_t Submit(const std::string& extra_yaml) {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(kSpec + extra_yaml);
    pb::SubmitMatrixResponse resp;
    auto ctx = farm::client::NewContext(client_, absl::Seconds(60));
    grpc::Status st = jobs_->SubmitMatrix(ctx.get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.matrix().id();
  }

  // The fault tests' matrix: 2 commits x 3 modes x 50 repeats = 300 jobs,
  // each holding its agent slot for `hold_ms`.
  int64_t SubmitThreeHundred(const std::string& name, int hold_ms) {
    return Submit(absl::StrCat("name: ", name,
                               "\ncommits: [v4.6, v5.10]\nmodes: [off, strict, lazy]\n"
                               "repeats: 50\nset: {agent.hold_ms: ",
                               hold_ms, "}\n"));
  }

  absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) {
    pb::GetMatrixRequest req;
    req.set_matrix_id(id);
    pb::Matrix m;
    auto ctx = farm::client::NewContext(client_, absl::Seconds(10));
    grpc::Status st = jobs_->GetMatrix(ctx.get(), req, &m);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    return m;
  }

  // Bounded wait until the matrix leaves RUNNING; UNAVAILABLE while
  // something restarts just means "ask again".
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

  void WaitCount(int64_t id, const std::function<bool(const pb::MatrixCounts&)>& pred,
                 const std::string& what) {
    absl::Status st = PollUntil(
        [&]() -> absl::StatusOr<bool> {
          auto m = GetMatrix(id);
          return m.ok() && pred(m->counts());
        },
        absl::Seconds(120), what, absl::Milliseconds(50));
    ASSERT_TRUE(st.ok()) << st;
  }

  // The exactly-once invariant, checked in the database itself.
  void ExpectExactlyOnce(int64_t mid, int64_t total) {
    const std::string m = std::to_string(mid);
    EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE matrix_id = " + m), total);
    EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE matrix_id = " + m + " AND state = 3"), total);
    EXPECT_EQ(Sql("SELECT count(*) FROM results WHERE matrix_id = " + m), total);
    EXPECT_EQ(Sql("SELECT count(DISTINCT job_id) FROM results WHERE matrix_id = " + m), total);
    // The stored result is the one of the job's final attempt.
    EXPECT_EQ(Sql("SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id AND "
                  "j.attempt = r.attempt WHERE r.matrix_id = " +
                  m),
              total);
    // No lease outlives its job.
    EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE matrix_id = " + m +
                  " AND (state = 2 OR lease_expires_at IS NOT NULL AND state <> 3)"),
              0);
  }

  farm::client::ClientOptions client_;
  Proc* scheduler_ = nullptr;  // the fixture's child scheduler
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
};

TEST_P(FarmFaultPgTest, TwoThousandJobsFourAgentsExactlyOnce) {
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 4; ++i) agents.push_back(StartAgent("a" + std::to_string(i)));
  const int64_t mid = Submit(R"(
name: fault-2000
commits: [v4.6, 9257b4a206fc, v5.10]
modes: [off, passthrough, strict, lazy]
repeats: 167
)");
  ASSERT_GT(mid, 0);
  pb::Matrix m = WaitDone(mid, absl::Seconds(300));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(m.counts().total(), 2004);
  EXPECT_EQ(m.counts().succeeded(), 2004);
  ExpectExactlyOnce(mid, 2004);
  // Work was spread over the agents.
  EXPECT_GE(
      Sql("SELECT count(DISTINCT agent) FROM results WHERE matrix_id = " + std::to_string(mid)), 2);
}

TEST_P(FarmFaultPgTest, KilledAgentsJobsAreReleasedAfterTtlAndFinishOnce) {
  auto a1 = StartAgent("victim");
  const int64_t mid = Submit(R"(
name: kill9
commits: [v5.10]
modes: [strict]
repeats: 4
set: {agent.hold_ms: 4000}
)");
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.leased() == 4; }, "4 jobs leased");
  a1->Signal(SIGKILL);
  a1->Wait();
  auto a2 = StartAgent("survivor");
  pb::Matrix m = WaitDone(mid, absl::Seconds(120));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 4);
  EXPECT_EQ(Sql("SELECT count(*) FROM results WHERE agent = 'survivor' AND attempt = 2"), 4);
}

TEST_P(FarmFaultPgTest, StoppedAgentResumedAfterRegrantIsFenced) {
  auto a1 = StartAgent("sleeper");
  const int64_t mid = Submit(R"(
name: sigstop
commits: [v5.10]
modes: [lazy]
repeats: 1
set: {agent.hold_ms: 1500}
)");
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.leased() == 1; }, "job leased");
  a1->Signal(SIGSTOP);
  auto a2 = StartAgent("waker");
  // The lease expires (TTL 2 s), the reaper requeues it, "waker" takes it.
  absl::Status st = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        return Sql("SELECT count(*) FROM jobs WHERE matrix_id = " + std::to_string(mid) +
                   " AND attempt = 2 AND lease_owner = 'waker'") == 1;
      },
      absl::Seconds(60), "job re-granted to waker");
  ASSERT_TRUE(st.ok()) << st;
  // "sleeper" wakes with an old lease whose hold is long over: its
  // heartbeat is answered revoked and its result, if sent, is rejected.
  a1->Signal(SIGCONT);
  pb::Matrix m = WaitDone(mid, absl::Seconds(60));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM results WHERE agent = 'waker' AND attempt = 2"), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM results WHERE agent = 'sleeper'"), 0);
  EXPECT_TRUE(a1->Alive()) << a1->Err();
}

TEST_P(FarmFaultPgTest, SchedulerKilledAndRestartedMidMatrix) {
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(StartAgent("r" + std::to_string(i)));
  const int64_t mid = SubmitThreeHundred("sched-restart", 20);
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.succeeded() >= 40; }, "40 done");
  scheduler_->Signal(SIGKILL);
  scheduler_->Wait();
  StartScheduler();
  pb::Matrix m = WaitDone(mid, absl::Seconds(180));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 300);
}

TEST_P(FarmFaultPgTest, SchedulerKilledAtFiveSeededRandomInstants) {
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(StartAgent("k" + std::to_string(i)));
  // 300 jobs of 600 ms on 12 slots: ~15 s of work, longer than five kills
  // and restarts take now that agents reconnect within the bound.
  const int64_t mid = SubmitThreeHundred("sched-kill5", 600);
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.succeeded() >= 10; }, "10 done");
  // The instants fall anywhere in the request flow (claim, report, reaper);
  // the seed is printed so a failing sequence can be replayed.
  const uint32_t seed = 20261201;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pause_ms(100, 1500);
  for (int kill = 0; kill < 5; ++kill) {
    const int ms = pause_ms(rng);
    absl::SleepFor(absl::Milliseconds(ms));
    SCOPED_TRACE(absl::StrCat("seed ", seed, " kill ", kill, " after ", ms, " ms"));
    // Each kill must land mid-matrix, or the test proves nothing.
    // (The first call after a restart may meet the old connection's end.)
    pb::Matrix before;
    ASSERT_TRUE(PollUntil(
                    [&]() -> absl::StatusOr<bool> {
                      absl::StatusOr<pb::Matrix> m = GetMatrix(mid);
                      if (m.ok()) before = *m;
                      return m.ok();
                    },
                    absl::Seconds(30), "scheduler answers", absl::Milliseconds(50))
                    .ok());
    ASSERT_EQ(before.state(), pb::MATRIX_STATE_RUNNING) << before.counts().ShortDebugString();
    scheduler_->Signal(SIGKILL);
    scheduler_->Wait();
    StartScheduler();
  }
  pb::Matrix m = WaitDone(mid, absl::Seconds(240));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 300);
}

TEST_P(FarmFaultPgTest, TwoSchedulersOneDatabaseSurviveLosingOne) {
  const int port2 = farm::testing::PickFreePort();
  ASSERT_GT(port2, 0);
  std::unique_ptr<Proc> second = SpawnSchedulerProcess(port2);
  const std::string both = absl::StrCat(SchedulerAddress(), ",127.0.0.1:", port2);
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(StartAgent("t" + std::to_string(i), 4, both));
  // The test's own client fails over too, as farmctl does with --server A,B.
  client_.server = both;
  ASSERT_TRUE(farm::client::ChannelTarget(both).ok());
  UseClient();
  const int64_t mid = SubmitThreeHundred("two-schedulers", 20);
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.succeeded() >= 40; }, "40 done");
  scheduler_->Signal(SIGKILL);
  scheduler_->Wait();
  pb::Matrix m = WaitDone(mid, absl::Seconds(180));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 300);
  EXPECT_TRUE(second->Alive()) << second->Err();
}

TEST_P(FarmFaultPgTest, EveryFarmBackendTerminatedMidMatrix) {
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(StartAgent("b" + std::to_string(i)));
  const int64_t mid = SubmitThreeHundred("pg-terminate", 20);
  for (int threshold : {40, 150}) {
    WaitCount(
        mid, [&](const pb::MatrixCounts& c) { return c.succeeded() >= threshold; },
        absl::StrCat(threshold, " done"));
    // Every connection of the farm's database but this one: pool, listener
    // and any in-flight transaction.
    EXPECT_GT(Sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                  "WHERE datname = current_database() AND pid <> pg_backend_pid()"),
              0);
  }
  pb::Matrix m = WaitDone(mid, absl::Seconds(180));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 300);
  EXPECT_TRUE(scheduler_->Alive()) << scheduler_->Err();
}

TEST_P(FarmFaultPgTest, PostgresRestartedMidMatrix) {
  std::vector<std::unique_ptr<Proc>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(StartAgent("p" + std::to_string(i)));
  const int64_t mid = SubmitThreeHundred("pg-restart", 20);
  WaitCount(
      mid, [](const pb::MatrixCounts& c) { return c.succeeded() >= 40; }, "40 done");
  ASSERT_TRUE(Postgres().Restart().ok());
  pb::Matrix m = WaitDone(mid, absl::Seconds(180));
  EXPECT_EQ(m.state(), pb::MATRIX_STATE_COMPLETED);
  ExpectExactlyOnce(mid, 300);
  EXPECT_TRUE(scheduler_->Alive()) << scheduler_->Err();
}

INSTANTIATE_TEST_SUITE_P(Transport, FarmFaultPgTest,
                         ::testing::Values(Transport::kPlaintext, Transport::kMtls), TransportName);

}  // namespace
