// runners: real fio / iozone runs for farm-agent, from workload params to
// samples. FioRunner and IozoneRunner validate the spec, build the argv,
// run the tool through RunProcess (no shell, own process group, timeout,
// cancellation) and parse its output with the shared parsers.
//
// Contract:
// - Construct from a ToolInfo (DetectFio / DetectIozone). Runners are
//   immutable and thread-safe; concurrent Run calls use distinct file names.
// - Run never starts a process for a refused spec: InvalidArgument (bad or
//   dangerous params) or PermissionDenied (target not allowed) come back
//   before fork. Report those as non-retryable failures.
// - Tool failures: DeadlineExceeded (timeout; the group was killed),
//   Cancelled (cancel hook fired), Internal (non-zero exit, fio job error,
//   unparsable output; the message carries the stderr tail).
// - Samples:
//   fio, per direction that did I/O (phase "read" / "write"): iops [iops],
//     bw_kib_s [KiB/s], clat_mean_ns / clat_p50_ns / clat_p99_ns /
//     clat_p999_ns [ns]. With numjobs > 1 fio's group_reporting aggregates.
//   iozone, per test (phase = short test name: write, rewrite, read,
//     reread, randread, randwrite): throughput_kb_s (children),
//     parent_throughput_kb_s, min_throughput_kb_s, max_throughput_kb_s,
//     avg_throughput_kb_s [kB/s], min_xfer_kb [kB].
#ifndef AGENT_RUNNERS_RUNNERS_H_
#define AGENT_RUNNERS_RUNNERS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/fio_spec.h"
#include "agent/runners/iozone_report.h"
#include "agent/runners/iozone_spec.h"
#include "agent/runners/params.h"
#include "agent/runners/targets.h"
#include "agent/runners/tools.h"

namespace farm::runners {

struct Sample {
  std::string metric;
  double value = 0;
  std::string unit;
  std::string phase;
};

struct RunOptions {
  absl::Duration timeout = absl::Minutes(10);
  std::function<bool()> cancelled;  // may be empty; polled ~every 20 ms
};

struct RunResult {
  std::vector<Sample> samples;
  std::string raw_output;  // the tool's stdout, verbatim
  std::string raw_format;  // "fio-json" or "iozone"
  std::string tool_version;
  std::vector<std::string> argv;  // what was exec'd
  std::string stderr_output;      // warnings, capped
  absl::Duration wall_time;
};

// Pure conversions, shared with the emulator's fio-json / iozone formats.
std::vector<Sample> FioSamples(const FioReport& report);
std::vector<Sample> IozoneSamples(const IozoneReport& report);

class FioRunner final {
 public:
  explicit FioRunner(ToolInfo fio) : fio_(std::move(fio)) {}

  absl::StatusOr<RunResult> Run(const FioSpec& spec, const AllowedTargets& allowed,
                                const RunOptions& options) const;
  // FioSpecFromParams + Run.
  absl::StatusOr<RunResult> RunParams(const Params& params, const AllowedTargets& allowed,
                                      const RunOptions& options) const;

 private:
  ToolInfo fio_;
};

class IozoneRunner final {
 public:
  explicit IozoneRunner(ToolInfo iozone) : iozone_(std::move(iozone)) {}

  absl::StatusOr<RunResult> Run(const IozoneSpec& spec, const AllowedTargets& allowed,
                                const RunOptions& options) const;
  absl::StatusOr<RunResult> RunParams(const Params& params, const AllowedTargets& allowed,
                                      const RunOptions& options) const;

 private:
  ToolInfo iozone_;
};

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_RUNNERS_H_
