// Storage and queue tests against a real PostgreSQL (farm_testing harness):
// migrations, leases, heartbeats, expiry + reaper, max attempts, stale
// tokens, idempotent results, release, cancel, executor matching, priority
// order, concurrency (exactly once) and surviving a PostgreSQL restart.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "lib/storage/migrations.h"
#include "lib/storage/pg_listener.h"
#include "lib/storage/pg_pool.h"
#include "lib/storage/pg_store.h"
#include "testing/service_harness.h"

namespace farm::storage {
namespace {

using ::farm::testing::PostgresInstance;

class StoragePgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = pg->release();
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(pg_, nullptr);
    static std::atomic<int> n{0};
    auto uri = pg_->CreateDatabase("t" + std::to_string(n++));
    ASSERT_TRUE(uri.ok()) << uri.status();
    pool_ = std::make_unique<PgPool>(PgPoolOptions{*uri, 6, 3});
    auto v = ApplyMigrations(*pool_);
    ASSERT_TRUE(v.ok()) << v.status();
    store_ = std::make_unique<PgStore>(pool_.get());
  }

  // A matrix of `n` emulator jobs (or `executor`), priority `prio`.
  int64_t MakeMatrix(int n, int max_attempts = 3, int prio = 0,
                     pb::Executor executor = pb::EXECUTOR_EMULATOR) {
    NewMatrix m;
    m.matrix.set_name("m");
    m.matrix.set_spec_yaml("name: m");
    m.matrix.set_catalog("c");
    m.matrix.set_executor(executor);
    for (int i = 0; i < n; ++i) {
      pb::Job j;
      j.set_catalog("c");
      j.set_commit_id("c" + std::to_string(i));
      j.set_commit_index(i);
      j.set_platform("p");
      j.mutable_workload()->set_name("dma-map-bench");
      (*j.mutable_workload()->mutable_params())["tests"] = "write,read";
      j.set_mode(pb::IOMMU_MODE_STRICT);
      j.set_executor(executor);
      j.set_priority(prio);
      j.set_kind(pb::JOB_KIND_BULK);
      j.set_max_attempts(max_attempts);
      j.set_seed(0xfedcba9876543210ULL + i);
      m.jobs.push_back(j);
    }
    auto c = store_->CreateMatrix(m);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->matrix.id() : 0;
  }

  pb::RegisterResponse Register(const std::string& name, const std::string& cap = "emulator") {
    pb::RegisterRequest r;
    r.set_name(name);
    r.add_capabilities()->set_name(cap);
    r.set_slots(4);
    r.mutable_host()->set_hostname("h-" + name);
    auto resp = store_->RegisterAgent(r, retry_);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::RegisterResponse();
  }

  std::vector<pb::JobLease> Lease(const pb::RegisterResponse& a, int n,
                                  absl::Duration ttl = absl::Seconds(30)) {
    auto l = store_->LeaseJobs(a.agent_id(), a.session(), n, ttl, {});
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : std::vector<pb::JobLease>{};
  }

