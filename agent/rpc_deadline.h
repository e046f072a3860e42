// The deadline of every unary call the agent makes to the scheduler
// (Register, Heartbeat, LeaseJobs, ReportResults, ReleaseLeases, ...), in one
// place so a session, a worker, the report batcher and the kexec resume
// path cannot drift apart.
//
// Ten seconds: a loaded scheduler answers within a few database round trips;
// a call that hangs longer is retried (lib/client/retry.h) long before a
// lease it heartbeats could expire.
//
// Thread-safety: a constant.
#ifndef AGENT_RPC_DEADLINE_H_
#define AGENT_RPC_DEADLINE_H_

#include "absl/time/time.h"

namespace farm::agent {

inline constexpr absl::Duration kRpcTimeout = absl::Seconds(10);

}  // namespace farm::agent

#endif  // AGENT_RPC_DEADLINE_H_
