// real_executors: farm-agent Executors for real fio and iozone runs, adapting
// FioRunner / IozoneRunner (plain C++) to the agent's Executor interface
// (agent/executors/executor.h, proto Jobs and Samples).
//
// Contract:
// - MakeRealExecutor detects the tool once (DetectFio / DetectIozone): the
//   agent advertises the capability with that version only when this
//   succeeds. NotFound: tool not installed. InvalidArgument: a bad
//   --allow-dir / --allow-device value.
// - Run(job, cancel) builds the spec from job.workload().params and runs it.
//   Refused specs and targets come back as InvalidArgument (a permanent
//   failure in the agent's error contract: retrying cannot help); timeouts
//   and tool failures keep retryable codes; a fired CancelToken gives
//   Cancelled and the tool's process group is killed.
// - Every run records the host's monitors around the tool (interrupts,
//   vmstat, debugfs IOMMU counters, perf where allowed) into
//   ExecutionResult::monitors; they never fail a run.
// - The executor is immutable after construction; Run is safe to call from
//   several worker threads at once (each run uses its own file names).
#ifndef AGENT_EXECUTORS_REAL_EXECUTORS_H_
#define AGENT_EXECUTORS_REAL_EXECUTORS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "agent/monitors/host_monitor.h"
#include "agent/runners/runners.h"

namespace farm::runners {

struct RealExecutorOptions {
  std::vector<std::string> allow_dirs;     // --allow-dir
  std::vector<std::string> allow_devices;  // --allow-device DEV[:ro|:rw]
  // Upper bound per run when the spec gives no runtime; with a runtime the
  // bound is runtime + ramp_time + `slack`.
  absl::Duration default_timeout = absl::Minutes(30);
  absl::Duration slack = absl::Minutes(5);
  std::string tool;  // executable override (tests); empty: "fio" / "iozone"
  // Each run records the host's monitors around the tool
  // (agent/monitors/host_monitor.h); `monitors.perf` false: no profile.
  bool record_monitors = true;
  monitors::HostMonitorOptions monitors;
};

// A tool's samples as the result rows every executor reports, appended to
// `out`: host runs and guest runs of one tool land under the same names.
void AppendSamples(const std::vector<Sample>& samples, std::vector<iommufarm::v1::Sample>& out);

// `capability` is "fio" or "iozone".
absl::StatusOr<std::unique_ptr<farm::agent::Executor>> MakeRealExecutor(
    const std::string& capability, const RealExecutorOptions& options);

}  // namespace farm::runners

#endif  // AGENT_EXECUTORS_REAL_EXECUTORS_H_
