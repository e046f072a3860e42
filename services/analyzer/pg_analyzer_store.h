// The libpqxx implementation of AnalyzerStore (analyzer_store.h) over the
// scheduler's schema (lib/storage/migrations.cc). Only main.cc and the
// database tests construct it; the engine sees the interface, so no header of
// it pulls in libpqxx.
//
// Thread-safe: every call is its own transaction on a pooled connection.
// The pool is not owned and must outlive the store.
#ifndef SERVICES_ANALYZER_PG_ANALYZER_STORE_H_
#define SERVICES_ANALYZER_PG_ANALYZER_STORE_H_

#include <memory>

#include "services/analyzer/analyzer_store.h"

namespace farm::storage {
class PgPool;
}  // namespace farm::storage

namespace farm::analyzer {

std::unique_ptr<AnalyzerStore> NewPgAnalyzerStore(storage::PgPool* pool);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_PG_ANALYZER_STORE_H_
