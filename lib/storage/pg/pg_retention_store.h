// PgRetentionStore: RetentionStore in PostgreSQL. Reads the facts the
// policy (PlanPrune) needs in one read transaction, then runs each batch
// of the plan in its own transaction: the batch's matrices are locked and
// checked against the keep rules again, counted, then deleted (jobs,
// results, shared params and settings go by ON DELETE CASCADE; the jobs
// trigger takes terminal jobs off the queue totals) or, raw-only, their
// results' raw output is emptied and stamped raw_pruned_at (migration 25).
// Either way the batch then deletes the out-of-row raw outputs
// (raw_outputs, pg_raw_outputs.h) its results named and no result names
// any more.
//
// Contract: thread-safe; does not own the pool, which must outlive it.
#ifndef LIB_STORAGE_PG_PG_RETENTION_STORE_H_
#define LIB_STORAGE_PG_PG_RETENTION_STORE_H_

#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/retention_store.h"

namespace farm::storage {

class PgRetentionStore final : public RetentionStore {
 public:
  explicit PgRetentionStore(PgPool* pool) : pool_(pool) {}
  PgRetentionStore(const PgRetentionStore&) = delete;
  PgRetentionStore& operator=(const PgRetentionStore&) = delete;

  absl::StatusOr<pb::PruneResponse> Prune(const PruneOptions& options) override;

 private:
  absl::StatusOr<std::vector<MatrixRetentionFacts>> ReadFacts();
  absl::StatusOr<pb::PruneCounts> CountOnly(const std::vector<int64_t>& ids, bool raw_only);
  absl::StatusOr<pb::PruneCounts> RunBatch(const std::vector<int64_t>& batch,
                                           const PruneOptions& options);

  PgPool* const pool_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_RETENTION_STORE_H_
