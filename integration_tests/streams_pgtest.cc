// Server streams (WatchMatrix, GetResults, GetRawOutput) in the deployed
// configuration: farm-scheduler in-process behind mTLS with role tokens over
// a real PostgreSQL (testing/farm_fixture.h). Streams whose token lookup hangs
// (the tokens table locked) hold up no other call, an agent's heartbeat
// included; the watch streams of one matrix share its reads; the stream caps
// refuse the next stream with RESOURCE_EXHAUSTED, and farmctl shows the
// refusal; a revoked token's watch stream ends with UNAUTHENTICATED. Bounds
// are generous deadlines and counts, never timings.
#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/synchronization/mutex.h"
#include "cli/commands.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "scheduler/server.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

const char* const kCatalog = R"(
catalog: streams-test
commits:
  - id: v5.10
    subject: "Linux 5.10"
  - id: v5.11
    subject: "Linux 5.11"
)";

const char* const kSpec = R"(
name: streams-test
catalog: streams-test
platform: intel-vtd-2s12c
commits: v5.10..v5.11
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.01}
repeats: 2
executor: emulator
)";

// A WatchMatrix stream read on its own thread until it ends.
class Watch {
 public:
  Watch(const client::ClientOptions& c, int64_t matrix_id)
      : stub_(pb::JobService::NewStub(client::MakeChannel(c))),
        ctx_(client::NewContext(c, absl::Seconds(120))) {
    thread_ = std::thread([this, matrix_id] {
      pb::WatchMatrixRequest req;
      req.set_matrix_id(matrix_id);
      std::unique_ptr<grpc::ClientReader<pb::MatrixProgress>> reader =
          stub_->WatchMatrix(ctx_.get(), req);
      pb::MatrixProgress p;
      while (reader->Read(&p)) messages_.fetch_add(1);
      grpc::Status st = reader->Finish();
      absl::MutexLock lock(&mu_);
      status_ = st;
      ended_ = true;
    });
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() {
    ctx_->TryCancel();
    thread_.join();
  }

  int messages() const { return messages_.load(); }
  bool WaitForMessages(int n) {
    return testing::PollUntil([&]() -> absl::StatusOr<bool> { return messages() >= n || ended(); },
                              absl::Seconds(60), "watch messages", absl::Milliseconds(10))
               .ok() &&
           messages() >= n;
  }
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  // The status the stream ended with (waits for its end, up to a minute).
  grpc::Status Ended() {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&ended_), absl::Seconds(60))) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "test: stream did not end");
    }
    return status_;
  }
  void Cancel() { ctx_->TryCancel(); }

 private:
  std::unique_ptr<pb::JobService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::atomic<int> messages_{0};
  absl::Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// Reads a server stream to its end; its status.
template <typename Resp, typename Start>
grpc::Status Drain(const client::ClientOptions& c, Start start) {
  auto stub = pb::JobService::NewStub(client::MakeChannel(c));
  auto ctx = client::NewContext(c, absl::Seconds(120));
  auto reader = start(*stub, ctx.get());
  Resp r;
  while (reader->Read(&r)) {
  }
  return reader->Finish();
}

class StreamsPgTest : public testing::MtlsFarmTest {
 protected:
  int64_t SubmitMatrix() {
    LoadCatalog(kCatalog);
    return Submit(kSpec, Client("submitter1"));
  }
  const scheduler::WatchStats& Stats() { return server_->watch_stats(); }
  int64_t Reads() { return Stats().wake_reads.load() + Stats().fallback_reads.load(); }
};

