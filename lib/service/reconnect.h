// farm::service reconnect bounds: how long a farm client's channel waits
// between attempts to reach a scheduler that went away, shared by the side
// that sets it (lib/client's channel arguments) and the side that counts on
// it (the scheduler's reaper grace after a start or a pause).
//
// gRPC's defaults (1 s doubling by 1.6 up to 120 s) leave a channel that
// lost its scheduler for a few seconds idle for much longer than the outage;
// with these, a restarted scheduler hears from every agent within
// kReconnectBound of listening again.
//
// Thread-safety: constants only.
#ifndef LIB_SERVICE_RECONNECT_H_
#define LIB_SERVICE_RECONNECT_H_

#include "absl/time/time.h"

namespace farm::service {

inline constexpr absl::Duration kInitialReconnectBackoff = absl::Milliseconds(200);
inline constexpr absl::Duration kMaxReconnectBackoff = absl::Seconds(2);
// The longest pause between two connection attempts: kMaxReconnectBackoff
// plus gRPC's jitter of 20%.
inline constexpr absl::Duration kReconnectBound = absl::Milliseconds(2400);

}  // namespace farm::service

#endif  // LIB_SERVICE_RECONNECT_H_
