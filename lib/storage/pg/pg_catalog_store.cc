#include "lib/storage/pg/pg_catalog_store.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {

PgCatalogStore::PgCatalogStore(PgPool* pool) : pool_(pool) {}

absl::StatusOr<pb::Catalog> PgCatalogStore::PutCatalog(const pb::Catalog& catalog, bool replace) {
  return pool_->Call<pb::Catalog>([&](pqxx::connection& c) -> absl::StatusOr<pb::Catalog> {
    pqxx::work w(c);
    // Insert first, then lock: two loads of a new name never race into the
    // primary key (a database error text for a client), the second waits
    // for the first's row and then replaces it or is told it exists.
    pqxx::result ins = w.exec_params(
        "INSERT INTO catalogs (name, source) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING "
        "RETURNING (extract(epoch from loaded_at) * 1000000)::bigint",
        catalog.name(), catalog.source());
    int64_t loaded_at_us = 0;
    if (!ins.empty()) {
      loaded_at_us = ins[0][0].as<int64_t>();
    } else {
      if (!replace) {
        return absl::AlreadyExistsError(absl::StrCat(
            "catalog \"", catalog.name(), "\" already exists (load with replace to overwrite)"));
      }
      // The UPDATE locks the row first: a concurrent replace waits here
      // until this one commits, then deletes what this one wrote.
      loaded_at_us = w.exec_params1(
                          "UPDATE catalogs SET source = $2, loaded_at = now() WHERE name = $1 "
                          "RETURNING (extract(epoch from loaded_at) * 1000000)::bigint",
                          catalog.name(), catalog.source())[0]
                         .as<int64_t>();
      w.exec_params("DELETE FROM catalog_commits WHERE catalog = $1", catalog.name());
    }
    {
      pqxx::stream_to s(
          w, "catalog_commits",
          std::vector<std::string>{"catalog", "idx", "id", "subject", "set", "parents", "author"});
      int idx = 0;
      for (const pb::CatalogCommit& cc : catalog.commits()) {
        s << std::make_tuple(catalog.name(), idx++, cc.id(), cc.subject(), MapToJson(cc.set()),
                             absl::StrJoin(cc.parents(), " "), cc.author());
      }
      s.complete();
    }
    w.commit();
    pb::Catalog out = catalog;
    for (int i = 0; i < out.commits_size(); ++i) out.mutable_commits(i)->set_index(i);
    SetMicros(loaded_at_us, out.mutable_loaded_at());
    return out;
  });
}

absl::StatusOr<std::pair<pb::Catalog, int>> PgCatalogStore::AppendCommits(
    const std::string& catalog, const std::string& source,
    const std::vector<pb::CatalogCommit>& commits) {
  using Out = std::pair<pb::Catalog, int>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::work w(c);
    w.exec_params("INSERT INTO catalogs (name, source) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                  catalog, source);
    pqxx::row cat = w.exec_params1(
        "SELECT source, (extract(epoch from loaded_at) * 1000000)::bigint FROM catalogs "
        "WHERE name = $1 FOR UPDATE",
        catalog);
    std::set<std::string> have;
    int next = 0;
    for (const pqxx::row& r :
         w.exec_params("SELECT id, idx FROM catalog_commits WHERE catalog = $1", catalog)) {
      have.insert(r[0].as<std::string>());
      next = std::max(next, r[1].as<int>() + 1);
    }
    int added = 0;
    {
      pqxx::stream_to s(
          w, "catalog_commits",
          std::vector<std::string>{"catalog", "idx", "id", "subject", "set", "parents", "author"});
      for (const pb::CatalogCommit& cc : commits) {
        if (!have.insert(cc.id()).second) continue;
        s << std::make_tuple(catalog, next++, cc.id(), cc.subject(), MapToJson(cc.set()),
                             absl::StrJoin(cc.parents(), " "), cc.author());
        ++added;
      }
      s.complete();
    }
    w.commit();
    pb::Catalog out;
    out.set_name(catalog);
    out.set_source(cat[0].as<std::string>());
    SetMicros(cat[1].as<int64_t>(), out.mutable_loaded_at());
    return Out{out, added};
  });
}

absl::StatusOr<std::vector<pb::Catalog>> PgCatalogStore::ListCatalogs() {
  using Out = std::vector<pb::Catalog>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    for (const pqxx::row& r :
         t.exec("SELECT name, source, (extract(epoch from loaded_at) * 1000000)::bigint "
                "FROM catalogs ORDER BY name")) {
      pb::Catalog cat;
      cat.set_name(r[0].as<std::string>());
      cat.set_source(r[1].as<std::string>());
      SetMicros(r[2].as<int64_t>(), cat.mutable_loaded_at());
      out.push_back(std::move(cat));
    }
    return out;
  });
}

absl::StatusOr<pb::Catalog> PgCatalogStore::GetCatalog(const std::string& name) {
  return pool_->Call<pb::Catalog>([&](pqxx::connection& c) -> absl::StatusOr<pb::Catalog> {
    pqxx::read_transaction t(c);
    pqxx::result head = t.exec_params(
        "SELECT source, (extract(epoch from loaded_at) * 1000000)::bigint FROM catalogs "
        "WHERE name = $1",
        name);
    if (head.empty()) return absl::NotFoundError(absl::StrCat("catalog \"", name, "\" not found"));
    pb::Catalog cat;
    cat.set_name(name);
    cat.set_source(head[0][0].as<std::string>());
    SetMicros(head[0][1].as<int64_t>(), cat.mutable_loaded_at());
    for (const pqxx::row& r :
         t.exec_params("SELECT idx, id, subject, set::text, parents, author FROM catalog_commits "
                       "WHERE catalog = $1 "
                       "ORDER BY idx",
                       name)) {
      pb::CatalogCommit* cc = cat.add_commits();
      cc->set_index(r[0].as<int>());
      cc->set_id(r[1].as<std::string>());
      cc->set_subject(r[2].as<std::string>());
      JsonToMap(r[3].as<std::string>(), cc->mutable_set());
      for (absl::string_view p : absl::StrSplit(r[4].as<std::string>(), ' ', absl::SkipEmpty()))
        cc->add_parents(std::string(p));
      cc->set_author(r[5].as<std::string>());
    }
    return cat;
  });
}

}  // namespace farm::storage
