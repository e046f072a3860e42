// Repository interfaces over the farm's durable state, one header each:
//   catalog_store.h   CatalogStore: the commit catalogs
//   matrix_store.h    MatrixStore: matrices, their jobs and accepted results
//   job_queue.h       JobQueue: agents and the fenced job queue
//   matrix_events.h   MatrixEvents: change wake-ups per matrix
//   analysis_store.h  AnalysisStore: regressions and bisects, read and
//                     triaged through the scheduler
//   access_store.h    AccessStore: API tokens, agent-name ownership and
//                     lease holders, for the scheduler's authorization
//   analyzer_store.h  AnalyzerStore: what farm-analyzer reads and writes
//   retention_store.h RetentionStore: what a prune keeps, and the prune
// This header includes the first five, the ones the scheduler's services
// take; the last three are included where they are used (the scheduler's
// authorization and prune, the analyzer). Implementations: PostgreSQL in
// pg/ (pg_store.h bundles the catalogs, matrices, queue and analysis over
// one pool; pg_listener.h is the change events; pg_access_store.h,
// pg_analyzer_store.h, pg_retention_store.h) and in memory for tests in
// memory/ (memory_store.h bundles the same four and the change events;
// memory_access_store.h, memory_analyzer_store.h,
// memory_retention_store.h). The contract suite in contract/
// (repository_contract.h) holds both to the same behaviour.
//
// The data model is the API's protobuf messages (iommufarm.v1): they are the
// farm's vocabulary, and using them here avoids a parallel set of structs
// that would only be copied field by field. Nothing here knows about gRPC.
//
// Contract for every interface:
//  - Implementations are thread-safe; every method is one or a few database
//    transactions and the caller holds no authority: fencing (lease tokens,
//    attempts, sessions) is decided by the store (in SQL for PostgreSQL), so
//    several schedulers may share one database.
//  - Errors: kUnavailable when the database cannot be reached (retryable),
//    kNotFound for unknown ids, kFailedPrecondition for stale leases,
//    kInvalidArgument for bad input, kAlreadyExists for duplicates.
//  - Times are the database's clock, kept to microseconds.
#ifndef LIB_STORAGE_REPOSITORIES_H_
#define LIB_STORAGE_REPOSITORIES_H_

#include "lib/storage/analysis_store.h"  // IWYU pragma: export
#include "lib/storage/catalog_store.h"   // IWYU pragma: export
#include "lib/storage/job_queue.h"       // IWYU pragma: export
#include "lib/storage/matrix_events.h"   // IWYU pragma: export
#include "lib/storage/matrix_store.h"    // IWYU pragma: export

#endif  // LIB_STORAGE_REPOSITORIES_H_
