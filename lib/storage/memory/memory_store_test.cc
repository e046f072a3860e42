// The in-memory repositories: the repository contract suites
// (lib/storage/contract/repository_contract.h) on MemoryStore and
// MemoryAnalyzerStore, plus what only the memory side has: an injectable
// clock and in-process change events.
#include "lib/storage/memory/memory_store.h"

#include <atomic>
#include <memory>

#include <gtest/gtest.h>

#include "lib/storage/contract/repository_contract.h"
#include "lib/storage/memory/memory_analyzer_store.h"
#include "lib/storage/row_codec.h"
#include "testing/manual_clock.h"

namespace farm::storage {
namespace {

class MemoryBackend final : public ContractBackend {
 public:
  CatalogStore& catalogs() override { return store_; }
  MatrixStore& matrices() override { return store_; }
  JobQueue& queue() override { return store_; }
  AnalysisStore& analysis() override { return store_; }
  AnalyzerStore& analyzer() override { return analyzer_; }

  void ExpireAllLeases() override {
    store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
      const absl::Time now = store_.db().Now();
      for (auto& [id, j] : t.jobs) {
        if (j.job.state() == pb::JOB_STATE_LEASED) j.lease_expires_at = now - absl::Seconds(1);
        if (j.job.state() == pb::JOB_STATE_QUEUED) j.not_before = now;
      }
      return 0;
    });
  }
  pb::JobState StateOf(int64_t job_id) override {
    return store_.db().Read([&](const MemoryDatabase::Tables& t) {
      auto it = t.jobs.find(job_id);
      return it == t.jobs.end() ? pb::JOB_STATE_UNSPECIFIED : it->second.job.state();
    });
  }
  std::string FailureReason(int64_t job_id) override {
    return store_.db().Read([&](const MemoryDatabase::Tables& t) {
      auto it = t.jobs.find(job_id);
      return it == t.jobs.end() ? std::string() : it->second.job.failure_reason();
    });
  }
  void PutRegression(const pb::Regression& g) override {
    store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
      RegressionRow& row = t.regressions[g.id()];
      row.regression = g;
      pb::Regression& r = row.regression;
      r.clear_per_mode();
      JsonToPerMode(PerModeToJson(g.per_mode()), &r);
      if (r.metric_rank().empty()) r.set_metric_rank("primary");
      SetTime(store_.db().Now(), r.mutable_detected_at());
      row.updated_at = store_.db().Now();
      return 0;
    });
  }
  void PutBisect(const pb::Bisect& b) override {
    store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
      EXPECT_EQ(t.regressions.count(b.regression_id()), 1u) << "bisect of an unknown regression";
      t.bisects[b.id()] = b;
      const absl::Time now = store_.db().Now();
      for (pb::BisectStep& s : *t.bisects[b.id()].mutable_steps()) SetTime(now, s.mutable_at());
      return 0;
    });
  }

 private:
  MemoryStore store_;
  MemoryAnalyzerStore analyzer_{&store_.db()};
};

const ContractParam kMemory{"memory", [] { return std::make_unique<MemoryBackend>(); }};

INSTANTIATE_TEST_SUITE_P(Memory, RepositoryContractTest, ::testing::Values(kMemory),
                         ContractParamName);
INSTANTIATE_TEST_SUITE_P(Memory, AnalyzerStoreContractTest, ::testing::Values(kMemory),
                         ContractParamName);

pb::RegisterResponse RegisterEmu(MemoryStore& s, const std::string& name) {
  pb::RegisterRequest r;
  r.set_name(name);
  r.add_capabilities()->set_name("emulator");
  auto resp = s.RegisterAgent(r, RetryPolicy{});
  EXPECT_TRUE(resp.ok()) << resp.status();
  return resp.ok() ? *resp : pb::RegisterResponse();
}

int64_t JobsMatrix(MemoryStore& s, int n) {
  NewMatrix m;
  pb::Job j;
  j.set_commit_id("c");
  j.set_executor(pb::EXECUTOR_EMULATOR);
  j.set_max_attempts(3);
  m.jobs.assign(n, j);
  auto c = s.CreateMatrix(m);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->matrix.id() : 0;
}

