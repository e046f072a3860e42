// params: the agent's names for the strict parsers of a job's workload params
// (lib/toolspec/params.h, shared with the scheduler's submit-time check).
//
// Contract: pure functions, thread-safe (see lib/toolspec/params.h).
#ifndef AGENT_RUNNERS_PARAMS_H_
#define AGENT_RUNNERS_PARAMS_H_

#include "lib/toolspec/params.h"

namespace farm::runners {

using ::farm::toolspec::CheckCpuList;
using ::farm::toolspec::Params;
using ::farm::toolspec::ParseBool;
using ::farm::toolspec::ParseBytes;
using ::farm::toolspec::ParseInt;
using ::farm::toolspec::ParseList;
using ::farm::toolspec::ParseSeconds;

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_PARAMS_H_