TEST_F(StreamsPgTest, StreamsWhoseTokenLookupHangsHoldUpNoOtherCall) {
  StartServer(kBootstrapToken, [](scheduler::ServerOptions& o) {
    o.db_connections = 8;
    o.worker_threads = 8;
  });
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  const client::ClientOptions agent = Client("agent-a");
  const pb::RegisterResponse reg = Register(agent, "agent-a");
  pb::HeartbeatRequest hb;
  hb.set_agent_id(reg.agent_id());
  hb.set_session(reg.session());
  pb::HeartbeatResponse hb_resp;
  ASSERT_TRUE(Call(agent, "/iommufarm.v1.AgentService/Heartbeat", hb, &hb_resp).ok());
  // Tokens never looked up yet, one per stream: each needs the database.
  std::vector<std::string> tokens;
  for (int i = 0; i < 4; ++i) tokens.push_back(CreateToken("slow" + std::to_string(i), "viewer"));

  // Every lookup of a token now waits for this transaction.
  pqxx::connection lock_conn(db_uri_);
  auto lock = std::make_unique<pqxx::work>(lock_conn);
  lock->exec("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE");

  std::vector<std::unique_ptr<Watch>> watches;
  watches.push_back(std::make_unique<Watch>(Client("viewer1", tokens[0]), matrix));
  watches.push_back(std::make_unique<Watch>(Client("viewer1", tokens[1]), matrix));
  std::future<grpc::Status> results = std::async(std::launch::async, [&] {
    return Drain<pb::Result>(Client("viewer1", tokens[2]),
                             [&](pb::JobService::Stub& s, grpc::ClientContext* ctx) {
                               pb::GetResultsRequest r;
                               r.set_matrix_id(matrix);
                               return s.GetResults(ctx, r);
                             });
  });
  std::future<grpc::Status> raw = std::async(std::launch::async, [&] {
    return Drain<pb::RawOutputChunk>(Client("viewer1", tokens[3]),
                                     [&](pb::JobService::Stub& s, grpc::ClientContext* ctx) {
                                       pb::GetRawOutputRequest r;
                                       r.set_job_id(1);
                                       return s.GetRawOutput(ctx, r);
                                     });
  });
  // The lookups are stuck behind the lock (at least two: the number that
  // froze every call when they ran on gRPC's threads).
  pqxx::connection probe(db_uri_);
  ASSERT_TRUE(testing::PollUntil(
                  [&]() -> absl::StatusOr<bool> {
                    pqxx::nontransaction n(probe);
                    return n.exec1(
                                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type "
                                "= 'Lock' AND query LIKE '%api_tokens%'")[0]
                               .as<int>() >= 2;
                  },
                  absl::Seconds(60), "token lookups waiting for the lock")
                  .ok());

  // An mTLS agent's heartbeat and a viewer's unary call still go through,
  // each far inside its 10 s deadline.
  for (int i = 0; i < 3; ++i) {
    grpc::Status beat = Call(agent, "/iommufarm.v1.AgentService/Heartbeat", hb, &hb_resp);
    EXPECT_TRUE(beat.ok()) << beat.error_code() << " " << beat.error_message();
    pb::ListMatricesRequest lm;
    grpc::Status list = Call(Client("viewer1"), "/iommufarm.v1.JobService/ListMatrices", lm);
    EXPECT_TRUE(list.ok()) << list.error_code() << " " << list.error_message();
  }
  for (const auto& w : watches) EXPECT_EQ(w->messages(), 0);

  // The lock goes: the streams are authorized and run.
  lock->abort();
  lock.reset();
  for (const auto& w : watches) EXPECT_TRUE(w->WaitForMessages(1));
  grpc::Status rs = results.get();
  EXPECT_TRUE(rs.ok()) << rs.error_message();
  const grpc::Status rws = raw.get();
  EXPECT_NE(rws.error_code(), grpc::StatusCode::UNAUTHENTICATED) << rws.error_message();
  EXPECT_NE(rws.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << rws.error_message();
}

TEST_F(StreamsPgTest, WatchStreamsOfOneMatrixShareItsReads) {
  StartServer(kBootstrapToken, [](scheduler::ServerOptions& o) {
    o.watch_events = false;  // the fallback poll only: every read is counted as one
    o.watch.fallback_poll = absl::Milliseconds(200);
  });
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  const std::string token = CreateToken("dashboard", "viewer");
  constexpr int kStreams = 20;
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < kStreams; ++i) {
    watches.push_back(std::make_unique<Watch>(Client("viewer1", token), matrix));
  }
  for (const auto& w : watches) ASSERT_TRUE(w->WaitForMessages(5));
  EXPECT_EQ(Stats().streams.load(), kStreams);
  EXPECT_EQ(Stats().matrices.load(), 1);
  const int64_t reads = Reads();
  int most = 0;
  for (const auto& w : watches) most = std::max(most, w->messages());
  // Every stream sent a message per fallback read (at least five each):
  // one read per tick for all twenty, where a read per stream would be
  // twenty times as many.
  EXPECT_GE(reads, 5);
  EXPECT_LE(reads, 2 * most + 3) << "messages of the busiest stream: " << most;
  watches.clear();
  ASSERT_TRUE(
      testing::PollUntil([&]() -> absl::StatusOr<bool> { return Stats().streams.load() == 0; },
                         absl::Seconds(60), "streams gone")
          .ok());
  EXPECT_EQ(Stats().matrices.load(), 0);
}