TEST(MemoryStoreTest, LeasesExpireAndBackoffEndsOnTheDatabaseClock) {
  ::farm::testing::ManualClock clock{absl::FromUnixSeconds(1700000000)};
  MemoryStore s([&] { return clock.Now(); });
  JobsMatrix(s, 1);
  pb::RegisterResponse a = RegisterEmu(s, "a");
  auto ls = s.LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(ls.ok() && ls->size() == 1u);
  EXPECT_EQ((*ls)[0].expires_at().seconds(), 1700000000 + 30);
  const RetryPolicy retry{absl::Seconds(10), absl::Minutes(1)};
  clock.Advance(absl::Seconds(30));  // expires_at is not yet in the past
  auto reaped = s.ReapExpired(retry, 10);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued, 0);
  clock.Advance(absl::Microseconds(1));
  reaped = s.ReapExpired(retry, 10);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued, 1);
  // First retry waits base_backoff (10 s).
  clock.Advance(absl::Seconds(9));
  ls = s.LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(ls.ok());
  EXPECT_TRUE(ls->empty());
  clock.Advance(absl::Seconds(1));
  ls = s.LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->size(), 1u);
  EXPECT_EQ((*ls)[0].lease().attempt(), 2);
  // A heartbeat moves the expiry to now + ttl.
  clock.Advance(absl::Seconds(20));
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = (*ls)[0].lease();
  auto h = s.Heartbeat(hb, absl::Seconds(30));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->extended_size(), 1);
  clock.Advance(absl::Seconds(15));
  reaped = s.ReapExpired(retry, 10);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued, 0);
  // Liveness is the heartbeat's age.
  auto agents = s.ListAgentsPage(absl::Seconds(16), "", 10);
  ASSERT_TRUE(agents.ok());
  EXPECT_TRUE((*agents)[0].connected());
  EXPECT_EQ(*s.CountConnectedAgents(absl::Seconds(16)), 1);
  agents = s.ListAgentsPage(absl::Seconds(15), "", 10);
  ASSERT_TRUE(agents.ok());
  EXPECT_FALSE((*agents)[0].connected());
  EXPECT_EQ(*s.CountConnectedAgents(absl::Seconds(15)), 0);
}

TEST(MemoryStoreTest, EventsWakeTheSubscribersOfTheChangedMatrixOnly) {
  MemoryStore s;
  const int64_t m1 = JobsMatrix(s, 2);
  const int64_t m2 = JobsMatrix(s, 1);
  std::atomic<int> w1{0}, w2{0};
  const auto h1 = s.events()->Subscribe(m1, [&] { ++w1; });
  const auto h2 = s.events()->Subscribe(m2, [&] { ++w2; });
  pb::RegisterResponse a = RegisterEmu(s, "a");
  auto ls = s.LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(ls.ok() && ls->size() == 1u);
  ASSERT_EQ((*ls)[0].job().matrix_id(), m1);
  EXPECT_EQ(w1.load(), 1);
  pb::ReportResultRequest rr;
  rr.set_agent_id(a.agent_id());
  *rr.mutable_lease() = (*ls)[0].lease();
  ASSERT_TRUE(s.ReportResult(rr).ok());
  EXPECT_EQ(w1.load(), 2);
  ASSERT_TRUE(s.ReportResult(rr).ok());  // duplicate: no state change
  EXPECT_EQ(w1.load(), 2);
  // A heartbeat changes no state.
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  ASSERT_TRUE(s.Heartbeat(hb, absl::Seconds(1)).ok());
  EXPECT_EQ(w2.load(), 0);
  s.events()->Unsubscribe(h1);
  auto c = s.CancelMatrix(m1, "x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->second, 1);  // a state change nobody listens to any more
  ASSERT_TRUE(s.CancelMatrix(m2, "x").ok());
  EXPECT_EQ(w1.load(), 2);
  EXPECT_EQ(w2.load(), 1);
  s.events()->Unsubscribe(h2);
}

}  // namespace
}  // namespace farm::storage
