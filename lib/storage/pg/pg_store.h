// PgStore: every PostgreSQL repository of one database in one object, so a
// process (scheduler, bench) builds one store over its pool and hands it out
// as each interface. The repositories themselves are pg_catalog_store.h,
// pg_matrix_store.h, pg_job_queue.h and pg_analysis_store.h; change events
// are pg_listener.h's (a connection of its own).
//
// Contract: thread-safe (each call checks out its own pooled connection);
// does not own the pool, which must outlive it. Requires the schema of
// migrations.h (ApplyMigrations) to be applied. All fencing is in SQL.
#ifndef LIB_STORAGE_PG_PG_STORE_H_
#define LIB_STORAGE_PG_PG_STORE_H_

#include "lib/storage/pg/pg_analysis_store.h"
#include "lib/storage/pg/pg_catalog_store.h"
#include "lib/storage/pg/pg_job_queue.h"
#include "lib/storage/pg/pg_matrix_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/repositories.h"

namespace farm::storage {

class PgStore final : public PgCatalogStore,
                      public PgMatrixStore,
                      public PgJobQueue,
                      public PgAnalysisStore {
 public:
  explicit PgStore(PgPool* pool)
      : PgCatalogStore(pool), PgMatrixStore(pool), PgJobQueue(pool), PgAnalysisStore(pool) {}
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_STORE_H_
