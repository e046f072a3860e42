// PgCatalogStore: CatalogStore in PostgreSQL (catalogs, catalog_commits;
// commits are written by COPY).
//
// Contract: thread-safe (each call checks out its own pooled connection);
// does not own the pool, which must outlive it. Requires the schema of
// migrations.h (ApplyMigrations) to be applied.
#ifndef LIB_STORAGE_PG_PG_CATALOG_STORE_H_
#define LIB_STORAGE_PG_PG_CATALOG_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/catalog_store.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {

class PgCatalogStore : public CatalogStore {
 public:
  explicit PgCatalogStore(PgPool* pool);
  PgCatalogStore(const PgCatalogStore&) = delete;
  PgCatalogStore& operator=(const PgCatalogStore&) = delete;

  absl::StatusOr<pb::Catalog> PutCatalog(const pb::Catalog& catalog, bool replace) override;
  absl::StatusOr<std::pair<pb::Catalog, int>> AppendCommits(
      const std::string& catalog, const std::string& source,
      const std::vector<pb::CatalogCommit>& commits) override;
  absl::StatusOr<std::vector<pb::Catalog>> ListCatalogs() override;
  absl::StatusOr<pb::Catalog> GetCatalog(const std::string& name) override;

 private:
  PgPool* const pool_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_CATALOG_STORE_H_
