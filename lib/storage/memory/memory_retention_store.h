// MemoryRetentionStore: RetentionStore over the MemoryDatabase the other
// memory repositories share, for hermetic tests; the same policy
// (PlanPrune) and batches as PgRetentionStore.
//
// Contract: thread-safe; `db` is not owned and must outlive this object.
// Every batch is one Write(), so readers see each matrix whole or gone.
#ifndef LIB_STORAGE_MEMORY_MEMORY_RETENTION_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_RETENTION_STORE_H_

#include "lib/storage/memory/memory_database.h"
#include "lib/storage/retention_store.h"

namespace farm::storage {

class MemoryRetentionStore final : public RetentionStore {
 public:
  explicit MemoryRetentionStore(MemoryDatabase* db) : db_(db) {}

  absl::StatusOr<pb::PruneResponse> Prune(const PruneOptions& options) override;

 private:
  MemoryDatabase* const db_;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_RETENTION_STORE_H_
