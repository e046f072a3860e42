// farm::client retry policy: how every farm client (farm-agent, farmctl)
// waits between attempts of a failed call and which answers it retries, so
// that docs/architecture.md's "Error model" is written down once.
//
//   - Transient (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED):
//     the server was away, too slow or shedding load; the same call may
//     succeed later. Retried with Backoff: 100 ms doubling to 5 s.
//   - Server fault (INTERNAL, UNKNOWN): may pass, but a request the server
//     cannot handle fails the same way every time, so callers retry it at
//     most kMaxServerFaultRetries times.
//   - Stale lease (FAILED_PRECONDITION on a lease-fenced call): the lease is
//     no longer the caller's; the work is dropped, never retried.
//   - Anything else is permanent for that request.
// Farm calls are idempotent where they are retried (results per (job,
// attempt), submissions per idempotency key), so a retry after a call that
// did reach the server stores nothing twice.
//
// Thread-safety: the functions are pure; a Backoff is a plain value owned by
// one retry loop.
#ifndef LIB_CLIENT_RETRY_H_
#define LIB_CLIENT_RETRY_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>

#include "absl/time/time.h"

namespace farm::client {

inline constexpr int kMaxServerFaultRetries = 5;

bool IsTransient(grpc::StatusCode code);
bool IsServerFault(grpc::StatusCode code);
// Transient or a server fault: worth another attempt.
bool IsRetryable(grpc::StatusCode code);
bool IsStaleLease(grpc::StatusCode code);

// "UNAVAILABLE: message", for logs and failure reasons.
std::string Describe(const grpc::Status& status);

// The pause before each next attempt: kInitial, doubling up to kMax.
class Backoff {
 public:
  static constexpr absl::Duration kInitial = absl::Milliseconds(100);
  static constexpr absl::Duration kMax = absl::Seconds(5);

  // The pause to take now; the one after it is twice as long (at most kMax).
  absl::Duration Next() {
    const absl::Duration d = current_;
    current_ = std::min(current_ * 2, kMax);
    return d;
  }
  // What Next() will return, without advancing.
  absl::Duration Peek() const { return current_; }
  // After a success: the next failure starts from kInitial again.
  void Reset() { current_ = kInitial; }

 private:
  absl::Duration current_ = kInitial;
};

}  // namespace farm::client

#endif  // LIB_CLIENT_RETRY_H_
