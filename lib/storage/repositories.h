// Repository interfaces over the farm's durable state, one header each
// (catalog_store.h, matrix_store.h, job_queue.h, matrix_events.h,
// analysis_store.h); this header includes them all. Implementations:
// PostgreSQL in pg/ (pg_store.h: pg_*_store.h, pg_job_queue.h,
// pg_listener.h) and in memory for tests in memory/ (memory_store.h). The
// contract test suite in contract/ (repository_contract.h) holds both to the
// same behaviour.
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
