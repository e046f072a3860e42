#include "lib/storage/memory/memory_catalog_store.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {
namespace {

// A commit as catalog_commits holds it: (idx, id, subject, set as jsonb,
// parents, author).
pb::CatalogCommit StoredCommit(const pb::CatalogCommit& cc, int idx) {
  pb::CatalogCommit out;
  out.set_index(idx);
  out.set_id(cc.id());
  out.set_subject(cc.subject());
  JsonToMap(MapToJson(cc.set()), out.mutable_set());
  *out.mutable_parents() = cc.parents();
  out.set_author(cc.author());
  return out;
}

}  // namespace

absl::StatusOr<pb::Catalog> MemoryCatalogStore::PutCatalog(const pb::Catalog& catalog,
                                                           bool replace) {
  return db_->Write(
      [&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) -> absl::StatusOr<pb::Catalog> {
        if (t.catalogs.count(catalog.name()) != 0 && !replace) {
          return absl::AlreadyExistsError(absl::StrCat(
              "catalog \"", catalog.name(), "\" already exists (load with replace to overwrite)"));
        }
        CatalogRow row;
        row.source = catalog.source();
        row.loaded_at = db_->Now();
        std::set<std::string> ids;
        for (const pb::CatalogCommit& cc : catalog.commits()) {
          // UNIQUE (catalog, id): the COPY fails and nothing is stored.
          if (!ids.insert(cc.id()).second) {
            return absl::AlreadyExistsError(absl::StrCat("catalog \"", catalog.name(),
                                                         "\": duplicate commit \"", cc.id(), "\""));
          }
          row.commits.push_back(StoredCommit(cc, static_cast<int>(row.commits.size())));
        }
        const absl::Time loaded_at = row.loaded_at;
        t.catalogs[catalog.name()] = std::move(row);
        pb::Catalog out = catalog;
        for (int i = 0; i < out.commits_size(); ++i) out.mutable_commits(i)->set_index(i);
        SetTime(loaded_at, out.mutable_loaded_at());
        return out;
      });
}

absl::StatusOr<std::pair<pb::Catalog, int>> MemoryCatalogStore::AppendCommits(
    const std::string& catalog, const std::string& source,
    const std::vector<pb::CatalogCommit>& commits) {
  using Out = std::pair<pb::Catalog, int>;
  return db_->Write(
      [&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) -> absl::StatusOr<Out> {
        auto [it, inserted] = t.catalogs.try_emplace(catalog);
        CatalogRow& row = it->second;
        if (inserted) {
          row.source = source;
          row.loaded_at = db_->Now();
        }
        std::set<std::string> have;
        for (const pb::CatalogCommit& cc : row.commits) have.insert(cc.id());
        int added = 0;
        for (const pb::CatalogCommit& cc : commits) {
          if (!have.insert(cc.id()).second) continue;
          row.commits.push_back(StoredCommit(cc, static_cast<int>(row.commits.size())));
          ++added;
        }
        pb::Catalog out;
        out.set_name(catalog);
        out.set_source(row.source);
        SetTime(row.loaded_at, out.mutable_loaded_at());
        return Out{out, added};
      });
}

absl::StatusOr<std::vector<pb::Catalog>> MemoryCatalogStore::ListCatalogs() {
  return db_->Read(
      [&](const MemoryDatabase::Tables& t) -> absl::StatusOr<std::vector<pb::Catalog>> {
        std::vector<pb::Catalog> out;
        for (const auto& [name, row] : t.catalogs) {  // ORDER BY name
          pb::Catalog cat;
          cat.set_name(name);
          cat.set_source(row.source);
          SetTime(row.loaded_at, cat.mutable_loaded_at());
          out.push_back(std::move(cat));
        }
        return out;
      });
}

absl::StatusOr<pb::Catalog> MemoryCatalogStore::GetCatalog(const std::string& name) {
  return db_->Read([&](const MemoryDatabase::Tables& t) -> absl::StatusOr<pb::Catalog> {
    auto it = t.catalogs.find(name);
    if (it == t.catalogs.end()) {
      return absl::NotFoundError(absl::StrCat("catalog \"", name, "\" not found"));
    }
    pb::Catalog cat;
    cat.set_name(name);
    cat.set_source(it->second.source);
    SetTime(it->second.loaded_at, cat.mutable_loaded_at());
    for (const pb::CatalogCommit& cc : it->second.commits) *cat.add_commits() = cc;
    return cat;
  });
}

}  // namespace farm::storage
