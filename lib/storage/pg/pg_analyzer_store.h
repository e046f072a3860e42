// The libpqxx implementation of AnalyzerStore (lib/storage/analyzer_store.h)
// over the scheduler's schema (migrations.cc). Only farm-analyzer's main.cc
// and the database tests construct it; the engine sees the interface, and
// this header pulls in no libpqxx either.
//
// Contract: thread-safe (every call is its own transaction on a pooled
// connection). The pool is not owned and must outlive the store. Requires
// the schema of migrations.h (ApplyMigrations) to be applied.
#ifndef LIB_STORAGE_PG_PG_ANALYZER_STORE_H_
#define LIB_STORAGE_PG_PG_ANALYZER_STORE_H_

#include <memory>

#include "lib/storage/analyzer_store.h"

namespace farm::storage {

class PgPool;

std::unique_ptr<AnalyzerStore> NewPgAnalyzerStore(PgPool* pool);

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_ANALYZER_STORE_H_