  absl::StatusOr<ReportOutcome> Report(const pb::RegisterResponse& a, const pb::LeaseRef& l,
                                       double value = 1.0) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l;
    auto* s = r.add_samples();
    s->set_metric("throughput");
    s->set_value(value);
    s->set_unit("MB/s");
    r.set_raw_output("{\"raw\": true}");
    r.set_raw_format("emu-json");
    r.set_tool_version("emu 0.1");
    r.mutable_host()->set_kernel_release("6.1");
    r.mutable_wall_time()->set_nanos(5000);
    return store_->ReportResult(r);
  }

  absl::StatusOr<int> Release(const pb::RegisterResponse& a, const pb::LeaseRef& l) {
    pb::ReleaseLeasesRequest rel;
    rel.set_agent_id(a.agent_id());
    rel.set_session(a.session());
    *rel.add_leases() = l;
    return store_->ReleaseLeases(rel);
  }

  pb::JobState StateOf(int64_t job_id) {
    auto st = pool_->Call<int>([&](pqxx::connection& c) -> absl::StatusOr<int> {
      pqxx::work w(c);
      return w.exec_params1("SELECT state FROM jobs WHERE id = $1", job_id)[0].as<int>();
    });
    return st.ok() ? static_cast<pb::JobState>(*st) : pb::JOB_STATE_UNSPECIFIED;
  }

  // Backdates every current lease so it is expired now (no sleeping).
  void ExpireAllLeases() {
    ASSERT_TRUE(pool_
                    ->Run([](pqxx::connection& c) {
                      pqxx::work w(c);
                      w.exec(
                          "UPDATE jobs SET lease_expires_at = now() - interval '1 second' "
                          "WHERE state = 2");
                      w.exec("UPDATE jobs SET not_before = now() WHERE state = 1");
                      w.commit();
                      return absl::OkStatus();
                    })
                    .ok());
  }

  static PostgresInstance* pg_;
  std::unique_ptr<PgPool> pool_;
  std::unique_ptr<PgStore> store_;
  RetryPolicy retry_{absl::Milliseconds(1), absl::Milliseconds(10)};
};

PostgresInstance* StoragePgTest::pg_ = nullptr;

TEST_F(StoragePgTest, MigrationsAreIdempotentAndConcurrentSafe) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    ts.emplace_back([&] {
      PgPool p(PgPoolOptions{pool_->uri(), 1, 3});
      auto v = ApplyMigrations(p);
      if (v.ok() && *v == static_cast<int>(AllMigrations().size())) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 3);
}

TEST_F(StoragePgTest, LeaseReportIdempotentAndStale) {
  const int64_t m = MakeMatrix(3);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].lease().attempt(), 1);
  EXPECT_LT(ls[0].job().id(), ls[1].job().id());
  EXPECT_EQ(ls[0].job().workload().params().at("tests"), "write,read");
  EXPECT_EQ(ls[0].job().seed(), 0xfedcba9876543210ULL);
  EXPECT_EQ(ls[0].job().state(), pb::JOB_STATE_LEASED);
  EXPECT_FALSE(ls[0].lease().lease_token().empty());
  EXPECT_NE(ls[0].lease().lease_token(), ls[1].lease().lease_token());

  auto r = Report(a, ls[0].lease());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted);
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(r->executor, pb::EXECUTOR_EMULATOR);
  // The same report again (a retry after a lost answer): duplicate, not stored twice.
  r = Report(a, ls[0].lease(), 2.0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->duplicate);
  // A wrong token for the other job: stale.
  pb::LeaseRef bad = ls[1].lease();
  bad.set_lease_token("00000000-0000-0000-0000-000000000000");
  r = Report(a, bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();

  auto results = store_->ListResults(m, 0, 100, true);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pb::Result& res = (*results)[0];
  EXPECT_EQ(res.job_id(), ls[0].job().id());
  ASSERT_EQ(res.samples_size(), 1);
  EXPECT_EQ(res.samples(0).value(), 1.0);
  EXPECT_EQ(res.raw_output(), "{\"raw\": true}");
  EXPECT_EQ(res.agent(), "a1");
  EXPECT_EQ(res.host().kernel_release(), "6.1");
  EXPECT_EQ(res.job().state(), pb::JOB_STATE_SUCCEEDED);

  auto mat = store_->GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->counts().total(), 3);
  EXPECT_EQ(mat->counts().succeeded(), 1);
  EXPECT_EQ(mat->counts().leased(), 1);
  EXPECT_EQ(mat->counts().queued(), 1);
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_RUNNING);
}

