// The deployed control plane (mTLS, agent certificates) across a scheduler
// restart with a short lease TTL: an agent that keeps heartbeating over its
// one channel reaches the new scheduler within the reconnect bound, and the
// reaper's grace covers that wait, so its lease survives the restart.
#include <atomic>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/client/retry.h"
#include "lib/service/reconnect.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

const char* const kCatalog = R"(
catalog: restart-test
commits:
  - id: v5.10
    subject: "Linux 5.10"
)";

const char* const kSpec = R"(
name: restart-test
catalog: restart-test
platform: intel-vtd-2s12c
commits: [v5.10]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.01}
executor: emulator
)";

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

class RestartPgTest : public testing::MtlsFarmTest {};

// Heartbeats `lease` the way farm-agent does (agent/agent_session.cc): every
// interval, after a failure again after min(backoff, interval), over one
// channel for its whole life.
class Heartbeater {
 public:
  Heartbeater(const client::ClientOptions& c, pb::HeartbeatRequest request, absl::Duration interval)
      : options_(c),
        stub_(pb::AgentService::NewStub(client::MakeChannel(c))),
        request_(std::move(request)),
        interval_(interval),
        thread_([this] { Loop(); }) {}
  ~Heartbeater() {
    stop_ = true;
    thread_.join();
  }
  int64_t ok() const { return ok_.load(); }
  int64_t revoked() const { return revoked_.load(); }
  absl::Time last_ok() const { return absl::FromUnixNanos(last_ok_ns_.load()); }

 private:
  void Loop() {
    client::Backoff retry;
    while (!stop_) {
      pb::HeartbeatResponse response;
      auto ctx = client::NewContext(options_, std::max(interval_, absl::Seconds(1)));
      const grpc::Status st = stub_->Heartbeat(ctx.get(), request_, &response);
      absl::Duration wait = interval_;
      if (st.ok()) {
        retry.Reset();
        ok_.fetch_add(1);
        revoked_.fetch_add(response.revoked_size());
        last_ok_ns_ = absl::ToUnixNanos(absl::Now());
      } else {
        wait = std::min(retry.Next(), interval_);
      }
      absl::SleepFor(wait);
    }
  }

  const client::ClientOptions options_;
  std::unique_ptr<pb::AgentService::Stub> stub_;
  const pb::HeartbeatRequest request_;
  const absl::Duration interval_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> ok_{0}, revoked_{0}, last_ok_ns_{0};
  std::thread thread_;
};

TEST_F(RestartPgTest, HealthyLeaseOutlivesARestartLongerThanItsTtl) {
  const absl::Duration ttl = absl::Seconds(2);
  auto short_ttl = [&](scheduler::ServerOptions& o) { o.config.lease_ttl = ttl; };
  StartServer(kBootstrapToken, short_ttl);
  LoadCatalog(kCatalog);
  ASSERT_NE(Submit(kSpec, Client("submitter1")), 0);
  const client::ClientOptions agent = Client("agent-a");
  const pb::RegisterResponse reg = Register(agent, "agent-a");
  auto stub = pb::AgentService::NewStub(client::MakeChannel(agent));
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(reg.agent_id());
  lr.set_session(reg.session());
  lr.set_max_jobs(1);
  pb::LeaseJobsResponse leases;
  auto ctx = client::NewContext(agent, absl::Seconds(10));
  ASSERT_TRUE(stub->LeaseJobs(ctx.get(), lr, &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);
  const pb::LeaseRef lease = leases.leases(0).lease();

  pb::HeartbeatRequest hb;
  hb.set_agent_id(reg.agent_id());
  hb.set_session(reg.session());
  *hb.add_leases() = lease;
  Heartbeater heartbeats(agent, hb, FromProto(reg.heartbeat_interval()));
  absl::SleepFor(2 * ttl);
  ASSERT_GT(heartbeats.ok(), 0);

  // Down for ten seconds, as a restart with a drain and systemd's RestartSec
  // takes: the lease's expiry passes in the database, and gRPC's default
  // reconnect backoff would next try about six seconds after the new start.
  const int port = server_->port();
  server_->Shutdown(absl::Seconds(1));
  server_.reset();
  absl::SleepFor(absl::Seconds(10));
  StartServer(kBootstrapToken, [&](scheduler::ServerOptions& o) {
    short_ttl(o);
    o.listen = "127.0.0.1:" + std::to_string(port);
  });
  const absl::Time up = absl::Now();
  const int64_t before = heartbeats.ok();
  while (heartbeats.ok() == before && absl::Now() < up + absl::Seconds(60)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GT(heartbeats.ok(), before) << "no heartbeat reached the restarted scheduler in 60 s";
  const absl::Duration reconnect = heartbeats.last_ok() - up;
  spdlog::info("first heartbeat {} after the restarted scheduler listened (grace {})",
               absl::FormatDuration(reconnect),
               absl::FormatDuration(scheduler::SchedulerConfig{.lease_ttl = ttl}.reaper_grace()));
  RecordProperty("reconnect_ms", std::to_string(absl::ToInt64Milliseconds(reconnect)));

  // Past the grace and two more TTLs: the lease is still this agent's.
  absl::SleepFor(scheduler::SchedulerConfig{.lease_ttl = ttl}.reaper_grace() + 2 * ttl);
  EXPECT_EQ(heartbeats.revoked(), 0);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE lease_token = '" + lease.lease_token() +
                "' AND attempt = 1"),
            1);
  EXPECT_EQ(server_->reaper().RunOnce()->requeued, 0);
}

