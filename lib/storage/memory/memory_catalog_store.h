// MemoryCatalogStore: CatalogStore over a MemoryDatabase, with the semantics
// of PgCatalogStore (lib/storage/pg/pg_catalog_store.cc) statement by
// statement.
//
// Contract: thread-safe; does not own the database, which must outlive it.
#ifndef LIB_STORAGE_MEMORY_MEMORY_CATALOG_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_CATALOG_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/catalog_store.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryCatalogStore : public CatalogStore {
 public:
  explicit MemoryCatalogStore(MemoryDatabase* db) : db_(db) {}
  MemoryCatalogStore(const MemoryCatalogStore&) = delete;
  MemoryCatalogStore& operator=(const MemoryCatalogStore&) = delete;

  absl::StatusOr<pb::Catalog> PutCatalog(const pb::Catalog& catalog, bool replace) override;
  absl::StatusOr<std::pair<pb::Catalog, int>> AppendCommits(
      const std::string& catalog, const std::string& source,
      const std::vector<pb::CatalogCommit>& commits) override;
  absl::StatusOr<std::vector<pb::Catalog>> ListCatalogs() override;
  absl::StatusOr<pb::Catalog> GetCatalog(const std::string& name) override;

 private:
  MemoryDatabase* const db_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_CATALOG_STORE_H_
