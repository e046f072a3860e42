// The repository contract suites (lib/storage/contract/repository_contract.h)
// on PostgreSQL: PgStore and the PostgreSQL AnalyzerStore over a fresh
// database per case, in one private cluster for the binary (farm_testing
// harness).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/storage/contract/repository_contract.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_store.h"
#include "lib/storage/row_codec.h"
#include "testing/service_harness.h"

namespace farm::storage {
namespace {

using ::farm::testing::PostgresInstance;

// The cluster, started on the main thread before the first case (the
// harness ties the server's life to the starting thread).
PostgresInstance* g_pg = nullptr;

class PgEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    g_pg = pg->release();
  }
  void TearDown() override {
    delete g_pg;
    g_pg = nullptr;
  }
};

[[maybe_unused]] ::testing::Environment* const kPgEnvironment =
    ::testing::AddGlobalTestEnvironment(new PgEnvironment);

class PgBackend final : public ContractBackend {
 public:
  static std::unique_ptr<ContractBackend> Make() {
    if (g_pg == nullptr) {
      ADD_FAILURE() << "no PostgreSQL cluster";
      return nullptr;
    }
    static std::atomic<int> n{0};
    auto uri = g_pg->CreateDatabase("contract" + std::to_string(n++));
    if (!uri.ok()) {
      ADD_FAILURE() << uri.status();
      return nullptr;
    }
    auto b = std::unique_ptr<PgBackend>(new PgBackend(*uri));
    auto v = ApplyMigrations(b->pool_);
    if (!v.ok()) {
      ADD_FAILURE() << v.status();
      return nullptr;
    }
    return b;
  }

  CatalogStore& catalogs() override { return store_; }
  MatrixStore& matrices() override { return store_; }
  JobQueue& queue() override { return store_; }
  AnalysisStore& analysis() override { return store_; }
  AnalyzerStore& analyzer() override { return *analyzer_; }

  void ExpireAllLeases() override {
    Exec([](pqxx::work& w) {
      w.exec("UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE state = 2");
      w.exec("UPDATE jobs SET not_before = now() WHERE state = 1");
    });
  }
  pb::JobState StateOf(int64_t job_id) override {
    auto st = pool_.Call<int>([&](pqxx::connection& c) -> absl::StatusOr<int> {
      pqxx::work w(c);
      return w.exec_params1("SELECT state FROM jobs WHERE id = $1", job_id)[0].as<int>();
    });
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? static_cast<pb::JobState>(*st) : pb::JOB_STATE_UNSPECIFIED;
  }
  std::string FailureReason(int64_t job_id) override {
    auto r = pool_.Call<std::string>([&](pqxx::connection& c) -> absl::StatusOr<std::string> {
      pqxx::work w(c);
      return w.exec_params1("SELECT failure_reason FROM jobs WHERE id = $1", job_id)[0]
          .as<std::string>();
    });
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::string();
  }
  void PutRegression(const pb::Regression& g) override {
    const std::string primary_metrics =
        nlohmann::json(
            std::vector<std::string>(g.primary_metrics().begin(), g.primary_metrics().end()))
            .dump();
    Exec([&](pqxx::work& w) {
      w.exec_params(
          "INSERT INTO regressions (id, state, change_class, direction, platform, workload, "
          "metric, mode, overhead_series, catalog, last_good, first_bad, magnitude, p_value, "
          "per_mode, bisect_id, culprit_id, culprit_subject, alert_firing, note, matrix_id, "
          "metric_rank, primary_metrics) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
          "$12, $13, $14, $15::jsonb, NULLIF($16, 0), $17, $18, $19, $20, NULLIF($21, 0), "
          "CASE WHEN $22 = '' THEN 'primary' ELSE $22 END, "
          "ARRAY(SELECT jsonb_array_elements_text($23::jsonb)))",
          g.id(), static_cast<int>(g.state()), static_cast<int>(g.change_class()),
          static_cast<int>(g.direction()), g.platform(), g.workload(), g.metric(),
          static_cast<int>(g.mode()), g.overhead_series(), g.catalog(), g.last_good(),
          g.first_bad(), g.magnitude(), g.p_value(), PerModeToJson(g.per_mode()), g.bisect_id(),
          g.culprit_id(), g.culprit_subject(), g.alert_firing(), g.note(), g.matrix_id(),
          g.metric_rank(), primary_metrics);
    });
  }
  void PutBisect(const pb::Bisect& b) override {
    Exec([&](pqxx::work& w) {
      w.exec_params(
          "INSERT INTO bisects (id, regression_id, state, last_good, first_bad, culprit_id, "
          "culprit_subject) VALUES ($1, $2, $3, $4, $5, $6, $7)",
          b.id(), b.regression_id(), b.state(), b.last_good(), b.first_bad(), b.culprit_id(),
          b.culprit_subject());
      for (const pb::BisectStep& s : b.steps()) {
        w.exec_params(
            "INSERT INTO bisect_steps (bisect_id, step, commit_id, commit_index, verdict, "
            "repeats, mean, p_value, relative_change) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            b.id(), s.step(), s.commit_id(), s.commit_index(), s.verdict(), s.repeats(), s.mean(),
            s.p_value(), s.relative_change());
      }
      int ordinal = 0;
      for (const pb::Culprit& c : b.culprits()) {
        w.exec_params(
            "INSERT INTO bisect_culprits (bisect_id, ordinal, commit_id, commit_index, "
            "last_good, subject, relative_change, share) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            b.id(), ++ordinal, c.commit_id(), c.commit_index(), c.last_good(), c.subject(),
            c.relative_change(), c.share());
      }
    });
  }

 private:
  explicit PgBackend(const std::string& uri)
      : pool_(PgPoolOptions{uri, 6, 3}), store_(&pool_), analyzer_(NewPgAnalyzerStore(&pool_)) {}

  void Exec(const std::function<void(pqxx::work&)>& fn) {
    absl::Status st = pool_.Run([&](pqxx::connection& c) {
      pqxx::work w(c);
      fn(w);
      w.commit();
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
  }

  PgPool pool_;
  PgStore store_;
  std::unique_ptr<AnalyzerStore> analyzer_;
};

const ContractParam kPostgres{"postgres", &PgBackend::Make};

INSTANTIATE_TEST_SUITE_P(Postgres, RepositoryContractTest, ::testing::Values(kPostgres),
                         ContractParamName);
INSTANTIATE_TEST_SUITE_P(Postgres, AnalyzerStoreContractTest, ::testing::Values(kPostgres),
                         ContractParamName);

}  // namespace
}  // namespace farm::storage
