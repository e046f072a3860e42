// MemoryMatrixStore: MatrixStore over a MemoryDatabase, with the semantics
// of PgMatrixStore (lib/storage/pg/pg_matrix_store.cc) statement by statement.
//
// Contract: thread-safe; does not own the database, which must outlive it.
#ifndef LIB_STORAGE_MEMORY_MEMORY_MATRIX_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_MATRIX_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/matrix_store.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryMatrixStore : public MatrixStore {
 public:
  explicit MemoryMatrixStore(MemoryDatabase* db) : db_(db) {}
  MemoryMatrixStore(const MemoryMatrixStore&) = delete;
  MemoryMatrixStore& operator=(const MemoryMatrixStore&) = delete;

  absl::StatusOr<CreatedMatrix> CreateMatrix(const NewMatrix& m) override;
  absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) override;
  absl::StatusOr<std::vector<pb::JobFailure>> ListFailures(int64_t matrix_id, int limit) override;
  absl::StatusOr<std::vector<pb::Matrix>> ListMatrices(int limit, int64_t before_id) override;
  absl::StatusOr<std::pair<pb::Matrix, int64_t>> CancelMatrix(int64_t id,
                                                              const std::string& reason) override;
  absl::StatusOr<std::vector<pb::Result>> ListResults(int64_t matrix_id, int64_t after_job_id,
                                                      int limit, bool include_raw,
                                                      int64_t max_raw_bytes) override;
  absl::StatusOr<RawOutputSlice> ReadRawOutput(int64_t job_id, int attempt, int64_t from_char,
                                               int64_t max_chars) override;
  absl::StatusOr<std::vector<pb::Job>> LiveBuildJobs(
      const std::string& catalog, const std::vector<std::string>& commits) override;
  absl::StatusOr<std::vector<pb::JobProgress>> ListBuilding(int64_t matrix_id) override;

 private:
  MemoryDatabase* const db_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_MATRIX_STORE_H_
