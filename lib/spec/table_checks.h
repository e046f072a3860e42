// lib/spec/table_checks: a checked spec held against the tables its jobs
// will meet, so a job an agent would refuse is never queued: an emulator
// workload's params against the workload's parameter table (each value on
// its own, so the error names its field), `set:` keys against the model
// registry (what farm-emu --set checks), fio / iozone params by the agent's
// validator (lib/toolspec), a real job's vm platform against the emulated
// IOMMUs a guest boots under (proto/kernel_offers.h), `agent.` directives
// against the ones the agent knows (agent.hold_ms, at most kMaxAgentHoldMs).
//
// Contract: pure functions, thread-safe over distinct FieldErrors. Errors
// go in with AddIfNew: a field the earlier checks refused is not reported
// again, and the workloads are not held to an executor's tables when the
// executor itself was refused.
#ifndef LIB_SPEC_TABLE_CHECKS_H_
#define LIB_SPEC_TABLE_CHECKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/spec/field_errors.h"
#include "lib/spec/matrix_spec.h"

namespace farm::spec {

// The agent's one directive: sleep this many ms before the job runs (a test
// hook of the fault suites); an hour at most.
inline constexpr char kAgentHoldMsKey[] = "agent.hold_ms";
inline constexpr int64_t kMaxAgentHoldMs = 3600 * 1000;

void CheckAgainstTables(const MatrixSpec& spec, FieldErrors& e);

// One `key: value` of a `set:`, a spec's or a catalog's commit's: an agent
// directive in range, or a model key the registry takes
// (emu::CheckModelKey). The message names neither the field nor a place.
absl::Status CheckSetKey(absl::string_view key, absl::string_view value);

// True when a YAML list given for `key` of `workload` is the param's value
// (comma-joined), false when it is a sweep of values: the emulator's
// free-text params take lists (iozone-nfsrdma's `tests`, a CPU list), and so
// does a real iozone run's `tests` (one run's set of tests); every other
// param sweeps. Unknown workloads and params take lists (refused later).
bool ParamTakesAList(pb::Executor executor, const std::string& workload, const std::string& key);

// An emulator workload and its params as a whole (emu::ValidateWorkloadParams):
// what a commit catalog's `expect:` entries run (emu/model/catalog.h), for
// loaders that cannot reach the workload registry themselves.
absl::Status CheckEmulatorWorkloadParams(const std::string& workload,
                                         const std::map<std::string, std::string>& params);

// Emulator platforms this build does not know: warnings, not errors, since
// the agents' emulator may know more.
std::vector<std::string> PlatformWarnings(const MatrixSpec& spec);

}  // namespace farm::spec

#endif  // LIB_SPEC_TABLE_CHECKS_H_
