// Versioned schema migrations for the farm's PostgreSQL database.
//
// Contract:
//  - Migrations are numbered from 1, applied in order, each in its own
//    transaction, and recorded in schema_migrations(version, name,
//    applied_at). Applied ones are never edited: change the schema by adding
//    a migration at the end of the list in migrations.cc.
//  - ApplyMigrations() holds a session-level pg_advisory_lock while it works,
//    so several schedulers (or the analyzer) starting at once against one
//    database apply each migration exactly once; the others wait, then see
//    nothing left to do.
//  - A migration is SQL and, where SQL cannot do the work, a C++ step run
//    after it in the same transaction (migration 26 compresses raw output).
//  - Thread-safe (uses one pooled connection for the whole run).
#ifndef LIB_STORAGE_PG_MIGRATIONS_H_
#define LIB_STORAGE_PG_MIGRATIONS_H_

#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/statusor.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {

struct Migration {
  int version;
  std::string name;
  std::string sql;
  // Work SQL cannot do (e.g. compressing rows), run after `sql` in the same
  // transaction; may be null.
  void (*after)(pqxx::transaction_base& t) = nullptr;
};

// All migrations, in order.
const std::vector<Migration>& AllMigrations();

// Applies the missing migrations. Returns the schema version afterwards.
absl::StatusOr<int> ApplyMigrations(PgPool& pool);

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_MIGRATIONS_H_
