// CatalogStore: the commit catalogs (ordered commit lists with the model
// keys each commit sets) that matrix specs name.
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_CATALOG_STORE_H_
#define LIB_STORAGE_CATALOG_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

class CatalogStore {
 public:
  virtual ~CatalogStore() = default;
  // Stores `catalog` (name, source, commits in order; indexes are
  // renumbered 0..n-1). kAlreadyExists if present and !replace.
  virtual absl::StatusOr<pb::Catalog> PutCatalog(const pb::Catalog& catalog, bool replace) = 0;
  // Appends the commits whose id is not yet in the catalog (creating the
  // catalog if needed), in the given order. Returns the catalog (without
  // commits) and how many were added.
  virtual absl::StatusOr<std::pair<pb::Catalog, int>> AppendCommits(
      const std::string& catalog, const std::string& source,
      const std::vector<pb::CatalogCommit>& commits) = 0;
  // Catalogs without their commits.
  virtual absl::StatusOr<std::vector<pb::Catalog>> ListCatalogs() = 0;
  // One catalog with its commits (id, subject, index, set), oldest first.
  virtual absl::StatusOr<pb::Catalog> GetCatalog(const std::string& name) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_CATALOG_STORE_H_
