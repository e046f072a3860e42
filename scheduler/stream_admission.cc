#include "scheduler/stream_admission.h"

#include <utility>

#include "scheduler/grpc_services.h"

namespace farm::scheduler {

std::optional<grpc::Status> ScheduleStreamRead(WorkerPool* pool, bool first,
                                               std::function<void()> read) {
  if (first) {
    switch (pool->Admit(std::move(read))) {
      case WorkerPool::Admission::kQueued:
        return std::nullopt;
      case WorkerPool::Admission::kFull:
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "scheduler busy: too many expensive calls queued; retry");
      case WorkerPool::Admission::kStopped:
        break;
    }
  } else if (pool->Post(std::move(read))) {
    return std::nullopt;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
}

absl::Status StillAuthorized(Authorizer* authz, const grpc::ServerContextBase& ctx,
                             const char* rpc) {
  return authz->Authorize(ctx, rpc).status();
}

absl::StatusOr<Principal> AuthorizeStream(grpc::CallbackServerContext& ctx, Authorizer* authz,
                                          const char* rpc) {
  grpc::Status gone = CallerGone(ctx);
  if (!gone.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(gone.error_code()), gone.error_message());
  }
  return authz->Authorize(ctx, rpc);
}

}  // namespace farm::scheduler
