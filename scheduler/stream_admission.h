// stream_admission: the steps every pool-driven server stream of the
// scheduler's gRPC adapters (grpc_services.h, watch_reactor.h) shares --
// scheduling its next read on a WorkerPool, checking its caller at the
// first read and its principal again at later ones. The database work of
// an authorization (an API token lookup) runs on the pool, never on gRPC's
// threads.
//
// Thread-safety: stateless; the pool and the authorizer are thread-safe and
// not owned.
#ifndef SCHEDULER_STREAM_ADMISSION_H_
#define SCHEDULER_STREAM_ADMISSION_H_

#include <functional>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/authz.h"
#include "scheduler/worker_pool.h"

namespace farm::scheduler {

// Schedules a streaming reactor's next read on `pool`: the first read of a
// stream is admitted like any expensive call (shed when the pool is full),
// later ones continue a stream already admitted. Returns the status the
// stream finishes with when the read could not be scheduled.
std::optional<grpc::Status> ScheduleStreamRead(WorkerPool* pool, bool first,
                                               std::function<void()> read);

// Whether the principal of a stream may still keep it open: asked at each
// read a stream is handed, so a revoked token ends its streams.
absl::Status StillAuthorized(Authorizer* authz, const grpc::ServerContextBase& ctx,
                             const char* rpc);

// The first step of a stream, on `pool`: admitted like any call of its
// kind (shed when the pool is full), the caller checked (still there, and
// authorized: an API token is looked up in the database, which must not
// happen on gRPC's threads). The principal, or the status to finish with.
absl::StatusOr<Principal> AuthorizeStream(grpc::CallbackServerContext& ctx, Authorizer* authz,
                                          const char* rpc);

}  // namespace farm::scheduler

#endif  // SCHEDULER_STREAM_ADMISSION_H_