TEST_F(StoragePgTest, HeartbeatExtendsAndReportsRevoked) {
  const int64_t m = MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2, absl::Seconds(5));
  ASSERT_EQ(ls.size(), 2u);
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = ls[0].lease();
  *hb.add_leases() = ls[1].lease();
  pb::LeaseRef junk;
  junk.set_job_id(ls[0].job().id());
  junk.set_attempt(1);
  junk.set_lease_token("not a token; DROP TABLE jobs");
  *hb.add_leases() = junk;
  auto r = store_->Heartbeat(hb, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->extended_size(), 2);
  EXPECT_EQ(r->revoked_size(), 1);
  EXPECT_GT(r->lease_expires_at().seconds(), ls[0].expires_at().seconds() + 30);

  // Cancel revokes both leases; results for them are stale.
  auto c = store_->CancelMatrix(m, "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->second, 2);
  EXPECT_EQ(c->first.state(), pb::MATRIX_STATE_CANCELLED);
  hb.mutable_leases()->RemoveLast();
  r = store_->Heartbeat(hb, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->extended_size(), 0);
  EXPECT_EQ(r->revoked_size(), 2);
  EXPECT_EQ(Report(a, ls[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);

  // Unknown session.
  hb.set_session("nope");
  EXPECT_EQ(store_->Heartbeat(hb, absl::Seconds(1)).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoragePgTest, ReaperRequeuesThenFailsAtMaxAttempts) {
  MakeMatrix(1, /*max_attempts=*/2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> first = Lease(a, 1);
  ASSERT_EQ(first.size(), 1u);
  const int64_t id = first[0].job().id();
  // Not expired yet: the reaper leaves it alone.
  auto reaped = store_->ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued + reaped->failed, 0);

  ExpireAllLeases();
  reaped = store_->ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  EXPECT_EQ(StateOf(id), pb::JOB_STATE_QUEUED);
  // The old lease is dead: heartbeat revokes it, its result is stale.
  EXPECT_EQ(Report(a, first[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);

  ExpireAllLeases();  // clears the backoff
  std::vector<pb::JobLease> second = Lease(a, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].job().id(), id);
  EXPECT_EQ(second[0].lease().attempt(), 2);
  EXPECT_NE(second[0].lease().lease_token(), first[0].lease().lease_token());

  ExpireAllLeases();
  reaped = store_->ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->failed, 1);
  EXPECT_EQ(StateOf(id), pb::JOB_STATE_FAILED);
  auto m = store_->GetMatrix(second[0].job().matrix_id());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state(), pb::MATRIX_STATE_FAILED);
  auto reason = pool_->Call<std::string>([&](pqxx::connection& c) -> absl::StatusOr<std::string> {
    pqxx::work w(c);
    return w.exec_params1("SELECT failure_reason FROM jobs WHERE id = $1", id)[0].as<std::string>();
  });
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(*reason, "attempt 2 of 2: lease expired (agent a1)");
}

TEST_F(StoragePgTest, BackoffDelaysTheRetry) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  ASSERT_EQ(Lease(a, 1).size(), 1u);
  ExpireAllLeases();
  RetryPolicy slow{absl::Hours(1), absl::Hours(2)};
  ASSERT_TRUE(store_->ReapExpired(slow, 100).ok());
  EXPECT_TRUE(Lease(a, 1).empty());  // not_before is an hour away
}

TEST_F(StoragePgTest, ReleaseDoesNotSpendAnAttempt) {
  MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  auto n = Release(a, ls[0].lease());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  std::vector<pb::JobLease> again = Lease(a, 5);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].job().id(), ls[0].job().id());
  EXPECT_EQ(again[0].lease().attempt(), 1);
  EXPECT_EQ(Report(a, ls[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Report(a, again[0].lease()).ok());
}

TEST_F(StoragePgTest, ReportFailureRetryableAndNot) {
  MakeMatrix(2, /*max_attempts=*/3);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  pb::ReportFailureRequest f;
  f.set_agent_id(a.agent_id());
  *f.mutable_lease() = ls[0].lease();
  f.set_reason("emulator crashed");
  f.set_retryable(true);
  auto s = store_->ReportFailure(f, retry_);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, pb::JOB_STATE_QUEUED);
  *f.mutable_lease() = ls[1].lease();
  f.set_reason("unknown platform");
  f.set_retryable(false);
  s = store_->ReportFailure(f, retry_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, pb::JOB_STATE_FAILED);
  // Again: stale.
  EXPECT_EQ(store_->ReportFailure(f, retry_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoragePgTest, ExecutorMatchingAndPriorityOrder) {
  MakeMatrix(2, 3, /*prio=*/0, pb::EXECUTOR_EMULATOR);
  const int64_t fio = MakeMatrix(2, 3, /*prio=*/0, pb::EXECUTOR_FIO);
  const int64_t urgent = MakeMatrix(2, 3, /*prio=*/4000, pb::EXECUTOR_EMULATOR);
  pb::RegisterResponse f = Register("fio-host", "fio");
  std::vector<pb::JobLease> fl = Lease(f, 10);
  ASSERT_EQ(fl.size(), 2u);
  for (const auto& l : fl) EXPECT_EQ(l.job().matrix_id(), fio);
  pb::RegisterResponse e = Register("emu-host");
  std::vector<pb::JobLease> el = Lease(e, 2);
  ASSERT_EQ(el.size(), 2u);
  for (const auto& l : el) EXPECT_EQ(l.job().matrix_id(), urgent);
  // The eligibility hook can refuse jobs.
  auto none = store_->LeaseJobs(e.agent_id(), e.session(), 10, absl::Seconds(30),
                                [](const pb::Job&, const AgentView&) { return false; });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(Lease(e, 10).size(), 2u);
}

TEST_F(StoragePgTest, ReRegisterExpiresOldSessionLeases) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  pb::RegisterResponse a2 = Register("a1");
  EXPECT_EQ(a2.agent_id(), a.agent_id());
  EXPECT_NE(a2.session(), a.session());
  EXPECT_EQ(StateOf(ls[0].job().id()), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(store_->LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(1), {}).status().code(),
            absl::StatusCode::kNotFound);
  ExpireAllLeases();
  std::vector<pb::JobLease> again = Lease(a2, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].lease().attempt(), 2);
}

