// PgStore: the libpqxx (PostgreSQL) implementation of every repository
// interface in repositories.h, over a PgPool.
//
// Contract: thread-safe (each call checks out its own pooled connection);
// does not own the pool, which must outlive it. Requires the schema of
// migrations.h (ApplyMigrations) to be applied. All fencing is in SQL.
// The lease claim and the result report run as prepared statements
// (PgPool::Prepare: defined again on every new connection, so a PostgreSQL
// restart costs one re-prepare per connection, not an error).
#ifndef LIB_STORAGE_PG_STORE_H_
#define LIB_STORAGE_PG_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/pg_pool.h"
#include "lib/storage/repositories.h"

namespace farm::storage {

class PgStore final : public CatalogStore,
                      public MatrixStore,
                      public JobQueue,
                      public AnalysisStore {
 public:
  // Registers the hot queue statements (claim, report) as prepared
  // statements on the pool's connections.
  explicit PgStore(PgPool* pool);
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  // CatalogStore
  absl::StatusOr<pb::Catalog> PutCatalog(const pb::Catalog& catalog, bool replace) override;
  absl::StatusOr<std::pair<pb::Catalog, int>> AppendCommits(
      const std::string& catalog, const std::string& source,
      const std::vector<pb::CatalogCommit>& commits) override;
  absl::StatusOr<std::vector<pb::Catalog>> ListCatalogs() override;
  absl::StatusOr<pb::Catalog> GetCatalog(const std::string& name) override;

  // MatrixStore
  absl::StatusOr<CreatedMatrix> CreateMatrix(const NewMatrix& m) override;
  absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) override;
  absl::StatusOr<std::vector<pb::Matrix>> ListMatrices(int limit, int64_t before_id) override;
  absl::StatusOr<std::pair<pb::Matrix, int64_t>> CancelMatrix(int64_t id,
                                                              const std::string& reason) override;
  absl::StatusOr<std::vector<pb::Result>> ListResults(int64_t matrix_id, int64_t after_job_id,
                                                      int limit, bool include_raw) override;

  // JobQueue
  absl::StatusOr<pb::RegisterResponse> RegisterAgent(const pb::RegisterRequest& req,
                                                     const RetryPolicy& retry) override;
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& req,
                                                  absl::Duration ttl) override;
  absl::StatusOr<std::vector<pb::JobLease>> LeaseJobs(int64_t agent_id, const std::string& session,
                                                      int max_jobs, absl::Duration ttl,
                                                      const JobPredicate& eligible) override;
  absl::StatusOr<ReportOutcome> ReportResult(const pb::ReportResultRequest& req) override;
  absl::StatusOr<pb::JobState> ReportFailure(const pb::ReportFailureRequest& req,
                                             const RetryPolicy& retry) override;
  absl::StatusOr<int> ReleaseLeases(const pb::ReleaseLeasesRequest& req) override;
  absl::StatusOr<ReapOutcome> ReapExpired(const RetryPolicy& retry, int limit) override;
  absl::StatusOr<std::array<int64_t, 6>> QueueCounts() override;
  absl::StatusOr<std::vector<pb::Agent>> ListAgents(absl::Duration liveness) override;
  absl::StatusOr<std::string> AgentName(int64_t agent_id) override;

  // AnalysisStore
  absl::StatusOr<std::vector<pb::Regression>> ListRegressions(
      const pb::ListRegressionsRequest& req) override;
  absl::StatusOr<pb::Regression> GetRegression(int64_t id) override;
  absl::StatusOr<pb::Bisect> GetBisect(int64_t bisect_id, int64_t regression_id) override;
  absl::StatusOr<pb::Regression> UpdateRegression(int64_t id, pb::RegressionState state,
                                                  const std::string& note) override;

 private:
  PgPool* const pool_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_STORE_H_