TEST_F(StreamsPgTest, WatchStreamCapsRefuseTheNextStream) {
  StartServer(kBootstrapToken, [](scheduler::ServerOptions& o) {
    o.watch.max_streams = 3;
    o.watch.max_streams_per_principal = 2;
  });
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  const std::string token = CreateToken("watcher", "viewer");
  auto a1 = std::make_unique<Watch>(Client("viewer1", token), matrix);
  auto a2 = std::make_unique<Watch>(Client("viewer1", token), matrix);
  ASSERT_TRUE(a1->WaitForMessages(1));
  ASSERT_TRUE(a2->WaitForMessages(1));
  // A third stream of the token's principal.
  Watch a3(Client("viewer1", token), matrix);
  grpc::Status st = a3.Ended();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("principal \"watcher\" has its limit of 2"), std::string::npos)
      << st.error_message();
  // Another principal (the certificate's) fills the scheduler's cap; the
  // next one is refused.
  Watch b1(Client("viewer1"), matrix);
  ASSERT_TRUE(b1.WaitForMessages(1));
  Watch c1(Client("submitter1"), matrix);
  st = c1.Ended();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("limit of 3"), std::string::npos) << st.error_message();
  EXPECT_EQ(Stats().refused.load(), 2);
  // A stream that ends gives its place back.
  a1->Cancel();
  EXPECT_EQ(a1->Ended().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(
      testing::PollUntil([&]() -> absl::StatusOr<bool> { return Stats().streams.load() == 2; },
                         absl::Seconds(60), "a place freed")
          .ok());
  Watch a4(Client("viewer1", token), matrix);
  EXPECT_TRUE(a4.WaitForMessages(1)) << a4.Ended().error_message();
}

// farmctl's watch (submit --wait, watch) shows a cap's refusal with the
// server's reason once its retries are spent, never "server frozen".
TEST_F(StreamsPgTest, FarmctlWatchReportsTheCapsRefusal) {
  StartServer(kBootstrapToken, [](scheduler::ServerOptions& o) { o.watch.max_streams = 1; });
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  Watch holder(Client("viewer1"), matrix);
  ASSERT_TRUE(holder.WaitForMessages(1));
  std::ostringstream out, err;
  cli::Commands commands(Client("viewer1"), out, err);
  absl::StatusOr<pb::MatrixProgress> waited =
      commands.WaitForMatrix(matrix, {}, /*unavailable_limit=*/absl::Seconds(2));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kResourceExhausted) << waited.status();
  EXPECT_THAT(waited.status().message(), ::testing::HasSubstr("limit of 1"));
  EXPECT_THAT(waited.status().message(), ::testing::Not(::testing::HasSubstr("frozen")));
  EXPECT_GE(Stats().refused.load(), 2) << "refusals are retried before giving up";
}

TEST_F(StreamsPgTest, ARevokedTokensWatchStreamEnds) {
  StartServer(kBootstrapToken,
              [](scheduler::ServerOptions& o) { o.watch.fallback_poll = absl::Milliseconds(300); });
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  const std::string token = CreateToken("doomed", "viewer");
  Watch doomed(Client("viewer1", token), matrix);
  Watch other(Client("viewer1"), matrix);  // the certificate's principal stays
  ASSERT_TRUE(doomed.WaitForMessages(2));
  ASSERT_TRUE(other.WaitForMessages(1));
  pb::RevokeTokenRequest rv;
  rv.set_name("doomed");
  grpc::Status revoked = Call(Client("admin1"), "/iommufarm.v1.AccessService/RevokeToken", rv);
  ASSERT_TRUE(revoked.ok()) << revoked.error_message();
  const int before = doomed.messages();
  const grpc::Status st = doomed.Ended();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  // Within a tick or two: at most the messages already under way.
  EXPECT_LE(doomed.messages() - before, 2);
  const int seen = other.messages();
  EXPECT_TRUE(other.WaitForMessages(seen + 2));
  EXPECT_FALSE(other.ended());
}

}  // namespace
}  // namespace farm
