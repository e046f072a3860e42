// PgAnalysisStore: AnalysisStore in PostgreSQL (regressions, bisects,
// bisect_steps; the analyzer writes them).
//
// Contract: thread-safe (each call checks out its own pooled connection);
// does not own the pool, which must outlive it. Requires the schema of
// migrations.h (ApplyMigrations) to be applied.
#ifndef LIB_STORAGE_PG_PG_ANALYSIS_STORE_H_
#define LIB_STORAGE_PG_PG_ANALYSIS_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/analysis_store.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {

class PgAnalysisStore : public AnalysisStore {
 public:
  explicit PgAnalysisStore(PgPool* pool);
  PgAnalysisStore(const PgAnalysisStore&) = delete;
  PgAnalysisStore& operator=(const PgAnalysisStore&) = delete;

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

#endif  // LIB_STORAGE_PG_PG_ANALYSIS_STORE_H_