TEST_F(StoragePgTest, ConcurrentAgentsRunEveryJobExactlyOnce) {
  constexpr int kJobs = 600;
  const int64_t m = MakeMatrix(kJobs);
  std::mutex mu;
  std::map<int64_t, int> seen;
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      pb::RegisterResponse a = Register("c" + std::to_string(i));
      for (;;) {
        std::vector<pb::JobLease> ls = Lease(a, 16);
        if (ls.empty()) break;
        for (const auto& l : ls) {
          auto r = Report(a, l.lease());
          if (!r.ok() || r->duplicate) ++errors;
          std::lock_guard<std::mutex> lock(mu);
          ++seen[l.job().id()];
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(static_cast<int>(seen.size()), kJobs);
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "job " << id;
  auto mat = store_->GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(mat->counts().succeeded(), kJobs);
  int64_t results = 0, after = 0;
  for (;;) {
    auto page = store_->ListResults(m, after, 250, false);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    results += static_cast<int64_t>(page->size());
    after = page->back().job_id();
  }
  EXPECT_EQ(results, kJobs);
}

TEST_F(StoragePgTest, CatalogsPutAppendGet) {
  pb::Catalog c;
  c.set_name("linux-iommu");
  c.set_source("builtin");
  for (const char* id : {"v1", "v2", "v3"}) {
    auto* cc = c.add_commits();
    cc->set_id(id);
    cc->set_subject(std::string("subject ") + id);
    (*cc->mutable_set())["k"] = id;
  }
  ASSERT_TRUE(store_->PutCatalog(c, false).ok());
  EXPECT_EQ(store_->PutCatalog(c, false).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->PutCatalog(c, true).ok());
  std::vector<pb::CatalogCommit> more(2);
  more[0].set_id("v3");
  more[1].set_id("v4");
  auto ap = store_->AppendCommits("linux-iommu", "git:v3..v4", more);
  ASSERT_TRUE(ap.ok()) << ap.status();
  EXPECT_EQ(ap->second, 1);
  auto got = store_->GetCatalog("linux-iommu");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->commits_size(), 4);
  EXPECT_EQ(got->commits(3).id(), "v4");
  EXPECT_EQ(got->commits(3).index(), 3);
  EXPECT_EQ(got->commits(1).set().at("k"), "v2");
  EXPECT_EQ(store_->GetCatalog("nope").status().code(), absl::StatusCode::kNotFound);
  auto list = store_->ListCatalogs();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
}

TEST_F(StoragePgTest, IdempotencyKeyReturnsTheFirstMatrix) {
  NewMatrix m;
  m.matrix.set_name("x");
  m.matrix.set_spec_yaml("y");
  m.idempotency_key = "k1";
  pb::Job j;
  j.set_commit_id("c");
  j.set_platform("p");
  j.mutable_workload()->set_name("w");
  j.set_mode(pb::IOMMU_MODE_OFF);
  j.set_executor(pb::EXECUTOR_EMULATOR);
  j.set_max_attempts(3);
  m.jobs = {j, j};
  auto a = store_->CreateMatrix(m);
  auto b = store_->CreateMatrix(m);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->matrix.id(), b->matrix.id());
  EXPECT_FALSE(a->existing);
  EXPECT_TRUE(b->existing);
  EXPECT_EQ(b->matrix.counts().total(), 2);
  m.idempotency_key = "k2";
  auto c = store_->CreateMatrix(m);
  ASSERT_TRUE(c.ok());
  auto list = store_->ListMatrices(10, 0);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id(), c->matrix.id());  // newest first
  EXPECT_EQ((*list)[1].counts().total(), 2);
  EXPECT_EQ((*list)[1].state(), pb::MATRIX_STATE_RUNNING);
  list = store_->ListMatrices(10, c->matrix.id());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id(), a->matrix.id());
}