// The same restart met by a farm-agent process. Unlike the heartbeater
// above, which shares this process's gRPC pollers with the scheduler, an
// agent process has only its own calls to drive its new TLS handshake: a
// heartbeat that failed fast left it to gRPC's 5 s backup poller, and the
// lease was reaped before the agent got back.
// A farm-agent process across a scheduler outage of GetParam() seconds: a
// short one (reconnects land within the outage's backoff steps) and one
// several TTLs long.
class AgentProcessRestartPgTest : public testing::MtlsFarmTest,
                                  public ::testing::WithParamInterface<int> {};

TEST_P(AgentProcessRestartPgTest, KeepsItsLeaseAcrossARestart) {
  const absl::Duration ttl = absl::Seconds(2);
  auto short_ttl = [&](scheduler::ServerOptions& o) { o.config.lease_ttl = ttl; };
  StartServer(kBootstrapToken, short_ttl);
  LoadCatalog(kCatalog);
  ASSERT_NE(Submit(std::string(kSpec) + "set: {agent.hold_ms: 60000}\n", Client("submitter1")), 0);
  const int port = server_->port();
  absl::Status registered;
  auto agent = StartAgent({.name = "agent-a", .drain_timeout = absl::Seconds(1)}, &registered);
  ASSERT_TRUE(registered.ok()) << agent->Err();
  const std::string expiry =
      "SELECT coalesce(max((extract(epoch from lease_expires_at) * 1000)::bigint), 0) FROM jobs "
      "WHERE state = 2 AND attempt = 1";
  const absl::Time leased_by = absl::Now() + absl::Seconds(30);
  while (Sql(expiry) == 0 && absl::Now() < leased_by) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_GT(Sql(expiry), 0) << "the agent never leased the job\n" << agent->Err();
  absl::SleepFor(2 * ttl);  // heartbeats going

  server_->Shutdown(absl::Seconds(1));
  server_.reset();
  absl::SleepFor(absl::Seconds(GetParam()));
  const int64_t before = Sql(expiry);
  StartServer(kBootstrapToken, [&](scheduler::ServerOptions& o) {
    short_ttl(o);
    o.listen = "127.0.0.1:" + std::to_string(port);
  });
  const absl::Time up = absl::Now();
  while (Sql(expiry) <= before && absl::Now() < up + absl::Seconds(60)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const absl::Duration reconnect = absl::Now() - up;
  const absl::Duration grace = scheduler::SchedulerConfig{.lease_ttl = ttl}.reaper_grace();
  std::cout << "agent process, scheduler down " << GetParam() << "s: first heartbeat "
            << absl::FormatDuration(reconnect) << " after the restarted scheduler listened (grace "
            << absl::FormatDuration(grace) << ")\n";
  absl::SleepFor(grace + 2 * ttl);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE state = 2 AND attempt = 1"), 1)
      << "the lease was reaped\n"
      << agent->Err();
  EXPECT_EQ(agent->Err().find("lease revoked"), std::string::npos) << agent->Err();
}

INSTANTIATE_TEST_SUITE_P(Outages, AgentProcessRestartPgTest, ::testing::Values(4, 10),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat("down", p.param, "s");
                         });

}  // namespace
}  // namespace farm
