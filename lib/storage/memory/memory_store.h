// MemoryStore: every repository in memory over one MemoryDatabase it owns,
// the stand-in for PgStore in hermetic tests (scheduler service tests, the
// repository contract suite). Same fencing, ordering and error codes as the
// PostgreSQL repositories; nothing survives the object.
//
// Contract: thread-safe. db() is the back door tests use the way
// PostgreSQL tests run SQL (expire leases, put analyzer rows).
#ifndef LIB_STORAGE_MEMORY_MEMORY_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_STORE_H_

#include <functional>
#include <utility>

#include "lib/storage/memory/memory_analysis_store.h"
#include "lib/storage/memory/memory_catalog_store.h"
#include "lib/storage/memory/memory_database.h"
#include "lib/storage/memory/memory_job_queue.h"
#include "lib/storage/memory/memory_matrix_events.h"
#include "lib/storage/memory/memory_matrix_store.h"
#include "lib/storage/repositories.h"

namespace farm::storage {

namespace memory_internal {
// Base-from-member: the database is built before the repositories that use it.
struct DatabaseHolder {
  explicit DatabaseHolder(std::function<absl::Time()> clock) : database(std::move(clock)) {}
  MemoryDatabase database;
};
}  // namespace memory_internal

class MemoryStore final : private memory_internal::DatabaseHolder,
                          public MemoryCatalogStore,
                          public MemoryMatrixStore,
                          public MemoryJobQueue,
                          public MemoryAnalysisStore {
 public:
  explicit MemoryStore(std::function<absl::Time()> clock = absl::Now)
      : DatabaseHolder(std::move(clock)),
        MemoryCatalogStore(&database),
        MemoryMatrixStore(&database),
        MemoryJobQueue(&database),
        MemoryAnalysisStore(&database),
        events_(&database) {}
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  MemoryDatabase& db() { return database; }
  MatrixEvents* events() { return &events_; }

 private:
  MemoryMatrixEvents events_;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_STORE_H_
