#include "lib/client/retry.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace farm::client {

bool IsTransient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED;
}

bool IsServerFault(grpc::StatusCode code) {
  return code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN;
}

bool IsRetryable(grpc::StatusCode code) { return IsTransient(code) || IsServerFault(code); }

bool IsStaleLease(grpc::StatusCode code) { return code == grpc::StatusCode::FAILED_PRECONDITION; }

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                      ": ", status.error_message());
}

}  // namespace farm::client
