// What only PostgreSQL has, against a real server (farm_testing harness):
// migrations (concurrent, upgrading an existing database), the schema's own
// rules (array text, column defaults, CHECK), the trigger-kept queue totals,
// the LISTEN/NOTIFY listener and surviving a server restart with prepared
// statements in use. Repository behaviour (leases, fencing, reaper, results,
// catalogs, analysis reads) is the contract suite's
// (lib/storage/contract/repository_contract.cc), which runs on PostgreSQL in
// storage_contract_pgtest and on the in-memory repositories in
// storage_memory_test.
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/storage/contract/test_rows.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_listener.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_raw_outputs.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/pg/pg_store.h"
#include "lib/storage/row_codec.h"
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
    const NewMatrix m = testrows::Matrix(n, max_attempts, prio, executor, pb::JOB_KIND_BULK);
    auto c = store_->CreateMatrix(m);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->matrix.id() : 0;
  }

  pb::RegisterResponse Register(const std::string& name, const std::string& cap = "emulator") {
    const pb::RegisterRequest r = testrows::Registration(name, cap);
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

  // The one value `sql` selects, read on `pool` (the test's own by default).
  template <typename T>
  static T Scalar(PgPool& pool, const std::string& sql) {
    T out{};
    absl::Status st = pool.Run([&](pqxx::connection& c) {
      pqxx::nontransaction n(c);
      out = n.exec1(sql)[0].as<T>();
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  template <typename T>
  T Scalar(const std::string& sql) {
    return Scalar<T>(*pool_, sql);
  }

  // Brings an empty database to schema `version` as a farm of that age left
  // it (its migrations, each recorded), in `w`: the start of every upgrade test.
  static void MigrateOnlyTo(pqxx::work& w, int version) {
    w.exec(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
        "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    for (const Migration& m : AllMigrations()) {
      if (m.version > version) break;
      w.exec(m.sql);
      if (m.after != nullptr) m.after(w);
      w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                    m.name);
    }
  }

  // Matrix 1 with `n` finished jobs, ids 1 to n, for an upgrade test's rows.
  static void InsertFinishedJobs(pqxx::work& w, int n) {
    w.exec("INSERT INTO matrices (id, name, spec_yaml) VALUES (1, 'm', '')");
    w.exec_params(
        "INSERT INTO jobs (id, matrix_id, commit_id, platform, workload, mode, executor, state) "
        "SELECT g, 1, 'c', 'p', 'w', 1, 1, 3 FROM generate_series(1, $1) g",
        n);
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
      if (v.ok() && *v == AllMigrations().back().version) ++ok;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 3);
}

// A submit that grows the queue by a tenth or more refreshes the jobs
// statistics at once (the claim is planned on them); a small one leaves them
// to autovacuum.
TEST_F(StoragePgTest, ALargeSubmitRefreshesTheJobsStatistics) {
  const auto analyzed = [&] {
    return Scalar<double>("SELECT reltuples FROM pg_class WHERE oid = 'jobs'::regclass");
  };
  MakeMatrix(10);
  EXPECT_EQ(analyzed(), -1) << "10 jobs: never analyzed yet";
  MakeMatrix(1500);
  EXPECT_EQ(analyzed(), 1510);
  MakeMatrix(100);
  EXPECT_EQ(analyzed(), 1510) << "under 1,000 jobs: left to autovacuum";
  MakeMatrix(1000);
  EXPECT_EQ(analyzed(), 2610);
}

// Workload params of 256 bytes or more are stored once per matrix and
// referenced by the jobs; every read (claim, results, the real-run rule on
// kernel_params) sees them as if each row held its own copy.
TEST_F(StoragePgTest, LargeWorkloadParamsAreStoredOncePerMatrix) {
  NewMatrix m = testrows::Matrix(4, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  const std::string job_file(300, 'x');
  for (int i = 0; i < 4; ++i) {
    pb::Job& j = m.jobs[i];
    j.set_commit_id("6.1.0-57-amd64");
    auto& params = *j.mutable_workload()->mutable_params();
    params["job_file"] = job_file + std::to_string(i % 2);
    // Jobs 0 and 2 may not run on a host kernel: they boot with parameters.
    if (i % 2 == 0) params["kernel_params"] = "iommu.forcedac=1";
  }
  NewMatrix small = testrows::Matrix(3, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  auto big = store_->CreateMatrix(m);
  ASSERT_TRUE(big.ok()) << big.status();
  ASSERT_TRUE(store_->CreateMatrix(small).ok());
  const auto count = [&](const std::string& sql) { return Scalar<int64_t>(sql); };
  const std::string id = std::to_string(big->matrix.id());
  EXPECT_EQ(count("SELECT count(*) FROM matrix_workloads WHERE matrix_id = " + id), 2);
  EXPECT_EQ(count("SELECT count(*) FROM jobs WHERE params <> '{}' AND matrix_id = " + id), 0);
  EXPECT_EQ(count("SELECT count(*) FROM jobs WHERE workload_index < 0 AND matrix_id <> " + id), 3)
      << "small params stay in their rows";

  // A host-kernel fio agent may take only the jobs without kernel_params.
  pb::RegisterRequest reg = testrows::Registration("fio-host", "fio");
  reg.mutable_host()->set_kernel_release("6.1.0-57-amd64");
  reg.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  auto agent = store_->RegisterAgent(reg, retry_);
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto leased = store_->LeaseJobs(agent->agent_id(), agent->session(), 10, absl::Seconds(30), {},
                                  ClaimRules{.match_real_run_hosts = true});
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->size(), 2u);
  for (const pb::JobLease& l : *leased) {
    const int i = l.job().repeat();
    EXPECT_EQ(l.job().workload().params().at("job_file"), job_file + "1") << i;
    EXPECT_EQ(l.job().workload().params().count("kernel_params"), 0u);
    EXPECT_EQ(l.job().workload().params().at("tests"), "write,read");
  }
  // Without the host rule every job is claimed, each with its own params.
  auto rest = store_->LeaseJobs(agent->agent_id(), agent->session(), 10, absl::Seconds(30), {},
                                ClaimRules{});
  ASSERT_TRUE(rest.ok()) << rest.status();
  int with_kernel_params = 0;
  for (const pb::JobLease& l : *rest) {
    if (l.job().matrix_id() != big->matrix.id()) continue;
    EXPECT_EQ(l.job().workload().params().at("job_file"), job_file + "0");
    with_kernel_params += l.job().workload().params().count("kernel_params");
  }
  EXPECT_EQ(with_kernel_params, 2);
}

// The array literals of the batch statements carry any text PostgreSQL can
// store, element for element.
TEST_F(StoragePgTest, QuotedArrayLiteralsCarryEveryElementExactly) {
  const std::vector<std::string> in = {"",         "plain",         "\"",         "\\",
                                       "a\"b\\c",  "{,}",           "NULL",       "  spaced  ",
                                       "\\\"\\\"", "µs 🙂 \x01", "[{\"k\":1}]"};
  std::vector<std::string> out;
  ASSERT_TRUE(pool_
                  ->Run([&](pqxx::connection& c) {
                    pqxx::nontransaction n(c);
                    for (const pqxx::row& r :
                         n.exec_params("SELECT unnest($1::text[])", QuotedArrayLiteral(in))) {
                      out.push_back(r[0].as<std::string>());
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(out, in);
}

// The farm's sessions run without JIT (it made the claim 9x slower) and with
// the pool's statement timeout; a connection string that sets its own
// `options` keeps them as given.
TEST_F(StoragePgTest, SessionsRunWithoutJitAndWithTheStatementTimeout) {
  const auto settings = [](PgPool& p) {
    return std::make_pair(Scalar<std::string>(p, "SHOW jit"),
                          Scalar<std::string>(p, "SHOW statement_timeout"));
  };
  PgPool farm(PgPoolOptions{pool_->uri(), 1, 3, 4321});
  EXPECT_EQ(settings(farm), std::make_pair(std::string("off"), std::string("4321ms")));
  const std::string own = pool_->uri() + (pool_->uri().find('?') == std::string::npos ? "?" : "&") +
                          "options=-c%20jit%3Don";
  PgPool theirs(PgPoolOptions{own, 1, 3, 4321});
  EXPECT_EQ(settings(theirs).first, "on");
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
                    MigrateOnlyTo(w, 2);
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
  EXPECT_EQ(*v, AllMigrations().back().version);
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

// A database at version 13 holding two live builds of one key (made by two
// submits at once) and a job waiting for the second: migration 14 leaves one
// live build, the waiter waiting for it, and refuses a third.
TEST_F(StoragePgTest, TheOneLiveBuildMigrationSettlesEarlierDuplicates) {
  auto uri = pg_->CreateDatabase("build_key_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool old_pool(PgPoolOptions{*uri, 2, 3});
  ASSERT_EQ(AllMigrations()[12].version, 13);
  ASSERT_TRUE(old_pool
                  .Run([](pqxx::connection& c) {
                    pqxx::work w(c);
                    MigrateOnlyTo(w, 13);
                    // The columns today's CreateMatrix writes (version 17,
                    // which adds them only where missing).
                    for (const Migration& m : AllMigrations()) {
                      if (m.version == 17) w.exec(m.sql);
                    }
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  PgStore store(&old_pool);
  NewMatrix build = testrows::Matrix(1, 1, 6000, pb::EXECUTOR_KBUILD, pb::JOB_KIND_BUILD);
  build.jobs[0].set_platform("x86_64");
  ASSERT_TRUE(store.CreateMatrix(build).ok());
  ASSERT_TRUE(store.CreateMatrix(build).ok()) << "version 13 has no unique index";
  auto live = store.LiveBuildJobs("c", {"c0"});
  ASSERT_TRUE(live.ok() && live->size() == 2u);
  const int64_t first = (*live)[0].id(), second = (*live)[1].id();
  NewMatrix waiter = testrows::Matrix(1, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  waiter.jobs[0].set_waits_for_job(second);
  auto w = store.CreateMatrix(waiter);
  ASSERT_TRUE(w.ok()) << w.status();

  auto v = ApplyMigrations(old_pool);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, AllMigrations().back().version);
  live = store.LiveBuildJobs("c", {"c0"});
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id(), first);
  auto rows = old_pool.Call<std::pair<int64_t, std::string>>(
      [&](pqxx::connection& c) -> absl::StatusOr<std::pair<int64_t, std::string>> {
        pqxx::work t(c);
        pqxx::row wr =
            t.exec_params1("SELECT waits_for FROM jobs WHERE matrix_id = $1", w->matrix.id());
        pqxx::row dr =
            t.exec_params1("SELECT failure_reason FROM jobs WHERE id = $1 AND state = 5", second);
        return std::make_pair(wr[0].as<int64_t>(), dr[0].as<std::string>());
      });
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->first, first) << "the waiter waits for the kept build";
  EXPECT_EQ(rows->second, "cancelled: a duplicate of kernel build job " + std::to_string(first));
  EXPECT_EQ(store.CreateMatrix(build).status().code(), absl::StatusCode::kAlreadyExists);
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

// 1,000 identical ReportResult calls at once (an agent's retries after
// timeouts, all arriving together) store one row; so do 1,000 copies in
// ReportResults batches racing them.
TEST_F(StoragePgTest, AThousandIdenticalReportsStoreOneRow) {
  PgPool wide(PgPoolOptions{pool_->uri(), 40, 3});
  PgStore store(&wide);
  const int64_t m = MakeMatrix(1);
  pb::RegisterResponse a = Register("reporter");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  pb::ReportResultRequest r;
  r.set_agent_id(a.agent_id());
  *r.mutable_lease() = ls[0].lease();
  r.add_samples()->set_metric("throughput");
  r.set_raw_output("raw");
  std::atomic<int> fresh{0}, dup{0}, bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 40; ++t) {
    ts.emplace_back([&, t] {
      if (t % 4 == 3) {
        std::vector<pb::ReportResultRequest> batch(25, r);
        auto out = store.ReportResults(batch);
        if (!out.ok()) {
          bad += 25;
          return;
        }
        for (const auto& o : *out) {
          if (!o.ok() || !o->accepted) {
            ++bad;
          } else if (o->duplicate) {
            ++dup;
          } else {
            ++fresh;
          }
        }
        return;
      }
      for (int i = 0; i < 25; ++i) {
        auto o = store.ReportResult(r);
        if (!o.ok() || !o->accepted) {
          ++bad;
        } else if (o->duplicate) {
          ++dup;
        } else {
          ++fresh;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fresh.load(), 1);
  EXPECT_EQ(dup.load(), 999);
  auto rows = wide.Call<int64_t>([&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
    pqxx::read_transaction t(c);
    return t.exec1("SELECT count(*) FROM results WHERE matrix_id = " + std::to_string(m))[0]
        .as<int64_t>();
  });
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, 1);
  auto mat = store.GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->counts().succeeded(), 1);
}

// 10,000 jobs, 50 claimers on 50 connections at once: SKIP LOCKED and the
// one-statement claim hand every job out exactly once, and every result
// lands once.
TEST_F(StoragePgTest, FiftyConcurrentClaimersLeaseTenThousandJobsEachOnce) {
  constexpr int kJobs = 10000;
  constexpr int kClaimers = 50;
  // Fifty backends start at once: on a loaded 2-core machine a connect may
  // take longer than the pool's usual 3 s, which is not what this tests.
  PgPool wide(PgPoolOptions{pool_->uri(), kClaimers, 60});
  PgStore store(&wide);
  const int64_t m = MakeMatrix(kJobs / 2);
  const int64_t m2 = MakeMatrix(kJobs / 2);
  std::vector<std::vector<int64_t>> got(kClaimers);
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kClaimers; ++i) {
    ts.emplace_back([&, i] {
      auto a = store.RegisterAgent(
          testrows::Registration("claimer-" + std::to_string(i), "emulator"), retry_);
      if (!a.ok()) {
        ++errors;
        return;
      }
      ClaimRules rules;
      rules.within_free_slots = true;
      for (;;) {
        auto ls = store.LeaseJobs(a->agent_id(), a->session(), 8, absl::Seconds(60), {}, rules);
        if (!ls.ok()) {
          ++errors;
          return;
        }
        if (ls->empty()) break;
        if (ls->size() > 4) ++errors;  // 4 slots
        for (const pb::JobLease& l : *ls) {
          pb::ReportResultRequest r;
          r.set_agent_id(a->agent_id());
          *r.mutable_lease() = l.lease();
          r.add_samples()->set_metric("throughput");
          auto out = store.ReportResult(r);
          if (!out.ok() || !out->accepted || out->duplicate) ++errors;
          got[i].push_back(l.job().id());
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  std::map<int64_t, int> seen;
  int busy_claimers = 0;
  for (const auto& g : got) {
    if (!g.empty()) ++busy_claimers;
    for (int64_t id : g) ++seen[id];
  }
  EXPECT_EQ(static_cast<int>(seen.size()), kJobs);
  int twice = 0;
  for (const auto& [id, n] : seen) twice += n != 1;
  EXPECT_EQ(twice, 0);
  EXPECT_GT(busy_claimers, 1);
  auto rows = wide.Call<std::pair<int64_t, int64_t>>(
      [&](pqxx::connection& c) -> absl::StatusOr<std::pair<int64_t, int64_t>> {
        pqxx::read_transaction t(c);
        pqxx::row r =
            t.exec1("SELECT count(*), count(DISTINCT job_id) FROM results WHERE matrix_id IN (" +
                    std::to_string(m) + ", " + std::to_string(m2) + ")");
        return std::make_pair(r[0].as<int64_t>(), r[1].as<int64_t>());
      });
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->first, kJobs);
  EXPECT_EQ(rows->second, kJobs);
  for (int64_t id : {m, m2}) {
    auto mat = store.GetMatrix(id);
    ASSERT_TRUE(mat.ok());
    EXPECT_EQ(mat->state(), pb::MATRIX_STATE_COMPLETED);
  }
}

// A raw output longer than kRawInlineMaxBytes, with multi-byte characters;
// `tag` makes distinct ones.
std::string LongRaw(const std::string& tag) {
  std::string out = "{\"tag\": \"" + tag + "\", \"lines\": [";
  while (out.size() <= 3 * kRawInlineMaxBytes) out += "\"caf\xc3\xa9 \xe2\x82\xac 42\", ";
  return out + "\"end\"]}";
}

// Long raw outputs are stored once per content, zstd-compressed, whether
// reported alone or in a batch; a short one stays in its result row; both
// read back as reported.
TEST_F(StoragePgTest, LongRawOutputsAreStoredOncePerContentShortOnesInline) {
  const int64_t m = MakeMatrix(4);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 4);
  ASSERT_EQ(ls.size(), 4u);
  const std::string shared = LongRaw("shared"), own = LongRaw("own"), small = "{\"raw\": 1}";
  const std::string outputs[] = {shared, shared, small, own};
  std::vector<pb::ReportResultRequest> batch;
  for (int i = 0; i < 3; ++i) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = ls[i].lease();
    r.set_raw_output(outputs[i]);
    batch.push_back(r);
  }
  auto outs = store_->ReportResults(batch);
  ASSERT_TRUE(outs.ok()) << outs.status();
  for (const auto& o : *outs) ASSERT_TRUE(o.ok() && o->accepted) << o.status();
  pb::ReportResultRequest single;
  single.set_agent_id(a.agent_id());
  *single.mutable_lease() = ls[3].lease();
  single.set_raw_output(own);
  ASSERT_TRUE(store_->ReportResult(single).ok());

  EXPECT_EQ(Scalar<int64_t>("SELECT count(*) FROM raw_outputs"), 2);
  EXPECT_EQ(Scalar<int64_t>("SELECT count(DISTINCT raw_digest) FROM results"), 2);
  EXPECT_EQ(Scalar<int64_t>("SELECT count(*) FROM results WHERE raw_digest IS NOT NULL "
                            "AND raw_output = ''"),
            3);
  EXPECT_EQ(Scalar<std::string>("SELECT raw_output FROM results WHERE raw_digest IS NULL"), small);
  EXPECT_LT(Scalar<int64_t>("SELECT max(octet_length(zstd)) FROM raw_outputs"),
            static_cast<int64_t>(shared.size() / 2));
  // Keyed by the SHA-256 of the output as reported.
  EXPECT_EQ(Scalar<int64_t>("SELECT count(*) FROM raw_outputs "
                            "WHERE digest = sha256(convert_to('" +
                            shared + "', 'UTF8'))"),
            1);
  auto page = store_->ListResults(m, 0, 100, true, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*page)[i].raw_output(), outputs[i]) << i;
    EXPECT_EQ((*page)[i].raw_size(), static_cast<int64_t>(outputs[i].size())) << i;
  }
  // Sliced by characters: everything before the first é is ASCII.
  const int64_t e_acute = static_cast<int64_t>(shared.find("\xc3\xa9"));
  auto slice = store_->ReadRawOutput(ls[0].job().id(), 0, e_acute, 3);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->data, "\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(slice->total_bytes, static_cast<int64_t>(shared.size()));
}

// A database at version 25 with raw outputs in its result rows: migration
// 26 moves the long ones to raw_outputs (one row for two equal ones) and
// they read back unchanged.
TEST_F(StoragePgTest, RawOutputMigrationMovesLongOutputsOutOfRow) {
  auto uri = pg_->CreateDatabase("raw_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool old_pool(PgPoolOptions{*uri, 2, 3});
  ASSERT_EQ(AllMigrations()[25].version, 26);
  const std::string shared = LongRaw("shared"), small = "{\"raw\": 1}";
  ASSERT_TRUE(old_pool
                  .Run([&](pqxx::connection& c) {
                    pqxx::work w(c);
                    MigrateOnlyTo(w, 25);
                    InsertFinishedJobs(w, 3);
                    w.exec_params(
                        "INSERT INTO results (job_id, attempt, matrix_id, raw_output) "
                        "VALUES (1, 1, 1, $1), (2, 1, 1, $1), (3, 1, 1, $2)",
                        shared, small);
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  auto v = ApplyMigrations(old_pool);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, AllMigrations().back().version);
  EXPECT_EQ(Scalar<int64_t>(old_pool, "SELECT count(*) FROM raw_outputs"), 1);
  EXPECT_EQ(Scalar<int64_t>(old_pool,
                            "SELECT count(*) FROM results WHERE raw_output = '' "
                            "AND raw_digest IS NOT NULL"),
            2);
  PgStore store(&old_pool);
  auto page = store.ListResults(1, 0, 100, true, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 3u);
  EXPECT_EQ((*page)[0].raw_output(), shared);
  EXPECT_EQ((*page)[1].raw_output(), shared);
  EXPECT_EQ((*page)[2].raw_output(), small);
}

// Reports with equal host facts, through the single and the batched path
// and from agents reporting at once, store the facts once; other facts get
// their own row, and each result reads back its own.
TEST_F(StoragePgTest, EqualHostFactsAreStoredOnce) {
  const int64_t m = MakeMatrix(40);
  ASSERT_NE(m, 0);
  const int64_t before = Scalar<int64_t>("SELECT count(*) FROM result_hosts");
  pb::RegisterResponse a = Register("hosts-a"), b = Register("hosts-b");
  auto host_of = [](int k) {
    pb::HostFacts h;
    h.set_kernel_release(k % 2 == 0 ? "6.1" : "6.6");
    h.set_iommu_mode(pb::IOMMU_MODE_STRICT);
    h.mutable_hygiene()->set_governor("performance");
    return h;
  };
  auto request = [&](const pb::RegisterResponse& ag, const pb::JobLease& l, int k) {
    pb::ReportResultRequest r;
    r.set_agent_id(ag.agent_id());
    *r.mutable_lease() = l.lease();
    r.add_samples()->set_value(1.0);
    *r.mutable_host() = host_of(k);
    return r;
  };
  // Both agents at once, each in batches whose reports alternate the facts.
  std::vector<std::thread> agents;
  std::atomic<int> stored{0};
  for (const pb::RegisterResponse* ag : {&a, &b}) {
    agents.emplace_back([&, ag] {
      for (std::vector<pb::JobLease> ls = Lease(*ag, 5); !ls.empty(); ls = Lease(*ag, 5)) {
        std::vector<pb::ReportResultRequest> batch;
        for (size_t k = 0; k < ls.size(); ++k)
          batch.push_back(request(*ag, ls[k], ls[k].job().id()));
        auto outs = store_->ReportResults(batch);
        ASSERT_TRUE(outs.ok()) << outs.status();
        for (const auto& o : *outs) stored += o.ok() && o->accepted;
      }
    });
  }
  for (std::thread& t : agents) t.join();
  EXPECT_EQ(stored.load(), 40);
  EXPECT_EQ(Scalar<int64_t>("SELECT count(*) FROM result_hosts") - before, 2);
  // The single path finds the stored row; a third document is a third row.
  const int64_t m2 = MakeMatrix(2);
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  ASSERT_TRUE(store_->ReportResult(request(a, ls[0], 0)).ok());
  pb::ReportResultRequest other = request(a, ls[1], 0);
  other.mutable_host()->set_cpus(96);
  ASSERT_TRUE(store_->ReportResult(other).ok());
  EXPECT_EQ(Scalar<int64_t>("SELECT count(*) FROM result_hosts") - before, 3);
  EXPECT_EQ(Scalar<int64_t>("SELECT count(DISTINCT host_id) FROM results"), 3);
  auto page = store_->ListResults(m, 0, 100, false, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 40u);
  for (const pb::Result& r : *page) {
    EXPECT_EQ(r.host().kernel_release(), host_of(r.job_id()).kernel_release()) << r.job_id();
    EXPECT_EQ(r.host().hygiene().governor(), "performance");
  }
  auto page2 = store_->ListResults(m2, 0, 100, false, 0);
  ASSERT_TRUE(page2.ok()) << page2.status();
  ASSERT_EQ(page2->size(), 2u);
  EXPECT_EQ((*page2)[0].host().cpus() + (*page2)[1].host().cpus(), 96u);
}

// A database at version 27 with host facts in its result rows: migration
// 28 stores each distinct document once in result_hosts (equal ones
// written in another key order too), drops results.host, and every result
// reads back its own facts.
TEST_F(StoragePgTest, ResultHostsMigrationStoresEachHostOnce) {
  auto uri = pg_->CreateDatabase("hosts_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool old_pool(PgPoolOptions{*uri, 2, 3});
  ASSERT_EQ(AllMigrations()[26].version, 27);
  ASSERT_TRUE(old_pool
                  .Run([&](pqxx::connection& c) {
                    pqxx::work w(c);
                    MigrateOnlyTo(w, 27);
                    InsertFinishedJobs(w, 4);
                    w.exec(
                        "INSERT INTO results (job_id, attempt, matrix_id, host) VALUES "
                        "(1, 1, 1, '{\"kernel_release\": \"6.1\", \"cpus\": 8}'), "
                        "(2, 1, 1, '{\"cpus\": 8, \"kernel_release\": \"6.1\"}'), "
                        "(3, 1, 1, '{\"kernel_release\": \"6.6\"}')");
                    w.exec("INSERT INTO results (job_id, attempt, matrix_id) VALUES (4, 1, 1)");
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  auto v = ApplyMigrations(old_pool);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, AllMigrations().back().version);
  EXPECT_EQ(Scalar<int64_t>(old_pool, "SELECT count(*) FROM result_hosts"), 3);
  EXPECT_EQ(Scalar<int64_t>(old_pool, "SELECT host_id FROM results WHERE job_id = 4"), 0);
  EXPECT_EQ(Scalar<int64_t>(old_pool,
                            "SELECT count(DISTINCT host_id) FROM results WHERE job_id IN (1, 2)"),
            1);
  EXPECT_EQ(Scalar<int64_t>(old_pool,
                            "SELECT count(*) FROM information_schema.columns "
                            "WHERE table_name = 'results' AND column_name = 'host'"),
            0);
  PgStore store(&old_pool);
  auto page = store.ListResults(1, 0, 100, false, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 4u);
  EXPECT_EQ((*page)[0].host().kernel_release(), "6.1");
  EXPECT_EQ((*page)[0].host().cpus(), 8u);
  EXPECT_EQ((*page)[1].host().kernel_release(), "6.1");
  EXPECT_EQ((*page)[2].host().kernel_release(), "6.6");
  EXPECT_EQ((*page)[3].host().kernel_release(), "");
}

// A sample as a store reads it, for comparing two reads: NaN equals NaN.
std::string SampleText(const pb::Sample& s) {
  std::string out = absl::StrCat(s.metric(), "|", s.unit(), "|", s.phase(), "|", s.value(), "|",
                                 s.interval_seconds(), "|");
  for (double v : s.intervals()) absl::StrAppend(&out, v, ",");
  return out;
}

// A database at version 28 with samples in the results' jsonb column, as
// the writers before wrote them (SamplesToJson; older rows with empty unit
// and phase keys, a value missing, non-finite values as text, per-interval
// figures with a gap): migration 29 moves them to sample_keys and the
// arrays, drops the column, and every result reads back each of its
// samples as the version-28 reader (JsonToSamples of the column's text)
// read it; the analyzer reads its finite ones.
TEST_F(StoragePgTest, CompactSamplesMigrationReadsEverySampleBack) {
  auto uri = pg_->CreateDatabase("samples_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool old_pool(PgPoolOptions{*uri, 2, 3});
  ASSERT_EQ(AllMigrations()[27].version, 28);
  constexpr int kResults = 1200;
  const char* const kMetrics[] = {"throughput", "latency_us", "iops", "map_latency_mean"};
  const char* const kPhases[] = {"", "", "read", "write"};
  std::map<int64_t, std::vector<std::string>> want;  // job id -> its samples as read at 28
  int64_t finite = 0;
  ASSERT_TRUE(old_pool
                  .Run([&](pqxx::connection& c) {
                    pqxx::work w(c);
                    MigrateOnlyTo(w, 28);
                    InsertFinishedJobs(w, kResults);
                    std::mt19937_64 rng(7);
                    for (int id = 1; id <= kResults; ++id) {
                      pb::Result r;
                      const int n = static_cast<int>(rng() % 9);  // some results have none
                      for (int i = 0; i < n; ++i) {
                        pb::Sample* s = r.add_samples();
                        s->set_metric(kMetrics[rng() % 4]);
                        s->set_unit(rng() % 3 == 0 ? "" : "us");
                        s->set_phase(kPhases[rng() % 4]);
                        s->set_value(std::ldexp(static_cast<double>(rng() % 1000003) / 7.0,
                                                static_cast<int>(rng() % 80) - 40));
                        if (rng() % 50 == 0) s->set_value(std::nan(""));
                        if (rng() % 60 == 0) s->set_value(-HUGE_VAL);
                        if (rng() % 25 == 0) {
                          for (int k = 0; k < 5; ++k) s->add_intervals(0.1 * k + 1.0 / 3);
                          s->set_intervals(2, std::nan(""));  // a gap: null in JSON
                          s->set_interval_seconds(0.25);
                        }
                      }
                      std::string json = SamplesToJson(r.samples());
                      if (id % 100 == 1) {
                        json =
                            "[{\"metric\": \"throughput\", \"unit\": \"\", \"phase\": \"\", "
                            "\"value\": 2.5}, {\"phase\": \"read\", \"metric\": \"iops\"}, "
                            "{\"metric\": \"iops\", \"value\": \"inf\", \"unit\": \"IOPS\"}]";
                      }
                      w.exec_params(
                          "INSERT INTO results (job_id, attempt, matrix_id, samples) "
                          "VALUES ($1, 1, 1, $2::jsonb)",
                          id, json);
                    }
                    for (const pqxx::row& row :
                         w.exec("SELECT job_id, samples::text FROM results ORDER BY job_id")) {
                      google::protobuf::RepeatedPtrField<pb::Sample> read;
                      JsonToSamples(row[1].as<std::string>(), &read);
                      std::vector<std::string>& texts = want[row[0].as<int64_t>()];
                      for (const pb::Sample& s : read) {
                        texts.push_back(SampleText(s));
                        if (std::isfinite(s.value())) ++finite;
                      }
                    }
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());
  int64_t samples = 0;
  for (const auto& [job, texts] : want) samples += static_cast<int64_t>(texts.size());
  ASSERT_GT(samples, 4 * kResults);
  ASSERT_LT(finite, samples);

  auto v = ApplyMigrations(old_pool);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, AllMigrations().back().version);
  EXPECT_EQ(Scalar<int64_t>(old_pool,
                            "SELECT count(*) FROM information_schema.columns "
                            "WHERE table_name = 'results' AND column_name = 'samples'"),
            0);
  // 4 metrics x 2 units x 3 phases drawn, and the hand-written rows' 3.
  EXPECT_LE(Scalar<int64_t>(old_pool, "SELECT count(*) FROM sample_keys"), 4 * 2 * 3 + 3);
  EXPECT_EQ(Scalar<int64_t>(old_pool, "SELECT count(*) FROM result_samples"), samples);
  EXPECT_EQ(Scalar<int64_t>(old_pool, "SELECT sum(cardinality(sample_values)) FROM results"),
            samples);

  PgStore store(&old_pool);
  std::map<int64_t, std::vector<std::string>> got;
  for (int64_t after = 0;;) {
    auto page = store.ListResults(1, after, 500, false, 0);
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->empty()) break;
    for (const pb::Result& r : *page) {
      std::vector<std::string>& texts = got[r.job_id()];
      for (const pb::Sample& s : r.samples()) texts.push_back(SampleText(s));
      after = r.job_id();
    }
  }
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [job, texts] : want) EXPECT_EQ(got[job], texts) << "job " << job;

  std::unique_ptr<AnalyzerStore> analyzer = NewPgAnalyzerStore(&old_pool);
  auto read = analyzer->Samples({1});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(static_cast<int64_t>(read->size()), finite);
}

// The pid of the one backend of `pool`'s database, other than the caller's,
// that waits on `wait_event` ("relation": a table lock; "advisory": the
// migration lock), or 0 when none does within 30 s.
int WaitingBackend(PgPool& pool, const std::string& wait_event) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    int pid = 0;
    absl::Status st = pool.Run([&](pqxx::connection& c) {
      pqxx::nontransaction n(c);
      pqxx::result r = n.exec_params(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
          "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND wait_event = $1",
          wait_event);
      if (r.size() == 1) pid = r[0][0].as<int>();
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
    if (pid != 0) return pid;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

// A scheduler killed in the middle of a migration (its backend terminated,
// as a crash or an OOM kill ends it) leaves the database at the version
// before, with none of the half-applied migration visible; a second
// scheduler that was waiting for the migration lock takes it over and
// finishes, and no row is lost.
TEST_F(StoragePgTest, AMigratorKilledMidwayLeavesThePreviousVersionAndTheNextFinishes) {
  auto uri = pg_->CreateDatabase("killed_upgrade");
  ASSERT_TRUE(uri.ok()) << uri.status();
  PgPool first(PgPoolOptions{*uri, 1, 3});
  PgPool second(PgPoolOptions{*uri, 1, 3});
  PgPool watcher(PgPoolOptions{*uri, 2, 3});
  ASSERT_EQ(AllMigrations()[27].version, 28);
  ASSERT_TRUE(watcher
                  .Run([&](pqxx::connection& c) {
                    pqxx::work w(c);
                    MigrateOnlyTo(w, 27);
                    InsertFinishedJobs(w, 2);
                    w.exec(
                        "INSERT INTO results (job_id, attempt, matrix_id, host) VALUES "
                        "(1, 1, 1, '{\"kernel_release\": \"6.1\"}'), "
                        "(2, 1, 1, '{\"kernel_release\": \"6.6\"}')");
                    w.commit();
                    return absl::OkStatus();
                  })
                  .ok());

  // Migration 28 reads `results`; a table lock held here stops it there,
  // after it has created result_hosts in its own transaction.
  pqxx::connection blocker(*uri);
  pqxx::work hold(blocker);
  hold.exec("LOCK TABLE results IN ACCESS EXCLUSIVE MODE");

  absl::StatusOr<int> first_outcome = 0;
  std::thread first_run([&] { first_outcome = ApplyMigrations(first); });
  const int first_pid = WaitingBackend(watcher, "relation");
  ASSERT_NE(first_pid, 0) << "the first migrator never reached migration 28";
  absl::StatusOr<int> second_outcome = 0;
  std::thread second_run([&] { second_outcome = ApplyMigrations(second); });
  EXPECT_NE(WaitingBackend(watcher, "advisory"), 0) << "the second migrator did not wait";

  EXPECT_TRUE(Scalar<bool>(watcher, absl::StrCat("SELECT pg_terminate_backend(", first_pid, ")")));
  first_run.join();
  EXPECT_FALSE(first_outcome.ok());
  EXPECT_EQ(Scalar<int>(watcher, "SELECT max(version) FROM schema_migrations"), 27);
  EXPECT_TRUE(Scalar<bool>(watcher, "SELECT to_regclass('result_hosts') IS NULL"));
  EXPECT_EQ(Scalar<int64_t>(watcher,
                            "SELECT count(*) FROM information_schema.columns "
                            "WHERE table_name = 'results' AND column_name = 'host'"),
            1);

  // The second migrator now holds the migration lock and waits on the table.
  const int second_pid = WaitingBackend(watcher, "relation");
  EXPECT_NE(second_pid, 0);
  EXPECT_NE(second_pid, first_pid);
  hold.abort();
  second_run.join();
  ASSERT_TRUE(second_outcome.ok()) << second_outcome.status();
  EXPECT_EQ(*second_outcome, AllMigrations().back().version);
  EXPECT_EQ(Scalar<int64_t>(watcher, "SELECT count(*) FROM schema_migrations WHERE version = 28"),
            1);
  EXPECT_EQ(Scalar<int64_t>(watcher, "SELECT count(*) FROM result_hosts"), 3);
  PgStore store(&watcher);
  auto page = store.ListResults(1, 0, 100, false, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].host().kernel_release(), "6.1");
  EXPECT_EQ((*page)[1].host().kernel_release(), "6.6");
}

}  // namespace
}  // namespace farm::storage
