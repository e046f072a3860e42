// MemoryAnalysisStore: AnalysisStore over a MemoryDatabase, with the
// semantics of PgAnalysisStore (lib/storage/pg/pg_analysis_store.cc). The
// analyzer's rows (regressions, bisects) are put in through
// MemoryDatabase::Write().
//
// Contract: thread-safe; does not own the database, which must outlive it.
#ifndef LIB_STORAGE_MEMORY_MEMORY_ANALYSIS_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_ANALYSIS_STORE_H_

#include <string>
#include <vector>

#include "lib/storage/analysis_store.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryAnalysisStore : public AnalysisStore {
 public:
  explicit MemoryAnalysisStore(MemoryDatabase* db) : db_(db) {}
  MemoryAnalysisStore(const MemoryAnalysisStore&) = delete;
  MemoryAnalysisStore& operator=(const MemoryAnalysisStore&) = delete;

  absl::StatusOr<std::vector<pb::Regression>> ListRegressions(
      const pb::ListRegressionsRequest& req) override;
  absl::StatusOr<pb::Regression> GetRegression(int64_t id) override;
  absl::StatusOr<pb::Bisect> GetBisect(int64_t bisect_id, int64_t regression_id) override;
  absl::StatusOr<pb::Regression> UpdateRegression(int64_t id, pb::RegressionState state,
                                                  const std::string& note) override;

 private:
  MemoryDatabase* const db_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_ANALYSIS_STORE_H_