TEST_F(StoragePgTest, AnalysisTablesReadAndUpdate) {
  ASSERT_TRUE(pool_
                  ->Run([](pqxx::connection& c) {
                    pqxx::work w(c);
                    w.exec(
                        "INSERT INTO regressions (id, platform, workload, metric, mode, "
                        "last_good, first_bad, magnitude, per_mode) VALUES (7, 'p', 'w', "
                        "'throughput', 3, 'a', 'b', -0.19, "
                        "'[{\"mode\": 3, \"before\": 10, \"after\": 8.1}]')");
                    w.exec(
                        "INSERT INTO bisects (id, regression_id, state, culprit_id) VALUES "
                        "(3, 7, 'done', 'c588072bba6b')");
                    w.exec(
                        "INSERT INTO bisect_steps (bisect_id, step, commit_id, verdict) "
                        "VALUES (3, 1, 'x', 'bad'), (3, 0, 'y', 'good')");
                    w.exec("UPDATE regressions SET bisect_id = 3 WHERE id = 7");
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  pb::ListRegressionsRequest lr;
  auto regs = store_->ListRegressions(lr);
  ASSERT_TRUE(regs.ok()) << regs.status();
  ASSERT_EQ(regs->size(), 1u);
  EXPECT_DOUBLE_EQ((*regs)[0].magnitude(), -0.19);
  ASSERT_EQ((*regs)[0].per_mode_size(), 1);
  EXPECT_DOUBLE_EQ((*regs)[0].per_mode(0).after(), 8.1);
  auto b = store_->GetBisect(0, 7);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->culprit_id(), "c588072bba6b");
  ASSERT_EQ(b->steps_size(), 2);
  EXPECT_EQ(b->steps(0).verdict(), "good");
  auto u = store_->UpdateRegression(7, pb::REGRESSION_STATE_FIXED, "fixed in v6.2");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->state(), pb::REGRESSION_STATE_FIXED);
  EXPECT_EQ(u->note(), "fixed in v6.2");
  regs = store_->ListRegressions(lr);
  ASSERT_TRUE(regs.ok());
  EXPECT_TRUE(regs->empty());  // closed ones hidden by default
}

TEST_F(StoragePgTest, MetricRankRoundTripsAndSurvivesATriageNote) {
  ASSERT_TRUE(pool_
                  ->Run([](pqxx::connection& c) {
                    pqxx::work w(c);
                    w.exec(
                        "INSERT INTO regressions (id, workload, metric, metric_rank, "
                        "primary_metrics, note) VALUES "
                        "(1, 'iozone-nfsrdma', 'throughput_kb_s', 'primary', "
                        "  '{throughput_kb_s,\"odd, name\"}', 'primary metric of iozone-nfsrdma'), "
                        "(2, 'iozone-nfsrdma', 'latency_us', 'secondary', '{throughput_kb_s}', "
                        "  'secondary metric')");
                    w.exec("INSERT INTO regressions (id, metric) VALUES (3, 'throughput')");
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  auto regs = store_->ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(regs.ok()) << regs.status();
  ASSERT_EQ(regs->size(), 3u);
  EXPECT_EQ((*regs)[0].metric_rank(), "primary");
  ASSERT_EQ((*regs)[0].primary_metrics_size(), 2);
  EXPECT_EQ((*regs)[0].primary_metrics(0), "throughput_kb_s");
  EXPECT_EQ((*regs)[0].primary_metrics(1), "odd, name");
  EXPECT_EQ((*regs)[1].metric_rank(), "secondary");
  ASSERT_EQ((*regs)[1].primary_metrics_size(), 1);
  EXPECT_EQ((*regs)[2].metric_rank(), "primary");  // column default
  EXPECT_EQ((*regs)[2].primary_metrics_size(), 0);

  // A person's note replaces the analyzer's sentence, never the rank.
  auto u = store_->UpdateRegression(2, pb::REGRESSION_STATE_ACKNOWLEDGED, "known, tracked in #12");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->note(), "known, tracked in #12");
  EXPECT_EQ(u->metric_rank(), "secondary");
  ASSERT_EQ(u->primary_metrics_size(), 1);
  EXPECT_EQ(u->primary_metrics(0), "throughput_kb_s");
  auto g = store_->GetRegression(2);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->metric_rank(), "secondary");

  // The column only takes the two ranks.
  absl::Status bad = pool_->Run([](pqxx::connection& c) -> absl::Status {
    try {
      pqxx::work w(c);
      w.exec("UPDATE regressions SET metric_rank = 'tertiary' WHERE id = 1");
      w.commit();
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(e.what());
    }
    return absl::OkStatus();
  });
  EXPECT_FALSE(bad.ok());
}

// A database at the previous schema version (2), holding regressions ranked
// only in the analyzer's bisect state, gains the columns, backfilled.
TEST_F(StoragePgTest, MetricRankMigrationAppliesOnAnExistingDatabase) {
  auto uri = pg_->CreateDatabase("rank_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool old_pool(PgPoolOptions{*uri, 2, 3});
  ASSERT_GE(AllMigrations().size(), 3u);
  ASSERT_EQ(AllMigrations()[2].version, 3);
  ASSERT_TRUE(old_pool
                  .Run([](pqxx::connection& c) {
                    pqxx::work w(c);
                    w.exec(
                        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                        "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
                    for (int i = 0; i < 2; ++i) {
                      const Migration& m = AllMigrations()[i];
                      w.exec(m.sql);
                      w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                                    m.version, m.name);
                    }
                    w.exec(
                        "INSERT INTO regressions (id, metric, note) VALUES "
                        "(1, 'throughput_kb_s', 'primary metric of iozone-nfsrdma'), "
                        "(2, 'latency_us', 'triaged: someone else''s note'), "
                        "(3, 'throughput', 'from before ranking')");
                    w.exec(
                        "INSERT INTO bisects (id, regression_id) VALUES (11, 1), (12, 2), (13, 3)");
                    w.exec("UPDATE regressions SET bisect_id = 10 + id");
                    w.exec(
                        "INSERT INTO analyzer_state (key, value) VALUES "
                        "('bisect:11', '{\"metric_rank\": \"primary\", "
                        "  \"primary_metrics\": [\"throughput_kb_s\"]}'), "
                        "('bisect:12', '{\"metric_rank\": \"secondary\", "
                        "  \"primary_metrics\": [\"throughput_kb_s\", \"throughput\"]}'), "
                        "('bisect:13', '{\"phase\": \"done\"}')");
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  auto v = ApplyMigrations(old_pool);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, static_cast<int>(AllMigrations().size()));
  PgStore store(&old_pool);
  auto regs = store.ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(regs.ok()) << regs.status();
  ASSERT_EQ(regs->size(), 3u);
  EXPECT_EQ((*regs)[0].metric_rank(), "primary");
  ASSERT_EQ((*regs)[0].primary_metrics_size(), 1);
  EXPECT_EQ((*regs)[0].primary_metrics(0), "throughput_kb_s");
  EXPECT_EQ((*regs)[1].metric_rank(), "secondary");  // from the bisect state, not the note
  ASSERT_EQ((*regs)[1].primary_metrics_size(), 2);
  EXPECT_EQ((*regs)[1].primary_metrics(1), "throughput");
  EXPECT_EQ((*regs)[1].note(), "triaged: someone else's note");
  EXPECT_EQ((*regs)[2].metric_rank(), "primary");  // unranked rows count as primary
  EXPECT_EQ((*regs)[2].primary_metrics_size(), 0);
}

// The queue gauge reads terminal totals from job_state_totals (kept by the
// jobs triggers) and counts only queued/leased rows: after every kind of
// transition it must agree with a full count of the table.
TEST_F(StoragePgTest, QueueCountsMatchAFullCountAfterEveryTransition) {
  auto full_count = [&]() {
    std::array<int64_t, 6> out{};
    auto st = pool_->Run([&](pqxx::connection& c) {
      pqxx::work w(c);
      for (const pqxx::row& r : w.exec("SELECT state, count(*) FROM jobs GROUP BY state")) {
        out[r[0].as<int>()] = r[1].as<int64_t>();
      }
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  };
  auto expect_match = [&](const std::string& when) {
    auto counts = store_->QueueCounts();
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(*counts, full_count()) << when;
  };
  const int64_t m1 = MakeMatrix(12, /*max_attempts=*/1);
  const int64_t m2 = MakeMatrix(5);
  expect_match("created");
  pb::RegisterResponse a = Register("counts-agent");
  std::vector<pb::JobLease> ls = Lease(a, 10);
  ASSERT_EQ(ls.size(), 10u);
  expect_match("leased");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Report(a, ls[i].lease()).ok());
  ASSERT_TRUE(Report(a, ls[0].lease()).ok());  // duplicate: no double count
  expect_match("reported");
  pb::ReportFailureRequest f;
  f.set_agent_id(a.agent_id());
  *f.mutable_lease() = ls[4].lease();
  f.set_reason("boom");
  f.set_retryable(false);
  ASSERT_TRUE(store_->ReportFailure(f, retry_).ok());
  expect_match("failed");
  ExpireAllLeases();
  auto reaped = store_->ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  expect_match("reaped");
  ASSERT_TRUE(store_->CancelMatrix(m2, "test").ok());
  ASSERT_TRUE(store_->CancelMatrix(m1, "test").ok());
  expect_match("cancelled");
  auto counts = store_->QueueCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[pb::JOB_STATE_SUCCEEDED], 4);
  ASSERT_TRUE(pool_
                  ->Run([&](pqxx::connection& c) {
                    pqxx::work w(c);
                    w.exec_params("DELETE FROM matrices WHERE id = $1", m1);
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  expect_match("matrix deleted");
}

// One LISTEN connection wakes the subscribers of exactly the matrix whose
// jobs changed state.
TEST_F(StoragePgTest, ListenerWakesSubscribersOfTheChangedMatrix) {
  const int64_t m1 = MakeMatrix(3);
  const int64_t m2 = MakeMatrix(3);
  PgMatrixListener listener(pool_->uri());
  std::atomic<int> w1{0}, w2{0};
  const auto h1 = listener.Subscribe(m1, [&] { ++w1; });
  const auto h2 = listener.Subscribe(m2, [&] { ++w2; });
  listener.Start();
  // The first connect wakes everyone once (anything before LISTEN is lost).
  auto up = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> { return w1.load() >= 1 && w2.load() >= 1; }, absl::Seconds(20),
      "listener connected");
  ASSERT_TRUE(up.ok()) << up;
  const int w1_before = w1.load(), w2_before = w2.load();
  const int64_t n_before = listener.notifications();

  pb::RegisterResponse a = Register("listen-agent");
  // Jobs are leased in id order, so this lease is one job of m1.
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  ASSERT_EQ(ls[0].job().matrix_id(), m1);
  ASSERT_TRUE(Report(a, ls[0].lease()).ok());
  auto woke = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> { return listener.notifications() >= n_before + 2; },
      absl::Seconds(20), "two notifications (lease, report)");
  ASSERT_TRUE(woke.ok()) << woke;
  EXPECT_GE(w1.load(), w1_before + 1);
  EXPECT_EQ(w2.load(), w2_before);  // m2 did not change
  EXPECT_EQ(listener.connects(), 1);

  listener.Unsubscribe(h1);
  const int w1_after = w1.load();
  ASSERT_TRUE(store_->CancelMatrix(m1, "x").ok());
  ASSERT_TRUE(store_->CancelMatrix(m2, "x").ok());
  auto woke2 =
      ::farm::testing::PollUntil([&]() -> absl::StatusOr<bool> { return w2.load() > w2_before; },
                                 absl::Seconds(20), "m2 subscriber woken by its cancel");
  ASSERT_TRUE(woke2.ok()) << woke2;
  EXPECT_EQ(w1.load(), w1_after);  // unsubscribed
  listener.Unsubscribe(h2);
  listener.Stop();
}

// Runs last in this binary (gtest keeps declaration order): it restarts the
// shared server.
TEST_F(StoragePgTest, SurvivesPostgresRestart) {
  const int64_t m = MakeMatrix(1);
  ASSERT_TRUE(store_->QueueCounts().ok());
  // Prepared statements in use on the pooled connections before the restart.
  pb::RegisterResponse a0 = Register("restart-agent-0");
  std::vector<pb::JobLease> l0 = Lease(a0, 1);
  ASSERT_EQ(l0.size(), 1u);
  auto released = Release(a0, l0[0].lease());
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_EQ(*released, 1);
  PgMatrixListener listener(pool_->uri());
  std::atomic<int> wakes{0};
  const auto h = listener.Subscribe(m, [&] { ++wakes; });
  listener.Start();
  ASSERT_TRUE(
      ::farm::testing::PollUntil([&]() -> absl::StatusOr<bool> { return listener.connects() == 1; },
                                 absl::Seconds(20), "listener up")
          .ok());
  ASSERT_TRUE(pg_->Stop().ok());
  // During the outage calls fail with kUnavailable, never hang or crash.
  auto down = store_->QueueCounts();
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  ASSERT_TRUE(pg_->Restart().ok());
  absl::Status last;
  auto st = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        auto c = store_->QueueCounts();
        if (!c.ok()) {
          EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
          return false;
        }
        return (*c)[pb::JOB_STATE_QUEUED] == 1;
      },
      absl::Seconds(20), "queue readable after restart");
  EXPECT_TRUE(st.ok()) << st;

  // The listener reconnected by itself and woke its subscribers, because
  // notifications during the outage are lost.
  auto relisten = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> { return listener.connects() >= 2 && listener.listening(); },
      absl::Seconds(30), "listener reconnected");
  ASSERT_TRUE(relisten.ok()) << relisten;
  EXPECT_GE(wakes.load(), 2);  // one wake-all per connect
  const int wakes_before = wakes.load();
  // Claim and report run as prepared statements: they work on the new
  // connections (defined again there), and the change is notified.
  pb::RegisterResponse a = Register("restart-agent");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  auto rep = Report(a, ls[0].lease());
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_TRUE(rep->accepted);
  auto woke = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> { return wakes.load() > wakes_before; }, absl::Seconds(20),
      "wake-up after restart");
  EXPECT_TRUE(woke.ok()) << woke;
  listener.Unsubscribe(h);
}

}  // namespace
}  // namespace farm::storage
